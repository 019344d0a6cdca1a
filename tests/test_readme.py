"""The README stands on its own: it points at nothing a user of the project does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Being written alongside this README: allowed to be missing until they land.
COMING = {"docs/architecture.md", "docs/deploy.md"}


def test_no_pointer_outside_the_repository() -> None:
    assert "../" not in README
    assert not re.search(r"\b(steering|source articles|the articles)\b", README, re.IGNORECASE)


def test_where_to_go_next_points_at_the_docs() -> None:
    section = README.split("## Where to go next", 1)[1]
    pointed = set(re.findall(r"`(docs/[\w./-]+\.md)`", section))
    assert {"docs/architecture.md", "docs/api.md", "docs/kubesim.md", "docs/benchmarks.md"} <= (
        pointed
    )
    missing = {path for path in pointed - COMING if not (ROOT / path).is_file()}
    assert missing == set()


def test_the_screenshots_it_shows_exist_light_and_dark() -> None:
    shown = re.findall(r"!\[[^\]]+\]\((docs/screenshots/[\w-]+\.png)\)", README)
    assert len(shown) >= 2
    assert any(path.endswith("-dark.png") for path in shown)
    assert any(not path.endswith("-dark.png") for path in shown)
    assert [path for path in shown if not (ROOT / path).is_file()] == []

"""The README stands on its own and stays short: what the project is, the two set-up commands,
a screenshot, where things are, the features and the first settings, in that order; the rest
lives in docs/, and it points at nothing a user of the project does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
MAX_CHARACTERS = 8_000
SECTIONS = ["Set-up", "What it looks like", "Where things are", "Features", "Configuration"]


def sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, re.MULTILINE)


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def code_block_commands(text: str) -> list[list[str]]:
    """Each fenced code block's commands: its non-empty lines without their comments."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [
        [command for line in block.splitlines() if (command := line.split("#", 1)[0].strip())]
        for block in blocks
    ]


def test_the_readers_find_what_they_should() -> None:
    text = "# T\n\n## A\n\n```sh\nmake x   # does x\n\nmake y\n```\n\n## B\n\n```\nls\n```\n"
    assert sections(text) == ["A", "B"]
    assert section(text, "B") == "\n```\nls\n```\n"
    assert code_block_commands(text) == [["make x", "make y"], ["ls"]]


def test_it_is_short() -> None:
    assert len(README) <= MAX_CHARACTERS


def test_its_sections_come_in_the_newcomer_order() -> None:
    assert sections(README) == SECTIONS


def test_the_two_set_up_commands_and_no_other() -> None:
    assert code_block_commands(section(README, "Set-up"))[0] == ["make demo", "make test"]
    blocks = code_block_commands(README)
    makes = [command for block in blocks for command in block if re.search(r"\bmake\b", command)]
    assert makes == ["make demo", "make test"]


def test_no_pointer_outside_the_repository() -> None:
    for text in (README, CONFIGURATION):
        assert "../" not in text
        assert not re.search(r"\b(steering|source articles|the articles)\b", text, re.IGNORECASE)


def test_it_links_the_docs_and_they_exist() -> None:
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", README))
    assert {
        "docs/architecture.md",
        "docs/api.md",
        "docs/kubesim.md",
        "docs/benchmarks.md",
        "docs/deploy.md",
        "docs/configuration.md",
    } <= linked
    assert sorted(path for path in linked if not (ROOT / path).is_file()) == []


def test_the_paths_in_where_things_are_exist() -> None:
    first_cells = [
        line.split("|")[1]
        for line in section(README, "Where things are").splitlines()
        if line.startswith("| `")
    ]
    assert 8 <= len(first_cells) <= 14  # about ten lines
    paths = [path for cell in first_cells for path in re.findall(r"`([^`]+)`", cell)]
    assert "pools/core/" in paths and "pools/tasks.py" in paths
    assert sorted(path for path in paths if not (ROOT / path).exists()) == []


def test_the_screenshots_it_shows_exist_light_and_dark() -> None:
    shown = re.findall(
        r"!\[[^\]]+\]\((docs/screenshots/[\w-]+\.png)\)", section(README, SECTIONS[1])
    )
    assert shown == ["docs/screenshots/overview.png"]
    linked = re.findall(r"\]\((docs/screenshots/[\w-]+\.png)\)", README)
    assert any(path.endswith("-dark.png") for path in linked)
    assert [path for path in linked if not (ROOT / path).is_file()] == []

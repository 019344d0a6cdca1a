"""The test layers (tests/layers.py): each test is marked with the layer of the folder it sits
in, and a test that uses more than its layer allows fails with the place it belongs.
The rules run here on small trees of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.layers import folder_layer

pytest_plugins = ["pytester"]

INI = """
[pytest]
addopts = --import-mode=importlib
markers =
    pure
    db
    servers
    browser
    django_db
"""
# A stand-in for tests/conftest.py's Redis: the rule goes by the fixture's name.
CONFTEST = """
import pytest

@pytest.fixture
def redis():
    return "a server"
"""


@pytest.mark.parametrize(
    ("path", "layer"),
    [
        ("tests/core/fit/test_fit.py", "pure"),
        ("tests/shape/test_readme.py", "pure"),
        ("tests/test_architecture.py", "pure"),
        ("tests/moves/test_workflow.py", "db"),
        ("tests/api/test_api_basics.py", "db"),
        ("tests/edges/kube/test_patcher.py", "servers"),
        ("tests/e2e/test_browser.py", "servers"),
        ("tests/controlplane/test_reset.py", "servers"),
        ("tests/kubesim/test_rbac.py", "servers"),
        ("tests/deploy/test_chart_render.py", "servers"),
    ],
)
def test_a_folder_gives_its_tests_their_layer(path: str, layer: str) -> None:
    assert folder_layer(Path(path)) == layer


@pytest.fixture
def tree(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An empty tree whose pytest loads the layers plugin alone (no pytest-django)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    return pytester


def run(tree: pytest.Pytester, files: dict[str, str], *args: str) -> pytest.RunResult:
    """pytest over `files` (paths under the tree's root)."""
    for path, source in files.items():
        target = tree.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
    return tree.runpytest_inprocess("-p", "tests.layers", "-p", "no:cacheprovider", *args)


def refusals(result: pytest.RunResult) -> list[str]:
    """The reasons the run gave, each once (the setup errors' own lines)."""
    lines = (line.strip() for line in result.stdout.lines)
    return sorted({line for line in lines if line.startswith("tests/") and ": a " in line})


def test_a_pure_test_that_uses_the_database_fails_saying_where_it_belongs(
    tree: pytest.Pytester,
) -> None:
    result = run(
        tree,
        {
            "tests/core/test_rows.py": (
                "import pytest\n\n"
                "@pytest.mark.django_db\n"
                "def test_marked():\n    pass\n\n"
                "def test_asks_for_db(db):\n    pass\n\n"
                "def test_pure():\n    pass\n"
            ),
        },
    )
    result.assert_outcomes(passed=1, errors=2)
    belongs = "uses the database; it belongs in tests/<concept>/, the database layer"
    assert refusals(result) == [
        f"tests/core/test_rows.py::test_asks_for_db: a pure test {belongs}",
        f"tests/core/test_rows.py::test_marked: a pure test {belongs}",
    ]


def test_a_pure_or_database_test_that_needs_a_server_fails_saying_where_it_belongs(
    tree: pytest.Pytester,
) -> None:
    result = run(
        tree,
        {
            "tests/core/test_cache.py": "def test_cache(redis):\n    pass\n",
            "tests/moves/test_cache.py": "def test_cache(redis):\n    pass\n",
            "tests/moves/test_started.py": (
                "from tests.servers import redis_server\n\ndef test_started():\n    pass\n"
            ),
            "tests/moves/test_clicked.py": (
                "import pytest\n\n@pytest.mark.browser\ndef test_clicked():\n    pass\n"
            ),
            "tests/edges/moves/test_cache.py": "def test_cache(redis):\n    pass\n",
        },
    )
    result.assert_outcomes(passed=1, errors=4)
    server = "it belongs in tests/edges/<concept>/ (or tests/e2e/ for a whole flow)"
    assert refusals(result) == [
        f"tests/core/test_cache.py::test_cache: a pure test needs a server (fixture `redis`); "
        f"{server}",
        "tests/moves/test_cache.py::test_cache: a db test needs a server (fixture `redis`); "
        f"{server}",
        "tests/moves/test_clicked.py::test_clicked: a db test drives a browser (marked "
        "`browser`); it belongs in tests/e2e/",
        "tests/moves/test_started.py::test_started: a db test starts a server (its module "
        f"calls `redis_server`); {server}",
    ]


def test_a_server_fixture_asked_for_at_run_time_fails_the_database_test(
    tree: pytest.Pytester,
) -> None:
    asks = "def test_asks(request):\n    assert request.getfixturevalue('redis')\n"
    result = run(tree, {"tests/moves/test_asks.py": asks, "tests/edges/test_asks.py": asks})
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tests/moves/test_asks.py::test_asks: a db test needs a server (fixture `redis`); "
            "it belongs in tests/edges/<concept>/*"
        ]
    )


def test_each_test_is_marked_with_its_layer_and_a_browser_mark_is_kept(
    tree: pytest.Pytester,
) -> None:
    files = {
        "tests/core/fit/test_a.py": "def test_pure():\n    pass\n",
        "tests/moves/test_b.py": "def test_db():\n    pass\n",
        "tests/edges/kube/test_c.py": "def test_servers(redis):\n    pass\n",
        "tests/e2e/test_d.py": (
            "import pytest\n\npytestmark = pytest.mark.browser\n\ndef test_browser():\n    pass\n"
        ),
    }
    for layer, only in [
        ("pure", "test_pure"),
        ("db", "test_db"),
        ("servers", "test_servers"),
        ("browser", "test_browser"),
    ]:
        result = run(tree, files, "--collect-only", "-q", "-m", layer)
        assert [line.rpartition("::")[2] for line in result.stdout.lines if "::" in line] == [
            only
        ], layer
    run(tree, files, "-m", "pure or db").assert_outcomes(passed=2)

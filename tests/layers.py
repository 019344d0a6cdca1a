"""The test layers, read from where a test sits, and the rules that keep each layer honest.

    tests/core/, tests/shape/,         pure     no database, no server
    tests/test_architecture*.py
    tests/<concept>/ (moves, api, ...) db       the database, in this process; no server
    tests/edges/, tests/e2e/,          servers  real servers: Redis, Prometheus, kubesim, the
    tests/controlplane/, tests/kubesim/,        real control plane, PostgreSQL, gunicorn and
    tests/deploy/                               Celery processes
    a test marked `browser`            browser  headless Chromium (tests/e2e/)

Each test gets its layer's marker, so `-m "pure or db"` runs what needs no server
(`make test-fast`). A pure test that uses the database, or a pure or database test that
needs a server, fails at setup, before any fixture runs, with the place it belongs.

A pytest plugin: tests/conftest.py loads it, and its own tests run it on a tree of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PURE, DB, SERVERS, BROWSER = "pure", "db", "servers", "browser"

# The folder under tests/ -> its layer; any other folder holds database tests, and the
# files at the top (the architecture's checks, beside the helper modules) are pure.
FOLDER_LAYERS = {
    "core": PURE,
    "shape": PURE,
    "edges": SERVERS,
    "e2e": SERVERS,
    "controlplane": SERVERS,
    "kubesim": SERVERS,
    "deploy": SERVERS,
}
DATABASE_FIXTURES = frozenset({"db", "transactional_db"})
# The shared fixtures that start (or reach) a server: tests/conftest.py, tests/kubesim/,
# tests/controlplane/, tests/oidc_provider/fixtures.py and pytest-django's live server.
SERVER_FIXTURES = frozenset(
    {
        "redis",
        "prometheus",
        "kubesim",
        "kubesim_shared",
        "tls_kubesim",
        "cluster",
        "real_cluster_session",
        "real",
        "live_server",
        "provider",
    }
)
# The helpers that start a server or a process when called; a module-scoped fixture of the
# test's own module often calls them directly, where no fixture name shows it.
SERVER_STARTERS = frozenset(
    {
        "tests.kubesim_process.kubesim_server",
        "tests.servers.redis_server",
        "tests.servers.prometheus_server",
        "tests.prometheus_secured.secured_prometheus",
        "tests.prometheus_secured.gateway",
        "tests.real_cluster.real_cluster",
        "tests.web_process.gunicorn",
        "tests.workers.celery_worker",
        "tests.postgres_rerun.rerun_on_postgresql",
        "tests.oidc_provider.process.oidc_provider",
    }
)
WHERE = {
    "database": "it belongs in tests/<concept>/, the database layer",
    "server": "it belongs in tests/edges/<concept>/ (or tests/e2e/ for a whole flow)",
    "browser": "it belongs in tests/e2e/",
}

LAYER = pytest.StashKey[str]()
REFUSED = pytest.StashKey[list[str]]()
RUNNING = pytest.StashKey[pytest.Item]()


def folder_layer(relative: Path) -> str:
    """The layer of a test file from its path under the root: tests/<folder>/..."""
    parts = relative.parts
    if parts[:1] != ("tests",):
        return DB
    return FOLDER_LAYERS.get(parts[1], DB) if len(parts) > 2 else PURE


def item_folder_layer(item: pytest.Item) -> str:
    try:
        relative = item.path.relative_to(item.config.rootpath)
    except ValueError:
        return DB
    return folder_layer(relative)


def _starters(item: pytest.Item) -> list[str]:
    """The server starters the test's module holds (imported by name, as they all are)."""
    module = getattr(item, "module", None)
    held = {
        f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        for value in (vars(module).values() if module is not None else ())
    }
    return sorted(name.rpartition(".")[2] for name in held & SERVER_STARTERS)


def layer_problems(item: pytest.Item, layer: str) -> list[str]:
    """What a test in a pure or database folder uses that its layer does not allow, each
    with the place the test belongs."""
    if layer not in (PURE, DB):
        return []
    names = set(getattr(item, "fixturenames", ()))
    problems = []
    if layer == PURE and (item.get_closest_marker("django_db") or names & DATABASE_FIXTURES):
        problems.append(f"uses the database; {WHERE['database']}")
    for fixture in sorted(names & SERVER_FIXTURES):
        problems.append(f"needs a server (fixture `{fixture}`); {WHERE['server']}")
    for starter in _starters(item):
        problems.append(f"starts a server (its module calls `{starter}`); {WHERE['server']}")
    if item.get_closest_marker(BROWSER) is not None:
        problems.append(f"drives a browser (marked `browser`); {WHERE['browser']}")
    return problems


def refusal(item: pytest.Item, layer: str, problem: str) -> str:
    return f"{item.nodeid}: a {layer} test {problem}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its layer before `-m` selects (hence first), and notes what a
    misplaced one breaks: it fails at setup, before any fixture runs, saying where it
    belongs (a setup error shows under pytest-xdist too, where a collection error would
    end the run without its message)."""
    for item in items:
        layer = item_folder_layer(item)
        item.stash[REFUSED] = [refusal(item, layer, p) for p in layer_problems(item, layer)]
        if item.get_closest_marker(BROWSER) is not None:
            layer = BROWSER  # marked explicitly, as pytestmark or per test
        else:
            item.add_marker(layer)
        item.stash[LAYER] = layer


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[RUNNING] = item
    refused = item.stash.get(REFUSED, [])
    if refused:
        pytest.fail("\n".join(refused), pytrace=False)


def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
) -> None:
    """A server fixture reached at run time (`request.getfixturevalue`), which collection
    cannot see, fails the pure or database test that asked for it."""
    item = request.config.stash.get(RUNNING, None)
    if fixturedef.argname not in SERVER_FIXTURES or item is None:
        return
    layer = item.stash.get(LAYER, SERVERS)
    if layer in (PURE, DB):
        problem = f"needs a server (fixture `{fixturedef.argname}`); {WHERE['server']}"
        pytest.fail(refusal(item, layer, problem), pytrace=False)

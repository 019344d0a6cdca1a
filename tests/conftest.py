from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from xdist.scheduler import LoadScopeScheduling

import tests.hypothesis_profile  # noqa: F401  (registers and loads the profile)
from pools.tokens import token_create
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.real_cluster import BACKENDS, RealCluster, real_cluster
from tests.servers import PrometheusServer, RedisServer, prometheus_server, redis_server

# Each test's layer (pure, db, servers, browser) from the folder it sits in: tests/layers.py.
pytest_plugins = ("tests.layers",)

# The rows the data migrations make: the role groups and the default pools with their
# colours. No test uses serialized_rollback: after a flush that re-created content types
# under new ids (any transactional test without it), restoring the serialized rows collides
# with them; this fixture brings the rows back instead.
DATA_MIGRATIONS = (
    ("pools.migrations.0001_roles", "create_roles"),
    ("pools.migrations.0003_default_pools", "create_pools"),
    ("pools.migrations.0009_pool_colour", "colour_existing_pools"),
)


def _uses_database(request: pytest.FixtureRequest) -> str | None:
    """The database fixture a test uses ("db" or "transactional_db"), or None."""
    marker = request.node.get_closest_marker("django_db")
    names = request.fixturenames
    if "transactional_db" in names or "live_server" in names:
        return "transactional_db"
    if marker is not None:
        transaction = marker.kwargs.get("transaction", marker.args[0] if marker.args else False)
        return "transactional_db" if transaction else "db"
    return "db" if "db" in names else None


@pytest.fixture(autouse=True)
def migration_data(request: pytest.FixtureRequest) -> None:
    """A transactional test ends by flushing every table, the data migrations' rows included.
    pytest-django runs those tests last, but under pytest-xdist a worker may be handed another
    module after one, and a transactional test follows another: every test that uses the
    database starts with those rows present."""
    fixture = _uses_database(request)
    if fixture is None:
        return
    request.getfixturevalue(fixture)
    Group, Pool = apps.get_model("auth", "Group"), apps.get_model("pools", "Pool")
    if Group.objects.count() and Pool.objects.exists():
        return
    for module, function in DATA_MIGRATIONS:
        getattr(importlib.import_module(module), function)(apps, None)


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    """Each test starts with an empty cache. The tests' cache is the process's memory, and
    one process runs many test files under pytest-xdist: a later test's Prometheus may get
    an earlier one's port, and the figures cached under that address would be the earlier
    cluster's."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def token_for(db) -> Callable[[str], str]:  # type: ignore[no-untyped-def]
    """An API token of a new user in the role (by its group's name): for the API's tests and
    every other test that calls the API."""

    def make(role: str, name: str | None = None) -> str:
        user = user_in(role, name or f"api-{role}")
        return token_create(user=user, name="test")[1]

    return make


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The tests' own redis-server, on the port the Celery app was configured with."""
    port = int(settings.REDIS_TEST_PORT)
    with redis_server(tmp_path_factory.mktemp("redis"), port) as server:
        yield server


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with prometheus_server(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture
def kubesim(tmp_path: Path) -> Iterator[Kubesim]:
    """A fresh simulated cluster (the demo scenario) over plain HTTP, for one test."""
    with kubesim_server(tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def kubesim_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    """One simulated cluster for a module whose tests only read or touch their own nodes."""
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as server:
        yield server


# Stops the real control plane before the end of the session (see pytest_runtest_teardown).
STOP_REAL_CLUSTER = pytest.StashKey[Callable[[], None]]()
# The xdist unit of every test on the real control plane: one process runs them all.
REAL_CLUSTER_GROUP = "real-control-plane"


@pytest.fixture(scope="session")
def real_cluster_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealCluster]:
    """The real control plane with kubesim as the demo scenario's kubelets: one per test
    process, put back to the scenario's state before each test that uses it."""
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(real_cluster(tmp_path_factory.mktemp("real-cluster")))
        request.config.stash[STOP_REAL_CLUSTER] = stack.close
        yield plane


def on_real_cluster(nodeid: str) -> bool:
    """Whether a test runs on the real control plane, from its id alone (the xdist
    controller that schedules the tests sees nothing else): a module of tests/controlplane/,
    or a test whose parameters name the `kubernetes` backend."""
    return nodeid.startswith("tests/controlplane/") or bool(REAL_BACKEND_ID.search(nodeid))


REAL_BACKEND_ID = re.compile(r"\[(?:[^\]]*-)?kubernetes(?:-[^\]]*)?\]$")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The scheduler below knows the real control plane's tests by their ids: a test marked
    `kubernetes` whose id does not say so would run in another process, which would start a
    second control plane. Refused here, naming the test."""
    wrong = [i.nodeid for i in items if on_real_cluster(i.nodeid) != _marked_real(i)]
    if wrong:
        raise pytest.UsageError(
            "the `kubernetes` mark and the test id disagree (a real-control-plane test's id "
            f"names the kubernetes backend or lies in tests/controlplane/): {wrong[:5]}"
        )


def _marked_real(item: pytest.Item) -> bool:
    return item.get_closest_marker("kubernetes") is not None


class FileOrRealClusterScheduling(LoadScopeScheduling):
    """`--dist loadfile`, except that every test on the real control plane forms one unit:
    one process starts the control plane (about 20 s and 650 MiB) instead of each, runs
    those tests one after another, and stops it after them. xdist hands out the largest
    units first, so this long one starts at once. (xdist's own loadgroup does not group
    under pytest 9: it renames `item._nodeid`, which pytest 9 no longer reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        return REAL_CLUSTER_GROUP if on_real_cluster(nodeid) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadfile":
        return None
    return FileOrRealClusterScheduling(config, log)


def pytest_configure_node(node: object) -> None:
    """Tells each worker that its real-control-plane tests come as one unit."""
    node.workerinput["real_cluster_grouped"] = True  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The process that ran the real control plane's unit stops it once the unit is done:
    idle, its five processes still take a good part of one of the machine's two cores from
    every test that follows. Only where the unit runs without a break (make test)."""
    grouped = getattr(item.config, "workerinput", {}).get("real_cluster_grouped", False)
    if not grouped or nextitem is None:
        return
    if on_real_cluster(item.nodeid) and not on_real_cluster(nextitem.nodeid):
        stop = item.config.stash.get(STOP_REAL_CLUSTER, None)
        if stop is not None:
            stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `both_backends` that uses the cluster runs on each backend in turn."""
    chosen = any(
        "backend" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")
    )  # a test that names its backend itself (one only the real control plane can run)
    if (
        "backend" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("both_backends")
        and not chosen
    ):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "kubesim"))


@pytest.fixture
def cluster(request: pytest.FixtureRequest, settings, backend: str) -> Kubesim | RealCluster:  # type: ignore[no-untyped-def]
    """The portal pointed at the demo scenario, with short backoffs: on kubesim's own API
    server (fresh for the test), or for a test marked `both_backends` on the real control
    plane too (put back to the scenario's state first). A test that needs what only kubesim
    can do (an injected API fault) says so with `@pytest.mark.kubesim_only("why")`."""
    if backend == "kubesim":
        found: Kubesim | RealCluster = request.getfixturevalue("kubesim")
    else:
        marker = request.node.get_closest_marker("kubesim_only")
        if marker is not None:
            pytest.skip(f"kubesim only: {marker.args[0]}")
        found = request.getfixturevalue("real_cluster_session")
        try:
            found.reset()
        except RuntimeError as error:  # seen twice in full runs, cause not found yet
            pytest.skip(f"the real cluster could not be put back to the scenario: {error}")
    settings.KUBECONFIG = str(found.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.PATCH_BACKOFF_SECONDS = 0.01
    return found


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    """How many tests ran on kubesim only, and why: the count the real cluster leaves out."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons = [
        str(report.longrepr[2]) for report in skipped if "kubesim only:" in str(report.longrepr)
    ]
    if reasons:
        terminalreporter.write_line(
            f"kubesim-only tests (not run on the real control plane): {len(reasons)}"
        )

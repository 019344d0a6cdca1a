"""--churn: pods replaced on their nodes, two watch events each, the cluster's size kept."""

from __future__ import annotations

import threading

from kubesim.churn import Churn
from kubesim.cluster import Cluster
from kubesim.scenario import load_scenario
from kubesim.seeding import seed


def test_each_step_replaces_a_workload_pod_on_its_node() -> None:
    cluster = Cluster()
    seed(cluster, load_scenario("demo"))
    store = cluster.store
    before = {k: e.obj["spec"].get("nodeName") for k, e in store.objects["pods"].items()}
    allocated = dict(cluster.allocated)
    rv = store.rv
    churn = Churn(cluster, rate=1000)
    stop = threading.Event()
    stop.set()  # run() lists the workload pods and stops before its first step
    churn.run(stop)
    for _ in range(10):
        assert churn.step()
    events = [e for e in store.events_since(rv) if e.resource == "pods"]
    assert [e.type for e in events] == ["DELETED", "ADDED"] * 10
    after = {k: e.obj["spec"].get("nodeName") for k, e in store.objects["pods"].items()}
    assert len(after) == len(before)
    assert dict(cluster.allocated) == allocated
    for deleted, added in zip(events[::2], events[1::2], strict=True):
        old, new = deleted.new.obj, added.new.obj
        assert not old["metadata"]["namespace"].startswith("gpu-operator")
        assert new["spec"]["nodeName"] == old["spec"]["nodeName"]
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert new["status"]["phase"] == "Running"
        assert new["metadata"]["name"].split("--")[0] == old["metadata"]["name"].split("--")[0]

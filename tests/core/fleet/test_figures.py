"""Pool figures (pools/core/figures.py): every GPU is allocated, unallocated or unschedulable,
and the free figures speak of the same GPUs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pools.core.figures import NodeMetrics, NodeRow, pool_figures


def row(name: str, gpus: int, allocated: int, *, ready: bool = True, cordoned: bool = False):  # type: ignore[no-untyped-def]
    return NodeRow(name, "p", "A100", gpus, allocated, ready, cordoned, False)


def test_gpus_on_notready_or_cordoned_nodes_are_counted_apart() -> None:
    f = pool_figures(
        [
            row("ok", 8, 3),
            row("down", 8, 0, ready=False),
            row("cordoned", 8, 6, cordoned=True),
        ],
        metrics_available=False,
    )
    assert (f.gpus, f.allocated, f.unallocated) == (24, 9, 5)
    assert (f.unschedulable_gpus, f.unschedulable_nodes) == (10, 2)
    # "Largest free block" leaves unschedulable nodes out, and so does "unallocated".
    assert f.largest_free_block == 5 and f.free_whole_nodes == 0


def test_held_but_idle_is_apart_from_unallocated() -> None:
    metrics = NodeMetrics(gpus_reporting=8, util=0.0, idle_held_gpus=3)
    f = pool_figures(
        [NodeRow("n", "p", "A100", 8, 3, True, False, False, metrics)], metrics_available=True
    )
    assert (f.unallocated, f.idle_held_gpus) == (5, 3)


nodes = st.lists(
    st.tuples(st.integers(0, 8), st.integers(0, 8), st.booleans(), st.booleans()), max_size=20
)


@given(nodes)
def test_every_gpu_is_counted_once_and_the_free_figures_agree(
    specs: list[tuple[int, int, bool, bool]],
) -> None:
    rows = [
        row(f"n{i}", gpus, min(used, gpus), ready=ready, cordoned=cordoned)
        for i, (gpus, used, ready, cordoned) in enumerate(specs)
    ]
    f = pool_figures(rows, metrics_available=False)
    assert f.gpus == f.allocated + f.unallocated + f.unschedulable_gpus
    assert f.largest_free_block <= f.unallocated
    assert f.unschedulable_nodes == sum(1 for r in rows if not r.schedulable)


def test_labels_read_as_words_and_counts_agree_in_number() -> None:
    from pools.core.wording import counted, drift_phrases, human_label

    assert human_label("partially_failed") == "Partially failed"
    assert human_label("loan_return") == "Loan return"
    assert human_label("something_new") == "Something new"
    assert (counted(1, "node"), counted(0, "node"), counted(2, "GPU")) == (
        "1 node",
        "0 nodes",
        "2 GPUs",
    )
    assert drift_phrases(
        {"labels_added": {"a": "1"}, "taints_added": ["t=1:NoSchedule"], "labels_removed": []}
    ) == ["missing label a=1", "missing taint t=1:NoSchedule"]

"""Workloads for kubesim's scenarios, and pools whose right answers are known.

Import this module in tests that need a cluster with history (it imports nothing of the
portal's). Its interface:

- `WORKLOADS: dict[str, tuple[JobClass, ...]]` — the job classes of each named workload:
  `"demo"` (for the `demo` scenario) and `"insights"` (for the `insights` scenario).
  `kubesim serve --scenario NAME --workload NAME --history-days N` runs one.
- `INSIGHTS_ANSWERS: dict[str, PoolAnswer]` — for each pool (`gpu-pool` label) of the
  `insights` scenario, what any correct analysis of its history must find: `idle` (below
  10 % GPU utilisation, whole nodes idle most of the time), `queues` (GPU pods wait to be
  scheduled, because the pool is full while others have room: its node selection is
  restricted), `dominant_failure` (the failure category most of its failed pods fall into:
  `"oom"`, `"gpu_fault"`, or None), `failure_outcomes` (the workload outcomes that occur
  there, `kubesim.workload.OUTCOMES` names), `gpu_models` and `drivers` (as the exporter's
  `modelName` and `DCGM_FI_DRIVER_VERSION` labels and GPU feature discovery's node labels
  give them). Idle means GPUs held less than 10 % of the time; every other pool's are held
  more than 20 % of the time. Queues means the p90 of creation-to-scheduled exceeds 10
  minutes; every other pool's p90 is under a minute. Holds for `INSIGHTS_SEED` over at
  least `INSIGHTS_MIN_DAYS` days of history.
- `FAILURE_CATEGORY: dict[str, str]` — how each outcome is classified (`oom`, `gpu_fault`,
  `image`, `disruption`), the way the insights name them.
- `DEMO_ANSWERS` — the same for the demo scenario's notable pods: the `intruder` class runs
  on the tainted inference pool without tolerating its taint, the scenario's pending pods.

- `serve_arguments(workload, days=..., retention_days=..., openmetrics=None, end=None)` —
  the `kubesim serve` options that run a workload with that much history (ending at `end`,
  the clock stopped there, when given), for
  `tests.kubesim_process.kubesim_server(workdir, scenario=NAME, extra=...)`. Over HTTP,
  `GET /kubesim/workload/history` gives each pod's record (created, scheduled, started,
  finished, node, GPU slots, outcome, reasons) and `POST /kubesim/clock {"advance": s}`
  runs the workload on.

Every pool here is its own `gpu-pool`; the classes of one pool never run on another.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesim.workload import (
    CONFIG_ERROR,
    CUDA_OOM,
    EVICTED,
    GPU_FAULT,
    IMAGE_PULL,
    OOM_KILLED,
    PREEMPTED,
    JobClass,
)

HOUR = 3600.0

FAILURE_CATEGORY = {
    OOM_KILLED: "oom",
    CUDA_OOM: "oom",
    GPU_FAULT: "gpu_fault",
    IMAGE_PULL: "image",
    CONFIG_ERROR: "image",
    EVICTED: "disruption",
    PREEMPTED: "disruption",
}


@dataclass(frozen=True)
class PoolAnswer:
    pool: str
    nodes: int
    gpus: int
    idle: bool
    queues: bool
    dominant_failure: str | None
    failure_outcomes: frozenset[str]
    gpu_models: frozenset[str]
    drivers: frozenset[str]


A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100-80GB-HBM3"
L40S = "NVIDIA L40S"
DRIVER = "550.54.15"
OLD_DRIVER = "535.161.08"

INSIGHTS_SEED = 16
INSIGHTS_MIN_DAYS = 1

INSIGHTS: tuple[JobClass, ...] = (
    # Now and then a short one-GPU probe: the pool's 24 GPUs sit idle.
    JobClass(
        name="idle-probe",
        namespace="team-idle",
        team="platform",
        workload_type="inference",
        gpus=1,
        cpu="4",
        memory="16Gi",
        run_median=600,
        run_p90=900,
        arrivals_per_hour=0.2,
        pool="idle-pool",
        load="inference",
    ),
    # Four-GPU jobs asking for more than two nodes hold: a queue that never drains.
    JobClass(
        name="queue-train",
        namespace="team-queue",
        team="vision",
        workload_type="training",
        gpus=4,
        cpu="32",
        memory="256Gi",
        run_median=1.0 * HOUR,
        run_p90=1.5 * HOUR,
        arrivals_per_hour=4.5,
        pool="queue-pool",
        tolerate="workload-training",
        load="training",
    ),
    JobClass(
        name="oom-train",
        namespace="team-oom",
        team="nlp",
        workload_type="training",
        gpus=2,
        cpu="8",
        memory="64Gi",
        run_median=1.0 * HOUR,
        run_p90=1.5 * HOUR,
        # Half of its 16 GPUs held on average: at 5 an hour (10 of 16), bursts filled the
        # pool in some two-day windows and a tenth of its jobs waited minutes, which made
        # the pool that must not queue queue, depending on the hour the history ended at.
        arrivals_per_hour=4.0,
        pool="oom-pool",
        load="training",
        failures={OOM_KILLED: 0.3, CUDA_OOM: 0.2},
    ),
    JobClass(
        name="mixed-serve",
        namespace="team-mixed",
        team="serving",
        workload_type="inference",
        gpus=2,
        cpu="8",
        memory="32Gi",
        run_median=2.0 * HOUR,
        run_p90=3.0 * HOUR,
        arrivals_per_hour=3.0,
        pool="mixed-pool",
        load="inference",
    ),
    JobClass(
        name="fault-train",
        namespace="team-fault",
        team="speech",
        workload_type="training",
        gpus=2,
        cpu="16",
        memory="128Gi",
        run_median=1.0 * HOUR,
        run_p90=2.0 * HOUR,
        arrivals_per_hour=3.5,
        pool="fault-pool",
        load="training",
        failures={GPU_FAULT: 0.35, OOM_KILLED: 0.05},
    ),
    JobClass(
        name="misc-batch",
        namespace="team-misc",
        team="research",
        workload_type="mixed",
        gpus=1,
        cpu="4",
        memory="32Gi",
        run_median=0.5 * HOUR,
        run_p90=1.0 * HOUR,
        arrivals_per_hour=6.0,
        pool="misc-pool",
        load="inference",
        failures={IMAGE_PULL: 0.1, CONFIG_ERROR: 0.1, EVICTED: 0.1, PREEMPTED: 0.1},
        deadline=1800,
    ),
)

INSIGHTS_ANSWERS: dict[str, PoolAnswer] = {
    "idle-pool": PoolAnswer(
        "idle-pool", 3, 24, True, False, None, frozenset(), frozenset({A100}), frozenset({DRIVER})
    ),
    "queue-pool": PoolAnswer(
        "queue-pool", 2, 16, False, True, None, frozenset(), frozenset({A100}), frozenset({DRIVER})
    ),
    "oom-pool": PoolAnswer(
        "oom-pool",
        2,
        16,
        False,
        False,
        "oom",
        frozenset({OOM_KILLED, CUDA_OOM}),
        frozenset({A100}),
        frozenset({DRIVER}),
    ),
    "mixed-pool": PoolAnswer(
        "mixed-pool",
        4,
        32,
        False,
        False,
        None,
        frozenset(),
        frozenset({A100, H100}),
        frozenset({DRIVER, OLD_DRIVER}),
    ),
    "fault-pool": PoolAnswer(
        "fault-pool",
        2,
        16,
        False,
        False,
        "gpu_fault",
        frozenset({GPU_FAULT, OOM_KILLED}),
        frozenset({A100}),
        frozenset({DRIVER}),
    ),
    "misc-pool": PoolAnswer(
        "misc-pool",
        2,
        8,
        False,
        False,
        None,
        frozenset({IMAGE_PULL, CONFIG_ERROR, EVICTED, PREEMPTED}),
        frozenset({L40S}),
        frozenset({DRIVER}),
    ),
}

DEMO: tuple[JobClass, ...] = (
    # The training pool is full of long pretraining: new training jobs queue there (their
    # node selection allows that pool only) while the shared reserve has room.
    JobClass(
        name="train-shard",
        namespace="ml-training",
        team="llm",
        workload_type="training",
        gpus=2,
        cpu="32",
        memory="256Gi",
        run_median=3 * HOUR,
        run_p90=6 * HOUR,
        arrivals_per_hour=0.05,
        pool="training",
        tolerate="workload-training",
        load="training",
    ),
    # Fine-tuning overflows onto the shared reserve, and runs out of memory now and then.
    JobClass(
        name="finetune",
        namespace="ml-training",
        team="nlp",
        workload_type="training",
        gpus=1,
        cpu="16",
        memory="128Gi",
        run_median=2 * HOUR,
        run_p90=5 * HOUR,
        arrivals_per_hour=0.5,
        pool="mixed",
        load="training",
        daily_cycle=0.5,
        failures={OOM_KILLED: 0.1, CUDA_OOM: 0.08, PREEMPTED: 0.02},
    ),
    JobClass(
        name="canary",
        namespace="ml-serving",
        team="serving",
        workload_type="inference",
        gpus=1,
        cpu="8",
        memory="32Gi",
        run_median=4 * HOUR,
        run_p90=8 * HOUR,
        arrivals_per_hour=0.5,
        pool="inference",
        tolerate="workload-inference",
        load="inference",
        failures={GPU_FAULT: 0.05, IMAGE_PULL: 0.04},
    ),
    # Spiky evaluation batches in working hours on the shared reserve.
    JobClass(
        name="batch-eval",
        namespace="research",
        team="research",
        workload_type="mixed",
        gpus=1,
        cpu="8",
        memory="64Gi",
        run_median=0.75 * HOUR,
        run_p90=2 * HOUR,
        arrivals_per_hour=2.0,
        gang=2,
        pool="mixed",
        load="training",
        daily_cycle=0.9,
        failures={IMAGE_PULL: 0.03, CONFIG_ERROR: 0.02, EVICTED: 0.02, PREEMPTED: 0.02},
    ),
    # Someone's debugging pod bound by name onto the inference pool, tolerating nothing.
    JobClass(
        name="intruder",
        namespace="research",
        team="research",
        workload_type="mixed",
        gpus=1,
        cpu="4",
        memory="16Gi",
        run_median=8 * HOUR,
        run_p90=16 * HOUR,
        arrivals_per_hour=0.15,
        intrude_on="inference",
        load="idle",
    ),
)


@dataclass(frozen=True)
class DemoAnswers:
    intruder_class: str
    intruded_pool: str
    queueing_pool: str
    pending_pods: frozenset[str]  # the scenario's own pods that never fit


DEMO_ANSWERS = DemoAnswers(
    intruder_class="intruder",
    intruded_pool="inference",
    queueing_pool="training",
    pending_pods=frozenset({"eval-job-2", "big-train"}),
)

WORKLOADS: dict[str, tuple[JobClass, ...]] = {"demo": DEMO, "insights": INSIGHTS}


def serve_arguments(
    workload: str,
    *,
    days: float = 2,
    retention_days: float = 7,
    seed: int = INSIGHTS_SEED,
    openmetrics: str | None = None,
    end: str | None = None,
) -> list[str]:
    """`kubesim serve` options: run `workload` with `days` of history already replayed.
    With `end` (RFC 3339, as 2026-06-01T00:00:00Z) the replay ends there and the clock
    stays there: a UTC midnight gives exactly `days` whole days of history, the same jobs
    whatever the hour the server starts, and nothing happens while a test reads them."""
    if workload not in WORKLOADS:
        raise ValueError(f"no workload {workload!r} (known: {', '.join(sorted(WORKLOADS))})")
    options = ["--workload", workload, "--workload-seed", str(seed)]
    options += ["--history-days", str(days), "--retention-days", str(retention_days)]
    if openmetrics is not None:
        options += ["--history-openmetrics", openmetrics]
    if end is not None:
        options += ["--clock-start", end, "--clock-scale", "0"]
    return options

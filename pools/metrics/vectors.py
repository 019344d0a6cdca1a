"""Prometheus' instant-vector answers decoded straight into (node, value) pairs (pure).

The node figures ask for one sample a node per figure: at 15,000 nodes that is over
100,000 samples a refresh. Decoding them as generic JSON built a dictionary for every
sample and every sample's labels, then a tuple to hold both, and that was most of a cold
page's CPU. msgspec decodes the answer against its shape and keeps only the one label asked
for, at about a third of the cost; the other labels are skipped unread.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

# (value of the node label, or None when the sample has none; the sample's value)
NodeValue = tuple[str | None, float]


@functools.cache
def _decoder(node_label: str) -> msgspec.json.Decoder[Any]:
    node = [("node", str | None, None)]
    metric = msgspec.defstruct("Metric", node, rename={"node": node_label})
    sample = msgspec.defstruct("Sample", [("metric", metric), ("value", tuple[float, str])])
    data = msgspec.defstruct("Data", [("resultType", str), ("result", list[sample])])
    answer = msgspec.defstruct(
        "Answer", [("status", str), ("data", data | None, None), ("error", str, "")]
    )
    return msgspec.json.Decoder(answer)


def node_vector_values(body: bytes, node_label: str) -> list[NodeValue]:
    """Each sample of an instant-vector answer as (its `node_label`, its value). Raises
    ValueError, saying what was wrong, for an answer that is not a successful vector."""
    try:
        answer = _decoder(node_label).decode(body)
    except msgspec.MsgspecError as exc:
        raise ValueError(f"Prometheus' answer is not an instant vector: {exc}") from exc
    if answer.status != "success" or answer.data is None:
        raise ValueError(f"Prometheus answered {answer.status}: {answer.error or 'no data'}")
    if answer.data.resultType != "vector":
        raise ValueError(f"Prometheus answered a {answer.data.resultType}, not an instant vector")
    # float() reads Prometheus' "NaN", "+Inf" and "-Inf" as well as numbers.
    return [(sample.metric.node, float(sample.value[1])) for sample in answer.data.result]

"""Prometheus' instant-vector answers read as (node, value) pairs: the node label only,
every value Prometheus can send, and a clear error for anything else."""

from __future__ import annotations

import json
import math

import pytest

from pools.metrics.vectors import node_vector_values


def answer(result: list[dict[str, object]], result_type: str = "vector") -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": result_type, "result": result}}
    ).encode()


def test_each_sample_is_its_node_and_value_whatever_other_labels_it_has() -> None:
    body = answer(
        [
            {"metric": {"Hostname": "gpu-a", "gpu": "0", "__name__": "x"}, "value": [1.5, "42"]},
            {"metric": {"job": "dcgm", "Hostname": "gpu-b"}, "value": [1.5, "0.25"]},
        ]
    )
    assert node_vector_values(body, "Hostname") == [("gpu-a", 42.0), ("gpu-b", 0.25)]


def test_the_node_label_is_the_one_asked_for() -> None:
    body = answer([{"metric": {"Hostname": "pod-x", "node": "gpu-a"}, "value": [1, "3"]}])
    assert node_vector_values(body, "node") == [("gpu-a", 3.0)]


def test_a_sample_without_the_node_label_has_none() -> None:
    # The recording rules' marker and the sparse counts' totals carry no node.
    body = answer([{"metric": {}, "value": [1, "1"]}, {"metric": {"x": "y"}, "value": [1, "7"]}])
    assert node_vector_values(body, "Hostname") == [(None, 1.0), (None, 7.0)]


def test_prometheus_special_values_are_read() -> None:
    body = answer(
        [
            {"metric": {"Hostname": "a"}, "value": [1, "NaN"]},
            {"metric": {"Hostname": "b"}, "value": [1, "+Inf"]},
            {"metric": {"Hostname": "c"}, "value": [1, "-Inf"]},
            {"metric": {"Hostname": "d"}, "value": [1, "1e3"]},
        ]
    )
    values = dict(node_vector_values(body, "Hostname"))
    assert math.isnan(values["a"])
    assert values["b"] == math.inf and values["c"] == -math.inf and values["d"] == 1000.0


def test_an_empty_vector_is_no_pairs() -> None:
    assert node_vector_values(answer([]), "Hostname") == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}',
            "Prometheus answered error: parse error at char 3",
        ),
        (b"<html>proxy error</html>", "is not an instant vector: JSON is malformed"),
        (
            answer([{"metric": {}, "values": [[1, "2"]]}], "matrix"),
            "is not an instant vector: Object missing required field `value`",
        ),
        (answer([], "scalar"), "Prometheus answered a scalar, not an instant vector"),
        (
            answer([{"metric": {"Hostname": 3}, "value": [1, "2"]}]),
            "Expected `str | null`, got `int`",
        ),
    ],
)
def test_anything_but_a_vector_is_a_value_error_saying_what(body: bytes, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        node_vector_values(body, "Hostname")
    assert message in str(raised.value)

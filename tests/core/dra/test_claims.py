"""Claims read as the API server validates them: every refusal names its field."""

from __future__ import annotations

from pools.core.dra.claims import read_claim_spec
from pools.core.fit.fields import FieldReader


def problems(raw):  # type: ignore[no-untyped-def]
    reader = FieldReader()
    read_claim_spec(reader, raw, "spec")
    return [(p.path, p.message) for p in reader.problems]


def test_a_request_needs_exactly_or_first_available():
    assert problems({"devices": {"requests": [{"name": "gpu"}]}}) == [
        (
            "spec.devices.requests[0]",
            "Invalid value: exactly one of exactly or firstAvailable is required",
        )
    ]


def test_a_bad_mode_a_count_with_all_and_a_bad_selector_are_named():
    raw = {
        "devices": {
            "requests": [
                {"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
                {
                    "name": "b",
                    "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2},
                },
                {
                    "name": "c",
                    "exactly": {
                        "deviceClassName": "c",
                        "selectors": [{"cel": {"expression": "device.driver =="}}],
                    },
                },
            ]
        }
    }
    found = dict(problems(raw))
    assert 'Unsupported value: "Some"' in found["spec.devices.requests[0].exactly.allocationMode"]
    assert "must not be set" in found["spec.devices.requests[1].exactly.count"]
    assert (
        "CEL compile error" in found["spec.devices.requests[2].exactly.selectors[0].cel.expression"]
    )


def test_a_constraint_names_known_requests_and_a_qualified_attribute():
    raw = {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
            "constraints": [{"requests": ["nic"], "matchAttribute": "productName"}],
        }
    }
    found = dict(problems(raw))
    assert "must be the name of a request" in found["spec.devices.constraints[0].requests[0]"]
    assert "fully qualified" in found["spec.devices.constraints[0].matchAttribute"]

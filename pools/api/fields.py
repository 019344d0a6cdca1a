"""Input fields of the API whose rule is stricter than DRF's default.

DRF's CharField turns any scalar into its text: a pool named 5, a reason of 5, a label value
of true would all be taken. A client that sends a number where the API documents a string
has a bug worth hearing about, so every string the API takes goes through StrictCharField
(`tests/api/test_strings.py` checks that no writable CharField is left). The same holds the
other way: DRF's IntegerField takes "600" and 600.0, so every integer the API takes goes
through StrictIntegerField (`tests/api/test_numbers.py`).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from pools.models import Pool

# What a JSON value is called, by the Python type json.loads makes of it.
JSON_KINDS = {
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "a list",
    dict: "an object",
}


class StrictCharField(serializers.CharField):
    default_error_messages = {"not_a_string": "Must be a string, not {kind}."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string", kind=JSON_KINDS.get(type(data), type(data).__name__))
        return str(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"not_an_integer": "Must be an integer, not {kind}."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("not_an_integer", kind=_integer_kind(data))
        return int(super().to_internal_value(data))


def _integer_kind(data: Any) -> str:
    if isinstance(data, str):
        return f"a string ({data[:20]!r}): send the number without quotes"
    if isinstance(data, float):
        return f"a number with a fraction part ({data!r}): send it without a decimal point"
    return JSON_KINDS.get(type(data), type(data).__name__)


class ActivePoolField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """An active pool, by name, of the request's cluster. The pools are read when the field
    is, not when the serializer class is made: a queryset built at import would keep the
    cluster of that moment (pools.models.ClusterManager)."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("error_messages", {"does_not_exist": "No active pool is named {value}."})
        super().__init__(slug_field="name", queryset=Pool.objects.none(), **options)

    def get_queryset(self) -> Any:
        return Pool.objects.active()

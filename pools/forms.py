from __future__ import annotations

from typing import Any

from django import forms

from pools.models import Pool


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if "=" not in line:
            raise forms.ValidationError(f"Line {number}: write labels as key=value, got {line!r}.")
        key, value = (part.strip() for part in line.split("=", 1))
        if key in labels:
            raise forms.ValidationError(f"Line {number}: label {key!r} appears twice.")
        labels[key] = value
    return labels


class PoolForm(forms.ModelForm):  # type: ignore[type-arg]
    # Text areas in place of the JSON fields: one key=value (or model) a line.
    labels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One key=value a line, besides the pool key (set from the name).",
    )
    accepted_gpu_models = forms.CharField(
        label="Accepted GPU models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="nvidia.com/gpu.product values, one a line; empty accepts any model.",
    )

    class Meta:
        model = Pool
        fields = [
            "name",
            "display_name",
            "description",
            "labels",
            "taint_key",
            "taint_value",
            "taint_effect",
            "min_nodes",
            "accepted_gpu_models",
            "approvals_required",
            "requires_healthy_nodes",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True  # nodes carry it: renaming would orphan them
        self.initial["labels"] = "\n".join(
            f"{k}={v}" for k, v in sorted((self.instance.labels or {}).items())
        )
        self.initial["accepted_gpu_models"] = "\n".join(self.instance.accepted_gpu_models or [])

    def clean_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data.get("labels") or "")

    def clean_accepted_gpu_models(self) -> list[str]:
        text = self.cleaned_data.get("accepted_gpu_models") or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

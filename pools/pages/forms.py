from __future__ import annotations

from typing import Any

from django import forms

from pools.core.palette import colour_pick
from pools.models import FREE_TEXT_MAX_LENGTH, Pool


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

    utilisation_target = forms.IntegerField(
        label="Utilisation target (%)",
        min_value=1,
        max_value=100,
        required=False,
        help_text="The average GPU utilisation the pool should reach over weeks (empty: "
        f"{Pool._meta.get_field('utilisation_target').default} %).",
    )

    class Meta:
        model = Pool
        fields = Pool.EDITABLE_FIELDS
        widgets = {"colour": forms.TextInput(attrs={"type": "color"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True  # nodes carry it: renaming would orphan them
        self.initial["labels"] = "\n".join(
            f"{k}={v}" for k, v in sorted((self.instance.labels or {}).items())
        )
        self.initial["accepted_gpu_models"] = "\n".join(self.instance.accepted_gpu_models or [])
        if not self.instance.colour:  # a new pool: the first colour no other pool uses
            self.initial["colour"] = colour_pick(Pool.objects.values_list("colour", flat=True))

    def clean_utilisation_target(self) -> int:
        value = self.cleaned_data.get("utilisation_target")
        if value is None:
            return int(Pool._meta.get_field("utilisation_target").default)
        return int(value)

    def clean_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data.get("labels") or "")

    def clean_accepted_gpu_models(self) -> list[str]:
        text = self.cleaned_data.get("accepted_gpu_models") or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class MoveForm(forms.Form):
    nodes = forms.CharField(
        help_text="Node names, separated by commas (ticking nodes on a pool page fills this).",
        widget=forms.TextInput(attrs={"placeholder": "a100-node-000, a100-node-001"}),
    )
    destination = forms.ModelChoiceField(
        queryset=Pool.objects.none(), to_field_name="name", empty_label="Choose a pool…"
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="Why: it goes on record and to the approvers.",
    )
    drain_policy = forms.ChoiceField(
        choices=[
            ("leave-running", "Leave running pods (new pods follow the new pool)"),
            (
                "drain-first",
                "Drain first: cordon, evict GPU pods (respecting budgets), relabel, uncordon",
            ),
        ],
        initial="leave-running",
    )
    drain_deadline_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        initial=30,
        help_text="Drain-first only: then the move fails and the node is uncordoned.",
    )
    loan_until = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Optional (UTC): the nodes return to their pool by themselves at this time.",
    )
    health_override = forms.CharField(
        required=False,
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="Only for pools that require healthy nodes: why move a node "
        "with XID errors or without metrics anyway.",
    )
    reconcile = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, source_pool: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        destinations = Pool.objects.active()
        if self.is_reconcile:
            # A reconcile puts nodes back as their own pool says: no destination to choose,
            # nothing to lend.
            self.fields["destination"].widget = forms.HiddenInput()
            del self.fields["loan_until"]
        elif source_pool:
            destinations = destinations.exclude(name=source_pool)  # a move goes elsewhere
        self.fields["destination"].queryset = destinations

    @property
    def is_reconcile(self) -> bool:
        """Whether this is a reconcile, read as the field reads it ("False" is false)."""
        # The hidden input posts the text "False", which a template would take as true.
        return bool(self.fields["reconcile"].to_python(self["reconcile"].value()))

    def clean_nodes(self) -> list[str]:
        names = [n.strip() for n in self.cleaned_data["nodes"].split(",") if n.strip()]
        if not names:
            raise forms.ValidationError("Choose at least one node.")
        return list(dict.fromkeys(names))


class DecisionForm(forms.Form):
    reason = forms.CharField(
        required=False, max_length=FREE_TEXT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )


class LoanChangeForm(forms.Form):
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    reason = forms.CharField(
        max_length=FREE_TEXT_MAX_LENGTH,
        error_messages={"required": "A loan change needs a reason."},
    )


class TokenForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=100,
        error_messages={"required": "Give the token a name (what will use it?)."},
    )
    expires_at = forms.DateTimeField(
        label="Expires",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Optional (UTC): the token is refused from then on.",
    )


class FitForm(forms.Form):
    """The fit check's input: a manifest pasted or uploaded, or a Pending pod by name."""

    manifest = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}),
        help_text="YAML or JSON: Pod, Deployment, StatefulSet, Job, CronJob, PyTorchJob, "
        "MPIJob, RayCluster, JobSet, Volcano Job; gangs sized by their own field, a Volcano "
        "PodGroup or YuniKorn task groups; several documents allowed.",
    )
    upload = forms.FileField(required=False, label="or upload a file")
    pod = forms.CharField(
        required=False,
        max_length=320,
        label="or a Pending pod",
        widget=forms.TextInput(attrs={"list": "pending-pods", "placeholder": "namespace/name"}),
        help_text="namespace/name of a pod the inventory holds.",
    )
    MAX_UPLOAD_BYTES = 1_000_000

    def clean_upload(self) -> str | None:
        upload = self.cleaned_data.get("upload")
        if not upload:
            return None
        if upload.size > self.MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size} bytes; the fit check reads at most "
                f"{self.MAX_UPLOAD_BYTES}."
            )
        try:
            return str(upload.read().decode("utf-8"))
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not UTF-8 text.") from None

    def clean_pod(self) -> tuple[str, str] | None:
        text = (self.cleaned_data.get("pod") or "").strip()
        if not text:
            return None
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name:
            raise forms.ValidationError(f"Write the pod as namespace/name, got {text!r}.")
        return namespace, name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:  # a field refused (a file too large) was given: say only what is wrong
            return data
        given = [k for k in ("manifest", "upload", "pod") if data.get(k)]
        if len(given) != 1:
            raise forms.ValidationError(
                "Give one of: a manifest, a file or a pod"
                + (f" (got {', '.join(given)})." if given else ".")
            )
        return data

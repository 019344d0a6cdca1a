"""Manifests read into workloads: pod templates, how many pods each runs at once, gangs (pure).

`read_manifest(text)` takes what a user pastes or uploads — YAML or JSON, one document or many
(`---`), a `kind: List` too — and returns a `Manifest`: the decoded documents (for the fix) and
one `Workload` per object that makes pods. Bad input raises `ManifestError`, every problem
naming its document and field path. `read_objects([...])` does the same for objects already
decoded (a Pending pod read from the cluster).

How many pods each kind runs at once, and which must start together (a gang):

- Pod: 1. Deployment, ReplicaSet, StatefulSet (apps/v1): `spec.replicas` (default 1).
- Job (batch/v1): `parallelism` (default 1), at most `completions`; CronJob: its `jobTemplate`.
- PyTorchJob (kubeflow.org/v1, `pytorchReplicaSpecs` Master then Worker) and MPIJob
  (kubeflow.org/v2beta1, `mpiReplicaSpecs` Launcher then Worker): each type's `replicas`
  (default 1); a gang of all of them, or `runPolicy.schedulingPolicy.minAvailable`.
- RayCluster (ray.io/v1): one head (`headGroupSpec`) and, per `workerGroupSpecs[]`, `replicas`
  kept within `minReplicas`..`maxReplicas` (KubeRay's desired count) times `numOfHosts`; a
  gang of all of them, or with `enableInTreeAutoscaling` of the head and every group's
  `minReplicas` x `numOfHosts` (the size KubeRay gives the PodGroup).
- JobSet (jobset.x-k8s.io/v1alpha2): per `replicatedJobs[]`, `replicas` (default 1) times its
  Job's pods at once; a gang of all of them.
- Volcano's Job (batch.volcano.sh/v1alpha1, `kind: Job` too): per `tasks[]`, `replicas`; a gang
  of `spec.minAvailable`, which Volcano defaults to each task's `minAvailable` (or `replicas`)
  added up, and refuses above the tasks' replicas.
- Any kind whose pod template carries YuniKorn's task groups (annotation
  `yunikorn.apache.org/task-groups`): a gang of their `minMember` added up; or names a Volcano
  PodGroup of the manifest (annotation `scheduling.k8s.io/group-name`): a gang of its
  `minMember` (`pools.core.fit.gangs`).

Limits: at most 1 MB of text, 100 documents, 64 levels of nesting, 50,000 keys and values
(YAML aliases expanded, so a "billion laughs" document is refused, not expanded) and 200
different pod templates (by what the scheduler reads; identical ones count once). The fit
check's cost grows with that count (the manifest is written once, each pool's fix spliced
into that text), and a YAML manifest past it is refused while it is parsed, before it is built
(`docs/benchmarks.md`, "The fit check's cost by manifest size").
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from pools.core.dra.claims import ClaimSpec, read_claim_spec
from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader
from pools.core.fit.findings import (
    ERROR,
    INFO,
    WARNING,
    DocumentProblem,
    FieldProblem,
    Finding,
    ManifestError,
)
from pools.core.fit.gangs import (
    POD_GROUP_NAME,
    TaskGroup,
    read_pod_group_sizes,
    read_task_groups,
)
from pools.core.fit.pods import PodShape, read_pod_shape
from pools.core.gc_pause import collector_paused

MAX_TEXT_BYTES = 1_000_000
MAX_DOCUMENTS = 100
MAX_DEPTH = 64
MAX_VALUES = 50_000  # keys, scalars and containers in all documents, aliases expanded
# Pod templates that differ in what the scheduler reads: each is filtered against every node
# of the cluster, for the cluster and for each pool (about 3 ms each at 250 nodes on the
# shared machine), where identical ones are filtered once. 1,250 different Deployments fit in
# 333 KB under the value limit and took 3.8 s of CPU (issue 25, R1).
MAX_POD_SHAPES = 200
YAML = "yaml"
JSON = "json"

Location = tuple[str | int, ...]  # keys and indexes from the document to a pod spec


@dataclass(frozen=True)
class PodTemplate:
    role: str  # "" for one-template kinds; "Master", "Worker", "head", a group or job name
    path: str  # field path of the pod spec in its document: "spec.template.spec"
    location: Location
    replicas: int  # pods of this template wanted at once
    shape: PodShape
    task_groups: tuple[TaskGroup, ...] = ()  # YuniKorn's, from the template's annotations
    pod_group: str = ""  # the Volcano PodGroup its pods belong to (scheduling.k8s.io/group-name)


@dataclass(frozen=True)
class Workload:
    document: int  # 1-based
    kind: str
    api_version: str
    name: str
    namespace: str
    templates: tuple[PodTemplate, ...]
    gang_size: int = 0  # pods that must all run at once for it to make progress; 0: no gang
    findings: tuple[Finding, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}".strip()

    @property
    def pods(self) -> int:
        return sum(t.replicas for t in self.templates)

    @property
    def is_gang(self) -> bool:
        return self.gang_size > 0


@dataclass(frozen=True)
class Manifest:
    documents: tuple[Any, ...]  # decoded, as submitted (None for empty documents)
    workloads: tuple[Workload, ...]
    format: str  # YAML or JSON: the fix is written back in the same
    findings: tuple[Finding, ...] = ()  # about documents that make no pods


# libyaml's parser when PyYAML was built with it: pure Python parses a 1 MB manifest for tens
# of seconds (issue 25, R1).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeLoader):  # type: ignore[valid-type,misc]
    """YAML as the API server reads it: dates stay strings (no timestamp conversion). The
    nodes are counted, and their depth followed, while the document is composed, so a
    manifest past the limits is refused before a single Python object is built for it (the
    parser calls descend_resolver once per node, aliases excepted, in C or in Python)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.values_left = MAX_VALUES
        self.depth = 0
        # The resolver's regular expressions once per distinct scalar (keys repeat), behind
        # a C-level cache the parser calls without a Python frame.
        self.resolve = functools.lru_cache(maxsize=None)(super().resolve)
        self.expanded = False  # a document was built by SafeConstructor (aliases, merges)

    def descend_resolver(self, parent: Any, index: Any) -> None:
        self.values_left -= 1
        self.depth += 1
        if self.values_left < 0:
            _fail(
                0,
                "",
                f"more than {MAX_VALUES} keys and values; the fit check reads at most that many",
            )
        if self.depth > MAX_DEPTH:
            _fail(0, "", f"nested more than {MAX_DEPTH} levels deep")
        if self.yaml_path_resolvers:  # none are added: the base class's would return at once
            super().descend_resolver(parent, index)

    def ascend_resolver(self) -> None:
        self.depth -= 1
        if self.yaml_path_resolvers:
            super().ascend_resolver()

    def construct_document(self, node: yaml.Node) -> Any:
        """The document built in one pass when it holds only mappings, lists and plain
        scalar types, with no alias or merge key (SafeConstructor's own result, several times
        faster); else SafeConstructor's way."""
        try:
            return self._build(node, set())
        except _Unusual:
            self.expanded = True
            return super().construct_document(node)

    def _build(self, node: yaml.Node, seen: set[int]) -> Any:
        if id(node) in seen:
            raise _Unusual  # an alias
        seen.add(id(node))
        kind, tag = type(node), node.tag
        if kind is yaml.ScalarNode:
            if tag == _STR:
                return node.value
            if tag not in _PLAIN:
                raise _Unusual
            return self.yaml_constructors[tag](self, node)
        if kind is yaml.SequenceNode and tag == _SEQ:
            return [self._build(item, seen) for item in node.value]
        if kind is not yaml.MappingNode or tag != _MAP:
            raise _Unusual
        mapping = {}
        for key_node, value_node in node.value:
            if type(key_node) is not yaml.ScalarNode or key_node.tag in _SPECIAL_KEYS:
                raise _Unusual
            mapping[self._build(key_node, seen)] = self._build(value_node, seen)
        return mapping


class _Unusual(Exception):
    """A node `_Loader._build` leaves to SafeConstructor."""


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_PLAIN = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float"))
_SPECIAL_KEYS = frozenset(("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"))


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_manifest(text: str) -> Manifest:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        _fail(0, "", f"the manifest is {size} bytes; the fit check reads at most {MAX_TEXT_BYTES}")
    # Parsing builds up to 50,000 objects, none in a cycle: the cyclic collector's passes
    # over them were a third of the time (pools.core.gc_pause).
    with collector_paused():
        documents, fmt, counted = _decode(text)
        return read_objects(documents, fmt=fmt, counted=counted)


def read_objects(documents: list[Any], *, fmt: str = YAML, counted: bool = False) -> Manifest:
    """`counted`: the parser has already counted every value and level of these documents,
    which hold no alias (`_Loader`), so they are not walked again."""
    if len(documents) > MAX_DOCUMENTS:
        _fail(0, "", f"{len(documents)} documents; the fit check reads at most {MAX_DOCUMENTS}")
    if not counted:
        _check_size(documents)
    problems: list[DocumentProblem] = []
    workloads: list[Workload] = []
    findings: list[Finding] = []
    pod_groups = read_pod_group_sizes([o for d in documents for _, o in _objects(d)])
    claims: dict[tuple[str, str, str], ClaimSpec] = {}
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        for prefix, obj in _objects(document):
            read = _read_object(number, prefix, obj, findings, claims)
            problems += read[1]
            workloads += [_with_pod_group(read[0], pod_groups)] if read[0] else []
    workloads = [_with_claims(w, claims) for w in workloads]
    if problems:
        raise ManifestError(problems)
    if not workloads:
        _fail(0, "", "no workload in the manifest: the fit check reads " + ", ".join(KINDS))
    _check_shapes(workloads)
    return Manifest(tuple(documents), tuple(workloads), fmt, tuple(findings))


def _check_shapes(workloads: list[Workload]) -> None:
    shapes: set[PodShape] = set()
    for workload in workloads:
        for template in workload.templates:
            shapes.add(template.shape.for_scheduling)
            if len(shapes) > MAX_POD_SHAPES:
                message = (
                    f"the {MAX_POD_SHAPES + 1}st different pod template of the manifest (by "
                    "requests, tolerations, affinity and priority); the fit check evaluates at "
                    f"most {MAX_POD_SHAPES} different ones against every node"
                )
                problem = FieldProblem(template.path, message)
                raise ManifestError([DocumentProblem(workload.document, workload.label, problem)])


def _with_pod_group(workload: Workload, sizes: Mapping[str, int]) -> Workload:
    """The gang of a workload whose pods name a Volcano PodGroup (by annotation)."""
    names = sorted({t.pod_group for t in workload.templates if t.pod_group})
    if not names:
        return workload
    known = [sizes[name] for name in names if name in sizes]
    if len(known) < len(names):
        missing = ", ".join(n for n in names if n not in sizes)
        message = (
            f"{workload.label}: its pods belong to the Volcano PodGroup {missing} "
            f"({POD_GROUP_NAME}), which is not in the manifest: its minMember is not known, so "
            "no gang is checked. Paste the PodGroup with the workload."
        )
        finding = Finding("pod-group-not-found", WARNING, message, workload.document)
        return replace(workload, findings=(*workload.findings, finding))
    return replace(workload, gang_size=min(sum(known), workload.pods))


def pod_shape(pod: Mapping[str, Any]) -> PodShape:
    """What the scheduler looks at in one Pod object read from the cluster (status ignored)."""
    body = {key: value for key, value in pod.items() if key != "status"}
    body.setdefault("kind", "Pod")
    body.setdefault("apiVersion", "v1")
    return read_objects([body]).workloads[0].templates[0].shape


def _fail(document: int, label: str, message: str) -> None:
    raise ManifestError([DocumentProblem(document, label, FieldProblem("", message))])


def _decode(text: str) -> tuple[list[Any], str, bool]:
    # As kubectl's YAMLOrJSONDecoder: text that starts with "{" or "[" is JSON, strictly.
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        documents, expanded = _yaml_documents(text)
        return documents, YAML, not expanded
    try:
        return _json_documents(stripped), JSON, False
    except json.JSONDecodeError as error:
        _fail(0, "", f"not valid JSON: line {error.lineno}, column {error.colno}: {error.msg}")
    except RecursionError:
        _fail(0, "", f"nested more than {MAX_DEPTH} levels deep")
    raise AssertionError("unreachable")


def _json_documents(text: str) -> list[Any]:
    decoder, position, documents = json.JSONDecoder(), 0, []
    while position < len(text):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    if len(documents) == 1 and isinstance(documents[0], list):
        return list(documents[0])  # a JSON array of objects
    return documents


def _yaml_documents(text: str) -> tuple[list[Any], bool]:
    """The documents, and whether an alias (or a merge key) made them larger than parsed."""
    try:
        loader = _Loader(text)  # yaml.load_all's loop, keeping the loader
        try:
            documents = []
            while loader.check_data():
                documents.append(loader.get_data())
        finally:
            loader.dispose()
        return documents, loader.expanded
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        _fail(0, "", f"not valid YAML: {where}{error.problem}")
    except yaml.YAMLError as error:
        _fail(0, "", f"not valid YAML: {error}")
    except RecursionError:
        _fail(0, "", f"nested more than {MAX_DEPTH} levels deep")
    raise AssertionError("unreachable")


def _check_size(documents: list[Any]) -> None:
    """Depth and size limits, counted with YAML aliases expanded (a billion-laughs document is
    small as text and huge as data)."""
    budget = [MAX_VALUES]
    for number, document in enumerate(documents, start=1):
        stack: list[tuple[Any, int]] = [(document, 1)]
        while stack:
            value, depth = stack.pop()
            budget[0] -= 1
            if budget[0] < 0:
                _fail(number, "", f"more than {MAX_VALUES} keys and values (YAML aliases expanded)")
            if depth > MAX_DEPTH:
                _fail(number, "", f"nested more than {MAX_DEPTH} levels deep")
            if isinstance(value, dict):
                others = [k for k in value if not isinstance(k, str)]  # counted when popped
                budget[0] -= len(value) - len(others)  # the keys, as the parser counts them
                stack += [(item, depth + 1) for item in value.values()]
                stack += [(k, depth + 1) for k in others]
            elif isinstance(value, list):
                stack += [(item, depth + 1) for item in value]


def _objects(document: Any) -> Iterator[tuple[Location, Any]]:
    """The objects in a document: itself, or the items of a `kind: List`."""
    if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
        if isinstance(items, list):
            for position, item in enumerate(items):
                yield ("items", position), item
            return
    yield (), document


def _read_object(
    number: int,
    prefix: Location,
    obj: Any,
    findings: list[Finding],
    claims: dict[tuple[str, str, str], ClaimSpec],
) -> tuple[Workload | None, list[DocumentProblem]]:
    path = _path(prefix)
    if not isinstance(obj, dict):
        problem = FieldProblem(
            path, "must be a Kubernetes object (a mapping with apiVersion and kind)"
        )
        return None, [DocumentProblem(number, "", problem)]
    reader = FieldReader()
    kind = reader.string(obj.get("kind"), f.child(path, "kind"))
    api_version = reader.string(obj.get("apiVersion"), f.child(path, "apiVersion"))
    meta = reader.mapping(obj.get("metadata"), f.child(path, "metadata"))
    name = reader.string(
        meta.get("name") or meta.get("generateName"), f.child(path, "metadata.name")
    )
    namespace = reader.string(meta.get("namespace"), f.child(path, "metadata.namespace"))
    label = f"{kind} {name}".strip()
    if not kind and not reader.problems:
        reader.problem(f.child(path, "kind"), "Required value: every object needs a kind")
    workload = None
    read_kind = _kind_reader(kind, api_version)
    if kind in CLAIM_KINDS and not reader.problems:
        spec = reader.mapping(obj.get("spec"), f.child(path, "spec"))
        if kind == TEMPLATE:
            spec_path = f.child(f.child(path, "spec"), "spec")
            spec = reader.mapping(spec.get("spec"), spec_path)
        else:
            spec_path = f.child(path, "spec")
        claims[(kind, namespace or "default", name)] = read_claim_spec(reader, spec, spec_path)
    elif read_kind is not None and not reader.problems:
        own: list[Finding] = []
        if read_kind is KINDS.get(kind):
            own += _api_version_findings(kind, api_version, path)
        templates, gang = read_kind(reader, obj, prefix, own)
        gang = _task_group_gang(templates, gang, label, own)
        own = [_in_document(finding, number) for finding in own]
        workload = Workload(
            number, kind, api_version, name, namespace, tuple(templates), gang, tuple(own)
        )
    elif kind and read_kind is None:
        findings.append(_skipped(number, label, kind))
    return workload, [DocumentProblem(number, label, p) for p in reader.problems]


CLAIM = "ResourceClaim"
TEMPLATE = "ResourceClaimTemplate"
CLAIM_KINDS = (CLAIM, TEMPLATE)


def _with_claims(workload: Workload, claims: Mapping[tuple[str, str, str], ClaimSpec]) -> Workload:
    """The workload's pod claims with their namespace, the pod's name as the scheduler's
    messages give it, and the claim or template when the manifest carries it."""
    if not any(t.shape.claims for t in workload.templates):
        return workload
    namespace = workload.namespace or "default"
    pod = workload.name if workload.kind == "Pod" else f"{workload.name}-…"
    templates = []
    for template in workload.templates:
        resolved = tuple(
            replace(
                claim,
                namespace=namespace,
                pod=f"{namespace}/{pod}",
                spec=claims.get(
                    (TEMPLATE, namespace, claim.template_name)
                    if claim.template_name
                    else (CLAIM, namespace, claim.claim_name)
                ),
            )
            for claim in template.shape.claims
        )
        templates.append(replace(template, shape=replace(template.shape, claims=resolved)))
    return replace(workload, templates=tuple(templates))


def _kind_reader(kind: str, api_version: str) -> Reader | None:
    """The reader of a kind; a kind another API group also uses (Volcano's Job) by its group."""
    for (group, group_kind), read in GROUP_KINDS.items():
        if kind == group_kind and api_version.startswith(group):
            return read
    return KINDS.get(kind)


def _task_group_gang(
    templates: list[PodTemplate], gang: int, label: str, findings: list[Finding]
) -> int:
    """YuniKorn's gang: every task group's minMember, each group counted once."""
    groups = {g.name: g.min_member for t in templates for g in t.task_groups}
    if not groups:
        return gang
    members, pods = sum(groups.values()), sum(t.replicas for t in templates)
    if members > pods:
        message = (
            f"{label}: YuniKorn's task groups ask for {members} members together, but it runs "
            f"{pods} pod{'s' if pods != 1 else ''}: the placeholders for the rest hold their room "
            "until they time out. The check takes a gang of all its pods."
        )
        findings.append(Finding("task-groups-larger-than-workload", WARNING, message))
    return min(members, pods)


def _path(location: Location) -> str:
    path = ""
    for step in location:
        path = f.index(path, step) if isinstance(step, int) else f.child(path, step)
    return path


def _in_document(finding: Finding, number: int) -> Finding:
    return Finding(
        finding.code, finding.severity, finding.message, number, finding.path, finding.pool
    )


NO_PODS = frozenset(
    (
        "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "Namespace", "ServiceAccount",
        "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Ingress", "NetworkPolicy",
        "PodDisruptionBudget", "PriorityClass", "HorizontalPodAutoscaler", "LimitRange",
        "ResourceQuota", "StorageClass", "PersistentVolume", "DeviceClass",
    )
)  # fmt: skip


def _skipped(number: int, label: str, kind: str) -> Finding:
    if kind == "PodGroup":
        message = (
            f"document {number} ({label}) makes no pods; its minMember is the gang of the pods "
            "that name it."
        )
        return Finding("no-pods", INFO, message, number)
    if kind in NO_PODS:
        return Finding(
            "no-pods", INFO, f"document {number} ({label}) makes no pods; not checked.", number
        )
    message = (
        f"document {number} ({label}): the fit check does not read {kind}; its pods are not "
        f"checked (it reads {', '.join(KINDS)})."
    )
    if kind == "DaemonSet":
        message = (
            f"document {number} ({label}): a DaemonSet runs one pod on every node it matches; "
            "the fit check does not evaluate it."
        )
    return Finding("kind-not-checked", WARNING, message, number)


EXPECTED_GROUPS = {
    "Pod": ("v1",),
    "Deployment": ("apps/v1",),
    "ReplicaSet": ("apps/v1",),
    "StatefulSet": ("apps/v1",),
    "Job": ("batch/v1",),
    "CronJob": ("batch/v1",),
    "PyTorchJob": ("kubeflow.org/",),
    "MPIJob": ("kubeflow.org/",),
    "RayCluster": ("ray.io/",),
    "JobSet": ("jobset.x-k8s.io/",),
}


def _api_version_findings(kind: str, api_version: str, path: str) -> list[Finding]:
    expected = EXPECTED_GROUPS[kind]
    if any(api_version == e or (e.endswith("/") and api_version.startswith(e)) for e in expected):
        return []
    message = (
        f"{f.child(path, 'apiVersion')}: {kind} is not served as {api_version or '(none)'!r}; "
        f"use {expected[0]}{'…' if expected[0].endswith('/') else ''}"
    )
    return [Finding("unknown-api-version", ERROR, message, path=f.child(path, "apiVersion"))]


# --- one reader per kind: (templates, gang size) ---

Reader = Callable[
    [FieldReader, dict[str, Any], Location, list[Finding]], tuple[list[PodTemplate], int]
]


@dataclass
class _Walk:
    """Where a kind reader stands: the reader, the findings and the location of the object."""

    reader: FieldReader
    findings: list[Finding]
    base: Location
    templates: list[PodTemplate] = field(default_factory=list)

    def mapping(self, obj: Mapping[str, Any], name: str, at: Location) -> dict[str, Any]:
        return self.reader.mapping(obj.get(name), _path((*self.base, *at, name)))

    def count(self, obj: Mapping[str, Any], name: str, at: Location, default: int) -> int:
        return self.reader.integer(obj.get(name), _path((*self.base, *at, name)), default)

    def template(self, role: str, owner: Mapping[str, Any], at: Location, replicas: int) -> None:
        """Read `owner.template.spec` (a PodTemplateSpec's pod spec) as one pod template."""
        template_at = (*self.base, *at, "template")
        template = self.reader.mapping(owner.get("template"), _path(template_at))
        if "template" not in owner or not isinstance(template.get("spec"), dict):
            if not self.reader.problems:
                self.reader.problem(
                    _path((*template_at, "spec")), "Required value: a pod template needs a spec"
                )
            return
        location = (*template_at, "spec")
        shape = read_pod_shape(self.reader, template["spec"], _path(location), self.findings)
        meta_path = _path((*template_at, "metadata"))
        meta = self.reader.mapping(template.get("metadata"), meta_path)
        self.templates.append(
            _template(self.reader, role, location, replicas, shape, meta, meta_path)
        )


def _template(
    reader: FieldReader,
    role: str,
    location: Location,
    replicas: int,
    shape: PodShape,
    meta: Mapping[str, Any],
    meta_path: str,
) -> PodTemplate:
    """A pod template with what gang schedulers read from its metadata's annotations."""
    annotations = reader.string_map(meta.get("annotations"), f.child(meta_path, "annotations"))
    return PodTemplate(
        role,
        _path(location),
        location,
        replicas,
        shape,
        read_task_groups(reader, annotations, meta_path),
        annotations.get(POD_GROUP_NAME, ""),
    )


def _pod(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    location = (*base, "spec")
    if not isinstance(obj.get("spec"), dict):
        reader.problem(_path(location), "Required value: a Pod needs a spec")
        return [], 0
    shape = read_pod_shape(reader, obj["spec"], _path(location), findings)
    meta_path = _path((*base, "metadata"))
    meta = reader.mapping(obj.get("metadata"), meta_path)
    return [_template(reader, "", location, 1, shape, meta, meta_path)], 0


def _replicated(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    walk.template("", spec, ("spec",), walk.count(spec, "replicas", ("spec",), 1))
    return walk.templates, 0


def _job_pods(walk: _Walk, job_spec: Mapping[str, Any], at: Location) -> int:
    parallelism = walk.count(job_spec, "parallelism", at, 1)
    completions = job_spec.get("completions")
    if completions is not None:
        parallelism = min(parallelism, walk.count(job_spec, "completions", at, parallelism))
    return parallelism


def _job(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    walk.template("", spec, ("spec",), _job_pods(walk, spec, ("spec",)))
    return walk.templates, 0


def _cron_job(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    job = walk.mapping(spec, "jobTemplate", ("spec",))
    job_spec = walk.mapping(job, "spec", ("spec", "jobTemplate"))
    at = ("spec", "jobTemplate", "spec")
    walk.template("", job_spec, at, _job_pods(walk, job_spec, at))
    return walk.templates, 0


def _replica_specs(field_name: str, order: tuple[str, ...]) -> Reader:
    """Kubeflow's PyTorchJob and MPIJob: a map of replica type to {replicas, template}."""

    def read(
        reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
    ) -> tuple[list[PodTemplate], int]:
        walk = _Walk(reader, findings, base)
        spec = walk.mapping(obj, "spec", ())
        specs = walk.mapping(spec, field_name, ("spec",))
        if not specs and not reader.problems:
            reader.problem(_path((*base, "spec", field_name)), "Required value: no replica specs")
        for role in sorted(specs, key=lambda r: (order.index(r) if r in order else len(order), r)):
            if role not in order:
                where = _path((*base, "spec", field_name))
                message = f"{where}: replica type {role!r} is not one of {', '.join(order)}"
                findings.append(Finding("unknown-replica-type", WARNING, message))
            at = ("spec", field_name, role)
            replica = walk.mapping(specs, role, ("spec", field_name))
            walk.template(role, replica, at, walk.count(replica, "replicas", at, 1))
        total = sum(t.replicas for t in walk.templates)
        policy = walk.mapping(
            walk.mapping(spec, "runPolicy", ("spec",)), "schedulingPolicy", ("spec", "runPolicy")
        )
        minimum = walk.count(
            policy, "minAvailable", ("spec", "runPolicy", "schedulingPolicy"), total
        )
        return walk.templates, min(minimum, total) if total else 0

    return read


def _ray_cluster(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    head = walk.mapping(spec, "headGroupSpec", ("spec",))
    walk.template("head", head, ("spec", "headGroupSpec"), 1)
    autoscaling = reader.boolean(
        spec.get("enableInTreeAutoscaling"), _path((*base, "spec", "enableInTreeAutoscaling"))
    )
    gang = 1
    groups_at = (*base, "spec", "workerGroupSpecs")
    for position, group in enumerate(
        reader.sequence(spec.get("workerGroupSpecs"), _path(groups_at))
    ):
        at = ("spec", "workerGroupSpecs", position)
        body = reader.mapping(group, _path((*base, *at)))
        desired, minimum = _ray_group_size(walk, body, at)
        name = reader.string(body.get("groupName"), _path((*base, *at, "groupName"))) or str(
            position
        )
        walk.template(f"worker group {name}", body, at, desired)
        gang += minimum if autoscaling else desired
    return walk.templates, gang


def _ray_group_size(walk: _Walk, group: Mapping[str, Any], at: Location) -> tuple[int, int]:
    """KubeRay's GetWorkerGroupDesiredReplicas, and the group's minimum, in pods."""
    hosts = walk.count(group, "numOfHosts", at, 1)
    minimum = walk.count(group, "minReplicas", at, 0)
    maximum = walk.count(group, "maxReplicas", at, 2**31 - 1)
    replicas = walk.count(group, "replicas", at, minimum)
    if walk.reader.boolean(group.get("suspend"), _path((*walk.base, *at, "suspend"))):
        return 0, 0
    # KubeRay: minReplicas above maxReplicas gives maxReplicas; else replicas within the two.
    desired = maximum if minimum > maximum else min(max(replicas, minimum), maximum)
    return desired * hosts, min(minimum, maximum) * hosts


def _job_set(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    jobs_at = (*base, "spec", "replicatedJobs")
    jobs = reader.sequence(spec.get("replicatedJobs"), _path(jobs_at))
    if not jobs and not reader.problems:
        reader.problem(_path(jobs_at), "Required value: a JobSet needs replicatedJobs")
    for position, job in enumerate(jobs):
        at = ("spec", "replicatedJobs", position)
        body = reader.mapping(job, _path((*base, *at)))
        name = reader.string(body.get("name"), _path((*base, *at, "name"))) or str(position)
        copies = walk.count(body, "replicas", at, 1)
        template = walk.mapping(body, "template", at)
        job_spec = walk.mapping(template, "spec", (*at, "template"))
        pods = copies * _job_pods(walk, job_spec, (*at, "template", "spec"))
        walk.template(name, job_spec, (*at, "template", "spec"), pods)
    return walk.templates, sum(t.replicas for t in walk.templates)


def _volcano_job(
    reader: FieldReader, obj: dict[str, Any], base: Location, findings: list[Finding]
) -> tuple[list[PodTemplate], int]:
    """Volcano's Job: its tasks, and the gang its admission webhook gives it."""
    walk = _Walk(reader, findings, base)
    spec = walk.mapping(obj, "spec", ())
    tasks_at = (*base, "spec", "tasks")
    tasks = reader.sequence(spec.get("tasks"), _path(tasks_at))
    if not tasks and not reader.problems:
        reader.problem(_path(tasks_at), "Required value: a Volcano Job needs at least one task")
    defaults = 0  # what Volcano's webhook sets an unset minAvailable to
    for position, task in enumerate(tasks):
        at = ("spec", "tasks", position)
        body = reader.mapping(task, _path((*base, *at)))
        name = reader.string(body.get("name"), _path((*base, *at, "name"))) or f"task{position}"
        replicas = walk.count(body, "replicas", at, 0)
        defaults += walk.count(body, "minAvailable", at, replicas)
        walk.template(name, body, at, replicas)
    total = sum(t.replicas for t in walk.templates)
    minimum = walk.count(spec, "minAvailable", ("spec",), 0) or defaults
    if minimum > total and not reader.problems:
        reader.problem(
            _path((*base, "spec", "minAvailable")),
            f"Invalid value: {minimum}: Volcano refuses a minAvailable above the tasks' "
            f"replicas ({total})",
        )
    scheduler = reader.string(spec.get("schedulerName"), _path((*base, "spec", "schedulerName")))
    message = (
        f"{_path((*base, 'spec', 'schedulerName'))}: {scheduler or 'volcano'} places this Job's "
        f"pods, {minimum} of them together; the verdict applies the default scheduler's filters, "
        "which it may not apply the same way."
    )
    findings.append(Finding("other-scheduler", INFO, message))
    return walk.templates, min(minimum, total)


GROUP_KINDS: dict[tuple[str, str], Reader] = {("batch.volcano.sh/", "Job"): _volcano_job}

KINDS: dict[str, Reader] = {
    "Pod": _pod,
    "Deployment": _replicated,
    "ReplicaSet": _replicated,
    "StatefulSet": _replicated,
    "Job": _job,
    "CronJob": _cron_job,
    "PyTorchJob": _replica_specs("pytorchReplicaSpecs", ("Master", "Worker")),
    "MPIJob": _replica_specs("mpiReplicaSpecs", ("Launcher", "Worker")),
    "RayCluster": _ray_cluster,
    "JobSet": _job_set,
}

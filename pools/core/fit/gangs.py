"""Gang schedulers' own ways of saying how many pods must start together (pure).

- YuniKorn: the pod template's annotation `yunikorn.apache.org/task-groups`, a JSON list of
  task groups `{"name", "minMember", "minResource", ...}`; the application's gang is every
  group's `minMember` together (YuniKorn reserves room for all of them with placeholders
  before any real pod starts). The k8shim refuses a group without a name, without
  `minResource`, or with a `minMember` that is not a positive integer, and so does the fit
  check, naming the annotation.
- Volcano: a pod template annotated `scheduling.k8s.io/group-name` belongs to that PodGroup
  (`scheduling.volcano.sh/v1beta1`), whose `spec.minMember` is the gang. The PodGroup must be
  in the same manifest for the check to know it. (Volcano's own Job, `batch.volcano.sh`, is
  read in `pools.core.fit.workloads` with its `minAvailable`.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader

TASK_GROUPS = "yunikorn.apache.org/task-groups"
TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
POD_GROUP_NAME = "scheduling.k8s.io/group-name"
POD_GROUP_API = "scheduling.volcano.sh/"


@dataclass(frozen=True)
class TaskGroup:
    name: str
    min_member: int


def read_task_groups(
    reader: FieldReader, annotations: Mapping[str, str], path: str
) -> tuple[TaskGroup, ...]:
    """The task groups a pod template declares, as YuniKorn's k8shim reads them."""
    text = annotations.get(TASK_GROUPS)
    if text is None:
        return ()
    where = f.key(f.child(path, "annotations"), TASK_GROUPS)
    try:
        value = json.loads(text)
    except ValueError as error:
        reader.problem(where, f"YuniKorn cannot read the task groups: not valid JSON ({error})")
        return ()
    if not isinstance(value, list):
        reader.problem(where, "YuniKorn reads a JSON list of task groups here")
        return ()
    groups = []
    for position, item in enumerate(value):
        at = f.index(where, position)
        if not isinstance(item, dict):
            reader.problem(at, "a task group is a JSON object with name, minMember, minResource")
            continue
        name = item.get("name")
        member = item.get("minMember")
        if not isinstance(name, str) or not name:
            reader.problem(f.child(at, "name"), "Required value: YuniKorn needs a group name")
        elif isinstance(member, bool) or not isinstance(member, int) or member <= 0:
            reader.problem(
                f.child(at, "minMember"),
                f"must be a positive integer (YuniKorn refuses {json.dumps(member)})",
            )
        elif not isinstance(item.get("minResource"), dict):
            reader.problem(
                f.child(at, "minResource"),
                "Required value: YuniKorn sizes each placeholder pod from it",
            )
        else:
            groups.append(TaskGroup(name, member))
    return tuple(groups)


def read_pod_group_sizes(documents: list[object]) -> dict[str, int]:
    """Volcano PodGroups of the manifest: name -> spec.minMember (a positive one)."""
    sizes: dict[str, int] = {}
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != "PodGroup":
            continue
        if not str(document.get("apiVersion", "")).startswith(POD_GROUP_API):
            continue
        meta = document.get("metadata")
        spec = document.get("spec")
        if not isinstance(meta, dict) or not isinstance(spec, dict):
            continue
        member = spec.get("minMember")
        if isinstance(member, int) and not isinstance(member, bool) and member > 0:
            sizes[str(meta.get("name") or "")] = member
    return sizes

"""Query options of each verb, validated as the handlers validate them, with their messages.

Create, update, patch and delete options (`dryRun`, `fieldValidation`, `fieldManager`,
`force`) are checked before anything else and refused with 422 `CreateOptions.meta.k8s.io ""
is invalid: ...`; list and watch options (`resourceVersionMatch`, `sendInitialEvents`) with
422 `ListOptions.meta.k8s.io "" is invalid: ...`; table options with 400.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim.errors import ApiError
from kubesim.validation import FieldError, invalid_error

FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")
NOT_OLDER_THAN, EXACT = "NotOlderThan", "Exact"


def _go_strings(values: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _not_supported(path: str, shown: str, supported: list[str]) -> FieldError:
    listed = ", ".join(f'"{v}"' for v in supported)
    return FieldError(
        path, "FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {listed}"
    )


def _forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "FieldValueForbidden", f"Forbidden: {detail}")


def _invalid_options(kind: str, problems: list[FieldError]) -> ApiError:
    error = invalid_error(kind, "", problems, group="meta.k8s.io")
    error.details = {k: v for k, v in (error.details or {}).items() if k != "name"}
    return error


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool
    field_validation: str  # Ignore | Warn | Strict (Warn by default)
    field_manager: str
    force: bool


def write_options(
    kind: str, query: dict[str, str], lists: dict[str, list[str]], *, apply: bool = False
) -> WriteOptions:
    """CreateOptions, UpdateOptions, PatchOptions or DeleteOptions from the query string."""
    problems: list[FieldError] = []
    dry_run = lists.get("dryRun", [])
    if any(v != "All" for v in dry_run):
        problems.append(_not_supported("dryRun", _go_strings(dry_run), ["All"]))
    validation = query.get("fieldValidation", "")
    if kind != "DeleteOptions" and validation not in FIELD_VALIDATION:
        problems.append(
            _not_supported("fieldValidation", f'"{validation}"', list(FIELD_VALIDATION))
        )
    manager = query.get("fieldManager", "")
    force = query.get("force")
    if kind == "PatchOptions":
        if not apply and force is not None:
            problems.append(_forbidden("force", "may not be specified for non-apply patch"))
        if apply and not manager:
            problems.append(
                FieldError(
                    "fieldManager",
                    "FieldValueRequired",
                    "Required value: is required for apply patch",
                )
            )
    if len(manager) > 128:
        problems.append(
            FieldError(
                "fieldManager", "FieldValueTooLong", "Too long: may not be more than 128 bytes"
            )
        )
    if problems:
        raise _invalid_options(kind, problems)
    return WriteOptions(
        dry_run=bool(dry_run),
        field_validation=validation or "Warn",
        field_manager=manager,
        force=force in ("true", "1", "True"),
    )


def list_options(query: dict[str, str], *, watch: bool) -> dict[str, Any]:
    """ListOptions after SetListOptionsDefaults (WatchList on) and ValidateListOptions."""
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    send = query.get("sendInitialEvents")
    send_initial = None if send is None else send in ("true", "1", "True")
    cont = query.get("continue", "")
    if watch and send_initial is None and not match and rv in ("", "0"):
        send_initial, match = True, NOT_OLDER_THAN
    if watch:
        problems = _watch_problems(match, send_initial, cont)
    else:
        problems = _list_problems(rv, match, send_initial, cont)
    if problems:
        raise _invalid_options("ListOptions", problems)
    return {"resourceVersion": rv, "match": match, "sendInitialEvents": send_initial}


def _watch_problems(match: str, send_initial: bool | None, cont: str) -> list[FieldError]:
    """ValidateListOptions for a watch: a resourceVersionMatch only with sendInitialEvents."""
    problems: list[FieldError] = []
    if send_initial is not None and match != NOT_OLDER_THAN:
        problems.append(
            _forbidden(
                "resourceVersionMatch",
                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
            )
        )
    if not match:
        return problems
    if send_initial is None:
        problems.append(
            _forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )
        )
    if match != NOT_OLDER_THAN:
        problems.append(_not_supported("resourceVersionMatch", f'"{match}"', [NOT_OLDER_THAN]))
    if cont:
        problems.append(
            _forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            )
        )
    return problems


def _list_problems(rv: str, match: str, send_initial: bool | None, cont: str) -> list[FieldError]:
    """ValidateListOptions for a list: a resourceVersionMatch needs a resourceVersion, and
    sendInitialEvents is a watch's only."""
    problems: list[FieldError] = []
    if match:
        if not rv:
            problems.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if cont:
            problems.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            problems.append(
                _not_supported("resourceVersionMatch", f'"{match}"', [EXACT, NOT_OLDER_THAN, ""])
            )
        if match == EXACT and rv == "0":
            problems.append(
                _forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial is not None:
        problems.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return problems


def include_object(query: dict[str, str]) -> str:
    value = query.get("includeObject", "")
    if value not in ("", "None", "Metadata", "Object"):
        raise ApiError(
            400,
            "BadRequest",
            "Unable to convert to Table as requested: includeObject: Invalid value: "
            f"\"{value}\": must be 'Metadata', 'Object', 'None', or empty",
        )
    return value or "Metadata"

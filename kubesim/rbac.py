"""RBAC for service-account tokens: Roles, ClusterRoles and their bindings from a file.

`--rbac FILE` takes YAML as `kubectl apply -f` does (several documents, or `kind: List`):
ServiceAccounts (each gets a bearer token, from a `kubernetes.io/service-account-token`
Secret in the file or made up, and a kubeconfig context of its user name), Roles,
ClusterRoles, RoleBindings and ClusterRoleBindings. Requests of those users are authorised
as plugin/pkg/auth/authorizer/rbac does: cluster role bindings, then the namespace's role
bindings; a rule allows when its verbs, API groups, resources (`*`, `resource/sub`,
`*/sub`) and resource names match. The bootstrap policy's discovery, basic-user and
cluster-admin roles are built in.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SA_PREFIX = "system:serviceaccount:"
RBAC_GROUP = "rbac.authorization.k8s.io"


class RbacFileError(Exception):
    pass


@dataclass(frozen=True)
class Attributes:
    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    path: str = ""


@dataclass
class Rule:
    verbs: list[str]
    api_groups: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    resource_names: list[str] = field(default_factory=list)
    non_resource_urls: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        return cls(
            list(raw.get("verbs") or []),
            list(raw.get("apiGroups") or []),
            list(raw.get("resources") or []),
            list(raw.get("resourceNames") or []),
            list(raw.get("nonResourceURLs") or []),
        )

    def allows(self, a: Attributes) -> bool:
        """rbac.RuleAllows."""
        if not ("*" in self.verbs or a.verb in self.verbs):
            return False
        if not a.resource_request:
            return any(
                url == "*"
                or url == a.path
                or (url.endswith("*") and a.path.startswith(url.rstrip("*")))
                for url in self.non_resource_urls
            )
        if not ("*" in self.api_groups or a.api_group in self.api_groups):
            return False
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        if not any(
            r in ("*", combined) or (a.subresource and r == f"*/{a.subresource}")
            for r in self.resources
        ):
            return False
        return not self.resource_names or a.name in self.resource_names

    def as_resource_rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"verbs": self.verbs}
        if self.api_groups:
            rule["apiGroups"] = self.api_groups
        if self.resources:
            rule["resources"] = self.resources
        if self.resource_names:
            rule["resourceNames"] = self.resource_names
        return rule


@dataclass
class Binding:
    kind: str  # RoleBinding | ClusterRoleBinding
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: list[dict[str, Any]]

    def applies_to(self, user: str, groups: tuple[str, ...]) -> dict[str, Any] | None:
        for subject in self.subjects:
            kind, name = subject.get("kind"), subject.get("name")
            if kind == "User" and name == user:
                return subject
            if kind == "Group" and name in groups:
                return subject
            if kind == "ServiceAccount":
                namespace = subject.get("namespace") or self.namespace
                if namespace and user == f"{SA_PREFIX}{namespace}:{name}":
                    return subject
        return None

    def describe(self, subject: dict[str, Any]) -> str:
        """The rule resolver's source text, as `RBAC: allowed by ...` names it."""
        if subject.get("kind") == "ServiceAccount":
            namespace = subject.get("namespace") or self.namespace
            who = f'{subject["kind"]} "{subject["name"]}/{namespace}"'
        else:
            who = f'{subject.get("kind")} "{subject.get("name")}"'
        name = self.name if self.kind == "ClusterRoleBinding" else f"{self.name}/{self.namespace}"
        return f'{self.kind} "{name}" of {self.role_kind} "{self.role_name}" to {who}'


DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]


def _bootstrap() -> tuple[dict[str, list[Rule]], list[Binding]]:
    roles = {
        "cluster-admin": [
            Rule(["*"], ["*"], ["*"]),
            Rule(["*"], non_resource_urls=["*"]),
        ],
        "system:discovery": [Rule(["get"], non_resource_urls=DISCOVERY_URLS)],
        "system:basic-user": [
            Rule(
                ["create"],
                ["authorization.k8s.io"],
                ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            ),
        ],
    }
    bindings = [
        Binding(
            "ClusterRoleBinding",
            "cluster-admin",
            "",
            "ClusterRole",
            "cluster-admin",
            [{"kind": "Group", "name": "system:masters"}],
        ),
        Binding(
            "ClusterRoleBinding",
            "system:discovery",
            "",
            "ClusterRole",
            "system:discovery",
            [{"kind": "Group", "name": "system:authenticated"}],
        ),
        Binding(
            "ClusterRoleBinding",
            "system:basic-user",
            "",
            "ClusterRole",
            "system:basic-user",
            [{"kind": "Group", "name": "system:authenticated"}],
        ),
    ]
    return roles, bindings


@dataclass
class ServiceAccount:
    namespace: str
    name: str
    token: str

    @property
    def user(self) -> str:
        return f"{SA_PREFIX}{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}")


class Rbac:
    def __init__(self) -> None:
        self.cluster_roles, self.bindings = _bootstrap()
        self.roles: dict[tuple[str, str], list[Rule]] = {}
        self.service_accounts: list[ServiceAccount] = []

    @classmethod
    def load(cls, path: Path) -> Rbac:
        try:
            documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise RbacFileError(f"{path}: {exc}") from None
        rbac = cls()
        objects: list[dict[str, Any]] = []
        for document in documents:
            if document.get("kind") == "List":
                objects += document.get("items") or []
            else:
                objects.append(document)
        tokens = {}
        for obj in objects:
            if (
                obj.get("kind") == "Secret"
                and obj.get("type") == "kubernetes.io/service-account-token"
            ):
                owner = ((obj.get("metadata") or {}).get("annotations") or {}).get(
                    "kubernetes.io/service-account.name"
                )
                token = (obj.get("stringData") or {}).get("token") or base64.b64decode(
                    (obj.get("data") or {}).get("token", "")
                ).decode()
                if owner and token:
                    tokens[((obj["metadata"].get("namespace") or "default"), owner)] = token
        for obj in objects:
            rbac._add(obj, tokens, path)
        return rbac

    def _add(self, obj: dict[str, Any], tokens: dict[tuple[str, str], str], path: Path) -> None:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace") or "default"
        if not name:
            raise RbacFileError(f"{path}: a {kind} without metadata.name")
        if kind == "ServiceAccount":
            token = tokens.get((namespace, name)) or secrets.token_urlsafe(24)
            self.service_accounts.append(ServiceAccount(namespace, name, token))
        elif kind == "ClusterRole":
            self.cluster_roles[name] = [Rule.parse(r) for r in obj.get("rules") or []]
        elif kind == "Role":
            self.roles[(namespace, name)] = [Rule.parse(r) for r in obj.get("rules") or []]
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef") or {}
            if ref.get("kind") not in ("Role", "ClusterRole") or not ref.get("name"):
                raise RbacFileError(
                    f"{path}: {kind} {name}: roleRef needs kind Role or ClusterRole and a name"
                )
            if kind == "ClusterRoleBinding" and ref.get("kind") == "Role":
                raise RbacFileError(f"{path}: ClusterRoleBinding {name} cannot refer to a Role")
            self.bindings.append(
                Binding(
                    kind,
                    name,
                    namespace if kind == "RoleBinding" else "",
                    ref["kind"],
                    ref["name"],
                    list(obj.get("subjects") or []),
                )
            )

    def _visit(self, user: str, groups: tuple[str, ...], namespace: str):  # type: ignore[no-untyped-def]
        """(source, rules or None, error) for every binding that applies, cluster-wide first."""
        ordered = [b for b in self.bindings if b.kind == "ClusterRoleBinding"]
        if namespace:
            ordered += [
                b for b in self.bindings if b.kind == "RoleBinding" and b.namespace == namespace
            ]
        for binding in ordered:
            subject = binding.applies_to(user, groups)
            if subject is None:
                continue
            if binding.role_kind == "ClusterRole":
                rules = self.cluster_roles.get(binding.role_name)
                missing = f'clusterrole.{RBAC_GROUP} "{binding.role_name}" not found'
            else:
                rules = self.roles.get((binding.namespace, binding.role_name))
                missing = f'role.{RBAC_GROUP} "{binding.role_name}" not found'
            yield binding.describe(subject), rules, None if rules is not None else missing

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        """(allowed, reason) as the RBAC authorizer answers."""
        errors = []
        for source, rules, error in self._visit(a.user, a.groups, a.namespace):
            if error:
                errors.append(error)
                continue
            if any(rule.allows(a) for rule in rules or []):
                return True, f"RBAC: allowed by {source}"
        if not errors:
            return False, ""
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return False, f"RBAC: {joined}"

    def rules_for(self, user: str, groups: tuple[str, ...], namespace: str) -> dict[str, Any]:
        """SelfSubjectRulesReview status."""
        resource_rules, non_resource_rules, errors = [], [], []
        for _, rules, error in self._visit(user, groups, namespace):
            if error:
                errors.append(error)
                continue
            for rule in rules or []:
                if rule.non_resource_urls:
                    non_resource_rules.append(
                        {"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}
                    )
                else:
                    resource_rules.append(rule.as_resource_rule())
        status: dict[str, Any] = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": bool(errors),
        }
        if errors:
            status["evaluationError"] = ", ".join(errors)
        return status


# --- the self-reviews ---
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Caller:
    user: str
    groups: tuple[str, ...]
    admin: bool  # in system:masters
    read_only: bool  # kubesim's read-only token, answered by its own rule


def access_review(rbac: Rbac, caller: Caller, spec: dict[str, Any]) -> dict[str, Any]:
    """SelfSubjectAccessReview status: may the caller do what the spec describes?"""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes") or {}
    verb = str((resource if resource is not None else non_resource).get("verb") or "")
    if caller.admin:
        return {"allowed": True}
    if caller.read_only:
        return {"allowed": verb in READ_VERBS}
    if resource is not None:
        attributes = Attributes(
            caller.user,
            caller.groups,
            verb,
            True,
            api_group=str(resource.get("group") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            name=str(resource.get("name") or ""),
            namespace=str(resource.get("namespace") or ""),
        )
    else:
        path = str(non_resource.get("path") or "")
        attributes = Attributes(caller.user, caller.groups, verb, False, path=path)
    allowed, reason = rbac.authorize(attributes)
    return {"allowed": allowed, **({"reason": reason} if reason else {})}


def rules_review(rbac: Rbac, caller: Caller, namespace: str) -> dict[str, Any]:
    """SelfSubjectRulesReview status: what the caller may do in `namespace`."""
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    if caller.admin:
        return {
            "resourceRules": [everything],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    if caller.read_only:
        return {
            "resourceRules": [{**everything, "verbs": list(READ_VERBS)}],
            "nonResourceRules": [],
            "incomplete": False,
        }
    return rbac.rules_for(caller.user, caller.groups, namespace)

"""What the fit check says besides its verdict: input it cannot read, and advice (pure).

Two kinds of trouble, kept apart on purpose:

- `ManifestError` — the input cannot be read at all (not YAML, a quantity that is not a
  quantity, a list where a mapping belongs). Nothing is evaluated; every problem names its
  document and field path, e.g. `document 2 (Deployment web):
  spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: "two" is not a quantity`.
- `Finding` — the input reads fine but a platform engineer would say something: the API server
  would refuse it (severity `error`), it will misbehave (`warning`), or it is worth knowing
  (`info`). The verdict is still computed, so the page can show both.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"  # the API server refuses the object as written
WARNING = "warning"
INFO = "info"


@dataclass(frozen=True)
class FieldProblem:
    """One field that cannot be read, with its path inside its document."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class DocumentProblem:
    document: int  # 1-based, in the order of the input; 0: the manifest as a whole
    label: str  # "Deployment web"; empty when the document has no kind or name yet
    problem: FieldProblem

    def __str__(self) -> str:
        if not self.document:
            return f"manifest: {self.problem}"
        where = f"document {self.document}" + (f" ({self.label})" if self.label else "")
        return f"{where}: {self.problem}"


class ManifestError(ValueError):
    """The manifest cannot be read; `problems` lists every reason found (at most a few dozen)."""

    def __init__(self, problems: list[DocumentProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in problems))

    def as_list(self) -> list[dict[str, object]]:
        return [
            {
                "document": p.document,
                "object": p.label,
                "field": p.problem.path,
                "message": p.problem.message,
                "text": str(p),
            }
            for p in self.problems
        ]


@dataclass(frozen=True)
class Finding:
    code: str  # stable, for the page to style and the API to filter: "gpu-without-pool-affinity"
    severity: str  # ERROR, WARNING or INFO
    message: str
    document: int = 0  # 0: not tied to one document
    path: str = ""  # field path inside the document, when one field is the cause
    pool: str = ""  # the pool it is about, when only one

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "document": self.document,
            "field": self.path,
            "pool": self.pool,
        }

"""The fit check is pure: no Django, no Kubernetes client, no HTTP, no clock — by its imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIT_MODULES = sorted(p.stem for p in (ROOT / "pools" / "core" / "fit").glob("*.py"))
FORBIDDEN = {
    "django",
    "rest_framework",
    "kubernetes",
    "urllib3",
    "requests",
    "http",
    "urllib",
    "socket",
    "ssl",
    "prometheus_api_client",
    "celery",
    "redis",
    "time",
    "datetime",
    "calendar",
    "random",
    "os",
    "threading",
    "kubesim",
}
ALLOWED_THIRD_PARTY = {"yaml"}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", FIT_MODULES)
def test_imports_only_the_standard_library_pyyaml_and_the_core(module: str) -> None:
    assert len(FIT_MODULES) >= 14
    for name in imports(ROOT / "pools" / "core" / "fit" / f"{module}.py"):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"pools/core/fit/{module}.py imports {name}"
        if top == "pools":
            assert name == "pools.core" or name.startswith("pools.core."), name
        else:
            assert top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names, name


def test_importing_the_fit_check_loads_no_framework() -> None:
    probe = (
        "import sys, pools.core.fit.check, pools.core.fit.api_objects; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'kubernetes', 'requests', 'urllib3', 'celery', 'redis', 'rest_framework'})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == ""

"""Every serializer the API reads a body with, found in the source of pools/api: each
`validated(X, request)`, and the pool viewset's. A new endpoint is checked without being
listed anywhere."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from pools.api.fleet import PoolSerializer

API = Path(__file__).resolve().parents[2] / "pools" / "api"


def input_serializers() -> dict[str, type]:
    found: dict[str, type] = {"PoolSerializer": PoolSerializer}
    for path in sorted(API.glob("*.py")):
        module = importlib.import_module(f"pools.api.{path.stem}")
        for name in re.findall(r"(?<!def )validated\((\w+),", path.read_text()):
            found[name] = getattr(module, name)
    return found

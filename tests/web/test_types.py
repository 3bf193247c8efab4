"""The Web App's API types are generated from the server's OpenAPI document and current."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest

from tests.web.conftest import ROOT

SCRIPT = ROOT / "web" / "scripts" / "openapi_types.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openapi_types", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("openapi_types", module)
    spec.loader.exec_module(module)
    return module


def test_generated_types_match_the_openapi_document() -> None:
    types = generator()
    if not types.GENERATOR.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{types.GENERATOR} is missing: npm ci in web/")
        pytest.skip("npm ci has not been run in web/")
    current = types.render_types(types.openapi_document())
    assert "MePublic" in current and "ChatEvent" in current
    assert types.SCHEMA_TS.read_text() == current, (
        "web/src/api/schema.d.ts is stale: run PYTHONPATH=src python web/scripts/openapi_types.py"
    )

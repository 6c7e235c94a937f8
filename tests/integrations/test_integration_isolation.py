"""Issue 8, item 4: each integration is an optional extra, so importing ctxwatch — or the
integrations package — imports no agent framework; each integration imports at most its own
(the Anthropic one needs none: it reads the SDK's responses by duck typing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "agents", "anthropic", "openai",
              "opentelemetry.instrumentation")


def loaded_after(statement: str) -> list[str]:
    """The framework modules in sys.modules after running `statement` in a fresh interpreter."""
    code = (f"import sys, json\n{statement}\n"
            f"print(json.dumps(sorted({{m.split('.')[0] if not m.startswith('opentelemetry.instrumentation') "
            f"else 'opentelemetry.instrumentation' for m in sys.modules}} & set({list(FRAMEWORKS)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_ctxwatch_imports_no_framework() -> None:
    assert loaded_after("import ctxwatch; from ctxwatch import ContextGuard; ContextGuard('x').observe("
                        "[{'role': 'user', 'content': 'hi'}])") == []


def test_the_integrations_package_imports_no_framework() -> None:
    assert loaded_after("import ctxwatch.integrations") == []


@pytest.mark.parametrize(("module", "allowed"), [
    ("anthropic", set()),
    ("openai_agents", {"agents", "openai"}),
    ("langchain", {"langchain", "langchain_core", "langgraph"}),
    ("langchain_instrumentor", {"opentelemetry.instrumentation"}),
])
def test_an_integration_imports_its_own_framework_only(module: str, allowed: set[str]) -> None:
    for name in allowed:
        pytest.importorskip(name)
    assert set(loaded_after(f"import ctxwatch.integrations.{module}")) <= allowed

"""Tool definition lists (what a request offers the model) -> `ToolSchema`s.

Accepted, per entry: OpenAI Chat ``{"type": "function", "function": {"name", ...}}`` (and
``{"type": "custom", "custom": {"name", ...}}``), OpenAI Responses ``{"type": "function" |
"custom" | ..., "name", ...}``, Anthropic ``{"name", "input_schema", ...}`` and server tools
``{"type": ..., "name"}``, LangChain tools (converted with langchain_core's
``convert_to_openai_tool``), and `ToolSchema` objects as they are. The schema's definition is the
canonical JSON of the whole entry, so any change to it is a new version of the tool; Anthropic's
``cache_control`` is left out, since moving a cache breakpoint does not change the tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InvalidContextError
from ..model import ToolSchema, canonical_json
from ._reader import DEFAULT_LIMITS, Limits, Reader
from .detect import FORMATS

_WRAPPED = ("function", "custom")  # Chat nests the definition under its type
_LANGCHAIN = ("langchain_core.", "langchain.")


def to_tool_schemas(tools: Iterable[Any], format: str | None = None,
                    limits: Limits = DEFAULT_LIMITS) -> list[ToolSchema]:
    """One ToolSchema per tool definition; `format` is only checked, each entry's shape is recognised."""
    if format is not None and format not in FORMATS:
        raise InvalidContextError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})")
    if isinstance(tools, (str, bytes, dict)) or not isinstance(tools, Iterable):
        raise InvalidContextError(f"expected a list of tool definitions, got {type(tools).__name__}")
    out: list[ToolSchema] = []
    for i, tool in enumerate(tools):
        if isinstance(tool, ToolSchema):
            out.append(tool)
            continue
        if format == "langchain" or callable(tool) or type(tool).__module__.startswith(_LANGCHAIN):
            tool = _langchain_tool(tool, i)
        out.append(_schema(tool, i, limits))
    return out


def _schema(tool: Any, i: int, limits: Limits) -> ToolSchema:
    try:
        r = Reader(None, limits)
        d = r.mapping(tool, None)
        kind = d.get("type")
        if kind in _WRAPPED and isinstance(d.get(kind), dict):
            name = r.key(d[kind], "name", f"{kind}.name")
        else:
            name = r.key(d, "name", "name")
        definition = {k: v for k, v in d.items() if k != "cache_control"}
        r.json(definition, "tool")
    except InvalidContextError as exc:
        raise InvalidContextError(exc.reason, source=f"tool {i}", field=exc.field) from None
    return ToolSchema(name, canonical_json(definition))


def _langchain_tool(tool: Any, i: int) -> dict:
    try:
        from langchain_core.utils.function_calling import convert_to_openai_tool
    except ImportError:
        raise InvalidContextError("reading LangChain tools needs langchain-core: "
                                  "pip install 'ctxwatch[langchain]'", source=f"tool {i}") from None
    try:
        return convert_to_openai_tool(tool)
    except Exception as exc:  # the converter raises several types for unusable tools
        raise InvalidContextError(f"not a tool definition LangChain can convert ({exc})",
                                  source=f"tool {i}") from None

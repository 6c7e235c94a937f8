"""SWE-agent ``.traj`` -> events.

One JSON document (read whole, under the session's size cap). ``trajectory[i].messages`` is the
exact buffer sent at step i, in OpenAI Chat shape; tool messages name their call in
``tool_call_ids`` (a list; the first id is used) and SWE-agent's own fields (``agent``,
``message_type``, ``thought``, ``action``) are left out. Each step is a `Snapshot`; where a buffer
is not the previous one plus appended messages (SWE-agent rewrites old tool outputs to "Old
environment output: (N lines omitted)"), a ``snapshot_diff`` `Mutation` comes before it. A
trajectory without per-step messages (older versions) gives one snapshot of its ``history``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..adapters import openai_chat
from ..model import Message
from .events import Event
from .files import SessionReadError
from .snapshots import Timeline

if TYPE_CHECKING:
    from .session import Session

_CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def chat_message(msg: Any) -> Any:
    """A SWE-agent message as an OpenAI Chat message (non-dicts are passed on for the adapter to refuse)."""
    if not isinstance(msg, dict):
        return msg
    out = {k: msg[k] for k in _CHAT_KEYS if k in msg}
    ids = msg.get("tool_call_ids")
    if "tool_call_id" not in out and isinstance(ids, list) and ids:
        out["tool_call_id"] = ids[0]
    return out


def events(session: Session) -> Iterator[Event]:
    doc = session.document()
    steps = doc.get("trajectory") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        raise SessionReadError(session.path, "not a SWE-agent trajectory (no 'trajectory' list)")
    buffers = [(f"trajectory[{i}]", s.get("messages")) for i, s in enumerate(steps)
               if isinstance(s, dict) and "messages" in s]
    if not buffers and isinstance(doc.get("history"), list):
        buffers = [("history", doc["history"])]
    timeline = Timeline()
    for where, messages in buffers:
        buffer = _buffer(session, where, messages)
        if buffer is not None:
            yield from timeline.push(buffer, where)


def _buffer(session: Session, where: str, messages: Any) -> tuple[Message, ...] | None:
    if not isinstance(messages, list):
        session.skip(None, "messages is not a list", where)
        return None
    out = []
    for i, msg in enumerate(messages):
        m = session.convert(openai_chat.read, chat_message(msg), None, f"{where}.messages[{i}]")
        if m is None:
            return None
        out.append(m)
    return tuple(out)

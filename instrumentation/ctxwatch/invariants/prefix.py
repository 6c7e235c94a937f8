"""Record 000, prefix identity and byte-stable re-rendering of the consumed prefix.

A rewrite may not alter what the model has consumed (the messages before the generation
boundary): such a rewrite is deferred (to the next session boundary, or applied as whole-pair
compaction). A pure truncation, a rollback of the latest turns, is not an alteration: every
remaining message sits on exactly the prefix it was generated from. A model-requested self-edit
of the consumed prefix is refused outright, being an untrusted proposal. When the runtime renders
the prompt itself, the rendering of an unchanged prefix must be byte-stable too. Turns the caller
appended since its last observe() (not read by the model yet) must come back verbatim at the end of
a rewrite; one that drops, changes or moves them is settled like a rewrite of the consumed prefix,
and stands for the proposal with them rebased on it (`with_unread_tail`).
"""

from __future__ import annotations

from typing import Any

from ..diff import Change
from ..model import Message
from ..report import Finding


def check_prefix(change: Change, allowed: bool = False) -> list[Finding]:
    """A `prefix_identity` finding when the rewrite alters the consumed prefix (unless `allowed`)."""
    truncation = change.prefix_len == len(change.after)
    if allowed or truncation or not change.touches_consumed_prefix:
        return []
    boundary = change.before.boundary
    details = {"first_difference": change.prefix_len, "boundary": boundary}
    if change.kind == "self_edit":
        return [Finding("prefix_identity", "a model-requested self-edit alters the consumed prefix "
                        f"(first difference at message {change.prefix_len}); self-edits are untrusted "
                        "proposals and are not deferred", details=details)]
    return [Finding(
        "prefix_identity",
        f"the rewrite alters the consumed prefix (messages 0..{boundary - 1}; first difference at message "
        f"{change.prefix_len}); the model generated its last turn from the old prefix. Such a rewrite waits for "
        "the next session boundary (guard.session_boundary()) unless resolve/apply can settle it at once by "
        "the guard's deferral mode (the report's resolution then says how; a prefix_identity warning says why "
        "not).",
        action="defer", details=details,
    )]


def check_unread_tail(change: Change, unread: int) -> list[Finding]:
    """A `prefix_identity` finding when the rewrite does not end with the `unread` turns the caller
    appended since its last observe() (the last messages of `change.before`), verbatim and in order:
    the model has not read them, so they are kept and the rewrite is settled like one that alters
    the consumed prefix (deferred, or whole-pair compaction, which keeps them after the frontier)."""
    if _ends_with_unread(change, unread):
        return []
    return [Finding(
        "prefix_identity",
        f"the rewrite does not end with the {unread} turn(s) appended since the last observe() (messages "
        f"{len(change.before_digests) - unread}..{len(change.before_digests) - 1}, not read by the model yet), "
        "verbatim and in order; they are kept, and the rewrite is deferred or settled by the guard's "
        "deferral mode", action="defer", details={"unread": unread})]


def with_unread_tail(change: Change, unread: int) -> tuple[Message, ...] | None:
    """The proposal rebased on the `unread` turns it does not end with (None when it does): the turns
    the guard keeps after it (deferred, settled or queued), appended where the proposal's own tail stops
    following them. A proposal made from a stale copy ends with the unread turns that copy held (the
    newest call, its result appended since): those give way to all of them, verbatim."""
    if _ends_with_unread(change, unread):
        return None
    after, kept = change.after_digests, change.before_digests[-unread:]
    held = next(k for k in range(min(unread, len(after)), -1, -1) if after[len(after) - k:] == kept[:k])
    return change.after[: len(after) - held] + change.before.messages[-unread:]


def _ends_with_unread(change: Change, unread: int) -> bool:
    return not unread or change.after_digests[-unread:] == change.before_digests[-unread:]


def check_rerender(change: Change, consumed: Any, rendered: Any) -> list[Finding]:
    """A `rerender` finding when the messages of the consumed prefix are unchanged but `rendered` (text,
    bytes or token ids) does not start with the rendering the model `consumed`."""
    if rendered is None or consumed is None or change.touches_consumed_prefix:
        return []
    if type(consumed) is not type(rendered):
        return [Finding("rerender", f"the re-render is a {type(rendered).__name__}, the consumed prompt a "
                        f"{type(consumed).__name__}: render both the same way")]
    if rendered[: len(consumed)] == consumed:
        return []
    at = next((i for i, (a, b) in enumerate(zip(consumed, rendered, strict=False)) if a != b),
              min(len(consumed), len(rendered)))
    return [Finding("rerender", f"the messages of the consumed prefix are unchanged but their rendering is "
                    f"not byte-stable: it differs at position {at} of {len(consumed)}; make the renderer "
                    "deterministic (key order, whitespace, timestamps)", details={"position": at})]

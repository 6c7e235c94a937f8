"""Bad input to the guard: a clear error naming what and where; the caller's data never mutated."""

import copy

import pytest

from ctxwatch import ContextGuard, InvalidContextError, Message, TextPart

from conversations import record_000_session


def test_unknown_role_and_bad_parts_are_rejected_when_the_message_is_made():
    with pytest.raises(ValueError, match="unknown message role 'robot'"):
        Message("robot", "hi")
    with pytest.raises(TypeError, match="part 1 of a user message is a dict"):
        Message("user", [TextPart("a"), {"type": "text"}])


@pytest.mark.parametrize("bad", ["just a string", b"bytes", 42, None])
def test_a_non_list_context_is_refused_with_its_type(bad):
    guard = ContextGuard("bad-input")
    with pytest.raises(InvalidContextError, match="expected a list of messages"):
        guard.check(bad, kind="append")


def test_dict_messages_with_bad_fields_name_the_index_and_field():
    guard = ContextGuard("bad-dicts", format="openai_chat")
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "tool", "content": "orphan without id"}]
    snapshot = copy.deepcopy(msgs)
    with pytest.raises(InvalidContextError) as err:
        guard.observe(msgs)
    assert err.value.index == 2 and "tool_call_id" in str(err.value)
    assert msgs == snapshot
    with pytest.raises(InvalidContextError) as err:
        guard.observe([{"role": "user", "content": 12}])
    assert err.value.index == 0 and "content" in str(err.value)


def test_unknown_kind_and_enforcement_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown invariant 'literals'"):
        ContextGuard("x", enforce={"literals": "abort"})
    with pytest.raises(ValueError, match="'maybe' is not an action of this invariant"):
        ContextGuard("x", enforce={"literal_loss": "maybe"})
    guard = ContextGuard("x")
    with pytest.raises(ValueError, match="kind must be one of"):
        guard.check(record_000_session(), kind="summarise")


def test_a_failing_check_refuses_the_rewrite(monkeypatch):
    """Checks fail closed: an exception inside a check becomes an aborting finding."""
    guard = ContextGuard("fail-closed")
    msgs = record_000_session()
    guard.observe(msgs, boundary=0)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(guard.policy, "check", broken)
    report = guard.check(msgs[:1] + msgs[6:], kind="compact")
    assert report.decision == "abort"
    assert report.violations == ["policy_isolation"]
    assert "failed internally (RuntimeError)" in report.explain()
    assert "boom" not in report.explain()  # an exception's text may quote content: only its type is named


def test_huge_and_deeply_nested_content_does_not_crash_the_guard():
    guard = ContextGuard("huge")
    big = Message("user", "x " * 2_000_000)
    report = guard.check([Message("system", "s"), big], kind="append")
    assert report.decision == "patch"
    nested: list = []
    cur = nested
    for _ in range(5000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    with pytest.raises(InvalidContextError):
        ContextGuard("nested", format="openai_chat").observe([{"role": "user", "content": nested}])

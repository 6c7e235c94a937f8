"""docs/guard.md's own agent loops, run long in one conversation, with a model doing real work.

The shape of the review's defect D1: the OpenAI Chat and Anthropic loops of docs/guard.md, their
naive summarizer, and a fake model whose turns vary as real ones do. Each task is a user question;
each model step makes 1-3 parallel `lookup` calls (or, three times in ten once the task has begun,
answers in text, which ends the task); each result is a JSON record of the SKU, its units and 1-3
warehouse bins. Whenever the context exceeds 30 messages, right after the tool results are
appended, the loop compacts with docs/guard.md's summarizer: the oldest 60% (after the system
prompt in OpenAI Chat; pairs kept whole) become one user note — ``"Earlier: "`` and the folded
tool results (`note="results"`, the docs' summarizer verbatim), or only how many messages it
covers (`note="count"`, docs/alarm.md's "Summary of N earlier messages: …"). No session boundary:
one long conversation. Healthy — lossy, bounded, new work every cycle, nothing converges — but
the buffer after each compaction moves by ±25% from one cycle to the next, since the part kept
holds whatever number of calls and bins the last steps had.

`docs_loop(seed, fmt, note=..., guarded=...)` gives a `SyntheticLoop` whose cycles hold the
buffers as ctxwatch Messages: with `guarded` the loop runs through a real `ContextGuard` with its
defaults (so Q_t is what the guard applied: its whole-pair conversion of the summary), its
contraction check only warning, so every loop runs to its end whatever the alarm says; without,
Q_t is the summarizer's proposal.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import partial

from ..adapters import to_messages
from .loops import Cycle, SyntheticLoop
from .toolloop import FORMATS, count_note, fold_cut

NOTES = ("results", "count")
SYSTEM = "You are an inventory agent. Look SKUs up before answering."
COMPACT_ABOVE = 30  # messages, as docs/guard.md's loops


class BusyModel:
    """A seeded fake model and tool of docs/guard.md's stock loop, in `fmt`'s own message shape."""

    def __init__(self, seed: int, fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
        self.fmt, self.rng, self.step_no, self.begun = fmt, random.Random(seed), 0, False

    def opening(self) -> list[dict]:
        """The context before the first task (OpenAI Chat: the system prompt; Anthropic sends it apart)."""
        return [{"role": "system", "content": SYSTEM}] if self.fmt == "openai_chat" else []

    def question(self, task: int) -> dict:
        """The user's next task; the model's first step on it always calls a tool."""
        self.begun = False
        return {"role": "user", "content": f"How many units of SKU-{task:05d} and its neighbours?"}

    def compacts_now(self) -> bool:
        """Whether the loop compacts at this step, once the context is over `COMPACT_ABOVE` messages."""
        return True

    def _result(self, sku: str, call_id: str) -> str:
        rng = self.rng
        bins = [f"/wh/{rng.randint(1, 9)}/{rng.randint(1, 40):02d}/{sku.lower()}.json"
                for _ in range(rng.randint(1, 3))]
        return json.dumps({"sku": sku, "units": rng.randint(0, 999), "bins": bins})

    def step(self) -> list[dict]:
        """The model's next reply and, when it calls tools, their results (the task goes on); a text
        answer alone ends the task."""
        rng, self.step_no = self.rng, self.step_no + 1
        if self.begun and rng.random() >= 0.7:
            answer = f"Checked; total {rng.randint(0, 9999)} units."
            return [{"role": "assistant", "content": answer if self.fmt == "openai_chat"
                     else [{"type": "text", "text": answer}]}]
        self.begun = True
        calls = [(f"call_{self.step_no}_{k}", f"SKU-{rng.randint(0, 99999):05d}") for k in range(rng.randint(1, 3))]
        if self.fmt == "openai_chat":
            return [{"role": "assistant", "tool_calls": [
                        {"id": i, "type": "function",
                         "function": {"name": "lookup", "arguments": json.dumps({"sku": s})}} for i, s in calls]},
                    *({"role": "tool", "tool_call_id": i, "content": self._result(s, i)} for i, s in calls)]
        lead = [{"type": "text", "text": "Looking up."}] if rng.random() < 0.5 else []
        uses = [{"type": "tool_use", "id": i, "name": "lookup", "input": {"sku": s}} for i, s in calls]
        return [{"role": "assistant", "content": lead + uses},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": self._result(s, i)}
                                             for i, s in calls]}]


QUIET_RESULTS: dict[str, tuple[str, ...]] = {
    "acks": ("ok", "[]", "{call}: {units} units"),  # the review's F2 (repro_2.py)
    "status": ('{{"status": "ok"}}', "{{}}", '{{"units": {units}}}', "null"),
    "prose": ("Done.", "No matching rows.", "Found {units} units in stock.", "Updated 1 record."),
}
"""What tools that do not echo their input return: acknowledgements, empty or bare JSON, boilerplate prose."""


class QuietModel(BusyModel):
    """`BusyModel` with tools whose results do not name the SKU asked for (most real tools: "ok",
    "[]", "toolu_…: 45 units"), the shape of the review's F2: 1-4 parallel calls a step (once a task
    has begun, two steps in seven answer in text and end it), the user's questions naming no
    literal, SKUs drawn from a seeded range (some loops reuse them), compaction at a random step
    (one in two) once the context is over `COMPACT_ABOVE` messages."""

    def __init__(self, seed: int, fmt: str, vocabulary: str) -> None:
        super().__init__(seed, fmt)
        self.vocabulary = QUIET_RESULTS[vocabulary]
        self.skus = self.rng.choice((100, 1000, 100_000))

    def question(self, task: int) -> dict:
        self.begun = False
        return {"role": "user", "content": f"Count the SKUs on shelf {task % 1000}, one by one."}

    def compacts_now(self) -> bool:
        return self.rng.random() < 0.5

    def _result(self, sku: str, call_id: str) -> str:
        return self.rng.choice(self.vocabulary).format(call=call_id, units=self.rng.randrange(999))

    def step(self) -> list[dict]:
        rng, self.step_no = self.rng, self.step_no + 1
        k = rng.choice((0, 0, 1, 1, 2, 3, 4) if self.begun else (1, 1, 1, 2, 3, 4))
        lead = rng.choice(("Checking.", "Next batch.", "OK.", f"Looking at batch {self.step_no % 1000}."))
        if k == 0:
            return [{"role": "assistant", "content": lead if self.fmt == "openai_chat"
                     else [{"type": "text", "text": lead}]}]
        self.begun = True
        calls = [(f"{'call' if self.fmt == 'openai_chat' else 'toolu'}_{self.step_no:05d}{j}",
                  f"SKU-{rng.randrange(self.skus):05d}") for j in range(k)]
        said = rng.random() < 0.6
        if self.fmt == "openai_chat":
            return [{"role": "assistant", "content": lead if said else None, "tool_calls": [
                        {"id": i, "type": "function",
                         "function": {"name": "lookup", "arguments": json.dumps({"sku": s})}} for i, s in calls]},
                    *({"role": "tool", "tool_call_id": i, "content": self._result(s, i)} for i, s in calls)]
        uses = [{"type": "tool_use", "id": i, "name": "lookup", "input": {"sku": s}} for i, s in calls]
        return [{"role": "assistant", "content": ([{"type": "text", "text": lead}] if said else []) + uses},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": self._result(s, i)}
                                             for i, s in calls]}]


def summarize(messages: list[dict], fmt: str, note: str) -> list[dict]:
    """docs/guard.md's naive summarizer of `fmt`: the oldest 60% (after the OpenAI system prompt)
    become one user note, the rest starting where a pair is whole (Anthropic: at an assistant turn)."""
    openai = fmt == "openai_chat"
    head, body = (messages[:1], messages[1:]) if openai else ([], messages)
    cut = fold_cut(body, fmt)
    if note == "count":
        text = count_note(cut)
    elif openai:
        text = "Earlier: " + "; ".join(m["content"] for m in body[:cut] if m["role"] == "tool")
    else:
        text = "Earlier: " + "; ".join(b["content"] for m in body[:cut] if isinstance(m["content"], list)
                                       for b in m["content"] if b["type"] == "tool_result")
    return head + [{"role": "user", "content": text}] + body[cut:]


def docs_loop(seed: int, fmt: str = "openai_chat", *, note: str = "results", guarded: bool = True,
              compactions: int = 150, halting: bool = False, results: str = "echo") -> SyntheticLoop:
    """Run the loop until it has compacted `compactions` times; one cycle per compaction. With
    `halting` the guard enforces every default, its contraction check included (a halt raises
    `ContractionRegimeError` out of the loop, as it would out of the agent's). `results` is "echo"
    (`BusyModel`: the result names its SKU) or a `QUIET_RESULTS` vocabulary (`QuietModel`)."""
    if note not in NOTES:
        raise ValueError(f"note must be one of {NOTES}, got {note!r}")
    if results != "echo" and results not in QUIET_RESULTS:
        raise ValueError(f"results must be 'echo' or one of {tuple(QUIET_RESULTS)}, got {results!r}")
    model = BusyModel(seed, fmt) if results == "echo" else QuietModel(seed, fmt, results)
    guard = None
    if guarded:
        from ..guard import ContextGuard  # the guard imports the detector; keep `simulate` light to import
        guard = ContextGuard("docs-loop", agent="inventory", format=fmt,
                             enforce=None if halting else {"contraction": "warn"})
    messages, cycles, task = model.opening(), [], 0
    while len(cycles) < compactions:
        messages.append(model.question(task))
        task += 1
        while len(cycles) < compactions:
            if guard is not None:
                guard.observe(messages)
            turn = model.step()
            messages += turn
            if len(turn) == 1:
                break  # an answer: the task is done
            if len(messages) > COMPACT_ABOVE and model.compacts_now():
                proposal = summarize(messages, fmt, note)
                after = proposal if guard is None else list(guard.apply(proposal, kind="compact"))
                pre, post = tuple(to_messages(messages, fmt)), tuple(to_messages(after, fmt))
                cycles.append(Cycle(len(cycles) + 1, pre, post))
                messages = after
    return SyntheticLoop(family_name(fmt, note, guarded, results), seed, tuple(cycles), None,
                         {"format": fmt, "note": note, "results": results, "tasks": task})


def family_name(fmt: str, note: str, guarded: bool, results: str = "echo") -> str:
    quiet = "" if results == "echo" else f", quiet tools ({results})"
    return (f"docs loop{' through the guard' if guarded else ''}, {fmt}{', count note' if note == 'count' else ''}"
            f"{quiet}")


DOCS_LOOP_FAMILIES: dict[str, Callable[[int], SyntheticLoop]] = {
    **{family_name(fmt, note, guarded): partial(docs_loop, fmt=fmt, note=note, guarded=guarded)
       for guarded, note in ((False, "results"), (True, "results"), (True, "count")) for fmt in FORMATS},
    **{family_name(fmt, "results", True, results): partial(docs_loop, fmt=fmt, results=results)
       for results in QUIET_RESULTS for fmt in FORMATS},
}
"""Twelve healthy families: the docs' summarizer as proposed and through the guard, and the count
note through the guard (the review's D1 repro), each in both provider shapes; and the docs'
summarizer through the guard with tools whose results do not echo their input (the review's F2),
three result vocabularies in both shapes."""

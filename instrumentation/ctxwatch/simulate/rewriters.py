"""Real rewrite functions for simulated loops: each maps a list of messages to a new list.

None of them replays canned output; each computes its result from the buffer it is given, the
way a model-driven compactor would, and each reproduces one behaviour of record 003:

- `ExtractiveSummarizer` scores sentences by salience (how often their content words occur in
  the buffer) and keeps the top ones in their original order; with `preserve_literals` every
  protected literal of a dropped sentence is carried over verbatim (the record's condition).
- `SalienceReranker` orders messages by similarity to the current first payload message (the
  "subgoal") plus recency. Salience is recomputed against the already reordered buffer, so
  applying it twice differs from once (ordering inversion) — unless a fixed `index` is given.
- `InstructionAbsorbingRewriter` summarises and writes its own directive into the buffer as a
  note to self; each absorbed note it reads back compounds the next compression (instruction
  absorption, converging on a directive-only fixed point).
- `ParaphrasingRewriter` replaces protected literals by prose ("the config file we found"):
  sentinel drift. `last_paraphrased` tells what it replaced in its latest call.
- `TaskKeeping` keeps the user's task verbatim around any other rewrite (Codex's compaction).
- `FoldingSummarizer` folds the oldest share of the history into a short summary with every
  literal of what it folds removed, keeping the rest verbatim (a naive sliding summarizer).
- `ConvergingSummarizer` rewrites the whole history into one summary that keeps the previous
  summary whole and an ever smaller share of what is new (a summary-of-summary chain converging
  on a fixed text).

System messages are never rewritten by any of them.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from ..literals import LiteralRegistry
from ..model import Message
from .text import STOPWORDS

SUMMARY_PREFIX = "Summary of earlier work:"
VERBATIM_PREFIX = "Verbatim:"
DEFAULT_DIRECTIVE = "compress to essentials and remove redundant steps"

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_WORD = re.compile(r"[a-z]+")


def sentences(text: str) -> list[str]:
    """Sentences of `text`, split after . ! or ? followed by a capitalised word."""
    return [s for s in _SENTENCE_BREAK.split(text.strip()) if s]


def _content_words(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.lower()) if w not in STOPWORDS]


def _split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    system = [m for m in messages if m.role == "system"]
    return system, [m for m in messages if m.role != "system"]


def _pool(messages: Sequence[Message]) -> list[str]:
    """The sentences of `messages`, a previous summary's heading removed."""
    return [s for m in messages for s in sentences(m.text.removeprefix(SUMMARY_PREFIX))]


def rank_sentences(pool: Sequence[str]) -> list[int]:
    """Indexes of `pool` from most to least salient (ties: earlier first)."""
    freq = Counter(w for s in pool for w in _content_words(s))

    def score(i: int) -> tuple[float, int]:
        words = _content_words(pool[i])
        return (-(sum(freq[w] for w in words) / len(words)) if words else 0.0, i)

    return sorted(range(len(pool)), key=score)


class ExtractiveSummarizer:
    """Condenses the payload (all but system messages and the last `keep_last`) into one summary.

    ratio: fraction of the payload's sentences to keep. budget: when set, a buffer whose payload
    has at most this many words is returned unchanged (so the summarizer is idempotent on its own
    output once it fits). preserve_literals: carry every literal of a dropped sentence verbatim.
    """

    def __init__(self, ratio: float = 0.5, *, budget: int | None = None, keep_last: int = 2,
                 preserve_literals: bool = False, registry: LiteralRegistry | None = None) -> None:
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"ratio must be in (0, 1], got {ratio}")
        self.ratio = ratio
        self.budget = budget
        self.keep_last = keep_last
        self.preserve_literals = preserve_literals
        self.registry = registry or LiteralRegistry()

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        system, rest = _split_system(messages)
        if self.budget is not None and sum(len(m.text.split()) for m in rest) <= self.budget:
            return list(messages)
        cut = max(0, len(rest) - self.keep_last)
        old, recent = rest[:cut], rest[cut:]
        if not old:
            return list(messages)
        pool = _pool(old)
        kept = self.select(pool, self.ratio)
        return system + [self._summary(pool, kept)] + recent

    def select(self, pool: Sequence[str], ratio: float, always: Sequence[int] = ()) -> list[int]:
        """Indexes of the sentences kept (original order): the top `ratio` by salience plus `always`."""
        n_keep = max(1, round(len(pool) * ratio)) if pool else 0
        return sorted(set(rank_sentences(pool)[:n_keep]) | set(always))

    def _summary(self, pool: Sequence[str], kept: Sequence[int], notes: Sequence[str] = ()) -> Message:
        body = [pool[i] for i in kept]
        if self.preserve_literals:
            kept_set = set(kept)
            carried = self.registry.extract(" ".join(body))
            dropped_text = " ".join(s for i, s in enumerate(pool) if i not in kept_set)
            dropped = self.registry.extract(dropped_text) - carried
            if dropped:
                body.append(f"{VERBATIM_PREFIX} {', '.join(sorted(dropped))}.")
        return Message("assistant", "\n".join([SUMMARY_PREFIX, " ".join([*notes, *body])]))


class InstructionAbsorbingRewriter(ExtractiveSummarizer):
    """A summarizer that copies its directive into the buffer and obeys every copy it finds.

    With n notes already absorbed, the payload is cut to ``ratio ** (n + 1)`` of its sentences
    (each note re-executes the compression); the notes themselves are always kept, being "the
    essentials", and one more note is added, so the buffer converges on the directive alone.
    """

    def __init__(self, ratio: float = 0.6, *, directive: str = DEFAULT_DIRECTIVE, keep_last: int = 0,
                 registry: LiteralRegistry | None = None) -> None:
        super().__init__(ratio, keep_last=keep_last, registry=registry)
        self.directive = directive
        self._marker = directive.lower()

    def absorbed(self, messages: Sequence[Message]) -> int:
        """How many copies of the directive the buffer already holds."""
        return sum(m.text.lower().count(self._marker) for m in messages)

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        system, rest = _split_system(messages)
        cut = max(0, len(rest) - self.keep_last)
        old, recent = rest[:cut], rest[cut:]
        n = self.absorbed(old)
        pool = _pool(old)
        notes = [s for s in pool if self._marker in s.lower()]
        payload = [s for s in pool if self._marker not in s.lower()]
        kept = self.select(payload, self.ratio ** (n + 1)) if payload else []
        note = f"Note to self (pass {n + 1}): {self.directive}."
        return system + [self._summary(payload, kept, [*notes, note])] + recent


class SalienceReranker:
    """Orders the payload by salience: similarity to the subgoal plus recency.

    The subgoal is the first payload message of the buffer it is given — so a second pass ranks
    against a different subgoal and yields a different order. With `index` (digest -> score,
    computed once against a stable buffer) the order is a pure function of content: idempotent.
    """

    def __init__(self, recency: float = 0.3, index: Mapping[int, float] | None = None) -> None:
        self.recency = recency
        self.index = index

    def scores(self, messages: Sequence[Message]) -> dict[int, float]:
        """Salience of each payload message (by position in `messages`)."""
        payload = [i for i, m in enumerate(messages) if m.role != "system"]
        if not payload:
            return {}
        anchor = set(_content_words(messages[payload[0]].text))
        out = {}
        for rank, i in enumerate(payload):
            words = set(_content_words(messages[i].text))
            overlap = len(words & anchor) / len(words | anchor) if words | anchor else 0.0
            out[i] = overlap + self.recency * rank / len(payload)
        return out

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        system, _ = _split_system(messages)
        if self.index is not None:
            payload = [m for m in messages if m.role != "system"]
            return system + sorted(payload, key=lambda m: -self.index.get(m.digest, 0.0))
        scores = self.scores(messages)
        order = sorted(scores, key=lambda i: (-scores[i], i))
        return system + [messages[i] for i in order]


_PROSE = (
    (re.compile(r"^(?:https?|s3|gs|file)://"), ("the dashboard link", "the URL from before", "that page")),
    (re.compile(r"^[~.]*/"), ("the config file we found", "that file", "the path from earlier")),
    (re.compile(r"^[0-9a-fA-F]{8}-"), ("the request id", "that identifier")),
    (re.compile(r"^[A-Z]+-\d+$"), ("the ticket mentioned earlier", "that ticket")),
    (re.compile(r"^(?:E\d+|[A-Z]+_[A-Z_]+)$"), ("the timeout error", "the error we saw", "that error code")),
    (re.compile(r"^[0-9a-f]+$"), ("that commit", "the hash from the log")),
)


class ParaphrasingRewriter:
    """Replaces a seeded fraction `rate` of protected literals with prose describing them."""

    def __init__(self, rate: float = 0.5, *, seed: int = 0, registry: LiteralRegistry | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        self.rate = rate
        self.rng = random.Random(seed)
        self.registry = registry or LiteralRegistry()
        self.last_paraphrased: dict[str, str] = {}

    def prose(self, literal: str) -> str:
        for pattern, choices in _PROSE:
            if pattern.search(literal):
                return self.rng.choice(choices)
        return "the value we noted"

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        found = sorted(self.registry.of_all(m for m in messages if m.role != "system"))
        chosen = [lit for lit in found if self.rng.random() < self.rate]
        # longest first, so a literal that contains another is replaced whole
        self.last_paraphrased = {lit: self.prose(lit) for lit in sorted(chosen, key=len, reverse=True)}
        out = []
        for m in messages:
            text = m.text
            if m.role == "system" or not any(lit in text for lit in self.last_paraphrased):
                out.append(m)
                continue
            for lit, prose in self.last_paraphrased.items():
                text = text.replace(lit, prose)
            out.append(Message(m.role, text, id=m.id, name=m.name))
        return out


class FoldingSummarizer:
    """Folds the oldest `fold` share of the non-system messages into one summary of their most
    salient sentences (`ratio` of them) with every protected literal removed; the rest is kept."""

    def __init__(self, fold: float = 0.6, ratio: float = 0.3, *, registry: LiteralRegistry | None = None) -> None:
        self.fold, self.ratio = fold, ratio
        self.registry = registry or LiteralRegistry()

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        system, rest = _split_system(messages)
        cut = round(len(rest) * self.fold)
        if cut < 2:
            return list(messages)
        pool = _pool(rest[:cut])
        kept = sorted(rank_sentences(pool)[:max(1, round(len(pool) * self.ratio))])
        text = " ".join(pool[i] for i in kept)
        for literal in sorted(self.registry.extract(text), key=len, reverse=True):
            text = text.replace(literal, "")
        return system + [Message("assistant", f"{SUMMARY_PREFIX} {' '.join(text.split())}")] + rest[cut:]


class DigestSummarizer(ExtractiveSummarizer):
    """An extractive summarizer that keeps evenly spaced sentences instead of the most salient ones:
    a digest of the whole history in which an earlier summary has no more weight than its share."""

    def select(self, pool: Sequence[str], ratio: float, always: Sequence[int] = ()) -> list[int]:
        n_keep = max(1, round(len(pool) * ratio)) if pool else 0
        return sorted({round(i * len(pool) / n_keep) for i in range(n_keep)} | set(always))


class TaskKeeping:
    """Wraps a rewrite so that the user's first message (the task) is kept verbatim after the system
    messages and out of what the rewrite sees, as Codex keeps the user's messages in its
    replacement history."""

    def __init__(self, rewrite: Callable[[Sequence[Message]], Sequence[Message]]) -> None:
        self.rewrite = rewrite

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        task = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if task is None:
            return list(self.rewrite(messages))
        rest = [*messages[:task], *messages[task + 1:]]
        out = list(self.rewrite(rest))
        if out == rest:
            return list(messages)
        system, payload = _split_system(out)
        return [*system, messages[task], *payload]


class ConvergingSummarizer:
    """Rewrites the history into one summary: every sentence of the previous summary, then the top
    ``ratio ** pass`` of the new sentences by salience (pass = how many summaries preceded this
    one), with every protected literal paraphrased away. The summary keeps its gist and takes in
    ever less of what is new: consecutive summaries become alike while the literals keep going."""

    def __init__(self, ratio: float = 0.5, *, registry: LiteralRegistry | None = None) -> None:
        self.ratio = ratio
        self.registry = registry or LiteralRegistry()

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        system, rest = _split_system(messages)
        summaries = [m for m in rest if m.text.startswith((CONVERGING_PREFIX, SUMMARY_PREFIX))]
        passes = max((int(found.group(1)) for m in summaries if (found := _PASS.search(m.text))), default=0)
        old = [s for m in summaries for s in sentences(_PASS.sub("", m.text.removeprefix(SUMMARY_PREFIX), count=1))
               if not s.startswith(VERBATIM_PREFIX)]
        new = [s for m in rest if m not in summaries for s in sentences(m.text)]
        keep = sorted(rank_sentences(new)[:int(len(new) * self.ratio ** (passes + 1))])
        body = " ".join([*old, *(new[i] for i in keep)])
        for literal in sorted(self.registry.extract(body), key=len, reverse=True):
            body = body.replace(literal, "the value")
        return system + [Message("assistant", f"{CONVERGING_PREFIX} {passes + 1}): {body}")]


CONVERGING_PREFIX = "Summary (pass"
_PASS = re.compile(r"^Summary \(pass (\d+)\): ")

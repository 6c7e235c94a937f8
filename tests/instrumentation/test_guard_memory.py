"""A guard's memory is bounded by its bounds, not by how long it runs (review D3): the provenance log
keeps its newest entries and counts the ones it dropped, and stays verifiable and honest when
exported; over thousands of turns of a healthy compacting loop the traced memory stops growing."""

import json
import random
import tracemalloc

import pytest

from ctxwatch import ContextGuard, verify_jsonl
from ctxwatch.fingerprint import CACHE_BYTES, Fingerprinter
from ctxwatch.literals import LiteralRegistry
from ctxwatch.model import Message
from ctxwatch.provenance import DEFAULT_MAX_ENTRIES, ProvenanceLog

from conversations import assistant, user


def logged(log: ProvenanceLog, passes: int) -> None:
    for n in range(passes):
        log.record(kind="compact", pass_number=n + 1, removed=[(0, user(f"old {n}"))],
                   added=[(0, assistant(f"summary {n}"))])


def test_the_provenance_log_keeps_its_newest_entries_counts_the_rest_and_still_verifies(tmp_path):
    log = ProvenanceLog(max_entries=50)
    logged(log, 100)                                   # two entries a pass
    entries = list(log)
    assert len(log) == 50 and log.dropped == 150
    assert entries[0].seq == 150 and entries[-1].seq == 199 and entries[0].prev == log.anchor
    check = log.verify()
    assert check.ok and check.entries == 50 and check.dropped == 150
    path = tmp_path / "chain.jsonl"
    assert log.export_jsonl(path) == 50
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"truncated": 150, "head": log.anchor}   # the export says what was dropped
    exported = verify_jsonl(path)
    assert exported.ok and exported.dropped == 150 and exported.entries == 50
    tampered = [json.loads(line) for line in lines]
    tampered[3]["kind"] = "prune"
    path.write_text("".join(json.dumps(e) + "\n" for e in tampered))
    assert verify_jsonl(path).first_bad == 152
    path.write_text("\n".join(lines[1:]) + "\n")       # the truncation line removed: not a whole chain
    headless = verify_jsonl(path)
    assert not headless.ok and "expected 0" in headless.reason


def test_the_bound_can_be_changed_or_lifted():
    log = ProvenanceLog()
    assert log.max_entries == DEFAULT_MAX_ENTRIES
    logged(log, 10)
    log.max_entries = 5
    assert len(log) == 5 and log.dropped == 15 and log.verify().ok
    log.max_entries = None
    logged(log, 10)
    assert len(log) == 25 and log.verify().ok
    with pytest.raises(ValueError, match="max_entries must be a positive number"):
        log.max_entries = 0


def test_a_bad_line_in_an_export_is_named(tmp_path):
    log = ProvenanceLog()
    logged(log, 2)
    path = tmp_path / "chain.jsonl"
    log.export_jsonl(path)
    path.write_text(path.read_text() + "[1, 2]\n")
    check = verify_jsonl(path)
    assert not check.ok and check.first_bad == 4 and "not an entry" in check.reason


def run_turns(guard: ContextGuard, turns: int, rng: random.Random, messages: list[dict]) -> list[dict]:
    """The review's healthy loop: a tool call a turn, the docs' summarizer when over 30 messages."""
    start = sum(1 for m in messages if m["role"] == "user")
    for t in range(start, start + turns):
        messages.append({"role": "user", "content": f"task {t} ORD-{rng.getrandbits(32):08x}"})
        guard.observe(messages)
        call = {"id": f"call_{t}", "type": "function", "function": {"name": "f", "arguments": json.dumps({"q": t})}}
        messages.append({"role": "assistant", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{t}",
                         "content": f"result {t} /srv/{rng.getrandbits(40):x}.json"})
        guard.observe(messages)
        messages.append({"role": "assistant", "content": f"answer {t}"})
        if len(messages) > 30:
            body = messages[1:]
            cut = int(len(body) * 0.6)
            while cut < len(body) and body[cut]["role"] == "tool":
                cut += 1
            note = "Earlier: " + "; ".join(m["content"] for m in body[:cut] if m["role"] == "tool")
            messages = guard.apply([messages[0], {"role": "user", "content": note}] + body[cut:], kind="compact")
    return messages


def test_a_long_healthy_loop_stops_growing_once_its_bounds_are_reached():
    """Bounds set small so that they are reached early: from then on 600 more turns add no more than
    the caches' fill level can vary (~0.1 MB measured; with main's unbounded log and 200k-entry literal
    cache the same 600 turns grew 4.8 MB)."""
    guard = ContextGuard("memory", enforce={"contraction": "warn"}, literals=LiteralRegistry(cache_limit=1000))
    guard.provenance.max_entries = 1000
    guard.provenance.pre_images.max_bytes = 256 * 1024
    guard._fingerprinter.cache_limit = 1000  # the fingerprint cache's own bound (8192 by default)
    rng = random.Random(1)
    messages = [{"role": "system", "content": "sys"}]
    tracemalloc.start()
    try:
        messages = run_turns(guard, 600, rng, messages)
        reached = tracemalloc.get_traced_memory()[0]
        messages = run_turns(guard, 600, rng, messages)
        later = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert guard.provenance.dropped > 0 and len(guard.provenance) == 1000 and guard.provenance.verify().ok
    assert len(messages) <= 31
    assert later - reached < 1_500_000, (reached, later)



def test_the_fingerprint_cache_is_bounded_by_what_it_holds():
    """The contribution cache of a guard whose loop reads long tool results (~300 words each) is bounded by
    bytes, not only by entries (8,192 long messages filled ~9 MB), and the alarm's figures are those of a
    guard whose cache never evicts. The bound is set small here so that it is reached early; the default
    is `fingerprint.CACHE_BYTES` (2 MiB)."""
    words = [f"{w}{n}" for w in ("deploy", "shard", "retry", "queue", "cache") for n in range(400)]

    def results_loop(guard: ContextGuard, turns: int) -> list[float]:
        rng = random.Random(3)
        messages = [{"role": "system", "content": "sys"}]
        distances = []
        for t in range(turns):
            messages.append({"role": "user", "content": f"task {t}"})
            guard.observe(messages)
            messages.append({"role": "assistant", "tool_calls": [
                {"id": f"call_{t}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{t}",
                             "content": " ".join(rng.choice(words) for _ in range(300))})
            guard.observe(messages)
            if len(messages) > 30:
                report, messages = guard.resolve([messages[0], {"role": "user", "content": f"Earlier: {t}"}]
                                                 + messages[-6:], kind="compact")
                distances.append(report.hash_distance)
        return distances

    bounded = ContextGuard("fp-bounded", enforce={"contraction": "warn"})
    assert bounded._fingerprinter.cache_bytes == CACHE_BYTES == 2 * 1024 * 1024
    bounded._fingerprinter.cache_bytes = 64 * 1024
    distances = results_loop(bounded, 200)
    cache = bounded._fingerprinter
    assert cache.cached_bytes == sum(c.nbytes for c in cache._cache.values()) <= 64 * 1024
    unbounded = ContextGuard("fp-unbounded", enforce={"contraction": "warn"})
    assert results_loop(unbounded, 200) == distances and unbounded._fingerprinter.cached_bytes > 2 * 64 * 1024
    assert any(d is not None and d > 0 for d in distances)


@pytest.mark.parametrize("words", [20, 150, 1500])
def test_what_the_fingerprint_cache_counts_is_what_it_holds(words):
    """`Contribution.nbytes`, which the byte bound adds up, is within 20% of the memory the cached
    contributions take (tracemalloc), for short, long and very long messages (packed dense)."""
    rng = random.Random(words)
    vocabulary = [f"w{n}" for n in range(5000)]
    messages = [Message("user", " ".join(rng.choice(vocabulary) for _ in range(words)) + f" id{i}")
                for i in range(200_000 // words)]
    for m in messages:
        assert m.digest
    fingerprinter = Fingerprinter(cache_limit=10**6, cache_bytes=10**10)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for m in messages:
            fingerprinter.message(m)
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert fingerprinter.cached == len(messages)
    assert 0.8 < traced / fingerprinter.cached_bytes < 1.2, (traced, fingerprinter.cached_bytes)

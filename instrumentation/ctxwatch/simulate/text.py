"""Seeded synthetic text for simulated agent loops: words, sentences, literals and messages.

Everything comes from a built-in vocabulary and a `random.Random` seeded by the caller, so a
seed always yields the same text in every process and on every platform (no downloads, no
global random state). Word frequencies follow a Zipf-like law, as in real prose, so common
words repeat and rare ones carry the content. Literals are the kinds record 003 protects
(ticket ids, hex hashes, file paths, error codes, UUIDs, URLs) in the shapes
`ctxwatch.literals.DEFAULT_PATTERNS` recognises.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import accumulate

from ..model import Message


def _words(block: str) -> list[str]:
    return block.split()


_COMMON = _words("""
the of and to a in is it that for on was with as be at by this are from or have an not but
what all were we when your can there use each which she do how their if will up other about out
many then them these so some would make like into time has look two more write go see number no
way could people my than first been call who now find long down day did get come made may part
over new after also back use just only know take year good give most very well even want because
any same tell work three must still place ask here next both under last never again keep while
before should end does another around off always those show large often together however
""")

_DOMAIN = _words("""
agent context window buffer message token summary compaction rewrite prune rank salience policy
subgoal plan step tool call result output error trace log audit file path directory config module
function class method test suite fixture assertion failure exception stack frame request response
server client endpoint route handler queue worker job retry timeout deadline budget limit cache
index schema migration table column row query transaction commit branch merge patch diff review
build deploy release version package dependency lockfile container image volume network port host
cluster node replica shard leader follower snapshot checkpoint metric alert dashboard incident
owner ticket customer account invoice payment order shipment warehouse inventory report export
import parser tokenizer encoder decoder model prompt sample batch epoch gradient loss weight layer
user session cookie header payload field value key secret token scope permission role group
sensor reading threshold window average median percentile latency throughput error rate spike
""")

_VERBS = _words("""
checked updated removed added fixed broke restored verified rejected accepted moved renamed
parsed loaded saved wrote read opened closed started stopped scheduled cancelled retried failed
passed reviewed merged reverted deployed rolled measured compared sorted filtered grouped counted
""")

VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(_COMMON + _DOMAIN + _VERBS))
STOPWORDS: frozenset[str] = frozenset(_COMMON)  # function words: no salience of their own

# Zipf-like cumulative weights over the vocabulary (rank 1 is the most frequent word).
_CUM_WEIGHTS = tuple(accumulate(1.0 / (rank + 1) ** 0.9 for rank in range(len(VOCABULARY))))

_PATH_DIRS = ("srv", "app", "src", "lib", "etc", "var", "data", "config", "services", "tests", "core")
_PATH_EXTS = ("py", "yaml", "json", "toml", "log", "sql", "ts", "rs", "md", "cfg")
_TICKET_KEYS = ("OPS", "INC", "BUG", "PAY", "AUTH", "DATA", "INFRA", "SEC")
_ERROR_NAMES = ("TIMEOUT", "NOT_FOUND", "CONN_RESET", "QUOTA_EXCEEDED", "BAD_GATEWAY", "LOCK_HELD")


class TextGen:
    """A seeded source of words, literals, sentences and messages."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def words(self, n: int) -> list[str]:
        """`n` vocabulary words drawn with Zipf-like frequencies."""
        return self.rng.choices(VOCABULARY, cum_weights=_CUM_WEIGHTS, k=n)

    def literal(self) -> str:
        """One protected literal of a random kind."""
        return self.rng.choice(_LITERAL_MAKERS)(self.rng)

    def sentence(self, n_words: int = 12, literal_prob: float = 0.0) -> str:
        """A sentence of about `n_words` words; with probability `literal_prob` it names a literal."""
        words = self.words(max(1, n_words))
        words[0] = words[0].capitalize()
        if self.rng.random() < literal_prob:
            words.insert(self.rng.randrange(1, len(words) + 1), self.literal())
        return " ".join(words) + "."

    def paragraph(self, n_sentences: int, literal_prob: float = 0.3) -> str:
        return " ".join(self.sentence(self.rng.randint(6, 18), literal_prob) for _ in range(n_sentences))

    def message(self, role: str = "assistant", n_sentences: int = 4, literal_prob: float = 0.3) -> Message:
        """One message of `n_sentences` sentences."""
        return Message(role, self.paragraph(n_sentences, literal_prob))


def _ticket(rng: random.Random) -> str:
    return f"{rng.choice(_TICKET_KEYS)}-{rng.randint(100, 99999)}"


def _hex(rng: random.Random) -> str:
    while True:
        value = f"{rng.getrandbits(48):012x}"
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def _path(rng: random.Random) -> str:
    dirs = "/".join(rng.choices(_PATH_DIRS, k=rng.randint(1, 3)))
    return f"/{dirs}/{rng.choice(VOCABULARY[len(_COMMON):])}_{rng.randint(1, 99)}.{rng.choice(_PATH_EXTS)}"


def _error_code(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"E{rng.randint(1000, 99999)}"
    return f"ERR_{rng.choice(_ERROR_NAMES)}"


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _url(rng: random.Random) -> str:
    return f"https://{rng.choice(_PATH_DIRS)}.example.com/{rng.choice(_DOMAIN)}/{rng.randint(1, 9999)}"


_LITERAL_MAKERS: tuple[Callable[[random.Random], str], ...] = (_ticket, _hex, _path, _error_code, _uuid, _url)

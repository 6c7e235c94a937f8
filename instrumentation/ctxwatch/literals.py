"""The literal registry (record 003): the verbatim strings downstream consumers match exactly.

IDs, hashes, paths, URLs, error codes and user-registered patterns are extracted per message,
case-sensitively, and cached by message digest, so a rewrite's literal-set diff costs only the
messages it changed. With the default patterns, those that never match across white space are read
token by token, each distinct token scanned once (`ctxwatch.token_cache`): the same literals as
scanning the whole text (`LiteralRegistry.extract_whole`, the path of a registry with patterns of its
own). Literal *values* never leave the process through telemetry; only counts do.

Two rules shape what a literal is (measured on the corpus, docs/alarm.md "Literals"):

- A value with fewer than two letters or digits is never a literal (``' '``, ``' → '``, ``'/'``,
  ``'/a'``): it is punctuation or white space, nothing a consumer matches exactly.
- A literal nested in a longer one is kept as itself when the longer one is a *container* — a
  path, a URL or a code span — so a UUID inside a path survives a summary that keeps the UUID but
  not the path. Inside an *atomic* literal (a UUID, a hash, a ticket, a tool id...) the pieces are
  not literals of their own (a UUID's hex groups are not hashes).

Tool-call arguments are read as the values of their JSON document, not as its text. Measured on
the corpus's 1,843 tool calls (Claude Code, Codex, OpenHands, SWE-agent): the keys hold no literal
in any format, and scanning the JSON text instead of its values hides 52 literals (glued to their
neighbours by escapes such as a newline written as backslash-n) and invents 8 (a URL with the
backslash of an escaped quote at its end). Arguments that are not JSON (Codex's free-form tool
input, 365 calls) are read as text.

`downstream(message)` is the subset the contraction alarm counts (`ctxwatch.cycles`): literals of
the message's text and tool-call arguments, not of its tool results — what the user, the system
prompt, the plan and the agent itself put in the context, rather than tool output that nothing
downstream used again.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from operator import contains

from .fastjson import REFUSED, decoded
from .model import Message, ToolCall, ToolResult, part_text
from .token_cache import TokenCache

# errno names (ENOENT, ECONNRESET...): a capitalised word starting with E is not an error code by itself
_ERRNO = ("2BIG|ACCES|ADDRINUSE|ADDRNOTAVAIL|AGAIN|ALREADY|BADF|BUSY|CANCELED|CHILD|CONNABORTED|CONNREFUSED|"
          "CONNRESET|DEADLK|DOM|DQUOT|EXIST|FAULT|FBIG|HOSTUNREACH|INPROGRESS|INTR|INVAL|IO|ISCONN|ISDIR|LOOP|"
          "MFILE|MLINK|MSGSIZE|NAMETOOLONG|NETDOWN|NETUNREACH|NFILE|NOBUFS|NODEV|NOENT|NOEXEC|NOLCK|NOMEM|"
          "NOSPC|NOSYS|NOTCONN|NOTDIR|NOTEMPTY|NOTSOCK|NOTSUP|NOTTY|NXIO|OPNOTSUPP|OVERFLOW|PERM|PIPE|PROTO|"
          "RANGE|ROFS|SPIPE|SRCH|TIMEDOUT|TXTBSY|WOULDBLOCK|XDEV")

# name -> pattern. A pattern with a capture group contributes the group, otherwise the match.
DEFAULT_PATTERNS: dict[str, str] = {
    # record 003's own pattern, split into its three alternatives (the record's `\b` before `/`
    # never matched a path at the start of a line or after a space; paths have their own pattern)
    "ticket": r"\b[A-Z]{2,}-\d{3,}\b",
    "hex": r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b",  # also git SHAs (7+ hex digits)
    "uuid": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "url": r"\b(?:https?|s3|gs|file)://[^\s<>\"'`()\[\]{}]+[^\s<>\"'`()\[\]{}.,;:!?]",
    "abs_path": r"(?<![\w/.~:-])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]*\w",
    "rel_path": r"(?<![\w/.~:-])[\w.@+-]+(?:/[\w.@+-]+)+\.[A-Za-z0-9]{1,8}\b",
    "error_code": r"\b(?:[A-Z]{1,5}\d{3,6}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+){1,6}|E(?:" + _ERRNO + r"))\b",
    "hex_prefixed": r"\b0x[0-9a-fA-F]{4,}\b",
    "win_path": r"\b[A-Za-z]:\\(?:[^\\\s:*?\"<>|]+\\)*[^\\\s:*?\"<>|]+",
    "tool_id": r"\b(?:call|toolu|fc|msg|req|run|resp|chatcmpl)_[A-Za-z0-9_-]{4,}\b",
    "number": r"(?<![\w.])(?:\d+\.\d+|\d{5,})(?![\w.]*\w)",
    "code_span": r"`([^`\n\\]{1,80})`",  # no backslash: not the inside of JSON-escaped text
}

# How some default patterns are compiled: the same matches, written to begin with a character class
# (the first character consumed, the word boundary or look-behind checked just after it), because the
# regular expression engine skips in C to where such a pattern can start, while a pattern that
# begins with `\b` or a look-behind is tried at every position. `(?<!X.)` right after a consumed
# character c (c not a line break) is `(?<!X)` before c; `\b` before a word character is `(?<!\w)`;
# `(?<=(?=A).)` right after c is `(?=A)` before c.
_SCAN_FORMS: dict[str, str] = {
    "hex": r"[0-9a-f](?<!\w.)(?<=(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f]).)[0-9a-f]{6,}\b",
    "ticket": r"[A-Z](?<!\w.)[A-Z]+-\d{3,}\b",
    "uuid": r"[0-9a-fA-F](?<!\w.)[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "error_code": r"[A-Z](?<!\w.)(?:[A-Z]{0,4}\d{3,6}|[A-Z0-9]*(?:_[A-Z0-9]+){1,6}|(?<=E)(?:" + _ERRNO + r"))\b",
    "hex_prefixed": r"0(?<!\w.)x[0-9a-fA-F]{4,}\b",
    "number": r"\d(?<![\w.].)(?:\d*\.\d+|\d{4,})(?![\w.]*\w)",
}

# A default pattern only runs on text holding one of these substrings (every match of it holds one):
# most prose has no URL, path or backtick, and skipping a scan is the cheapest scan. A token-local
# pattern's substrings are looked for in the candidate tokens it scans (every match of it lies in
# one), not in the whole text, and it scans only the tokens holding one of them.
_PREFILTERS: dict[str, tuple[str, ...]] = {
    "ticket": ("-",), "uuid": ("-",), "url": ("://",), "abs_path": ("/",), "rel_path": ("/",),
    "tool_id": ("_",), "hex_prefixed": ("0x",),
    "win_path": (":\\",), "code_span": ("`",),
}

# Default patterns that never match across white space: they run only on the tokens that could
# hold a literal (a digit, / _ : - or two capitals), joined, instead of the whole text. Matches
# are mapped back to their offsets in the text, so the result is the same as scanning it all.
_TOKEN_LOCAL = frozenset({"ticket", "hex", "hex_prefixed", "uuid", "url", "abs_path", "rel_path", "win_path",
                          "error_code", "tool_id", "number"})
# What makes a token a candidate: a digit (any script's, as the patterns' \d: "٣٤٥٦٧" is a number), / _ :
# or -, or the first of two capitals in one token. The pattern starts with one character class, so the
# regular expression engine skips to the next such character in C; only the candidate tokens (rare in
# prose) cost Python steps.
_CANDIDATE_MARK = re.compile(r"[\d/_:A-Z-](?:(?<=[^A-Z])|[^\sA-Z]*[A-Z])")
_ASCII_CANDIDATE_MARK = re.compile(r"[0-9/_:A-Z-](?:(?<=[^A-Z])|[^\sA-Z]*[A-Z])")  # the same on ASCII text, 2x faster
_NON_SPACE_RUN = re.compile(r"\S*")

# patterns whose matches hold other literals as parts (their nested matches are literals too)
CONTAINER_PATTERNS = frozenset({"url", "abs_path", "rel_path", "win_path", "code_span"})
# Default whole-text patterns whose literals are found beside the tokens' own: no token-local atomic
# match can hide one (a code span lies between backticks, which no token-local pattern matches; one
# that begins where an atomic match begins and ends where it ends is the same value), and a container
# hides nothing. A registry with any other pattern that is not token-local scans the whole text.
_BESIDE_TOKENS = frozenset({"code_span"})
_MIN_ALNUM = 2

_CACHE_LIMIT = 32_768  # messages (~250 B each): a few MB per guard however long it runs
_NONE: frozenset[str] = frozenset()

# (start, -end, container, value) of one match; (pattern, group, container, needles, token-local) of one pattern
_Span = tuple[int, int, bool, str]
_Scan = tuple[re.Pattern[str], int, bool, tuple[str, ...], bool]


def argument_values(arguments: str) -> list[str]:
    """The scalar values of a tool call's JSON arguments (the text itself when it is not JSON)."""
    document = decoded(arguments)
    if document is REFUSED:
        try:
            document = json.loads(arguments)
        except ValueError:
            return [arguments]
    values, stack = [], [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            values.append(node)
        elif node is not None:
            values.append(json.dumps(node))
    return values


def literal_text(message: Message, *, tool_output: bool = True) -> str:
    """The text literals are read from: text parts, tool names and argument values, and (with
    `tool_output`) tool results."""
    pieces: list[str] = []
    for part in message.parts:
        if type(part) is ToolCall:
            pieces.append(part.name)
            pieces.extend(argument_values(part.arguments))
        elif type(part) is not ToolResult or tool_output:
            pieces.append(part_text(part))
    return "\n".join(p for p in pieces if p)


def _kept(spans: list[_Span]) -> Iterator[_Span]:
    """The spans that are literals, in text order: not inside an earlier, longer atomic span, and
    holding two letters or digits."""
    reach = -1  # end of the furthest-reaching atomic match so far
    for span in sorted(spans):
        start, neg_end, container, value = span
        if -neg_end <= reach and start < reach:
            continue  # inside an earlier, longer atomic match
        if _substantial(value):
            yield span
        if not container:
            reach = max(reach, -neg_end)


def _substantial(value: str) -> bool:
    """At least two letters or digits: not punctuation or white space."""
    count = 0
    for c in value:
        if c.isalnum():
            count += 1
            if count >= _MIN_ALNUM:
                return True
    return False


@dataclass(frozen=True)
class LiteralDiff:
    """The literal-set diff of one rewrite: what was there before, what was lost, what was added, and what
    went out of view behind an opaque provider compaction (`hidden`: unknown, not lost; `ctxwatch.cycles`)."""

    before: int
    lost: frozenset[str]
    added: frozenset[str]
    hidden: frozenset[str] = frozenset()

    @property
    def rate(self) -> float:
        """Lost literals as a fraction of the literals before the rewrite (0 when there were none)."""
        return len(self.lost) / self.before if self.before else 0.0


class LiteralRegistry:
    """Extracts protected literals from text and messages with a fixed set of named patterns."""

    def __init__(self, patterns: Mapping[str, str] | None = None, *, extra: Mapping[str, str] | None = None,
                 literals: Iterable[str] = (), cache_limit: int = _CACHE_LIMIT) -> None:
        chosen = dict(DEFAULT_PATTERNS if patterns is None else patterns)
        chosen.update(extra or {})
        self._patterns: dict[str, re.Pattern[str]] = {}
        default = {n for n in chosen if chosen[n] == DEFAULT_PATTERNS.get(n)}
        self._needs: dict[str, tuple[str, ...]] = {n: _PREFILTERS[n] for n in default if n in _PREFILTERS}
        self._token_local: set[str] = default & _TOKEN_LOCAL
        self._beside_tokens: set[str] = default & _BESIDE_TOKENS
        for name, pattern in chosen.items():
            try:
                self._patterns[name] = re.compile(_SCAN_FORMS.get(name, pattern) if name in default else pattern)
            except re.error as exc:
                raise ValueError(f"literal pattern {name!r} is not a valid regular expression: {exc}") from None
        self._plan()
        self._exact = frozenset(literals)
        self._cache: dict[int, frozenset[str]] = {}
        self._cache_limit = max(2, cache_limit)
        self._tally = _DownstreamTally()
        self._tally_lock = threading.Lock()

    def register(self, name: str, pattern: str) -> None:
        """Add a user pattern (e.g. an order-number format); clears the per-message cache."""
        try:
            self._patterns[name] = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"literal pattern {name!r} is not a valid regular expression: {exc}") from None
        self._needs.pop(name, None)
        self._token_local.discard(name)
        self._beside_tokens.discard(name)
        self._plan()
        self._cache.clear()
        with self._tally_lock:
            self._tally = _DownstreamTally()

    def _plan(self) -> None:
        """One entry per pattern, in order: (pattern, its group, container, prefilter needles or (),
        token-local), and every prefilter needle: `extract` reads them without a lookup per pattern.
        With only token-local patterns and those found beside them, the token-local literals are read
        token by token, from a cache of each distinct token's (`_tokens`); otherwise the whole text is scanned."""
        self._scans = [(pattern, 1 if pattern.groups else 0, name in CONTAINER_PATTERNS, self._needs.get(name, ()),
                        name in self._token_local) for name, pattern in self._patterns.items()]
        self._needles = frozenset(needle for name, needs in self._needs.items() if name not in self._token_local
                                  for needle in needs)
        self._token_needles = frozenset(needle for name, needs in self._needs.items() if name in self._token_local
                                        for needle in needs)
        tokenwise = self._token_local and self._patterns.keys() <= self._token_local | self._beside_tokens
        self._tokens = TokenCache(self._token_literals) if tokenwise else None
        self._text_scans = [scan for scan in self._scans if not (tokenwise and scan[4])]
        self._token_scans = [scan for scan in self._scans if scan[4]]

    def forget_tokens(self) -> None:
        """Empty the token cache: the tokens it keeps are pieces of the texts read, which a followed session
        does not hold while it waits (`ctxwatch.watch.live`)."""
        if self._tokens is not None:
            self._tokens.clear()

    def extract(self, text: str) -> frozenset[str]:
        """Every literal in `text`, case-sensitive; a match inside a longer *atomic* match is not
        counted on its own (a UUID is one literal, not also its hex groups), a match inside a
        container (a path, URL or code span) is; values without two letters or digits never are."""
        return self._extract(text, self._tokens)

    def extract_whole(self, text: str) -> frozenset[str]:
        """`extract` without the token cache: every pattern over the whole text, the path a registry
        with patterns of its own takes (the reference the token path is tested and timed against)."""
        return self._extract(text, None)

    def _extract(self, text: str, tokens: TokenCache | None) -> frozenset[str]:
        """The literals of `text`: its token-local ones from `tokens` when given, else all from the whole text."""
        found = {value for _, _, _, value in _kept(self._spans(text, self._scans if tokens is None
                                                                else self._text_scans))}
        if tokens is not None:
            found |= tokens.union(text)
        if self._exact:
            found.update(lit for lit in self._exact if lit in text)
        return frozenset(found)

    def _token_literals(self, tokens: list[str]) -> list[frozenset[str]]:
        """The token-local literals of each token, the tokens scanned as one text joined by line breaks: no
        token-local match spans white space and their look-arounds see any white space alike, so each match,
        and any match hiding it, lies in one token and is what scanning that token in its text finds."""
        candidates = _Candidates.of_tokens(tokens)
        starts = candidates._starts
        held: dict[int, set[str]] = {}
        for start, _, _, value in _kept(self._spans(candidates.joined, self._token_scans, candidates)):
            held.setdefault(bisect_right(starts, start) - 1, set()).add(value)
        out = [_NONE] * len(tokens)
        for i, values in held.items():
            out[i] = frozenset(values)
        return out

    def _spans(self, text: str, scans: list[_Scan], candidates: _Candidates | None = None) -> list[_Span]:
        """The matches of `scans` (entries of `_scans`) in `text`, token-local ones found in its candidate
        tokens (`candidates`, when the caller has them)."""
        spans: list[_Span] = []
        present = {needle for needle in self._needles if needle in text}
        if candidates is None and any(scan[4] for scan in scans):
            candidates = _Candidates(text)
        if candidates is not None:
            present |= {needle for needle in self._token_needles if needle in candidates.joined}
        for pattern, group, container, need, token_local in scans:
            if need and present.isdisjoint(need):
                continue
            if token_local:
                if candidates is not None and candidates.joined:
                    spans.extend((start, neg_end, container, value)
                                 for start, neg_end, value in candidates.search(pattern, need))
                continue
            for m in pattern.finditer(text):
                if m.group(group):
                    spans.append((m.start(group), -m.end(group), container, m.group(group)))
        return spans

    def of(self, message: Message) -> frozenset[str]:
        """The literals of one message, computed once per distinct message content."""
        cached = self._cache.get(message.digest)
        if cached is None:
            cached = self._remember(message.digest, literal_text(message) if message.tool_calls else message.text)
        return cached

    def of_all(self, messages: Iterable[Message]) -> set[str]:
        return set().union(*map(self.of, messages))

    def downstream(self, message: Message) -> frozenset[str]:
        """The literals of the message's text and tool-call arguments (not of its tool results)."""
        if not message.result_ids:
            return self.of(message)  # nothing to leave out: the same set, from the same cache
        key = ~message.digest  # a key no message digest (>= 0) uses
        cached = self._cache.get(key)
        return cached if cached is not None else self._remember(key, literal_text(message, tool_output=False))

    def _remember(self, key: int, text: str) -> frozenset[str]:
        if len(self._cache) >= self._cache_limit:
            for stale in list(self._cache)[: self._cache_limit // 2]:
                del self._cache[stale]
        found = self._cache[key] = self.extract(text)
        return found

    def downstream_of_all(self, messages: Iterable[Message]) -> set[str]:
        return set().union(*map(self.downstream, messages))

    def downstream_count(self, messages: Sequence[Message], digests: Sequence[int] | None = None, *,
                         rewrite: Rewrite | None = None, extends: Sequence[int] | None = None) -> int:
        """``len(self.downstream_of_all(messages))``, carried over from the previous call: when
        `messages` extend the buffer of that call (or the result of the `rewrite` it announced),
        only the appended messages (and the rewrite's) are read; otherwise the count is rebuilt.
        `digests` are the messages' digests when the caller has them; `rewrite` is (removed,
        added, digests after) of a rewrite of `messages` the caller may apply before the next call.
        `extends`, when the caller knows it, is a digest list that `digests` extend (the caller found
        the common prefix itself): when it is the very list of the previous call's buffer or rewrite,
        the prefix is not compared again. Digest lists passed are never changed afterwards (every
        caller builds new ones), so the tally keeps them as they are, without a copy."""
        with self._tally_lock:
            return self._tally.rebase(self, messages, [m.digest for m in messages] if digests is None else digests,
                                      rewrite, extends)

    def held_by(self, messages: Iterable[Message], candidates: Iterable[str]) -> set[str]:
        """The candidates that are literals of some message: ``set(candidates) & self.of_all(messages)``,
        but a message whose literals are not cached yet is extracted only if its text contains a
        candidate (a literal is always a substring of the text it is read from)."""
        left, held = set(candidates), set()
        for m in messages:
            if not left:
                break
            found = self._cache.get(m.digest)
            if found is None:
                text = literal_text(m) if m.tool_calls else m.text
                if not any(lit in text for lit in left):
                    continue
                found = self.of(m)
            hit = left.intersection(found)
            held |= hit
            left -= hit
        return held


# (removed messages, added messages, digests of the buffer after) of one rewrite
Rewrite = tuple[Sequence[Message], Sequence[Message], Sequence[int]]


def _extends(digests: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(digests) >= len(prefix) and digests[: len(prefix)] == prefix


class _DownstreamTally:
    """The downstream literals of one buffer's distinct messages: digest -> its literals, and
    literal -> how many distinct messages hold it (a duplicated message adds no literal); `digests`
    is the buffer, `copies` how many times each of its digests is in it, `pending` a rewrite of it
    announced by the caller (the digests it removes, not the messages: a compaction's dropped epoch is
    not kept alive until the next call)."""

    __slots__ = ("digests", "copies", "members", "holders", "pending")

    def __init__(self) -> None:
        self.digests: Sequence[int] = []
        self.copies: Counter[int] = Counter()
        self.members: dict[int, frozenset[str]] = {}
        self.holders: Counter[str] = Counter()
        self.pending: tuple[list[int], Sequence[Message], Sequence[int]] | None = None

    def rebase(self, registry: LiteralRegistry, messages: Sequence[Message], digests: Sequence[int],
               rewrite: Rewrite | None, extends: Sequence[int] | None = None) -> int:
        """Move the tally to `messages` and return how many distinct downstream literals they hold
        (`extends`: a digest list `digests` is known to extend, see `LiteralRegistry.downstream_count`)."""
        pending, self.pending = self.pending, None
        copies = self.copies
        applied = pending is not None and (extends is pending[2] or _extends(digests, pending[2]))
        if applied:  # the rewrite was applied
            removed, added, after = pending  # type: ignore[misc]
            for digest in removed:  # a rewrite's removed and added messages are what the buffer lost and gained
                left = copies[digest] - 1
                if left > 0:
                    copies[digest] = left
                elif copies.pop(digest, None) is not None:
                    self._drop(digest)
            for m in added:
                copies[m.digest] += 1
                self._add(registry, m.digest, m)
            self.digests = after
        if applied or extends is self.digests or _extends(digests, self.digests):
            for i in range(len(self.digests), len(digests)):
                copies[digests[i]] += 1
                self._add(registry, digests[i], messages[i])
        else:  # another buffer: only the messages that differ, by digest
            self.copies = Counter(digests)
            now = self.copies.keys()
            for digest in self.members.keys() - now:
                self._drop(digest)
            new = now - self.members.keys()
            for i in range(len(digests) - 1, -1, -1):  # new messages are most often the latest ones
                if not new:
                    break
                if digests[i] in new:
                    new.discard(digests[i])
                    self._add(registry, digests[i], messages[i])
        self.digests = digests
        self.pending = None if rewrite is None else ([m.digest for m in rewrite[0]], rewrite[1], rewrite[2])
        return len(self.holders)

    def _add(self, registry: LiteralRegistry, digest: int, message: Message) -> None:
        if digest not in self.members:
            found = self.members[digest] = registry.downstream(message)
            self.holders.update(found)

    def _drop(self, digest: int) -> None:
        holders = self.holders
        for lit in self.members.pop(digest):
            if holders[lit] == 1:
                del holders[lit]
            else:
                holders[lit] -= 1


class _Candidates:
    """The tokens of a text that could hold a literal, joined by newlines, with their offsets."""

    __slots__ = ("joined", "_tokens", "_starts", "_origins", "_holding")

    def __init__(self, text: str) -> None:
        self._tokens: list[str] = []
        tokens = self._tokens
        self._starts: list[int] = []
        self._origins: list[int] = []
        at = end = 0
        backwards = ""  # the text reversed, made at the first candidate: a token's start is its end there
        mark = (_ASCII_CANDIDATE_MARK if text.isascii() else _CANDIDATE_MARK).search
        run = _NON_SPACE_RUN.match  # \S* matches everywhere: never None
        while (found := mark(text, end)) is not None:
            inside = found.start()
            if not backwards:
                backwards = text[::-1]
            start = len(text) - run(backwards, len(text) - inside).end()  # type: ignore[union-attr]
            end = run(text, inside).end()  # type: ignore[union-attr]
            self._starts.append(at)
            self._origins.append(start)
            tokens.append(text[start:end])
            at += end - start + 1
        self.joined = "\n".join(tokens)
        self._holding: dict[tuple[str, ...], tuple[str, list[int], list[int]]] = {}

    @classmethod
    def of_tokens(cls, tokens: list[str]) -> _Candidates:
        """`tokens`, each a white-space-free token, as the candidates of their own text joined by line breaks
        (all of them: a token without a candidate mark holds no token-local match, scanning it finds nothing)."""
        self = cls.__new__(cls)
        self._tokens = tokens
        self._starts = self._origins = list(accumulate(map((1).__add__, map(len, tokens)), initial=0))
        del self._starts[-1]
        self.joined = "\n".join(tokens)
        self._holding = {}
        return self

    def search(self, pattern: re.Pattern[str], needles: tuple[str, ...] = ()) -> list[tuple[int, int, str]]:
        """(start, -end, value) of each match, in the original text's offsets. With `needles` (every match
        of `pattern` holds one of them, so the token it lies in does), only the tokens holding one are
        scanned."""
        joined, starts, origins = self._tokens_holding(needles) if needles else (
            self.joined, self._starts, self._origins)
        out = []
        for m in pattern.finditer(joined):
            value = m.group()
            if value:
                k = bisect_right(starts, m.start()) - 1
                start = origins[k] + m.start() - starts[k]
                out.append((start, -(start + len(value)), value))
        return out

    def _tokens_holding(self, needles: tuple[str, ...]) -> tuple[str, list[int], list[int]]:
        """(joined, starts, origins), as for every candidate, of the candidates holding one of `needles`
        (picked in C: no Python step per token)."""
        found = self._holding.get(needles)
        if found is None:
            tokens = self._tokens
            holds = [map(contains, tokens, repeat(needle)) for needle in needles]
            keep = list(holds[0] if len(holds) == 1 else map(any, zip(*holds, strict=True)))
            held = list(compress(tokens, keep))
            starts = list(accumulate(map((1).__add__, map(len, held)), initial=0))
            del starts[-1]
            found = self._holding[needles] = ("\n".join(held), starts, list(compress(self._origins, keep)))
        return found

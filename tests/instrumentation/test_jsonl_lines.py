"""JSONL lines are cut from chunks of the file (`sessions.files._raw_lines`) exactly as ``readline`` with a
length cap cut them before: the same bytes line for line, newline kept, and an over-long line dropped at the
same place, whatever the chunk size, line lengths, line ends and cap."""

from __future__ import annotations

import io
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.sessions.files import _raw_lines


def by_readline(f: io.BytesIO, max_line_bytes: int) -> Iterator[bytes | None]:
    """What `iter_jsonl` read before: ``readline(max_line_bytes + 1)``, the rest of an over-long line dropped."""
    while raw := f.readline(max_line_bytes + 1):
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(1 << 20)
            yield None
            continue
        yield raw


LINES = st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"x")), max_size=12)


@given(LINES, st.sampled_from([b"\n", b"\r\n"]), st.booleans(), st.integers(1, 25), st.integers(1, 40))
def test_lines_cut_from_chunks_are_those_readline_gives(lines: list[bytes], end: bytes, last_end: bool,
                                                        max_line_bytes: int, chunk_bytes: int) -> None:
    data = end.join(lines) + (end if last_end and lines else b"")
    got = list(_raw_lines(io.BytesIO(data), max_line_bytes, chunk_bytes))
    assert got == list(by_readline(io.BytesIO(data), max_line_bytes))


def test_a_line_of_exactly_the_cap_is_kept_and_one_byte_more_is_dropped() -> None:
    data = b"a" * 8 + b"\n" + b"b" * 9 + b"\n" + b"c" * 9
    assert list(_raw_lines(io.BytesIO(data), 8, 3)) == [b"a" * 8 + b"\n", None, None]

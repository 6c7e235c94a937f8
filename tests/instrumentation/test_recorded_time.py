"""`recorded_time_ns` is the exact unix time in nanoseconds of any ISO 8601 instant with a time zone.

Computed from the whole days, seconds and microseconds since the epoch; checked against the
timedelta division it replaced, over the whole range of `datetime`, offsets included.
"""

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.sessions.session import recorded_time_ns

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ZONES = st.builds(lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-23 * 60 - 59, 23 * 60 + 59))


@given(st.datetimes(timezones=ZONES), st.sampled_from(["auto", "microseconds"]))
def test_an_instant_reads_as_its_nanoseconds_since_the_epoch(moment: datetime, spec: str) -> None:
    expected = (moment - EPOCH) // timedelta(microseconds=1) * 1000
    assert recorded_time_ns(moment.isoformat(timespec=spec)) == expected

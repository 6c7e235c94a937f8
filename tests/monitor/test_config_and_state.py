"""Configuration precedence and the loop store (issue 5, items 1 and 3).

Flags win over `CTXWATCH_MONITOR_*` variables, which win over the TOML file; an unusable value
is a one-line error naming its source. The loop store keeps a bounded history ring in order,
evicts the least recently seen loop past the cap and idle loops past the TTL (both counted), and
a tracked loop stays compact (the 2 KB-per-loop budget, measured with tracemalloc).
"""

from __future__ import annotations

import json
import sqlite3
import struct
import tracemalloc
from pathlib import Path

import pytest
from conftest import metric_value
from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.contraction import ContractionDetector
from ctxwatch_monitor.config import ConfigError, load_config
from ctxwatch_monitor.instruments import Instruments
from ctxwatch_monitor.loops import ENTRY_SIZE, LoopState, LoopStore
from ctxwatch_monitor.persistence import SCHEMA_VERSION, Database, StateFileError
from ctxwatch_monitor.server import main


def test_flags_beat_env_beat_file(tmp_path: Path) -> None:
    file = tmp_path / "monitor.toml"
    file.write_text('port = 1111\nhost = "0.0.0.0"\n[monitor]\nhistory = 7\nmax_loops = 5\n'
                    "[contraction]\nenter_cycles = 3\n")
    env = {"CTXWATCH_MONITOR_PORT": "2222", "CTXWATCH_MONITOR_HISTORY": "9"}
    config = load_config(["--config", str(file), "--port", "3333"], env)
    assert (config.port, config.history, config.host, config.max_loops) == (3333, 9, "0.0.0.0", 5)
    assert dict(config.contraction) == {"enter_cycles": 3}
    assert load_config([], {**env, "CTXWATCH_MONITOR_CONFIG": str(file)}).port == 2222
    token = tmp_path / "token"
    token.write_text("from-file\n")
    assert load_config(["--token-file", str(token)], {"CTXWATCH_MONITOR_TOKEN": "env"}).token == "from-file"
    assert load_config([], {"CTXWATCH_MONITOR_TOKEN": "env"}).token == "env"


@pytest.mark.parametrize("argv,env,needle", [
    (["--port", "99999"], {}, "flag --port"),
    ([], {"CTXWATCH_MONITOR_MAX_LOOPS": "zero"}, "CTXWATCH_MONITOR_MAX_LOOPS"),
    ([], {"CTXWATCH_MONITOR_SYNC": "sometimes"}, "must be one of full, normal"),
])
def test_bad_values_name_their_source(argv: list[str], env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(argv, env)


def test_bad_config_file_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "bad.toml"
    file.write_text("prot = 1\n")
    assert main(["--config", str(file)]) == 2
    err = capsys.readouterr().err
    assert "unknown option 'prot'" in err and str(file) in err and err.count("\n") == 1
    file.write_text("[contraction]\nenter_cycles = 0\n")
    assert main(["--config", str(file), "--state", ":memory:"]) == 2
    assert "enter_cycles" in capsys.readouterr().err
    not_sqlite = tmp_path / "state.sqlite3"
    not_sqlite.write_bytes(b"this is not a database" * 100)
    assert main(["--state", str(not_sqlite)]) == 2
    assert "cannot be used" in capsys.readouterr().err


def _loop(store: LoopStore, loop_id: str, now: float) -> LoopState:
    detector = ContractionDetector()
    loop = LoopState(loop_id, "svc", "agent", store.instruments.label_pair("svc", "agent"), detector.state,
                     detector, now)
    store.add(loop)
    return loop


def test_history_ring_keeps_the_latest_cycles_in_order() -> None:
    store = LoopStore(Instruments(8), max_loops=10, ttl=0)
    loop = _loop(store, "ring", 1000.0)
    for cycle in range(1, 12):
        loop.record(4, 1000.0 + cycle, "compact", "patch", cycle / 100, None, 10, 1, cycle)
    kept = loop.cycles_in_order()
    assert [c.cycle for c in kept] == [8, 9, 10, 11]
    assert [c.d for c in kept] == [0.08, 0.09, 0.1, 0.11] and kept[-1].time == 1011.0
    assert kept[0].r is None and kept[0].kind == "compact" and kept[0].state == "healthy"


@given(first_seen=st.floats(0, 2e10), times_ms=st.lists(st.integers(0, 2**48 - 1), min_size=1, max_size=6))
def test_history_times_keep_the_millisecond_however_far_from_first_seen(first_seen: float,
                                                                         times_ms: list[int]) -> None:
    """Regression: times were float32 offsets from first_seen, so a backfill (`replay --otlp` of a session weeks
    old) was dated to 0.25 s, a year away to 2 s. Every span end time now comes back to the millisecond."""
    store = LoopStore(Instruments(8), max_loops=10, ttl=0)
    loop = _loop(store, "times", first_seen)
    for cycle, ms in enumerate(times_ms, 1):
        loop.record(8, ms / 1000, "compact", "patch", 0.5, None, 10, 1, cycle)
    assert [c.time for c in loop.cycles_in_order()] == [ms / 1000 for ms in times_ms]


def test_a_backfill_weeks_old_is_dated_to_the_millisecond() -> None:
    now = 1_764_600_000.0
    store = LoopStore(Instruments(8), max_loops=10, ttl=0)
    loop = _loop(store, "backfill", now)
    ended = [now - 40 * 86400 + 0.123, now - 40 * 86400 + 0.124, now - 86400 * 365 * 3 + 0.001]
    for cycle, at in enumerate(ended, 1):
        loop.record(8, at, "compact", "patch", 0.5, None, 10, 1, cycle)
    assert [c.time for c in loop.cycles_in_order()] == [round(at, 3) for at in ended]


def test_cap_and_ttl_evict_least_recently_seen_and_count() -> None:
    instruments = Instruments(8)
    store = LoopStore(instruments, max_loops=3, ttl=60)
    loops = [_loop(store, f"l{i}", 1000.0 + i) for i in range(3)]
    store.touch(loops[0], 1010.0)      # l0 is now the most recently seen
    _loop(store, "l3", 1011.0)
    store.evict_past_cap()                             # over the cap: l1 goes
    assert [loop.loop_id for loop in store] == ["l3", "l0", "l2"]
    assert store.sweep(1002.0 + 61) == 1               # l2 (seen at 1002) is past the TTL
    assert [loop.loop_id for loop in store] == ["l3", "l0"] and store.removed == {"l1", "l2"}
    text = instruments.metric_set.render(None)[0].decode()
    assert metric_value(text, "ctxwatch_monitor_loop_evictions_total", reason="cap") == 1
    assert metric_value(text, "ctxwatch_monitor_loop_evictions_total", reason="ttl") == 1
    assert metric_value(text, "ctxwatch_loops", state="healthy") == 2
    assert metric_value(text, "ctxwatch_monitor_loops_tracked") == 2


def test_a_tracked_loop_with_full_history_stays_near_2_kb() -> None:  # 2.3 KB measured, docs/monitor.md
    store = LoopStore(Instruments(8), max_loops=100_000, ttl=0)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(2000):
        loop = _loop(store, f"memory-loop-{i:06d}", 1000.0)
        for cycle in range(1, 33):
            loop.detector.update(0.3, 10, 1)
            loop.record(32, 1000.0 + cycle, "compact", "patch", 0.3, 0.1, 10, 1, cycle)
    per_loop = (tracemalloc.get_traced_memory()[0] - before) / 2000
    tracemalloc.stop()
    assert per_loop < 2350, per_loop  # LoopOrder.rivals: 8 bytes more (2,303 measured)


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE loops (
    loop_id TEXT PRIMARY KEY, service TEXT NOT NULL, agent TEXT NOT NULL, state TEXT NOT NULL,
    onset INTEGER, flagged INTEGER, alarm_time REAL, cycles INTEGER NOT NULL, first_seen REAL NOT NULL,
    last_seen REAL NOT NULL, guard_state TEXT, detector TEXT NOT NULL, history BLOB NOT NULL,
    entries INTEGER NOT NULL
);
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO loops VALUES ('loop-old', 'svc', 'bot', 'contracting', 3, 4, 1700000000.5, 4, 1700000000.0,
                          1700000001.0, 'contracting', '{}', x'', 0);
"""


def test_a_state_file_of_schema_1_is_migrated_and_keeps_its_loops(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    database = Database(str(path))
    (row,) = database.load_loops()
    assert row["loop_id"] == "loop-old" and row["state"] == "contracting" and row["episode"] == 0
    assert database.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == SCHEMA_VERSION
    database.close()
    Database(str(path)).close()  # opening the migrated file again changes nothing


FIRST_SEEN = 1_760_000_000.0
_ENTRY_SCHEMA_4 = struct.Struct("<fffHHIBBB")  # time as float32 s after first_seen


def _schema_4_file(path: Path, history: bytes) -> None:
    Database(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO loops (loop_id, service, agent, state, cycles, first_seen, last_seen, detector, "
                     "history, entries) VALUES ('old', 'svc', 'bot', 'healthy', 2, ?, ?, '{}', ?, 2)",
                     (FIRST_SEEN, FIRST_SEEN, history))
        conn.execute("UPDATE meta SET value='4' WHERE key='schema'")


def test_a_state_file_of_schema_4_keeps_its_history_times(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    offsets = [-40 * 86400 - 0.25, 12.5]  # a backfill 40 days old (float32 holds both exactly)
    _schema_4_file(path, b"".join(_ENTRY_SCHEMA_4.pack(offset, 0.5, 0.25, 10, 1, cycle, 0, 0, 0)
                                  for cycle, offset in enumerate(offsets, 1)))
    database = Database(str(path))
    (row,) = database.load_loops()
    database.close()
    assert len(row["history"]) == 2 * ENTRY_SIZE
    loop = LoopState("old", "svc", "bot", ("svc", "bot"), "healthy", None, row["first_seen"])
    loop.history, loop.entries = bytearray(row["history"]), row["entries"]
    kept = loop.cycles_in_order()
    assert [c.time for c in kept] == [FIRST_SEEN + offset for offset in offsets]
    assert [(c.cycle, c.d, c.r, c.literals_before, c.literals_lost) for c in kept] == [(1, 0.5, 0.25, 10, 1),
                                                                                     (2, 0.5, 0.25, 10, 1)]


def test_a_schema_4_history_that_is_not_whole_entries_stops_the_migration_by_name(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    _schema_4_file(path, b"\x00" * 5)
    with pytest.raises(StateFileError, match=r"state\.sqlite3.*cannot be migrated.*loop_id='old'.*5 bytes"):
        Database(str(path))
    with sqlite3.connect(path) as conn:  # the failed step left the file as it was
        assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] != SCHEMA_VERSION
        assert conn.execute("SELECT history FROM loops").fetchone()[0] == b"\x00" * 5


def test_a_state_file_of_a_newer_schema_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1.replace("('schema', '1')", "('schema', '9')"))
    with pytest.raises(StateFileError, match=r"state\.sqlite3.*schema 9, this monitor reads"):
        Database(str(path))


def test_the_mutation_series_of_a_schema_4_file_gain_an_empty_agent_version(tmp_path: Path) -> None:
    """`ctxwatch_mutations_total` gained the `agent_version` label: its persisted series come back with the
    label empty (no version sent), under the key text the monitor writes, so the next commit updates the
    same row; other families are untouched."""
    path = tmp_path / "state.sqlite3"
    old_key = ["compact", "patch", "claude-code", "svc"]
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
        conn.execute("CREATE TABLE series (family TEXT NOT NULL, labels TEXT NOT NULL, value TEXT NOT NULL, "
                     "PRIMARY KEY (family, labels)) WITHOUT ROWID")
        conn.executemany("INSERT INTO series VALUES (?,?,?)", [
            ("ctxwatch_mutations_total", json.dumps(old_key), "3"),
            ("ctxwatch_lost_literals_total", json.dumps(old_key), "7")])
    database = Database(str(path))
    series = {name: (key, value) for name, key, value in database.load_series()}
    assert series == {"ctxwatch_mutations_total": ((*old_key, ""), 3),
                      "ctxwatch_lost_literals_total": (tuple(old_key), 7)}
    instruments = Instruments(8)
    key, value = series["ctxwatch_mutations_total"]
    assert len(key) == len(instruments.mutations.family.labelnames)
    database.write([], [], [("ctxwatch_mutations_total", key, value + 1)], {}, [])
    rows = database.conn.execute("SELECT value FROM series WHERE family='ctxwatch_mutations_total'").fetchall()
    assert rows == [("4",)]
    database.close()

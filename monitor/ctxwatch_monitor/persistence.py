"""The SQLite state file: loops with their history and detector state, persisted metric series.

One transaction per batch of ingest requests (`write`), committed before any of them is answered,
in WAL mode; `synchronous=FULL` (the default) survives power loss, `NORMAL` survives a process
crash. Loop rows are upserted whole, in place (the history ring is a blob), evicted loops are
deleted, and metric series changed by the batch are upserted (the JSON of their label tuples is
cached: labels are bounded). `load_loops` returns loops in least-recently-seen order.

**Ownership.** One monitor owns a state file at a time: `Database` takes an exclusive `flock` on
the sidecar file `<state>.lock` (holding the owner's PID) and keeps it until `close` or the process
dies (the kernel releases it, so `kill -9` leaves no stale lock). A separate file, not SQLite's own
`locking_mode=EXCLUSIVE`: that would also lock out `sqlite3 .backup` and other readers of a running
monitor's file, and flock never touches the POSIX locks SQLite holds on the database itself.

**Corrupt rows** stop the start-up with a one-line `StateFileError` naming the file, the table and
the row (and what is wrong with it); nothing is dropped or rewritten, so the operator decides.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

from ctxwatch.contraction import STATES

from .loops import history_from_float32_times

T = TypeVar("T")


def _history_times_in_ms(conn: sqlite3.Connection) -> None:
    """History entries date a cycle in ms since the epoch, no longer as a float32 offset from first_seen."""
    rows = conn.execute("SELECT loop_id, history, first_seen FROM loops").fetchall()
    updates = []
    for loop_id, history, first_seen in rows:
        try:
            updates.append((history_from_float32_times(history, first_seen), loop_id))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"table loops, row loop_id={str(loop_id)[:80]!r}: column history: {exc}") from None
    conn.executemany("UPDATE loops SET history=? WHERE loop_id=?", updates)


SCHEMA_VERSION = "6"
# what turns a state file of an earlier schema into the next one (a monitor upgrade keeps its loops): SQL
# statements, or a function of the connection
_MIGRATIONS: dict[str, tuple[str | Callable[[sqlite3.Connection], None], ...]] = {
    "1": ("ALTER TABLE loops ADD COLUMN episode INTEGER NOT NULL DEFAULT 0",
          "ALTER TABLE loops ADD COLUMN episode_start REAL"),
    "2": ("ALTER TABLE loops ADD COLUMN ordering TEXT",),
    "3": ("ALTER TABLE loops ADD COLUMN oncall TEXT",),
    # ctxwatch_mutations_total gained its last label, agent_version: "" (none sent) for the series
    # kept so far, written as json.dumps writes the key (the text is the row's primary key)
    "4": ("UPDATE series SET labels = substr(labels, 1, length(labels) - 1) || ', \"\"]' "
          "WHERE family = 'ctxwatch_mutations_total'",),
    "5": (_history_times_in_ms,)}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loops (
    loop_id TEXT PRIMARY KEY, service TEXT NOT NULL, agent TEXT NOT NULL, state TEXT NOT NULL,
    onset INTEGER, flagged INTEGER, alarm_time REAL, cycles INTEGER NOT NULL, first_seen REAL NOT NULL,
    last_seen REAL NOT NULL, guard_state TEXT, detector TEXT NOT NULL, history BLOB NOT NULL,
    entries INTEGER NOT NULL, episode INTEGER NOT NULL DEFAULT 0, episode_start REAL, ordering TEXT,
    oncall TEXT
);
CREATE TABLE IF NOT EXISTS series (
    family TEXT NOT NULL, labels TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (family, labels)
) WITHOUT ROWID;
"""
LOOP_COLUMNS = ("loop_id", "service", "agent", "state", "onset", "flagged", "alarm_time", "cycles", "first_seen",
                "last_seen", "guard_state", "detector", "history", "entries", "episode",
                "episode_start", "ordering", "oncall")
# an update in place (not INSERT OR REPLACE, a delete and an insert that also rewrites the key index)
_UPSERT_LOOP = (f"INSERT INTO loops VALUES ({','.join('?' * len(LOOP_COLUMNS))}) ON CONFLICT (loop_id) DO UPDATE SET "
                + ", ".join(f"{c}=excluded.{c}" for c in LOOP_COLUMNS[1:]))
_UPSERT_SERIES = "INSERT OR REPLACE INTO series VALUES (?,?,?)"
_UPSERT_META = "INSERT OR REPLACE INTO meta VALUES (?,?)"
_NUMBER = (int, float)
_COLUMN_TYPES: dict[str, type | tuple[type, ...]] = {
    "loop_id": str, "service": str, "agent": str, "state": str, "onset": (int, type(None)),
    "flagged": (int, type(None)), "alarm_time": (*_NUMBER, type(None)), "cycles": int, "first_seen": _NUMBER,
    "last_seen": _NUMBER, "guard_state": (str, type(None)), "detector": str, "history": bytes, "entries": int,
    "episode": int, "episode_start": (*_NUMBER, type(None)), "ordering": (str, type(None)),
    "oncall": (str, type(None)),
}  # columns not listed here are not checked


class StateFileError(RuntimeError):
    """The state file cannot be opened, is owned by another monitor, or is not a ctxwatch monitor state file."""


def _lock(path: str) -> int:
    """An exclusive, non-blocking flock on `<path>.lock` (its fd), else StateFileError naming the owner."""
    lock_path = path + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StateFileError(f"state file {path!r}: cannot open its lock file {lock_path!r}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StateFileError(f"state file {path!r} is in use by another monitor (pid {owner}, lock {lock_path!r}); "
                             "run one monitor per state file") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class Database:
    """The state file; used from one thread only (the engine's)."""

    def __init__(self, path: str, synchronous: str = "full") -> None:
        self.path = path
        self._labels: dict[tuple[str, ...], str] = {}  # bounded: metric labels are bounded
        self._lock_fd = _lock(path)
        try:
            self._open(synchronous)
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _open(self, synchronous: str) -> None:
        path = self.path
        try:
            self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'full' else 'NORMAL'}")
            self.conn.executescript(_SCHEMA)
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            schema = SCHEMA_VERSION if row is None else row[0]
            while schema in _MIGRATIONS:
                self._migrate(schema)
                schema = str(int(schema) + 1)
            if schema != SCHEMA_VERSION:
                raise StateFileError(f"state file {path!r} has schema {schema}, this monitor reads {SCHEMA_VERSION}")
            if row is None:
                self.conn.execute(_UPSERT_META, ("schema", schema))
        except sqlite3.Error as exc:
            raise StateFileError(f"state file {path!r} cannot be used: {exc}") from None

    def _migrate(self, schema: str) -> None:
        """Upgrade the file from `schema` to the next version in one transaction (a StateFileError naming the
        row when a row cannot be migrated; the file is left as it was)."""
        try:
            with self._transaction() as conn:
                for step in _MIGRATIONS[schema]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(conn)
                conn.execute(_UPSERT_META, ("schema", str(int(schema) + 1)))
        except ValueError as exc:
            raise StateFileError(f"state file {self.path!r} cannot be migrated from schema {schema}: {exc} "
                                 "(corrupt row; fix or delete it, or start with another state file)") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN ... COMMIT around the block; rolled back (and re-raised) when it raises."""
        conn = self.conn
        conn.execute("BEGIN")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _read(self, what: str, rows: Iterator[T]) -> Iterator[T]:
        """`rows`, with an SQLite error while reading them as a StateFileError naming the file and table."""
        try:
            yield from rows
        except sqlite3.Error as exc:
            raise StateFileError(f"state file {self.path!r}: cannot read {what}: {exc}") from None

    def load_loops(self) -> Iterator[dict[str, Any]]:
        """Every loop row, least recently seen first (a column of the wrong type is a StateFileError)."""
        cursor = self.conn.execute(f"SELECT {', '.join(LOOP_COLUMNS)} FROM loops ORDER BY last_seen")
        for values in self._read("table loops", cursor):
            row = dict(zip(LOOP_COLUMNS, values, strict=True))
            for column, value in row.items():
                if not isinstance(value, _COLUMN_TYPES.get(column, object)):
                    self._corrupt(row, f"column {column} holds {type(value).__name__} {str(value)[:40]!r}")
            if row["state"] not in STATES:
                self._corrupt(row, f"column state holds {row['state'][:40]!r}, not one of {', '.join(STATES)}")
            yield row

    def checked(self, row: dict[str, Any], build: Callable[[dict[str, Any]], T]) -> T:
        """`build(row)`, with any error building a loop from the row as a StateFileError naming it."""
        try:
            return build(row)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            self._corrupt(row, f"{type(exc).__name__}: {str(exc)[:120]}")

    def _corrupt(self, row: dict[str, Any], problem: str) -> NoReturn:
        raise StateFileError(f"state file {self.path!r}: table loops, row loop_id={str(row['loop_id'])[:80]!r}: "
                             f"{problem} (corrupt row; fix or delete it, or start with another state file)")

    def load_series(self) -> Iterator[tuple[str, tuple[str, ...], Any]]:
        for family, labels, value in self._read("table series", self.conn.execute(
                "SELECT family, labels, value FROM series")):
            try:
                key, decoded = tuple(json.loads(labels)), json.loads(value)
            except (TypeError, ValueError) as exc:
                raise StateFileError(f"state file {self.path!r}: table series, row family={family!r} "
                                     f"labels={str(labels)[:80]!r}: not JSON ({exc})") from None
            yield family, key, decoded

    def meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        try:
            return None if row is None else json.loads(row[0])
        except (TypeError, ValueError) as exc:
            raise StateFileError(f"state file {self.path!r}: table meta, row key={key!r}: not JSON ({exc})") from None

    def write(self, loops: Iterable[tuple[Any, ...]], removed: Iterable[str],
              series: Iterable[tuple[str, tuple[str, ...], Any]], meta: dict[str, Any],
              dropped_series: Iterable[tuple[str, tuple[str, ...]]] = ()) -> None:
        """Apply one batch's changes in one transaction (raises sqlite3.Error; rolled back then)."""
        with self._transaction() as conn:
            conn.executemany(_UPSERT_LOOP, loops)
            conn.executemany("DELETE FROM loops WHERE loop_id=?", ((loop_id,) for loop_id in removed))
            conn.executemany(_UPSERT_SERIES, ((f, self._labels_json(k), json.dumps(v)) for f, k, v in series))
            conn.executemany("DELETE FROM series WHERE family=? AND labels=?",
                             ((f, self._labels_json(k)) for f, k in dropped_series))
            conn.executemany(_UPSERT_META, ((k, json.dumps(v)) for k, v in meta.items()))

    def probe(self) -> None:
        """A small write transaction (raises sqlite3.Error when the file still cannot be written)."""
        with self._transaction() as conn:
            conn.execute(_UPSERT_META, ("probe", json.dumps(os.getpid())))

    def _labels_json(self, labels: tuple[str, ...]) -> str:
        text = self._labels.get(labels)
        if text is None:
            text = self._labels[labels] = json.dumps(labels)
        return text

    def close(self) -> None:
        self.conn.close()
        os.close(self._lock_fd)

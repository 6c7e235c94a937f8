"""The SQLite state file: loops with their history and detector state, persisted metric series.

One transaction per batch of ingest requests (`write`), committed before any of them is answered,
in WAL mode; `synchronous=FULL` (the default) survives power loss, `NORMAL` survives a process
crash. Loop rows are upserted whole, in place (the history ring is a blob), evicted loops are
deleted, and metric series changed by the batch are upserted (the JSON of their label tuples is
cached: labels are bounded). `load_loops` returns loops in least-recently-seen order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

SCHEMA_VERSION = "3"
# what turns a state file of an earlier schema into the next one (a monitor upgrade keeps its loops)
_MIGRATIONS = {"1": ("ALTER TABLE loops ADD COLUMN episode INTEGER NOT NULL DEFAULT 0",
                     "ALTER TABLE loops ADD COLUMN episode_start REAL"),
               "2": ("ALTER TABLE loops ADD COLUMN ordering TEXT",)}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS loops (
    loop_id TEXT PRIMARY KEY, service TEXT NOT NULL, agent TEXT NOT NULL, state TEXT NOT NULL,
    onset INTEGER, flagged INTEGER, alarm_time REAL, cycles INTEGER NOT NULL, first_seen REAL NOT NULL,
    last_seen REAL NOT NULL, guard_state TEXT, detector TEXT NOT NULL, history BLOB NOT NULL,
    entries INTEGER NOT NULL, episode INTEGER NOT NULL DEFAULT 0, episode_start REAL, ordering TEXT
);
CREATE TABLE IF NOT EXISTS series (
    family TEXT NOT NULL, labels TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (family, labels)
) WITHOUT ROWID;
"""
LOOP_COLUMNS = ("loop_id", "service", "agent", "state", "onset", "flagged", "alarm_time", "cycles", "first_seen",
                "last_seen", "guard_state", "detector", "history", "entries", "episode",
                "episode_start", "ordering")
# an update in place (not INSERT OR REPLACE, a delete and an insert that also rewrites the key index)
_UPSERT_LOOP = (f"INSERT INTO loops VALUES ({','.join('?' * len(LOOP_COLUMNS))}) ON CONFLICT (loop_id) DO UPDATE SET "
                + ", ".join(f"{c}=excluded.{c}" for c in LOOP_COLUMNS[1:]))
_UPSERT_SERIES = "INSERT OR REPLACE INTO series VALUES (?,?,?)"
_UPSERT_META = "INSERT OR REPLACE INTO meta VALUES (?,?)"


class StateFileError(RuntimeError):
    """The state file cannot be opened or is not a ctxwatch monitor state file."""


class Database:
    """The state file; used from one thread only (the engine's)."""

    def __init__(self, path: str, synchronous: str = "full") -> None:
        self.path = path
        self._labels: dict[tuple[str, ...], str] = {}  # bounded: metric labels are bounded
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
        """Upgrade the file from `schema` to the next version in one transaction."""
        with self._transaction() as conn:
            for statement in _MIGRATIONS[schema]:
                conn.execute(statement)
            conn.execute(_UPSERT_META, ("schema", str(int(schema) + 1)))

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

    def load_loops(self) -> Iterator[dict[str, Any]]:
        """Every loop row, least recently seen first."""
        cursor = self.conn.execute(f"SELECT {', '.join(LOOP_COLUMNS)} FROM loops ORDER BY last_seen")
        for row in cursor:
            yield dict(zip(LOOP_COLUMNS, row, strict=True))

    def load_series(self) -> Iterator[tuple[str, tuple[str, ...], Any]]:
        for family, labels, value in self.conn.execute("SELECT family, labels, value FROM series"):
            yield family, tuple(json.loads(labels)), json.loads(value)

    def meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def write(self, loops: Iterable[tuple[Any, ...]], removed: Iterable[str],
              series: Iterable[tuple[str, tuple[str, ...], Any]], meta: dict[str, Any]) -> None:
        """Apply one batch's changes in one transaction (raises sqlite3.Error; rolled back then)."""
        with self._transaction() as conn:
            conn.executemany(_UPSERT_LOOP, loops)
            conn.executemany("DELETE FROM loops WHERE loop_id=?", ((loop_id,) for loop_id in removed))
            conn.executemany(_UPSERT_SERIES, ((f, self._labels_json(k), json.dumps(v)) for f, k, v in series))
            conn.executemany(_UPSERT_META, ((k, json.dumps(v)) for k, v in meta.items()))

    def _labels_json(self, labels: tuple[str, ...]) -> str:
        text = self._labels.get(labels)
        if text is None:
            text = self._labels[labels] = json.dumps(labels)
        return text

    def close(self) -> None:
        self.conn.close()

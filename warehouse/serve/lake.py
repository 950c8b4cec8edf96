"""DuckLake reads for the dashboard: one attached catalog shared by every request.

Attaching a DuckLake (load two extensions, open the catalog, read its schema) costs far more
than the query a page runs, and a SQLite catalog serializes the opens: with an ATTACH per
request, 50 concurrent requests took 25 s each. Here the lake is attached once, read-only,
and a request reads on one of a bounded pool of cursors. A cursor is a connection of its own
to that DuckDB instance, so queries on two cursors run at once, and each
request reads one snapshot, the newest when it starts: a round that `train run` commits
shows on the next request, as on the file. Answers are kept per snapshot (`Answers`).
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Iterator

from warehouse.db import LAKE_ALIAS
from warehouse.errors import DatabaseLockedError

#: Cursors at once: a page's queries are CPU-bound, so more than the cores only queue inside DuckDB.
POOL_SIZE = max(4, os.cpu_count() or 1)
#: How long a request waits for a free cursor before the "busy" page (a queue, not a lock: 200
#: requests at once drain in a few seconds).
WAIT_S = 60.0


class LakePool:
    """The attached lake and up to `size` cursors on it, handed out one per request."""

    def __init__(self, url: str, size: int = POOL_SIZE):
        self.url, self.size = url, size
        self.answers = Answers()
        self._lock = threading.Lock()
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._root = None  # the connection that holds the ATTACH
        self._made = 0

    @contextlib.contextmanager
    def cursor(self, wait_s: float = WAIT_S) -> Iterator:
        """A reader on one snapshot for the request: the newest when it starts, kept to its end."""
        with self._reading(self._take(wait_s)) as reader:
            yield reader

    @contextlib.contextmanager
    def beside(self, reader: "SnapshotReader") -> Iterator:
        """A second reader on `reader`'s snapshot, for a request's reads to run at once; None
        when no cursor is free right now (a request never waits for a second one, so requests
        that each hold one cannot starve each other) or a commit landed since `reader` began."""
        try:
            cur = self._take(0)
        except DatabaseLockedError:
            yield None
            return
        with self._reading(cur) as other:
            yield other if other.snapshot == reader.snapshot else None

    @contextlib.contextmanager
    def _reading(self, cur) -> Iterator:
        """`cur` reading the newest snapshot, back in the pool afterwards."""
        try:
            cur.execute("BEGIN TRANSACTION")
            snapshot = cur.execute(f"SELECT id FROM {LAKE_ALIAS}.current_snapshot()").fetchone()[0]
            yield SnapshotReader(cur, snapshot, self.answers)
            cur.execute("ROLLBACK")
        except BaseException:
            self._discard(cur)  # whatever state a failed read left, the next request gets a fresh one
            raise
        self._idle.put(cur)

    def _take(self, wait_s: float):
        with contextlib.suppress(queue.Empty):
            return self._idle.get_nowait()
        with self._lock:
            if self._made < self.size:
                cur = self._new_cursor()
                self._made += 1
                return cur
        try:
            return self._idle.get(timeout=wait_s)
        except queue.Empty:
            raise DatabaseLockedError(f"all {self.size} readers of the lake stayed busy for "
                                      f"{wait_s:.0f} s") from None

    def _new_cursor(self):
        from warehouse.db import lake_connection

        if self._root is None:
            self._root = lake_connection(self.url, read_only=True)
        cur = self._root.cursor()
        cur.execute(f"USE {LAKE_ALIAS}")
        return cur

    def _discard(self, cur) -> None:
        with contextlib.suppress(Exception):
            cur.close()
        with self._lock:
            self._made -= 1

    def close(self) -> None:
        with self._lock:
            while True:
                try:
                    self._idle.get_nowait().close()
                except queue.Empty:
                    break
            if self._root is not None:
                self._root.close()
            self._root, self._made = None, 0


class Answers:
    """Query results by (snapshot, SQL, parameters), the most recently used kept.

    A DuckLake snapshot never changes, so a query answered on it once has that answer for
    good: a page many people watch (and the live page's version poll) reads the lake once per
    snapshot instead of once per request. DuckLake pays tens of milliseconds of catalog reads
    for every table a query scans, which is what made it several times slower than the file
    under load. A commit makes a new snapshot, so the next request reads afresh. Memory is
    bounded by cells (rows x columns) kept: `cells` in all, an answer over a quarter of that
    is not kept."""

    def __init__(self, cells: int = 2_000_000):
        from collections import OrderedDict

        self.cells, self.kept_cells = cells, 0
        self._lock = threading.Lock()
        self._kept: OrderedDict = OrderedDict()

    def get(self, key):
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        return None

    def put(self, key, answer: "Answer") -> None:
        if answer.cells > self.cells // 4:
            return
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = answer
            self.kept_cells += answer.cells
            while self.kept_cells > self.cells:
                self.kept_cells -= self._kept.popitem(last=False)[1].cells


class Answer:
    """What a cursor gives back after execute(), for an answer read before."""

    def __init__(self, description, rows: list[tuple]):
        self.description, self._rows = description, rows
        self.cells = max(1, len(rows) * len(description or ()))

    def fetchall(self) -> list[tuple]:
        return list(self._rows)

    def fetchone(self) -> tuple | None:
        return self._rows[0] if self._rows else None


class SnapshotReader:
    """A cursor reading one snapshot: execute() answers from `answers` when it can."""

    def __init__(self, cur, snapshot: int, answers: Answers):
        self.cur, self.snapshot, self.answers = cur, snapshot, answers

    def execute(self, sql: str, params=None) -> Answer:
        key = (self.snapshot, sql, tuple(params or ()))
        answer = self.answers.get(key)
        if answer is None:
            result = self.cur.execute(sql, list(params or ()))
            answer = Answer(result.description, result.fetchall() if result.description else [])
            self.answers.put(key, answer)
        return answer


_pools: dict[str, LakePool] = {}
_pools_lock = threading.Lock()


def pool(url: str) -> LakePool:
    """The process's pool for the lake at `url` (made on first use)."""
    with _pools_lock:
        if url not in _pools:
            _pools[url] = LakePool(url)
        return _pools[url]


def close_pools() -> None:
    with _pools_lock:
        for each in _pools.values():
            each.close()
        _pools.clear()

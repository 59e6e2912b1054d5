"""All of the apistore's SQL: the event log, the projection and the outbox position.

Only this module imports asyncpg. Methods are named after their SQL; filters are keyword-only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from drasim import migrations
from drasim.common import errors

# Writers serialise on this advisory lock for the whole transaction. Postgres releases
# transaction locks only after the commit is visible to other sessions, so the writer that
# next takes the lock reads a max(seq) that includes every committed event and numbers its
# own events after it: insert order equals commit order, and a reader tailing the log by seq
# (the outbox, a list at resourceVersion R) never misses a lower seq that commits later.
# This is what makes resourceVersion a gap-free, commit-ordered sequence even with several
# apistore replicas.
WRITE_LOCK_KEY = 0x64726173  # "dras"
MIGRATION_LOCK_KEY = 0x6D696772  # "migr"

LOCK_WRITES = "SELECT pg_advisory_xact_lock($1)"
# The group-commit writer's transaction in four round trips: BEGIN with the lock (one simple
# query; the key is a constant), one read, one write, COMMIT. The read is a statement of its
# own after the lock, so under READ COMMITTED its snapshot includes every commit made before
# the lock was granted.
BEGIN_AND_LOCK_WRITES = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
SELECT_MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM events"
# A batch's rows and keys travel as one array of composite values per statement (the row
# types of migration 0002), not as one array per column: asyncpg checks every element of
# an array parameter against collections.abc in Python (a third of what the writer's
# statements cost it per event), and a row is one element. `EventRow`, `ObjectRow` and `Key`
# tuples are those values as they are; a key's row comes back with its 1-based position.
INSERT_EVENTS = """
INSERT INTO events (seq, type, resource, namespace, name, uid, node_name, object, actor,
                    traceparent)
SELECT seq, type, resource, namespace, name, uid, node_name, object, actor, traceparent
FROM unnest($1::event_row[])"""
_UPSERT_OBJECTS_FROM = """
INSERT INTO objects (resource, namespace, name, uid, resource_version, node_name, owner_uids,
                     object)
SELECT resource, namespace, name, uid, resource_version, node_name,
       coalesce(owner_uids, '{}'), object
FROM unnest($%d::object_row[])"""
_ON_CONFLICT_UPDATE = """
ON CONFLICT (resource, namespace, name) DO UPDATE SET
    uid = excluded.uid, resource_version = excluded.resource_version,
    node_name = excluded.node_name, owner_uids = excluded.owner_uids, object = excluded.object"""
# Lookups by a list of keys go key by key through the primary key (LATERAL ... LIMIT 1):
# as a plain join, a plan made while the table was small (prepared statements keep a
# generic plan) hashes the keys and scans the whole table, slower with every object.
_OBJECTS_AT_KEYS = """
FROM unnest($%d::object_key[]) WITH ORDINALITY AS k(resource, namespace, name, i)
CROSS JOIN LATERAL (
    SELECT object, ctid FROM objects
    WHERE resource = k.resource AND namespace = k.namespace AND name = k.name
    LIMIT 1
) AS o
"""
SELECT_OBJECTS_BY_KEYS = "SELECT k.i, o.object" + _OBJECTS_AT_KEYS % 1
# max(seq) (the row without a position) and the batch's rows in one statement.
SELECT_MAX_SEQ_AND_OBJECTS = (
    "SELECT NULL::bigint, coalesce(max(seq), 0), NULL::bytea FROM events"
    " UNION ALL SELECT k.i, NULL, o.object" + _OBJECTS_AT_KEYS % 1
)
SELECT_DEPENDENTS = """
SELECT resource, namespace, name, object FROM objects WHERE owner_uids && $1::text[]
"""
UPSERT_OBJECTS = _UPSERT_OBJECTS_FROM % 1 + _ON_CONFLICT_UPDATE
DELETE_OBJECTS = (
    "DELETE FROM objects WHERE ctid = ANY(ARRAY(SELECT o.ctid" + _OBJECTS_AT_KEYS % 1 + "))"
)
# The batch's events ($1), projection upserts ($2) and projection deletes ($4) in one
# statement. The three touch disjoint rows (a key is either upserted or deleted, once), so
# running them against one snapshot, as data-modifying CTEs do, is the same as running them
# in turn. The guard writes nothing unless the log still ends where the batch was numbered
# from ($3); a batch prepared ahead of the lock (see `ApiCore`) learns this way that
# someone else committed first.
_WRITE_EVENTS_AND_UPSERTS = (
    "inserted AS ("
    + INSERT_EVENTS
    + " WHERE (SELECT ok FROM guard)), upserted AS ("
    + _UPSERT_OBJECTS_FROM % 2
    + " WHERE (SELECT ok FROM guard)"
    + _ON_CONFLICT_UPDATE
    + ")"
)
_WRITE_DELETES = (
    ", deleted AS (DELETE FROM objects WHERE (SELECT ok FROM guard) AND ctid = ANY(ARRAY("
    "SELECT o.ctid" + _OBJECTS_AT_KEYS % 4 + ")))"
)
_GUARD = (
    "WITH guard AS (SELECT $3::bigint IS NULL OR coalesce(max(seq), 0) = $3::bigint AS ok"
    " FROM events),"
)
WRITE_BATCH = _GUARD + _WRITE_EVENTS_AND_UPSERTS + " SELECT ok FROM guard"
# With deletes. A plan for `ctid = ANY(...)` that Postgres made while the table was small
# (and keeps, for a prepared statement) scans the whole table: `write_batch` has it planned
# afresh each time (deletes are rare: a batch that deletes also collects garbage).
WRITE_BATCH_DELETING = _GUARD + _WRITE_EVENTS_AND_UPSERTS + _WRITE_DELETES + " SELECT ok FROM guard"
PLAN_EACH_TIME = "SET LOCAL plan_cache_mode = force_custom_plan"
# The same as a transaction of its own, for a batch prepared ahead of the lock once the
# batch before it has committed (never one that deletes: that one collects garbage, under
# the lock): the lock (taken before any row is written: every write waits on the guard,
# and the guard on the lock) keeps it out of other writers' transactions; the guard checks
# the log still ends where the batch was numbered from. The statement's snapshot predates
# the lock, so a writer that committed while it waited for the lock is not seen by the
# guard; that writer numbered its events from the same place, and the events' primary key
# refuses the second copy of those numbers (a unique violation: the statement writes
# nothing and the batch is redone).
WRITE_BATCH_ALONE = (
    f"WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})),"
    " guard AS (SELECT (SELECT count(*) FROM locked) = 1"
    " AND coalesce(max(seq), 0) = $3::bigint AS ok FROM events),"
    + _WRITE_EVENTS_AND_UPSERTS
    + " SELECT ok FROM guard"
)
SELECT_OBJECT = "SELECT object FROM objects WHERE resource = $1 AND namespace = $2 AND name = $3"
# Objects of a resource last written before a time: the event that wrote an object's
# current version is the one at its resourceVersion, and that event has the write's time.
SELECT_WRITTEN_BEFORE = """
SELECT o.namespace, o.name, o.resource_version FROM objects o
JOIN events e ON e.seq = o.resource_version
WHERE o.resource = $1 AND e.created_at < $2
ORDER BY o.resource_version LIMIT $3"""
SELECT_EVENTS_AFTER = """
SELECT seq, type, resource, namespace, name, uid, node_name, object, actor, traceparent,
       created_at
FROM events WHERE seq > $1 ORDER BY seq LIMIT $2
"""
SELECT_OUTBOX_SEQ = "SELECT seq FROM outbox WHERE id = 1"
# Guarded so that a slower replica never moves the position backwards.
UPDATE_OUTBOX_SEQ = "UPDATE outbox SET seq = $1 WHERE id = 1 AND seq < $1"
SELECT_SCHEMA_VERSIONS = "SELECT version FROM schema_migrations"
CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    int         PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
INSERT_SCHEMA_VERSION = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)"

Key = tuple[str, str, str]  # (resource, namespace, name)
# Rows a list page's cursor fetches per round trip (a page with a selector may read many).
LIST_PREFETCH = 1000


class ListedObjects(NamedTuple):
    """One list (or page of one) as `Store.select_objects` answers it."""

    resource_version: int
    objects: list[bytes]
    more: tuple[str, str] | None  # (namespace, name) after which the next page starts
    remaining: int  # objects after this page (0 when unknown)


class EventRow(NamedTuple):
    """One event as stored (and as the outbox publishes it); a tuple, so that it is an
    `event_row` value for the database as it is."""

    seq: int
    type: str
    resource: str
    namespace: str
    name: str
    uid: str
    node_name: str
    object: bytes
    actor: str = ""
    traceparent: str = ""
    created_at: Any = None


class SelectedEvents(NamedTuple):
    """A page of the event log as `Store.select_events` answers it."""

    events: list[EventRow]
    more: bool  # more events match after the page
    last_seq: int  # the log's last event in the page's snapshot


# Rows of the event log a page's cursor fetches per round trip (an event may hold an
# object of up to 1.5 MiB).
EVENT_PREFETCH = 256
# What a logged event's answer holds besides its object, names, actor and traceparent
# (field names, seq, type, resource, uid, time).
EVENT_FIELDS_BYTES = 256


class ObjectRow(NamedTuple):
    """The projection row of one live object (an `object_row` value as it is)."""

    resource: str
    namespace: str
    name: str
    uid: str
    resource_version: int
    node_name: str
    owner_uids: Sequence[str]
    object: bytes


def _translate(exc: BaseException) -> errors.ApiError:
    """Driver errors become API errors in one place (503 when the database is away)."""
    if isinstance(exc, asyncpg.PostgresError):
        return errors.InternalError(f"database error: {exc}")
    return errors.ServiceUnavailable(f"database unavailable: {exc}")


def _storable(*texts: str | None) -> bool:
    """Whether Postgres text holds these strings: it never holds a NUL character, so a key
    or filter with one matches no row (and sending it would be an error, a 500). Names,
    namespaces and node names with one never pass validation; requests still name them."""
    return not any(text and "\x00" in text for text in texts)


def _stored_keys(keys: Sequence[Key]) -> Sequence[Key]:
    """The keys that can be in the table (see `_storable`)."""
    if all(_storable(*key) for key in keys):
        return keys
    return [key for key in keys if _storable(*key)]


def _at_positions(keys: Sequence[Key], rows: Sequence[asyncpg.Record]) -> dict[Key, bytes]:
    """The found rows of a key lookup (position, object) by key."""
    return {keys[r[0] - 1]: r[1] for r in rows}


def _max_seq_and_objects(
    keys: Sequence[Key], rows: Sequence[asyncpg.Record]
) -> tuple[int, dict[Key, bytes]]:
    """The answer of `SELECT_MAX_SEQ_AND_OBJECTS`: the log's last seq, the found rows."""
    found = {}
    last_seq = 0
    for r in rows:
        if r[0] is None:
            last_seq = r[1]
        else:
            found[keys[r[0] - 1]] = r[2]
    return last_seq, found


def _write_batch_args(
    events: Sequence[EventRow],
    upserts: Sequence[ObjectRow],
    deletes: Sequence[Key],
    after_seq: int | None,
) -> list[Any]:
    args: list[Any] = [events, upserts, after_seq]
    if deletes:
        args.append(deletes)
    return args


class WriteTransaction:
    """The statements a group-commit batch runs, inside one transaction holding the lock."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self._planning_each_time = False

    async def lock_writes(self) -> None:
        await self._conn.execute(LOCK_WRITES, WRITE_LOCK_KEY)

    async def max_seq(self) -> int:
        return await self._conn.fetchval(SELECT_MAX_SEQ)

    async def select_objects(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        keys = _stored_keys(keys)
        if not keys:
            return {}
        return _at_positions(keys, await self._conn.fetch(SELECT_OBJECTS_BY_KEYS, keys))

    async def max_seq_and_objects(self, keys: Sequence[Key]) -> tuple[int, dict[Key, bytes]]:
        """`max_seq()` and `select_objects(keys)` in one round trip."""
        keys = _stored_keys(keys)
        return _max_seq_and_objects(keys, await self._conn.fetch(SELECT_MAX_SEQ_AND_OBJECTS, keys))

    async def select_dependents(self, uids: Sequence[str]) -> dict[Key, bytes]:
        await self._plan_each_time()  # (a plan made on a small table would scan it all)
        rows = await self._conn.fetch(SELECT_DEPENDENTS, list(uids))
        return {(r[0], r[1], r[2]): r[3] for r in rows}

    async def insert_events(self, events: Sequence[EventRow]) -> None:
        if events:
            await self._conn.execute(INSERT_EVENTS, events)

    async def upsert_objects(self, rows: Sequence[ObjectRow]) -> None:
        if rows:
            await self._conn.execute(UPSERT_OBJECTS, rows)

    async def delete_objects(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        await self._plan_each_time()
        await self._conn.execute(DELETE_OBJECTS, keys)

    async def write_batch(
        self,
        events: Sequence[EventRow],
        upserts: Sequence[ObjectRow],
        deletes: Sequence[Key],
        *,
        after_seq: int | None = None,
    ) -> bool:
        """`insert_events`, `upsert_objects` and `delete_objects` in one round trip.

        With `after_seq`, only if the log's last event is still `after_seq`; answers
        whether it wrote (without, it always does).
        """
        if not events and not upserts and not deletes and after_seq is None:
            return True
        if deletes:
            await self._plan_each_time()
        return await self._conn.fetchval(
            WRITE_BATCH_DELETING if deletes else WRITE_BATCH,
            *_write_batch_args(events, upserts, deletes, after_seq),
        )

    async def _plan_each_time(self) -> None:
        """Plan this transaction's statements afresh with the tables as they are now (see
        `WRITE_BATCH_DELETING`); for the rare batches that delete or collect garbage."""
        if not self._planning_each_time:
            await self._conn.execute(PLAN_EACH_TIME)
            self._planning_each_time = True


_DRIVER_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


class WriteSession:
    """One connection held for one batch (see `Store.write_session`)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.broken = False  # a failure left it in an unknown state: give it back

    async def select_objects(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        """The rows at `keys` as committed now, read without the write lock."""
        keys = _stored_keys(keys)
        if not keys:
            return {}
        return _at_positions(keys, await self._fetch(SELECT_OBJECTS_BY_KEYS, keys))

    async def max_seq_and_objects(self, keys: Sequence[Key]) -> tuple[int, dict[Key, bytes]]:
        """The log's last seq and the rows at `keys` as committed then (one snapshot), read
        without the write lock."""
        keys = _stored_keys(keys)
        return _max_seq_and_objects(keys, await self._fetch(SELECT_MAX_SEQ_AND_OBJECTS, keys))

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            return await self._conn.fetch(sql, *args)
        except BaseException as exc:
            self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise

    async def write_batch_alone(
        self,
        events: Sequence[EventRow],
        upserts: Sequence[ObjectRow],
        deletes: Sequence[Key],
        *,
        after_seq: int,
    ) -> bool:
        """`WriteTransaction.write_batch(..., after_seq=after_seq)` as a transaction of its
        own, in one round trip (see `WRITE_BATCH_ALONE`); answers whether it wrote."""
        if not events:
            return True  # (no event, no row to write either)
        if deletes:
            raise ValueError("a batch that deletes writes under the lock (write_batch)")
        try:
            return await self._conn.fetchval(
                WRITE_BATCH_ALONE, *_write_batch_args(events, upserts, deletes, after_seq)
            )
        except asyncpg.UniqueViolationError:
            return False  # another writer took these numbers first
        except BaseException as exc:
            self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[WriteTransaction]:
        """A transaction holding the write lock (see `WRITE_LOCK_KEY`); commits on a clean
        exit, rolls back on an exception. Driver errors become API errors."""
        conn = self._conn
        try:
            await conn.execute(BEGIN_AND_LOCK_WRITES)
        except BaseException as exc:
            self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise
        try:
            yield WriteTransaction(conn)
        except BaseException as exc:
            try:
                await conn.execute("ROLLBACK")
            except BaseException:
                self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise
        try:
            await conn.execute("COMMIT")
        except BaseException as exc:
            self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise


async def _release_quietly(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    """Give a connection in any state back to the pool, which resets or replaces it."""
    try:
        await asyncio.shield(pool.release(conn, timeout=5.0))
    except (asyncio.CancelledError, Exception):
        conn.terminate()


def _attached(conn: asyncpg.Connection) -> bool:
    """Whether a connection acquired from the pool is still ours to use: asyncpg gives one
    back to its pool as soon as the server closes it (a Postgres restart), after which
    every call on it fails with "connection has been released back to the pool"."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a released connection: nothing to do.

    asyncpg's default reset (advisory unlock, CLOSE ALL, UNLISTEN *, RESET ALL) costs one
    more round trip per release: per `get`, a second one. The apistore leaves no session
    state behind: its locks are transaction-scoped, its settings `SET LOCAL`, and asyncpg
    rolls back an open transaction before calling this."""


class Store:
    """A pool of connections to the apistore's Postgres database."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        # Connections kept by the writer between batches (no acquire and release per batch).
        self._write_conns: list[asyncpg.Connection] = []

    @classmethod
    async def connect(cls, database_url: str, *, min_size: int = 2, max_size: int = 10) -> Store:
        try:
            pool = await asyncpg.create_pool(
                database_url, min_size=min_size, max_size=max_size, reset=_keep_session
            )
        except (OSError, asyncpg.PostgresError) as exc:
            raise _translate(exc) from exc
        return cls(pool)

    async def close(self) -> None:
        while self._write_conns:
            await self._pool.release(self._write_conns.pop())
        await self._pool.close()

    async def migrate(self) -> list[int]:
        """Apply the migrations not yet applied, each in its own transaction; safe to re-run
        and safe for several apistores starting at once (they serialise on a lock)."""
        applied: list[int] = []
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await conn.execute(CREATE_SCHEMA_MIGRATIONS)
            done = {r[0] for r in await conn.fetch(SELECT_SCHEMA_VERSIONS)}
            for version, name, sql in migrations.files():
                if version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute(INSERT_SCHEMA_VERSION, version, name)
                applied.append(version)
        return applied

    @contextlib.asynccontextmanager
    async def write_session(self) -> AsyncIterator[WriteSession]:
        """A connection for one group-commit batch: reads ahead of the lock, then its write
        transaction. The writer keeps the connection afterwards (a pooled one is reset on
        release, one more round trip per batch) unless it broke."""
        while self._write_conns and not _attached(self._write_conns[-1]):
            self._write_conns.pop()  # closed by its server: asyncpg took it back already
        try:
            conn = self._write_conns.pop() if self._write_conns else await self._pool.acquire()
        except _DRIVER_ERRORS as exc:
            raise _translate(exc) from exc
        session = WriteSession(conn)
        try:
            yield session
        except BaseException:
            if session.broken:
                await _release_quietly(self._pool, conn)
            else:
                self._write_conns.append(conn)
            raise
        if session.broken:
            await _release_quietly(self._pool, conn)
        else:
            self._write_conns.append(conn)

    @contextlib.asynccontextmanager
    async def write_transaction(self) -> AsyncIterator[WriteTransaction]:
        """A transaction holding the write lock (see `WRITE_LOCK_KEY`); commits on a clean
        exit, rolls back on an exception. Driver errors become API errors."""
        async with self.write_session() as session, session.transaction() as txn:
            yield txn

    async def select_object(self, resource: str, namespace: str, name: str) -> bytes | None:
        if not _storable(resource, namespace, name):
            return None
        try:
            return await self._pool.fetchval(SELECT_OBJECT, resource, namespace, name)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise _translate(exc) from exc

    async def select_objects(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        node_name: str | None = None,
        name: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 0,
        keep: Callable[[bytes], bool] | None = None,
        max_bytes: int | None = None,
    ) -> ListedObjects:
        """Objects of one resource in (namespace, name) order, those `keep` accepts, and the
        resourceVersion they are consistent at.

        One REPEATABLE READ snapshot serves every query, so the list holds exactly the
        events up to that resourceVersion: a watch from it misses and repeats nothing. Rows
        stream through a cursor; with `limit`, until `limit` are kept and one more is found
        (so a page costs the page, not the whole table after it); then `more` is where the
        next page starts and, without `keep`, `remaining` counts the rows after the page
        (upstream counts `remainingItemCount` only for a list without selectors). A page
        also ends before its objects (and a byte each between them) pass `max_bytes`, if
        given: it then holds at least one object.
        """
        if not _storable(resource, namespace, node_name, name):
            return ListedObjects(await self.max_seq(), [], None, 0)
        clauses = ["resource = $1"]
        args: list[Any] = [resource]
        if namespace:
            args.append(namespace)
            clauses.append(f"namespace = ${len(args)}")
        if node_name is not None:
            args.append(node_name)
            clauses.append(f"node_name = ${len(args)}")
        if name is not None:
            args.append(name)
            clauses.append(f"name = ${len(args)}")
        matching = " AND ".join(clauses)
        where = matching
        if after is not None:
            args.extend(after)
            where += f" AND (namespace, name) > (${len(args) - 1}, ${len(args)})"
        sql = f"SELECT namespace, name, object FROM objects WHERE {where} ORDER BY namespace, name"
        objects: list[bytes] = []
        more, remaining = None, 0
        try:
            async with (
                self._pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                seq = await conn.fetchval(SELECT_MAX_SEQ)
                last, size = ("", ""), 0
                prefetch = min(limit + 1, LIST_PREFETCH) if limit else LIST_PREFETCH
                async for row in conn.cursor(sql, *args, prefetch=prefetch):
                    if keep is not None and not keep(row[2]):
                        continue
                    size += len(row[2]) + 1
                    if (limit and len(objects) == limit) or (
                        objects and max_bytes is not None and size > max_bytes
                    ):
                        more = last
                        break
                    objects.append(row[2])
                    last = (row[0], row[1])
                if more is not None and keep is None:
                    n = len(clauses)  # (one argument each)
                    count = f"SELECT count(*) FROM objects WHERE {matching}"
                    count += f" AND (namespace, name) > (${n + 1}, ${n + 2})"
                    remaining = await conn.fetchval(count, *args[:n], *more)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise _translate(exc) from exc
        return ListedObjects(seq, objects, more, remaining)

    async def select_written_before(
        self, resource: str, before: datetime, *, limit: int = 1000
    ) -> list[tuple[str, str, int]]:
        """(namespace, name, resourceVersion) of `resource`'s objects last written before
        `before`, oldest first."""
        rows = await self._pool.fetch(SELECT_WRITTEN_BEFORE, resource, before, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def max_seq(self) -> int:
        return await self._pool.fetchval(SELECT_MAX_SEQ)

    async def select_events_after(self, seq: int, *, limit: int = 1000) -> list[EventRow]:
        rows = await self._pool.fetch(SELECT_EVENTS_AFTER, seq, limit)
        return [EventRow(*r) for r in rows]

    async def select_events(
        self,
        *,
        gt: int = 0,
        lte: int | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        actor: str | None = None,
        trace_id: str | None = None,
        until_time: Any = None,
        limit: int = 1000,
        max_bytes: int | None = None,
    ) -> SelectedEvents:
        """The event log itself, filtered (for `drasim events` and replay), in pages as
        `select_objects` reads them: one snapshot, rows through a cursor, at most `limit`
        events, and (if given) ending before they pass `max_bytes`, with at least one.
        `last_seq` is the log's end in that snapshot, so a reader who follows the log from
        there after the last page misses nothing."""
        if not _storable(resource, namespace, name, actor, trace_id):
            return SelectedEvents([], False, await self.max_seq())
        clauses = ["seq > $1"]
        args: list[Any] = [gt]
        for column, value in (
            ("resource", resource),
            ("namespace", namespace),
            ("name", name),
            ("actor", actor),
        ):
            if value is not None:
                args.append(value)
                clauses.append(f"{column} = ${len(args)}")
        if lte is not None:
            args.append(lte)
            clauses.append(f"seq <= ${len(args)}")
        if trace_id is not None:
            args.append(f"%-{trace_id}-%")
            clauses.append(f"traceparent LIKE ${len(args)}")
        if until_time is not None:
            args.append(until_time)
            clauses.append(f"created_at <= ${len(args)}")
        args.append(limit + 1)  # one more than the page: whether more follow
        sql = (
            "SELECT seq, type, resource, namespace, name, uid, node_name, object, actor, "
            f"traceparent, created_at FROM events WHERE {' AND '.join(clauses)} "
            f"ORDER BY seq LIMIT ${len(args)}"
        )
        events: list[EventRow] = []
        more, size = False, 0
        try:
            async with (
                self._pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                last_seq = await conn.fetchval(SELECT_MAX_SEQ)
                prefetch = min(limit + 1, EVENT_PREFETCH)
                async for row in conn.cursor(sql, *args, prefetch=prefetch):
                    ev = EventRow(*row)
                    size += (
                        len(ev.object)
                        + len(ev.namespace)
                        + len(ev.name)
                        + len(ev.actor)
                        + len(ev.traceparent)
                        + EVENT_FIELDS_BYTES
                    )
                    if len(events) == limit or (
                        events and max_bytes is not None and size > max_bytes
                    ):
                        more = True
                        break
                    events.append(ev)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise _translate(exc) from exc
        return SelectedEvents(events, more, last_seq)

    async def select_outbox_seq(self) -> int:
        return await self._pool.fetchval(SELECT_OUTBOX_SEQ)

    async def update_outbox_seq(self, seq: int) -> None:
        await self._pool.execute(UPDATE_OUTBOX_SEQ, seq)

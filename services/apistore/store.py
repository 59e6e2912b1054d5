"""The apistore's Postgres store: the event log, the projection and the outbox position.

Only this module imports asyncpg, and every statement it runs is in `drasim.apistore.sql`.
Methods are named after their SQL; filters are keyword-only. Driver errors become API errors
here (503 when the database is away).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from drasim import migrations
from drasim.apistore import sql
from drasim.common import errors

Key = tuple[str, str, str]  # (resource, namespace, name)
# Rows a list page's cursor fetches per round trip (a page with a selector may read many).
LIST_PREFETCH = 1000


class CompactedError(Exception):
    """A read at a resourceVersion older than the log's compaction mark (`revision`): the
    log no longer folds to it (etcd's "mvcc: required revision has been compacted")."""

    def __init__(self, revision: int) -> None:
        super().__init__(f"required resourceVersion has been compacted (up to {revision})")
        self.revision = revision


class FutureRevisionError(Exception):
    """A read at a resourceVersion past the log's end (`current`), etcd's "mvcc: required
    revision is a future revision"."""

    def __init__(self, current: int) -> None:
        super().__init__(f"required resourceVersion is a future one (the log ends at {current})")
        self.current = current


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


class Compaction(NamedTuple):
    """The compaction row (migration 0003): rounds taken so far, the seq the log is
    compacted up to (0: never), and the latest write time among the compacted events."""

    rounds: int
    revision: int
    compacted_at: datetime | None


class SelectedEvents(NamedTuple):
    """A page of the event log as `Store.select_events` answers it."""

    events: list[EventRow]
    more: bool  # more events match after the page
    last_seq: int  # the log's last event in the page's snapshot
    compaction: Compaction | None = None  # how far the log was compacted in that snapshot


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


_DRIVER_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


def _translate(exc: BaseException) -> errors.ApiError:
    """Driver errors become API errors in one place (503 when the database is away)."""
    if isinstance(exc, asyncpg.PostgresError):
        return errors.InternalError(f"database error: {exc}")
    return errors.ServiceUnavailable(f"database unavailable: {exc}")


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """Raise driver errors as API errors (see `_translate`)."""
    try:
        yield
    except _DRIVER_ERRORS as exc:
        raise _translate(exc) from exc


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


def _equal_to(**values: Any) -> tuple[list[sql.Condition], list[Any]]:
    """Filters `column = value` for the values given (not None), and their parameters."""
    given = [(column, value) for column, value in values.items() if value is not None]
    return [(column, "=") for column, _ in given], [value for _, value in given]


def _at_positions(keys: Sequence[Key], rows: Sequence[asyncpg.Record]) -> dict[Key, bytes]:
    """The found rows of a key lookup (position, object) by key."""
    return {keys[r[0] - 1]: r[1] for r in rows}


def _max_seq_and_objects(
    keys: Sequence[Key], rows: Sequence[asyncpg.Record]
) -> tuple[int, dict[Key, bytes]]:
    """The answer of `sql.SELECT_MAX_SEQ_AND_OBJECTS`: the log's last seq, the found rows."""
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
    """The parameters of `sql.WRITE_BATCH` and its variants ($4 only where they delete)."""
    args: list[Any] = [events, upserts, after_seq]
    if deletes:
        args.append(deletes)
    return args


class WriteTransaction:
    """The statements a group-commit batch runs, inside one transaction holding the lock."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self._planning_each_time = False

    async def max_seq_and_objects(self, keys: Sequence[Key]) -> tuple[int, dict[Key, bytes]]:
        """The log's last seq and the rows at `keys`, in one round trip."""
        keys = _stored_keys(keys)
        rows = await self._conn.fetch(sql.SELECT_MAX_SEQ_AND_OBJECTS, keys)
        return _max_seq_and_objects(keys, rows)

    async def select_dependents(self, uids: Sequence[str]) -> dict[Key, bytes]:
        await self._plan_each_time()  # (a plan made on a small table would scan it all)
        rows = await self._conn.fetch(sql.SELECT_DEPENDENTS, list(uids))
        return {(r[0], r[1], r[2]): r[3] for r in rows}

    async def write_batch(
        self,
        events: Sequence[EventRow],
        upserts: Sequence[ObjectRow],
        deletes: Sequence[Key],
        *,
        after_seq: int | None = None,
    ) -> bool:
        """The batch's events, projection upserts and deletes in one round trip.

        With `after_seq`, only if the log's last event is still `after_seq`; answers
        whether it wrote (without, it always does).
        """
        if not events and not upserts and not deletes and after_seq is None:
            return True
        if deletes:
            await self._plan_each_time()
        return await self._conn.fetchval(
            sql.WRITE_BATCH_DELETING if deletes else sql.WRITE_BATCH,
            *_write_batch_args(events, upserts, deletes, after_seq),
        )

    async def _plan_each_time(self) -> None:
        """Plan this transaction's statements afresh with the tables as they are now (see
        `sql.WRITE_BATCH_DELETING`); for the rare batches that delete or collect garbage."""
        if not self._planning_each_time:
            await self._conn.execute(sql.PLAN_EACH_TIME)
            self._planning_each_time = True


class WriteSession:
    """One connection held for one batch (see `Store.write_session`)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.broken = False  # a failure left it in an unknown state: give it back

    @contextlib.contextmanager
    def _breaking(self) -> Iterator[None]:
        """A failure here leaves the connection in an unknown state: mark it broken, and
        raise driver errors as API errors."""
        try:
            yield
        except BaseException as exc:
            self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise

    async def select_objects(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        """The rows at `keys` as committed now, read without the write lock."""
        keys = _stored_keys(keys)
        if not keys:
            return {}
        with self._breaking():
            rows = await self._conn.fetch(sql.SELECT_OBJECTS_BY_KEYS, keys)
        return _at_positions(keys, rows)

    async def max_seq_and_objects(self, keys: Sequence[Key]) -> tuple[int, dict[Key, bytes]]:
        """The log's last seq and the rows at `keys` as committed then (one snapshot), read
        without the write lock."""
        keys = _stored_keys(keys)
        with self._breaking():
            rows = await self._conn.fetch(sql.SELECT_MAX_SEQ_AND_OBJECTS, keys)
        return _max_seq_and_objects(keys, rows)

    async def write_batch_alone(
        self,
        events: Sequence[EventRow],
        upserts: Sequence[ObjectRow],
        deletes: Sequence[Key],
        *,
        after_seq: int,
    ) -> bool:
        """`WriteTransaction.write_batch(..., after_seq=after_seq)` as a transaction of its
        own, in one round trip (see `sql.WRITE_BATCH_ALONE`); answers whether it wrote."""
        if not events:
            return True  # (no event, no row to write either)
        if deletes:
            raise ValueError("a batch that deletes writes under the lock (write_batch)")
        with self._breaking():
            try:
                return await self._conn.fetchval(
                    sql.WRITE_BATCH_ALONE, *_write_batch_args(events, upserts, deletes, after_seq)
                )
            except asyncpg.UniqueViolationError:
                return False  # another writer took these numbers first

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[WriteTransaction]:
        """A transaction holding the write lock (see `sql.WRITE_LOCK_KEY`); commits on a
        clean exit, rolls back on an exception. Driver errors become API errors."""
        conn = self._conn
        with self._breaking():
            await conn.execute(sql.BEGIN_AND_LOCK_WRITES)
        try:
            yield WriteTransaction(conn)
        except BaseException as exc:
            try:
                await conn.execute(sql.ROLLBACK)
            except BaseException:
                self.broken = True
            if isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc) from exc
            raise
        with self._breaking():
            await conn.execute(sql.COMMIT)


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
        with _translated():
            pool = await asyncpg.create_pool(
                database_url, min_size=min_size, max_size=max_size, reset=_keep_session
            )
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
            await conn.execute(sql.LOCK_MIGRATIONS)
            await conn.execute(sql.CREATE_SCHEMA_MIGRATIONS)
            done = {r[0] for r in await conn.fetch(sql.SELECT_SCHEMA_VERSIONS)}
            for version, name, statements in migrations.files():
                if version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(statements)
                    await conn.execute(sql.INSERT_SCHEMA_VERSION, version, name)
                applied.append(version)
        return applied

    @contextlib.asynccontextmanager
    async def write_session(self) -> AsyncIterator[WriteSession]:
        """A connection for one group-commit batch: reads ahead of the lock, then its write
        transaction. The writer keeps the connection afterwards (a pooled one is reset on
        release, one more round trip per batch) unless it broke."""
        while self._write_conns and not _attached(self._write_conns[-1]):
            self._write_conns.pop()  # closed by its server: asyncpg took it back already
        with _translated():
            conn = self._write_conns.pop() if self._write_conns else await self._pool.acquire()
        session = WriteSession(conn)
        try:
            yield session
        finally:
            if session.broken:
                await _release_quietly(self._pool, conn)
            else:
                self._write_conns.append(conn)

    @contextlib.asynccontextmanager
    async def write_transaction(self) -> AsyncIterator[WriteTransaction]:
        """A transaction holding the write lock (see `sql.WRITE_LOCK_KEY`); commits on a
        clean exit, rolls back on an exception. Driver errors become API errors."""
        async with self.write_session() as session, session.transaction() as txn:
            yield txn

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[tuple[asyncpg.Connection, int]]:
        """A connection in one REPEATABLE READ, read-only snapshot and the log's last seq in
        it, so what is read there is exactly the log up to that seq. Driver errors become
        API errors."""
        with _translated():
            async with (
                self._pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                yield conn, await conn.fetchval(sql.SELECT_MAX_SEQ)

    async def select_object(self, resource: str, namespace: str, name: str) -> bytes | None:
        if not _storable(resource, namespace, name):
            return None
        with _translated():
            return await self._pool.fetchval(sql.SELECT_OBJECT, resource, namespace, name)

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
        at: int | None = None,
    ) -> ListedObjects:
        """Objects of one resource in (namespace, name) order, those `keep` accepts, and the
        resourceVersion they are consistent at: now's, or `at` (`sql.select_objects_at`),
        which raises `CompactedError` if the log is compacted past it and
        `FutureRevisionError` if the log has not reached it.

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
            return ListedObjects(await self.max_seq() if at is None else at, [], None, 0)
        conditions, args = _equal_to(
            resource=resource, namespace=namespace or None, node_name=node_name, name=name
        )
        statement = sql.select_objects(conditions, after=after is not None)
        count_after = sql.count_objects_after(conditions)
        objects: list[bytes] = []
        more, remaining = None, 0
        async with self._snapshot() as (conn, seq):
            if at is not None and at != seq:
                if at > seq:
                    raise FutureRevisionError(seq)
                compacted = (await conn.fetchrow(sql.SELECT_COMPACTION))["revision"]
                if at < compacted:
                    raise CompactedError(compacted)
                statement = sql.select_objects_at(conditions, after=after is not None)
                count_after = sql.count_objects_at_after(conditions)
                args.append(at)
                seq = at
            last, size = ("", ""), 0
            prefetch = min(limit + 1, LIST_PREFETCH) if limit else LIST_PREFETCH
            async for row in conn.cursor(statement, *args, *(after or ()), prefetch=prefetch):
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
                remaining = await conn.fetchval(count_after, *args, *more)
        return ListedObjects(seq, objects, more, remaining)

    async def select_written_before(
        self, resource: str, before: datetime, *, limit: int = 1000
    ) -> list[tuple[str, str, int]]:
        """(namespace, name, resourceVersion) of `resource`'s objects last written before
        `before`, oldest first."""
        rows = await self._pool.fetch(sql.SELECT_WRITTEN_BEFORE, resource, before, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def max_seq(self) -> int:
        return await self._pool.fetchval(sql.SELECT_MAX_SEQ)

    async def select_events_after(self, seq: int, *, limit: int = 1000) -> list[EventRow]:
        rows = await self._pool.fetch(sql.SELECT_EVENTS_AFTER, seq, limit)
        return [EventRow(*r) for r in rows]

    async def count_events(self) -> int:
        """Events the log keeps (fewer than its last sequence once compacted)."""
        return await self._pool.fetchval(sql.COUNT_EVENTS)

    async def select_event_keys(self, after: int, upto: int) -> list[tuple[int, str, str]]:
        """(seq, resource, node) of the events after `after` up to `upto`, in order."""
        rows = await self._pool.fetch(sql.SELECT_EVENT_KEYS, after, upto)
        return [(r[0], r[1], r[2]) for r in rows]

    async def select_last_event_keys(self, upto: int) -> list[tuple[str, str, int]]:
        """(resource, node, seq of its last event) of every resource and node the log
        holds events of up to `upto`."""
        rows = await self._pool.fetch(sql.SELECT_LAST_EVENT_KEYS, upto)
        return [(r[0], r[1], r[2]) for r in rows]

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
        conditions, args = _equal_to(resource=resource, namespace=namespace, name=name, actor=actor)
        for condition, value in (
            (("seq", ">"), gt),
            (("seq", "<="), lte),
            (("traceparent", "LIKE"), None if trace_id is None else f"%-{trace_id}-%"),
            (("created_at", "<="), until_time),
        ):
            if value is not None:
                conditions.append(condition)
                args.append(value)
        statement = sql.select_events(conditions)
        events: list[EventRow] = []
        more, size = False, 0
        async with self._snapshot() as (conn, last_seq):
            compaction = Compaction(*await conn.fetchrow(sql.SELECT_COMPACTION))
            prefetch = min(limit + 1, EVENT_PREFETCH)
            # One more than the page: whether more follow.
            async for row in conn.cursor(statement, *args, limit + 1, prefetch=prefetch):
                ev = EventRow(*row)
                size += (
                    len(ev.object)
                    + len(ev.namespace)
                    + len(ev.name)
                    + len(ev.actor)
                    + len(ev.traceparent)
                    + EVENT_FIELDS_BYTES
                )
                if len(events) == limit or (events and max_bytes is not None and size > max_bytes):
                    more = True
                    break
                events.append(ev)
        return SelectedEvents(events, more, last_seq, compaction)

    async def select_outbox_seq(self) -> int:
        return await self._pool.fetchval(sql.SELECT_OUTBOX_SEQ)

    async def update_outbox_seq(self, seq: int) -> None:
        await self._pool.execute(sql.UPDATE_OUTBOX_SEQ, seq)

    async def select_compaction(self) -> Compaction:
        with _translated():
            return Compaction(*await self._pool.fetchrow(sql.SELECT_COMPACTION))

    async def take_compaction_round(self, rounds: int) -> int | None:
        """Take the next compaction round if `rounds` is still the count taken (see
        `sql.TAKE_COMPACTION_ROUND`): the seq the round before recorded, to compact up to;
        None when another replica took it first."""
        with _translated():
            return await self._pool.fetchval(sql.TAKE_COMPACTION_ROUND, rounds)

    async def compact_events(self, after: int, upto: int) -> int:
        """One compaction step over the events after `after` up to `upto`, in a
        transaction of its own (`sql.COMPACT_EVENTS`); answers how many events went."""
        with _translated():
            async with self._pool.acquire() as conn, conn.transaction():
                # The sizes of a step's ranges vary: a plan made for a small one (prepared
                # statements keep a generic plan) may scan the whole log.
                await conn.execute(sql.PLAN_EACH_TIME)
                removed, _ = await conn.fetchrow(sql.COMPACT_EVENTS, after, upto)
        return removed

"""Every statement `drasim.apistore.store` runs, built once, with the locks it takes.

The tables are those of `migrations/`: `events` (the log; `seq` is the resourceVersion),
`objects` (the projection of live objects, keyed by resource, namespace and name), `outbox`
(the position the publisher has reached) and `schema_migrations`. Statements with filters
the caller chooses are built by the functions at the end, from the filters' columns;
parameters are always numbered, never values spliced into the text.
"""

from __future__ import annotations

from collections.abc import Sequence

# Writers serialise on this advisory lock for the whole transaction. Postgres releases
# transaction locks only after the commit is visible to other sessions, so the writer that
# next takes the lock reads a max(seq) that includes every committed event and numbers its
# own events after it: insert order equals commit order, and a reader tailing the log by seq
# (the outbox, a list at resourceVersion R) never misses a lower seq that commits later.
# This is what makes resourceVersion a gap-free, commit-ordered sequence even with several
# apistore replicas.
WRITE_LOCK_KEY = 0x64726173  # "dras"
# Apistores starting at once serialise on this one, so each migration runs once.
MIGRATION_LOCK_KEY = 0x6D696772  # "migr"
LOCK_MIGRATIONS = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"

# The group-commit writer's transaction in four round trips: BEGIN with the write lock (one
# simple query; the key is a constant), one read, one write, COMMIT. The read is a statement
# of its own after the lock, so under READ COMMITTED its snapshot includes every commit made
# before the lock was granted (see `WRITE_LOCK_KEY`).
BEGIN_AND_LOCK_WRITES = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
SELECT_MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM events"

# A batch's rows and keys travel as one array of composite values per statement (the row
# types of migration 0002), not as one array per column: asyncpg checks every element of
# an array parameter against collections.abc in Python, and a row is one element.
# `store.EventRow`, `store.ObjectRow` and `store.Key` tuples are those values as they are;
# a key's row comes back with its 1-based position.
#
# Events are numbered by the writer holding the write lock (see `WRITE_LOCK_KEY`), so the
# order of `seq` is the order of commits.
_INSERT_EVENTS = """
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

# The batch's events ($1), projection upserts ($2) and projection deletes ($4) in one
# statement. The three touch disjoint rows (a key is either upserted or deleted, once), so
# running them against one snapshot, as data-modifying CTEs do, is the same as running them
# in turn. The guard writes nothing unless the log still ends where the batch was numbered
# from ($3); a batch prepared ahead of the lock (see `ApiCore`) learns this way that
# someone else committed first.
_WRITE_EVENTS_AND_UPSERTS = (
    "inserted AS ("
    + _INSERT_EVENTS
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
# Run inside `BEGIN_AND_LOCK_WRITES`'s transaction.
WRITE_BATCH = _GUARD + _WRITE_EVENTS_AND_UPSERTS + " SELECT ok FROM guard"
# With deletes. A plan for `ctid = ANY(...)` that Postgres made while the table was small
# (and keeps, for a prepared statement) scans the whole table: the store has it planned
# afresh each time (`PLAN_EACH_TIME`; deletes are rare: a batch that deletes also collects
# garbage).
WRITE_BATCH_DELETING = _GUARD + _WRITE_EVENTS_AND_UPSERTS + _WRITE_DELETES + " SELECT ok FROM guard"
PLAN_EACH_TIME = "SET LOCAL plan_cache_mode = force_custom_plan"
# The same as a transaction of its own, for a batch prepared ahead of the lock once the
# batch before it has committed (never one that deletes: that one collects garbage, under
# the lock). It takes the write lock (see `WRITE_LOCK_KEY`) before any row is written:
# every write waits on the guard, and the guard on the lock, which keeps it out of other
# writers' transactions; the guard checks the log still ends where the batch was numbered
# from. The statement's snapshot predates the lock, so a writer that committed while it
# waited for the lock is not seen by the guard; that writer numbered its events from the
# same place, and the events' primary key refuses the second copy of those numbers (a
# unique violation: the statement writes nothing and the batch is redone).
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
_EVENT_COLUMNS = (
    "seq, type, resource, namespace, name, uid, node_name, object, actor, traceparent, created_at"
)
SELECT_EVENTS_AFTER = f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"
# The outbox's event chain (`drasim.apistore.event_chain`): what each event follows.
COUNT_EVENTS = "SELECT count(*) FROM events"
SELECT_EVENT_KEYS = (
    "SELECT seq, resource, node_name FROM events WHERE seq > $1 AND seq <= $2 ORDER BY seq"
)
SELECT_LAST_EVENT_KEYS = (
    "SELECT resource, node_name, max(seq) FROM events WHERE seq <= $1 GROUP BY resource, node_name"
)

SELECT_OUTBOX_SEQ = "SELECT seq FROM outbox WHERE id = 1"
# Guarded so that a slower replica never moves the position backwards.
UPDATE_OUTBOX_SEQ = "UPDATE outbox SET seq = $1 WHERE id = 1 AND seq < $1"

# Compaction (migration 0003, `drasim.apistore.compaction`). A round is taken by the replica
# whose count of rounds is the table's (a compare-and-set: the others learn the count and
# try again next interval); it records the log's end for the next round and gets back the
# end the round before recorded, which it compacts up to.
TAKE_COMPACTION_ROUND = """
WITH last AS (SELECT rounds, next_revision FROM compaction WHERE id = 1 FOR UPDATE)
UPDATE compaction SET rounds = last.rounds + 1,
    next_revision = (SELECT coalesce(max(seq), 0) FROM events)
FROM last WHERE compaction.id = 1 AND last.rounds = $1
RETURNING last.next_revision"""
SELECT_COMPACTION = "SELECT rounds, revision, compacted_at FROM compaction WHERE id = 1"
# One step of a compaction: of the events after $1 up to $2, each object's last one
# supersedes every earlier event of that object (those of earlier steps included), and is
# itself dropped if it is a deletion, as etcd's compaction drops tombstones; what is left
# at or before $2 is each live object's last version there, so the log still folds to the
# state at $2. The mark moves in the same transaction, so it never claims more than is
# done. The step's rows are read once, by seq (a max(created_at) of its own would walk the
# time index back from the newest event, past every event written since the step's); the
# events' index on (resource, namespace, name, seq) finds each object's earlier events, the
# scan bounded by `e.seq <= l.seq` (as one OR the bound was a mere filter: each lookup also
# read every later event of the object, a Lease renewed 140 times since, and a step of a
# 10,000-node churn took 7 s where it takes 0.5 s).
COMPACT_EVENTS = """
WITH step AS MATERIALIZED (
    SELECT resource, namespace, name, seq, type, created_at FROM events
    WHERE seq > $1 AND seq <= $2
), last AS (
    SELECT DISTINCT ON (resource, namespace, name) resource, namespace, name, seq, type
    FROM step ORDER BY resource, namespace, name, seq DESC
), latest AS (
    SELECT max(created_at) AS at FROM step
), removed AS (
    DELETE FROM events e USING last l
    WHERE e.resource = l.resource AND e.namespace = l.namespace AND e.name = l.name
      AND e.seq <= l.seq AND (e.seq < l.seq OR l.type = 'DELETED')
    RETURNING 1
), marked AS (
    UPDATE compaction SET revision = $2,
        compacted_at = coalesce((SELECT at FROM latest), compacted_at)
    WHERE id = 1 AND revision < $2
    RETURNING 1
)
SELECT (SELECT count(*) FROM removed), (SELECT count(*) FROM marked)"""

CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    int         PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SELECT_SCHEMA_VERSIONS = "SELECT version FROM schema_migrations"
INSERT_SCHEMA_VERSION = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)"

# A filter: (column, operator), compared with the next parameter (`$1`, `$2`, ...).
Condition = tuple[str, str]


def _where(conditions: Sequence[Condition]) -> str:
    return " AND ".join(f"{c} {op} ${i}" for i, (c, op) in enumerate(conditions, 1))


def _after_name(conditions: Sequence[Condition]) -> str:
    """Rows after a (namespace, name), the two parameters after the conditions'."""
    n = len(conditions)
    return f"(namespace, name) > (${n + 1}, ${n + 2})"


def select_objects(conditions: Sequence[Condition], *, after: bool) -> str:
    """A list's objects in (namespace, name) order; with `after`, those after the
    (namespace, name) given as the last two parameters."""
    where = _where(conditions)
    if after:
        where += " AND " + _after_name(conditions)
    return f"SELECT namespace, name, object FROM objects WHERE {where} ORDER BY namespace, name"


def select_objects_at(conditions: Sequence[Condition], *, after: bool) -> str:
    """A list's objects as they were at the resourceVersion given as the parameter after
    the conditions', in (namespace, name) order; with `after`, those after the (namespace,
    name) given as the two parameters after it.

    The projection holds each object as it is now, so what changed after that point is
    taken back from the log: an object not written since is its projection row (its
    resourceVersion at or before the point); one written since (created, changed or
    deleted) is its last event at or before the point, unless that is a deletion or there
    is none (created since). The objects written since are found from the log's events
    after the point, by seq: a continue token's point is a page ago, so they are few. The
    node filter (the object's at the point, not now's) applies to the event taken back.
    Compaction keeps each live object's last event at or before the point as long as the
    point is at or after the compaction mark, which the caller checks in the same snapshot.
    """
    listed = _objects_at(conditions, after=after)
    return f"SELECT namespace, name, object FROM ({listed}) listed ORDER BY namespace, name"


def count_objects_at_after(conditions: Sequence[Condition]) -> str:
    """How many objects `select_objects_at` has after the (namespace, name) given."""
    return f"SELECT count(*) FROM ({_objects_at(conditions, after=True)}) listed"


def _objects_at(conditions: Sequence[Condition], *, after: bool) -> str:
    n = len(conditions)
    at = f"${n + 1}"
    keyed = " AND ".join(
        f"{c} {op} ${i}" for i, (c, op) in enumerate(conditions, 1) if c != "node_name"
    )
    node = " ".join(
        f"AND node_name {op} ${i}" for i, (c, op) in enumerate(conditions, 1) if c == "node_name"
    )
    later = f" AND (namespace, name) > (${n + 2}, ${n + 3})" if after else ""
    return f"""
WITH changed AS MATERIALIZED (
    SELECT DISTINCT resource, namespace, name FROM events WHERE seq > {at} AND {keyed}
), was AS (
    SELECT c.namespace, c.name, e.type, e.node_name, e.object FROM changed c
    CROSS JOIN LATERAL (
        SELECT type, node_name, object FROM events
        WHERE resource = c.resource AND namespace = c.namespace AND name = c.name
          AND seq <= {at}
        ORDER BY seq DESC LIMIT 1
    ) e
)
SELECT namespace, name, object FROM objects
WHERE {_where(conditions)} AND resource_version <= {at}{later}
UNION ALL
SELECT namespace, name, object FROM was WHERE type <> 'DELETED' {node}{later}
"""


def count_objects_after(conditions: Sequence[Condition]) -> str:
    """How many objects a list has after the (namespace, name) of the last two parameters."""
    return f"SELECT count(*) FROM objects WHERE {_where(conditions)} AND {_after_name(conditions)}"


def select_events(conditions: Sequence[Condition]) -> str:
    """Events of the log in order, at most the parameter after the conditions'."""
    return (
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE {_where(conditions)}"
        f" ORDER BY seq LIMIT ${len(conditions) + 1}"
    )

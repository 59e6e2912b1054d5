-- Compaction of the event log (services/apistore/compaction.py), one row:
-- `revision`: the log is compacted up to this seq: of the events at or before it only each
-- live object's last one is kept, so the log still folds to the state at any seq from
-- `revision` on, and to no earlier one; `compacted_at`: the latest write time among the
-- compacted events (a replay to an earlier time is refused).
-- `rounds` and `next_revision`: the compare-and-set by which one apistore replica takes
-- each round (kube-apiserver's compact_rev_key in etcd): a round compacts up to the log's end
-- as the round before saw it, and records the end it sees for the next.
CREATE TABLE compaction (
    id            int         PRIMARY KEY CHECK (id = 1),
    rounds        bigint      NOT NULL DEFAULT 0,
    next_revision bigint      NOT NULL DEFAULT 0,
    revision      bigint      NOT NULL DEFAULT 0,
    compacted_at  timestamptz
);
INSERT INTO compaction (id) VALUES (1);

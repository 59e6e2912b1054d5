-- The append-only event log: one row per accepted mutation. `seq` is global, strictly
-- increasing in commit order, and is the object's metadata.resourceVersion.
CREATE TABLE events (
    seq         bigint      PRIMARY KEY,
    type        text        NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
    resource    text        NOT NULL,
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    uid         text        NOT NULL,
    node_name   text        NOT NULL DEFAULT '',
    object      bytea       NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    traceparent text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_object ON events (resource, namespace, name, seq);
CREATE INDEX events_created_at ON events (created_at);

-- The current-state projection, updated in the same transaction as the events.
CREATE TABLE objects (
    resource         text   NOT NULL,
    namespace        text   NOT NULL,
    name             text   NOT NULL,
    uid              text   NOT NULL,
    resource_version bigint NOT NULL,
    node_name        text   NOT NULL DEFAULT '',
    owner_uids       text[] NOT NULL DEFAULT '{}',
    object           bytea  NOT NULL,
    PRIMARY KEY (resource, namespace, name)
);
CREATE INDEX objects_owner_uids ON objects USING gin (owner_uids);
CREATE INDEX objects_node ON objects (resource, node_name);

-- Tracking: the last event seq the outbox has published to JetStream (a single row).
CREATE TABLE outbox (
    id  int    PRIMARY KEY CHECK (id = 1),
    seq bigint NOT NULL
);
INSERT INTO outbox (id, seq) VALUES (1, 0);

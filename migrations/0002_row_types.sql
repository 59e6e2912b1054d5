-- Row types the apistore's writer sends a batch's rows and keys as: one array of rows per
-- statement rather than one array per column (see services/apistore/store.py). Their
-- attributes follow store.EventRow, store.ObjectRow and store.Key field by field.
CREATE TYPE event_row AS (
    seq         bigint,
    type        text,
    resource    text,
    namespace   text,
    name        text,
    uid         text,
    node_name   text,
    object      bytea,
    actor       text,
    traceparent text,
    created_at  timestamptz
);
CREATE TYPE object_row AS (
    resource         text,
    namespace        text,
    name             text,
    uid              text,
    resource_version bigint,
    node_name        text,
    owner_uids       text[],
    object           bytea
);
CREATE TYPE object_key AS (
    resource  text,
    namespace text,
    name      text
);

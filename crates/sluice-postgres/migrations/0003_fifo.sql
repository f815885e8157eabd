-- Sluice's PostgreSQL schema, version 3: FIFO queues.
--
-- What FIFO needs beyond version 2: the queue's type where SQL can see it (a FIFO queue's
-- dead-letter queue must be FIFO, checked when a message moves), the deduplication keys still
-- inside their window, and indexes that find each message group's oldest message and whether a
-- group has a message in flight. How receive uses them is in src/fifo.rs.

-- Repeats `attributes->'fifo'`, as the other columns repeat the fields SQL acts on. Set at
-- creation, never changed. Every queue created before version 3 is standard.
ALTER TABLE queues ADD COLUMN fifo boolean NOT NULL DEFAULT false;

-- A FIFO send remembered for deduplication: a later send with the same key (core's
-- `fifo_send_rules`: the dedup id or the body's SHA-256, prefixed by the group when dedup is
-- per group) before `expires_at` is answered with this message's id and sequence number and
-- enqueues nothing, even after the message was acked. The primary key is what makes that hold
-- across nodes: two sends of one key race on `INSERT ... ON CONFLICT`, and exactly one inserts.
-- Rows are removed by the sweeper once expired, and by purge and queue deletion at once.
CREATE TABLE dedup (
    queue_id   bigint NOT NULL,
    key        text NOT NULL,
    message_id uuid NOT NULL,
    seq        bigint NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (queue_id, key)
) WITH (
    -- Every FIFO send inserts a row and the sweeper deletes it a window later: churn like
    -- `messages`, so the same fixed-threshold vacuuming (see migration 1).
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    vacuum_truncate = off
);
CREATE INDEX dedup_expiry ON dedup (expires_at);

-- Each group's messages in send order, whatever their state: a loose scan over it lists every
-- group with its oldest message (the head), and a receive reads a group's run from its head.
-- Only grouped messages are indexed, so ungrouped standard queues do not pay for it.
CREATE INDEX messages_group ON messages (queue_id, group_id, seq) WHERE group_id IS NOT NULL;
-- Whether a group has a message in flight (which blocks a FIFO group), without reading the
-- group's backlog: only held grouped messages are in it.
CREATE INDEX messages_group_held ON messages (queue_id, group_id, visible_at) WHERE in_flight AND group_id IS NOT NULL;

-- `sluice_send` has no dedup id, so it cannot apply FIFO's rules: it refuses FIFO queues and
-- hands every other send to the version-2 function, renamed.
ALTER FUNCTION sluice_send(text, bytea, jsonb, bigint, integer, jsonb, boolean, bigint)
    RENAME TO sluice_send_standard;

CREATE FUNCTION sluice_send(
    queue         text,
    body          bytea,
    attributes    jsonb   DEFAULT '{}',
    delay_ms      bigint  DEFAULT NULL,
    priority      integer DEFAULT 0,
    envelope      jsonb   DEFAULT '{}',
    body_binary   boolean DEFAULT false,
    deliver_at_ms bigint  DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_variable
BEGIN
    IF EXISTS (SELECT 1 FROM queues q WHERE q.name = queue AND q.fifo) THEN
        RAISE EXCEPTION 'sluice_send: queue % is a FIFO queue; FIFO sends need a dedup id and go through Sluice',
            quote_literal(queue) USING ERRCODE = 'feature_not_supported';
    END IF;
    RETURN sluice_send_standard(queue, body, attributes, delay_ms, priority, envelope, body_binary, deliver_at_ms);
END
$fn$;

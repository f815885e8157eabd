-- Sluice's PostgreSQL schema, version 1: queues, messages and the clock.
--
-- Every time is milliseconds since the Unix epoch (bigint), as in sluice-core. Times written by
-- SQL come from the database's clock (`sluice_now_ms()`), not from the nodes' clocks, so that
-- several nodes agree on when a visibility timeout or a delay ends even if their clocks drift.

-- The database's clock in milliseconds. STABLE (it is `now()`, the transaction's start), so that
-- a comparison with it can use an index; a statement that runs outside an explicit transaction
-- therefore sees the time it started.
CREATE FUNCTION sluice_now_ms() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT floor(extract(epoch FROM now()) * 1000)::bigint $$;

-- One row per queue. `attributes` holds the whole `QueueAttributes` (tags and SQS extras
-- included) as serde writes it; the columns beside it repeat the fields SQL acts on, and the Rust
-- code always writes both together. Ids come from a sequence, which never goes back, so a queue
-- id (and with it every receipt) is never handed out twice, even after the queue is deleted.
-- Names compare byte-wise (COLLATE "C") so that listing pages in the same order as the embedded
-- store.
CREATE TABLE queues (
    id                    bigserial PRIMARY KEY,
    name                  text COLLATE "C" NOT NULL UNIQUE,
    attributes            jsonb NOT NULL,
    visibility_timeout_ms bigint NOT NULL,
    delay_ms              bigint NOT NULL,
    retention_ms          bigint NOT NULL,
    message_bytes_max     bigint NOT NULL,
    dead_letter_queue     text COLLATE "C",
    max_receive_count     integer,
    created_at            bigint NOT NULL,
    modified_at           bigint NOT NULL
);

-- Ids of deleted queues. A send that raced the delete may still insert a message under the old
-- id (there is deliberately no foreign key: a key-share lock on the queue row by every send
-- turns into multixact contention under load); the sweeper removes such orphans, then the row.
CREATE TABLE deleted_queues (
    id         bigint PRIMARY KEY,
    deleted_at bigint NOT NULL
);

-- One row per message, whatever its state. `seq` is the identity inside the store (receipts
-- name it) and never changes, so moving a message to a dead-letter queue or back is one UPDATE
-- of `queue_id`: atomic by construction. A message is visible when `visible_at <= now`; while
-- `in_flight`, `visible_at` is the end of the visibility timeout, otherwise the end of a delay.
-- `epoch` is the delivery epoch receipts carry: raised by every receive and every move between
-- queues, never reset.
CREATE TABLE messages (
    seq                bigserial PRIMARY KEY,
    queue_id           bigint NOT NULL,
    id                 uuid NOT NULL,
    priority           smallint NOT NULL,
    sent_at            bigint NOT NULL,
    visible_at         bigint NOT NULL,
    in_flight          boolean NOT NULL DEFAULT false,
    receive_count      integer NOT NULL DEFAULT 0,
    epoch              bigint NOT NULL DEFAULT 0,
    first_received_at  bigint,
    size_bytes         bigint NOT NULL,
    group_id           text,
    dead_letter_source text,
    last_error         text,
    body               bytea NOT NULL,
    body_binary        boolean NOT NULL,
    attributes         jsonb NOT NULL DEFAULT '{}',
    system_attributes  jsonb NOT NULL DEFAULT '{}',
    envelope           jsonb NOT NULL DEFAULT '{}'
) WITH (
    -- Every message is inserted, updated at least once (receive) and deleted (ack): the table
    -- churns through dead tuples at the message rate. The default trigger (20% of the table)
    -- lets a small, hot queue table bloat between runs and lets receive scans wade through dead
    -- index entries; measured here, a plain SKIP LOCKED queue fell from 140k to 18k msg/s under
    -- the default settings. Vacuum after a fixed number of dead tuples instead, whatever the
    -- table's size, and never truncate the file at the end of a vacuum: truncation takes an
    -- ACCESS EXCLUSIVE lock that stalls every receive, only to give back space that the next
    -- burst of sends needs again.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    vacuum_truncate = off
);

-- Receive: messages not held by a consumer, in delivery order (priority, then send order).
-- Delayed rows are in it too and are skipped by the `visible_at` filter. Partial, so that a
-- receive (which sets `in_flight`) takes the row out of this index and the next receive does
-- not walk past the messages already being worked on.
CREATE INDEX messages_ready ON messages (queue_id, priority DESC, seq) WHERE NOT in_flight;
-- Visibility timeouts: in-flight messages by the end of their hold (expired holds for receive
-- and the sweeper, the next expiry for long polls, the in-flight count).
CREATE INDEX messages_in_flight ON messages (queue_id, visible_at) WHERE in_flight;
-- Delays: messages not held, by when they become visible (the next one for long polls, the
-- delayed and visible counts).
CREATE INDEX messages_delayed ON messages (queue_id, visible_at) WHERE NOT in_flight;
-- Age: retention, the oldest message, peek in send order.
CREATE INDEX messages_age ON messages (queue_id, sent_at, seq);

-- Sluice's PostgreSQL schema, version 6: streams (partitioned, replayable logs) and their
-- consumer groups. How the calls use it is in src/streams/.
--
-- Offsets are gapless per partition across nodes: an append takes its offsets by updating its
-- partition's row (`next_offset`) in the transaction that inserts the records, so the row lock
-- orders appends to one partition and commit order is offset order; a reader on any node never
-- sees an offset before the ones below it.

CREATE TABLE streams (
    id         bigserial PRIMARY KEY,
    name       text COLLATE "C" NOT NULL UNIQUE,
    config     jsonb NOT NULL,
    created_at bigint NOT NULL
);

-- One row per partition: the next offset to give, the first kept, bytes kept, and the latest
-- timestamp given (a partition's timestamps never go back).
CREATE TABLE stream_partitions (
    stream_id    bigint NOT NULL REFERENCES streams (id) ON DELETE CASCADE,
    partition    integer NOT NULL,
    next_offset  bigint NOT NULL DEFAULT 0,
    first_offset bigint NOT NULL DEFAULT 0,
    bytes        bigint NOT NULL DEFAULT 0,
    last_ts      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (stream_id, partition)
);

-- The records. No foreign key: a deleted stream's rows are removed afterwards by the sweep, in
-- small chunks, so that deleting a large stream holds no long lock.
CREATE TABLE stream_records (
    stream_id      bigint NOT NULL,
    partition      integer NOT NULL,
    "offset"       bigint NOT NULL,
    timestamp_ms   bigint NOT NULL,
    size_bytes     integer NOT NULL,
    key            bytea,
    body           bytea NOT NULL,
    body_binary    boolean NOT NULL,
    headers        jsonb,
    type           text,
    correlation_id text,
    dedup_id       text,
    PRIMARY KEY (stream_id, partition, "offset")
);
CREATE INDEX stream_records_by_time ON stream_records (stream_id, partition, timestamp_ms);

-- Dedup ids within their window: a retried append gets the original place back. The row is
-- claimed (INSERT ... ON CONFLICT) before the offsets are taken, so two nodes appending one id
-- at once append it once.
CREATE TABLE stream_dedup (
    stream_id    bigint NOT NULL REFERENCES streams (id) ON DELETE CASCADE,
    dedup_id     text COLLATE "C" NOT NULL,
    partition    integer NOT NULL,
    "offset"     bigint NOT NULL,
    timestamp_ms bigint NOT NULL,
    expires_at   bigint NOT NULL,
    PRIMARY KEY (stream_id, dedup_id)
);

-- Consumer groups: settings, and the state sluice-core's rules work on (members, assignment,
-- generation, committed offsets and positions; or a shared group's cursors and holds), read
-- and written back under the row's lock, so every node sees the same membership.
CREATE TABLE stream_groups (
    stream_id  bigint NOT NULL REFERENCES streams (id) ON DELETE CASCADE,
    name       text COLLATE "C" NOT NULL,
    config     jsonb NOT NULL,
    created_at bigint NOT NULL,
    state      jsonb NOT NULL,
    PRIMARY KEY (stream_id, name)
);

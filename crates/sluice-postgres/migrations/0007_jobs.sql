-- Sluice's PostgreSQL schema, version 7: async jobs (sluice-core's `jobs` state machine,
-- restated in SQL in src/jobs/). Every transition is one statement or one transaction; how
-- the calls use these tables is in src/jobs/mod.rs.

-- One row per job, whatever its status: 0 queued, 1 running, 2 succeeded, 3 failed (waiting
-- to retry), 4 dead, 5 cancelled (core's `JobStatus::code`). A job is claimable when its
-- status is 0 or 3 and `run_at <= now`. While running, `lease_*` hold the current attempt's
-- lease; `attempt` grows at every claim and is never reset, so a lease from an earlier attempt
-- never matches. Finished jobs (2, 4, 5) are pruned at `finished_at + result_ttl_ms`, and by
-- the sweeper to keep each queue within its budget of result bytes and finished jobs. Times
-- are the database's clock (`sluice_now_ms()`), milliseconds since the epoch.
CREATE TABLE jobs (
    id                 uuid PRIMARY KEY,
    queue              text COLLATE "C" NOT NULL,
    job_type           text COLLATE "C" NOT NULL,
    status             smallint NOT NULL,
    priority           smallint NOT NULL,
    attempt            integer NOT NULL DEFAULT 0,
    max_attempts       integer NOT NULL,
    backoff_initial_ms bigint NOT NULL,
    backoff_max_ms     bigint NOT NULL,
    backoff_multiplier double precision NOT NULL,
    backoff_jitter     boolean NOT NULL,
    timeout_ms         bigint,
    result_ttl_ms      bigint NOT NULL,
    created_at         bigint NOT NULL,
    run_at             bigint NOT NULL,
    started_at         bigint,
    finished_at        bigint,
    lease_nonce        bigint,
    lease_ms           bigint,
    lease_expires_at   bigint,
    cancel_requested   boolean NOT NULL DEFAULT false,
    unique_key         text,
    unique_until       bigint,
    callback_url       text,
    tags               text[] NOT NULL DEFAULT '{}',
    payload            bytea NOT NULL,
    result             bytea,
    result_bytes       bigint NOT NULL DEFAULT 0,
    progress           bytea,
    error              text
) WITH (
    -- Every job is inserted, updated at each transition and deleted when pruned: vacuum after
    -- a fixed number of dead rows, as for messages (see 0001_tables.sql).
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    vacuum_truncate = off
);

-- Claims: waiting jobs by queue in claim order (priority, then the longest claimable). Partial,
-- so that a claim takes the row out of it.
CREATE INDEX jobs_waiting ON jobs (queue, priority DESC, run_at, id) WHERE status IN (0, 3);
-- Lapses: running jobs by the end of their lease.
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE status = 1;
-- Pruning: finished jobs by when they expire, and by queue, newest first, with their result
-- bytes (the budget is summed from this index alone).
CREATE INDEX jobs_expiring ON jobs ((finished_at + result_ttl_ms)) WHERE status IN (2, 4, 5);
CREATE INDEX jobs_finished ON jobs (queue, finished_at DESC, id DESC) INCLUDE (result_bytes) WHERE status IN (2, 4, 5);
-- Lists by queue in creation order (ids are UUIDv7, time-ordered).
CREATE INDEX jobs_by_queue ON jobs (queue, id);

-- Unique keys: the job holding each (queue, key) and until when. An enqueue takes a key with
-- `INSERT … ON CONFLICT`, taking it over only once its holder's window ended, so two nodes
-- enqueueing one key create one job. Pruning a job frees the keys it holds.
CREATE TABLE job_unique_keys (
    queue  text COLLATE "C" NOT NULL,
    key    text COLLATE "C" NOT NULL,
    job_id uuid NOT NULL,
    until  bigint NOT NULL,
    PRIMARY KEY (queue, key)
);

-- Sends a job's completion webhook into the callback queue in the caller's transaction (the
-- one that finished the job), creating the queue first when it is missing. `attributes` and
-- the columns after it are the queue's, as the Rust code writes them for a new queue.
CREATE FUNCTION sluice_job_callback(
    body                  bytea,
    queue_name            text,
    attributes            jsonb,
    visibility_timeout_ms bigint,
    delay_ms              bigint,
    retention_ms          bigint,
    message_bytes_max     bigint
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_variable
DECLARE
    qid    bigint;
    now_ms bigint := sluice_now_ms();
BEGIN
    SELECT id INTO qid FROM queues WHERE name = queue_name;
    IF NOT FOUND THEN
        INSERT INTO queues (name, attributes, visibility_timeout_ms, delay_ms, retention_ms, message_bytes_max,
                            dead_letter_queue, max_receive_count, fifo, created_at, modified_at)
        VALUES (queue_name, attributes, visibility_timeout_ms, delay_ms, retention_ms, message_bytes_max,
                NULL, NULL, false, now_ms, now_ms)
        ON CONFLICT (name) DO NOTHING;
        SELECT id INTO qid FROM queues WHERE name = queue_name;
    END IF;
    INSERT INTO messages (queue_id, id, priority, sent_at, visible_at, size_bytes, body, body_binary)
    VALUES (qid, gen_random_uuid(), 0, now_ms, now_ms, octet_length(body), body, false);
    PERFORM pg_notify('sluice_wake_' || current_schema(), qid::text);
END
$fn$;

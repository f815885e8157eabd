-- Sluice's PostgreSQL schema, version 8: backpressure. What each queue's depth limits refused
-- or moved (core's `RefusalCounts`), counted in the transaction that did it, so every node reads
-- the same figures: sends refused because the queue was full, old messages `drop_head` moved to
-- the dead-letter queue, new ones `reject_to_dlq` sent there, expired ones `expired_to_dlq`
-- moved there, sends its `rate_limit` refused. The limits themselves live in `attributes` (JSON), read by the send under the
-- queue row's lock (src/depth.rs).
ALTER TABLE queues
    ADD COLUMN refused_full    bigint NOT NULL DEFAULT 0,
    ADD COLUMN dropped_head    bigint NOT NULL DEFAULT 0,
    ADD COLUMN rejected_to_dlq bigint NOT NULL DEFAULT 0,
    ADD COLUMN expired_to_dlq  bigint NOT NULL DEFAULT 0,
    ADD COLUMN rate_limited    bigint NOT NULL DEFAULT 0;

-- Token buckets of rate limits shared by every node (src/rate.rs, core's `rate::take` restated):
-- one row per limited resource, `tokens_milli` (thousandths of a token) as of `updated_at`
-- (the database's clock, milliseconds), and what the last take granted. A take is one
-- INSERT ... ON CONFLICT DO UPDATE, which refills by the time passed and takes in the same
-- statement under the row's lock, so concurrent takes on any nodes are serialised.
CREATE TABLE rate_buckets (
    key          text COLLATE "C" PRIMARY KEY,
    tokens_milli bigint NOT NULL,
    updated_at   bigint NOT NULL,
    granted      bigint NOT NULL
);

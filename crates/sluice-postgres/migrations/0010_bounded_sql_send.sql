-- Sluice's PostgreSQL schema, version 10: `sluice_send` keeps a queue's depth limits.
--
-- A send from the application's own transaction into a queue with `max_depth_messages` or
-- `max_depth_bytes` follows the queue's `overflow` exactly as a send through Sluice does
-- (src/depth.rs): the queue's row is locked for the caller's transaction (so sends from Sluice
-- and from SQL, on any node, are serialised), the depth is read under the lock, and a message
-- that does not fit is
--   reject:        refused, SQLSTATE 53400 (configuration_limit_exceeded), which aborts the
--                  caller's transaction like every other refusal of `sluice_send`;
--   drop_head:     taken, after the oldest messages not in flight moved to the dead-letter
--                  queue until it fits (refused as for `reject` when nothing is left to move);
--   reject_to_dlq: taken into the dead-letter queue instead.
-- Without a dead-letter queue (or when it is gone) both of the last two behave as `reject`.
-- What moved is counted in the queue's row in the caller's transaction; a refusal is not counted,
-- since the transaction that would count it is the one the refusal aborts.
-- Queues without a limit take no lock, as before.
CREATE OR REPLACE FUNCTION sluice_send(
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
DECLARE
    -- core's `overflow::REASON_DROP_HEAD` and `REASON_REJECT_TO_DLQ`.
    reason_drop_head     CONSTANT text := 'drop_head: the queue was full and this was its oldest message';
    reason_reject_to_dlq CONSTANT text := 'reject_to_dlq: the queue was full when this message was sent';
    q          queues%ROWTYPE;
    max_msgs   bigint;
    max_bytes  bigint;
    policy     text;
    dlq_id     bigint;
    new_id     uuid;
    new_seq    bigint;
    new_size   bigint;
    n_msgs     bigint;
    n_bytes    bigint;
    old        record;
    dropped    bigint := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM queues WHERE name = queue AND fifo) THEN
        RAISE EXCEPTION 'sluice_send: queue % is a FIFO queue; FIFO sends need a dedup id and go through Sluice',
            quote_literal(queue) USING ERRCODE = 'feature_not_supported';
    END IF;
    SELECT * INTO q FROM queues WHERE name = queue;
    IF FOUND THEN
        max_msgs := (q.attributes ->> 'max_depth_messages')::bigint;
        max_bytes := (q.attributes ->> 'max_depth_bytes')::bigint;
    END IF;
    -- An unknown queue is refused by the standard send, with its message.
    IF max_msgs IS NULL AND max_bytes IS NULL THEN
        RETURN sluice_send_standard(queue, body, attributes, delay_ms, priority, envelope, body_binary, deliver_at_ms);
    END IF;

    PERFORM 1 FROM queues WHERE id = q.id FOR UPDATE;
    policy := coalesce(q.attributes ->> 'overflow', 'reject');
    SELECT d.id INTO dlq_id FROM queues d
        WHERE d.name = q.dead_letter_queue AND d.id <> q.id AND d.fifo = q.fifo;
    IF dlq_id IS NULL THEN
        policy := 'reject';
    END IF;
    SELECT count(*), coalesce(sum(size_bytes), 0)::int8 INTO n_msgs, n_bytes FROM messages WHERE queue_id = q.id;
    -- The standard send validates and inserts; what it inserted is then placed by the policy.
    new_id := sluice_send_standard(queue, body, attributes, delay_ms, priority, envelope, body_binary, deliver_at_ms);
    -- The row it inserted is this session's last `seq` (messages has no index on `id`).
    new_seq := currval(pg_get_serial_sequence('messages', 'seq'));
    SELECT size_bytes INTO new_size FROM messages WHERE seq = new_seq;
    IF (max_msgs IS NULL OR n_msgs + 1 <= max_msgs) AND (max_bytes IS NULL OR n_bytes + new_size <= max_bytes) THEN
        RETURN new_id;
    END IF;

    IF policy = 'reject_to_dlq' THEN
        UPDATE messages m SET queue_id = dlq_id, dead_letter_source = q.name, epoch = m.epoch + 1,
                in_flight = false, visible_at = sluice_now_ms(), last_error = reason_reject_to_dlq
            WHERE m.seq = new_seq;
        UPDATE queues SET rejected_to_dlq = rejected_to_dlq + 1 WHERE id = q.id;
        PERFORM pg_notify('sluice_wake_' || current_schema(), dlq_id::text);
        RETURN new_id;
    END IF;

    IF policy = 'drop_head' THEN
        FOR old IN SELECT seq, size_bytes FROM messages
                WHERE queue_id = q.id AND NOT in_flight AND seq <> new_seq
                ORDER BY sent_at, seq
                FOR UPDATE SKIP LOCKED LOOP
            EXIT WHEN (max_msgs IS NULL OR n_msgs + 1 <= max_msgs) AND (max_bytes IS NULL OR n_bytes + new_size <= max_bytes);
            UPDATE messages m SET queue_id = dlq_id, dead_letter_source = q.name, epoch = m.epoch + 1,
                    in_flight = false, visible_at = sluice_now_ms(), last_error = reason_drop_head
                WHERE m.seq = old.seq;
            n_msgs := n_msgs - 1;
            n_bytes := n_bytes - old.size_bytes;
            dropped := dropped + 1;
        END LOOP;
        IF (max_msgs IS NULL OR n_msgs + 1 <= max_msgs) AND (max_bytes IS NULL OR n_bytes + new_size <= max_bytes) THEN
            UPDATE queues SET dropped_head = dropped_head + dropped WHERE id = q.id;
            PERFORM pg_notify('sluice_wake_' || current_schema(), dlq_id::text);
            RETURN new_id;
        END IF;
    END IF;

    RAISE EXCEPTION 'sluice_send: queue % is full (% messages, % bytes; at most % messages, % bytes)',
        quote_literal(queue), n_msgs, n_bytes, coalesce(max_msgs::text, 'any'), coalesce(max_bytes::text, 'any')
        USING ERRCODE = 'configuration_limit_exceeded';
END
$fn$;

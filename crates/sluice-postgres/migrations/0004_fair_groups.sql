-- Sluice's PostgreSQL schema, version 4: fair scheduling across message groups on standard
-- queues (core's `FairIndex`). How receive uses these is in src/fair.rs.

-- The messages not held, by lane (priority) and group, in send order: a loose scan over it lists
-- a lane's groups, and each group's oldest visible messages come from one range of it. Messages
-- without a group are the group '' (as core's `group_of`), so the key is an expression.
CREATE INDEX messages_fair ON messages (queue_id, priority DESC, (coalesce(group_id, '')), seq) WHERE NOT in_flight;

-- When a receive last served each group, on `fair_clock`'s scale (a receive stamps the groups it
-- served with one clock reading times 1024 plus the position of the group's last message in its
-- delivery, so the order of one receive is kept). A group without a row counts as never served.
-- Rows are written only by receives that chose among two or more groups, and removed by the
-- sweeper once the group has nothing visible (core forgets such a group), and by purge and
-- queue deletion.
CREATE TABLE fair_groups (
    queue_id    bigint NOT NULL,
    group_key   text NOT NULL,
    last_served bigint NOT NULL,
    PRIMARY KEY (queue_id, group_key)
) WITH (
    -- Rewritten by every receive that serves the group: same churn settings as `messages`.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    vacuum_truncate = off
);
CREATE INDEX fair_groups_served ON fair_groups (last_served);

CREATE SEQUENCE fair_clock;

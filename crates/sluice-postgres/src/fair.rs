//! Receive on standard queues: fair scheduling across message groups, as core's `FairIndex`.
//!
//! Core's rule: within the highest priority that has visible messages (the lane), the group
//! served least recently goes first and takes one message, then goes behind every other group;
//! messages without a group form one group (''); a group with nothing visible is forgotten, so
//! it counts as never served when it comes back. A queue without groups therefore delivers by
//! priority, then send order.
//!
//! One `RECEIVE` statement serves one lane:
//! 1. the lane is the highest priority below `$5` with a visible message (one probe of
//!    `messages_fair` finds it and its first group);
//! 2. the lane's groups with a visible message come from a loose scan over `messages_fair`
//!    (plus the groups of holds that ran out), each with its `last_served` from `fair_groups`
//!    (0 without a row); the first `$2` of them by (last served, name) take part;
//! 3. each takes its share of its oldest visible messages with `FOR UPDATE SKIP LOCKED` (so
//!    concurrent receives, on any node, take disjoint rows without waiting);
//! 4. the candidates are delivered in turns: every group's first message in (last served,
//!    name) order, then every group's second, and so on, which is the order core's repeated
//!    "least recently served first, then to the back" produces; a candidate that used up its
//!    receives moves to the dead-letter queue without using its group's turn, as in core;
//! 5. the served groups are stamped with the clock, in the order they were last served.
//!
//! When the lane runs out before `max`, the caller runs the statement again for the lanes below
//! (`more_below`), so a receive crossing lanes sees the stamps of the lane above, as in core.
//!
//! Where this differs from core, on purpose:
//! - A receive adds a stamp for every served group that has none, but rewrites existing stamps
//!   only when it chose among two or more groups: a queue with one group (an ungrouped queue)
//!   writes its one row once rather than every receive rewriting the same row. A group served
//!   alone meanwhile keeps an older stamp; it still goes after any group that was never served
//!   (or was forgotten), and only its order against other groups with older stamps can differ.
//! - A stamp is skipped when another receive holds the group's row (it is stamping the same
//!   group at the same moment), instead of waiting for it.
//! - Each group locks at most `ceil(2 · max / groups)` candidates, so that a receive over many
//!   groups does not lock `max` messages of each; when most groups have fewer than their share,
//!   a receive may return fewer than `max` while more are visible (the next receive gets them).
//! - Groups with nothing visible are forgotten by the sweeper (every few sweeps) rather than at
//!   the instant their last visible message is received.
//!
//! Cost: O(groups in the lane) index probes per receive, plus `max` rows.

use std::sync::LazyLock;

use crate::fragments;

/// Receives up to `$2` messages of standard queue `$1` from its highest lane below priority
/// `$5`, hidden for `$3` ms (the queue's timeout when null), within the byte budget `$4`.
/// Always answers at least one row: `top` (the lane, null when nothing is visible) and
/// `more_below` (a lower lane has a visible message) on every row, and the delivered or
/// dead-lettered messages, if any, with `dead`, `pos` (the delivery order) and their columns;
/// `seq` is null on the row of a receive that took nothing.
pub static RECEIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH RECURSIVE q AS (
    {queues}
    WHERE s.id = $1
), first AS (
    -- The first visible message not held below $5, in lane-then-group order (messages_fair):
    -- its priority is the highest such lane, its group that lane's first group. One probe
    -- finds both, so a backlog's front is walked once.
    SELECT m.priority, coalesce(m.group_id, '') AS group_key, m.seq FROM messages m
    WHERE m.queue_id = $1 AND NOT m.in_flight AND m.priority < $5 AND m.visible_at <= sluice_now_ms()
      AND m.sent_at > (SELECT oldest_kept FROM q)
    ORDER BY m.priority DESC, coalesce(m.group_id, ''), m.seq
    LIMIT 1
), top AS (
    -- The lane: the highest priority below $5 with a visible message, held (a hold that ran
    -- out but was not yet ended by the sweeper) or not.
    SELECT greatest(
        (SELECT priority FROM first),
        (SELECT max(m.priority) FROM messages m
         WHERE m.queue_id = $1 AND m.in_flight AND m.priority < $5 AND m.visible_at <= sluice_now_ms()
           AND m.sent_at > (SELECT oldest_kept FROM q))
    ) AS priority
), groups AS (
    -- The lane's groups with a visible message not held, each with its first such message: a
    -- loose scan over messages_fair, starting from `first` (or, when an expired hold made a
    -- higher lane the top, from that lane's first group).
    (SELECT group_key, seq FROM first WHERE priority = (SELECT priority FROM top)
     UNION ALL
     (SELECT coalesce(m.group_id, ''), m.seq FROM messages m
      WHERE (SELECT priority FROM first) IS DISTINCT FROM (SELECT priority FROM top)
        AND m.queue_id = $1 AND NOT m.in_flight AND m.priority = (SELECT priority FROM top)
        AND m.visible_at <= sluice_now_ms()
      ORDER BY coalesce(m.group_id, ''), m.seq LIMIT 1))
    UNION ALL
    SELECT n.group_key, n.seq
    FROM groups g CROSS JOIN LATERAL (
        SELECT coalesce(m.group_id, '') AS group_key, m.seq FROM messages m
        WHERE m.queue_id = $1 AND NOT m.in_flight AND m.priority = (SELECT priority FROM top)
          AND m.visible_at <= sluice_now_ms() AND coalesce(m.group_id, '') > g.group_key
        ORDER BY coalesce(m.group_id, ''), m.seq LIMIT 1
    ) n
), expired AS (
    -- Holds in the lane that ran out and were not yet ended by the sweeper.
    SELECT coalesce(m.group_id, '') AS group_key, m.seq, m.receive_count, m.size_bytes
    FROM messages m
    WHERE m.queue_id = $1 AND m.in_flight AND m.visible_at <= sluice_now_ms()
      AND m.priority = (SELECT priority FROM top) AND m.sent_at > (SELECT oldest_kept FROM q)
    ORDER BY m.seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), lane_groups AS (
    -- `start`: where the group's visible messages not held begin (nothing before it is one),
    -- so that taking them does not walk the index from the group's start again.
    SELECT group_key, coalesce(min(seq), 0) AS start
    FROM (SELECT group_key, seq FROM groups UNION ALL SELECT group_key, NULL FROM expired) g
    GROUP BY group_key
), turns AS (
    -- The groups taking part, least recently served first (never served: 0), then by name.
    SELECT g.group_key, g.start, coalesce(f.last_served, 0) AS last_served
    FROM lane_groups g
    LEFT JOIN fair_groups f ON f.queue_id = $1 AND f.group_key = g.group_key
    ORDER BY last_served, g.group_key
    LIMIT $2
), share AS (
    SELECT (SELECT count(*) FROM lane_groups) AS groups,
           least($2, ceil(2.0 * $2 / greatest((SELECT count(*) FROM turns), 1)))::int8 AS rows_max
), ready AS (
    SELECT t.group_key, c.seq, c.receive_count, c.size_bytes
    FROM turns t CROSS JOIN LATERAL (
        SELECT m.seq, m.receive_count, m.size_bytes
        FROM messages m
        WHERE m.queue_id = $1 AND NOT m.in_flight AND m.priority = (SELECT priority FROM top)
          AND coalesce(m.group_id, '') = t.group_key AND m.seq >= t.start AND m.visible_at <= sluice_now_ms()
          AND m.sent_at > (SELECT oldest_kept FROM q)
        ORDER BY m.seq
        LIMIT (SELECT rows_max FROM share)
        FOR UPDATE SKIP LOCKED
    ) c
), cand AS (
    SELECT c.*, t.last_served, {dead} AS dead
    FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) c
    JOIN turns t USING (group_key)
    CROSS JOIN q
), ranked AS (
    -- A message's turn in its group counts only the messages before it that are delivered: a
    -- dead-lettered one does not use up its group's turn.
    SELECT c.*,
           1 + coalesce(count(*) FILTER (WHERE NOT dead) OVER (
               PARTITION BY group_key ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS turn
    FROM cand c
), picked AS (
    SELECT seq, dead, group_key,
           {running}
    FROM ranked
    WINDOW w AS (ORDER BY turn, last_served, group_key, seq)
), done AS (
    {deliver}
), served AS (
    SELECT fair_group AS group_key, max(pos) AS pos FROM done WHERE NOT dead GROUP BY fair_group
), clock AS (
    SELECT nextval('fair_clock') * 1024 AS base
), stampable AS (
    -- A stamp is rewritten only when the receive chose among two or more groups (see the
    -- module docs); a missing one is always added.
    SELECT f.group_key FROM fair_groups f
    WHERE f.queue_id = $1 AND f.group_key IN (SELECT group_key FROM served) AND (SELECT groups FROM share) >= 2
    FOR UPDATE SKIP LOCKED
), stamped AS (
    UPDATE fair_groups f SET last_served = c.base + s.pos
    FROM served s JOIN stampable USING (group_key) CROSS JOIN clock c
    WHERE f.queue_id = $1 AND f.group_key = s.group_key
), added AS (
    INSERT INTO fair_groups (queue_id, group_key, last_served)
    SELECT $1, s.group_key, c.base + s.pos
    FROM served s CROSS JOIN clock c
    WHERE NOT EXISTS (SELECT 1 FROM fair_groups f WHERE f.queue_id = $1 AND f.group_key = s.group_key)
    ON CONFLICT DO NOTHING
), status AS (
    -- Lower lanes matter only when this one did not fill the receive. Each probe is written as
    -- the first row in index order, so that it is an index probe whatever the lane turns out
    -- to be (a plain EXISTS with `priority < lane` is planned blind, as a table scan).
    SELECT (SELECT priority FROM top) AS top,
           CASE WHEN (SELECT count(*) FROM done WHERE NOT dead) >= $2 THEN false
           ELSE (SELECT m.seq FROM messages m
                 WHERE m.queue_id = $1 AND NOT m.in_flight AND m.priority < (SELECT priority FROM top)
                   AND m.visible_at <= sluice_now_ms() AND m.sent_at > (SELECT oldest_kept FROM q)
                 ORDER BY m.priority DESC, m.seq LIMIT 1) IS NOT NULL
             OR (SELECT m.seq FROM messages m
                 WHERE m.queue_id = $1 AND m.in_flight AND m.visible_at <= sluice_now_ms()
                   AND m.priority < (SELECT priority FROM top) AND m.sent_at > (SELECT oldest_kept FROM q)
                 ORDER BY m.visible_at LIMIT 1) IS NOT NULL
           END AS more_below
)
SELECT s.top, s.more_below, d.* FROM status s LEFT JOIN done d ON true",
        queues = fragments::QUEUES,
        dead = fragments::dead("c.receive_count"),
        running = fragments::RUNNING_COUNTS,
        deliver = fragments::receive_update("picked", fragments::TAKEN, "p.group_key AS fair_group, "),
    )
});

/// Groups that have nothing visible, oldest stamp first, at most `$1`: forgotten (the sweeper's
/// part of core's rule). Rows a receive is stamping are skipped.
pub const FORGET_IDLE_GROUPS: &str = "
DELETE FROM fair_groups
WHERE (queue_id, group_key) IN (
    SELECT f.queue_id, f.group_key FROM fair_groups f
    WHERE NOT EXISTS (
        SELECT 1 FROM messages m
        WHERE m.queue_id = f.queue_id AND NOT m.in_flight AND m.priority = ANY('{9,8,7,6,5,4,3,2,1,0}'::int2[])
          AND coalesce(m.group_id, '') = f.group_key AND m.visible_at <= sluice_now_ms())
      AND NOT EXISTS (
        SELECT 1 FROM messages m
        WHERE m.queue_id = f.queue_id AND m.in_flight AND m.visible_at <= sluice_now_ms()
          AND coalesce(m.group_id, '') = f.group_key)
    ORDER BY f.last_served
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)";

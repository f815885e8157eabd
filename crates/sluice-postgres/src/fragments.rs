//! The SQL that the statements delivering messages or ending holds share, so that each rule
//! they restate from core is written once: which queue a message dead-letters to, core's
//! dead-letter rule, what a move to the dead-letter queue writes, and how a receive picks and
//! delivers.
//!
//! The statements built from these fragments (`fair::RECEIVE`, `fifo::RECEIVE`,
//! `messages::END_HOLD` and `messages::REHIDE`, `sweep::END_HOLDS`) are `LazyLock<String>`s:
//! built the first time they are used, never per call, and each still one statement (one round
//! trip). The fragments name the message row `m` and its queue `q`, a row of [`QUEUES`];
//! `dead_letter_or` takes the row with the queue's columns as an argument, for the sweep's
//! statement, which reads them through a CTE of its own.

use crate::codec::message_columns;

/// Every queue with what the statements need of it, to be named `q`. `dlq_id` is the queue's
/// dead-letter target as `Broker::dead_letter_target` finds it (a queue of the policy's name
/// that is not the queue itself and is of the same type), null when there is none;
/// `max_receive_count` is `DeadLetter::exhausted_receive_count` (written by `queues::Columns`);
/// `oldest_kept` is the `sent_at` a message must exceed to be within retention. A statement on
/// one queue takes it as `q AS (QUEUES WHERE s.id = $1)`.
pub const QUEUES: &str = "SELECT s.id, s.name, s.visibility_timeout_ms, s.max_receive_count, d.id AS dlq_id,
           sluice_now_ms() - s.retention_ms AS oldest_kept
    FROM queues s
    LEFT JOIN queues d ON d.name = s.dead_letter_queue AND d.id <> s.id AND d.fifo = s.fifo";

/// Core's dead-letter rule (`DeadLetter::is_exhausted`) for a message of queue `q` received
/// `receive_count` times: true when it has used up its receives and `q` has a dead-letter
/// target, so that it moves there instead of being delivered again or made visible.
pub fn dead(receive_count: &str) -> String {
    format!("(q.dlq_id IS NOT NULL AND {receive_count} >= q.max_receive_count)")
}

/// What a move to the dead-letter queue writes, column by column, as `Broker::move_to_dead_letter`:
/// the message goes to `queue`'s target (`queue` is a row with [`QUEUES`]'s `dlq_id` and `name`)
/// naming its source, under a new epoch so that no receipt from before the move acts on it
/// again, out of flight and visible at once.
fn dead_letter_move(queue: &str) -> [(&'static str, String); 5] {
    [
        ("queue_id", format!("{queue}.dlq_id")),
        ("dead_letter_source", format!("{queue}.name")),
        ("epoch", "m.epoch + 1".to_string()),
        ("in_flight", "false".to_string()),
        ("visible_at", "sluice_now_ms()".to_string()),
    ]
}

/// The SET list of an `UPDATE messages m` that moves the rows for which `dead` holds to the
/// dead-letter queue ([`dead_letter_move`] of `queue`) and writes `otherwise` (column, value) to
/// the others. A column of the move that `otherwise` leaves out keeps its value in the others;
/// a column of `otherwise` that the move leaves out keeps its value in a move; a column written
/// the same either way is written without a `CASE`.
pub fn dead_letter_or(dead: &str, queue: &str, otherwise: &[(&str, &str)]) -> String {
    let moved = dead_letter_move(queue);
    let other = |column: &str| otherwise.iter().find(|(c, _)| *c == column).map(|(_, v)| v.to_string());
    let mut set: Vec<String> = moved
        .iter()
        .map(|(column, to)| match other(column).unwrap_or_else(|| format!("m.{column}")) {
            same if same == *to => format!("{column} = {to}"),
            kept => format!("{column} = CASE WHEN {dead} THEN {to} ELSE {kept} END"),
        })
        .collect();
    set.extend(
        otherwise
            .iter()
            .filter(|(column, _)| !moved.iter().any(|(c, _)| c == column))
            .map(|(column, value)| format!("{column} = CASE WHEN {dead} THEN m.{column} ELSE {value} END")),
    );
    set.join(",\n    ")
}

/// What a receive writes to a message it delivers, as `Broker::receive`: in flight for `$3` ms
/// (the queue's timeout when null), one more receive, a new epoch, and the first receive's time
/// if it had none.
const DELIVERY: [(&str, &str); 5] = [
    ("in_flight", "true"),
    ("visible_at", "sluice_now_ms() + coalesce($3, q.visibility_timeout_ms)"),
    ("receive_count", "m.receive_count + 1"),
    ("epoch", "m.epoch + 1"),
    ("first_received_at", "coalesce(m.first_received_at, sluice_now_ms())"),
];

/// A receive's running counts over a window `w` in delivery order, which the statement defines
/// over rows with `dead` and `size_bytes`: `live`, the messages delivered up to this row (it
/// included); `bytes`, their size; `pos`, the row's place in the delivery order.
pub const RUNNING_COUNTS: &str = "count(*) FILTER (WHERE NOT dead) OVER w AS live,
           sum(CASE WHEN dead THEN 0 ELSE size_bytes END) OVER w AS bytes,
           row_number() OVER w AS pos";

/// Whether candidate `p` (with [`RUNNING_COUNTS`]) is taken by a receive of at most `$2`
/// messages and `$4` bytes, which always lets the first delivery through: a message moved to the
/// dead-letter queue does not count towards `$2`, and moves while fewer than `$2` were delivered
/// before it.
pub const TAKEN: &str =
    "CASE WHEN p.dead THEN p.live < $2 ELSE p.live <= $2 AND (p.live = 1 OR p.bytes <= $4::int8) END";

/// The `UPDATE` that ends a receive: each row of `from` (named `p`, with `seq`, `dead` and `pos`)
/// for which `condition` holds is delivered ([`DELIVERY`]) or, when `p.dead`, moved to the
/// dead-letter queue. Answers `p.dead`, `p.pos`, then `returning` and the message's columns.
pub fn receive_update(from: &str, condition: &str, returning: &str) -> String {
    format!(
        "UPDATE messages m SET
    {set}
    FROM {from} p CROSS JOIN q
    WHERE m.seq = p.seq AND {condition}
    RETURNING p.dead, p.pos, {returning}{columns}",
        set = dead_letter_or("p.dead", "q", &DELIVERY),
        columns = message_columns!(),
    )
}

#[cfg(test)]
mod tests {
    use sluice_core::DeadLetter;

    use super::*;

    #[test]
    fn a_hold_that_ends_keeps_what_the_move_does_not_write() {
        let set = dead_letter_or("due.dead", "due", &[("in_flight", "false"), ("last_error", "$5")]);
        let expected = "queue_id = CASE WHEN due.dead THEN due.dlq_id ELSE m.queue_id END,
    dead_letter_source = CASE WHEN due.dead THEN due.name ELSE m.dead_letter_source END,
    epoch = CASE WHEN due.dead THEN m.epoch + 1 ELSE m.epoch END,
    in_flight = false,
    visible_at = CASE WHEN due.dead THEN sluice_now_ms() ELSE m.visible_at END,
    last_error = CASE WHEN due.dead THEN m.last_error ELSE $5 END";
        assert_eq!(set, expected);
    }

    /// The SQL rule gives core's answer, at the boundary and around it, for every policy shape
    /// (no policy, a policy whose queue is missing, a policy with a target).
    #[tokio::test]
    async fn the_sql_rule_is_cores() {
        let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
            eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
            return;
        };
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(connection);
        let query = format!(
            "SELECT {} FROM (SELECT $1::int8 AS dlq_id, $2::int4 AS max_receive_count) q, (SELECT $3::int4 AS n) r",
            dead("r.n")
        );
        for max_receive_count in [1, 2, 5, 1_000] {
            let policy = DeadLetter { queue: "dlq".into(), max_receive_count };
            let threshold = Some(policy.exhausted_receive_count() as i32);
            for receive_count in [0, 1, max_receive_count - 1, max_receive_count, max_receive_count + 1] {
                let expected = DeadLetter::is_exhausted(receive_count, policy.exhausted_receive_count());
                let n = receive_count as i32;
                let with_target: bool = client.query_one(&query, &[&Some(7i64), &threshold, &n]).await.unwrap().get(0);
                assert_eq!(with_target, expected, "max {max_receive_count}, received {receive_count}");
                let without: bool = client.query_one(&query, &[&None::<i64>, &threshold, &n]).await.unwrap().get(0);
                assert!(!without, "no target, max {max_receive_count}, received {receive_count}");
            }
        }
        let none: bool = client.query_one(&query, &[&None::<i64>, &None::<i32>, &3]).await.unwrap().get(0);
        assert!(!none, "a queue without a policy dead-letters nothing");
    }
}

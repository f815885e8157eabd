//! The conformance suite: the behaviour every backend must show, written once, one module per
//! store trait (`queues.rs`, `records.rs`, `commit.rs`, `log.rs`, `jobs.rs`, `events.rs`), and
//! `depth.rs` and `stream_depth.rs` for the depth limits of queues and of streams.
//!
//! A backend's test file calls [`conformance_tests!`] with an expression that builds a fresh
//! [`Backend`] (its own empty storage) for each test. Tests use real time with short timeouts;
//! the exhaustive, clock-injected checks of the rules live in `sluice-core`'s tests, so these
//! prove that a backend wires the rules to durable storage correctly, including across a
//! restart.

mod commit;
mod depth;
mod events;
mod jobs;
mod log;
mod queues;
mod rate;
mod records;
mod stream_depth;

use std::sync::Arc;

use async_trait::async_trait;
use sluice_core::{NewMessage, QueueAttributes};

pub use commit::*;
pub use depth::*;
pub use events::*;
pub use jobs::*;
pub use log::*;
pub use queues::*;
pub use rate::*;
pub use records::*;
pub use stream_depth::*;

use crate::{ReceiveRequest, ReceivedMessage, Store};

/// A backend under test: a store over storage that survives `close` and `open`.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Opens the store over this backend's storage (the same storage every time).
    async fn open(&self) -> Arc<dyn Store>;
    /// Shuts a store down cleanly so that `open` can be called again.
    async fn close(&self, store: Arc<dyn Store>);
    /// Another store over the same storage while one is open (another node), for a backend
    /// that has several; `None` (the default) for a backend that has one process only.
    async fn open_peer(&self) -> Option<Arc<dyn Store>> {
        None
    }
}

/// Expands to one `#[tokio::test]` per conformance check, each with a fresh backend.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!($make, without_fifo);
        $crate::conformance_tests!(@each $make;
            fifo_orders_each_group_and_blocks_it_while_in_flight, fifo_dedup_survives_ack_and_restart_until_purge,
            fifo_ack_that_unblocks_a_group_wakes_a_long_poll, fifo_duplicates_inside_a_commit_enqueue_once,
            depth_limits_follow_each_overflow_policy);
    };
    // For a backend that documents that it has no FIFO queues yet (see the README).
    ($make:expr, without_fifo) => {
        $crate::conformance_tests!(@each $make;
            create_get_list_update_delete, create_is_idempotent_only_for_same_attributes,
            send_receive_ack_round_trip, priorities_then_send_order, delay_and_deliver_at,
            visibility_expiry_redelivers_with_new_receipt, stale_and_foreign_receipts,
            release_and_extend_visibility, nack_records_error_and_delays,
            dead_letter_and_redrive, long_poll_wakes_on_send, long_poll_wakes_on_delay_and_expiry,
            long_poll_times_out_empty, purge_and_peek, restart_keeps_everything, batch_entries_fail_alone,
            unknown_queue_is_an_error, retention_removes_expired, ids_are_never_reused_across_restart,
            lenient_visibility_rehides_an_expired_message, sqs_visibility_tells_a_message_received_again_from_one_gone,
            records_insert_put_replace_get_delete,
            records_list_by_kind_prefix_and_key_order, records_survive_restart,
            commit_applies_sends_and_records_together, a_refused_commit_changes_nothing,
            of_commits_racing_on_one_condition_exactly_one_wins, commit_appends_to_streams_with_the_other_writes,
            commit_records_its_outcomes_beside_its_effect,
            streams_create_get_list_update_delete, appends_get_gapless_offsets_by_partition_key_and_round_robin,
            reads_from_offsets_and_times_keep_every_field, read_long_polls_wake_on_append_and_time_out,
            dedup_ids_return_the_original_place_across_restart, streams_records_and_groups_survive_restart,
            offsets_groups_share_partitions_commit_forward_and_seek,
            shared_groups_keep_key_order_and_dead_letter_exhausted_records,
            retention_removes_old_records_by_size_and_age, bad_records_fail_alone_and_expectations_change_nothing,
            jobs_enqueue_get_list_filter_and_unique, jobs_claim_heartbeat_complete_and_stale_leases,
            jobs_fail_retries_after_backoff_then_dead, jobs_lapsed_lease_requeues_and_the_old_lease_is_stale,
            jobs_cancel_waiting_and_running, jobs_claim_order_delay_and_types,
            jobs_long_polls_wake_on_enqueue_and_on_finish, jobs_finished_are_pruned_after_their_ttl,
            jobs_survive_restart_with_their_leases, jobs_callbacks_are_enqueued_with_the_transition,
            events_expected_versions_and_dedup, events_read_streams_both_ways_and_all_with_filters,
            events_all_long_polls_wake_on_append_and_time_out, events_soft_and_hard_delete,
            events_survive_restart_with_versions_positions_and_dedup,
            events_concurrent_writers_win_each_version_once, events_all_is_gapless_under_concurrent_appends,
            events_shared_streams_from_two_nodes_never_deadlock, events_the_same_append_sent_at_once_lands_once,
            depth_limits_count_bytes_and_follow_updates, a_commit_into_a_full_queue_is_refused_whole,
            overload_loses_nothing_acknowledged, rate_buckets_grant_their_burst_then_their_rate,
            a_queue_rate_limit_refuses_the_entries_past_its_bucket,
            stream_depth_limits_refuse_appends_in_place, stream_depth_limits_hold_under_concurrent_appends);
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let backend = $make;
                $crate::conformance::$name(&backend).await;
            }
        )*
    };
}

pub(crate) fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

pub(crate) fn recv(max: u32, wait_ms: u64, visibility_timeout_ms: Option<u64>) -> ReceiveRequest {
    ReceiveRequest { max, wait_ms: Some(wait_ms), visibility_timeout_ms }
}

pub(crate) fn bodies(messages: &[ReceivedMessage]) -> Vec<String> {
    messages.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect()
}

pub(crate) async fn queue(store: &dyn Store, name: &str, attributes: QueueAttributes) {
    store.create_queue(name, attributes).await.expect("create queue");
}

pub(crate) async fn send_all(store: &dyn Store, queue: &str, messages: Vec<NewMessage>) {
    for r in store.send(queue, messages).await.expect("send") {
        r.expect("entry accepted");
    }
}

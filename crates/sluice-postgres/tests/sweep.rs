//! The sweeper's work, driven by hand with `sweep_now`: retention, ended holds, orphans of
//! deleted queues, and the lease that keeps two nodes from sweeping at once.

mod support;

use std::time::Duration;

use sluice_core::{NewMessage, QueueAttributes};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

fn recv(visibility_timeout_ms: Option<u64>) -> ReceiveRequest {
    ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms }
}

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_past_retention_are_never_delivered_and_are_swept() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    store.send("q", vec![text("old"), text("new")]).await.unwrap();
    // Age "old" past the queue's retention, as if it had been sent four days ago.
    client
        .execute(
            "UPDATE messages m SET sent_at = m.sent_at - q.retention_ms - 1000
             FROM queues q WHERE q.id = m.queue_id AND m.body = 'old'",
            &[],
        )
        .await
        .unwrap();
    let view = store.get_queue("q").await.unwrap();
    assert!(view.stats.oldest_age_ms.unwrap() > QueueAttributes::default().retention_ms);
    let got = store.receive("q", recv(None)).await.unwrap();
    assert_eq!(got.len(), 1, "the expired message is not delivered, swept or not");
    assert_eq!(got[0].message.content.body, b"new");
    assert!(store.sweep_now().await.unwrap(), "no other node holds the lease");
    assert_eq!(count(&client, "SELECT count(*) FROM messages WHERE body = 'old'").await, 0);
    assert_eq!(count(&client, "SELECT count(*) FROM messages").await, 1);
    assert_eq!(store.counters().messages_expired, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_ends_expired_holds() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    store.send("q", vec![text("x")]).await.unwrap();
    let held = store.receive("q", recv(Some(100))).await.unwrap();
    assert_eq!(count(&client, "SELECT count(*) FROM messages WHERE in_flight").await, 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.sweep_now().await.unwrap();
    assert_eq!(count(&client, "SELECT count(*) FROM messages WHERE in_flight").await, 0, "the hold was ended");
    assert_eq!(store.get_queue("q").await.unwrap().stats.visible, 1);
    // Ending the hold is not a new delivery: the receipt still acks (as in SQS and core).
    assert_eq!(store.ack("q", vec![held[0].receipt.clone()]).await.unwrap(), vec![Ok(())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_slipped_under_a_deleted_queue_are_removed() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    let id = store.create_queue("q", QueueAttributes::default()).await.unwrap().0.id as i64;
    store.delete_queue("q").await.unwrap();
    // What a send that looked the queue up just before the delete could leave behind.
    client
        .execute(
            "INSERT INTO messages (queue_id, id, priority, sent_at, visible_at, size_bytes, body, body_binary)
             VALUES ($1, gen_random_uuid(), 0, sluice_now_ms(), sluice_now_ms(), 1, 'x', false)",
            &[&id],
        )
        .await
        .unwrap();
    store.sweep_now().await.unwrap();
    assert_eq!(count(&client, "SELECT count(*) FROM messages").await, 0);
    // The id stays watched for a while, in case another such send is still on its way.
    assert_eq!(count(&client, "SELECT count(*) FROM deleted_queues").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_holder_of_the_lease_sweeps() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let mut client = schema.client().await;
    let tx = client.transaction().await.unwrap();
    let taken: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock(hashtext('sluice_sweep:' || current_schema()))", &[])
        .await
        .unwrap()
        .get(0);
    assert!(taken);
    assert!(!store.sweep_now().await.unwrap(), "another session holds the lease");
    tx.rollback().await.unwrap();
    assert!(store.sweep_now().await.unwrap(), "the lease is free again once its holder's transaction ends");
}

/// Ending holds commits before the rest of the sweep runs, so a sweep that is slow afterwards
/// (here: stuck behind a lock on `deleted_queues`, which its orphan step reads) keeps no
/// message row locked, and a redrive step moves the message at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_holds_are_committed_before_the_rest_of_the_sweep() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    store.create_queue("dlq", QueueAttributes::default()).await.unwrap();
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    store.send("dlq", vec![text("x")]).await.unwrap();
    assert_eq!(store.receive("dlq", recv(Some(0))).await.unwrap().len(), 1);
    // The hold ends at the database's next millisecond.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut blocker = schema.client().await;
    let block = blocker.transaction().await.unwrap();
    block.batch_execute("LOCK TABLE deleted_queues IN ACCESS EXCLUSIVE MODE").await.unwrap();

    let ((), swept) = tokio::join!(
        async {
            // Until the hold is ended (and committed: this is another session), then while the
            // sweep waits on the blocker.
            let mut waited_ms = 0;
            while count(&client, "SELECT count(*) FROM messages WHERE in_flight").await > 0 {
                assert!(waited_ms < 5_000, "the sweep did not commit the ended hold on its own");
                tokio::time::sleep(Duration::from_millis(10)).await;
                waited_ms += 10;
            }
            let free = client.query("SELECT seq FROM messages FOR UPDATE NOWAIT", &[]).await;
            assert!(free.is_ok(), "the sweep still locks the message: {free:?}");
            let moved = store.move_messages("dlq", Some("q"), 10).await.unwrap();
            assert_eq!((moved.moved, moved.remaining_visible), (1, 0));
            block.commit().await.unwrap();
        },
        store.sweep_now(),
    );
    assert!(swept.unwrap(), "no other node holds the lease");
    assert_eq!(store.get_queue("q").await.unwrap().stats.visible, 1);
}

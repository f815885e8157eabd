//! Redrive steps against rows that other transactions hold: what the sweeper does to a message
//! whose hold ran out (for one statement and its commit), held open by hand so that a step
//! meets it every time instead of once in many runs.

mod support;

use std::time::{Duration, Instant};

use sluice_core::{NewMessage, QueueAttributes};
use sluice_store::prelude::*;
use sluice_store::{ReceiveRequest, Store, StoreError};

/// What the sweeper's `END_HOLDS` does to a message whose hold ran out (it stops being in
/// flight), in a transaction left open: the row stays locked until the caller commits.
const END_HOLDS_BY_HAND: &str =
    "UPDATE messages SET in_flight = false WHERE in_flight AND visible_at <= sluice_now_ms()";

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

/// A dead-letter queue `dlq` holding "held" (received with no visibility timeout, so visible
/// again at once but still marked in flight, as the sweeper finds it) and "free", and a queue
/// `q` to move them to.
async fn setup(store: &dyn Store) {
    store.create_queue("dlq", QueueAttributes::default()).await.unwrap();
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    store.send("dlq", vec![text("held")]).await.unwrap();
    let got = store.receive("dlq", ReceiveRequest { max: 1, wait_ms: Some(0), visibility_timeout_ms: Some(0) });
    assert_eq!(got.await.unwrap().len(), 1);
    store.send("dlq", vec![text("free")]).await.unwrap();
    // The hold ends at the database's next millisecond.
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_moves_rows_the_sweeper_holds_once_it_commits() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    setup(&store).await;
    let mut client = schema.client().await;
    let sweep = client.transaction().await.unwrap();
    assert_eq!(sweep.execute(END_HOLDS_BY_HAND, &[]).await.unwrap(), 1);
    let held_ms = 300;
    let started = Instant::now();
    let ((outcome, step_ms), ()) = tokio::join!(
        async {
            let outcome = store.move_messages("dlq", Some("q"), 10).await;
            (outcome, started.elapsed().as_millis())
        },
        async {
            tokio::time::sleep(Duration::from_millis(held_ms)).await;
            sweep.commit().await.unwrap();
        },
    );
    let outcome = outcome.unwrap();
    assert_eq!(outcome.moved, 2, "the held message moves too, not only the free one: {outcome:?}");
    assert_eq!((outcome.failed, outcome.remaining_visible), (0, 0));
    assert!(step_ms >= u128::from(held_ms), "the step waited for the sweep ({step_ms} ms)");
    assert_eq!(store.get_queue("q").await.unwrap().stats.visible, 2);
    assert_eq!(store.get_queue("dlq").await.unwrap().stats.visible, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_fails_rather_than_report_rows_held_too_long_as_gone() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    setup(&store).await;
    let mut client = schema.client().await;
    let stuck = client.transaction().await.unwrap();
    assert_eq!(stuck.execute(END_HOLDS_BY_HAND, &[]).await.unwrap(), 1);
    let error = store.move_messages("dlq", Some("q"), 10).await.expect_err("a step cannot finish while rows are held");
    // Busy rows are a reason to retry, not to restart: nothing is wrong with what is stored.
    assert!(matches!(&error, StoreError::Unavailable(m) if m.contains("stayed locked")), "{error:?}");
    // What could move did; the held message is still there for the next redrive.
    assert_eq!(store.get_queue("q").await.unwrap().stats.visible, 1);
    stuck.rollback().await.unwrap();
    let outcome = store.move_messages("dlq", Some("q"), 10).await.unwrap();
    assert_eq!((outcome.moved, outcome.failed, outcome.remaining_visible), (1, 0, 0));
}

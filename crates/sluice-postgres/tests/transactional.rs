//! Transactional enqueue: a message sent inside the application's transaction exists if and
//! only if that transaction commits, and wakes long polls when it does.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::message::{AttributeData, MessageEnvelope};
use sluice_core::{AttributeValue, EntryError, NewMessage, QueueAttributes};
use sluice_postgres::{TransactionalSendError, send_in_transaction};
use sluice_store::prelude::*;
use sluice_store::{ReceiveRequest, Store};

fn recv(wait_ms: u64) -> ReceiveRequest {
    ReceiveRequest { max: 10, wait_ms: Some(wait_ms), visibility_timeout_ms: None }
}

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_makes_the_message_visible_and_rollback_leaves_nothing() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    store.create_queue("outbox", QueueAttributes::default()).await.unwrap();
    let mut client = schema.client().await;

    let tx = client.transaction().await.unwrap();
    let mut attributes = BTreeMap::new();
    attributes.insert(
        "raw".to_string(),
        AttributeValue { data_type: "Binary".into(), value: AttributeData::Bytes(vec![0, 1, 255]) },
    );
    let message = NewMessage {
        attributes,
        priority: 4,
        envelope: MessageEnvelope { r#type: Some("order.paid".into()), ..Default::default() },
        ..text("committed")
    };
    let id = send_in_transaction(&tx, "outbox", &message).await.unwrap();
    assert!(store.receive("outbox", recv(0)).await.unwrap().is_empty(), "invisible before the commit");
    tx.commit().await.unwrap();
    let got = store.receive("outbox", recv(0)).await.unwrap();
    assert_eq!(got.len(), 1, "visible after the commit");
    let m = &got[0].message;
    assert_eq!(m.meta.id, id);
    assert_eq!(m.content.body, b"committed");
    assert_eq!(m.content.attributes, message.attributes);
    assert_eq!(m.content.envelope, message.envelope);
    assert_eq!(m.meta.priority, 4);
    store.ack("outbox", vec![got[0].receipt.clone()]).await.unwrap()[0].clone().unwrap();

    let tx = client.transaction().await.unwrap();
    send_in_transaction(&tx, "outbox", &text("rolled back")).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(store.receive("outbox", recv(0)).await.unwrap().is_empty(), "absent after the rollback");
    assert!(store.peek("outbox", 10).await.unwrap().is_empty());
    let stats = store.get_queue("outbox").await.unwrap().stats;
    assert_eq!((stats.visible, stats.in_flight, stats.delayed), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_wakes_a_long_poll_and_a_rollback_does_not() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store: Arc<dyn Store> = Arc::new(schema.connect().await);
    store.create_queue("outbox", QueueAttributes::default()).await.unwrap();
    let mut client = schema.client().await;

    // A rolled-back send must not satisfy the poll: it times out empty.
    let poller = {
        let store = store.clone();
        tokio::spawn(async move { store.receive("outbox", recv(1_000)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tx = client.transaction().await.unwrap();
    send_in_transaction(&tx, "outbox", &text("never")).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(poller.await.unwrap().is_empty());

    let poller = {
        let store = store.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (store.receive("outbox", recv(10_000)).await.unwrap(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tx = client.transaction().await.unwrap();
    send_in_transaction(&tx, "outbox", &text("wake")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx.commit().await.unwrap();
    let (got, waited) = poller.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.content.body, b"wake");
    assert!(waited < Duration::from_secs(5), "woken by the commit, not the timeout ({waited:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_abort_nothing_or_the_callers_transaction() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    store.create_queue("small", QueueAttributes { message_bytes_max: 4, ..Default::default() }).await.unwrap();
    let mut client = schema.client().await;

    // Checked in Rust before any SQL: the transaction goes on.
    let tx = client.transaction().await.unwrap();
    let bad = NewMessage { priority: 10, ..text("x") };
    assert!(matches!(
        send_in_transaction(&tx, "small", &bad).await,
        Err(TransactionalSendError::Invalid(EntryError::Invalid(v))) if v.field == "priority"
    ));
    send_in_transaction(&tx, "small", &text("ok")).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.get_queue("small").await.unwrap().stats.visible, 1);

    // Checked by sluice_send: the statement fails, and with it the caller's transaction.
    for (queue, message) in [("small", text("too large")), ("missing", text("x"))] {
        let tx = client.transaction().await.unwrap();
        let err = send_in_transaction(&tx, queue, &message).await.unwrap_err();
        assert!(matches!(err, TransactionalSendError::Database(_)), "{queue}: {err}");
        assert!(err.to_string().contains("sluice_send"), "{err}");
        tx.rollback().await.unwrap();
    }
    assert_eq!(store.get_queue("small").await.unwrap().stats.visible, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_function_validates_like_the_broker() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    let client = schema.client().await;

    client
        .execute(
            "SELECT sluice_send('q', convert_to('hi', 'UTF8'),
                                attributes => '{\"n\": {\"type\": \"Number\", \"value\": \"-1.5e3\"}}',
                                envelope => '{\"source\": \"billing\"}')",
            &[],
        )
        .await
        .unwrap();
    let got = store.receive("q", recv(0)).await.unwrap();
    assert_eq!(got.len(), 1);
    let m = &got[0].message;
    assert_eq!(m.content.body, b"hi");
    assert!(!m.content.body_binary);
    assert_eq!(m.content.attributes["n"].value, AttributeData::Text("-1.5e3".into()));
    assert_eq!(m.content.envelope.source.as_deref(), Some("billing"));
    assert_eq!(m.meta.size_bytes, 2 + 1 + 6 + 6, "body, name, type and value, as core counts");

    for bad in [
        "SELECT sluice_send('q', 'x'::bytea, priority => 10)",
        "SELECT sluice_send('q', 'x'::bytea, attributes => '{\"n\": {\"type\": \"Number\", \"value\": \"abc\"}}')",
        "SELECT sluice_send('q', 'x'::bytea, attributes => '{\"b\": {\"type\": \"Binary\", \"value\": \"%%\"}}')",
        "SELECT sluice_send('q', 'x'::bytea, attributes => '{\"bad name\": {\"type\": \"String\", \"value\": \"v\"}}')",
        "SELECT sluice_send('q', 'x'::bytea, attributes => '{\"k\": {\"type\": \"Blob\", \"value\": \"v\"}}')",
        "SELECT sluice_send('q', 'x'::bytea, envelope => '{\"colour\": \"red\"}')",
        "SELECT sluice_send('q', 'x'::bytea, delay_ms => 345600000)",
        "SELECT sluice_send('q', 'x'::bytea, delay_ms => 5, deliver_at_ms => 5)",
    ] {
        let err = client.execute(bad, &[]).await.expect_err(bad);
        assert!(err.as_db_error().is_some_and(|e| e.message().starts_with("sluice_send")), "{bad}: {err}");
    }
    assert_eq!(store.get_queue("q").await.unwrap().stats.in_flight, 1, "no refused send enqueued anything");
    assert_eq!(store.get_queue("q").await.unwrap().stats.visible, 0);
}

/// `sluice_send` into a queue with a depth limit follows the queue's `overflow` as a send
/// through Sluice does: `reject` aborts the caller's transaction, `drop_head` moves the oldest
/// message to the dead-letter queue, `reject_to_dlq` sends the new one there; each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_function_keeps_a_queues_depth_limit() {
    use sluice_core::DeadLetter;
    use sluice_core::overflow::{Overflow, REASON_DROP_HEAD, REASON_REJECT_TO_DLQ};
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    store.create_queue("dlq", QueueAttributes::default()).await.unwrap();
    for overflow in Overflow::ALL {
        let name = format!("bounded-{}", overflow.as_str());
        let attributes = QueueAttributes {
            max_depth_messages: Some(2),
            overflow,
            dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 5 }),
            ..Default::default()
        };
        store.create_queue(&name, attributes).await.unwrap();
    }
    let mut client = schema.client().await;
    // Two fit in each queue, sent from SQL and through the store.
    for overflow in Overflow::ALL {
        let name = format!("bounded-{}", overflow.as_str());
        let tx = client.transaction().await.unwrap();
        send_in_transaction(&tx, &name, &text("first")).await.unwrap();
        tx.commit().await.unwrap();
        store.send(&name, vec![text("second")]).await.unwrap()[0].clone().unwrap();
    }

    // reject: the third send fails with SQLSTATE 53400 and takes the caller's transaction with it.
    let tx = client.transaction().await.unwrap();
    let err = send_in_transaction(&tx, "bounded-reject", &text("third")).await.unwrap_err();
    let TransactionalSendError::Database(db) = &err else { panic!("{err}") };
    assert_eq!(db.code(), Some(&tokio_postgres::error::SqlState::CONFIGURATION_LIMIT_EXCEEDED), "{err}");
    assert!(err.to_string().contains("is full"), "{err}");
    tx.rollback().await.unwrap();
    assert_eq!(store.get_queue("bounded-reject").await.unwrap().stats.depth_messages(), 2);

    // drop_head: "first" moves to the DLQ when the transaction commits, not before.
    let tx = client.transaction().await.unwrap();
    send_in_transaction(&tx, "bounded-drop_head", &text("third")).await.unwrap();
    assert!(store.peek("dlq", 10).await.unwrap().is_empty(), "nothing moves before the commit");
    tx.commit().await.unwrap();
    let mut kept: Vec<Vec<u8>> =
        store.peek("bounded-drop_head", 10).await.unwrap().into_iter().map(|p| p.message.content.body).collect();
    kept.sort();
    assert_eq!(kept, [b"second".to_vec(), b"third".to_vec()]);
    let q = store.get_queue("bounded-drop_head").await.unwrap();
    assert_eq!(q.stats.refusals.drop_head, 1);

    // reject_to_dlq: "third" goes to the DLQ instead.
    let tx = client.transaction().await.unwrap();
    send_in_transaction(&tx, "bounded-reject_to_dlq", &text("third")).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.get_queue("bounded-reject_to_dlq").await.unwrap().stats.depth_messages(), 2);
    assert_eq!(store.get_queue("bounded-reject_to_dlq").await.unwrap().stats.refusals.rejected_to_dlq, 1);

    let mut dead: Vec<(String, String, String)> = store
        .peek("dlq", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| {
            let m = p.message;
            let source = m.meta.dead_letter_source.clone().unwrap_or_default();
            let error = m.meta.last_error.clone().unwrap_or_default();
            (source, String::from_utf8(m.content.body).unwrap(), error)
        })
        .collect();
    dead.sort();
    assert_eq!(
        dead,
        [
            ("bounded-drop_head".to_string(), "first".to_string(), REASON_DROP_HEAD.to_string()),
            ("bounded-reject_to_dlq".to_string(), "third".to_string(), REASON_REJECT_TO_DLQ.to_string()),
        ]
    );
    // Once a message is in flight it is not dropped: with both held, the send is refused.
    let held = store.receive("bounded-drop_head", recv(0)).await.unwrap();
    assert_eq!(held.len(), 2);
    let tx = client.transaction().await.unwrap();
    let err = send_in_transaction(&tx, "bounded-drop_head", &text("fourth")).await.unwrap_err();
    assert!(err.to_string().contains("is full"), "{err}");
    tx.rollback().await.unwrap();
}

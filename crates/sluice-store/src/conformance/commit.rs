//! Conformance of [`CommitStore`](crate::CommitStore): all writes or none, conditions checked
//! against what earlier writes left, concurrent commits on one condition, appends to streams
//! beside sends and records, restarts.

use std::sync::Arc;

use sluice_core::stream::{NewRecord, RecordError, StreamConfig};
use sluice_core::{BrokerError, NewMessage, QueueAttributes};

use super::{Backend, bodies, queue, recv, text};
use crate::{Appended, Conflict, ReadFrom, ReadRequest, Refused, StoreError, Write, WriteOutcome};

fn send(queue: &str, bodies: &[&str]) -> Write {
    Write::Send { queue: queue.into(), messages: bodies.iter().map(|b| text(b)).collect() }
}

fn insert(key: &str, value: &str) -> Write {
    Write::InsertRecord { kind: "k".into(), key: key.into(), value: value.as_bytes().to_vec() }
}

fn replace(key: &str, expected: &str, value: &str) -> Write {
    Write::ReplaceRecord {
        kind: "k".into(),
        key: key.into(),
        expected: expected.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
    }
}

async fn record_value(s: &dyn crate::Store, key: &str) -> Option<String> {
    s.get_record("k", key).await.expect("get").map(|v| String::from_utf8(v).expect("utf-8"))
}

pub async fn commit_applies_sends_and_records_together(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    let writes = vec![
        send("q", &["one", "two"]),
        insert("a", "v1"),
        // Sees the insert before it in the same commit.
        replace("a", "v1", "v2"),
        Write::PutRecord { kind: "k".into(), key: "b".into(), value: b"put".to_vec() },
        Write::DeleteRecord { kind: "k".into(), key: "b".into() },
    ];
    let outcomes = s.commit_all(writes).await.expect("commit").expect("not refused");
    assert_eq!(outcomes.len(), 5);
    let WriteOutcome::Sent(sent) = &outcomes[0] else { panic!("a send's outcome: {outcomes:?}") };
    assert_eq!(sent.len(), 2);
    assert!(sent[0].seq < sent[1].seq && !sent[0].duplicate);
    assert!(outcomes[1..].iter().all(|o| *o == WriteOutcome::Recorded));
    assert_eq!(record_value(s.as_ref(), "a").await.as_deref(), Some("v2"));
    assert_eq!(record_value(s.as_ref(), "b").await, None);
    b.close(s).await;

    let s = b.open().await;
    assert_eq!(record_value(s.as_ref(), "a").await.as_deref(), Some("v2"), "the commit survives a restart");
    let got = s.receive("q", recv(10, 0, None)).await.expect("receive");
    assert_eq!(bodies(&got), ["one", "two"]);
    assert_eq!(got[0].message.meta.id, sent[0].id);
    b.close(s).await;
}

pub async fn a_refused_commit_changes_nothing(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    queue(s.as_ref(), "small", QueueAttributes { message_bytes_max: 4, ..QueueAttributes::default() }).await;
    s.put_record("k", "taken", b"x".to_vec()).await.expect("put");

    let refused =
        s.commit_all(vec![send("q", &["lost"]), insert("new", "v"), insert("taken", "y")]).await.expect("commit");
    assert_eq!(refused, Err(Refused { write: 2, conflict: Conflict::RecordExists }));
    let refused = s.commit_all(vec![insert("new", "v"), replace("taken", "not x", "y")]).await.expect("commit");
    assert_eq!(refused, Err(Refused { write: 1, conflict: Conflict::RecordChanged }));
    let refused = s.commit_all(vec![replace("absent", "", "y")]).await.expect("commit");
    assert_eq!(refused, Err(Refused { write: 0, conflict: Conflict::RecordChanged }), "nothing to replace");
    // The second message is too large for its queue: the first, valid one is not sent either.
    let refused = s.commit_all(vec![insert("new", "v"), send("small", &["ok", "too large"])]).await.expect("commit");
    assert!(
        matches!(&refused, Err(Refused { write: 1, conflict: Conflict::MessageRefused { message: 1, .. } })),
        "{refused:?}"
    );
    // An unknown queue fails the call, after records were checked: still nothing applied.
    let unknown = s.commit_all(vec![insert("new", "v"), send("nope", &["x"])]).await;
    assert!(matches!(unknown, Err(StoreError::Broker(BrokerError::QueueNotFound(_)))), "{unknown:?}");
    // Bad input and limits are refused before anything is looked at.
    assert!(matches!(s.commit_all(Vec::new()).await, Err(StoreError::Broker(BrokerError::Invalid(_)))));
    let huge = (0..=crate::COMMIT_MESSAGES_MAX).map(|i| text(&i.to_string())).collect();
    let too_many = s.commit_all(vec![Write::Send { queue: "q".into(), messages: huge }]).await;
    assert!(matches!(too_many, Err(StoreError::Broker(BrokerError::Invalid(_)))), "{too_many:?}");

    assert_eq!(record_value(s.as_ref(), "new").await, None);
    assert_eq!(record_value(s.as_ref(), "taken").await.as_deref(), Some("x"));
    for q in ["q", "small"] {
        assert!(s.receive(q, recv(10, 0, None)).await.expect("receive").is_empty(), "nothing sent into {q}");
    }
    b.close(s).await;
}

pub async fn commit_records_its_outcomes_beside_its_effect(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    s.put_record("k", "entry", b"claimed".to_vec()).await.expect("put");
    let outcomes_of = |expected: Option<&str>| Write::RecordOutcomes {
        kind: "k".into(),
        key: "entry".into(),
        expected: expected.map(|e| e.as_bytes().to_vec()),
        value: b"answer".to_vec(),
    };
    // A stale condition refuses the whole commit: nothing sent, the record as it was.
    let refused = s.commit_all(vec![send("q", &["x"]), outcomes_of(Some("other"))]).await.expect("commit");
    assert_eq!(refused, Err(Refused { write: 1, conflict: Conflict::RecordChanged }));
    assert!(s.receive("q", recv(10, 0, None)).await.expect("receive").is_empty(), "nothing sent");
    assert_eq!(record_value(s.as_ref(), "entry").await.as_deref(), Some("claimed"));

    let outcomes = s
        .commit_all(vec![send("q", &["one", "two"]), outcomes_of(Some("claimed"))])
        .await
        .expect("commit")
        .expect("ok");
    let WriteOutcome::Sent(sent) = &outcomes[0] else { panic!("a send's outcome: {outcomes:?}") };
    assert_eq!(outcomes[1], WriteOutcome::Recorded);
    b.close(s).await;

    let s = b.open().await;
    let stored = s.get_record("k", "entry").await.expect("get").expect("the record");
    let (value, read) = crate::split_outcomes(&stored).expect("the outcomes layout");
    assert_eq!(value, b"answer");
    let ids: Vec<String> = sent.iter().map(|m| m.id.to_string()).collect();
    match &read[..] {
        [crate::StoredOutcome::Sent(stored_sent)] => {
            assert_eq!(stored_sent.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), ids, "the ids the send chose");
        }
        other => panic!("the outcomes of the writes before it: {other:?}"),
    }
    let got = s.receive("q", recv(10, 0, None)).await.expect("receive");
    assert_eq!(got.iter().map(|m| m.message.meta.id.to_string()).collect::<Vec<_>>(), ids);
    // Without a condition it creates the record.
    s.commit_all(vec![Write::RecordOutcomes {
        kind: "k".into(),
        key: "fresh".into(),
        expected: None,
        value: b"v".to_vec(),
    }])
    .await
    .expect("commit")
    .expect("ok");
    let fresh = s.get_record("k", "fresh").await.expect("get").expect("created");
    assert_eq!(crate::split_outcomes(&fresh).map(|(v, o)| (v.to_vec(), o.len())), Some((b"v".to_vec(), 0)));
    b.close(s).await;
}

pub async fn fifo_duplicates_inside_a_commit_enqueue_once(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "f.fifo", QueueAttributes { fifo: true, ..QueueAttributes::default() }).await;
    let grouped = |body: &str, dedup: &str| {
        let mut m = NewMessage { dedup_id: Some(dedup.into()), ..text(body) };
        m.envelope.group_id = Some("g".into());
        m
    };
    let writes = vec![Write::Send { queue: "f.fifo".into(), messages: vec![grouped("a", "1"), grouped("again", "1")] }];
    let outcomes = s.commit_all(writes).await.expect("commit").expect("not refused");
    let WriteOutcome::Sent(sent) = &outcomes[0] else { panic!("{outcomes:?}") };
    assert!(!sent[0].duplicate && sent[1].duplicate && sent[0].id == sent[1].id, "{sent:?}");
    let writes = vec![Write::Send { queue: "f.fifo".into(), messages: vec![grouped("later", "1")] }];
    let outcomes = s.commit_all(writes).await.expect("commit").expect("not refused");
    assert_eq!(outcomes, vec![WriteOutcome::Sent(vec![sent[1]])], "a duplicate of an earlier commit's message");
    assert_eq!(bodies(&s.receive("f.fifo", recv(10, 0, None)).await.expect("receive")), ["a"]);
    b.close(s).await;
}

pub async fn of_commits_racing_on_one_condition_exactly_one_wins(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    s.put_record("k", "tick", b"0".to_vec()).await.expect("put");
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let s: Arc<dyn crate::Store> = s.clone();
            tokio::spawn(async move {
                let body = format!("fired by {i}");
                s.commit_all(vec![replace("tick", "0", "1"), send("q", &[&body])]).await.expect("commit")
            })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        match racer.await.expect("racer") {
            Ok(_) => won += 1,
            Err(refused) => assert_eq!(refused, Refused { write: 0, conflict: Conflict::RecordChanged }),
        }
    }
    assert_eq!(won, 1, "exactly one commit took the condition");
    assert_eq!(s.receive("q", recv(10, 0, None)).await.expect("receive").len(), 1, "and only its send happened");
    assert_eq!(record_value(s.as_ref(), "tick").await.as_deref(), Some("1"));
    b.close(s).await;
}

fn record(body: &str, dedup: Option<&str>) -> NewRecord {
    NewRecord {
        key: Some(b"tick".to_vec()),
        body: body.as_bytes().to_vec(),
        dedup_id: dedup.map(str::to_owned),
        ..Default::default()
    }
}

fn append(stream: &str, records: Vec<NewRecord>) -> Write {
    Write::Append { stream: stream.into(), records }
}

async fn stream_bodies(s: &dyn crate::Store, stream: &str) -> Vec<String> {
    let request = ReadRequest { partition: 0, from: ReadFrom::Offset(0), max: 100, wait_ms: 0 };
    let batch = s.read(stream, request).await.expect("read");
    batch.records.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect()
}

pub async fn commit_appends_to_streams_with_the_other_writes(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    let small = StreamConfig { record_bytes_max: 64, ..StreamConfig::default() };
    s.create_stream("ticks", small).await.expect("create stream");
    s.put_record("k", "tick", b"0".to_vec()).await.expect("put");

    let writes = vec![
        replace("tick", "0", "1"),
        append("ticks", vec![record("one", Some("t/1")), record("two", None)]),
        send("q", &["sent"]),
    ];
    let outcomes = s.commit_all(writes).await.expect("commit").expect("not refused");
    let WriteOutcome::Appended(places) = &outcomes[1] else { panic!("an append's outcome: {outcomes:?}") };
    assert_eq!(
        places.iter().map(|p| (p.partition, p.offset, p.duplicate)).collect::<Vec<_>>(),
        [(0, 0, false), (0, 1, false)]
    );
    assert_eq!(stream_bodies(s.as_ref(), "ticks").await, ["one", "two"]);

    // The same dedup id again is answered with the original's place and appends nothing.
    let outcomes = s
        .commit_all(vec![replace("tick", "1", "2"), append("ticks", vec![record("one again", Some("t/1"))])])
        .await
        .expect("commit")
        .expect("not refused");
    assert_eq!(outcomes[1], WriteOutcome::Appended(vec![Appended { duplicate: true, ..places[0] }]));

    // Refused, each changing nothing: an unknown stream, a record the stream does not take
    // (the earlier, valid record and every other write are not applied either).
    let refused = s.commit_all(vec![replace("tick", "2", "3"), append("nope", vec![record("x", None)])]).await;
    assert_eq!(refused.expect("commit"), Err(Refused { write: 1, conflict: Conflict::StreamNotFound("nope".into()) }));
    let large = record(&"x".repeat(100), None);
    let refused = s
        .commit_all(vec![
            send("q", &["lost"]),
            replace("tick", "2", "3"),
            append("ticks", vec![record("ok", None), large]),
        ])
        .await
        .expect("commit");
    assert!(
        matches!(
            &refused,
            Err(Refused {
                write: 2,
                conflict: Conflict::RecordRefused { record: 1, error: RecordError::TooLarge { .. } }
            })
        ),
        "{refused:?}"
    );
    assert_eq!(record_value(s.as_ref(), "tick").await.as_deref(), Some("2"));
    assert_eq!(stream_bodies(s.as_ref(), "ticks").await, ["one", "two"], "nothing more appended");
    b.close(s).await;

    // Durable with the commit, and the dedup id with it.
    let s = b.open().await;
    assert_eq!(stream_bodies(s.as_ref(), "ticks").await, ["one", "two"]);
    assert_eq!(bodies(&s.receive("q", recv(10, 0, None)).await.expect("receive")), ["sent"]);
    let outcomes = s.commit_all(vec![append("ticks", vec![record("once more", Some("t/1"))])]).await.expect("commit");
    assert_eq!(outcomes, Ok(vec![WriteOutcome::Appended(vec![Appended { duplicate: true, ..places[0] }])]));
    assert_eq!(stream_bodies(s.as_ref(), "ticks").await, ["one", "two"]);
    b.close(s).await;
}

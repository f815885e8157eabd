//! Conformance of [`EventStore`](crate::EventStore): expected versions, event-id dedup, reads
//! of a stream both ways, `$all` with filters and long polls, deletes, concurrent writers on
//! one stream, a gapless global order under concurrent appends, and restarts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::events::{AppendError, EventFilter, ExpectedVersion, NewEvent};

use super::Backend;
use crate::{AllRead, Direction, EventError, Store, StreamRead};

fn ev(id: &str, t: &str) -> NewEvent {
    NewEvent { id: id.into(), r#type: t.into(), data: format!("{{\"id\":\"{id}\"}}"), ..Default::default() }
}

fn forward(from: Option<u64>, max: u32) -> StreamRead {
    StreamRead { from_version: from, direction: Direction::Forward, max }
}

fn all(from: u64, max: u32) -> AllRead {
    AllRead { from_position: from, max, filter: EventFilter::default(), wait_ms: 0 }
}

async fn ids_of(s: &dyn Store, stream: &str, read: StreamRead) -> Vec<String> {
    s.read_stream(stream, read).await.expect("read").events.into_iter().map(|e| e.id).collect()
}

fn wrong(actual: Option<u64>) -> impl Fn(&EventError) -> bool {
    move |e| matches!(e, EventError::Append(AppendError::WrongExpectedVersion { actual: a, .. }) if *a == actual)
}

pub async fn events_expected_versions_and_dedup(b: &dyn Backend) {
    let s = b.open().await;
    let e = s.append_events("order-1", ExpectedVersion::Exists, vec![ev("a", "T")]).await.unwrap_err();
    assert!(wrong(None)(&e), "{e:?}");
    let first = s.append_events("order-1", ExpectedVersion::NoStream, vec![ev("a", "T"), ev("b", "T")]).await.unwrap();
    assert_eq!((first.first_version, first.last_version, first.duplicate), (0, 1, false));
    assert_eq!(first.last_position, first.first_position + 1);
    let e = s.append_events("order-1", ExpectedVersion::Exact(0), vec![ev("c", "T")]).await.unwrap_err();
    assert!(wrong(Some(1))(&e), "{e:?}");
    let e = s.append_events("order-1", ExpectedVersion::NoStream, vec![ev("c", "T")]).await.unwrap_err();
    assert!(wrong(Some(1))(&e), "{e:?}");
    let second = s.append_events("order-1", ExpectedVersion::Exact(1), vec![ev("c", "U")]).await.unwrap();
    assert_eq!((second.first_version, second.first_position), (2, first.last_position + 1));
    // Re-sent appends answer the originals and append nothing.
    let again = s.append_events("order-1", ExpectedVersion::NoStream, vec![ev("a", "T"), ev("b", "T")]).await.unwrap();
    assert_eq!((again.first_version, again.first_position, again.duplicate), (0, first.first_position, true));
    let again = s.append_events("order-1", ExpectedVersion::Exact(1), vec![ev("c", "U")]).await.unwrap();
    assert_eq!((again.first_version, again.last_position, again.duplicate), (2, second.last_position, true));
    let e = s.append_events("order-1", ExpectedVersion::Any, vec![ev("c", "U"), ev("z", "U")]).await.unwrap_err();
    assert!(matches!(e, EventError::Append(AppendError::EventIdConflict { version: 2, .. })), "{e:?}");
    let any = s.append_events("order-1", ExpectedVersion::Any, vec![ev("d", "T")]).await.unwrap();
    assert_eq!(any.first_version, 3);
    assert_eq!(ids_of(s.as_ref(), "order-1", forward(None, 100)).await, ["a", "b", "c", "d"]);
    assert_eq!(s.event_stream_version("order-1").await.unwrap(), Some(3));
    assert_eq!(s.event_stream_version("order-2").await.unwrap(), None);
    let bad = s.append_events("$all", ExpectedVersion::Any, vec![ev("x", "T")]).await.unwrap_err();
    assert!(matches!(bad, EventError::Invalid(_)), "{bad:?}");
    let bad = s.append_events("o", ExpectedVersion::Any, vec![ev("x", "T"), ev("x", "T")]).await.unwrap_err();
    assert!(matches!(bad, EventError::Invalid(_)), "{bad:?}");
    assert_eq!(s.read_all(all(0, 100)).await.unwrap().events.len(), 4, "nothing refused was appended");
    b.close(s).await;
}

pub async fn events_read_streams_both_ways_and_all_with_filters(b: &dyn Backend) {
    let s = b.open().await;
    for i in 0..5u64 {
        let expected = if i == 0 { ExpectedVersion::NoStream } else { ExpectedVersion::Exact(i - 1) };
        s.append_events("order-1", expected, vec![ev(&format!("o{i}"), if i % 2 == 0 { "Even" } else { "Odd" })])
            .await
            .unwrap();
        let mut other = ev(&format!("u{i}"), "Other");
        other.correlation_id = Some(format!("c{}", i % 2));
        other.metadata = Some("{\"by\":\"me\"}".into());
        other.causation_id = Some("cause".into());
        s.append_events("user-1", ExpectedVersion::Any, vec![other]).await.unwrap();
    }
    assert_eq!(ids_of(s.as_ref(), "order-1", forward(Some(2), 2)).await, ["o2", "o3"]);
    let back = StreamRead { from_version: None, direction: Direction::Backward, max: 3 };
    assert_eq!(ids_of(s.as_ref(), "order-1", back).await, ["o4", "o3", "o2"]);
    let back = StreamRead { from_version: Some(1), direction: Direction::Backward, max: 10 };
    assert_eq!(ids_of(s.as_ref(), "order-1", back).await, ["o1", "o0"]);
    assert!(ids_of(s.as_ref(), "order-1", forward(Some(5), 10)).await.is_empty());
    let r = s.read_stream("order-1", forward(None, 1)).await.unwrap();
    assert_eq!((r.first_version, r.last_version), (0, 4));
    let e = s.read_stream("nope", forward(None, 1)).await.unwrap_err();
    assert_eq!(e, EventError::Append(AppendError::StreamNotFound));

    let every = s.read_all(all(0, 100)).await.unwrap();
    assert_eq!(every.events.len(), 10);
    assert_eq!(every.head, 10);
    assert_eq!(every.next_position, 10);
    for (i, e) in every.events.iter().enumerate() {
        assert_eq!(e.position, i as u64, "positions are gapless from 0");
    }
    let u = every.events.iter().find(|e| e.id == "u3").unwrap();
    assert_eq!((u.stream_id.as_str(), u.version, u.r#type.as_str()), ("user-1", 3, "Other"));
    assert_eq!((u.metadata.as_deref(), u.causation_id.as_deref()), (Some("{\"by\":\"me\"}"), Some("cause")));
    assert_eq!(u.data, "{\"id\":\"u3\"}");
    let page = s.read_all(all(3, 4)).await.unwrap();
    assert_eq!(page.events.iter().map(|e| e.position).collect::<Vec<_>>(), [3, 4, 5, 6]);
    assert_eq!(page.next_position, 7);

    let filtered = |filter: EventFilter| AllRead { filter, ..all(0, 100) };
    let types = EventFilter { types: vec!["Even".into()], ..Default::default() };
    let evens = s.read_all(filtered(types)).await.unwrap();
    assert_eq!(evens.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["o0", "o2", "o4"]);
    let prefix = EventFilter { stream_prefix: Some("user-".into()), ..Default::default() };
    assert_eq!(s.read_all(filtered(prefix)).await.unwrap().events.len(), 5);
    let both = EventFilter {
        types: vec!["Odd".into(), "Other".into()],
        stream_prefix: Some("order".into()),
        ..Default::default()
    };
    let odd = s.read_all(filtered(both)).await.unwrap();
    assert_eq!(odd.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["o1", "o3"]);
    let corr = EventFilter { correlation_id: Some("c1".into()), ..Default::default() };
    let c1 = s.read_all(filtered(corr)).await.unwrap();
    assert_eq!(c1.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["u1", "u3"]);
    let paged = AllRead { max: 2, ..filtered(EventFilter { types: vec!["Even".into()], ..Default::default() }) };
    let p1 = s.read_all(paged.clone()).await.unwrap();
    assert_eq!(p1.events.len(), 2);
    let p2 = s.read_all(AllRead { from_position: p1.next_position, ..paged }).await.unwrap();
    assert_eq!(p2.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["o4"]);

    // A tenant's stream: its prefix finds it alone, the default tenant's filter steps over it.
    s.append_events("acme~order-1", ExpectedVersion::NoStream, vec![ev("a0", "Even")]).await.unwrap();
    let tenant = EventFilter { stream_prefix: Some("acme~".into()), ..Default::default() };
    let mine = s.read_all(filtered(tenant)).await.unwrap();
    assert_eq!(mine.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["a0"]);
    let untenanted = EventFilter { types: vec!["Even".into()], untenanted: true, ..Default::default() };
    let evens = s.read_all(filtered(untenanted)).await.unwrap();
    assert_eq!(evens.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["o0", "o2", "o4"]);
    let own = s.read_all(filtered(EventFilter { untenanted: true, ..Default::default() })).await.unwrap();
    assert_eq!((own.events.len(), own.next_position), (10, 11), "all ten, and past the tenant's event");
    b.close(s).await;
}

pub async fn events_all_long_polls_wake_on_append_and_time_out(b: &dyn Backend) {
    let s = b.open().await;
    let t0 = Instant::now();
    let empty = s.read_all(AllRead { wait_ms: 200, ..all(0, 10) }).await.unwrap();
    assert!(empty.events.is_empty());
    assert!(t0.elapsed() >= Duration::from_millis(180), "waited its wait_ms");
    let reader = {
        let s = s.clone();
        tokio::spawn(async move { s.read_all(AllRead { wait_ms: 10_000, ..all(0, 10) }).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t1 = Instant::now();
    s.append_events("a", ExpectedVersion::Any, vec![ev("1", "T")]).await.unwrap();
    let got = reader.await.unwrap().unwrap();
    assert_eq!(got.events.len(), 1);
    assert!(t1.elapsed() < Duration::from_secs(5), "woken by the append, not by the timeout");
    b.close(s).await;
}

pub async fn events_soft_and_hard_delete(b: &dyn Backend) {
    let s = b.open().await;
    s.append_events("cart-1", ExpectedVersion::NoStream, vec![ev("a", "T"), ev("b", "T")]).await.unwrap();
    s.delete_event_stream("cart-1", false).await.unwrap();
    let gone = s.read_stream("cart-1", forward(None, 10)).await.unwrap_err();
    assert_eq!(gone, EventError::Append(AppendError::StreamNotFound));
    assert_eq!(s.event_stream_version("cart-1").await.unwrap(), None);
    let e = s.append_events("cart-1", ExpectedVersion::Exact(1), vec![ev("c", "T")]).await.unwrap_err();
    assert!(wrong(None)(&e), "{e:?}");
    let again = s.append_events("cart-1", ExpectedVersion::NoStream, vec![ev("c", "T")]).await.unwrap();
    assert_eq!(again.first_version, 2, "versions go on after a soft delete");
    let r = s.read_stream("cart-1", forward(None, 10)).await.unwrap();
    assert_eq!((r.first_version, r.last_version), (2, 2));
    assert_eq!(r.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["c"]);
    assert_eq!(s.read_all(all(0, 10)).await.unwrap().events.len(), 3, "$all keeps deleted streams' events");
    let missing = s.delete_event_stream("never", false).await.unwrap_err();
    assert_eq!(missing, EventError::Append(AppendError::StreamNotFound));
    s.delete_event_stream("cart-1", true).await.unwrap();
    let e = s.append_events("cart-1", ExpectedVersion::Any, vec![ev("d", "T")]).await.unwrap_err();
    assert_eq!(e, EventError::Append(AppendError::StreamTombstoned));
    // All of it across a restart.
    b.close(s).await;
    let s = b.open().await;
    let e = s.append_events("cart-1", ExpectedVersion::NoStream, vec![ev("d", "T")]).await.unwrap_err();
    assert_eq!(e, EventError::Append(AppendError::StreamTombstoned));
    s.append_events("cart-2", ExpectedVersion::NoStream, vec![ev("a", "T")]).await.unwrap();
    s.delete_event_stream("cart-2", false).await.unwrap();
    b.close(s).await;
    let s = b.open().await;
    assert_eq!(s.event_stream_version("cart-2").await.unwrap(), None);
    let next = s.append_events("cart-2", ExpectedVersion::NoStream, vec![ev("a", "T")]).await.unwrap();
    assert_eq!((next.first_version, next.first_position), (1, 4), "an id hidden by a delete can be used again");
    b.close(s).await;
}

pub async fn events_survive_restart_with_versions_positions_and_dedup(b: &dyn Backend) {
    let s = b.open().await;
    let a = s.append_events("s-1", ExpectedVersion::NoStream, vec![ev("a", "T"), ev("b", "T")]).await.unwrap();
    s.append_events("s-2", ExpectedVersion::NoStream, vec![ev("x", "T")]).await.unwrap();
    b.close(s).await;
    let s = b.open().await;
    let retry = s.append_events("s-1", ExpectedVersion::NoStream, vec![ev("a", "T"), ev("b", "T")]).await.unwrap();
    assert_eq!((retry.first_position, retry.duplicate), (a.first_position, true));
    let c = s.append_events("s-1", ExpectedVersion::Exact(1), vec![ev("c", "T")]).await.unwrap();
    assert_eq!((c.first_version, c.first_position), (2, 3));
    let every = s.read_all(all(0, 10)).await.unwrap();
    assert_eq!(
        every.events.iter().map(|e| (e.stream_id.as_str(), e.version, e.position)).collect::<Vec<_>>(),
        [("s-1", 0, 0), ("s-1", 1, 1), ("s-2", 0, 2), ("s-1", 2, 3)]
    );
    b.close(s).await;
}

/// Many writers on one stream, each appending with the version it last saw: exactly one wins
/// each version, every loser is told the version that won, and the stream has every version
/// once.
pub async fn events_concurrent_writers_win_each_version_once(b: &dyn Backend) {
    const WRITERS: usize = 8;
    const APPENDS: usize = 15;
    let s = b.open().await;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let (mut known, mut won, mut lost) = (None::<u64>, Vec::new(), 0usize);
            let mut n = 0;
            while won.len() < APPENDS {
                let expected = known.map_or(ExpectedVersion::NoStream, ExpectedVersion::Exact);
                n += 1;
                match s.append_events("hot", expected, vec![ev(&format!("w{w}-{n}"), "T")]).await {
                    Ok(a) => {
                        assert_eq!(Some(a.first_version), known.map_or(Some(0), |k| k.checked_add(1)));
                        won.push(a.first_version);
                        known = Some(a.first_version);
                    }
                    Err(EventError::Append(AppendError::WrongExpectedVersion { actual, .. })) => {
                        assert!(actual > known, "the actual version is past what this writer knew");
                        known = actual;
                        lost += 1;
                    }
                    Err(e) => panic!("writer {w}: {e}"),
                }
            }
            (won, lost)
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        versions.extend(t.await.unwrap().0);
    }
    versions.sort_unstable();
    let expected: Vec<u64> = (0..(WRITERS * APPENDS) as u64).collect();
    assert_eq!(versions, expected, "every version won exactly once, none missing");
    let r = s.read_stream("hot", forward(None, 1000)).await.unwrap();
    assert_eq!(r.events.iter().map(|e| e.version).collect::<Vec<_>>(), expected);
    b.close(s).await;
}

/// Readers tail `$all` while writers append to many streams: every reader sees every event
/// once, at consecutive positions, in the same order, and never a position it later finds
/// filled differently.
pub async fn events_all_is_gapless_under_concurrent_appends(b: &dyn Backend) {
    let s = b.open().await;
    gapless_with(s.clone(), None).await;
    // With a backend of several nodes, half the writers append through another node.
    if let Some(other) = b.open_peer().await {
        gapless_with(s.clone(), Some(other.clone())).await;
        b.close(other).await;
    }
    b.close(s).await;
}

/// Writers on two nodes (where the backend has several) append to the same few streams at once:
/// appends gathered into one transaction lock several streams, so two nodes' transactions
/// must take them in one order or deadlock. Every append succeeds, and each stream's versions
/// are gapless, once each.
pub async fn events_shared_streams_from_two_nodes_never_deadlock(b: &dyn Backend) {
    const WRITERS: usize = 16;
    const APPENDS: usize = 40;
    const STREAMS: usize = 4;
    let s = b.open().await;
    let other = b.open_peer().await;
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let s = if w % 2 == 1 { other.clone().unwrap_or_else(|| s.clone()) } else { s.clone() };
        writers.push(tokio::spawn(async move {
            for i in 0..APPENDS {
                // The two nodes' writers walk the streams in opposite directions, so their
                // batches hold the same streams in opposite orders.
                let step = if w % 2 == 1 { STREAMS - 1 - i % STREAMS } else { i % STREAMS };
                let stream = format!("shared-{}", (step + w / 2) % STREAMS);
                s.append_events(&stream, ExpectedVersion::Any, vec![ev(&format!("s-{w}-{i}"), "T")]).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let mut total = 0;
    for n in 0..STREAMS {
        let r = s.read_stream(&format!("shared-{n}"), forward(None, 1000)).await.unwrap();
        let versions: Vec<u64> = r.events.iter().map(|e| e.version).collect();
        assert_eq!(versions, (0..r.events.len() as u64).collect::<Vec<_>>(), "shared-{n}: versions gapless");
        total += r.events.len();
    }
    assert_eq!(total, WRITERS * APPENDS, "every append landed once");
    if let Some(other) = other {
        b.close(other).await;
    }
    b.close(s).await;
}

/// The same append (same ids) sent by several callers at once, as retries racing their
/// original: one appends, every other is answered with the same versions and positions, and
/// the stream holds the events once.
pub async fn events_the_same_append_sent_at_once_lands_once(b: &dyn Backend) {
    const CALLERS: usize = 8;
    let s = b.open().await;
    let mut calls = Vec::new();
    for _ in 0..CALLERS {
        let s = s.clone();
        calls.push(tokio::spawn(async move {
            let events = vec![ev("again-a", "T"), ev("again-b", "T")];
            s.append_events("again", ExpectedVersion::NoStream, events).await.unwrap()
        }));
    }
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap());
    }
    assert_eq!(answers.iter().filter(|a| !a.duplicate).count(), 1, "one appended: {answers:?}");
    let place = |a: &crate::AppendedEvents| (a.first_version, a.last_version, a.first_position, a.last_position);
    assert!(answers.iter().all(|a| place(a) == place(&answers[0])), "every answer names the same events: {answers:?}");
    assert_eq!(place(&answers[0]).0, 0);
    let r = s.read_stream("again", forward(None, 10)).await.unwrap();
    assert_eq!(r.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["again-a", "again-b"]);
    b.close(s).await;
}

async fn gapless_with(s: Arc<dyn Store>, other: Option<Arc<dyn Store>>) {
    const WRITERS: usize = 6;
    const APPENDS: usize = 30;
    const READERS: usize = 3;
    let start = s.read_all(all(0, 1)).await.unwrap().head;
    let total = (WRITERS * APPENDS * 2) as u64;
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let s = s.clone();
        readers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut at = start;
            while (seen.len() as u64) < total {
                let got = s.read_all(AllRead { wait_ms: 2_000, ..all(at, 37) }).await.unwrap();
                for e in got.events {
                    assert_eq!(e.position, at, "no position skipped");
                    at += 1;
                    seen.push((e.stream_id, e.version, e.id));
                }
            }
            seen
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let s = if w % 2 == 1 { other.clone().unwrap_or_else(|| s.clone()) } else { s.clone() };
        writers.push(tokio::spawn(async move {
            for i in 0..APPENDS {
                // Names of this round only: a second round's same ids would be retries.
                let stream = format!("g{start}-{w}-{}", i % 3);
                let events = vec![ev(&format!("{start}-{w}-{i}-a"), "T"), ev(&format!("{start}-{w}-{i}-b"), "T")];
                let a = s.append_events(&stream, ExpectedVersion::Any, events).await.unwrap();
                assert_eq!(a.last_position, a.first_position + 1, "an append's positions are consecutive");
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let mut views = Vec::new();
    for r in readers {
        views.push(r.await.unwrap());
    }
    let truth: Vec<_> = s
        .read_all(all(start, 1000))
        .await
        .unwrap()
        .events
        .into_iter()
        .map(|e| (e.stream_id, e.version, e.id))
        .collect();
    assert_eq!(truth.len() as u64, total);
    for v in &views {
        assert_eq!(v, &truth, "every reader saw the same order");
    }
    let mut ids: Vec<&String> = truth.iter().map(|(_, _, id)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as u64, total, "every event once");
}

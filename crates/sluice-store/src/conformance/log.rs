//! Conformance of [`LogStore`](crate::LogStore): streams, appends (partitioner, round robin,
//! dedup, expectations), reads by offset and time with long polls, retention, offsets-mode and
//! shared-mode groups, dead-lettering, and restarts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sluice_core::QueueAttributes;
use sluice_core::stream::partitioner::partition_for_key;
use sluice_core::stream::{NewRecord, RecordError, StartAt, StreamConfig, StreamConfigPatch};

use super::{Backend, queue, recv};
use crate::{Expectation, FetchRequest, GroupConfig, GroupMode, LogError, ReadFrom, ReadRequest, SeekTo, Store};

fn rec(body: &str) -> NewRecord {
    NewRecord { body: body.as_bytes().to_vec(), ..Default::default() }
}

fn keyed(key: &str, body: &str) -> NewRecord {
    NewRecord { key: Some(key.as_bytes().to_vec()), ..rec(body) }
}

fn at(partition: u32, body: &str) -> NewRecord {
    NewRecord { partition: Some(partition), ..rec(body) }
}

fn from(partition: u32, offset: u64, max: u32) -> ReadRequest {
    ReadRequest { partition, from: ReadFrom::Offset(offset), max, wait_ms: 0 }
}

fn bodies(records: &[sluice_core::stream::Record]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect()
}

async fn stream(s: &dyn Store, name: &str, config: StreamConfig) {
    s.create_stream(name, config).await.expect("create stream");
}

async fn append_all(s: &dyn Store, name: &str, records: Vec<NewRecord>) -> Vec<crate::Appended> {
    s.append(name, records, None).await.expect("append").into_iter().map(|r| r.expect("record accepted")).collect()
}

fn member(m: &str, max: u32, wait_ms: u64) -> FetchRequest {
    FetchRequest { member: m.to_owned(), max, wait_ms }
}

pub async fn streams_create_get_list_update_delete(b: &dyn Backend) {
    let s = b.open().await;
    let config = StreamConfig { partitions: 3, ..Default::default() };
    let (view, created) = s.create_stream("orders", config.clone()).await.unwrap();
    assert!(created);
    assert_eq!((view.name.as_str(), view.partitions.len()), ("orders", 3));
    assert!(view.partitions.iter().all(|p| p.first_offset == 0 && p.next_offset == 0 && p.bytes == 0));
    let (_, again) = s.create_stream("orders", config.clone()).await.unwrap();
    assert!(!again, "the same settings again answer the existing stream");
    let other = StreamConfig { partitions: 4, ..Default::default() };
    assert_eq!(s.create_stream("orders", other).await.unwrap_err(), LogError::StreamExists("orders".into()));
    stream(s.as_ref(), "audit", StreamConfig::default()).await;
    let names: Vec<String> = s.list_streams("", None, 10).await.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(names, ["audit", "orders"]);
    let after: Vec<String> = s.list_streams("", Some("audit"), 10).await.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(after, ["orders"]);
    let patch = StreamConfigPatch { partitions: Some(5), retention_ms: Some(60_000), ..Default::default() };
    let view = s.update_stream("orders", patch).await.unwrap();
    assert_eq!((view.partitions.len(), view.config.retention_ms), (5, 60_000));
    let shrink = StreamConfigPatch { partitions: Some(2), ..Default::default() };
    assert!(matches!(s.update_stream("orders", shrink).await, Err(LogError::Invalid(_))));
    s.delete_stream("orders").await.unwrap();
    assert_eq!(s.get_stream("orders").await.unwrap_err(), LogError::StreamNotFound("orders".into()));
    assert_eq!(s.delete_stream("orders").await.unwrap_err(), LogError::StreamNotFound("orders".into()));
    assert!(matches!(s.create_stream("bad name", StreamConfig::default()).await, Err(LogError::Invalid(_))));
    let zero = StreamConfig { partitions: 0, ..Default::default() };
    assert!(matches!(s.create_stream("zero", zero).await, Err(LogError::Invalid(_))));
    b.close(s).await;
}

pub async fn appends_get_gapless_offsets_by_partition_key_and_round_robin(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 3, ..Default::default() }).await;
    let placed = append_all(s.as_ref(), "s", vec![at(1, "a"), at(1, "b"), at(2, "c"), at(1, "d")]).await;
    let places: Vec<(u32, u64)> = placed.iter().map(|a| (a.partition, a.offset)).collect();
    assert_eq!(places, [(1, 0), (1, 1), (2, 0), (1, 2)]);
    let keys = ["user-1", "user-2", "order-77", "user-1"];
    let placed = append_all(s.as_ref(), "s", keys.iter().map(|k| keyed(k, k)).collect()).await;
    for (k, a) in keys.iter().zip(&placed) {
        assert_eq!(a.partition, partition_for_key(k.as_bytes(), 3), "{k} lands where a Kafka client puts it");
    }
    assert_eq!(placed[0].partition, placed[3].partition);
    // Round robin spreads unkeyed records over every partition.
    let placed = append_all(s.as_ref(), "s", (0..6).map(|i| rec(&format!("r{i}"))).collect()).await;
    let mut per: BTreeMap<u32, usize> = BTreeMap::new();
    for a in &placed {
        *per.entry(a.partition).or_default() += 1;
    }
    assert_eq!(per.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    // Every partition's offsets are 0..n with nothing missing, timestamps never going back.
    let view = s.get_stream("s").await.unwrap();
    for (p, part) in view.partitions.iter().enumerate() {
        let got = s.read("s", from(p as u32, 0, 100)).await.unwrap();
        let offsets: Vec<u64> = got.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (0..part.next_offset).collect::<Vec<_>>(), "partition {p}");
        assert!(got.records.windows(2).all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
        assert!(got.records.iter().all(|r| r.partition == p as u32));
        assert!(part.bytes > 0);
    }
    let got = s.read("s", from(1, 0, 100)).await.unwrap();
    assert_eq!(&bodies(&got.records)[..3], ["a", "b", "d"], "append order within a partition");
    b.close(s).await;
}

pub async fn reads_from_offsets_and_times_keep_every_field(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig::default()).await;
    let full = NewRecord {
        key: Some(b"k\x00\xff".to_vec()),
        partition: Some(0),
        body: vec![0, 159, 146, 150],
        body_binary: true,
        headers: BTreeMap::from([("trace".into(), "t-1".into()), ("x".into(), String::new())]),
        r#type: Some("order.created".into()),
        correlation_id: Some("c-9".into()),
        dedup_id: None,
    };
    let first = append_all(s.as_ref(), "s", vec![full.clone(), rec("second")]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let later = append_all(s.as_ref(), "s", vec![rec("third"), rec("fourth")]).await;
    let got = s.read("s", from(0, 0, 10)).await.unwrap();
    assert_eq!((got.first_offset, got.next_offset), (0, 4));
    let r = &got.records[0];
    assert_eq!((r.offset, r.timestamp_ms), (0, first[0].timestamp_ms));
    assert_eq!((&r.key, &r.body, r.body_binary), (&full.key, &full.body, true), "byte-exact");
    assert_eq!((&r.headers, &r.r#type, &r.correlation_id), (&full.headers, &full.r#type, &full.correlation_id));
    assert_eq!(bodies(&s.read("s", from(0, 2, 10)).await.unwrap().records), ["third", "fourth"], "inclusive");
    assert_eq!(bodies(&s.read("s", from(0, 1, 2)).await.unwrap().records), ["second", "third"], "at most max");
    let by_time = ReadRequest { partition: 0, from: ReadFrom::Time(later[0].timestamp_ms), max: 10, wait_ms: 0 };
    let got = s.read("s", by_time).await.unwrap();
    assert_eq!(got.records.first().map(|r| r.offset), Some(2), "the first record at or after the time");
    let future = ReadRequest { from: ReadFrom::Time(later[1].timestamp_ms + 60_000), ..by_time };
    assert!(s.read("s", future).await.unwrap().records.is_empty());
    assert!(s.read("s", from(0, 4, 10)).await.unwrap().records.is_empty(), "the end reads nothing");
    assert_eq!(
        s.read("s", from(3, 0, 10)).await.unwrap_err(),
        LogError::NoSuchPartition { partition: 3, partitions: 1 }
    );
    assert_eq!(s.read("none", from(0, 0, 10)).await.unwrap_err(), LogError::StreamNotFound("none".into()));
    assert!(matches!(s.read("s", from(0, 0, 0)).await, Err(LogError::Invalid(_))));
    b.close(s).await;
}

pub async fn read_long_polls_wake_on_append_and_time_out(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig::default()).await;
    let started = Instant::now();
    let empty = s.read("s", ReadRequest { wait_ms: 200, ..from(0, 0, 10) }).await.unwrap();
    assert!(empty.records.is_empty() && started.elapsed() >= Duration::from_millis(190));
    let reader = {
        let s = s.clone();
        tokio::spawn(async move { s.read("s", ReadRequest { wait_ms: 10_000, ..from(0, 0, 10) }).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    append_all(s.as_ref(), "s", vec![rec("wake")]).await;
    let got = reader.await.unwrap().unwrap();
    assert_eq!(bodies(&got.records), ["wake"]);
    assert!(started.elapsed() < Duration::from_secs(5), "woken by the append, not the deadline");
    b.close(s).await;
}

pub async fn dedup_ids_return_the_original_place_across_restart(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 2, ..Default::default() }).await;
    let with = |id: &str, body: &str| NewRecord { dedup_id: Some(id.into()), ..rec(body) };
    let first = append_all(s.as_ref(), "s", vec![with("d1", "one"), with("d2", "two")]).await;
    assert!(first.iter().all(|a| !a.duplicate));
    let again = append_all(s.as_ref(), "s", vec![with("d1", "one again"), with("d3", "three")]).await;
    assert!(again[0].duplicate && !again[1].duplicate);
    assert_eq!((again[0].partition, again[0].offset), (first[0].partition, first[0].offset));
    b.close(s).await;
    let s = b.open().await;
    let after = append_all(s.as_ref(), "s", vec![with("d2", "two again")]).await;
    assert!(after[0].duplicate, "dedup ids survive a restart");
    assert_eq!((after[0].partition, after[0].offset), (first[1].partition, first[1].offset));
    let view = s.get_stream("s").await.unwrap();
    assert_eq!(view.partitions.iter().map(|p| p.next_offset).sum::<u64>(), 3, "duplicates appended nothing");
    b.close(s).await;
}

pub async fn streams_records_and_groups_survive_restart(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 2, ..Default::default() }).await;
    append_all(s.as_ref(), "s", (0..10).map(|i| at(i % 2, &format!("r{i}"))).collect()).await;
    s.create_group("s", "g", GroupConfig::default()).await.unwrap();
    let f = s.fetch("s", "g", member("m", 100, 0)).await.unwrap();
    assert_eq!(f.records.len(), 10);
    let generation = f.generation.expect("offsets groups have a generation");
    s.commit("s", "g", "m", generation, BTreeMap::from([(0, 3), (1, 5)])).await.unwrap();
    b.close(s).await;

    let s = b.open().await;
    let view = s.get_stream("s").await.unwrap();
    assert_eq!(view.partitions.iter().map(|p| p.next_offset).collect::<Vec<_>>(), [5, 5]);
    let g = &view.groups[0];
    assert_eq!(g.partitions.iter().map(|p| (p.committed, p.lag)).collect::<Vec<_>>(), [(3, 2), (5, 0)]);
    // Nothing below the committed offsets comes again. Whether the records fetched but not
    // committed do depends on the backend: the embedded store's positions go back to the
    // committed offsets at a restart; PostgreSQL's are shared by every node and survive one.
    let f = s.fetch("s", "g", member("m", 100, 0)).await.unwrap();
    let got: Vec<(u32, u64)> = f.records.iter().map(|r| (r.record.partition, r.record.offset)).collect();
    assert!(got.is_empty() || got == [(0, 3), (0, 4)], "{got:?}");
    // Offsets go on where they were: never reused.
    let placed = append_all(s.as_ref(), "s", vec![at(0, "after")]).await;
    assert_eq!(placed[0].offset, 5);
    assert_eq!(bodies(&s.read("s", from(0, 4, 10)).await.unwrap().records), ["r8", "after"]);
    b.close(s).await;
}

pub async fn offsets_groups_share_partitions_commit_forward_and_seek(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 4, ..Default::default() }).await;
    append_all(s.as_ref(), "s", (0..8).map(|i| at(i % 4, &format!("r{i}"))).collect()).await;
    let config = GroupConfig { session_timeout_ms: 1_000, ..Default::default() };
    let (view, created) = s.create_group("s", "g", config.clone()).await.unwrap();
    assert!(created && view.partitions.iter().all(|p| p.committed == 0 && p.lag == 2));
    assert!(!s.create_group("s", "g", config.clone()).await.unwrap().1);
    let other = GroupConfig { session_timeout_ms: 2_000, ..config.clone() };
    assert!(matches!(s.create_group("s", "g", other).await, Err(LogError::GroupExists { .. })));
    let a = s.fetch("s", "g", member("a", 100, 0)).await.unwrap();
    assert_eq!((a.partitions.len(), a.records.len()), (4, 8), "a lone member reads everything");
    let b_ = s.fetch("s", "g", member("b", 100, 0)).await.unwrap();
    assert_eq!(b_.partitions.len(), 2, "a second member takes half");
    let a2 = s.fetch("s", "g", member("a", 100, 0)).await.unwrap();
    assert_eq!(a2.partitions.len(), 2);
    assert!(a2.partitions.iter().all(|p| !b_.partitions.contains(p)), "no partition is owned twice");
    let (pa, pb) = (a2.partitions[0], b_.partitions[0]);
    let gen_a = a2.generation.unwrap();
    s.commit("s", "g", "a", gen_a, BTreeMap::from([(pa, 2)])).await.unwrap();
    let stale = s.commit("s", "g", "a", gen_a, BTreeMap::from([(pb, 1)])).await.unwrap_err();
    assert!(
        matches!(stale, LogError::Commit(sluice_core::stream::group::CommitError::StaleGeneration { .. })),
        "{stale:?}"
    );
    let back = s.commit("s", "g", "a", gen_a, BTreeMap::from([(pa, 1)])).await.unwrap_err();
    assert!(matches!(back, LogError::Commit(sluice_core::stream::group::CommitError::Regression { .. })), "{back:?}");
    // A seek is the way back; it sets the committed offset.
    assert_eq!(s.seek("s", "g", pa, SeekTo::Offset(0)).await.unwrap(), 0);
    let view = s.get_group("s", "g").await.unwrap();
    assert_eq!(view.partitions[pa as usize].committed, 0);
    let seek_far = s.seek("s", "g", pa, SeekTo::Offset(1_000)).await.unwrap();
    assert_eq!(seek_far, 2, "a seek past the end stops at the end");
    // b goes silent: after its session timeout, a owns everything again.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let a3 = s.fetch("s", "g", member("a", 100, 0)).await.unwrap();
    assert_eq!(a3.partitions.len(), 4);
    assert!(a3.generation.unwrap() > gen_a);
    let late = s.commit("s", "g", "b", b_.generation.unwrap(), BTreeMap::from([(pb, 1)])).await.unwrap_err();
    assert!(matches!(late, LogError::Commit(_)), "a silent member's commit is refused: {late:?}");
    assert!(matches!(s.ack_shared("s", "g", vec!["x".into()]).await, Err(LogError::WrongMode { .. })));
    let empty = s.fetch("s", "none", member("a", 1, 0)).await.unwrap_err();
    assert!(matches!(empty, LogError::GroupNotFound { .. }));
    // Long poll: a fetch at the end waits for an append.
    let target = a3.partitions[0];
    let view = s.get_group("s", "g").await.unwrap();
    let end = s.get_stream("s").await.unwrap().partitions[target as usize].next_offset;
    assert!(view.partitions[target as usize].committed <= end);
    let fetch = {
        let s = s.clone();
        tokio::spawn(async move { s.fetch("s", "g", member("a", 100, 10_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    append_all(s.as_ref(), "s", vec![at(target, "late")]).await;
    let got = fetch.await.unwrap().unwrap();
    assert_eq!(bodies(&got.records.into_iter().map(|r| r.record).collect::<Vec<_>>()), ["late"]);
    s.delete_group("s", "g").await.unwrap();
    assert!(matches!(s.get_group("s", "g").await, Err(LogError::GroupNotFound { .. })));
    b.close(s).await;
}

pub async fn shared_groups_keep_key_order_and_dead_letter_exhausted_records(b: &dyn Backend) {
    let s = b.open().await;
    queue(s.as_ref(), "dlq", QueueAttributes::default()).await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 1, ..Default::default() }).await;
    let missing =
        GroupConfig { mode: GroupMode::Shared, dead_letter_queue: Some("nowhere".into()), ..Default::default() };
    assert!(matches!(s.create_group("s", "x", missing).await, Err(LogError::DeadLetterQueueNotFound(_))));
    let config = GroupConfig {
        mode: GroupMode::Shared,
        key_ordered: true,
        ack_timeout_ms: 300,
        max_deliveries: 2,
        dead_letter_queue: Some("dlq".into()),
        start: StartAt::Earliest,
        ..Default::default()
    };
    s.create_group("s", "g", config).await.unwrap();
    append_all(s.as_ref(), "s", vec![keyed("a", "a1"), keyed("b", "b1"), keyed("a", "a2"), rec("free")]).await;
    let f = s.fetch("s", "g", member("m1", 10, 0)).await.unwrap();
    let got: Vec<String> = f.records.iter().map(|r| String::from_utf8_lossy(&r.record.body).into_owned()).collect();
    assert_eq!(got, ["a1", "b1", "free"], "a2 waits behind a1");
    assert!(f.records.iter().all(|r| r.receipt.is_some() && r.deliveries == Some(1)));
    let receipt = |body: &str| {
        f.records.iter().find(|r| r.record.body == body.as_bytes()).and_then(|r| r.receipt.clone()).unwrap()
    };
    assert!(s.fetch("s", "g", member("m2", 10, 0)).await.unwrap().records.is_empty(), "nothing else may go");
    assert_eq!(s.ack_shared("s", "g", vec![receipt("a1"), "junk".into()]).await.unwrap().len(), 2);
    let f2 = s.fetch("s", "g", member("m2", 10, 0)).await.unwrap();
    assert_eq!(f2.records.len(), 1);
    assert_eq!(f2.records[0].record.body, b"a2");
    // a2 is done, so b1 is the only record that can time out into the dead-letter queue.
    let a2 = f2.records[0].receipt.clone().unwrap();
    assert!(s.ack_shared("s", "g", vec![a2]).await.unwrap()[0].is_ok(), "a2 is acknowledged");
    // b1 is released (not a failure), then times out twice: dead-lettered with its last error.
    let released = s.release_shared("s", "g", vec![receipt("b1")], None).await.unwrap();
    assert_eq!(released, vec![Ok(())]);
    let again = s.ack_shared("s", "g", vec![receipt("b1")]).await.unwrap();
    assert!(again[0].is_err(), "a released delivery's receipt is stale");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen_b1 = 0;
    loop {
        assert!(Instant::now() < deadline, "b1 never reached the dead-letter queue");
        s.sweep_streams().await.unwrap();
        let f = s.fetch("s", "g", member("m1", 10, 0)).await.unwrap();
        seen_b1 += f.records.iter().filter(|r| r.record.body == b"b1").count();
        let dead = s.receive("dlq", recv(10, 0, None)).await.unwrap();
        if let Some(m) = dead.first() {
            assert_eq!(m.message.content.body, b"b1");
            let attribute = |name: &str| match m.message.content.attributes.get(name).map(|a| &a.value) {
                Some(sluice_core::message::AttributeData::Text(t)) => t.clone(),
                other => panic!("attribute {name}: {other:?}"),
            };
            assert!(attribute("sluice.last_error").contains("ack timeout"), "{:?}", m.message.content.attributes);
            assert_eq!((attribute("sluice.stream"), attribute("sluice.offset")), ("s".to_string(), "1".to_string()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(seen_b1 >= 1, "b1 was handed out again after its release");
    let view = s.get_group("s", "g").await.unwrap();
    assert!(view.in_flight <= 2);
    b.close(s).await;
}

pub async fn retention_removes_old_records_by_size_and_age(b: &dyn Backend) {
    let s = b.open().await;
    let sized = StreamConfig { segment_bytes: 4_096, retention_bytes: Some(8_192), ..Default::default() };
    stream(s.as_ref(), "sized", sized).await;
    for _ in 0..8 {
        append_all(s.as_ref(), "sized", (0..5).map(|_| rec(&"x".repeat(500))).collect()).await;
    }
    s.sweep_streams().await.unwrap();
    let p = s.get_stream("sized").await.unwrap().partitions[0];
    assert_eq!(p.next_offset, 40, "retention never moves offsets");
    assert!(p.first_offset > 0, "old records were removed: {p:?}");
    assert!(p.bytes <= 8_192 + 4_096 + 1_024, "what is kept stays near the limit: {p:?}");
    let below = s.read("sized", from(0, 0, 10)).await.unwrap_err();
    assert_eq!(
        below,
        LogError::OffsetOutOfRange { partition: 0, offset: 0, first_offset: p.first_offset, next_offset: 40 }
    );
    let kept = s.read("sized", from(0, p.first_offset, 1_000)).await.unwrap();
    assert_eq!(kept.records.len() as u64, 40 - p.first_offset, "everything after the first offset is kept");

    let aged = StreamConfig { retention_ms: 1_000, segment_bytes: 4_096, ..Default::default() };
    stream(s.as_ref(), "aged", aged).await;
    append_all(s.as_ref(), "aged", (0..20).map(|_| rec(&"y".repeat(400))).collect()).await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    append_all(s.as_ref(), "aged", vec![rec("fresh")]).await;
    s.sweep_streams().await.unwrap();
    let p = s.get_stream("aged").await.unwrap().partitions[0];
    assert_eq!((p.first_offset, p.next_offset), (20, 21), "every expired record is gone, the fresh one kept");
    assert_eq!(bodies(&s.read("aged", from(0, 20, 10)).await.unwrap().records), ["fresh"]);
    let placed = append_all(s.as_ref(), "aged", vec![rec("next")]).await;
    assert_eq!(placed[0].offset, 21);
    b.close(s).await;
}

pub async fn bad_records_fail_alone_and_expectations_change_nothing(b: &dyn Backend) {
    let s = b.open().await;
    stream(s.as_ref(), "s", StreamConfig { partitions: 2, record_bytes_max: 100, ..Default::default() }).await;
    let results = s
        .append("s", vec![rec("ok"), NewRecord { body: vec![1; 101], ..Default::default() }, at(5, "far")], None)
        .await
        .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(results[1], Err(RecordError::TooLarge { size_bytes: 101, max_bytes: 100 }));
    assert_eq!(results[2], Err(RecordError::NoSuchPartition { partition: 5, partitions: 2 }));
    assert!(matches!(s.append("none", vec![rec("x")], None).await, Err(LogError::StreamNotFound(_))));
    assert!(matches!(s.append("s", vec![], None).await, Err(LogError::Invalid(_))));
    let p0 = s.get_stream("s").await.unwrap().partitions[0].next_offset;
    let expect = Expectation { partition: 0, next_offset: p0 + 7 };
    let failed = s.append("s", vec![rec("e1"), rec("e2")], Some(expect)).await.unwrap_err();
    assert_eq!(failed, LogError::ExpectationFailed { partition: 0, expected: p0 + 7, actual: p0 });
    assert_eq!(s.get_stream("s").await.unwrap().partitions[0].next_offset, p0, "nothing appended");
    let ok =
        s.append("s", vec![rec("e1"), rec("e2")], Some(Expectation { partition: 0, next_offset: p0 })).await.unwrap();
    let offsets: Vec<(u32, u64)> = ok.iter().map(|r| r.as_ref().map(|a| (a.partition, a.offset)).unwrap()).collect();
    assert_eq!(offsets, [(0, p0), (0, p0 + 1)], "an expectation puts the whole append on its partition");
    b.close(s).await;
}

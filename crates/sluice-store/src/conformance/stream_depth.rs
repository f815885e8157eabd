//! Conformance of a stream's depth limits (`max_depth_messages`, `max_depth_bytes`): appends
//! past them are refused in their place (`StreamFull`), duplicates are still answered, a
//! refused record's dedup id is not kept, a commit into a full stream is refused whole, the
//! bounds follow updates, and appends from several nodes at once never pass them.

use std::sync::Arc;

use sluice_core::overflow::Depth;
use sluice_core::stream::{NewRecord, RecordError, StreamConfig, StreamConfigPatch};

use super::Backend;
use crate::{Conflict, Store, Write};

fn record(body: &str, dedup_id: Option<&str>) -> NewRecord {
    NewRecord { body: body.as_bytes().to_vec(), dedup_id: dedup_id.map(str::to_owned), ..Default::default() }
}

/// What the stream keeps, over every partition, as its view reports it.
async fn depth(s: &dyn Store, name: &str) -> Depth {
    let view = s.get_stream(name).await.expect("stream");
    Depth {
        messages: view.partitions.iter().map(|p| p.next_offset - p.first_offset).sum(),
        bytes: view.partitions.iter().map(|p| p.bytes).sum(),
    }
}

pub async fn stream_depth_limits_refuse_appends_in_place(b: &dyn Backend) {
    let s = b.open().await;
    let config = StreamConfig { partitions: 2, max_depth_messages: Some(3), ..Default::default() };
    s.create_stream("bounded", config).await.unwrap();
    let batch: Vec<NewRecord> = (0..5).map(|i| record(&format!("r{i}"), Some(&format!("d{i}")))).collect();
    let results = s.append("bounded", batch, None).await.unwrap();
    assert!(results[..3].iter().all(Result::is_ok), "{results:?}");
    for refused in &results[3..] {
        assert!(
            matches!(
                refused,
                Err(RecordError::StreamFull {
                    depth: Depth { messages: 3, .. },
                    max_messages: Some(3),
                    max_bytes: None
                })
            ),
            "{refused:?}"
        );
    }
    assert_eq!(depth(&*s, "bounded").await.messages, 3);
    // A retried append of a kept record is still a duplicate with its place, full or not.
    let again = s.append("bounded", vec![record("r0", Some("d0"))], None).await.unwrap();
    assert_eq!(again[0].as_ref().map(|a| (a.duplicate, a.offset)), Ok((true, results[0].as_ref().unwrap().offset)));
    // A refused record's id was not kept: once there is room, its retry is appended.
    let patch = StreamConfigPatch { max_depth_messages: Some(Some(4)), ..Default::default() };
    assert_eq!(s.update_stream("bounded", patch).await.unwrap().config.max_depth_messages, Some(4));
    let retried = s.append("bounded", vec![record("r3", Some("d3")), record("r4", Some("d4"))], None).await.unwrap();
    assert!(retried[0].as_ref().is_ok_and(|a| !a.duplicate), "{retried:?}");
    assert!(matches!(retried[1], Err(RecordError::StreamFull { .. })));
    // A commit into the full stream is refused whole.
    let writes = vec![
        Write::PutRecord { kind: "test".into(), key: "k".into(), value: b"v".to_vec() },
        Write::Append { stream: "bounded".into(), records: vec![record("late", None)] },
    ];
    let refused = s.commit_all(writes).await.unwrap().expect_err("the stream is full");
    assert_eq!(refused.write, 1);
    assert!(matches!(refused.conflict, Conflict::RecordRefused { record: 0, error: RecordError::StreamFull { .. } }));
    assert!(s.get_record("test", "k").await.unwrap().is_none(), "a refused commit changes nothing");
    // Without the bound, appends go on.
    let patch = StreamConfigPatch { max_depth_messages: Some(None), ..Default::default() };
    s.update_stream("bounded", patch).await.unwrap();
    assert!(s.append("bounded", vec![record("free", None)], None).await.unwrap()[0].is_ok());
    assert_eq!(depth(&*s, "bounded").await.messages, 5);

    // A byte bound: records of 100 bytes until the stream holds what fits, never more.
    let config = StreamConfig { record_bytes_max: 100, max_depth_bytes: Some(100 + 4_096), ..Default::default() };
    s.create_stream("bytes", config).await.unwrap();
    let mut kept = 0;
    loop {
        let got = s.append("bytes", vec![record(&"x".repeat(100), None)], None).await.unwrap();
        match &got[0] {
            Ok(_) => kept += 1,
            Err(RecordError::StreamFull { depth, max_bytes: Some(4_196), .. }) => {
                assert_eq!(*depth, self::depth(&*s, "bytes").await, "the refusal tells the depth");
                break;
            }
            other => panic!("{other:?}"),
        }
        assert!(kept < 100, "the byte bound never refused");
    }
    let held = depth(&*s, "bytes").await;
    assert!(held.bytes <= 4_196, "{held:?}");
    assert!(held.bytes + 200 > 4_196, "refused while a record still fitted: {held:?}");
    assert_eq!(held.messages, kept);
    b.close(s).await;
}

/// Appenders on every node of the backend (one, or two over one database) race into a bounded
/// stream: exactly its bound is kept, and every other record was answered as refused.
pub async fn stream_depth_limits_hold_under_concurrent_appends(b: &dyn Backend) {
    const LIMIT: u64 = 40;
    let s = b.open().await;
    let config = StreamConfig { partitions: 3, max_depth_messages: Some(LIMIT), ..Default::default() };
    s.create_stream("raced", config).await.unwrap();
    let peer = b.open_peer().await;
    let nodes: Vec<Arc<dyn Store>> = [Some(s.clone()), peer.clone()].into_iter().flatten().collect();
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for t in 0..3 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let (mut kept, mut refused) = (0u64, 0u64);
                for batch in 0..6 {
                    let records = (0..5).map(|i| record(&format!("{n}-{t}-{batch}-{i}"), None)).collect();
                    for result in node.append("raced", records, None).await.unwrap() {
                        match result {
                            Ok(_) => kept += 1,
                            Err(RecordError::StreamFull { depth, .. }) => {
                                assert!(depth.messages <= LIMIT, "{depth:?}");
                                refused += 1;
                            }
                            Err(other) => panic!("{other}"),
                        }
                    }
                }
                (kept, refused)
            }));
        }
    }
    let (mut kept, mut refused) = (0, 0);
    for task in tasks {
        let (k, r) = task.await.unwrap();
        kept += k;
        refused += r;
    }
    assert_eq!(kept, LIMIT, "exactly the bound is kept");
    assert_eq!(kept + refused, nodes.len() as u64 * 3 * 6 * 5, "every record was answered");
    assert_eq!(depth(&*s, "raced").await.messages, LIMIT);
    if let Some(peer) = peer {
        b.close(peer).await;
    }
    b.close(s).await;
}

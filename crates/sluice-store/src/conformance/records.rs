//! Conformance of [`RecordStore`](crate::RecordStore): insert, put, compare-and-swap, get,
//! list in key order, delete, restarts.

use sluice_core::{BrokerError, QueueAttributes};

use super::{Backend, queue};
use crate::{Record, StoreError};

fn is_invalid<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Broker(BrokerError::Invalid(_))))
}

pub async fn records_insert_put_replace_get_delete(b: &dyn Backend) {
    let s = b.open().await;
    assert_eq!(s.get_record("topic", "t").await.unwrap(), None);
    assert!(s.insert_record("topic", "t", b"one".to_vec()).await.unwrap(), "created");
    assert!(!s.insert_record("topic", "t", b"two".to_vec()).await.unwrap(), "an existing record is kept");
    assert_eq!(s.get_record("topic", "t").await.unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(s.get_record("other", "t").await.unwrap(), None, "kinds are separate");
    s.put_record("topic", "t", b"three".to_vec()).await.unwrap();
    assert_eq!(s.get_record("topic", "t").await.unwrap().as_deref(), Some(&b"three"[..]));
    assert!(!s.replace_record("topic", "t", b"one".to_vec(), b"four".to_vec()).await.unwrap(), "stale expectation");
    assert_eq!(s.get_record("topic", "t").await.unwrap().as_deref(), Some(&b"three"[..]));
    assert!(s.replace_record("topic", "t", b"three".to_vec(), b"four".to_vec()).await.unwrap());
    assert_eq!(s.get_record("topic", "t").await.unwrap().as_deref(), Some(&b"four"[..]));
    assert!(!s.replace_record("topic", "none", Vec::new(), b"x".to_vec()).await.unwrap(), "nothing to replace");
    assert_eq!(s.get_record("topic", "none").await.unwrap(), None);
    s.put_record("topic", "empty", Vec::new()).await.unwrap();
    assert_eq!(s.get_record("topic", "empty").await.unwrap(), Some(Vec::new()), "an empty value is a value");
    assert!(s.delete_record("topic", "t").await.unwrap());
    assert!(!s.delete_record("topic", "t").await.unwrap());
    assert_eq!(s.get_record("topic", "t").await.unwrap(), None);
    assert!(s.insert_record("topic", "t", b"again".to_vec()).await.unwrap(), "a deleted key can be reused");
    // Bad kinds, keys and values change nothing.
    assert!(is_invalid(s.put_record("Topic", "t", Vec::new()).await));
    assert!(is_invalid(s.put_record("topic", "", Vec::new()).await));
    assert!(is_invalid(s.insert_record("topic", "a\0b", Vec::new()).await));
    let huge = vec![7u8; crate::RECORD_VALUE_BYTES_MAX + 1];
    assert!(is_invalid(s.put_record("topic", "t", huge).await));
    assert!(is_invalid(s.get_record("topic", &"k".repeat(crate::RECORD_KEY_LEN_MAX + 1)).await));
    assert_eq!(s.get_record("topic", "t").await.unwrap().as_deref(), Some(&b"again"[..]));
    b.close(s).await;
}

pub async fn records_list_by_kind_prefix_and_key_order(b: &dyn Backend) {
    let s = b.open().await;
    // Byte order: upper case before lower case, a key before its extensions, UTF-8 last.
    let keys = ["b", "a/2", "a", "B", "a/10", "é", "a/1"];
    for (i, key) in keys.iter().enumerate() {
        s.put_record("sub", key, vec![i as u8]).await.unwrap();
    }
    s.put_record("subx", "a", b"other kind".to_vec()).await.unwrap();
    let names = |records: Vec<Record>| records.into_iter().map(|r| r.key).collect::<Vec<_>>();
    assert_eq!(names(s.list_records("sub", "", None, 100).await.unwrap()), ["B", "a", "a/1", "a/10", "a/2", "b", "é"]);
    assert_eq!(names(s.list_records("sub", "a/", None, 100).await.unwrap()), ["a/1", "a/10", "a/2"]);
    assert_eq!(names(s.list_records("sub", "a", Some("a/1"), 2).await.unwrap()), ["a/10", "a/2"]);
    assert_eq!(names(s.list_records("sub", "", Some("b"), 100).await.unwrap()), ["é"]);
    assert_eq!(names(s.list_records("sub", "zz", None, 100).await.unwrap()), Vec::<String>::new());
    let first = s.list_records("sub", "", None, 1).await.unwrap();
    assert_eq!(first, vec![Record { key: "B".into(), value: vec![3] }]);
    assert!(is_invalid(s.list_records("sub", "", None, crate::RECORD_LIST_LIMIT_MAX + 1).await));
    assert!(s.delete_record("sub", "a/10").await.unwrap());
    assert_eq!(names(s.list_records("sub", "a/", None, 100).await.unwrap()), ["a/1", "a/2"]);
    b.close(s).await;
}

pub async fn records_survive_restart(b: &dyn Backend) {
    let s = b.open().await;
    s.put_record("topic", "kept", b"v1".to_vec()).await.unwrap();
    s.put_record("topic", "replaced", b"old".to_vec()).await.unwrap();
    assert!(s.replace_record("topic", "replaced", b"old".to_vec(), b"new".to_vec()).await.unwrap());
    s.put_record("topic", "deleted", b"x".to_vec()).await.unwrap();
    assert!(s.delete_record("topic", "deleted").await.unwrap());
    // Records and queues share the durable path: both survive together.
    queue(s.as_ref(), "q", QueueAttributes::default()).await;
    b.close(s).await;

    let s = b.open().await;
    let all = s.list_records("topic", "", None, 100).await.unwrap();
    assert_eq!(
        all,
        vec![
            Record { key: "kept".into(), value: b"v1".to_vec() },
            Record { key: "replaced".into(), value: b"new".to_vec() }
        ]
    );
    assert_eq!(s.get_record("topic", "deleted").await.unwrap(), None);
    assert!(s.get_queue("q").await.is_ok());
    b.close(s).await;
}

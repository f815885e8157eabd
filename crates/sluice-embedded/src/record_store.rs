//! [`RecordStore`] over the writer thread: records live in memory (`records.rs`) and are written
//! with the writer's batches.

use async_trait::async_trait;
use sluice_store::{Record, RecordStore, StoreError, validate_record_key, validate_record_list, validate_record_value};

use crate::EmbeddedStore;

#[async_trait]
impl RecordStore for EmbeddedStore {
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            if e.records.get(&kind, &key).is_some() {
                return Ok(false);
            }
            e.records.put(&kind, &key, value);
            Ok(true)
        })
        .await
    }

    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            e.records.put(&kind, &key, value);
            Ok(())
        })
        .await
    }

    async fn replace_record(
        &self,
        kind: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            if e.records.get(&kind, &key) != Some(&expected) {
                return Ok(false);
            }
            e.records.put(&kind, &key, value);
            Ok(true)
        })
        .await
    }

    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        validate_record_key(kind, key)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| Ok(e.records.get(&kind, &key).cloned())).await
    }

    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        validate_record_list(kind, prefix, limit)?;
        let (kind, prefix, after) = (kind.to_string(), prefix.to_string(), after.map(str::to_string));
        self.call(move |e, _now| Ok(e.records.list(&kind, &prefix, after.as_deref(), limit))).await
    }

    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| Ok(e.records.delete(&kind, &key))).await
    }
}

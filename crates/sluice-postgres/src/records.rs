//! Record calls (`Store::insert_record` and friends): one statement each over the `records`
//! table (migration 5). Every node reads the table, so a record written through one node is seen
//! by all of them as soon as the write answers; there is no cache here (callers that read often
//! keep their own, see the topics service).

use deadpool_postgres::GenericClient;
use sluice_store::{Record, StoreError, validate_record_key, validate_record_list, validate_record_value};

use crate::{Inner, db_error};

const INSERT: &str = "INSERT INTO records (kind, key, value, updated_at) VALUES ($1, $2, $3, sluice_now_ms())
    ON CONFLICT (kind, key) DO NOTHING";
const PUT: &str = "INSERT INTO records (kind, key, value, updated_at) VALUES ($1, $2, $3, sluice_now_ms())
    ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";
const REPLACE: &str = "UPDATE records SET value = $4, updated_at = sluice_now_ms()
    WHERE kind = $1 AND key = $2 AND value = $3";
const GET: &str = "SELECT value FROM records WHERE kind = $1 AND key = $2";
const LIST: &str = "SELECT key, value FROM records
    WHERE kind = $1 AND key >= $2 AND starts_with(key, $2) AND ($3::text IS NULL OR key > $3)
    ORDER BY key LIMIT $4";
const DELETE: &str = "DELETE FROM records WHERE kind = $1 AND key = $2";

/// Runs one writing statement; answers how many rows it changed.
async fn execute(
    inner: &Inner,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(sql).await.map_err(db_error)?;
    let changed = client.execute(&statement, params).await.map_err(db_error)?;
    inner.counters.committed(changed);
    Ok(changed)
}

pub async fn insert(inner: &Inner, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
    validate_record_key(kind, key)?;
    validate_record_value(&value)?;
    Ok(execute(inner, INSERT, &[&kind, &key, &value]).await? == 1)
}

pub async fn put(inner: &Inner, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
    validate_record_key(kind, key)?;
    validate_record_value(&value)?;
    execute(inner, PUT, &[&kind, &key, &value]).await.map(|_| ())
}

pub async fn replace(
    inner: &Inner,
    kind: &str,
    key: &str,
    expected: Vec<u8>,
    value: Vec<u8>,
) -> Result<bool, StoreError> {
    validate_record_key(kind, key)?;
    validate_record_value(&value)?;
    Ok(execute(inner, REPLACE, &[&kind, &key, &expected, &value]).await? == 1)
}

pub async fn get(inner: &Inner, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
    validate_record_key(kind, key)?;
    let client = inner.client().await?;
    let statement = client.prepare_cached(GET).await.map_err(db_error)?;
    let row = client.query_opt(&statement, &[&kind, &key]).await.map_err(db_error)?;
    row.map(|r| r.try_get::<_, Vec<u8>>(0)).transpose().map_err(db_error)
}

pub async fn list(
    inner: &Inner,
    kind: &str,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<Record>, StoreError> {
    validate_record_list(kind, prefix, limit)?;
    let client = inner.client().await?;
    let statement = client.prepare_cached(LIST).await.map_err(db_error)?;
    let limit = limit as i64;
    let rows = client.query(&statement, &[&kind, &prefix, &after, &limit]).await.map_err(db_error)?;
    rows.iter()
        .map(|r| Ok(Record { key: r.try_get(0)?, value: r.try_get(1)? }))
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(db_error)
}

pub async fn delete(inner: &Inner, kind: &str, key: &str) -> Result<bool, StoreError> {
    validate_record_key(kind, key)?;
    Ok(execute(inner, DELETE, &[&kind, &key]).await? == 1)
}

//! The SQLite source (rusqlite, one connection per relay, on a blocking thread).
//!
//! No barrier is needed: SQLite lets one transaction write at a time (the database's write
//! lock), a transaction's rows appear together when it commits, and the next writer can only
//! begin after that. Ids the database hands out (`INTEGER PRIMARY KEY`) are therefore in
//! commit order, and a poll (one statement, one snapshot) never sees a row numbered above one
//! that may still commit. With `after_publish: delete`, declare the id `INTEGER PRIMARY KEY
//! AUTOINCREMENT` (or use ids that are never reused, such as UUIDs): without AUTOINCREMENT,
//! SQLite reuses the id of a deleted last row, and a consumer that drops duplicates by id
//! would drop the new row's message.

use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params_from_iter};

use super::{
    FIELD_CUT, Nulls, Row, SourceError, SourceSpec, headers_from, missing_column, payload_from_bytes, quote_table,
    select_list,
};
use crate::relays::limits::RELAY_QUERY_MS;
use crate::relays::model::AfterPublish;

pub struct LiteSource {
    spec: SourceSpec,
    path: String,
    /// Taken by the blocking thread for each call and handed back.
    conn: Option<Connected>,
}

struct Connected {
    conn: Connection,
    select: String,
    finish: String,
}

fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

impl LiteSource {
    pub fn new(spec: SourceSpec, path: String) -> LiteSource {
        LiteSource { spec, path, conn: None }
    }

    fn open(spec: &SourceSpec, path: &str) -> Result<Connected, SourceError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| SourceError::Unreachable(e.to_string()))?;
        conn.busy_timeout(Duration::from_millis(RELAY_QUERY_MS))
            .map_err(|e| SourceError::Unreachable(e.to_string()))?;
        let (schema, table) = match spec.table.split_once('.') {
            Some((s, t)) => (format!("{}.", quote(s)), t.to_string()),
            None => (String::new(), spec.table.clone()),
        };
        let names: Vec<String> = {
            let mut info = conn
                .prepare(&format!("PRAGMA {schema}table_info({})", quote(&table)))
                .map_err(|e| SourceError::Refused(e.to_string()))?;
            let names =
                info.query_map([], |r| r.get::<_, String>(1)).map_err(|e| SourceError::Refused(e.to_string()))?;
            names.collect::<Result<_, _>>().map_err(|e| SourceError::Refused(e.to_string()))?
        };
        if names.is_empty() {
            return Err(SourceError::Refused(format!("there is no table {}", spec.table)));
        }
        missing_column(spec, &names)?;
        let c = &spec.columns;
        let list = select_list(
            spec,
            Nulls { number: "NULL", bytes: "NULL", text: "NULL" },
            quote,
            |e| format!("substr(CAST({e} AS TEXT), 1, {FIELD_CUT})"),
            |e, max| {
                let blob = format!("CAST({e} AS BLOB)");
                (format!("length({blob})"), format!("CASE WHEN length({blob}) <= {max} THEN {blob} END"))
            },
        );
        let table = quote_table(&spec.table, quote);
        let unpublished = match spec.after_publish {
            AfterPublish::Delete => String::new(),
            AfterPublish::Mark => format!(" WHERE {} IS NULL", quote(&c.published_at)),
        };
        let select = format!("SELECT {list} FROM {table}{unpublished} ORDER BY {} LIMIT ?1", quote(c.position()));
        let id = quote(&c.id);
        let finish = match spec.after_publish {
            AfterPublish::Delete => format!("DELETE FROM {table} WHERE {id} IN ("),
            AfterPublish::Mark => {
                let at = quote(&c.published_at);
                format!(
                    "UPDATE {table} SET {at} = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE {at} IS NULL AND {id} IN ("
                )
            }
        };
        Ok(Connected { conn, select, finish })
    }

    /// Runs `work` on a blocking thread with the connection (opened first if need be); any
    /// error closes it, so the next call opens the file again.
    async fn with<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&Connected) -> Result<T, SourceError> + Send + 'static,
    ) -> Result<T, SourceError> {
        let spec = self.spec.clone();
        let path = self.path.clone();
        let conn = self.conn.take();
        let joined = tokio::task::spawn_blocking(move || {
            let conn = match conn {
                Some(conn) => conn,
                None => Self::open(&spec, &path)?,
            };
            let result = work(&conn);
            Ok::<_, SourceError>((conn, result))
        })
        .await
        .map_err(|e| SourceError::Unreachable(format!("the SQLite thread failed: {e}")))?;
        let (conn, result) = joined?;
        if result.is_ok() {
            self.conn = Some(conn);
        }
        result
    }

    pub async fn fetch(&mut self, max: u32, bytes_max: u64) -> Result<Vec<Row>, SourceError> {
        self.with(move |c| {
            let refused = |e: rusqlite::Error| SourceError::Refused(e.to_string());
            let mut statement = c.conn.prepare_cached(&c.select).map_err(refused)?;
            let mut cursor = statement.query([max]).map_err(refused)?;
            let mut rows = Vec::new();
            let mut bytes = 0u64;
            while let Some(r) = cursor.next().map_err(refused)? {
                let length: Option<i64> = r.get(4).map_err(refused)?;
                let headers_len: Option<i64> = r.get(6).map_err(refused)?;
                let row = Row {
                    id: r.get::<_, Option<String>>(0).map_err(refused)?.unwrap_or_default(),
                    aggregate_type: r.get(1).map_err(refused)?,
                    aggregate_id: r.get(2).map_err(refused)?,
                    event_type: r.get(3).map_err(refused)?,
                    payload: payload_from_bytes(length.map(|n| n as u64), r.get(5).map_err(refused)?),
                    headers: headers_from(
                        headers_len.map(|n| n as u64),
                        r.get::<_, Option<Vec<u8>>>(7)
                            .map_err(refused)?
                            .map(|b| String::from_utf8_lossy(&b).into_owned()),
                    ),
                    route: r.get(8).map_err(refused)?,
                };
                bytes += row.payload_bytes();
                rows.push(row);
                if bytes >= bytes_max {
                    break;
                }
            }
            Ok(rows)
        })
        .await
    }

    pub async fn finish(&mut self, ids: &[String]) -> Result<(), SourceError> {
        let ids = ids.to_vec();
        self.with(move |c| {
            let placeholders = vec!["?"; ids.len()].join(", ");
            let sql = format!("{}{placeholders})", c.finish);
            c.conn.execute(&sql, params_from_iter(ids.iter())).map_err(|e| SourceError::Refused(e.to_string()))?;
            Ok(())
        })
        .await
    }
}

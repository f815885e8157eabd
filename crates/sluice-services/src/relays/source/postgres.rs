//! The PostgreSQL source (tokio-postgres, one connection per relay).
//!
//! The barrier: a poll reads only rows whose inserting transaction is older than every
//! transaction still running, `age(xmin) > age(xid(pg_snapshot_xmin(pg_current_snapshot())))`:
//! the row's `xmin` is below the snapshot's `xmin`, the oldest transaction id still in
//! progress, evaluated in the same statement (one snapshot). So while a transaction that began
//! writing before a committed row is still open, that row and everything after it in position
//! order wait, and when the open transaction commits its rows are read first, in position
//! order. What this cannot see: a transaction that took its id from the sequence but has not
//! written anything yet has no transaction id; the row it inserts then may number below rows
//! already published. Inserting the outbox row with the id's default (`nextval` inside the
//! INSERT, which assigns the transaction id as it writes) leaves a window of microseconds;
//! writing the business row first, as the orders example does, leaves none. Transaction ids
//! are the whole cluster's, so a long transaction in any database of the server holds the
//! relay back (its lag grows and shows). Needs PostgreSQL 13 or later.

use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

use super::{FIELD_CUT, Nulls};
use super::{Row, SourceError, SourceSpec, headers_from, missing_column, payload_from_bytes, quote_table, select_list};
use crate::relays::limits::{RELAY_CONNECT_MS, RELAY_QUERY_MS};
use crate::relays::model::AfterPublish;

pub struct PgSource {
    spec: SourceSpec,
    url: String,
    conn: Option<Connected>,
}

struct Connected {
    client: Client,
    /// `SELECT … LIMIT $1`.
    select: String,
    /// `DELETE …` or `UPDATE …` `WHERE id = ANY($1::text[]::<id type>[])`.
    finish: String,
}

fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

impl PgSource {
    pub fn new(spec: SourceSpec, url: String) -> PgSource {
        PgSource { spec, url, conn: None }
    }

    fn error(&mut self, e: tokio_postgres::Error) -> SourceError {
        // Whatever went wrong, the next call starts on a new connection.
        self.conn = None;
        let text = self.spec.scrub(e.to_string());
        let text = match e.as_db_error() {
            Some(db) => self.spec.scrub(format!("{}: {}", db.code().code(), db.message())),
            None => text,
        };
        match e.as_db_error().map(|db| db.code().code().to_string()) {
            // Class 08 is the connection, class 57 an operator or crash shutdown, 53 resources.
            Some(code) if !(code.starts_with("08") || code.starts_with("57") || code.starts_with("53")) => {
                SourceError::Refused(text)
            }
            _ => SourceError::Unreachable(text),
        }
    }

    async fn connect(&mut self) -> Result<&Connected, SourceError> {
        if self.conn.is_none() {
            let mut config: tokio_postgres::Config =
                self.url.parse().map_err(|e| SourceError::Refused(self.spec.scrub(format!("{e}"))))?;
            config.connect_timeout(Duration::from_millis(RELAY_CONNECT_MS));
            config.application_name("sluice-relay");
            let (client, connection) = config.connect(NoTls).await.map_err(|e| self.error(e))?;
            tokio::spawn(async move {
                // Ends when the client is dropped or the connection breaks; the next call
                // notices the break and connects again.
                let _ = connection.await;
            });
            let conn = self.prepare(client).await?;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_ref().expect("connected above"))
    }

    /// Reads the table's columns, checks the mapped ones exist, and writes the statements.
    async fn prepare(&mut self, client: Client) -> Result<Connected, SourceError> {
        let table = quote_table(&self.spec.table, quote);
        client.batch_execute(&format!("SET statement_timeout = {RELAY_QUERY_MS}")).await.map_err(|e| self.error(e))?;
        let columns = client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped",
                &[&table],
            )
            .await
            .map_err(|e| self.error(e))?;
        let names: Vec<String> = columns.iter().map(|r| r.get(0)).collect();
        missing_column(&self.spec, &names)?;
        let type_of = |name: &str| -> String {
            columns.iter().find(|r| r.get::<_, String>(0) == name).map(|r| r.get(1)).unwrap_or_else(|| "text".into())
        };
        let c = &self.spec.columns;
        let payload_is_bytea = type_of(&c.payload) == "bytea";
        let nulls = Nulls { number: "NULL::bigint", bytes: "NULL::bytea", text: "NULL::text" };
        let list = select_list(
            &self.spec,
            nulls,
            |n| format!("t.{}", quote(n)),
            |e| format!("left({e}::text, {FIELD_CUT})"),
            |e, max| {
                let bytes = if payload_is_bytea && e == format!("t.{}", quote(&c.payload)) {
                    e.to_string()
                } else {
                    format!("convert_to({e}::text, 'UTF8')")
                };
                (
                    format!("octet_length({bytes})::bigint"),
                    format!("CASE WHEN octet_length({bytes}) <= {max} THEN {bytes} END"),
                )
            },
        );
        let unpublished = match self.spec.after_publish {
            AfterPublish::Delete => String::new(),
            AfterPublish::Mark => format!(" AND t.{} IS NULL", quote(&c.published_at)),
        };
        let select = format!(
            "SELECT {list} FROM {table} t \
             WHERE age(t.xmin) > age(xid(pg_snapshot_xmin(pg_current_snapshot()))){unpublished} \
             ORDER BY t.{} LIMIT $1",
            quote(c.position())
        );
        let id = quote(&c.id);
        let matching = format!("{id} = ANY($1::text[]::{}[])", type_of(&c.id));
        let finish = match self.spec.after_publish {
            AfterPublish::Delete => format!("DELETE FROM {table} WHERE {matching}"),
            AfterPublish::Mark => {
                let at = quote(&c.published_at);
                format!("UPDATE {table} SET {at} = now() WHERE {matching} AND {at} IS NULL")
            }
        };
        Ok(Connected { client, select, finish })
    }

    pub async fn fetch(&mut self, max: u32, bytes_max: u64) -> Result<Vec<Row>, SourceError> {
        let conn = self.connect().await?;
        let limit = i64::from(max);
        let params: [&(dyn ToSql + Sync); 1] = [&limit];
        let query = async {
            let stream = conn.client.query_raw(&conn.select, params).await?;
            let mut stream = std::pin::pin!(stream);
            let mut rows = Vec::new();
            let mut bytes = 0u64;
            while let Some(row) = stream.next().await {
                let row = row?;
                let length: Option<i64> = row.try_get(4)?;
                let headers_len: Option<i64> = row.try_get(6)?;
                let parsed = Row {
                    id: row.try_get::<_, Option<String>>(0)?.unwrap_or_default(),
                    aggregate_type: row.try_get(1)?,
                    aggregate_id: row.try_get(2)?,
                    event_type: row.try_get(3)?,
                    payload: payload_from_bytes(length.map(|n| n as u64), row.try_get(5)?),
                    headers: headers_from(
                        headers_len.map(|n| n as u64),
                        row.try_get::<_, Option<Vec<u8>>>(7)?.map(lossy),
                    ),
                    route: row.try_get(8)?,
                };
                bytes += parsed.payload_bytes();
                rows.push(parsed);
                if bytes >= bytes_max {
                    break;
                }
            }
            Ok::<_, tokio_postgres::Error>(rows)
        };
        match tokio::time::timeout(Duration::from_millis(RELAY_QUERY_MS), query).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(self.error(e)),
            Err(_) => {
                self.conn = None;
                Err(SourceError::Unreachable(format!("no answer within {RELAY_QUERY_MS} ms")))
            }
        }
    }

    pub async fn finish(&mut self, ids: &[String]) -> Result<(), SourceError> {
        let conn = self.connect().await?;
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let params: [&(dyn ToSql + Sync); 1] = [&ids];
        let done =
            tokio::time::timeout(Duration::from_millis(RELAY_QUERY_MS), conn.client.execute(&conn.finish, &params));
        match done.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.error(e)),
            Err(_) => {
                self.conn = None;
                Err(SourceError::Unreachable(format!("no answer within {RELAY_QUERY_MS} ms")))
            }
        }
    }
}

fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

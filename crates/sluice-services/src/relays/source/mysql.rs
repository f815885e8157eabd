//! The MySQL and MariaDB source (mysql_async, one connection per relay; InnoDB tables).
//!
//! The barrier: a poll is a locking read, `SELECT … ORDER BY position LIMIT n LOCK IN SHARE
//! MODE`, in a READ COMMITTED transaction. InnoDB puts a row into the index when it is
//! inserted, locked by its transaction until that commits; a plain read skips such a row, but a
//! locking read that meets it waits for the transaction to end. So a poll never reads past a
//! row that may still commit: it waits (at most `RELAY_MYSQL_LOCK_WAIT_S`, then polls again),
//! and reads the row once committed, in position order. READ COMMITTED takes no gap locks, so
//! the relay does not block the application's inserts; the share locks on the rows read last
//! only until the read's transaction ends, before anything is published. What this cannot see:
//! an auto-increment value handed out whose row is not in the index yet, a window of
//! microseconds inside one INSERT statement.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Value};

use super::{
    FIELD_CUT, Nulls, Row, SourceError, SourceSpec, headers_from, missing_column, payload_from_bytes, quote_table,
    select_list,
};
use crate::relays::limits::{RELAY_CONNECT_MS, RELAY_MYSQL_LOCK_WAIT_S, RELAY_QUERY_MS};
use crate::relays::model::AfterPublish;

pub struct MySource {
    spec: SourceSpec,
    url: String,
    conn: Option<Connected>,
}

struct Connected {
    conn: Conn,
    /// `SELECT … LIMIT ` (the limit is appended).
    select: String,
    /// `DELETE …` or `UPDATE …` `WHERE id IN (` (placeholders are appended).
    finish: String,
}

fn quote(name: &str) -> String {
    format!("`{name}`")
}

/// Lock wait timeout and deadlock: the barrier held, nothing failed.
const LOCK_WAIT: [u16; 2] = [1205, 1213];

impl MySource {
    pub fn new(spec: SourceSpec, url: String) -> MySource {
        MySource { spec, url, conn: None }
    }

    fn error(&mut self, e: mysql_async::Error) -> SourceError {
        // Whatever went wrong, the next call starts on a new connection (and so in no
        // transaction left open by a statement that failed).
        self.conn = None;
        let text = self.spec.scrub(e.to_string());
        match e {
            mysql_async::Error::Server(ref server) if LOCK_WAIT.contains(&server.code) => SourceError::Waiting(text),
            mysql_async::Error::Server(_) => SourceError::Refused(text),
            _ => SourceError::Unreachable(text),
        }
    }

    async fn connect(&mut self) -> Result<&mut Connected, SourceError> {
        if self.conn.is_none() {
            let opts = Opts::from_url(&self.url).map_err(|e| SourceError::Refused(self.spec.scrub(e.to_string())))?;
            // mysql_async switches a connection to 127.0.0.1 over to the server's Unix socket
            // unless told not to; the relay connects where its URL says (`prefer_socket=true`
            // in the URL restores it).
            let opts = if self.url.contains("prefer_socket=") {
                opts
            } else {
                mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false).into()
            };
            let conn = match tokio::time::timeout(Duration::from_millis(RELAY_CONNECT_MS), Conn::new(opts)).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => return Err(self.error(e)),
                Err(_) => return Err(SourceError::Unreachable(format!("no connection within {RELAY_CONNECT_MS} ms"))),
            };
            let connected = self.prepare(conn).await?;
            self.conn = Some(connected);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    async fn prepare(&mut self, mut conn: Conn) -> Result<Connected, SourceError> {
        let setup = format!(
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = {RELAY_MYSQL_LOCK_WAIT_S}"
        );
        if let Err(e) = conn.query_drop(setup).await {
            return Err(self.error(e));
        }
        let (schema, table) = match self.spec.table.split_once('.') {
            Some((s, t)) => (Some(s.to_string()), t.to_string()),
            None => (None, self.spec.table.clone()),
        };
        let names: Result<Vec<String>, _> = conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?",
                (schema, table),
            )
            .await;
        let names = match names {
            Ok(names) => names,
            Err(e) => return Err(self.error(e)),
        };
        if names.is_empty() {
            return Err(SourceError::Refused(format!("there is no table {}", self.spec.table)));
        }
        missing_column(&self.spec, &names)?;
        let c = &self.spec.columns;
        let list = select_list(
            &self.spec,
            Nulls { number: "NULL", bytes: "NULL", text: "NULL" },
            quote,
            |e| format!("LEFT(CAST({e} AS CHAR), {FIELD_CUT})"),
            |e, max| (format!("OCTET_LENGTH({e})"), format!("IF(OCTET_LENGTH({e}) <= {max}, {e}, NULL)")),
        );
        let table = quote_table(&self.spec.table, quote);
        let unpublished = match self.spec.after_publish {
            AfterPublish::Delete => String::new(),
            AfterPublish::Mark => format!(" WHERE {} IS NULL", quote(&c.published_at)),
        };
        let select = format!("SELECT {list} FROM {table}{unpublished} ORDER BY {} LIMIT ", quote(c.position()));
        let id = quote(&c.id);
        let finish = match self.spec.after_publish {
            AfterPublish::Delete => format!("DELETE FROM {table} WHERE {id} IN ("),
            AfterPublish::Mark => {
                let at = quote(&c.published_at);
                format!("UPDATE {table} SET {at} = NOW(6) WHERE {at} IS NULL AND {id} IN (")
            }
        };
        Ok(Connected { conn, select, finish })
    }

    pub async fn fetch(&mut self, max: u32, bytes_max: u64) -> Result<Vec<Row>, SourceError> {
        let connected = self.connect().await?;
        let sql = format!("{}{max} LOCK IN SHARE MODE", connected.select);
        let conn = &mut connected.conn;
        let read = async {
            conn.query_drop("START TRANSACTION").await?;
            let mut result = conn.query_iter(sql).await?;
            let mut rows = Vec::new();
            let mut total = 0u64;
            while let Some(mut row) = result.next().await? {
                let parsed = Row {
                    id: text(&mut row, 0).unwrap_or_default(),
                    aggregate_type: text(&mut row, 1),
                    aggregate_id: text(&mut row, 2),
                    event_type: text(&mut row, 3),
                    payload: payload_from_bytes(number(&mut row, 4), bytes(&mut row, 5)),
                    headers: headers_from(number(&mut row, 6), text(&mut row, 7)),
                    route: text(&mut row, 8),
                };
                total += parsed.payload_bytes();
                rows.push(parsed);
                if total >= bytes_max {
                    break;
                }
            }
            result.drop_result().await?;
            conn.query_drop("COMMIT").await?;
            Ok::<_, mysql_async::Error>(rows)
        };
        match tokio::time::timeout(Duration::from_millis(RELAY_QUERY_MS), read).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(self.error(e)),
            Err(_) => {
                self.conn = None;
                Err(SourceError::Unreachable(format!("no answer within {RELAY_QUERY_MS} ms")))
            }
        }
    }

    pub async fn finish(&mut self, ids: &[String]) -> Result<(), SourceError> {
        let connected = self.connect().await?;
        let placeholders = vec!["?"; ids.len()].join(", ");
        let sql = format!("{}{placeholders})", connected.finish);
        let params: Vec<Value> = ids.iter().map(|id| Value::from(id.as_str())).collect();
        let done = tokio::time::timeout(Duration::from_millis(RELAY_QUERY_MS), connected.conn.exec_drop(sql, params));
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.error(e)),
            Err(_) => {
                self.conn = None;
                Err(SourceError::Unreachable(format!("no answer within {RELAY_QUERY_MS} ms")))
            }
        }
    }
}

fn bytes(row: &mut mysql_async::Row, i: usize) -> Option<Vec<u8>> {
    row.take_opt::<Option<Vec<u8>>, _>(i).and_then(Result::ok).flatten()
}

fn text(row: &mut mysql_async::Row, i: usize) -> Option<String> {
    bytes(row, i).map(|b| String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

fn number(row: &mut mysql_async::Row, i: usize) -> Option<u64> {
    row.take_opt::<Option<u64>, _>(i).and_then(Result::ok).flatten()
}

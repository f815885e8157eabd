//! The SQLite outbox: a file in a temporary directory, written with rusqlite.

use rusqlite::Connection;

use crate::outbox::Outbox;

pub struct Sqlite {
    _dir: tempfile::TempDir,
    path: String,
}

impl Sqlite {
    pub fn new() -> Sqlite {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("app.db").to_string_lossy().into_owned();
        let conn = Connection::open(&path).expect("create the database");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL);
             CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT NOT NULL,
                 aggregateid TEXT NOT NULL, type TEXT NOT NULL, payload TEXT, published_at TEXT);",
        )
        .expect("create the tables");
        Sqlite { _dir: dir, path }
    }

    fn open(&self) -> Connection {
        let conn = Connection::open(&self.path).expect("open");
        conn.busy_timeout(std::time::Duration::from_secs(30)).expect("busy timeout");
        conn
    }

    /// Tries to insert while another transaction writes: SQLite refuses at once (no wait).
    pub fn try_insert_now(&self) -> Result<(), rusqlite::Error> {
        let conn = Connection::open(&self.path).expect("open");
        conn.busy_timeout(std::time::Duration::ZERO).expect("busy timeout");
        conn.execute(
            "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'x', 'order.placed', '{}')",
            [],
        )
        .map(|_| ())
    }
}

impl Sqlite {
    /// Runs statements on the database.
    pub fn exec(&self, sql: &str) {
        self.open().execute_batch(sql).expect("statements");
    }
}

impl Outbox for Sqlite {
    type Tx = Connection;

    fn url(&self) -> String {
        format!("sqlite://{}", self.path)
    }

    fn table(&self) -> String {
        "outbox".into()
    }

    fn concurrent_writers(&self) -> bool {
        false
    }

    async fn begin(&self) -> Connection {
        let conn = self.open();
        conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
        conn
    }

    async fn insert(&self, tx: &mut Connection, aggregate: &str, body: &str) -> String {
        tx.execute("INSERT INTO orders (customer) VALUES (?1)", [aggregate]).expect("order");
        tx.execute(
            "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', ?1, 'order.placed', ?2)",
            [aggregate, body],
        )
        .expect("outbox row");
        tx.last_insert_rowid().to_string()
    }

    async fn commit(&self, tx: Connection) {
        tx.execute_batch("COMMIT").expect("commit");
    }

    async fn unpublished(&self) -> u64 {
        self.open()
            .query_row("SELECT count(*) FROM outbox WHERE published_at IS NULL", [], |r| r.get::<_, i64>(0))
            .expect("count") as u64
    }

    async fn marked(&self) -> u64 {
        self.open()
            .query_row("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL", [], |r| r.get::<_, i64>(0))
            .expect("count") as u64
    }

    async fn drop_table(&self) {}
}

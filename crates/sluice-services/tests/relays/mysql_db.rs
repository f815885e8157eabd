//! The MySQL/MariaDB outbox: fresh tables in the database of `SLUICE_TEST_MYSQL_URL`, written
//! with mysql_async. A set variable promises a database: an unreachable one fails the test.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use crate::outbox::Outbox;

pub fn url() -> Option<String> {
    std::env::var("SLUICE_TEST_MYSQL_URL").ok().filter(|u| !u.is_empty())
}

pub struct Mysql {
    pub url: String,
    pub suffix: String,
}

pub async fn connect(url: &str) -> Conn {
    let opts = Opts::from_url(url).unwrap_or_else(|e| panic!("SLUICE_TEST_MYSQL_URL={url} is not a URL: {e}"));
    Conn::new(opts).await.unwrap_or_else(|e| panic!("SLUICE_TEST_MYSQL_URL={url} is set but unreachable: {e}"))
}

impl Mysql {
    pub async fn new(url: &str) -> Mysql {
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let mut conn = connect(url).await;
        conn.query_drop(format!(
            "CREATE TABLE orders_{suffix} (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(64) NOT NULL) ENGINE=InnoDB;
             CREATE TABLE outbox_{suffix} (id BIGINT AUTO_INCREMENT PRIMARY KEY, aggregatetype VARCHAR(255) NOT NULL,
                 aggregateid VARCHAR(255) NOT NULL, type VARCHAR(255) NOT NULL, payload LONGTEXT,
                 published_at DATETIME(6) NULL, KEY unpublished (published_at, id)) ENGINE=InnoDB"
        ))
        .await
        .expect("create the tables");
        Mysql { url: url.to_string(), suffix }
    }

    async fn count(&self, condition: &str) -> u64 {
        let mut conn = connect(&self.url).await;
        let n: Option<u64> = conn
            .query_first(format!("SELECT count(*) FROM outbox_{} WHERE {condition}", self.suffix))
            .await
            .expect("count");
        n.unwrap_or(0)
    }
}

impl Outbox for Mysql {
    type Tx = Conn;

    fn url(&self) -> String {
        self.url.clone()
    }

    fn table(&self) -> String {
        format!("outbox_{}", self.suffix)
    }

    fn concurrent_writers(&self) -> bool {
        true
    }

    async fn begin(&self) -> Conn {
        let mut conn = connect(&self.url).await;
        conn.query_drop("START TRANSACTION").await.expect("begin");
        conn
    }

    async fn insert(&self, tx: &mut Conn, aggregate: &str, body: &str) -> String {
        let s = &self.suffix;
        tx.exec_drop(format!("INSERT INTO orders_{s} (customer) VALUES (?)"), (aggregate,)).await.expect("order");
        tx.exec_drop(
            format!("INSERT INTO outbox_{s} (aggregatetype, aggregateid, type, payload) VALUES ('order', ?, 'order.placed', ?)"),
            (aggregate, body),
        )
        .await
        .expect("outbox row");
        tx.last_insert_id().expect("an auto-increment id").to_string()
    }

    async fn commit(&self, mut tx: Conn) {
        tx.query_drop("COMMIT").await.expect("commit");
    }

    async fn unpublished(&self) -> u64 {
        self.count("published_at IS NULL").await
    }

    async fn marked(&self) -> u64 {
        self.count("published_at IS NOT NULL").await
    }

    async fn drop_table(&self) {
        let mut conn = connect(&self.url).await;
        let s = &self.suffix;
        conn.query_drop(format!("DROP TABLE outbox_{s}; DROP TABLE orders_{s}")).await.expect("drop the tables");
    }
}

//! The PostgreSQL outbox: a fresh schema in the database of `SLUICE_TEST_PG_URL`, written with
//! tokio-postgres. A set variable promises a database: an unreachable one fails the test.

use tokio_postgres::{Client, NoTls};

use crate::outbox::Outbox;

pub fn url() -> Option<String> {
    std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty())
}

pub struct Postgres {
    pub url: String,
    pub schema: String,
    admin: Client,
}

pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unreachable: {e}"));
    tokio::spawn(connection);
    client
}

impl Postgres {
    pub async fn new(url: &str) -> Postgres {
        let admin = connect(url).await;
        let schema = format!("relay_{}", uuid::Uuid::now_v7().simple());
        admin
            .batch_execute(&format!(
                "CREATE SCHEMA {schema};
                 CREATE TABLE {schema}.orders (id bigserial PRIMARY KEY, customer text NOT NULL);
                 CREATE TABLE {schema}.outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL,
                     aggregateid text NOT NULL, type text NOT NULL, payload text, published_at timestamptz);"
            ))
            .await
            .expect("create the tables");
        Postgres { url: url.to_string(), schema, admin }
    }
}

impl Outbox for Postgres {
    type Tx = Client;

    fn url(&self) -> String {
        self.url.clone()
    }

    fn table(&self) -> String {
        format!("{}.outbox", self.schema)
    }

    fn concurrent_writers(&self) -> bool {
        true
    }

    async fn begin(&self) -> Client {
        let client = connect(&self.url).await;
        client.batch_execute("BEGIN").await.expect("begin");
        client
    }

    async fn insert(&self, tx: &mut Client, aggregate: &str, body: &str) -> String {
        let s = &self.schema;
        tx.execute(&format!("INSERT INTO {s}.orders (customer) VALUES ($1)"), &[&aggregate]).await.expect("order");
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO {s}.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'order.placed', $2) RETURNING id"
                ),
                &[&aggregate, &body],
            )
            .await
            .expect("outbox row");
        row.get::<_, i64>(0).to_string()
    }

    async fn commit(&self, tx: Client) {
        tx.batch_execute("COMMIT").await.expect("commit");
    }

    async fn unpublished(&self) -> u64 {
        let row = self
            .admin
            .query_one(&format!("SELECT count(*) FROM {}.outbox WHERE published_at IS NULL", self.schema), &[])
            .await
            .expect("count");
        row.get::<_, i64>(0) as u64
    }

    async fn marked(&self) -> u64 {
        let row = self
            .admin
            .query_one(&format!("SELECT count(*) FROM {}.outbox WHERE published_at IS NOT NULL", self.schema), &[])
            .await
            .expect("count");
        row.get::<_, i64>(0) as u64
    }

    async fn drop_table(&self) {
        self.admin.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema)).await.expect("drop the schema");
    }
}

//! Orders, event-sourced (CQRS): commands append events to one stream per order with the
//! version they were decided on, a projection folds every order event into a read-model table
//! in the application's own PostgreSQL, and queries read that table.
//!
//! ```sh
//! sluice serve &                                            # Sluice on 127.0.0.1:9324
//! DATABASE_URL=postgres://postgres@127.0.0.1/app cargo run -p sluice-client --example orders
//! ```
//!
//! The command side: `place` appends `OrderPlaced` with `no_stream` (an order id is placed
//! once); `ship` and `cancel` read the order's events, decide on its state, and append with
//! the version they read, so two clerks shipping and cancelling one order at once cannot both
//! win: the loser gets `wrong_expected_version` and decides again on the new state.
//!
//! The query side: the `ProjectionRunner` of `sluice_client::projection` applies each batch
//! of events and the checkpoint in one transaction of the application's database, so every
//! event lands in `orders_view` exactly once, however often the projection is killed.

use std::time::Duration;

use serde_json::json;
use sluice_client::projection::{Projection, ProjectionRunner};
use sluice_client::sluice_api::events::{
    AppendEventsRequest, EventWire, ExpectedName, ExpectedVersionWire, NewEventWire,
};
use sluice_client::{Client, ClientError};

/// The read model and the projection's checkpoint, in the application's database.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS orders_view (
        order_id    text PRIMARY KEY,
        status      text NOT NULL,
        total_cents bigint NOT NULL,
        events      bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS projection_checkpoints (
        projection text PRIMARY KEY,
        position   bigint NOT NULL
    );";

/// The projection's name: its checkpoint row and its subscription.
pub const PROJECTION: &str = "orders-view";

/// An order as its events leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Placed,
    Shipped,
    Cancelled,
}

fn event(t: &str, data: serde_json::Value) -> NewEventWire {
    NewEventWire { id: None, r#type: t.into(), data, metadata: None, correlation_id: None, causation_id: None }
}

/// The state of an order from its stream: its status and the version it was read at.
async fn load(client: &Client, order: &str) -> Result<(Status, u64), ClientError> {
    let read = client.read_events(&format!("order-{order}"), None, false, Some(1_000)).await?;
    let mut status = Status::Placed;
    for e in &read.events {
        status = match e.r#type.as_str() {
            "OrderShipped" => Status::Shipped,
            "OrderCancelled" => Status::Cancelled,
            _ => status,
        };
    }
    Ok((status, read.last_version))
}

/// `place`: a new order, once.
pub async fn place(client: &Client, order: &str, total_cents: i64) -> Result<(), ClientError> {
    let request = AppendEventsRequest {
        expected_version: ExpectedVersionWire::Named(ExpectedName::NoStream),
        events: vec![event("OrderPlaced", json!({ "total_cents": total_cents }))],
    };
    client.append_events(&format!("order-{order}"), &request).await.map(|_| ())
}

/// `ship` or `cancel`: only a placed order changes; decided on the state read, appended with
/// the version read, decided again when someone else wrote first. Answers whether it changed.
pub async fn transition(client: &Client, order: &str, to: Status) -> Result<bool, ClientError> {
    loop {
        let (status, version) = load(client, order).await?;
        if status != Status::Placed {
            return Ok(false);
        }
        let t = if to == Status::Shipped { "OrderShipped" } else { "OrderCancelled" };
        let request = AppendEventsRequest {
            expected_version: ExpectedVersionWire::Version(version),
            events: vec![event(t, json!({}))],
        };
        match client.append_events(&format!("order-{order}"), &request).await {
            Ok(_) => return Ok(true),
            Err(e) if sluice_client::events::actual_version(&e).is_some() => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The projection over PostgreSQL: each batch and its checkpoint in one transaction.
pub struct OrdersView {
    pub db: tokio_postgres::Client,
}

impl Projection for OrdersView {
    type Error = tokio_postgres::Error;

    async fn checkpoint(&mut self) -> Result<Option<u64>, Self::Error> {
        let row = self
            .db
            .query_opt("SELECT position FROM projection_checkpoints WHERE projection = $1", &[&PROJECTION])
            .await?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    async fn apply(&mut self, events: &[EventWire], checkpoint: u64) -> Result<(), Self::Error> {
        let tx = self.db.transaction().await?;
        for e in events {
            let order = e.stream_id.trim_start_matches("order-");
            match e.r#type.as_str() {
                "OrderPlaced" => {
                    let total = e.data["total_cents"].as_i64().unwrap_or(0);
                    tx.execute(
                        "INSERT INTO orders_view (order_id, status, total_cents, events) VALUES ($1, 'placed', $2, 1)",
                        &[&order, &total],
                    )
                    .await?;
                }
                t => {
                    let status = if t == "OrderShipped" { "shipped" } else { "cancelled" };
                    tx.execute(
                        "UPDATE orders_view SET status = $2, events = events + 1 WHERE order_id = $1",
                        &[&order, &status],
                    )
                    .await?;
                }
            }
        }
        tx.execute(
            "INSERT INTO projection_checkpoints (projection, position) VALUES ($1, $2)
             ON CONFLICT (projection) DO UPDATE SET position = EXCLUDED.position",
            &[&PROJECTION, &(checkpoint as i64)],
        )
        .await?;
        tx.commit().await
    }
}

/// The query side: orders by status.
pub async fn count_by_status(db: &tokio_postgres::Client, status: &str) -> Result<i64, tokio_postgres::Error> {
    Ok(db.query_one("SELECT count(*) FROM orders_view WHERE status = $1", &[&status]).await?.get(0))
}

/// The runner of this projection: order events only.
pub fn runner(client: Client) -> ProjectionRunner {
    ProjectionRunner::new(client, PROJECTION).stream_prefix("order-").batch(50, 1_000)
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(db)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::var("SLUICE_SERVER").unwrap_or_else(|_| "http://127.0.0.1:9324".into());
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL to the application's PostgreSQL")?;
    let client = Client::new(&server)?;
    let db = connect(&url).await?;
    db.batch_execute(SCHEMA).await?;
    let mut view = OrdersView { db };
    let projecting = runner(client.clone());
    tokio::spawn(async move { projecting.run(&mut view, std::future::pending()).await });
    let order = format!("{}", std::process::id());
    place(&client, &order, 4_200).await?;
    transition(&client, &order, Status::Shipped).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let db = connect(&url).await?;
    println!("shipped orders: {}", count_by_status(&db, "shipped").await?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// An in-process Sluice on the embedded store, on port 0.
    async fn sluice() -> (Client, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let config = sluice_embedded::EmbeddedConfig {
            data_dir: dir.path().to_path_buf(),
            durability: sluice_embedded::Durability::Fsync,
        };
        let store = Arc::new(sluice_embedded::EmbeddedStore::open(config).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(sluice_server::run(listener, store, std::future::pending()));
        (Client::new(&url).unwrap(), dir)
    }

    /// A fresh schema of the test database, or `None` (said aloud) without one; a set but
    /// unreachable database fails the test.
    async fn app_db() -> Option<(String, String)> {
        let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
            eprintln!(
                "SLUICE_TEST_PG_URL is not set: skipped the read model's test (set it to run against PostgreSQL)"
            );
            return None;
        };
        let schema = format!("orders_{}", std::process::id() as u64 * 1_000 + rand_suffix());
        let db = connect(&url).await.unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}"));
        db.batch_execute(&format!("CREATE SCHEMA {schema}")).await.unwrap();
        let scoped = format!("{url}{}options=-csearch_path%3D{schema}", if url.contains('?') { "&" } else { "?" });
        Some((scoped, schema))
    }

    fn rand_suffix() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64 % 1_000
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_race_with_expected_versions_and_one_wins() {
        let (client, _dir) = sluice().await;
        place(&client, "1", 100).await.unwrap();
        let again = place(&client, "1", 100).await.unwrap_err();
        assert_eq!(sluice_client::events::actual_version(&again), Some(Some(0)), "an order is placed once");
        let (a, b) =
            tokio::join!(transition(&client, "1", Status::Shipped), transition(&client, "1", Status::Cancelled));
        assert_ne!(a.unwrap(), b.unwrap(), "exactly one of ship and cancel wins");
        let (_, version) = load(&client, "1").await.unwrap();
        assert_eq!(version, 1, "one transition appended, never two");
    }

    /// The projection is aborted at random points (mid-batch, mid-transaction, between the
    /// database's commit and the server's checkpoint) and restarted; every event is in the
    /// read model exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_projection_killed_at_random_applies_every_event_exactly_once() {
        let Some((url, schema)) = app_db().await else { return };
        let (client, _dir) = sluice().await;
        let db = connect(&url).await.unwrap();
        db.batch_execute(SCHEMA).await.unwrap();
        const ORDERS: usize = 60;
        let mut shipped = 0;
        for i in 0..ORDERS {
            place(&client, &i.to_string(), i as i64).await.unwrap();
            if i % 3 == 0 {
                transition(&client, &i.to_string(), Status::Shipped).await.unwrap();
                shipped += 1;
            }
            // Events of other streams, which the projection's filter passes over.
            let note = AppendEventsRequest {
                expected_version: ExpectedVersionWire::Named(ExpectedName::Any),
                events: vec![event("Note", json!(i))],
            };
            client.append_events("audit-1", &note).await.unwrap();
        }
        let total_events = (ORDERS + shipped) as i64;
        let runner = runner(client.clone()).batch(7, 200);
        let mut kills = 0;
        for round in 0u64.. {
            let mut view = OrdersView { db: connect(&url).await.unwrap() };
            // Killed after a pseudo-random time: anywhere inside a step.
            let budget = Duration::from_millis(5 + (round * 7919) % 40);
            let done = tokio::time::timeout(budget, async {
                loop {
                    runner.step(&mut view).await.expect("a step");
                }
            })
            .await;
            assert!(done.is_err(), "the loop only ends by being killed");
            kills += 1;
            let applied: i64 =
                db.query_one("SELECT coalesce(sum(events), 0)::bigint FROM orders_view", &[]).await.unwrap().get(0);
            assert!(applied <= total_events, "an event was applied twice ({applied} of {total_events})");
            if applied == total_events && kills >= 10 {
                break;
            }
            assert!(round < 2_000, "the projection makes no progress ({applied} of {total_events})");
        }
        let mut view = OrdersView { db: connect(&url).await.unwrap() };
        for _ in 0..5 {
            runner.step(&mut view).await.unwrap();
        }
        let applied: i64 =
            db.query_one("SELECT coalesce(sum(events), 0)::bigint FROM orders_view", &[]).await.unwrap().get(0);
        assert_eq!(applied, total_events, "every event exactly once after {kills} kills");
        assert_eq!(count_by_status(&db, "shipped").await.unwrap(), shipped as i64);
        assert_eq!(count_by_status(&db, "placed").await.unwrap(), (ORDERS - shipped) as i64);
        db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.unwrap();
    }
}

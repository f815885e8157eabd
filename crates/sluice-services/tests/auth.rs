//! API keys across two nodes over one PostgreSQL database (each its own `Keys` over its own
//! connection pool), on a manual clock: a key made on one node turns authentication on for the
//! other, and a key revoked on one is refused by the other, each within `KEY_REFRESH_MS`. Runs
//! when `SLUICE_TEST_PG_URL` is set (CI sets it, and then an unreachable database fails it).

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_services::auth::{AuthConfig, KEY_REFRESH_MS, Keys, NewKey, Refusal};
use sluice_store::Store;

const T0_MS: u64 = 1_700_000_000_000;

async fn node(url: &str, schema: &str) -> Arc<dyn Store> {
    let options = sluice_postgres::PostgresOptions { schema: Some(schema.to_string()), ..Default::default() };
    Arc::new(
        sluice_postgres::PostgresStore::connect(url, options)
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_or_revoked_on_one_node_takes_effect_on_the_other_within_the_refresh_bound() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return;
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let clock = Arc::new(ManualClock::new(T0_MS));
    let a = Keys::new(node(&url, &schema).await, clock.clone(), AuthConfig::default());
    let b = Keys::new(node(&url, &schema).await, clock.clone(), AuthConfig::default());

    assert!(!b.enforced().await.unwrap(), "no key yet: open");
    let new = NewKey {
        tenant: Some("acme".into()),
        name: "ci".into(),
        scopes: vec!["queues:orders:send".into()],
        aws: false,
        rate_limit: None,
    };
    let made = a.create(new).await.unwrap();
    let (view, token) = (made.view, made.token);
    assert!(a.enforced().await.unwrap(), "closed at once on the node that made it");
    clock.advance_by(KEY_REFRESH_MS - 1);
    assert!(!b.enforced().await.unwrap(), "inside the bound the other node may still be open");
    clock.advance_by(1);
    assert!(b.enforced().await.unwrap(), "closed on the other node once the bound has passed");

    let access = b.authenticate(&token).await.unwrap();
    assert_eq!(access.key_id, view.id);
    assert_eq!(access.tenant, "acme");

    clock.advance_by(5);
    a.revoke(&view.id).await.unwrap();
    assert_eq!(a.authenticate(&token).await.unwrap_err(), Refusal::Revoked);
    clock.advance_by(KEY_REFRESH_MS - 6);
    assert!(b.authenticate(&token).await.is_ok(), "inside the bound the other node may still take it");
    clock.advance_by(1);
    assert_eq!(b.authenticate(&token).await.unwrap_err(), Refusal::Revoked, "refused once the bound has passed");
    assert_eq!(b.list().await.unwrap()[0].revoked_ms, Some(T0_MS + KEY_REFRESH_MS + 5));

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop schema");
}

//! The schema registry over real stores: versions numbered in order, registration idempotent,
//! incompatible versions refused with reasons under each mode, the check at the door with its
//! caches on a manual clock, and two nodes registering at once (over one embedded store, and
//! over one PostgreSQL database when `SLUICE_TEST_PG_URL` is set).

use std::sync::Arc;

use serde_json::{Value, json};
use sluice_clock::{Clock, ManualClock};
use sluice_core::name::Namespace;
use sluice_core::{QueueAttributes, QueueAttributesPatch};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::schemas::{Compatibility, SchemaError, Schemas};
use sluice_store::{QueueStore, Store};

const T0_MS: u64 = 1_798_761_600_000;

struct Embedded {
    store: Arc<EmbeddedStore>,
    _dir: tempfile::TempDir,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.store.close();
    }
}

fn embedded() -> Embedded {
    let dir = tempfile::tempdir().unwrap();
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    Embedded { store: Arc::new(EmbeddedStore::open(config).unwrap()), _dir: dir }
}

fn order_v1() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}},
        "required": ["id", "total"],
        "additionalProperties": false,
    })
}

fn order_v2() -> Value {
    let mut v2 = order_v1();
    v2["properties"]["note"] = json!({"type": "string"});
    v2
}

#[tokio::test]
async fn versions_are_numbered_and_registration_is_idempotent() {
    let e = embedded();
    let schemas = Schemas::new(e.store.clone(), Arc::new(ManualClock::new(T0_MS)));
    let first = schemas.register("order.created", &order_v1()).await.unwrap();
    assert_eq!((first.version, first.created), (1, true));
    let again = schemas.register("order.created", &order_v1()).await.unwrap();
    assert_eq!((again.version, again.created), (1, false));
    let second = schemas.register("order.created", &order_v2()).await.unwrap();
    assert_eq!((second.version, second.created), (2, true));
    // The first schema again is still version 1, not a third version.
    assert_eq!(schemas.register("order.created", &order_v1()).await.unwrap().version, 1);

    let view = schemas.get("order.created").await.unwrap();
    assert_eq!(view.versions, vec![1, 2]);
    assert_eq!(view.record.latest, 2);
    assert_eq!(view.record.compatibility, Compatibility::Backward);
    let latest = schemas.version("order.created", None).await.unwrap();
    assert_eq!(latest.version, 2);
    assert_eq!(serde_json::from_str::<Value>(&latest.schema).unwrap(), order_v2());
    assert!(matches!(schemas.version("order.created", Some(3)).await, Err(SchemaError::VersionNotFound { .. })));
    assert!(matches!(schemas.get("nope").await, Err(SchemaError::TypeNotFound(_))));
    let listed: Vec<String> = schemas.list(None, 10).await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(listed, vec!["order.created"]);
}

#[tokio::test]
async fn incompatible_versions_are_refused_with_reasons_under_each_mode() {
    let e = embedded();
    let schemas = Schemas::new(e.store.clone(), Arc::new(ManualClock::new(T0_MS)));
    schemas.register("t", &order_v1()).await.unwrap();
    // A new required property breaks backward compatibility (old messages lack it).
    let mut required = order_v1();
    required["properties"]["currency"] = json!({"type": "string"});
    required["required"] = json!(["id", "total", "currency"]);
    let Err(SchemaError::Incompatible { compatibility, reasons }) = schemas.register("t", &required).await else {
        panic!("a new required property must be refused under backward");
    };
    assert_eq!(compatibility, Compatibility::Backward);
    assert_eq!(reasons[0].version, 1);
    assert_eq!(reasons[0].direction, "backward");
    assert_eq!(reasons[0].incompatibility.kind, "required_added");
    assert!(!schemas.check_compatibility("t", &required).await.unwrap().is_empty());
    // Nothing was written by the refusal.
    assert_eq!(schemas.get("t").await.unwrap().versions, vec![1]);

    // Forward refuses it too, for the other reason: its messages carry `currency`, which the
    // closed version 1 does not allow.
    schemas.set_compatibility("t", Compatibility::Forward).await.unwrap();
    let Err(SchemaError::Incompatible { reasons, .. }) = schemas.register("t", &required).await else {
        panic!("forward must refuse a property a closed earlier schema does not know");
    };
    assert_eq!(reasons[0].direction, "forward");
    assert_eq!(reasons[0].incompatibility.kind, "property_removed_from_closed_model");

    schemas.set_compatibility("t", Compatibility::None).await.unwrap();
    assert_eq!(schemas.register("t", &required).await.unwrap().version, 2);

    // Transitive modes look past the latest version.
    schemas.set_compatibility("t", Compatibility::BackwardTransitive).await.unwrap();
    let mut loose = required.clone();
    loose["required"] = json!(["id", "currency"]);
    // Against v2 only (backward) this is fine: it requires less. Against v1 too: v1 messages
    // lack `currency`, which v3 requires.
    let Err(SchemaError::Incompatible { reasons, .. }) = schemas.register("t", &loose).await else {
        panic!("backward_transitive must check version 1 as well");
    };
    assert!(reasons.iter().all(|r| r.version == 1), "{reasons:?}");
    schemas.set_compatibility("t", Compatibility::Backward).await.unwrap();
    assert_eq!(schemas.register("t", &loose).await.unwrap().version, 3);
}

#[tokio::test]
async fn bad_schemas_and_names_are_refused_before_anything_is_written() {
    let e = embedded();
    let schemas = Schemas::new(e.store.clone(), Arc::new(ManualClock::new(T0_MS)));
    assert!(matches!(schemas.register("t", &json!({"type": "nope"})).await, Err(SchemaError::SchemaInvalid(_))));
    assert!(matches!(
        schemas.register("t", &json!({"$ref": "https://example.com/s.json"})).await,
        Err(SchemaError::SchemaInvalid(_))
    ));
    let huge = json!({"description": "x".repeat(sluice_services::schemas::SCHEMA_BYTES_MAX)});
    assert!(matches!(schemas.register("t", &huge).await, Err(SchemaError::SchemaInvalid(_))));
    assert!(matches!(schemas.register("bad/name", &order_v1()).await, Err(SchemaError::Invalid(_))));
    assert!(schemas.list(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_door_checks_type_version_and_body() {
    let e = embedded();
    let clock = ManualClock::new(T0_MS);
    let schemas = Schemas::new(e.store.clone(), Arc::new(clock.clone()));
    schemas.register("order", &order_v1()).await.unwrap();
    let good = br#"{"id": "o-1", "total": 5}"#;
    assert_eq!(
        schemas.check_message(&Namespace::default(), Some("order"), Some("1"), good, false).await.unwrap(),
        Ok(())
    );
    assert_eq!(schemas.check_message(&Namespace::default(), Some("order"), None, good, false).await.unwrap(), Ok(()));

    let bad = br#"{"id": "o-1", "total": -3}"#;
    let v =
        schemas.check_message(&Namespace::default(), Some("order"), Some("1"), bad, false).await.unwrap().unwrap_err();
    assert_eq!(v.pointer, "/total");
    assert_eq!((v.r#type.as_deref(), v.version), (Some("order"), Some(1)));
    assert!(!v.failures.is_empty());

    for (t, version, body, binary, expect) in [
        (None, None, &good[..], false, "no type"),
        (Some("order"), Some("two"), &good[..], false, "not a schema version"),
        (Some("order"), Some("9"), &good[..], false, "no version 9"),
        (Some("unknown"), None, &good[..], false, "no schema is registered"),
        (Some("order"), None, &b"not json"[..], false, "not JSON"),
        (Some("order"), None, &good[..], true, "binary"),
    ] {
        let v = schemas.check_message(&Namespace::default(), t, version, body, binary).await.unwrap().unwrap_err();
        assert!(v.reason.contains(expect), "{expect}: {v}");
        assert_eq!(v.pointer, "");
    }
}

#[tokio::test]
async fn caches_follow_the_clock_and_changes_made_here() {
    let e = embedded();
    let clock = ManualClock::new(T0_MS);
    let here = Schemas::new(e.store.clone(), Arc::new(clock.clone()));
    // Another node over the same store, whose registrations this one learns of by its cache
    // running out.
    let there = Schemas::new(e.store.clone(), Arc::new(clock.clone()));
    let body = br#"{"id": "o-1", "total": 5}"#;
    let unknown = here.check_message(&Namespace::default(), Some("order"), None, body, false).await.unwrap();
    assert!(unknown.is_err(), "nothing registered yet");
    there.register("order", &order_v1()).await.unwrap();
    // Within the cache's time the type is still unknown here...
    clock.advance_by(sluice_services::schemas::check::CACHE_TTL_MS - 1);
    assert!(here.check_message(&Namespace::default(), Some("order"), None, body, false).await.unwrap().is_err());
    // ...and known once it runs out.
    clock.advance_by(1);
    assert_eq!(here.check_message(&Namespace::default(), Some("order"), None, body, false).await.unwrap(), Ok(()));

    e.store.create_queue("q", QueueAttributes::default()).await.unwrap();
    assert!(!here.queue_validates("q").await.unwrap());
    let patch = QueueAttributesPatch { schema_validation: Some(true), ..Default::default() };
    e.store.update_queue("q", patch).await.unwrap();
    assert!(!here.queue_validates("q").await.unwrap(), "cached for CACHE_TTL_MS");
    here.forget_queue("q");
    assert!(here.queue_validates("q").await.unwrap(), "forgotten after a change made here");
    assert!(!here.queue_validates("missing").await.unwrap());
}

/// Two registries register different schemas for one type at once: each gets its own number,
/// nothing is lost, and the same schema twice is one version.
async fn two_nodes_register_at_once(store: Arc<dyn Store>) {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(T0_MS));
    let (a, b) = (Schemas::new(store.clone(), clock.clone()), Schemas::new(store.clone(), clock.clone()));
    a.set_compatibility("race", Compatibility::None).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..10u32 {
        let node = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let schema = json!({"type": "object", "description": format!("schema {i}")});
            node.register("race", &schema).await.unwrap()
        }));
        let same = if i % 2 == 0 { b.clone() } else { a.clone() };
        tasks.push(tokio::spawn(async move { same.register("race", &json!({"type": "string"})).await.unwrap() }));
    }
    let mut versions = Vec::new();
    for task in tasks {
        let registered = task.await.unwrap();
        if registered.created {
            versions.push(registered.version);
        }
    }
    versions.sort_unstable();
    assert_eq!(versions, (1..=11).collect::<Vec<_>>(), "ten schemas and the shared one, each numbered once");
    assert_eq!(a.get("race").await.unwrap().versions.len(), 11);
}

#[tokio::test]
async fn two_nodes_register_at_once_embedded() {
    let e = embedded();
    two_nodes_register_at_once(e.store.clone()).await;
}

#[tokio::test]
async fn two_nodes_register_at_once_postgres() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return;
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let options = sluice_postgres::PostgresOptions { schema: Some(schema.clone()), ..Default::default() };
    let store: Arc<dyn Store> = Arc::new(
        sluice_postgres::PostgresStore::connect(&url, options)
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}")),
    );
    two_nodes_register_at_once(store).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop schema");
}

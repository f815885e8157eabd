//! API keys over an embedded store on a manual clock: making, checking, revoking, and the bound
//! on a revocation reaching another node (a second `Keys` over the same store).

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;

use super::*;

const START_MS: u64 = 1_700_000_000_000;

fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    (store, dir)
}

fn new_key(scopes: &[&str]) -> NewKey {
    NewKey {
        tenant: Some("acme".to_string()),
        name: "ci".to_string(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        aws: false,
        rate_limit: None,
    }
}

fn send_to(queue: &str) -> Requirement {
    Requirement::new(Kind::Queues, Some(queue.to_string()), Action::Send)
}

#[tokio::test]
async fn the_first_key_turns_authentication_on_and_its_token_proves_its_scopes() {
    let (store, _dir) = store();
    let clock = Arc::new(ManualClock::new(START_MS));
    let keys = Keys::new(store.clone(), clock.clone(), AuthConfig::default());
    assert!(!keys.enforced().await.unwrap(), "no keys, no admin token: open");

    let made = keys.create(new_key(&["queues:orders-*:send,receive"])).await.unwrap();
    let (view, token) = (made.view, made.token);
    assert!(keys.enforced().await.unwrap(), "a key exists: closed at once on the node that made it");
    assert_eq!((view.tenant.as_str(), view.name.as_str()), ("acme", "ci"));
    assert_eq!(view.scopes, vec!["queues:orders-*:send,receive".to_string()]);

    let access = keys.authenticate(&token).await.unwrap();
    assert_eq!(access.key_id, view.id);
    assert_eq!(access.principal, Principal(format!("key:{}", view.id)));
    assert!(access.allows(&send_to("orders-eu")));
    assert!(!access.allows(&send_to("billing")));
    // Checked again from memory: the same answer.
    assert!(keys.authenticate(&token).await.unwrap().allows(&send_to("orders-1")));

    // The right id with another secret, a token of no key, and not a token at all.
    let forged = format!("{}{}_{}", token::TOKEN_PREFIX, view.id, "A".repeat(43));
    assert_eq!(keys.authenticate(&forged).await.unwrap_err(), Refusal::Unknown);
    let (_, stranger) = token::generate();
    assert_eq!(keys.authenticate(&stranger).await.unwrap_err(), Refusal::Unknown);
    assert_eq!(keys.authenticate("hunter2").await.unwrap_err(), Refusal::NotAKey);

    // Listed without the hash; the stored record holds no token either.
    let listed = keys.list().await.unwrap();
    assert_eq!(listed, vec![view.clone()]);
    let raw = store.get_record(API_KEY_KIND, &view.id).await.unwrap().unwrap();
    let raw = String::from_utf8(raw).unwrap();
    assert!(!raw.contains(&token) && !raw.contains(token.rsplit('_').next().unwrap()), "{raw}");
    assert!(raw.contains("$argon2id$"));

    // A second node sees that keys exist on its first question.
    let other = Keys::new(store, clock, AuthConfig::default());
    assert!(other.enforced().await.unwrap());
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once_here_and_within_the_refresh_bound_on_another_node() {
    let (store, _dir) = store();
    let clock = Arc::new(ManualClock::new(START_MS));
    let here = Keys::new(store.clone(), clock.clone(), AuthConfig::default());
    let there = Keys::new(store, clock.clone(), AuthConfig::default());
    let made = here.create(new_key(&["*:*:admin"])).await.unwrap();
    let (view, token) = (made.view, made.token);
    there.authenticate(&token).await.unwrap();

    clock.advance_by(10);
    let revoked = here.revoke(&view.id).await.unwrap();
    assert_eq!(revoked.revoked_ms, Some(START_MS + 10));
    assert_eq!(here.authenticate(&token).await.unwrap_err(), Refusal::Revoked);
    // The other node still holds the record it read, until it is KEY_REFRESH_MS old.
    clock.advance_by(KEY_REFRESH_MS - 20);
    assert!(there.authenticate(&token).await.is_ok(), "inside the bound the old record may still answer");
    clock.advance_by(10);
    assert_eq!(there.authenticate(&token).await.unwrap_err(), Refusal::Revoked);

    // Revoking again answers the same; revoked keys are kept, so authentication stays on.
    assert_eq!(here.revoke(&view.id).await.unwrap(), revoked);
    assert!(here.enforced().await.unwrap());
    assert!(matches!(here.revoke("0123456789abcdef").await, Err(KeyError::NotFound(_))));
    assert!(matches!(here.get("../etc").await, Err(KeyError::NotFound(_))));
}

#[tokio::test]
async fn the_admin_token_grants_everything_and_insecure_mode_asks_for_nothing() {
    let (store, _dir) = store();
    let clock = Arc::new(ManualClock::new(START_MS));
    let config = AuthConfig { admin_token: Some("bootstrap-admin-secret".to_string()), disabled: false };
    let keys = Keys::new(store.clone(), clock.clone(), config);
    assert!(keys.enforced().await.unwrap(), "an admin token turns authentication on with no key stored");
    let admin = keys.authenticate("bootstrap-admin-secret").await.unwrap();
    assert!(admin.allows(&Requirement::new(Kind::Admin, None, Action::Manage)));
    assert_eq!(keys.authenticate("bootstrap-admin-secreT").await.unwrap_err(), Refusal::NotAKey);

    let open = Keys::new(store, clock, AuthConfig { admin_token: None, disabled: true });
    open.create(new_key(&["queues:*:read"])).await.unwrap();
    assert!(!open.enforced().await.unwrap());
}

#[tokio::test]
async fn bad_keys_are_refused_before_anything_is_stored() {
    let (store, _dir) = store();
    let keys = Keys::new(store.clone(), Arc::new(ManualClock::new(START_MS)), AuthConfig::default());
    for (new, field) in [
        (NewKey { tenant: Some("Acme".into()), ..new_key(&["queues:*:read"]) }, "tenant"),
        (NewKey { tenant: Some("-acme".into()), ..new_key(&["queues:*:read"]) }, "tenant"),
        (NewKey { name: String::new(), ..new_key(&["queues:*:read"]) }, "name"),
        (NewKey { name: "x".repeat(KEY_NAME_LEN_MAX + 1), ..new_key(&["queues:*:read"]) }, "name"),
        (new_key(&[]), "scopes"),
        (new_key(&["queues:*:publish"]), "scopes"),
    ] {
        match keys.create(new).await {
            Err(KeyError::Invalid(e)) => assert_eq!(e.field, field),
            other => panic!("expected an invalid {field}: {other:?}"),
        }
    }
    assert!(store.list_records(API_KEY_KIND, "", None, 10).await.unwrap().is_empty());
    assert!(!keys.enforced().await.unwrap());
    // A key made without a tenant is the default tenant's.
    let view = keys.create(NewKey { tenant: None, ..new_key(&["queues:*:read"]) }).await.unwrap().view;
    assert_eq!(view.tenant, DEFAULT_TENANT);
}

#[tokio::test]
async fn a_key_made_with_an_aws_access_key_gives_its_secret_and_scopes_to_sigv4() {
    let (store, _dir) = store();
    let clock = Arc::new(ManualClock::new(START_MS));
    let keys = Keys::new(store, clock.clone(), AuthConfig::default());
    let plain = keys.create(new_key(&["queues:*:read"])).await.unwrap();
    assert_eq!((plain.view.aws_access_key_id.clone(), plain.aws_secret), (None, None));
    let aws_id = token::aws_access_key_id(&plain.view.id);
    assert!(keys.aws_access(&aws_id).await.unwrap().is_none(), "a key without an AWS key signs nothing");

    let made = keys.create(NewKey { aws: true, ..new_key(&["queues:orders:send"]) }).await.unwrap();
    let aws_id = made.view.aws_access_key_id.clone().expect("an AWS access key id");
    let secret = made.aws_secret.clone().expect("an AWS secret");
    let (found, access) = keys.aws_access(&aws_id).await.unwrap().expect("found by its access key id");
    assert_eq!(found, secret);
    assert!(access.allows(&send_to("orders")) && !access.allows(&send_to("billing")));
    assert!(keys.aws_access("SLK0123456789ABCDEF").await.unwrap().is_none());
    keys.revoke(&made.view.id).await.unwrap();
    assert_eq!(keys.aws_access(&aws_id).await.unwrap_err(), Refusal::Revoked);
}

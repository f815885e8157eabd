//! API keys across SIGKILL: clients make keys and revoke some of them while the real
//! `sluice serve` is killed and restarted. A key's record is durable before its 201 and a
//! revocation before its answer, so at the end every key whose making was answered must let its
//! holder in, and every key whose revocation was answered must be refused (a revoked key that
//! came back after a crash would be a hole); keys whose answers the kills cut short may be
//! either way. Each maker also sets its tenant's quotas (a rising `max_resources`): at the end
//! each tenant holds the last answered value or a later one, never an older one or none.
//!
//! `SLUICE_CRASH_KEYS_KILLS` sets the number of kills (default 5); `SLUICE_CRASH_SEED` replays
//! a run's timings; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_KEYS_KILLS=100 cargo test -p sluice --release --test crash_keys -- --nocapture
//! ```

mod torture;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_api::CreateKeyRequest;
use sluice_client::Client;
use torture::{Clients, Killer, kills, seed};

const MAKERS: usize = 2;
/// Most keys each maker makes, so that the final check (one Argon2 verification per key on a
/// fresh node) stays short.
const KEYS_PER_MAKER_MAX: usize = 60;

fn as_key(url: &str, key: &str) -> Client {
    Client::builder(url).api_key(key).attempts(1).build().expect("a client")
}

#[derive(Default)]
struct Ledger {
    /// (id, token) of every key whose making was answered.
    made: Vec<(String, String)>,
    /// Ids of keys whose revocation was answered.
    revoked: Vec<String>,
    /// The last answered `max_resources` of each tenant.
    quotas: std::collections::HashMap<String, u64>,
    unanswered: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_never_loses_an_answered_key_or_brings_back_a_revoked_one() {
    let seed = seed();
    let kill_count = kills("SLUICE_CRASH_KEYS_KILLS", 5);
    println!("seed {seed}, {kill_count} kills (SLUICE_CRASH_SEED={seed} replays this run)");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut killer = Killer::new(seed);
    let mut server = killer.start(dir.path());
    // The first key, made while the server asks for none, turns authentication on.
    let request = CreateKeyRequest {
        tenant: None,
        name: "admin".into(),
        scopes: vec!["*:*:admin".into()],
        aws: false,
        rate_limit: None,
    };
    let admin = Client::new(&server.url).unwrap().create_key(&request).await.expect("the admin key").key;

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut clients = Clients::new(&server.url);
    for m in 0..MAKERS {
        let (ledger, url, stop, admin) = (ledger.clone(), clients.url.clone(), clients.stop.clone(), admin.clone());
        clients.spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) && n < KEYS_PER_MAKER_MAX {
                n += 1;
                let client = as_key(&url.get(), &admin);
                let request = CreateKeyRequest {
                    tenant: Some(format!("maker-{m}")),
                    name: format!("key-{m}-{n}"),
                    scopes: vec!["queues:*:read".into()],
                    aws: false,
                    rate_limit: None,
                };
                let made = match client.create_key(&request).await {
                    Ok(made) => made,
                    Err(_) => {
                        ledger.lock().unwrap().unanswered += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let id = made.api_key.id.clone();
                ledger.lock().unwrap().made.push((id.clone(), made.key));
                if n.is_multiple_of(2) {
                    let tenant = format!("maker-{m}");
                    let quotas = sluice_api::TenantQuotas { max_resources: Some(n as u64), ..Default::default() };
                    match as_key(&url.get(), &admin).set_tenant(&tenant, &quotas).await {
                        Ok(_) => {
                            ledger.lock().unwrap().quotas.insert(tenant, n as u64);
                        }
                        Err(_) => ledger.lock().unwrap().unanswered += 1,
                    }
                }
                if n.is_multiple_of(3) {
                    match as_key(&url.get(), &admin).revoke_key(&id).await {
                        Ok(_) => ledger.lock().unwrap().revoked.push(id),
                        Err(_) => ledger.lock().unwrap().unanswered += 1,
                    }
                }
            }
        });
    }
    for _ in 0..kill_count {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    clients.stop().await;
    println!("{}", killer.summary());

    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let (mut let_in, mut refused) = (0, 0);
    for (id, token) in &ledger.made {
        let answer = as_key(&server.url, token).list_queues(None, None, None).await;
        if ledger.revoked.contains(id) {
            let error = answer.expect_err(&format!("key {id} was revoked, and answered so, before a kill"));
            assert_eq!(error.code(), Some(sluice_api::ErrorCode::Unauthenticated), "{id}: {error}");
            refused += 1;
        } else {
            // Its making was answered; a revocation cut short by a kill may have landed.
            match answer {
                Ok(_) => let_in += 1,
                Err(e) => assert!(
                    e.to_string().contains("revoked"),
                    "key {id}, made and answered, is refused for another reason than a revocation: {e}"
                ),
            }
        }
    }
    for (tenant, answered) in &ledger.quotas {
        let kept = as_key(&server.url, &admin).get_tenant(tenant).await.expect("get tenant").quotas.max_resources;
        assert!(
            kept.is_some_and(|k| k >= *answered),
            "tenant {tenant}: max_resources {answered} was answered, {kept:?} is kept after the kills"
        );
    }
    let listed = as_key(&server.url, &admin).list_keys().await.expect("list keys").keys;
    for (id, _) in &ledger.made {
        assert!(listed.iter().any(|k| &k.id == id), "key {id}, made and answered, is not listed after the kills");
    }
    println!(
        "{} keys made and answered, {} revocations answered; {let_in} let in, {refused} refused at the end; {} answers lost to kills",
        ledger.made.len(),
        ledger.revoked.len(),
        ledger.unanswered
    );
    assert!(
        ledger.made.len() > 10 && !ledger.revoked.is_empty() && !ledger.quotas.is_empty(),
        "too little was answered: the test proved nothing"
    );
    server.kill();
}

//! Crash accounting for sagas: orders are started under their own `Idempotency-Key` while the
//! server is killed with SIGKILL at random (restarted on the same data directory, some restarts
//! killed again during start-up, as in `crash.rs`), against participants that deduplicate by
//! the `Idempotency-Key` every step carries, answer 503 now and then, and decline one charge in
//! four (which must compensate the reservation). The participants are killed at random too:
//! they are reached through a proxy that, now and then, cuts every connection at once and
//! closes new ones for a while, as a participant process killed and restarted would (a call
//! cut short may have taken effect or not; its state, the keys it applied, is kept as a
//! participant's database would keep it).
//!
//! At the end, with nothing killed any more, every instance settles, and:
//! - every order whose start was acknowledged has exactly one instance (a start repeated after
//!   a lost answer started nothing new);
//! - an order whose charge went through is `completed`: reserved, charged, shipped, nothing
//!   undone; an order whose charge was declined is `compensated`: its reservation released
//!   exactly once (as the idempotent participant sees it), never charged or shipped (its
//!   refund may run too, before the release, when a charge attempt was cut short by a kill: the
//!   orchestrator cannot know it did not take effect);
//! - no action reached a participant after that order's compensation had begun.
//!
//! `SLUICE_CRASH_SAGA_KILLS` sets the number of server kills (default 8; participants are
//! killed all along, so a longer run kills them more) and `SLUICE_CRASH_SEED` replays a run's
//! timings; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_SAGA_KILLS=200 cargo test -p sluice --release --test crash_sagas -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sluice_api::{DefineSagaRequest, StartSagaRequest};
use sluice_client::SagaInstanceQuery;
use torture::{Killer, ServerUrl, client};

const KILLS_DEFAULT: u32 = 8;
const PRODUCERS: usize = 2;

/// What the participants saw, by order.
#[derive(Default)]
struct Participants {
    /// Idempotency keys whose effect happened (each at most once).
    applied: Mutex<HashSet<String>>,
    /// Order → the steps whose effect happened, in order ("reserve", "charge", "ship",
    /// "release", "refund").
    effects: Mutex<HashMap<u64, Vec<String>>>,
    /// Actions that took effect after the order's compensation had begun.
    late_actions: Mutex<Vec<String>>,
    /// Requests answered 503 on purpose.
    refused: Mutex<u64>,
    rng: Mutex<Option<StdRng>>,
}

async fn participant(
    State(p): State<Arc<Participants>>,
    Path(step): Path<String>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let order = serde_json::from_str::<Value>(&body).ok().and_then(|b| b["order"].as_u64()).unwrap_or(u64::MAX);
    let (flaky, delay_ms) = {
        let mut rng = p.rng.lock().unwrap();
        let rng = rng.as_mut().expect("seeded");
        (rng.gen_ratio(1, 6), rng.gen_range(0..30))
    };
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    if flaky {
        *p.refused.lock().unwrap() += 1;
        return (StatusCode::SERVICE_UNAVAILABLE, "try again".into());
    }
    let compensation = matches!(step.as_str(), "release" | "refund");
    if step == "charge" && order.is_multiple_of(4) {
        return (StatusCode::PAYMENT_REQUIRED, "card declined".into());
    }
    let mut effects = p.effects.lock().unwrap();
    let seen = effects.entry(order).or_default();
    // The same key again (a retried attempt) changes nothing and answers the same. Only an
    // effect counts as late: an attempt cut short by a participant kill may still reach the
    // participant after a later attempt of it succeeded and compensation began, and then
    // changes nothing.
    if p.applied.lock().unwrap().insert(key) {
        if !compensation && seen.iter().any(|s| s == "release" || s == "refund") {
            p.late_actions.lock().unwrap().push(format!("{step} of order {order} after its compensation"));
        }
        seen.push(step.clone());
    }
    (StatusCode::OK, json!({ "id": format!("{step}-{order}") }).to_string())
}

fn definition(url: &str) -> DefineSagaRequest {
    let call =
        |path: &str| json!({ "http": { "url": format!("{url}/{path}"), "body": { "order": "{{input.order}}" } } });
    let retry = json!({ "max_attempts": 50, "backoff": { "initial_ms": 50, "max_ms": 500 } });
    serde_json::from_value(json!({ "steps": [
        { "name": "reserve", "action": call("reserve"), "compensation": call("release"), "retry": retry, "timeout_ms": 2000 },
        { "name": "charge", "action": call("charge"), "compensation": call("refund"), "retry": retry, "timeout_ms": 2000 },
        { "name": "ship", "action": call("ship"), "retry": retry, "timeout_ms": 2000 },
    ]}))
    .expect("a definition")
}

/// The participants' "process": a proxy in front of them on `listener` that, while `killing`,
/// is killed every 150 to 600 ms: every connection through it is cut at once, and for 50 to
/// 300 ms every new connection is closed as soon as it is made (the participant is down),
/// before it serves again. Once `killing` is off it only serves, until aborted. Counts the
/// kills in `kills`.
async fn participants_proxy(
    listener: tokio::net::TcpListener,
    backend: std::net::SocketAddr,
    seed: u64,
    killing: Arc<AtomicBool>,
    kills: Arc<AtomicU32>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let mut connections = tokio::task::JoinSet::new();
        let life = tokio::time::sleep(Duration::from_millis(rng.gen_range(150..600)));
        tokio::pin!(life);
        let mut alive = true;
        while alive {
            tokio::select! {
                _ = &mut life, if killing.load(Ordering::Relaxed) => alive = false,
                accepted = listener.accept() => {
                    let Ok((mut inbound, _)) = accepted else { continue };
                    connections.spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                }
                // Looks at `killing` again now and then once its life is over.
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        // Killed: every connection cut mid-call.
        drop(connections);
        kills.fetch_add(1, Ordering::Relaxed);
        let down = tokio::time::sleep(Duration::from_millis(rng.gen_range(50..300)));
        tokio::pin!(down);
        loop {
            tokio::select! {
                _ = &mut down => break,
                accepted = listener.accept() => drop(accepted),
            }
        }
    }
}

/// Starts orders until `stop`; a start whose answer was lost is sent again under its key.
async fn producer(
    index: usize,
    url: Arc<ServerUrl>,
    acknowledged: Arc<Mutex<HashMap<u64, String>>>,
    stop: Arc<AtomicBool>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let order = (n * PRODUCERS as u64) + index as u64 + 1;
        n += 1;
        let request =
            StartSagaRequest { input: json!({ "order": order }), correlation_id: Some(format!("order-{order}")) };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match client(&url.get()).start_saga_with_key("order", &request, &format!("order-{order}")).await {
                Ok(instance) => {
                    acknowledged.lock().unwrap().insert(order, instance.id);
                    break;
                }
                Err(e) => {
                    assert!(Instant::now() < deadline, "order {order} could not be started: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_sagas_ends_every_instance_completed_or_compensated_once() {
    let kills = torture::kills("SLUICE_CRASH_SAGA_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("saga crash test: {kills} server kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let started = Instant::now();
    let participants =
        Arc::new(Participants { rng: Mutex::new(Some(StdRng::seed_from_u64(seed ^ 0x7361))), ..Default::default() });
    let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_address = backend.local_addr().unwrap();
    let app = Router::new().route("/{step}", axum::routing::post(participant)).with_state(participants.clone());
    tokio::spawn(async move { axum::serve(backend, app).await });
    // The saga calls the participants through the proxy that kills them.
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", proxy.local_addr().unwrap());
    let (killing, participant_kills) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let participants_process = tokio::spawn(participants_proxy(
        proxy,
        backend_address,
        seed ^ 0x6b69,
        killing.clone(),
        participant_kills.clone(),
    ));

    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = killer.start(dir.path());
    client(&server.url).define_saga("order", &definition(&url)).await.expect("define");
    let server_url = Arc::new(ServerUrl::new(&server.url));
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(HashMap::new()));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| tokio::spawn(producer(i, server_url.clone(), acknowledged.clone(), stop.clone())))
        .collect();
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &server_url).await;
    }
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.await.expect("producer");
    }

    // No more kills: every instance settles.
    killing.store(false, Ordering::Relaxed);
    let participant_kills = participant_kills.load(Ordering::Relaxed);
    let acknowledged = acknowledged.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(180);
    let instances = loop {
        let mut all = Vec::new();
        let mut query = SagaInstanceQuery { saga: Some("order".into()), limit: Some(1_000), ..Default::default() };
        loop {
            let page = client(&server.url).list_saga_instances(&query).await.expect("list");
            all.extend(page.instances);
            match page.next_token {
                Some(t) => query.next_token = Some(t),
                None => break,
            }
        }
        let open = all.iter().filter(|i| i.status == "running" || i.status == "compensating").count();
        if open == 0 {
            break all;
        }
        assert!(Instant::now() < deadline, "{open} instances never settled (seed {seed}); log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let mut by_order: HashMap<u64, Vec<&sluice_api::SagaInstance>> = HashMap::new();
    for i in &instances {
        let order = i.input["order"].as_u64().expect("an order");
        by_order.entry(order).or_default().push(i);
    }
    let effects = participants.effects.lock().unwrap().clone();
    let (mut completed, mut compensated, mut refunds_of_unsure_charges) = (0, 0, 0);
    for (order, id) in &acknowledged {
        let found = by_order.get(order).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(found.len(), 1, "order {order} has {} instances (seed {seed})", found.len());
        assert_eq!(&found[0].id, id, "order {order}: the acknowledged instance");
        let seen: Vec<&str> = effects.get(order).map(|e| e.iter().map(String::as_str).collect()).unwrap_or_default();
        if order.is_multiple_of(4) {
            assert_eq!(found[0].status, "compensated", "order {order} (seed {seed}): {:?}", found[0]);
            // A charge attempt cut short by a kill may have taken effect as far as the
            // orchestrator knows, so its refund may run too (before the release: reverse order).
            let without_refund: Vec<&str> = seen.iter().copied().filter(|s| *s != "refund").collect();
            assert_eq!(without_refund, ["reserve", "release"], "order {order} (seed {seed}): {seen:?}");
            if let Some(refund) = seen.iter().position(|s| *s == "refund") {
                assert_eq!(refund, 1, "order {order}: the refund comes before the release (seed {seed}): {seen:?}");
                refunds_of_unsure_charges += 1;
            }
            compensated += 1;
        } else {
            assert_eq!(found[0].status, "completed", "order {order} (seed {seed}): {:?}", found[0]);
            assert_eq!(seen, ["reserve", "charge", "ship"], "order {order} (seed {seed})");
            completed += 1;
        }
    }
    // An instance whose start was never acknowledged (its producer stopped first) still settles
    // by the same rules; nothing else may exist.
    assert!(by_order.values().all(|v| v.len() == 1), "an order started twice (seed {seed})");
    let late = participants.late_actions.lock().unwrap().clone();
    assert!(late.is_empty(), "actions after compensation (seed {seed}): {late:?}");
    println!(
        "saga crash test: {} orders acknowledged ({completed} completed, {compensated} compensated, {refunds_of_unsure_charges} of them also refunded after a charge attempt cut short), {} instances, {} participant 503s, {participant_kills} participant kills; {}; {:.1} s",
        acknowledged.len(),
        instances.len(),
        participants.refused.lock().unwrap(),
        killer.summary(),
        started.elapsed().as_secs_f64()
    );
    assert!(acknowledged.len() >= 10, "too few orders to say anything (seed {seed})");
    assert!(participant_kills > 0, "the participants were never killed (seed {seed})");
    participants_process.abort();
}

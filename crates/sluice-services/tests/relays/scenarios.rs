//! The scenarios every source runs, written once over [`Outbox`].

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_services::relays::AfterPublish;

use crate::outbox::{Outbox, insert_one};
use crate::support::{Fixture, check_delivery, drain, eventually, spec};

/// Rows written before and while the relay runs arrive in order, and are deleted or marked.
pub async fn in_order<O: Outbox>(outbox: &O, after_publish: AfterPublish) {
    let f = Fixture::new().await;
    let mut written = Vec::new();
    for i in 0..30 {
        let aggregate = format!("order-{}", i % 3);
        let body = format!("{{\"n\":{i}}}");
        written.push((insert_one(outbox, &aggregate, &body).await, aggregate, body));
    }
    let spec =
        sluice_services::relays::RelaySpec { after_publish, batch_max: 7, ..spec("r", &outbox.url(), &outbox.table()) };
    let (_, created) = f.services().create_relay(spec).await.expect("create the relay");
    assert!(created);
    for i in 30..45 {
        let aggregate = format!("order-{}", i % 3);
        let body = format!("{{\"n\":{i}}}");
        written.push((insert_one(outbox, &aggregate, &body).await, aggregate, body));
    }
    let got = drain(&f.store, "out", written.len()).await;
    assert_eq!(check_delivery(&written, &got), 0, "no duplicates without crashes");
    eventually("every row finished", || async { outbox.unpublished().await == 0 }).await;
    let marked = outbox.marked().await;
    match after_publish {
        AfterPublish::Mark => assert_eq!(marked, written.len() as u64, "every row marked"),
        AfterPublish::Delete => assert_eq!(marked, 0, "every row deleted"),
    }
    eventually("the state to count them", || async {
        f.services().relay("r").await.expect("relay").state.published == written.len() as u64
    })
    .await;
}

/// A transaction that commits after a later-numbered row of its aggregate (and of another)
/// was committed: its row is not skipped, and its aggregate's rows arrive in order, because
/// the source's barrier keeps the poll from reading past the open transaction.
pub async fn late_commit<O: Outbox>(outbox: &O) {
    assert!(outbox.concurrent_writers());
    let f = Fixture::new().await;
    f.services().create_relay(spec("r", &outbox.url(), &outbox.table())).await.expect("create the relay");
    let mut early = outbox.begin().await;
    let a1 = outbox.insert(&mut early, "a", "a1").await;
    let a2 = insert_one(outbox, "a", "a2").await;
    let b1 = insert_one(outbox, "b", "b1").await;
    assert!(a1 < a2 || a1.len() < a2.len(), "the open transaction's row is numbered first ({a1}, {a2})");
    // Ten polls go by: none may read past the open row.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let early_view = f.services().relay("r").await.expect("relay");
    assert_eq!(early_view.state.published, 0, "nothing published past an open transaction's row");
    outbox.commit(early).await;
    let got = drain(&f.store, "out", 3).await;
    let written = [(a1, "a".into(), "a1".into()), (a2, "a".into(), "a2".into()), (b1, "b".into(), "b1".into())];
    assert_eq!(check_delivery(&written, &got), 0);
}

/// Writers commit out of order on purpose (random pauses inside their transactions, and one
/// transaction held open while the others go on) while the relay runs: every row arrives,
/// in write order per aggregate. Each aggregate has one writer, as an application that
/// serialises an aggregate's changes has.
pub async fn concurrent<O: Outbox>(outbox: &O, seed: u64) {
    let f = Fixture::new().await;
    f.services().create_relay(spec("r", &outbox.url(), &outbox.table())).await.expect("create the relay");
    let written: Mutex<Vec<(String, String, String)>> = Mutex::new(Vec::new());
    let writers = if outbox.concurrent_writers() { 4 } else { 2 };
    let transactions = 25;
    let work = (0..writers).map(|w| {
        let written = &written;
        async move {
            let mut rng = StdRng::seed_from_u64(seed + w);
            for t in 0..transactions {
                let aggregate = format!("w{w}-{}", rng.gen_range(0..3));
                let mut tx = outbox.begin().await;
                let mut rows = Vec::new();
                for r in 0..rng.gen_range(1..=3) {
                    let body = format!("{aggregate}/{t}/{r}");
                    rows.push((outbox.insert(&mut tx, &aggregate, &body).await, aggregate.clone(), body));
                }
                // The first writer holds its fifth transaction open while the others commit.
                let hold_ms = if w == 0 && t == 4 { 300 } else { rng.gen_range(0..8) };
                if outbox.concurrent_writers() {
                    tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                }
                outbox.commit(tx).await;
                written.lock().unwrap().extend(rows);
            }
        }
    });
    futures::future::join_all(work).await;
    let written = written.into_inner().unwrap();
    let got = drain(&f.store, "out", written.len()).await;
    assert_eq!(check_delivery(&written, &got), 0, "seed {seed}");
    eventually("every row finished", || async { outbox.unpublished().await == 0 }).await;
}

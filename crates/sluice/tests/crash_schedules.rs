//! Crash accounting for schedules: a schedule firing every 100 ms into a queue while the real
//! `sluice serve` is killed with SIGKILL at random moments (a third of the restarts killed again
//! during start-up) and restarted on the same data directory. A tick and the record that it
//! fired are one commit, so however the kills fall, every tick from the first to the last fires
//! exactly once: the queue must hold each of them once (no tick doubled), none missing between
//! them (none vanished; `catch_up: all`, and downtime stays inside the misfire grace), and as
//! many as the schedule counted.
//!
//! `SLUICE_CRASH_SCHEDULE_KILLS` sets the number of kills (default 30) and `SLUICE_CRASH_SEED`
//! replays a run's kill timings; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_SCHEDULE_KILLS=300 cargo test -p sluice --release --test crash_schedules -- --nocapture
//! ```

mod torture;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use sluice_api::{CatchUp, CreateQueueRequest, CreateScheduleRequest, ScheduleTarget, SendMessage};
use torture::{Killer, ServerUrl, client};

const QUEUE: &str = "ticks";
const SCHEDULE: &str = "crash-pulse";
const EVERY_MS: u64 = 100;
const KILLS_DEFAULT: u32 = 30;

fn tick_ms(rfc3339: &str) -> u64 {
    let at = humantime::parse_rfc3339(rfc3339).unwrap_or_else(|e| panic!("scheduled_at {rfc3339:?}: {e}"));
    at.duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_a_schedule_fires_neither_doubles_nor_loses_a_tick() {
    let kills = torture::kills("SLUICE_CRASH_SCHEDULE_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("schedule crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();

    let mut server = killer.start(dir.path());
    let c = server.client();
    c.create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() }).await.expect("queue");
    let request = CreateScheduleRequest {
        name: SCHEDULE.into(),
        cron: None,
        every_ms: Some(EVERY_MS),
        timezone: None,
        target: ScheduleTarget { queue: Some(QUEUE.into()), ..Default::default() },
        message: SendMessage { body: Some("tick".into()), ..Default::default() },
        catch_up: CatchUp::All,
        start_at: None,
        end_at: None,
    };
    let first = c.create_schedule(&request).await.expect("schedule").schedule.next_fire_at_ms.expect("a first tick");
    let url = ServerUrl::new(&server.url);
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &url).await;
    }
    // Let the last restart catch up, then stop the schedule where it is.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = client(&server.url);
    let view = c.pause_schedule(SCHEDULE).await.expect("pause");
    let last = tick_ms(view.last_tick_at.as_deref().expect("ticks fired"));

    // Every message in the queue, by tick.
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    loop {
        let got = c.receive(QUEUE, 10, 0).await.expect("receive");
        if got.is_empty() {
            break;
        }
        for m in &got {
            *seen.entry(tick_ms(&m.attributes["scheduled_at"].value)).or_default() += 1;
        }
        c.ack(QUEUE, got.into_iter().filter_map(|m| m.receipt)).await.expect("ack");
    }
    let doubled: Vec<u64> = seen.iter().filter(|(_, n)| **n > 1).map(|(t, _)| *t).collect();
    let expected: Vec<u64> = (first..=last).step_by(EVERY_MS as usize).collect();
    let missing: Vec<u64> = expected.iter().copied().filter(|t| !seen.contains_key(t)).collect();
    let stray: Vec<u64> = seen.keys().copied().filter(|t| !expected.contains(t)).collect();
    println!(
        "schedule crash test: {} in {:.1?}; ticks {} (fired {}, skipped {}), in the queue {}, doubled {}, missing {}, stray {}",
        killer.summary(),
        started.elapsed(),
        expected.len(),
        view.fired,
        view.skipped,
        seen.values().sum::<u32>(),
        doubled.len(),
        missing.len(),
        stray.len()
    );
    assert!(expected.len() > 40, "too few ticks to prove anything ({})", expected.len());
    assert!(killer.startup_kills > 0 || kills < 10, "no restart was killed during start-up (seed {seed})");
    assert!(doubled.is_empty(), "ticks fired twice (seed {seed}): {doubled:?}");
    assert!(missing.is_empty(), "ticks that never fired (seed {seed}): {missing:?}");
    assert!(stray.is_empty(), "messages of no tick (seed {seed}): {stray:?}");
    assert_eq!((view.fired, view.skipped), (expected.len() as u64, 0), "the schedule counted every tick once");
}

//! Schedules on a manual clock over real stores: every tick fires exactly once, on time, across
//! restarts of the services and of the store, with each catch-up policy after downtime, into a
//! topic, into a stream and into a job queue, after a missing target appears, and with two nodes racing for every
//! tick (two services over one embedded store, and over one PostgreSQL database when
//! `SLUICE_TEST_PG_URL` is set).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_clock::{Clock, ManualClock};
use sluice_core::QueueAttributes;
use sluice_core::message::{AttributeData, MessageContent};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::schedules::{CatchUp, Definition, SCHEDULED_AT_ATTRIBUTE, ScheduleError, Target};
use sluice_services::topics::{Arns, Endpoint, Origin};
use sluice_services::{Running, Services, ServicesConfig};
use sluice_store::{ReceiveRequest, Store};

/// 2027-01-01T00:00:00Z.
const T0_MS: u64 = 1_798_761_600_000;
const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;

fn origin() -> Origin {
    Origin { base_url: "http://127.0.0.1:9324".into(), sender: "000000000000".into() }
}

fn services(store: &Arc<dyn Store>, clock: &ManualClock) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    Services::new(store.clone(), Arc::new(clock.clone()), ServicesConfig::new(arns))
}

fn every(name: &str, every_ms: u64, target: Target, catch_up: CatchUp) -> Definition {
    Definition {
        name: name.into(),
        cron: None,
        timezone: "UTC".into(),
        every_ms: Some(every_ms),
        target,
        message: MessageContent {
            body: format!("tick of {name}").into_bytes(),
            body_binary: false,
            attributes: BTreeMap::new(),
            system_attributes: BTreeMap::new(),
            envelope: Default::default(),
        },
        priority: 0,
        catch_up,
        start_at_ms: None,
        end_at_ms: None,
    }
}

fn queue(name: &str) -> Target {
    Target::Queue(name.into())
}

struct Embedded {
    dir: tempfile::TempDir,
}

impl Embedded {
    fn new() -> Embedded {
        Embedded { dir: tempfile::tempdir().expect("temp dir") }
    }

    fn open(&self, clock: &ManualClock) -> Arc<dyn Store> {
        let config = EmbeddedConfig { data_dir: self.dir.path().to_path_buf(), durability: Durability::Fsync };
        Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"))
    }
}

/// Every message now in `queue`, received and acked: their ticks (`scheduled_at`), in order.
async fn drain_ticks(store: &Arc<dyn Store>, queue: &str) -> Vec<String> {
    let mut ticks = Vec::new();
    loop {
        let request = ReceiveRequest { max: 100, wait_ms: Some(0), visibility_timeout_ms: Some(600_000) };
        let got = store.receive(queue, request).await.expect("receive");
        if got.is_empty() {
            return ticks;
        }
        for m in &got {
            match &m.message.content.attributes[SCHEDULED_AT_ATTRIBUTE].value {
                AttributeData::Text(t) => ticks.push(t.clone()),
                other => panic!("scheduled_at is text: {other:?}"),
            }
        }
        store.ack(queue, got.into_iter().map(|m| m.receipt).collect()).await.expect("ack");
    }
}

/// Waits (real time) until `queue` holds `count` visible messages, then a little longer to
/// see that no more come.
async fn settles_at(store: &Arc<dyn Store>, queue: &str, count: u64) {
    let visible = || async { store.get_queue(queue).await.expect("queue").stats.visible };
    for _ in 0..500 {
        if visible().await >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(visible().await, count, "messages in {queue}");
}

fn rfc(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

async fn stop(services: &Arc<Services>, running: Running) {
    services.stop();
    running.join().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tick_fires_once_at_its_time_and_carries_it() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    store.create_queue("q", QueueAttributes::default()).await.expect("queue");
    let node = services(&store, &clock);
    let (view, created) =
        node.schedules().create(every("s", 10 * SECOND, queue("q"), CatchUp::None), &origin()).await.unwrap();
    assert!(created);
    assert_eq!(view.upcoming_ms[..3], [T0_MS, T0_MS + 10 * SECOND, T0_MS + 20 * SECOND]);
    let running = node.start();
    settles_at(&store, "q", 1).await;
    for step in 1..=3 {
        clock.advance_to(T0_MS + step * 10 * SECOND - 1);
        settles_at(&store, "q", step).await;
        clock.advance_to(T0_MS + step * 10 * SECOND);
        settles_at(&store, "q", step + 1).await;
    }
    let expected: Vec<String> = (0..4).map(|i| rfc(T0_MS + i * 10 * SECOND)).collect();
    assert_eq!(drain_ticks(&store, "q").await, expected);
    let view = node.schedules().get("s").await.unwrap();
    assert_eq!((view.record.state.fired, view.record.state.skipped), (4, 0));
    assert_eq!(view.record.state.next_tick_ms, Some(T0_MS + 40 * SECOND));

    // Paused, nothing fires; resumed, the ticks of the pause are not caught up.
    node.schedules().pause("s").await.unwrap();
    clock.advance_to(T0_MS + 70 * SECOND);
    settles_at(&store, "q", 0).await;
    let resumed = node.schedules().resume("s").await.unwrap();
    assert_eq!(resumed.record.state.next_tick_ms, Some(T0_MS + 70 * SECOND));
    settles_at(&store, "q", 1).await;
    assert_eq!(drain_ticks(&store, "q").await, [rfc(T0_MS + 70 * SECOND)]);
    stop(&node, running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_two_ticks_fires_the_next_one_once() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    store.create_queue("q", QueueAttributes::default()).await.expect("queue");
    let node = services(&store, &clock);
    node.schedules().create(every("s", MINUTE, queue("q"), CatchUp::None), &origin()).await.unwrap();
    let running = node.start();
    settles_at(&store, "q", 1).await;
    stop(&node, running).await;
    drop(node);
    // The store restarts too: the schedule and its state come back from disk.
    tokio::task::spawn_blocking(move || drop(store)).await.unwrap();
    clock.advance_to(T0_MS + MINUTE + 30 * SECOND);
    let store = backend.open(&clock);
    let node = services(&store, &clock);
    let running = node.start();
    settles_at(&store, "q", 2).await;
    assert_eq!(drain_ticks(&store, "q").await, [rfc(T0_MS), rfc(T0_MS + MINUTE)]);
    stop(&node, running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_downtime_each_catch_up_policy_fires_what_it_says() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    for (name, catch_up) in [("none", CatchUp::None), ("latest", CatchUp::Latest), ("all", CatchUp::All)] {
        store.create_queue(name, QueueAttributes::default()).await.expect("queue");
        let node = services(&store, &clock);
        node.schedules().create(every(name, MINUTE, queue(name), catch_up), &origin()).await.unwrap();
    }
    // Down from the start: 00:00 to 00:04 are missed, 00:05 is on time at 00:05:30.
    clock.advance_to(T0_MS + 5 * MINUTE + 30 * SECOND);
    let node = services(&store, &clock);
    let running = node.start();
    settles_at(&store, "all", 6).await;
    settles_at(&store, "latest", 2).await;
    settles_at(&store, "none", 1).await;
    assert_eq!(drain_ticks(&store, "none").await, [rfc(T0_MS + 5 * MINUTE)]);
    assert_eq!(drain_ticks(&store, "latest").await, [rfc(T0_MS + 4 * MINUTE), rfc(T0_MS + 5 * MINUTE)]);
    let all: Vec<String> = (0..6).map(|m| rfc(T0_MS + m * MINUTE)).collect();
    assert_eq!(drain_ticks(&store, "all").await, all);
    let skipped = |name: &'static str| {
        let node = node.clone();
        async move { node.schedules().get(name).await.unwrap().record.state.skipped }
    };
    assert_eq!((skipped("none").await, skipped("latest").await, skipped("all").await), (5, 4, 0));
    stop(&node, running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_target_and_a_target_that_appears_later() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    let node = services(&store, &clock);
    for q in ["a", "b"] {
        store.create_queue(q, QueueAttributes::default()).await.expect("queue");
    }
    node.topics().create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.expect("topic");
    let raw = BTreeMap::from([("RawMessageDelivery".to_string(), "true".to_string())]);
    for q in ["a", "b"] {
        node.topics().subscribe("t", Endpoint::Queue(q.into()), &raw, &origin()).await.expect("subscribe");
    }
    node.schedules().create(every("fan", MINUTE, Target::Topic("t".into()), CatchUp::None), &origin()).await.unwrap();
    // Into a queue that does not exist yet: the tick waits for it rather than vanishing.
    node.schedules().create(every("late", MINUTE, queue("later"), CatchUp::None), &origin()).await.unwrap();
    let running = node.start();
    settles_at(&store, "a", 1).await;
    settles_at(&store, "b", 1).await;
    assert_eq!(drain_ticks(&store, "a").await, [rfc(T0_MS)]);
    let failing = node.schedules().get("late").await.unwrap();
    assert_eq!(failing.record.state.fired, 0);
    assert!(failing.record.state.last_error.is_some(), "the failure is shown: {:?}", failing.record.state);
    store.create_queue("later", QueueAttributes::default()).await.expect("queue");
    clock.advance_to(T0_MS + 10 * SECOND);
    settles_at(&store, "later", 1).await;
    assert_eq!(drain_ticks(&store, "later").await, [rfc(T0_MS)]);
    assert_eq!(node.schedules().get("late").await.unwrap().record.state.last_error, None);
    stop(&node, running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_definitions_are_refused_and_the_same_one_twice_is_one_schedule() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    let node = services(&store, &clock);
    let s = node.schedules();
    let base = every("s", MINUTE, queue("q"), CatchUp::None);
    assert!(s.create(base.clone(), &origin()).await.unwrap().1);
    assert!(!s.create(base.clone(), &origin()).await.unwrap().1, "the same definition again");
    let other = Definition { every_ms: Some(2 * MINUTE), ..base.clone() };
    assert!(matches!(s.create(other, &origin()).await, Err(ScheduleError::Exists(_))));
    let field = |r: Result<_, ScheduleError>| match r {
        Err(ScheduleError::Invalid(v)) => v.field,
        other => panic!("refused as invalid: {other:?}"),
    };
    let named = |name: &str| Definition { name: name.into(), ..base.clone() };
    assert_eq!(field(s.create(named("bad name!"), &origin()).await), "name");
    let cron = |expr: &str, zone: &str| Definition {
        cron: Some(expr.into()),
        every_ms: None,
        timezone: zone.into(),
        ..named("c")
    };
    assert_eq!(field(s.create(cron("* * *", "UTC"), &origin()).await), "cron");
    assert_eq!(field(s.create(cron("0 9 * * *", "Nowhere/City"), &origin()).await), "timezone");
    assert_eq!(field(s.create(Definition { every_ms: Some(1), ..named("fast") }, &origin()).await), "every_ms");
    let both = Definition { cron: Some("0 * * * *".into()), ..named("both") };
    assert_eq!(field(s.create(both, &origin()).await), "cron");
    let window = Definition { start_at_ms: Some(T0_MS + 1), end_at_ms: Some(T0_MS), ..named("w") };
    assert_eq!(field(s.create(window, &origin()).await), "end_at");
    let huge = MessageContent { body: vec![b'x'; 300 * 1024], ..base.message.clone() };
    assert_eq!(field(s.create(Definition { message: huge, ..named("huge") }, &origin()).await), "message");
    assert!(matches!(
        s.create(every("t", MINUTE, Target::Topic("none".into()), CatchUp::None), &origin()).await,
        Err(ScheduleError::Topic(_))
    ));
    assert!(matches!(s.get("nope").await, Err(ScheduleError::NotFound(_))));
    assert!(s.delete("s").await.unwrap());
    assert!(!s.delete("s").await.unwrap());
}

/// Waits (real time) until stream `name` holds `count` records in all, then a little longer
/// to see that no more come.
async fn stream_settles_at(store: &Arc<dyn Store>, name: &str, count: u64) {
    let records = || async {
        let view = store.get_stream(name).await.expect("stream");
        view.partitions.iter().map(|p| p.next_offset - p.first_offset).sum::<u64>()
    };
    for _ in 0..500 {
        if records().await >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(records().await, count, "records in {name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_target_appends_each_tick_once_keyed_by_the_schedule() {
    use sluice_core::stream::StreamConfig;
    use sluice_core::stream::partitioner::partition_for_key;
    use sluice_store::{ReadFrom, ReadRequest};

    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    let node = services(&store, &clock);
    let stream = || Target::Stream("audit".into());
    node.schedules().create(every("s", MINUTE, stream(), CatchUp::All), &origin()).await.unwrap();
    // The stream does not exist yet: the tick waits for it, and says why.
    let running = node.start();
    let mut error = None;
    for _ in 0..500 {
        error = node.schedules().get("s").await.unwrap().record.state.last_error;
        if error.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(error.as_deref().is_some_and(|e| e.contains("audit")), "the failure names the stream: {error:?}");
    store.create_stream("audit", StreamConfig { partitions: 4, ..Default::default() }).await.expect("stream");
    clock.advance_to(T0_MS + 10 * SECOND);
    stream_settles_at(&store, "audit", 1).await;
    for minute in 1..=2 {
        clock.advance_to(T0_MS + minute * MINUTE);
        stream_settles_at(&store, "audit", minute + 1).await;
    }
    stop(&node, running).await;
    drop(node);
    // A restart of the services and the store between ticks neither repeats nor loses one.
    tokio::task::spawn_blocking(move || drop(store)).await.unwrap();
    clock.advance_to(T0_MS + 2 * MINUTE + 30 * SECOND);
    let store = backend.open(&clock);
    let node = services(&store, &clock);
    let running = node.start();
    stream_settles_at(&store, "audit", 3).await;
    clock.advance_to(T0_MS + 3 * MINUTE);
    stream_settles_at(&store, "audit", 4).await;
    stop(&node, running).await;

    // Every tick in the schedule's key's partition, in tick order, carrying its tick.
    let partition = partition_for_key(b"s", 4);
    let request = ReadRequest { partition, from: ReadFrom::Offset(0), max: 100, wait_ms: 0 };
    let records = store.read("audit", request).await.expect("read").records;
    let ticks: Vec<u64> = (0..4).map(|m| T0_MS + m * MINUTE).collect();
    assert_eq!(records.len(), ticks.len(), "{records:?}");
    for (r, (offset, tick)) in records.iter().zip(ticks.iter().enumerate()) {
        assert_eq!((r.offset, r.key.as_deref()), (offset as u64, Some(&b"s"[..])));
        assert_eq!(r.body, b"tick of s");
        assert_eq!(r.headers.get(SCHEDULED_AT_ATTRIBUTE), Some(&rfc(*tick)));
        assert_eq!(r.headers.get("sluice.schedule").map(String::as_str), Some("s"));
        assert_eq!(r.dedup_id, Some(format!("s/{tick}")));
    }
    let view = node.schedules().get("s").await.unwrap();
    assert_eq!((view.record.state.fired, view.record.state.last_error), (4, None));
}

/// The jobs in `queue` now, oldest first.
async fn jobs_in(store: &Arc<dyn Store>, queue: &str) -> Vec<sluice_store::JobView> {
    use sluice_core::jobs::JobFilter;
    let filter = JobFilter { queue: Some(queue.into()), ..JobFilter::default() };
    let request = sluice_store::JobListRequest { filter, tag: None, after: None, limit: 100 };
    let mut jobs = store.list_jobs(request).await.expect("list jobs").jobs;
    jobs.sort_by_key(|j| j.record.id);
    jobs
}

async fn jobs_settle_at(store: &Arc<dyn Store>, queue: &str, count: usize) {
    for _ in 0..500 {
        if jobs_in(store, queue).await.len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(jobs_in(store, queue).await.len(), count, "jobs in {queue}");
}

/// A job target enqueues one job per tick, payload from the message body, the tick in its tags
/// and unique key; two nodes race for every tick, and a tick whose job is already there (a crash
/// after the enqueue and before the schedule's record was swapped leaves exactly that) adds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_target_enqueues_each_tick_once() {
    use sluice_core::jobs::NewJob;
    use sluice_services::schedules::JobTarget;

    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    let target = JobTarget {
        queue: "reports".into(),
        job_type: "build-report".into(),
        priority: None,
        timeout_ms: None,
        max_attempts: Some(3),
    };
    let mut definition = every("nightly", MINUTE, Target::Job(target.clone()), CatchUp::All);
    definition.message.body = b"{\"period\":\"day\"}".to_vec();
    let a = services(&store, &clock);
    let b = services(&store, &clock);

    let not_json = Definition {
        message: MessageContent { body: b"tick".to_vec(), ..definition.message.clone() },
        ..definition.clone()
    };
    match a.schedules().create(not_json, &origin()).await {
        Err(ScheduleError::Invalid(v)) => assert_eq!(v.field, "message.body"),
        other => panic!("a job payload that is not JSON is refused: {other:?}"),
    }
    let bad_type = Definition {
        target: Target::Job(JobTarget { job_type: String::new(), ..target.clone() }),
        ..definition.clone()
    };
    match a.schedules().create(bad_type, &origin()).await {
        Err(ScheduleError::Invalid(v)) => assert_eq!(v.field, "target.job.type"),
        other => panic!("an empty job type is refused: {other:?}"),
    }

    a.schedules().create(definition, &origin()).await.unwrap();
    // As a crash between the enqueue and the record's swap would leave it: the job of the
    // second tick is there before the tick fires.
    let early = NewJob {
        queue: "reports".into(),
        job_type: "build-report".into(),
        payload: b"{\"period\":\"day\"}".to_vec(),
        unique_key: Some(format!("schedule/nightly/{}", T0_MS + MINUTE)),
        unique_for_ms: Some(sluice_core::jobs::limits::JOB_UNIQUE_FOR_MS_MAX),
        ..NewJob::default()
    };
    assert!(store.enqueue_job(early).await.expect("enqueue").created);
    let (running_a, running_b) = (a.start(), b.start());
    jobs_settle_at(&store, "reports", 2).await;
    for minute in 1..=3 {
        clock.advance_to(T0_MS + minute * MINUTE);
        jobs_settle_at(&store, "reports", if minute == 1 { 2 } else { minute as usize + 1 }).await;
    }
    stop(&a, running_a).await;
    stop(&b, running_b).await;

    let jobs = jobs_in(&store, "reports").await;
    let keys: Vec<Option<String>> = jobs.iter().map(|j| j.details.unique_key.clone()).collect();
    let expected: Vec<Option<String>> =
        [1, 0, 2, 3].iter().map(|m| Some(format!("schedule/nightly/{}", T0_MS + m * MINUTE))).collect();
    assert_eq!(keys, expected, "one job per tick; the early one stands for its tick");
    for listed in jobs.iter().skip(1) {
        let job = store.get_job(listed.record.id, 0).await.expect("get the job");
        assert_eq!(job.payload.as_deref(), Some(&b"{\"period\":\"day\"}"[..]));
        assert_eq!(job.record.job_type, "build-report");
        let tick = job.details.unique_key.as_deref().unwrap().rsplit('/').next().unwrap().parse::<u64>().unwrap();
        assert_eq!(job.details.tags, [format!("scheduled_at={}", rfc(tick)), "schedule=nightly".to_string()]);
    }
    let view = a.schedules().get("nightly").await.unwrap();
    assert_eq!((view.record.state.fired, view.record.state.last_error), (4, None));
}

/// Two nodes over one store race for every tick; each fires once.
async fn two_nodes_fire_each_tick_once(store: Arc<dyn Store>, clock: ManualClock) {
    store.create_queue("raced", QueueAttributes::default()).await.expect("queue");
    let a = services(&store, &clock);
    let b = services(&store, &clock);
    a.schedules().create(every("race", SECOND, queue("raced"), CatchUp::All), &origin()).await.unwrap();
    let (running_a, running_b) = (a.start(), b.start());
    for tick in 1..=20 {
        clock.advance_to(clock.now_ms() + SECOND);
        settles_at(&store, "raced", tick + 1).await;
    }
    let ticks = drain_ticks(&store, "raced").await;
    let expected: Vec<String> = (0..=20).map(|i| rfc(T0_MS + i * SECOND)).collect();
    assert_eq!(ticks, expected, "every tick once, in order");
    stop(&a, running_a).await;
    stop(&b, running_b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_over_one_embedded_store() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    two_nodes_fire_each_tick_once(store, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_over_one_postgresql_database() {
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
    // The schedule's own times follow the manual clock; PostgreSQL's queue times its own.
    let clock = ManualClock::new(T0_MS);
    two_nodes_fire_each_tick_once(store, clock).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ticks_of_a_correlated_schedule_are_listed_in_its_trace() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    store.create_queue("q", QueueAttributes::default()).await.expect("queue");
    store.create_stream("st", sluice_core::stream::StreamConfig::default()).await.expect("stream");
    let node = services(&store, &clock);
    let mut into_queue = every("into-queue", 10 * SECOND, queue("q"), CatchUp::None);
    into_queue.message.envelope.correlation_id = Some("nightly".into());
    let mut into_stream = every("into-stream", 10 * SECOND, Target::Stream("st".into()), CatchUp::None);
    into_stream.message.envelope.correlation_id = Some("nightly".into());
    node.schedules().create(into_queue, &origin()).await.unwrap();
    node.schedules().create(into_stream, &origin()).await.unwrap();
    node.schedules().create(every("plain", 10 * SECOND, queue("q"), CatchUp::None), &origin()).await.unwrap();
    let running = node.start();
    settles_at(&store, "q", 2).await;
    clock.advance_to(T0_MS + 10 * SECOND);
    settles_at(&store, "q", 4).await;
    stop(&node, running).await;

    let trace = node.traces().read("nightly").await.unwrap();
    let mut targets: Vec<_> = trace.entries.iter().map(|(e, depth)| (e.target.clone(), *depth)).collect();
    targets.sort();
    let expected = [("queue:q", 0), ("queue:q", 0), ("stream:st", 0), ("stream:st", 0)];
    assert_eq!(targets, expected.map(|(t, d)| (t.to_string(), d)), "two ticks each, the plain schedule not");
    assert!(trace.entries.iter().filter(|(e, _)| e.target == "stream:st").all(|(e, _)| e.id.starts_with("0/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_schedule_fires_into_its_queue_under_its_own_name() {
    let backend = Embedded::new();
    let clock = ManualClock::new(T0_MS);
    let store = backend.open(&clock);
    let fifo = QueueAttributes { fifo: true, ..QueueAttributes::default() };
    store.create_queue("acme~q.fifo", fifo).await.expect("queue");
    let node = services(&store, &clock);
    node.schedules()
        .create(every("acme~s", 10 * SECOND, queue("acme~q.fifo"), CatchUp::None), &origin())
        .await
        .unwrap();
    let running = node.start();
    settles_at(&store, "acme~q.fifo", 1).await;
    let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: Some(600_000) };
    let got = store.receive("acme~q.fifo", request).await.expect("receive");
    let message = &got[0].message;
    // What the tenant's consumer sees names the schedule as the tenant does.
    let named = &message.content.attributes[sluice_services::schedules::SCHEDULE_ATTRIBUTE].value;
    assert_eq!(named, &AttributeData::Text("s".into()));
    assert_eq!(message.content.envelope.group_id.as_deref(), Some("s"));
    stop(&node, running).await;
}

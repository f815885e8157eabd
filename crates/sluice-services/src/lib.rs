//! Sluice's services: everything that keeps state across requests or runs in the background,
//! between the store (`sluice_store`) and the HTTP edge (`sluice-server`). The server's
//! handlers translate wire formats and call these; they keep no state of their own.
//!
//! - `topics`: topics and subscriptions (store records), fan-out publish, and the HTTP/S push
//!   worker (`topics/worker.rs`) with its breakers per endpoint.
//! - `redrive`: redrive tasks that move a dead-letter queue's messages back at a bounded rate.
//! - `schemas`: the schema registry (JSON Schema versions per message type, compatibility
//!   modes) and the check at the door of queues, topics and streams with `schema_validation`.
//! - `schedules`: cron or fixed-interval recurring sends, each tick fired exactly once by an
//!   atomic commit of the schedule's record and the tick's message.
//! - `sqs`: the state only the SQS API has (its 60-second rules, FIFO receive attempts).
//! - `streams`: the streams' sweep (retention, shared-mode ack timeouts and dead-lettering).
//! - `stats`: the short history of the store's totals and every queue's counts (the
//!   dashboard's charts), and the per-queue counting of sends, receives and acks behind it.
//! - `alerts`: alert rules, their evaluation by one node (leased), and webhook notifications.
//! - `jobs`: async jobs over the store's `JobStore`, their metrics, and the completion-webhook
//!   worker (`jobs/callbacks.rs`, the push worker's delivery reused).
//! - `idempotency`: the entries behind `Idempotency-Key` (claims, stored answers, expiry and
//!   its sweep, bounds).
//! - `sagas`: the saga orchestrator: definitions and instances as store records, each attempt
//!   recorded by compare-and-swap before its call, HTTP and queue steps, replies.
//! - `rate_limits`: the token buckets taken at a door (topics, streams, job queues), counted.
//! - `relays`: outbox relays, publishing the rows of an application's own database (store
//!   records for configuration and state; one node per relay by lease).
//!
//! - `auth`: API keys (hashed store records), their scopes, and whether calls must carry one.
//! - `trace`: the causal trace, an index by correlation id of every message, publish, push,
//!   stream record, event, job and saga step, read in causal order.
//! - `events`: the event store's catch-up subscriptions (forward-only checkpoints) and snapshots,
//!   as store records beside the store's `EventStore`.
//!
//! Every later long-running feature (sagas) is a module
//! here, started by [`Services::start`] and stopped with the [`Running`] handle it returns.
//!
//! Time comes from the one [`Clock`] the services are built with, so that every timer here can
//! be tested on a manual clock. The services speak HTTP only as a client, for outbound
//! deliveries; they serve nothing.

pub mod alerts;
pub mod auth;
pub mod egress;
pub mod events;
pub mod idempotency;
pub mod jobs;
pub mod rate_limits;
pub mod redrive;
pub mod relays;
pub mod sagas;
pub mod schedules;
pub mod schemas;
pub mod shedding;
pub mod sqs;
pub mod stats;
pub mod streams;
pub mod tenants;
pub mod topics;
pub mod trace;

use std::sync::Arc;

use sluice_clock::Clock;
use sluice_store::{Store, StoreParts};
use tokio::task::JoinHandle;

use alerts::{Alerts, AlertsConfig};
use auth::{AuthConfig, Keys};
use idempotency::{Idempotency, IdempotencyConfig};
use jobs::{Jobs, JobsConfig};
use redrive::Redrives;
use relays::Relays;
use sagas::{SagaCallConfig, Sagas};
use schedules::Schedules;
use schemas::Schemas;
use shedding::{ShedConfig, Shedder};
use sqs::SqsState;
use stats::{CallCounts, CountingQueues, STATS_SAMPLE_MS_DEFAULT, Stats};
use topics::worker::{Endpoints, PushConfig};
use topics::{Arns, Topics};
use trace::{TRACE_RETENTION_MS_DEFAULT, Traces};

/// How the services are set up: the ARNs they write (account and region), the push
/// worker's timeouts and breaker, the stats sampler's interval, the alert evaluator's, and the
/// node's name on relay leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicesConfig {
    pub arns: Arns,
    pub push: PushConfig,
    pub stats_sample_ms: u64,
    pub alerts: AlertsConfig,
    /// This node's name on relay leases; see [`Relays`]. `None`: a random name.
    pub relay_node: Option<String>,
    pub jobs: JobsConfig,
    /// Load shedding's watermarks (`shedding.rs`).
    pub shed: ShedConfig,
    /// Idempotency keys: TTL, bounds, how claims of dead processes are told.
    pub idempotency: IdempotencyConfig,
    pub sagas: SagaCallConfig,
    /// How long causal trace entries are kept (`--trace-retention`).
    pub trace_retention_ms: u64,
    /// API keys: the bootstrap admin token, and `--insecure-no-auth`.
    pub auth: AuthConfig,
    /// Where outbound calls may go (`--egress-allow`, `--egress-deny`).
    pub egress: egress::Egress,
}

impl ServicesConfig {
    /// The defaults, with these ARNs.
    pub fn new(arns: Arns) -> ServicesConfig {
        ServicesConfig {
            arns,
            push: PushConfig::default(),
            stats_sample_ms: STATS_SAMPLE_MS_DEFAULT,
            alerts: AlertsConfig::default(),
            relay_node: None,
            jobs: JobsConfig::default(),
            shed: ShedConfig::default(),
            idempotency: IdempotencyConfig::default(),
            sagas: SagaCallConfig::default(),
            trace_retention_ms: TRACE_RETENTION_MS_DEFAULT,
            auth: AuthConfig::default(),
            egress: egress::Egress::default(),
        }
    }
}

/// Every service of one server, over one store and one clock. Share it in an `Arc`.
pub struct Services {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    topics: Arc<Topics>,
    schemas: Arc<Schemas>,
    redrives: Arc<Redrives>,
    schedules: Arc<Schedules>,
    /// The push worker's breakers and permits per endpoint (shown in subscription views).
    push: Arc<Endpoints>,
    sqs: SqsState,
    stats: Arc<Stats>,
    alerts: Arc<Alerts>,
    relays: Relays,
    jobs: Arc<Jobs>,
    events: Arc<events::Events>,
    shedder: Arc<Shedder>,
    idempotency: Arc<Idempotency>,
    sagas: Arc<Sagas>,
    traces: Arc<Traces>,
    keys: Arc<Keys>,
    tenants: Arc<tenants::Tenants>,
}

impl Services {
    /// The services over `store`. Every call they make, and every call the server makes
    /// through [`Services::store`], is counted per queue for the stats (`stats.rs`).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: ServicesConfig) -> Arc<Services> {
        let counts = Arc::new(CallCounts::default());
        let store: Arc<dyn Store> = Arc::new(StoreParts {
            queues: Arc::new(CountingQueues::new(store.clone(), counts.clone())),
            records: store.clone(),
            commits: store.clone(),
            logs: store.clone(),
            jobs: store.clone(),
            events: store.clone(),
            rates: store.clone(),
            status: store,
        });
        let schemas = Schemas::new(store.clone(), clock.clone());
        let egress = Arc::new(config.egress);
        let traces = Arc::new(Traces::new(store.clone(), clock.clone(), config.trace_retention_ms));
        let topics = Arc::new(Topics::new(store.clone(), config.arns, clock.clone(), schemas.clone(), traces.clone()));
        let tenants = Arc::new(tenants::Tenants::new(store.clone(), clock.clone(), topics.clone()));
        Arc::new(Services {
            schemas,
            schedules: Schedules::new(store.clone(), clock.clone(), topics.clone()),
            topics,
            redrives: Redrives::new(store.clone(), clock.clone()),
            push: Arc::new(Endpoints::new(config.push, egress.clone())),
            sqs: SqsState::default(),
            relays: Relays::new(config.relay_node),
            jobs: Arc::new(Jobs::new(store.clone(), clock.clone(), config.jobs)),
            shedder: Arc::new(Shedder::new(config.shed)),
            idempotency: Arc::new(Idempotency::new(store.clone(), clock.clone(), config.idempotency)),
            sagas: Sagas::new(store.clone(), clock.clone(), config.sagas, egress.clone(), traces.clone()),
            traces,
            stats: Arc::new(Stats::new(store.clone(), clock.clone(), counts, config.stats_sample_ms)),
            alerts: Arc::new(Alerts::new(store.clone(), clock.clone(), config.alerts)),
            events: Arc::new(events::Events::new(store.clone(), clock.clone())),
            keys: Arc::new(Keys::new(store.clone(), clock.clone(), config.auth)),
            tenants,
            store,
            clock,
        })
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn topics(&self) -> &Topics {
        &self.topics
    }

    pub fn schemas(&self) -> &Arc<Schemas> {
        &self.schemas
    }

    pub fn redrives(&self) -> &Arc<Redrives> {
        &self.redrives
    }

    pub fn schedules(&self) -> &Arc<Schedules> {
        &self.schedules
    }

    pub fn push_endpoints(&self) -> &Endpoints {
        &self.push
    }

    pub fn sqs(&self) -> &SqsState {
        &self.sqs
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn alerts(&self) -> &Arc<Alerts> {
        &self.alerts
    }

    pub fn relays(&self) -> &Relays {
        &self.relays
    }

    /// Load shedding: whether writes of a priority are taken now (`shedding.rs`).
    pub fn shedder(&self) -> &Arc<Shedder> {
        &self.shedder
    }

    pub fn jobs(&self) -> &Arc<Jobs> {
        &self.jobs
    }

    pub fn events(&self) -> &Arc<events::Events> {
        &self.events
    }

    pub fn idempotency(&self) -> &Arc<Idempotency> {
        &self.idempotency
    }

    pub fn sagas(&self) -> &Arc<Sagas> {
        &self.sagas
    }

    /// API keys: who a call comes from and what it may do.
    pub fn keys(&self) -> &Arc<Keys> {
        &self.keys
    }

    /// Tenants' quotas.
    pub fn tenants(&self) -> &Arc<tenants::Tenants> {
        &self.tenants
    }

    /// The causal trace: every write point records what carried a correlation id.
    pub fn traces(&self) -> &Arc<Traces> {
        &self.traces
    }

    /// Starts the background work: the push worker (subscriptions and alert webhooks), the
    /// schedules' loop, the stream sweep, the stats sampler, the alert evaluator, the job callback
    /// worker and the relays' supervisor. Redrives start on request.
    pub fn start(self: &Arc<Self>) -> Running {
        // Stopped with the server: a POST cut short leaves its delivery to reappear after its
        // visibility timeout and be pushed again (at least once).
        let push_worker = topics::worker::spawn_with(
            self.store.clone(),
            self.push.clone(),
            self.clock.clone(),
            self.traces.clone(),
            vec![self.alerts.webhook_targets()],
        );
        // Aborted at any await: a tick is fired by one commit, so it is either fired or not.
        let schedules = tokio::spawn(self.schedules.clone().run());
        let stream_sweep = streams::spawn(self.store.clone());
        let sampler = self.stats.spawn();
        let evaluator = self.alerts.spawn();
        let callback_worker = jobs::callbacks::spawn(self.jobs.clone(), self.push.clone());
        // Aborted at any await: a sweep deletes each entry by compare-and-swap, alone.
        let idempotency_sweep = self.idempotency.spawn();
        // Aborted at any await: every attempt is recorded before its call, so a call cut short
        // is retried after its deadline (by this node after a restart, or by another).
        let orchestrator = self.sagas.spawn();
        // Aborted at any await: each expired entry is deleted alone, and deleting is idempotent.
        let trace_sweep = self.traces.spawn();
        Relays::start(self);
        let store = self.store.clone();
        let shed_sampler = self.shedder.spawn(self.clock.clone(), move || store.backlog());
        let mut tasks = vec![
            push_worker,
            schedules,
            stream_sweep,
            sampler,
            evaluator,
            callback_worker,
            idempotency_sweep,
            orchestrator,
            trace_sweep,
        ];
        tasks.extend(shed_sampler);
        Running { services: self.clone(), tasks }
    }

    /// Ends long-running work at once and refuses new work (each redrive after its current
    /// step), so that a long redrive does not keep moving messages while the server winds down.
    pub fn stop(&self) {
        self.redrives.stop_all();
        self.relays.stop();
    }
}

/// The background work of started [`Services`]: call [`Services::stop`] when the server
/// begins to shut down, then [`Running::join`] once requests are finished.
pub struct Running {
    services: Arc<Services>,
    /// The background tasks (push worker, schedules, stream sweep, sampler, evaluator, job
    /// callbacks):
    /// stopped by aborting them.
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Waits for the work that [`Services::stop`] ended (redrives, relays, each after its
    /// current step), then drops the push worker's,
    /// sampler's and evaluator's tasks, and lets the evaluator's lease go so that another node
    /// takes over at once.
    pub async fn join(self) {
        self.services.redrives.join_all().await;
        self.services.relays.join().await;
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
        self.services.alerts.release().await;
    }
}

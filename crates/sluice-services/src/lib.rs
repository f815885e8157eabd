//! Sluice's services: everything that keeps state across requests or runs in the background,
//! between the store (`sluice_store`) and the HTTP edge (`sluice-server`). The server's
//! handlers translate wire formats and call these; they keep no state of their own.
//!
//! - `topics`: topics and subscriptions (store records), fan-out publish, and the HTTP/S push
//!   worker (`topics/worker.rs`) with its breakers per endpoint.
//! - `redrive`: redrive tasks that move a dead-letter queue's messages back at a bounded rate.
//! - `sqs`: the state only the SQS API has (its 60-second rules, FIFO receive attempts).
//! - `jobs`: async jobs over the store's `JobStore`, their metrics, and the completion-webhook
//!   worker (`jobs/callbacks.rs`, the push worker's delivery reused).
//!
//! Every later long-running feature (jobs, sagas, outbox relays, schedules, alerts) is a module
//! here, started by [`Services::start`] and stopped with the [`Running`] handle it returns.
//!
//! Time comes from the one [`Clock`] the services are built with, so that every timer here can
//! be tested on a manual clock. The services speak HTTP only as a client, for outbound
//! deliveries; they serve nothing.

pub mod jobs;
pub mod redrive;
pub mod sqs;
pub mod topics;

use std::sync::Arc;

use sluice_clock::Clock;
use sluice_store::Store;
use tokio::task::JoinHandle;

use jobs::{Jobs, JobsConfig};
use redrive::Redrives;
use sqs::SqsState;
use topics::worker::{Endpoints, PushConfig};
use topics::{Arns, Topics};

/// How the services are set up: the ARNs they write (account and region) and the push
/// worker's timeouts and breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicesConfig {
    pub arns: Arns,
    pub push: PushConfig,
    pub jobs: JobsConfig,
}

/// Every service of one server, over one store and one clock. Share it in an `Arc`.
pub struct Services {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    topics: Topics,
    redrives: Arc<Redrives>,
    /// The push worker's breakers and permits per endpoint (shown in subscription views).
    push: Arc<Endpoints>,
    sqs: SqsState,
    jobs: Arc<Jobs>,
}

impl Services {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: ServicesConfig) -> Arc<Services> {
        Arc::new(Services {
            topics: Topics::new(store.clone(), config.arns, clock.clone()),
            redrives: Redrives::new(store.clone(), clock.clone()),
            push: Arc::new(Endpoints::new(config.push)),
            sqs: SqsState::default(),
            jobs: Arc::new(Jobs::new(store.clone(), clock.clone(), config.jobs)),
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

    pub fn redrives(&self) -> &Arc<Redrives> {
        &self.redrives
    }

    pub fn push_endpoints(&self) -> &Endpoints {
        &self.push
    }

    pub fn sqs(&self) -> &SqsState {
        &self.sqs
    }

    pub fn jobs(&self) -> &Arc<Jobs> {
        &self.jobs
    }

    /// Starts the background work: the push worker and the job callback worker. Redrives
    /// start on request.
    pub fn start(self: &Arc<Self>) -> Running {
        // Stopped with the server: a POST cut short leaves its delivery to reappear after its
        // visibility timeout and be pushed again (at least once).
        let push_worker = topics::worker::spawn(self.store.clone(), self.push.clone(), self.clock.clone());
        let callback_worker = jobs::callbacks::spawn(self.jobs.clone(), self.push.clone());
        Running { services: self.clone(), push_worker, callback_worker }
    }

    /// Ends long-running work at once and refuses new work (each redrive after its current
    /// step), so that a long redrive does not keep moving messages while the server winds down.
    pub fn stop(&self) {
        self.redrives.stop_all();
    }
}

/// The background work of started [`Services`]: call [`Services::stop`] when the server
/// begins to shut down, then [`Running::join`] once requests are finished.
pub struct Running {
    services: Arc<Services>,
    push_worker: JoinHandle<()>,
    callback_worker: JoinHandle<()>,
}

impl Running {
    /// Waits for the work that [`Services::stop`] ended, then drops the push worker's tasks.
    pub async fn join(self) {
        self.services.redrives.join_all().await;
        self.push_worker.abort();
        self.callback_worker.abort();
    }
}

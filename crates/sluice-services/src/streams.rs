//! The streams' background work: every `STREAM_SWEEP_MS` the store is asked to apply retention
//! (whole old segments, or old rows) and to end shared-mode holds whose ack timeout passed,
//! dead-lettering records past `max_deliveries`. The store decides by its own clock (the
//! services' clock for the embedded store, the database's for PostgreSQL); this task only
//! sets the cadence, on real time, like every polling cadence.

use std::sync::Arc;
use std::time::Duration;

use sluice_store::{LogError, Store};
use tokio::task::JoinHandle;

/// How often the sweep runs.
pub const STREAM_SWEEP_MS: u64 = 1_000;

/// Runs the sweep until aborted. A store without streams stops it at once.
pub fn spawn(store: Arc<dyn Store>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(STREAM_SWEEP_MS));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            match store.sweep_streams().await {
                Ok(report) => {
                    if report.records_removed > 0 || report.dead_lettered > 0 || report.dropped > 0 {
                        tracing::debug!(
                            removed = report.records_removed,
                            dead_lettered = report.dead_lettered,
                            dropped = report.dropped,
                            "stream sweep"
                        );
                    }
                }
                Err(LogError::Unsupported) => return,
                Err(e) => tracing::warn!("the stream sweep failed (it runs again in {STREAM_SWEEP_MS} ms): {e}"),
            }
        }
    })
}

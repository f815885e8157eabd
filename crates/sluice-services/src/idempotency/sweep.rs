//! The expiry sweep: every `SWEEP_MS` on the services' clock, each node counts the entries and
//! their bytes again (the totals its bounds are checked against), and the node holding the
//! lease `idempotency_lease/sweeper` also deletes the expired ones. The lease is taken and
//! renewed by compare-and-swap, as the alert evaluator's, so that on PostgreSQL one node
//! deletes while the others only count. An expired entry is already treated as absent by every
//! claim, so the sweep decides nothing: it only frees the space.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_store::StoreError;
use tokio::task::JoinHandle;

use super::Idempotency;
use super::model::{ENTRY_KIND, Entry, SWEEP_LEASE_KEY, SWEEP_LEASE_KIND, SWEEP_LEASE_MS, SWEEP_MS, SWEEP_PAGE_MAX};

/// What one sweep saw and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Entries kept, and their bytes.
    pub entries: u64,
    pub bytes: u64,
    /// Expired entries deleted (0 on a node without the lease).
    pub expired_deleted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Lease {
    holder: String,
    expires_at_ms: u64,
}

impl Idempotency {
    /// Starts the sweep; the first one runs at once, so that the totals are counted at start.
    pub fn spawn(self: &Arc<Self>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = this.sweep_once().await {
                    tracing::warn!("the idempotency sweep failed (it runs again in {SWEEP_MS} ms): {e}");
                }
                // A cadence, not a timer: what expired is decided by the clock at each sweep
                // (and at every lookup), so the pause is real time, like the alert
                // evaluator's and the stats sampler's, and leaves a manual clock's deadlines
                // to the timers tests look at.
                tokio::time::sleep(std::time::Duration::from_millis(SWEEP_MS)).await;
            }
        })
    }

    /// One sweep: counts every entry, and deletes the expired ones if this node holds the
    /// sweeper's lease (taken or renewed here).
    pub async fn sweep_once(&self) -> Result<SweepReport, StoreError> {
        let now = self.clock.now_ms();
        let deleting = self.acquire_lease(now).await?;
        let mut report = SweepReport::default();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.list_records(ENTRY_KIND, "", after.as_deref(), SWEEP_PAGE_MAX).await?;
            let last = page.len() < SWEEP_PAGE_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                let expired = Entry::decode(&record.value).is_ok_and(|(e, _)| e.expires_at_ms <= now);
                if expired && deleting && self.delete_if(&record.key, record.value.clone()).await? {
                    report.expired_deleted += 1;
                    continue;
                }
                report.entries += 1;
                report.bytes += record.value.len() as u64;
            }
            if last {
                break;
            }
        }
        self.totals.set(report.entries, report.bytes);
        if report.expired_deleted > 0 {
            metrics::counter!("sluice_idempotency_expired_total").increment(report.expired_deleted);
        }
        Ok(report)
    }

    /// Takes or renews the sweeper's lease for this process; `true` when it holds it now.
    async fn acquire_lease(&self, now: u64) -> Result<bool, StoreError> {
        let ours = serde_json::to_vec(&Lease { holder: self.owner.clone(), expires_at_ms: now + SWEEP_LEASE_MS })
            .expect("a lease serializes");
        // Two rounds: a lease that changes between the read and the write was taken by another
        // node, and the second read says by whom.
        for _ in 0..2 {
            match self.store.get_record(SWEEP_LEASE_KIND, SWEEP_LEASE_KEY).await? {
                None => {
                    if self.store.insert_record(SWEEP_LEASE_KIND, SWEEP_LEASE_KEY, ours.clone()).await? {
                        return Ok(true);
                    }
                }
                Some(current) => {
                    let free = serde_json::from_slice::<Lease>(&current)
                        .map_or(true, |l| l.holder == self.owner || l.expires_at_ms <= now);
                    if !free {
                        return Ok(false);
                    }
                    if self.store.replace_record(SWEEP_LEASE_KIND, SWEEP_LEASE_KEY, current, ours.clone()).await? {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }
}

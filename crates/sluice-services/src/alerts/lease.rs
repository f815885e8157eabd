//! The evaluator's lease: the record `alert_lease/evaluator` names the node that evaluates the
//! rules and until when. A node takes it when it is free or expired, and renews it at every
//! evaluation, always by compare-and-swap on the record (`RecordStore::replace_record`), so that
//! of several nodes sharing one database exactly one holds it at a time and a notification is
//! not sent once per node. A node that stops lets it go (`release`); a node that dies leaves it
//! to expire after `lease_ms`, and another takes over.
//!
//! Expiry is judged on each node's own clock (the services' clock). Nodes whose clocks differ by
//! less than the lease's margin (`lease_ms` less the evaluation interval, 10 s by default) never
//! both hold it; NTP keeps servers well inside that.

use serde::{Deserialize, Serialize};
use sluice_store::{RecordStore, StoreError};

use super::model::{ALERT_FORMAT, decode, encode};

pub const LEASE_KIND: &str = "alert_lease";
pub const LEASE_KEY: &str = "evaluator";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub format: u8,
    /// The holder's node id (a UUID made at start).
    pub holder: String,
    pub expires_at_ms: u64,
}

/// Takes or renews the lease for `node` until `now_ms + lease_ms`; `Ok(true)` when `node`
/// holds it now, `Ok(false)` when another node does.
pub async fn acquire(store: &dyn RecordStore, node: &str, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
    let ours = encode(&Lease { format: ALERT_FORMAT, holder: node.to_string(), expires_at_ms: now_ms + lease_ms });
    // Two rounds at most: a lease that appears or changes between the read and the write was
    // taken by another node, and the second read says by whom.
    for _ in 0..2 {
        match store.get_record(LEASE_KIND, LEASE_KEY).await? {
            None => {
                if store.insert_record(LEASE_KIND, LEASE_KEY, ours.clone()).await? {
                    return Ok(true);
                }
            }
            Some(current) => {
                let free = match decode::<Lease>(&current, "alert lease") {
                    Ok(lease) => lease.holder == node || lease.expires_at_ms <= now_ms,
                    // A lease this version cannot read is taken over once it would have expired
                    // by any reading: treat it as free, since no node of this version holds it.
                    Err(_) => true,
                };
                if !free {
                    return Ok(false);
                }
                if store.replace_record(LEASE_KIND, LEASE_KEY, current, ours.clone()).await? {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// Gives the lease up if `node` holds it, so that another node takes over at its next
/// evaluation instead of after the expiry.
pub async fn release(store: &dyn RecordStore, node: &str) -> Result<(), StoreError> {
    if let Some(current) = store.get_record(LEASE_KIND, LEASE_KEY).await?
        && decode::<Lease>(&current, "alert lease").is_ok_and(|lease| lease.holder == node)
    {
        let expired = encode(&Lease { format: ALERT_FORMAT, holder: node.to_string(), expires_at_ms: 0 });
        store.replace_record(LEASE_KIND, LEASE_KEY, current, expired).await?;
    }
    Ok(())
}

//! Waking long polls: one LISTEN connection per store, and a registry of local waiters by queue.
//!
//! Every change that can make a message receivable sooner than a waiter expects (a send, a
//! nack, a release or shorter hold, a move into a queue, an ack on a FIFO queue, which can end
//! the hold that blocked a group, a queue's deletion) is announced with
//! `pg_notify(channel, queue_id)` after it commits, so every node hears it. The channel is per
//! schema (`sluice_wake_<schema>`), so stores in different schemas of one database do not wake
//! each other. Time-driven changes (a delay or a hold running out) need no notification: each
//! waiter sleeps until the earliest `visible_at` in its queue, read in the same pass that found
//! nothing to receive.
//!
//! A waiter subscribes *before* it looks for messages, so a notification for a change committed
//! after its look is never missed. If the LISTEN connection drops, it is re-established and
//! every waiter is woken to look again, since notifications sent meanwhile are lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Notification};

/// Local waiters by queue id: a watch channel per queue that has at least one waiter.
#[derive(Default)]
pub struct Wakers {
    queues: Mutex<HashMap<u64, watch::Sender<()>>>,
}

/// One waiter's interest in one queue; `changed` resolves once the queue was woken after the
/// subscription was taken.
pub struct Subscription {
    wakers: Arc<Wakers>,
    queue: u64,
    rx: watch::Receiver<()>,
}

impl Wakers {
    pub fn subscribe(self: &Arc<Self>, queue: u64) -> Subscription {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let tx = queues.entry(queue).or_insert_with(|| watch::channel(()).0);
        Subscription { wakers: self.clone(), queue, rx: tx.subscribe() }
    }

    pub fn wake(&self, queue: u64) {
        if let Some(tx) = self.queues.lock().unwrap_or_else(|e| e.into_inner()).get(&queue) {
            tx.send_replace(());
        }
    }

    pub fn wake_all(&self) {
        for tx in self.queues.lock().unwrap_or_else(|e| e.into_inner()).values() {
            tx.send_replace(());
        }
    }
}

impl Subscription {
    pub async fn changed(&mut self) {
        // The sender lives in the registry for as long as this subscription, so this only
        // returns on a wake.
        let _ = self.rx.changed().await;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut queues = self.wakers.queues.lock().unwrap_or_else(|e| e.into_inner());
        // Subscriptions are taken under the same lock, so "only this one left" cannot change
        // between the check and the removal.
        if queues.get(&self.queue).is_some_and(|tx| tx.receiver_count() <= 1) {
            queues.remove(&self.queue);
        }
    }
}

/// A live LISTEN session: the client (dropping it closes the connection) and its notifications.
pub struct Listener {
    _client: Client,
    notifications: mpsc::UnboundedReceiver<Notification>,
}

/// Opens a connection and LISTENs on `channel`. Returns once the LISTEN is in effect.
pub async fn listen(config: &Config, channel: &str) -> Result<Listener, tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (tx, notifications) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::warn!("the LISTEN connection failed: {e}");
                    return;
                }
                None => return,
            }
        }
    });
    client.batch_execute(&format!("LISTEN {}", quote_ident(channel))).await?;
    Ok(Listener { _client: client, notifications })
}

/// Forwards notifications to local waiters for as long as the store lives, reconnecting (and
/// waking everyone) whenever the LISTEN connection is lost. A payload `s<id>` is for the long
/// polls of stream `id` (`streams`), any other number for a queue's.
pub async fn run(config: Config, channel: String, wakers: Arc<Wakers>, streams: Arc<Wakers>, first: Listener) {
    let mut listener = Some(first);
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(mut live) = listener.take() else {
            match listen(&config, &channel).await {
                Ok(l) => {
                    tracing::info!("LISTEN connection re-established");
                    backoff = Duration::from_millis(100);
                    // Notifications sent while we were away are lost: let every waiter look.
                    wakers.wake_all();
                    streams.wake_all();
                    listener = Some(l);
                }
                Err(e) => {
                    tracing::warn!("cannot re-establish the LISTEN connection (retrying in {backoff:?}): {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
            continue;
        };
        while let Some(n) = live.notifications.recv().await {
            if let Some(stream) = n.payload().strip_prefix('s') {
                match stream.parse::<u64>() {
                    Ok(id) => streams.wake(id),
                    Err(_) => streams.wake_all(),
                }
                continue;
            }
            match n.payload().parse::<u64>() {
                Ok(queue) => wakers.wake(queue),
                Err(_) => wakers.wake_all(),
            }
        }
        wakers.wake_all();
        streams.wake_all();
    }
}

/// `name` as a quoted SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_after_subscribing_is_seen_and_the_registry_empties() {
        let wakers = Arc::new(Wakers::default());
        let mut a = wakers.subscribe(1);
        let b = wakers.subscribe(1);
        wakers.wake(2);
        wakers.wake(1);
        tokio::time::timeout(Duration::from_secs(1), a.changed()).await.expect("woken");
        drop(a);
        assert_eq!(wakers.queues.lock().unwrap().len(), 1, "b still waits");
        drop(b);
        assert!(wakers.queues.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_wake_before_subscribing_is_not_seen() {
        let wakers = Arc::new(Wakers::default());
        let _keep = wakers.subscribe(1);
        wakers.wake(1);
        let mut late = wakers.subscribe(1);
        assert!(tokio::time::timeout(Duration::from_millis(50), late.changed()).await.is_err());
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}

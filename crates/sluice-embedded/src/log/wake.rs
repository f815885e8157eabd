//! Wakes long polls on streams: reads and fetches waiting at the end of a stream subscribe to
//! its name before they look, and are woken after an append (or, in shared mode, an ack, a
//! release or a nack) through that stream is durable.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

#[derive(Default)]
pub struct Wakers {
    streams: Mutex<HashMap<String, watch::Sender<()>>>,
}

impl Wakers {
    /// A receiver that changes at the next wake of `stream` after this call.
    pub fn subscribe(&self, stream: &str) -> watch::Receiver<()> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        // Senders nobody listens to any more are dropped here, so the map stays as small as
        // the set of streams with waiters.
        streams.retain(|_, tx| tx.receiver_count() > 0);
        streams.entry(stream.to_owned()).or_insert_with(|| watch::channel(()).0).subscribe()
    }

    pub fn wake(&self, stream: &str) {
        if let Some(tx) = self.streams.lock().unwrap_or_else(|e| e.into_inner()).get(stream) {
            tx.send_replace(());
        }
    }
}

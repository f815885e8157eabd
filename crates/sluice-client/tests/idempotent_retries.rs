//! The client's retries never run a call twice: a proxy in front of an in-process server lets
//! the first request through and drops its answer, the client retries with the same
//! `Idempotency-Key`, and the server answers from the first attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_client::Client;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Forwards each connection to `upstream`; for the first `drop_first` connections it passes
/// the request on, reads the server's answer and closes the client's side without sending it.
async fn dropping_proxy(upstream: std::net::SocketAddr, drop_first: usize) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else { return };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut server = TcpStream::connect(upstream).await.expect("upstream");
                if n < drop_first {
                    let mut buf = vec![0u8; 64 * 1024];
                    let read = client.read(&mut buf).await.expect("request");
                    server.write_all(&buf[..read]).await.expect("forward");
                    // The server's answer arrives here and goes no further.
                    let _ = server.read(&mut buf).await;
                    drop(client);
                } else {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_answer_is_lost_is_retried_and_runs_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .expect("open"),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sluice_server::run(listener, store.clone() as Arc<dyn Store>, async move {
        let _ = stopped.await;
    }));
    let direct = Client::new(&format!("http://{upstream}")).expect("client");
    let create = serde_json::from_value(serde_json::json!({ "name": "q" })).expect("request");
    direct.create_queue(&create).await.expect("create");

    let (proxy, connections) = dropping_proxy(upstream, 1).await;
    let client = Client::new(&format!("http://{proxy}")).expect("client");
    let id = client.send_text("q", "once").await.expect("the retry gets the answer");
    assert!(connections.load(Ordering::SeqCst) >= 2, "the first answer was dropped and the call retried");

    let peeked = direct.peek("q", Some(10)).await.expect("peek").messages;
    assert_eq!(peeked.len(), 1, "one message, not one per attempt");
    assert_eq!(peeked[0].id, id, "the retry's answer names the first attempt's message");

    let _ = stop.send(());
    server.await.expect("server").expect("served");
    tokio::task::spawn_blocking(move || store.close()).await.expect("close");
}

//! `run` on a real socket: requests in progress finish after the shutdown signal, the server
//! then returns, and redrive tasks stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One HTTP/1.1 request on its own connection; returns the status and the body.
async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8(answer).expect("utf-8");
    let status =
        answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status line: {answer}"));
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_requests_in_progress_and_stops_redrives() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sluice_server::run(listener, store.clone() as Arc<dyn Store>, async {
        let _ = stopped.await;
    }));

    for name in ["src", "dst", "idle"] {
        let (status, body) = http(addr, "POST", "/v1/queues", &format!(r#"{{"name":"{name}"}}"#)).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) =
        http(addr, "POST", "/v1/queues/src/messages", r#"{"messages":[{"body":"1"},{"body":"2"},{"body":"3"}]}"#).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(addr, "POST", "/v1/queues/src/redrive", r#"{"to":"dst","max_per_second":1}"#).await;
    assert_eq!(status, 202, "{body}");

    // A long poll that is still waiting when the signal comes must get its answer.
    let long_poll =
        tokio::spawn(async move { http(addr, "POST", "/v1/queues/idle/receive", r#"{"wait_ms":1500}"#).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    stop.send(()).unwrap();

    let (status, body) = long_poll.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, r#"{"messages":[]}"#);
    let served = tokio::time::timeout(Duration::from_secs(10), server).await.expect("run returns after shutdown");
    served.unwrap().expect("run ends cleanly");
    assert!(signalled.elapsed() < Duration::from_secs(5));

    // The redrive moved its first message at once and would move the next a second later;
    // stopped at shutdown, it moves nothing more.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let src = store.get_queue("src").await.unwrap().stats.visible;
    let dst = store.get_queue("dst").await.unwrap().stats.visible;
    assert_eq!((src, dst), (2, 1));
    store.close();
}

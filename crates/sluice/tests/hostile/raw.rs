//! A deliberately small HTTP/1.1 client over raw sockets, so that tests can send what no
//! well-behaved client library would: bytes that are not UTF-8, lengths that lie, bodies a
//! byte at a time, or nothing at all.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer as read off the wire.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `host:port` of a server URL such as `http://127.0.0.1:1234`.
pub fn addr(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches('/').to_string()
}

/// A request with `Content-Length` set to the body's length.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n").into_bytes();
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

pub fn json(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    request(method, path, &[("Content-Type", "application/json")], body)
}

/// Connects, retrying briefly: thousands of connections at once can overflow the listen
/// backlog, and the kernel then drops SYNs for a moment.
pub async fn connect(addr: &str) -> TcpStream {
    let mut last = None;
    for attempt in 0..50u64 {
        match TcpStream::connect(addr).await {
            Ok(stream) => return stream,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20 * attempt.min(10))).await;
    }
    panic!("cannot connect to {addr}: {last:?}");
}

/// Sends `raw` on a new connection and reads one answer, within `limit`.
pub async fn send(addr: &str, raw: &[u8], limit: Duration) -> Answer {
    let mut stream = connect(addr).await;
    stream.write_all(raw).await.expect("write the request");
    tokio::time::timeout(limit, read_answer(&mut stream))
        .await
        .unwrap_or_else(|_| panic!("no answer within {limit:?} to {:?}", preview(raw)))
        .unwrap_or_else(|| panic!("the connection closed without an answer to {:?}", preview(raw)))
}

fn preview(raw: &[u8]) -> String {
    String::from_utf8_lossy(&raw[..raw.len().min(120)]).into_owned()
}

/// Reads one answer (head and a `Content-Length` body); `None` if the connection closes
/// before a whole head arrives.
pub async fn read_answer(stream: &mut TcpStream) -> Option<Answer> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status code");
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Answer { status, body })
}

/// Whether the server has closed `stream`: a read returns end-of-file (or an error) within
/// `limit`. Bytes the server sent before closing (an error answer) are skipped.
pub async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// The resident set of process `pid`, in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> u64 {
    sluice_bench::process::Process::Pid(pid).resident_kib().expect("VmRSS in /proc/<pid>/status")
}

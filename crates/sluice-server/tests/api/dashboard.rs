//! The dashboard's routes: `/ui` and its files, served from the binary with a policy that keeps
//! the page to this server, and `/v1/stats`, the history behind its charts.

use axum::body::Body;
use axum::http::Request;
use serde_json::json;

use crate::support::{Payload, TestServer, case, check};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_served_from_the_binary() {
    let s = TestServer::start();
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/js/main.js", "text/javascript; charset=utf-8"),
        ("/ui/js/pages/alerts.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
    ] {
        let (status, headers, body) = s.raw(Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["content-type"], content_type, "{path}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("default-src 'self'") && policy.contains("script-src 'self'"), "{policy}");
        assert!(!body.is_empty(), "{path}");
    }
    let (_, _, index) = s.raw(Request::get("/ui").body(Body::empty()).unwrap()).await;
    let index = String::from_utf8(index).unwrap();
    assert!(index.contains(r#"<script type="module" src="/ui/js/main.js">"#), "{index}");
    check(&s, vec![case("GET", "/ui/secret.txt", Payload::None, 404, Some("not_found"))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_answer_before_the_first_sample() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    s.send_texts("q", &["a", "b"]).await;
    let stats = s.expect("GET", "/v1/stats", None, 200).await;
    assert_eq!(stats["store"]["status"], "ok");
    assert_eq!(stats["sample_ms"], 10_000);
    assert_eq!(stats["history_samples_max"], 360);
    assert_eq!(stats["messages_sent"], 2);
    assert_eq!(stats["firing_alerts"], 0);
    assert_eq!(stats["series"], json!([]), "the sampler runs with the server, not in a bare router");
    assert_eq!(s.expect("GET", "/v1/stats/queues", None, 200).await, json!({ "queues": [] }));
    let history = s.expect("GET", "/v1/stats/queues/q", None, 200).await;
    assert_eq!(history, json!({ "name": "q", "sample_ms": 10_000, "series": [] }));
    check(&s, vec![case("GET", "/v1/stats/queues/nope", Payload::None, 404, Some("queue_not_found"))]).await;
}

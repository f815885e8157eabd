//! Middleware around every request: the body-size guard, a tracing span and log line, and
//! the latency histogram labelled by matched route.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sluice_core::limits::REQUEST_BYTES_MAX;
use tracing::Instrument;

use crate::extract::payload_too_large;

/// Refuses a body whose declared length is over the limit before reading any of it. Bodies
/// without a length (chunked) are cut off while streaming by axum's `DefaultBodyLimit`.
pub async fn limit_body(request: Request, next: Next) -> Response {
    let declared =
        request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > REQUEST_BYTES_MAX as u64) {
        return payload_too_large().into_response();
    }
    next.run(request).await
}

/// One span and one log line per request (debug; warn on 5xx), and the latency histogram.
/// The route label is the matched pattern (`/v1/queues/{name}`), never the raw path, so that
/// queue names cannot blow up the number of series.
pub async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_string();
    let span = tracing::debug_span!("request", %method, path = %request.uri().path());
    let response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = response.status();
    crate::metrics::record_request(method.as_str(), &route, status.as_u16(), elapsed.as_secs_f64());
    let _entered = span.enter();
    let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
    if status.is_server_error() {
        tracing::warn!(status = status.as_u16(), elapsed_ms, "request failed");
    } else {
        tracing::debug!(status = status.as_u16(), elapsed_ms, "request done");
    }
    response
}

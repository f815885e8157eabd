//! Middleware around every request: the body guard (size and read deadline), a tracing span
//! and log line, and the latency histogram labelled by matched route.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use sluice_api::ErrorCode;
use sluice_core::limits::{REQUEST_BODY_READ_MS_MAX, REQUEST_BYTES_MAX};
use tracing::Instrument;

use crate::error::ApiError;
use crate::extract::payload_too_large;

/// Refuses a body whose declared length is over the limit before reading any of it, then reads
/// the whole body within [`REQUEST_BODY_READ_MS_MAX`] and hands it on in memory. Every handler
/// buffers its body anyway; reading it here puts one deadline on every route, native or AWS,
/// so that a client trickling bytes cannot hold a connection and its buffer forever. Bodies
/// without a length (chunked) are cut off at the limit while streaming.
pub async fn limit_body(request: Request, next: Next) -> Response {
    let declared =
        request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > REQUEST_BYTES_MAX as u64) {
        return payload_too_large().into_response();
    }
    let (parts, body) = request.into_parts();
    let deadline = Duration::from_millis(REQUEST_BODY_READ_MS_MAX);
    let bytes = match tokio::time::timeout(deadline, read_body(body)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge)) => return payload_too_large().into_response(),
        Ok(Err(BodyError::Broken(why))) => {
            // The client stopped sending or the connection broke; nothing the server did wrong.
            return ApiError::new(ErrorCode::InvalidJson, format!("the request body could not be read: {why}"))
                .into_response();
        }
        Err(_) => {
            tracing::debug!(path = %parts.uri.path(), "request body not received in time");
            return ApiError::new(
                ErrorCode::RequestTimeout,
                format!("the request body did not arrive within {REQUEST_BODY_READ_MS_MAX} ms"),
            )
            .with_details(serde_json::json!({ "request_body_read_ms_max": REQUEST_BODY_READ_MS_MAX }))
            .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

enum BodyError {
    TooLarge,
    Broken(String),
}

/// The whole body, refused as soon as it grows past [`REQUEST_BYTES_MAX`]. Frames are kept as
/// they arrive and joined once at the end (a body of one frame, the usual case, without a copy),
/// so that a body arriving slowly holds no more memory than the bytes received so far.
async fn read_body(mut body: Body) -> Result<Bytes, BodyError> {
    let mut frames: Vec<Bytes> = Vec::new();
    let mut held = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Broken(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue }; // trailers carry nothing we read
        held += data.len();
        if held > REQUEST_BYTES_MAX {
            return Err(BodyError::TooLarge);
        }
        frames.push(data);
    }
    if frames.len() <= 1 {
        return Ok(frames.pop().unwrap_or_default());
    }
    let mut joined = BytesMut::with_capacity(held);
    for frame in frames {
        joined.extend_from_slice(&frame);
    }
    Ok(joined.freeze())
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

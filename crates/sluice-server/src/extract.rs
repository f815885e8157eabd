//! Request extractors that wrap axum's and turn every rejection into an [`ApiError`], so that a
//! malformed body, path or query string gets the same `{"error": ...}` shape as any other error.

use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use sluice_api::ErrorCode;

use crate::error::ApiError;

/// A JSON request body. Requires `Content-Type: application/json`.
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        axum::Json::<T>::from_request(req, state).await.map(|axum::Json(v)| Json(v)).map_err(json_rejection)
    }
}

/// A JSON body whose every field is optional: an empty body means "all defaults", so
/// `curl -X POST .../receive` works without `-d '{}'`. A non-empty body must be JSON.
pub struct JsonOrEmpty<T>(pub T);

impl<S, T> FromRequest<S> for JsonOrEmpty<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_json_content_type);
        let bytes = Bytes::from_request(req, state).await.map_err(bytes_rejection)?;
        if bytes.is_empty() {
            return Ok(JsonOrEmpty(T::default()));
        }
        if !is_json {
            return Err(unsupported_media_type());
        }
        axum::Json::<T>::from_bytes(&bytes).map(|axum::Json(v)| JsonOrEmpty(v)).map_err(json_rejection)
    }
}

/// The rule axum's `Json` applies: `application/json` or `application/<anything>+json`.
fn is_json_content_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn unsupported_media_type() -> ApiError {
    ApiError::new(ErrorCode::UnsupportedMediaType, "send the body with `Content-Type: application/json`")
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => unsupported_media_type(),
        // Both carry serde's description with the path of the bad field (e.g.
        // `messages[0]: unknown field ...`), which is what a client needs to fix the request.
        JsonRejection::JsonDataError(e) => ApiError::new(ErrorCode::InvalidJson, e.body_text()),
        JsonRejection::JsonSyntaxError(e) => ApiError::new(ErrorCode::InvalidJson, e.body_text()),
        JsonRejection::BytesRejection(e) => bytes_rejection(e),
        other => ApiError::new(ErrorCode::InvalidJson, other.body_text()),
    }
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        payload_too_large()
    } else {
        // The client stopped sending or the connection broke; nothing the server did wrong.
        ApiError::new(ErrorCode::InvalidJson, rejection.body_text())
    }
}

pub fn payload_too_large() -> ApiError {
    let max = sluice_core::limits::REQUEST_BYTES_MAX;
    ApiError::new(ErrorCode::PayloadTooLarge, format!("the request body is larger than {max} bytes"))
        .with_details(serde_json::json!({ "request_bytes_max": max }))
}

/// Path parameters. A parameter that is not valid UTF-8 is a 400, not a 500.
pub struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(e @ PathRejection::FailedToDeserializePathParams(_)) => {
                Err(ApiError::new(ErrorCode::InvalidArgument, e.body_text()))
            }
            // Only a routing bug (a handler on a route without parameters) gets here.
            Err(e) => Err(ApiError::new(ErrorCode::Internal, e.body_text())),
        }
    }
}

/// A query string.
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e: QueryRejection| ApiError::new(ErrorCode::InvalidArgument, e.body_text()))
    }
}

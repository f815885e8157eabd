//! The AWS JSON 1.0 protocol: request bodies in, answers and errors out.
//!
//! An error carries the shape in `__type` and, in the `x-amzn-query-error` header, the Query
//! protocol's code with `Sender` or `Receiver` after a `;`. botocore takes `Error.Code` from
//! that header and aws-sdk-rust matches typed errors on it; without the `;` both ignore it.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::errors::AwsError;

pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The request body as a JSON object; an empty body is an empty input.
pub fn parse_body(body: &[u8]) -> Result<Value, AwsError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(AwsError::malformed("the body is not a JSON object")),
        Err(e) => Err(AwsError::malformed(e)),
    }
}

/// `200` with the action's output, or `{}` for actions that have none.
pub fn success(output: Option<Value>) -> Response {
    let body = output.unwrap_or_else(|| json!({}));
    reply(StatusCode::OK, body.to_string())
}

/// `namespace` is the `__type` prefix: `com.amazonaws.sqs#` for SQS.
pub fn error(e: &AwsError, namespace: &str) -> Response {
    let body = json!({ "__type": format!("{namespace}{}", e.shape), "message": e.message });
    let mut response = reply(e.status, body.to_string());
    if let Ok(v) = HeaderValue::from_str(&format!("{};{}", e.code, e.fault())) {
        response.headers_mut().insert("x-amzn-query-error", v);
    }
    response
}

fn reply(status: StatusCode, body: String) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        assert_eq!(parse_body(b""), Ok(json!({})));
        assert_eq!(parse_body(b" {\"QueueName\":\"q\"} "), Ok(json!({"QueueName": "q"})));
        assert!(parse_body(b"[1]").is_err());
        assert!(parse_body(b"{").is_err());
    }
}

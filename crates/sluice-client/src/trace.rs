//! The causal trace (`GET /v1/trace/{correlation_id}`).

use reqwest::Method;
use sluice_api::TraceResponse;

use crate::{Client, Result};

impl Client {
    /// `GET /v1/trace/{correlation_id}`: every message, publish, push, stream record, event,
    /// job and saga step that carried `correlation_id`, in causal order. An id nothing carried
    /// has no entries (not an error).
    pub async fn trace(&self, correlation_id: &str) -> Result<TraceResponse> {
        self.json(Method::GET, &["v1", "trace", correlation_id], &[], None::<&()>).await
    }
}

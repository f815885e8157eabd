//! The event store: every `/v1/events` call, and [`actual_version`], which reads a refused
//! append's actual version. The projection runner, which folds a subscription into a read model
//! in the application's own database exactly once, is in `projection`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_client::ClientError> {
//! use sluice_api::events::{AppendEventsRequest, ExpectedVersionWire, NewEventWire};
//! let client = sluice_client::Client::new("http://127.0.0.1:9324")?;
//! let event = NewEventWire {
//!     id: Some("0b5e8b6a-order-1-placed".into()),
//!     r#type: "OrderPlaced".into(),
//!     data: serde_json::json!({"total": 42}),
//!     metadata: None,
//!     correlation_id: None,
//!     causation_id: None,
//! };
//! let request = AppendEventsRequest { expected_version: ExpectedVersionWire::Version(0), events: vec![event] };
//! match client.append_events("order-1", &request).await {
//!     Ok(done) => println!("at version {}", done.last_version),
//!     Err(e) => match sluice_client::events::actual_version(&e) {
//!         Some(actual) => println!("someone else wrote first; the stream is at {actual:?}"),
//!         None => return Err(e),
//!     },
//! }
//! # Ok(()) }
//! ```

use reqwest::{Method, StatusCode};
use sluice_api::events::{
    AllEventsResponse, AppendEventsRequest, AppendEventsResponse, CheckpointRequest, CreateEventSubscriptionRequest,
    EventSubscription, EventSubscriptionList, FetchEventsRequest, PutSnapshotRequest, SnapshotResponse, SnapshotWire,
    StreamEventsResponse,
};

use crate::streams::Created;
use crate::{Client, ClientError, Result};

/// A read of `$all`: every field optional, as the query string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllQuery {
    /// The first position to read (inclusive; default 0).
    pub from_position: Option<u64>,
    /// At most this many events (1 to 1,000; default 100).
    pub max: Option<u32>,
    /// Only events of these types.
    pub types: Vec<String>,
    /// Only events of streams whose ids start with this.
    pub stream_prefix: Option<String>,
    /// Only events with this correlation id.
    pub correlation_id: Option<String>,
    /// Long poll at the end, in milliseconds (at most 20,000).
    pub wait_ms: Option<u64>,
}

/// When `e` is a `409 wrong_expected_version`, the stream's actual last version (`None`: no
/// stream); otherwise `None` at the outer level.
pub fn actual_version(e: &ClientError) -> Option<Option<u64>> {
    match e {
        ClientError::Api { code, details, .. } if code == "wrong_expected_version" => {
            Some(details.as_ref().and_then(|d| d.get("actual_version")).and_then(serde_json::Value::as_u64))
        }
        _ => None,
    }
}

impl Client {
    /// `POST /v1/events/streams/{stream_id}`. A re-sent append with the same event ids at the
    /// same position answers the original without appending twice, so give ids to retry.
    pub async fn append_events(&self, stream_id: &str, request: &AppendEventsRequest) -> Result<AppendEventsResponse> {
        self.json(Method::POST, &["v1", "events", "streams", stream_id], &[], Some(request)).await
    }

    /// `GET /v1/events/streams/{stream_id}`: `backward` reads from the end (or `from_version`)
    /// towards the start.
    pub async fn read_events(
        &self,
        stream_id: &str,
        from_version: Option<u64>,
        backward: bool,
        max: Option<u32>,
    ) -> Result<StreamEventsResponse> {
        let from = from_version.map(|v| v.to_string());
        let max = max.map(|m| m.to_string());
        let mut query: Vec<(&str, &str)> = vec![("direction", if backward { "backward" } else { "forward" })];
        if let Some(f) = &from {
            query.push(("from_version", f));
        }
        if let Some(m) = &max {
            query.push(("max", m));
        }
        self.json(Method::GET, &["v1", "events", "streams", stream_id], &query, None::<&()>).await
    }

    /// `DELETE /v1/events/streams/{stream_id}` (`hard`: for good).
    pub async fn delete_event_stream(&self, stream_id: &str, hard: bool) -> Result<()> {
        let query = [("hard", if hard { "true" } else { "false" })];
        let call =
            self.call(Method::DELETE, &["v1", "events", "streams", stream_id], &query, None::<&()>, self.timeout)?;
        let (status, bytes) = self.execute(call).await?;
        if status == StatusCode::NO_CONTENT {
            return Ok(());
        }
        crate::decode::<serde_json::Value>(status, &bytes).map(|_| ())
    }

    /// `GET /v1/events/all`.
    pub async fn read_all_events(&self, q: &AllQuery) -> Result<AllEventsResponse> {
        let (from, max, wait) =
            (q.from_position.map(|v| v.to_string()), q.max.map(|v| v.to_string()), q.wait_ms.map(|v| v.to_string()));
        let types = q.types.join(",");
        let mut query: Vec<(&str, &str)> = Vec::new();
        let pairs = [
            ("from_position", from.as_deref()),
            ("max", max.as_deref()),
            ("wait_ms", wait.as_deref()),
            ("types", (!types.is_empty()).then_some(types.as_str())),
            ("stream_prefix", q.stream_prefix.as_deref()),
            ("correlation_id", q.correlation_id.as_deref()),
        ];
        for (k, v) in pairs {
            if let Some(v) = v {
                query.push((k, v));
            }
        }
        // A long poll may take its whole wait: give the request that much more time.
        let timeout = self.timeout + std::time::Duration::from_millis(q.wait_ms.unwrap_or(0));
        let call = self.call(Method::GET, &["v1", "events", "all"], &query, None::<&()>, timeout)?;
        let (status, bytes) = self.execute(call).await?;
        crate::decode(status, &bytes)
    }

    /// `PUT /v1/events/streams/{stream_id}/snapshot`.
    pub async fn put_snapshot(&self, stream_id: &str, request: &PutSnapshotRequest) -> Result<SnapshotWire> {
        self.json(Method::PUT, &["v1", "events", "streams", stream_id, "snapshot"], &[], Some(request)).await
    }

    /// `GET /v1/events/streams/{stream_id}/snapshot`: the latest snapshot and the events after it.
    pub async fn get_snapshot(&self, stream_id: &str) -> Result<SnapshotResponse> {
        self.json(Method::GET, &["v1", "events", "streams", stream_id, "snapshot"], &[], None::<&()>).await
    }

    /// `POST /v1/events/subscriptions`.
    pub async fn create_event_subscription(
        &self,
        request: &CreateEventSubscriptionRequest,
    ) -> Result<Created<EventSubscription>> {
        let (status, value) =
            self.json_with_status(Method::POST, &["v1", "events", "subscriptions"], &[], Some(request)).await?;
        Ok(Created { value, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/events/subscriptions`.
    pub async fn list_event_subscriptions(&self) -> Result<EventSubscriptionList> {
        self.json(Method::GET, &["v1", "events", "subscriptions"], &[], None::<&()>).await
    }

    /// `GET /v1/events/subscriptions/{name}`.
    pub async fn get_event_subscription(&self, name: &str) -> Result<EventSubscription> {
        self.json(Method::GET, &["v1", "events", "subscriptions", name], &[], None::<&()>).await
    }

    /// `POST /v1/events/subscriptions/{name}/fetch`: the events after the checkpoint.
    pub async fn fetch_events(&self, name: &str, max: Option<u32>, wait_ms: Option<u64>) -> Result<AllEventsResponse> {
        let timeout = self.timeout + std::time::Duration::from_millis(wait_ms.unwrap_or(0));
        let body = FetchEventsRequest { max, wait_ms };
        let call =
            self.call(Method::POST, &["v1", "events", "subscriptions", name, "fetch"], &[], Some(&body), timeout)?;
        let (status, bytes) = self.execute(call).await?;
        crate::decode(status, &bytes)
    }

    /// `POST /v1/events/subscriptions/{name}/checkpoint`: the position of the last event
    /// handled; forward only (the same position again is a success).
    pub async fn checkpoint_events(&self, name: &str, position: u64) -> Result<EventSubscription> {
        let body = CheckpointRequest { position };
        self.json(Method::POST, &["v1", "events", "subscriptions", name, "checkpoint"], &[], Some(&body)).await
    }
}

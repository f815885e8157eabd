//! How a failed command tells its user what went wrong and what to do next:
//! `error: <message> (<code>)` and a `hint:` line, on stderr.

use std::fmt;

use sluice_api::ErrorCode;
use sluice_client::ClientError;

/// An error that knows what the user should do about it.
#[derive(Debug)]
pub struct Hinted {
    pub message: String,
    pub hint: String,
}

impl fmt::Display for Hinted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Hinted {}

/// Wraps `message` with a hint for the user.
pub fn hinted(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    Hinted { message: message.into(), hint: hint.into() }.into()
}

/// Prints `error`, the reasons its details list (a schema's incompatibilities, a message's
/// schema failures) and, when one is known, a hint.
pub fn print(error: &anyhow::Error) {
    eprintln!("error: {error:#}");
    for line in detail_lines(error) {
        eprintln!("  {line}");
    }
    if let Some(hint) = hint(error) {
        eprintln!("hint: {hint}");
    }
}

fn hint(error: &anyhow::Error) -> Option<String> {
    for cause in error.chain() {
        if let Some(hinted) = cause.downcast_ref::<Hinted>() {
            return Some(hinted.hint.clone());
        }
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            return client_hint(client).map(str::to_owned);
        }
    }
    None
}

/// One line per entry of `details.reasons` (`schema_incompatible`) or `details.errors`
/// (`schema_validation_failed`): what a user needs to fix, which the message alone only names.
fn detail_lines(error: &anyhow::Error) -> Vec<String> {
    let details = error.chain().find_map(|cause| match cause.downcast_ref::<ClientError>() {
        Some(ClientError::Api { details: Some(d), .. } | ClientError::Rejected { details: Some(d), .. }) => Some(d),
        _ => None,
    });
    let Some(details) = details else { return Vec::new() };
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    let mut lines = Vec::new();
    for r in details["reasons"].as_array().into_iter().flatten() {
        let at = text(r, "path");
        lines.push(format!(
            "version {} ({}): {} at {}: {}",
            r["version"],
            text(r, "direction"),
            text(r, "kind"),
            if at.is_empty() { "/" } else { &at },
            text(r, "message")
        ));
    }
    for e in details["errors"].as_array().into_iter().flatten() {
        let pointer = text(e, "pointer");
        lines.push(format!("at {}: {}", if pointer.is_empty() { "(the body)" } else { &pointer }, text(e, "message")));
    }
    lines
}

fn client_hint(error: &ClientError) -> Option<&'static str> {
    match error {
        ClientError::Connect { .. } => {
            Some("is the server running? start it with `sluice serve`, or point --server (SLUICE_SERVER) at it")
        }
        ClientError::Transport { timed_out: true, .. } => {
            Some("the server did not answer in time; its log may say why")
        }
        ClientError::Transport { .. } => Some("the connection broke; check that the server is still running"),
        ClientError::InvalidUrl { .. } => Some("pass --server as a URL, e.g. --server http://127.0.0.1:9324"),
        ClientError::UnexpectedStatus { .. } | ClientError::Decode { .. } => {
            Some("check that --server points at a Sluice server of the same version")
        }
        ClientError::Api { .. } | ClientError::Rejected { .. } => error.code().and_then(code_hint),
    }
}

fn code_hint(code: ErrorCode) -> Option<&'static str> {
    use ErrorCode::*;
    Some(match code {
        QueueNotFound => "list queues with `sluice queue list`, or create one with `sluice queue create NAME`",
        DeadLetterQueueNotFound => "create the dead-letter queue first with `sluice queue create NAME`",
        QueueExists => "see its attributes with `sluice queue get NAME`, or change them with `sluice queue update`",
        RedriveNotFound => "list redrive tasks with `sluice dlq status`",
        RedriveRunning => "watch it with `sluice dlq status`, or stop it with `sluice dlq cancel ID`",
        StaleReceipt | NotInFlight => "receive the message again to get a fresh receipt",
        InvalidReceipt | ForeignReceipt => "pass a receipt that `sluice receive` printed for this queue",
        MessageTooLarge => {
            "send a smaller body, or raise the limit with `sluice queue update NAME --message-bytes-max N`"
        }
        PayloadTooLarge | BatchTooLarge => "send fewer or smaller messages per request",
        LimitExceeded => "delete queues or subscriptions you no longer need",
        TopicNotFound => "list topics with `sluice topic list`, or create one with `sluice topic create NAME`",
        TopicExists => "see its settings with `sluice topic get NAME`",
        SubscriptionNotFound => "list the topic's subscriptions with `sluice topic subscriptions TOPIC`",
        SubscriptionExists => {
            "unsubscribe first (`sluice topic unsubscribe TOPIC ID`) to subscribe with other settings"
        }
        PublishIncomplete => {
            "publish again once the server's disk problem is fixed; some subscriptions may get the message twice"
        }
        Contended => "another client changed it at the same moment; run the command again",
        StorePoisoned => "the server's disk failed; read its log, fix the disk and restart `sluice serve`",
        StoreUnavailable => {
            "the server's database is unreachable or failed the call; run the command again (the server's log says why)"
        }
        InsufficientStorage => "free space on the disk holding the server's data; the server resumes by itself",
        ShuttingDown => "the server is stopping; try again once it is back",
        RequestTimeout => "the request was sent too slowly; check the network between here and the server",
        Internal => "the server's log has the details",
        Unauthenticated => {
            "pass an API key with --api-key or SLUICE_KEY (`sluice key create` makes one; the server's admin key works too)"
        }
        Forbidden => "use a key with the scope named above (`sluice key create --scopes ...`)",
        KeyNotFound => "list keys with `sluice key list`",
        TenantNotFound => "list tenants with quotas with `sluice tenant list`",
        QuotaExceeded => {
            "delete queues, topics or messages of the tenant, or raise its quota (`sluice tenant set TENANT ...`)"
        }
        ScheduleNotFound => "list schedules with `sluice schedule list`",
        ScheduleExists => "see its definition with `sluice schedule get NAME`; delete it first to define it again",
        StreamNotFound => "list streams with `sluice stream list`, or create one with `sluice stream create NAME`",
        StreamExists => "see its settings with `sluice stream get NAME`",
        GroupNotFound => "list the stream's groups with `sluice stream group list STREAM`",
        GroupExists => "see its settings with `sluice stream group get STREAM NAME`",
        PartitionOutOfRange => "see the stream's partitions with `sluice stream get NAME`",
        OffsetOutOfRange => "read from the first kept offset (`sluice stream get NAME` shows it), or omit the offset",
        OffsetRegression => "commits only move forward; go back with `sluice stream group seek`",
        StaleGeneration => "fetch again to learn the member's partitions and generation",
        RecordTooLarge => "append a smaller record, or raise record_bytes_max with a PATCH of the stream",
        WrongGroupMode => "see the group's mode with `sluice stream group get STREAM NAME`",
        AlertRuleNotFound => "list alert rules with `sluice alert list`",
        AlertRuleExists => "see it with `sluice alert get NAME`; delete it first to change it",
        RelayNotFound => "list relays with `sluice relay list`, or create one with `sluice relay create`",
        RelayExists => "see its configuration with `sluice relay get NAME`, or delete it first to change it",
        RelaySourceInUse => "one relay per table: see the other with `sluice relay get NAME`",
        RelaySourceUnreachable => {
            "check the --source URL (host, port, user, password) and that the server running Sluice can reach it"
        }
        RelaySourceInvalid => "check --table and the --column mapping against the table's columns",
        JobNotFound => "list jobs with `sluice job list`; finished jobs are pruned after their result_ttl_ms",
        StaleLease => "the attempt is over (its lease lapsed, or it was completed or failed); claim the job again",
        JobFinished => "see how it ended with `sluice job get ID`",
        SagaNotFound => "define it with `sluice saga define NAME --file DEFINITION.json`",
        SagaInstanceNotFound => "list instances with `sluice saga list`",
        SagaReplyUnmatched => {
            "echo the message's X-Correlation-Id, sluice.saga.step, sluice.saga.kind and sluice.saga.attempt; a late or repeated answer changes nothing"
        }
        SagaWrongState => "see where it is with `sluice saga get ID`",
        SchemaNotFound => {
            "list registered types with `sluice schema list`, or register one with `sluice schema register`"
        }
        SchemaInvalid => "fix the schema (JSON Schema 2020-12, local $refs only) and register it again",
        SchemaIncompatible => {
            "change the schema as the reasons say, or relax the mode with `sluice schema config TYPE --compatibility none`"
        }
        SchemaValidationFailed => {
            "fix the message at the pointer shown, or check it first with `sluice schema check TYPE --body JSON`"
        }
        WrongExpectedVersion => {
            "read the stream (`sluice events read STREAM --backward --max 1`), decide again, and append with its version"
        }
        EventIdConflict => "give the new events ids of their own; an id names one event of a stream",
        EventStreamNotFound => "list what exists with `sluice events all --stream-prefix PREFIX`",
        EventStreamDeleted => "the stream was hard-deleted; append to another stream id",
        EventSubscriptionNotFound => "create it with `sluice events subscribe NAME --from start`",
        EventSubscriptionExists => "use another name, or the subscription's own settings (types, prefix, start)",
        CheckpointRegression => "checkpoints only move forward; create a new subscription to read again from the start",
        SnapshotNotFound => "store one with PUT /v1/events/streams/STREAM/snapshot, or read the stream from the start",
        QueueFull => {
            "the queue is at its depth limit: let its consumers catch up and retry, or raise it with `sluice queue update NAME --max-depth-messages N`"
        }
        RateLimited => "the queue's rate limit is reached: retry after the Retry-After the server gave, or send slower",
        Shedding => "the server is shedding load (its /readyz says why); retry later, or send with a higher --priority",
        IdempotencyKeyInvalid => "use 1 to 255 visible ASCII characters (no spaces) as --idempotency-key",
        IdempotencyKeyMismatch => "this key was used for another request; use a new key for a new request",
        IdempotencyKeyInUse => "the first request with this key is still running; run the command again shortly",
        IdempotencyKeysFull => {
            "the server keeps too many idempotency answers; retry later, or raise its --idempotency-entries-max"
        }
        InvalidJson | InvalidArgument | EmptyBatch | NotFound | MethodNotAllowed | UnsupportedMediaType => {
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_get_the_hint_of_their_code() {
        let error = anyhow::Error::from(ClientError::Api {
            status: 404,
            code: "queue_not_found".into(),
            message: "no queue named x".into(),
            details: None,
        })
        .context("sending to x");
        assert_eq!(format!("{error:#}"), "sending to x: no queue named x (queue_not_found)");
        assert!(hint(&error).unwrap().contains("sluice queue list"));
    }

    #[test]
    fn schema_errors_list_their_reasons_and_failures() {
        let incompatible = anyhow::Error::from(ClientError::Api {
            status: 409,
            code: "schema_incompatible".into(),
            message: "the schema is not backward compatible with version 2".into(),
            details: Some(serde_json::json!({"compatibility": "backward", "reasons": [
                {"version": 2, "direction": "backward", "kind": "required_added", "path": "/required", "message": "note is required now"}
            ]})),
        });
        assert_eq!(
            detail_lines(&incompatible),
            ["version 2 (backward): required_added at /required: note is required now"]
        );
        let refused = anyhow::Error::from(ClientError::Rejected {
            code: "schema_validation_failed".into(),
            message: "the body breaks order version 1".into(),
            details: Some(serde_json::json!({"pointer": "/total", "errors": [
                {"pointer": "/total", "schema_path": "/properties/total/minimum", "message": "-1 is less than 0"},
                {"pointer": "", "schema_path": "/required", "message": "\"id\" is required"}
            ]})),
        });
        assert_eq!(detail_lines(&refused), ["at /total: -1 is less than 0", "at (the body): \"id\" is required"]);
        assert!(hint(&refused).unwrap().contains("sluice schema check"));
        assert!(detail_lines(&hinted("no", "do this")).is_empty());
    }

    #[test]
    fn refused_connections_point_at_serve() {
        let error =
            anyhow::Error::from(ClientError::Connect { url: "http://127.0.0.1:1/".into(), reason: "refused".into() });
        assert!(hint(&error).unwrap().contains("sluice serve"));
        assert_eq!(hint(&hinted("no", "do this")).as_deref(), Some("do this"));
    }
}

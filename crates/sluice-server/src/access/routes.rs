//! What each native route needs: the one table of scopes, so that the matrix test and the
//! README's table can be checked against it. A `/v1` route missing here needs `*:*:admin`
//! (closed by default), never nothing.

use axum::http::Method;
use sluice_services::auth::{Action, Kind, Requirement};

/// What a call needs before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// No key: probes, the OpenAPI document, the dashboard's files, and the AWS protocols
    /// (which SigV4 checks on their own).
    Open,
    /// One scope.
    Scope(Requirement),
    /// A scope over the resource named by a field of the JSON body: a string (`name`, `queue`)
    /// or a list of strings (`queues`, every one needed). A body without it needs the
    /// pattern `*` (the handler then refuses the body anyway).
    Body { kind: Kind, field: &'static str, action: Action },
}

/// Which of the server's own endpoints are put behind a scope (`--protect-metrics`,
/// `--protect-health`); both open by default, for scrapers and load balancers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protected {
    pub metrics: bool,
    pub health: bool,
}

/// The need of `method path`; `segments` are the path's, percent-decoded.
pub fn need(method: &Method, segments: &[String], protected: Protected) -> Need {
    use Action::*;
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let read = *method == Method::GET || *method == Method::HEAD;
    let one = |kind, name: Option<&str>, action| Need::Scope(Requirement::new(kind, name.map(str::to_string), action));
    let view_or = |kind, name: Option<&str>, action| one(kind, name, if read { Read } else { action });
    match segs.as_slice() {
        ["healthz"] | ["readyz"] if protected.health => one(Kind::Admin, Some("health"), Read),
        ["metrics"] if protected.metrics => one(Kind::Admin, Some("metrics"), Read),
        ["v1", "openapi.json"] => Need::Open,
        [first, ..] if *first != "v1" => Need::Open,

        // Queues and their redrives.
        ["v1", "queues"] if read => one(Kind::Queues, None, Read),
        ["v1", "queues"] => Need::Body { kind: Kind::Queues, field: "name", action: Manage },
        ["v1", "queues", q] => view_or(Kind::Queues, Some(q), Manage),
        ["v1", "queues", q, "messages"] => view_or(Kind::Queues, Some(q), Send),
        ["v1", "queues", q, "receive" | "ack" | "nack" | "visibility"] => one(Kind::Queues, Some(q), Receive),
        ["v1", "queues", q, "purge" | "redrive"] => view_or(Kind::Queues, Some(q), Manage),
        ["v1", "redrives", ..] => view_or(Kind::Queues, None, Manage),

        // Topics and subscriptions.
        ["v1", "topics"] if read => one(Kind::Topics, None, Read),
        ["v1", "topics"] => Need::Body { kind: Kind::Topics, field: "name", action: Manage },
        ["v1", "topics", t] => view_or(Kind::Topics, Some(t), Manage),
        ["v1", "topics", t, "publish"] => one(Kind::Topics, Some(t), Publish),
        ["v1", "topics", t, "subscriptions", ..] => view_or(Kind::Topics, Some(t), Subscribe),
        ["v1", "subscriptions"] => one(Kind::Topics, None, Read),

        // Streams: reading and consuming in a group are `read`; deleting a group is `manage`.
        ["v1", "streams"] if read => one(Kind::Streams, None, Read),
        ["v1", "streams"] => Need::Body { kind: Kind::Streams, field: "name", action: Manage },
        ["v1", "streams", s] => view_or(Kind::Streams, Some(s), Manage),
        ["v1", "streams", s, "records"] => view_or(Kind::Streams, Some(s), Append),
        ["v1", "streams", s, "partitions", ..] => one(Kind::Streams, Some(s), Read),
        ["v1", "streams", s, "groups", _] if *method == Method::DELETE => one(Kind::Streams, Some(s), Manage),
        ["v1", "streams", s, "groups", ..] => one(Kind::Streams, Some(s), Read),

        // The event store: subscriptions read across streams, so they are over every name.
        ["v1", "events", "all"] => one(Kind::Events, None, Read),
        ["v1", "events", "streams", id] if *method == Method::DELETE => one(Kind::Events, Some(id), Manage),
        ["v1", "events", "streams", id, ..] => view_or(Kind::Events, Some(id), Append),
        ["v1", "events", "subscriptions", _] if *method == Method::DELETE => one(Kind::Events, None, Manage),
        ["v1", "events", "subscriptions", ..] => one(Kind::Events, None, Read),

        // Jobs: by queue where the call names it; a job by its id is over every queue.
        ["v1", "jobs"] if read => one(Kind::Jobs, None, Read),
        ["v1", "jobs"] => Need::Body { kind: Kind::Jobs, field: "queue", action: Enqueue },
        ["v1", "jobs", "claim"] => Need::Body { kind: Kind::Jobs, field: "queues", action: Work },
        ["v1", "jobs", "stats"] => one(Kind::Jobs, None, Read),
        ["v1", "jobs", "callback-secret"] => one(Kind::Jobs, None, Manage),
        ["v1", "jobs", _] => one(Kind::Jobs, None, Read),
        ["v1", "jobs", _, "cancel"] => one(Kind::Jobs, None, Enqueue),
        ["v1", "jobs", _, "heartbeat" | "complete" | "fail"] => one(Kind::Jobs, None, Work),

        // Sagas.
        ["v1", "sagas"] => one(Kind::Sagas, None, Read),
        ["v1", "sagas", "instances", ..] => view_or(Kind::Sagas, None, Start),
        ["v1", "sagas", name] => view_or(Kind::Sagas, Some(name), Manage),
        ["v1", "sagas", name, "instances"] => one(Kind::Sagas, Some(name), Start),
        ["v1", "replies"] => one(Kind::Sagas, None, Reply),

        // Relays, schedules, schemas: read or manage.
        ["v1", kind @ ("relays" | "schedules")] => {
            let kind = if *kind == "relays" { Kind::Relays } else { Kind::Schedules };
            if read { one(kind, None, Read) } else { Need::Body { kind, field: "name", action: Manage } }
        }
        ["v1", kind @ ("relays" | "schedules"), name, ..] => {
            view_or(if *kind == "relays" { Kind::Relays } else { Kind::Schedules }, Some(name), Manage)
        }
        ["v1", "schemas"] => one(Kind::Schemas, None, Read),
        ["v1", "schemas", ty, "check"] => one(Kind::Schemas, Some(ty), Read),
        ["v1", "schemas", ty, ..] => view_or(Kind::Schemas, Some(ty), Manage),

        // The server itself.
        ["v1", "keys", ..] => view_or(Kind::Admin, Some("keys"), Manage),
        ["v1", "tenants", ..] => view_or(Kind::Admin, Some("tenants"), Manage),
        ["v1", "alerts", ..] => view_or(Kind::Admin, Some("alerts"), Manage),
        ["v1", "stats", ..] => one(Kind::Admin, Some("stats"), Read),
        ["v1", "trace", ..] => one(Kind::Admin, Some("trace"), Read),
        _ => one(Kind::Admin, None, Manage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, path: &str) -> String {
        let segments: Vec<String> = path.trim_start_matches('/').split('/').map(str::to_string).collect();
        match need(&method, &segments, Protected::default()) {
            Need::Open => "open".to_string(),
            Need::Scope(r) => r.to_string(),
            Need::Body { kind, field, action } => format!("{}:<{field}>:{}", kind.as_str(), action.as_str()),
        }
    }

    #[test]
    fn each_route_needs_its_scope() {
        for (method, path, expected) in [
            (Method::GET, "/healthz", "open"),
            (Method::GET, "/metrics", "open"),
            (Method::GET, "/ui/app.js", "open"),
            (Method::POST, "/", "open"),
            (Method::GET, "/v1/openapi.json", "open"),
            (Method::GET, "/v1/queues", "queues:*:read"),
            (Method::POST, "/v1/queues", "queues:<name>:manage"),
            (Method::PATCH, "/v1/queues/orders", "queues:orders:manage"),
            (Method::POST, "/v1/queues/orders/messages", "queues:orders:send"),
            (Method::GET, "/v1/queues/orders/messages", "queues:orders:read"),
            (Method::POST, "/v1/queues/orders/ack", "queues:orders:receive"),
            (Method::POST, "/v1/queues/orders/redrive", "queues:orders:manage"),
            (Method::DELETE, "/v1/redrives/abc", "queues:*:manage"),
            (Method::POST, "/v1/topics/news/publish", "topics:news:publish"),
            (Method::DELETE, "/v1/topics/news/subscriptions/1", "topics:news:subscribe"),
            (Method::POST, "/v1/streams/clicks/records", "streams:clicks:append"),
            (Method::GET, "/v1/streams/clicks/partitions/0/records", "streams:clicks:read"),
            (Method::POST, "/v1/streams/clicks/groups/g/commit", "streams:clicks:read"),
            (Method::DELETE, "/v1/streams/clicks/groups/g", "streams:clicks:manage"),
            (Method::POST, "/v1/events/streams/order-1", "events:order-1:append"),
            (Method::PUT, "/v1/events/streams/order-1/snapshot", "events:order-1:append"),
            (Method::DELETE, "/v1/events/streams/order-1", "events:order-1:manage"),
            (Method::POST, "/v1/events/subscriptions/s/fetch", "events:*:read"),
            (Method::POST, "/v1/jobs", "jobs:<queue>:enqueue"),
            (Method::POST, "/v1/jobs/claim", "jobs:<queues>:work"),
            (Method::POST, "/v1/jobs/j1/complete", "jobs:*:work"),
            (Method::GET, "/v1/jobs/j1", "jobs:*:read"),
            (Method::PUT, "/v1/sagas/order", "sagas:order:manage"),
            (Method::POST, "/v1/sagas/order/instances", "sagas:order:start"),
            (Method::POST, "/v1/sagas/instances/i1/cancel", "sagas:*:start"),
            (Method::POST, "/v1/replies", "sagas:*:reply"),
            (Method::POST, "/v1/relays", "relays:<name>:manage"),
            (Method::POST, "/v1/schedules/tick/pause", "schedules:tick:manage"),
            (Method::POST, "/v1/schemas/Order/versions", "schemas:Order:manage"),
            (Method::POST, "/v1/schemas/Order/check", "schemas:Order:read"),
            (Method::POST, "/v1/keys", "admin:keys:manage"),
            (Method::GET, "/v1/keys", "admin:keys:read"),
            (Method::PUT, "/v1/tenants/acme", "admin:tenants:manage"),
            (Method::GET, "/v1/tenants", "admin:tenants:read"),
            (Method::GET, "/v1/trace/c1", "admin:trace:read"),
            (Method::GET, "/v1/nothing-here", "admin:*:manage"),
        ] {
            assert_eq!(of(method.clone(), path), expected, "{method} {path}");
        }
        let protected = Protected { metrics: true, health: true };
        assert_eq!(
            need(&Method::GET, &["metrics".to_string()], protected),
            Need::Scope(Requirement::new(Kind::Admin, Some("metrics".into()), Action::Read))
        );
    }
}

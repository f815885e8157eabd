//! Scopes: what an API key may do, written `kind:name-pattern:actions`.
//!
//! - `kind` is a resource kind (`queues`, `topics`, `streams`, `events`, `jobs`, `sagas`,
//!   `relays`, `schedules`, `schemas`, `admin`) or `*` for every kind.
//! - `name-pattern` is a resource name in which `*` stands for any run of characters
//!   (`orders-*`, `*-dlq`, `*`); nothing else is special. It may itself hold `:`, since the kind
//!   ends at the first `:` and the actions start after the last one.
//! - `actions` is a comma-separated list of the kind's actions ([`Kind::actions`]); `admin` or
//!   `*` is every action of the kind.
//!
//! A call needs one [`Requirement`]: a kind, the name of the resource it acts on, and an action.
//! Calls that span names (listing, a job by its id) have no name, and only a scope whose pattern
//! is `*` covers them: a key limited to `orders-*` cannot list every queue.

use std::collections::BTreeSet;
use std::fmt;

use sluice_core::ValidationError;

/// Most scopes one key holds.
pub const SCOPES_PER_KEY_MAX: usize = 64;
/// Longest scope, in bytes.
pub const SCOPE_LEN_MAX: usize = 512;

/// A resource kind a scope names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Queues,
    Topics,
    Streams,
    Events,
    Jobs,
    Sagas,
    Relays,
    Schedules,
    Schemas,
    /// The server itself: names `keys`, `alerts`, `stats`, `trace`, `metrics`, `health`.
    Admin,
}

/// Something a call does to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// See it: view, list, peek, read records or events, consume a stream in a group.
    Read,
    Send,
    /// Receive, acknowledge, nack and change visibility.
    Receive,
    Publish,
    /// Add and remove a topic's subscriptions.
    Subscribe,
    /// Append to a stream or an event stream (and put an event stream's snapshot).
    Append,
    /// Enqueue and cancel jobs.
    Enqueue,
    /// Claim jobs and report on them (heartbeat, complete, fail).
    Work,
    /// Start, cancel and retry saga instances.
    Start,
    /// Answer a saga's queue step (`POST /v1/replies`).
    Reply,
    /// Create, change and delete the resource (and purge, redrive, pause, resume).
    Manage,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Queues,
        Kind::Topics,
        Kind::Streams,
        Kind::Events,
        Kind::Jobs,
        Kind::Sagas,
        Kind::Relays,
        Kind::Schedules,
        Kind::Schemas,
        Kind::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Queues => "queues",
            Kind::Topics => "topics",
            Kind::Streams => "streams",
            Kind::Events => "events",
            Kind::Jobs => "jobs",
            Kind::Sagas => "sagas",
            Kind::Relays => "relays",
            Kind::Schedules => "schedules",
            Kind::Schemas => "schemas",
            Kind::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The actions a scope of this kind may name.
    pub fn actions(self) -> &'static [Action] {
        use Action::*;
        match self {
            Kind::Queues => &[Read, Send, Receive, Manage],
            Kind::Topics => &[Read, Publish, Subscribe, Manage],
            Kind::Streams | Kind::Events => &[Read, Append, Manage],
            Kind::Jobs => &[Read, Enqueue, Work, Manage],
            Kind::Sagas => &[Read, Start, Reply, Manage],
            Kind::Relays | Kind::Schedules | Kind::Schemas | Kind::Admin => &[Read, Manage],
        }
    }
}

impl Action {
    pub const ALL: [Action; 11] = [
        Action::Read,
        Action::Send,
        Action::Receive,
        Action::Publish,
        Action::Subscribe,
        Action::Append,
        Action::Enqueue,
        Action::Work,
        Action::Start,
        Action::Reply,
        Action::Manage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Send => "send",
            Action::Receive => "receive",
            Action::Publish => "publish",
            Action::Subscribe => "subscribe",
            Action::Append => "append",
            Action::Enqueue => "enqueue",
            Action::Work => "work",
            Action::Start => "start",
            Action::Reply => "reply",
            Action::Manage => "manage",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// One parsed scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `None`: every kind (`*`).
    pub kind: Option<Kind>,
    pub pattern: String,
    /// `None`: every action (`admin` or `*`).
    pub actions: Option<BTreeSet<Action>>,
}

/// What one call needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub kind: Kind,
    /// The resource acted on; `None` when the call spans names.
    pub name: Option<String>,
    pub action: Action,
}

impl Requirement {
    pub fn new(kind: Kind, name: Option<String>, action: Action) -> Requirement {
        Requirement { kind, name, action }
    }
}

impl fmt::Display for Requirement {
    /// As a scope that would grant it, e.g. `queues:orders:send` (`*` for a call over names).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.kind.as_str(), self.name.as_deref().unwrap_or("*"), self.action.as_str())
    }
}

impl fmt::Display for Scope {
    /// The canonical spelling: actions in a fixed order, `*` for every action.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind.map_or("*", Kind::as_str);
        let actions = match &self.actions {
            None => "*".to_string(),
            Some(set) => set.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(","),
        };
        write!(f, "{kind}:{}:{actions}", self.pattern)
    }
}

impl Scope {
    /// Parses one scope; the error names the scope and what would be accepted.
    pub fn parse(text: &str) -> Result<Scope, ValidationError> {
        let bad = |why: String| ValidationError::new("scopes", format!("scope {text:?}: {why}"));
        if text.len() > SCOPE_LEN_MAX {
            return Err(bad(format!("a scope is at most {SCOPE_LEN_MAX} bytes")));
        }
        let (Some((kind, rest)), Some((_, actions))) = (text.split_once(':'), text.rsplit_once(':')) else {
            return Err(bad("a scope is written kind:name-pattern:actions, e.g. queues:orders-*:send,receive".into()));
        };
        let Some(pattern) = rest.rsplit_once(':').map(|(p, _)| p) else {
            return Err(bad("a scope is written kind:name-pattern:actions, e.g. queues:orders-*:send,receive".into()));
        };
        let kind = match kind {
            "*" => None,
            k => Some(Kind::parse(k).ok_or_else(|| {
                let kinds: Vec<_> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                bad(format!("unknown kind {k:?}; the kinds are {} and *", kinds.join(", ")))
            })?),
        };
        if pattern.is_empty() || pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the name pattern is a resource name, with * for any run of characters".into()));
        }
        let allowed: &[Action] = kind.map_or(&Action::ALL, Kind::actions);
        let mut set = BTreeSet::new();
        let mut every = false;
        for action in actions.split(',').map(str::trim) {
            if action == "*" || action == "admin" {
                every = true;
                continue;
            }
            match Action::parse(action) {
                Some(a) if allowed.contains(&a) => {
                    set.insert(a);
                }
                _ => {
                    let names: Vec<_> = allowed.iter().map(|a| a.as_str()).collect();
                    return Err(bad(format!(
                        "unknown action {action:?} for {}; the actions are {}, or admin (all of them)",
                        kind.map_or("*", Kind::as_str),
                        names.join(", ")
                    )));
                }
            }
        }
        Ok(Scope { kind, pattern: pattern.to_string(), actions: (!every).then_some(set) })
    }

    /// Whether this scope grants the requirement.
    pub fn allows(&self, need: &Requirement) -> bool {
        let kind = self.kind.is_none_or(|k| k == need.kind);
        let action = self.actions.as_ref().is_none_or(|set| set.contains(&need.action));
        let name = match &need.name {
            None => self.pattern == "*",
            Some(name) => matches(&self.pattern, name),
        };
        kind && action && name
    }
}

/// Parses every scope of a key: 1 to `SCOPES_PER_KEY_MAX` of them.
pub fn parse_scopes(texts: &[String]) -> Result<Vec<Scope>, ValidationError> {
    if texts.is_empty() || texts.len() > SCOPES_PER_KEY_MAX {
        return Err(ValidationError::new("scopes", format!("a key has 1 to {SCOPES_PER_KEY_MAX} scopes")));
    }
    texts.iter().map(|t| Scope::parse(t)).collect()
}

/// Whether `name` matches `pattern`, where `*` is any run of characters (none included). The
/// greedy walk keeps only the last `*` to backtrack to, so it is linear in practice and at worst
/// the product of the two lengths (both bounded).
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(kind: Kind, name: Option<&str>, action: Action) -> Requirement {
        Requirement::new(kind, name.map(str::to_string), action)
    }

    #[test]
    fn patterns_match_with_star_as_any_run() {
        for (pattern, name, expected) in [
            ("orders", "orders", true),
            ("orders", "orders-1", false),
            ("orders-*", "orders-1", true),
            ("orders-*", "orders-", true),
            ("orders-*", "order", false),
            ("*-dlq", "orders-dlq", true),
            ("*-dlq", "orders-dlq2", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*", "", true),
            ("**", "anything", true),
            ("o*s.fifo", "orders.fifo", true),
        ] {
            assert_eq!(matches(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn a_scope_grants_its_kind_names_and_actions_only() {
        let scope = Scope::parse("queues:orders-*:send,receive").unwrap();
        assert!(scope.allows(&need(Kind::Queues, Some("orders-eu"), Action::Send)));
        assert!(scope.allows(&need(Kind::Queues, Some("orders-eu"), Action::Receive)));
        assert!(!scope.allows(&need(Kind::Queues, Some("orders-eu"), Action::Manage)));
        assert!(!scope.allows(&need(Kind::Queues, Some("billing"), Action::Send)));
        assert!(!scope.allows(&need(Kind::Topics, Some("orders-eu"), Action::Read)));
        // A call over every name needs the pattern `*`.
        assert!(!scope.allows(&need(Kind::Queues, None, Action::Read)));
        assert!(Scope::parse("queues:*:read").unwrap().allows(&need(Kind::Queues, None, Action::Read)));

        let admin = Scope::parse("*:*:admin").unwrap();
        for kind in Kind::ALL {
            for &action in kind.actions() {
                assert!(admin.allows(&need(kind, None, action)));
            }
        }
        let streams = Scope::parse("streams:*:*").unwrap();
        assert!(streams.allows(&need(Kind::Streams, Some("clicks"), Action::Manage)));
        assert!(!streams.allows(&need(Kind::Events, Some("clicks"), Action::Read)));
        // A pattern may hold colons (event stream ids such as `order:1`).
        let colon = Scope::parse("events:order:*:read").unwrap();
        assert_eq!(colon.pattern, "order:*");
        assert!(colon.allows(&need(Kind::Events, Some("order:7"), Action::Read)));
    }

    #[test]
    fn bad_scopes_say_what_is_accepted() {
        for (text, says) in [
            ("queues", "kind:name-pattern:actions"),
            ("queues:orders", "kind:name-pattern:actions"),
            ("tables:*:read", "unknown kind \"tables\""),
            ("queues:*:publish", "unknown action \"publish\" for queues; the actions are read, send, receive, manage"),
            ("queues::read", "name pattern"),
            ("queues:a b:read", "name pattern"),
            ("*:*:fly", "unknown action \"fly\""),
        ] {
            let e = Scope::parse(text).unwrap_err();
            assert_eq!(e.field, "scopes");
            assert!(e.message.contains(says), "{text}: {}", e.message);
        }
        assert!(parse_scopes(&[]).is_err());
        assert!(parse_scopes(&vec!["queues:*:read".to_string(); SCOPES_PER_KEY_MAX + 1]).is_err());
        let long = format!("queues:{}:read", "a".repeat(SCOPE_LEN_MAX));
        assert!(Scope::parse(&long).unwrap_err().message.contains("at most 512 bytes"));
    }

    #[test]
    fn scopes_and_requirements_print_canonically() {
        assert_eq!(Scope::parse("queues:o-*:receive,send").unwrap().to_string(), "queues:o-*:send,receive");
        assert_eq!(Scope::parse("*:*:admin").unwrap().to_string(), "*:*:*");
        assert_eq!(need(Kind::Queues, Some("orders"), Action::Send).to_string(), "queues:orders:send");
        assert_eq!(need(Kind::Jobs, None, Action::Work).to_string(), "jobs:*:work");
    }
}

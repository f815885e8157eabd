//! What an idempotency entry is: its scope and record key, the request's fingerprint, the
//! entry's states and their encoding as a store record, the answer template that a commit's
//! outcomes complete, and every limit of the feature.
//!
//! Entries are records of kind [`ENTRY_KIND`]. The key is the SHA-256 of the scope (principal,
//! method, path, key) in hex, so that a long path cannot push a key past the record key limit
//! and one principal's keys never meet another's; the scope itself is kept in the value for
//! operators. Every value is laid out by `sluice_store::with_outcomes` (the entry's JSON, then
//! the outcomes of the commit that wrote it, none for most states), so one decoder reads them
//! all.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sluice_store::{StoredOutcome, split_outcomes, with_outcomes};

/// The record kind of idempotency entries.
pub const ENTRY_KIND: &str = "idempotency";
/// The record kind of the sweeper's lease (one record, [`SWEEP_LEASE_KEY`]).
pub const SWEEP_LEASE_KIND: &str = "idempotency_lease";
pub const SWEEP_LEASE_KEY: &str = "sweeper";
/// The format of an entry's JSON.
pub const ENTRY_FORMAT: u8 = 1;

/// Longest key, in bytes of visible ASCII (`!` to `~`).
pub const KEY_LEN_MAX: usize = 255;
/// How long an answer is kept when `--idempotency-ttl` is not given: 24 hours.
pub const TTL_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;
/// The shortest and longest TTL `--idempotency-ttl` takes: 1 second to 30 days.
pub const TTL_MS_MIN: u64 = 1_000;
pub const TTL_MS_MAX: u64 = 30 * 24 * 60 * 60 * 1000;
/// Most entries kept at once (`--idempotency-entries-max`); past it a new key is refused
/// (429 `idempotency_keys_full`) until entries expire.
pub const ENTRIES_COUNT_MAX_DEFAULT: u64 = 1_000_000;
/// Most bytes of stored entries at once (`--idempotency-bytes-max`), 1 GiB by default.
pub const ENTRIES_BYTES_MAX_DEFAULT: u64 = 1024 * 1024 * 1024;
/// Longest `Prefer: wait=N`, in seconds; a larger N waits this long.
pub const WAIT_S_MAX: u64 = 60;
/// How long an in-progress entry of another process is taken for alive on a shared store
/// (PostgreSQL): past it, the request is taken for dead and a retry executes. Longer than any
/// request runs (the longest long poll is 20 s).
pub const CLAIM_ABANDONED_MS_DEFAULT: u64 = 5 * 60 * 1000;
/// How often expired entries are swept (on the services' clock).
pub const SWEEP_MS: u64 = 60_000;
/// How long the sweeper's lease lasts; renewed at every sweep.
pub const SWEEP_LEASE_MS: u64 = 3 * SWEEP_MS;
/// Most entries one sweep page reads.
pub const SWEEP_PAGE_MAX: usize = 1_000;

/// Who sent a request. Until authentication assigns principals, every request is
/// [`Principal::anonymous`]; the server takes it from the request's extensions, where an
/// authentication layer will put it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    pub fn anonymous() -> Principal {
        Principal("anonymous".to_string())
    }
}

/// What a key is scoped by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub principal: String,
    pub method: String,
    pub path: String,
    pub key: String,
}

impl Scope {
    /// The record key of this scope's entry.
    pub fn record_key(&self) -> String {
        let mut h = Sha256::new();
        for part in [&self.principal, &self.method, &self.path, &self.key] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        hex(&h.finalize())
    }
}

/// Why a key is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("an Idempotency-Key is 1 to {KEY_LEN_MAX} visible ASCII characters (no spaces or controls)")]
    Malformed,
}

/// Checks a key: 1 to [`KEY_LEN_MAX`] bytes, each visible ASCII.
pub fn validate_key(key: &[u8]) -> Result<&str, KeyError> {
    if key.is_empty() || key.len() > KEY_LEN_MAX || !key.iter().all(|b| (b'!'..=b'~').contains(b)) {
        return Err(KeyError::Malformed);
    }
    std::str::from_utf8(key).map_err(|_| KeyError::Malformed)
}

/// The SHA-256 (hex) of a body's canonical form: JSON parsed and written again with every
/// object's keys sorted and no whitespace, so that two encodings of one document match; any
/// other body (not JSON, or empty) as its raw bytes.
pub fn fingerprint(body: &[u8]) -> String {
    let canonical = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => {
            let mut out = Vec::with_capacity(body.len());
            write_canonical(&value, &mut out);
            out
        }
        Err(_) => body.to_vec(),
    };
    hex(&Sha256::digest(&canonical))
}

/// Writes `value` with sorted object keys. Sorted by hand: the workspace's `serde_json` keeps
/// insertion order (utoipa turns on `preserve_order`), so serializing a parsed value would
/// keep the client's order.
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(serde_json::to_string(k).expect("a string serializes").as_bytes());
                out.push(b':');
                write_canonical(&map[k], out);
            }
            out.push(b'}');
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend_from_slice(serde_json::to_string(scalar).expect("a scalar serializes").as_bytes()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An answer as stored and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    pub location: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// Where one outcome of the commit goes in an answer's template: the JSON pointer of the
/// value to set, the write whose outcome it is, the message or record of that write, and which
/// of its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fill {
    pub pointer: String,
    pub write: usize,
    pub item: usize,
    pub field: FillField,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FillField {
    /// A sent message's id (a string).
    Id,
    /// An appended record's partition.
    Partition,
    /// An appended record's offset.
    Offset,
    /// An appended record's timestamp.
    TimestampMs,
    /// Whether an appended record was a dedup duplicate: `"duplicate": true` is added to the
    /// object the pointer names when it was, and nothing when not (the field is left out when
    /// false, as a plain answer leaves it out).
    Duplicate,
    /// A bounded queue's depth after the sent message `item`: `"depth": {...}` is added to the
    /// object the pointer names when the queue reported one, and nothing when not.
    Depth,
}

/// An answer whose body is `template` with each of `fills` set from the outcomes of the commit
/// that stored it (ids, offsets), which are known only once the store applied the effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    pub status: u16,
    pub location: Option<String>,
    pub body: serde_json::Value,
    pub fills: Vec<Fill>,
}

impl Template {
    /// The answer with the outcomes in place; `None` when an outcome a fill names is missing
    /// (a template and outcomes that do not belong together: a bug, reported by the caller).
    pub fn render(&self, outcomes: &[StoredOutcome]) -> Option<StoredAnswer> {
        let mut body = self.body.clone();
        for fill in &self.fills {
            let value = match (outcomes.get(fill.write)?, fill.field) {
                (StoredOutcome::Sent(sent), FillField::Id) => {
                    let sent = sent.get(fill.item)?;
                    // A message `reject_to_dlq` sent to the dead-letter queue says so beside its
                    // id, as a plain answer does.
                    if sent.dead_lettered {
                        let (entry, _) = fill.pointer.rsplit_once('/')?;
                        body.pointer_mut(entry)?.as_object_mut()?.insert("dead_lettered".into(), true.into());
                    }
                    serde_json::Value::from(sent.id.clone())
                }
                (StoredOutcome::Sent(sent), FillField::Depth) => {
                    if let Some(depth) = sent.get(fill.item)?.depth {
                        let depth = serde_json::to_value(depth).ok()?;
                        body.pointer_mut(&fill.pointer)?.as_object_mut()?.insert("depth".into(), depth);
                    }
                    continue;
                }
                (StoredOutcome::Appended(places), FillField::Partition) => places.get(fill.item)?.partition.into(),
                (StoredOutcome::Appended(places), FillField::Offset) => places.get(fill.item)?.offset.into(),
                (StoredOutcome::Appended(places), FillField::TimestampMs) => places.get(fill.item)?.timestamp_ms.into(),
                (StoredOutcome::Appended(places), FillField::Duplicate) => {
                    if places.get(fill.item)?.duplicate {
                        body.pointer_mut(&fill.pointer)?.as_object_mut()?.insert("duplicate".into(), true.into());
                    }
                    continue;
                }
                _ => return None,
            };
            *body.pointer_mut(&fill.pointer)? = value;
        }
        Some(StoredAnswer {
            status: self.status,
            location: self.location.clone(),
            content_type: Some("application/json".to_string()),
            body: serde_json::to_vec(&body).expect("a JSON value serializes"),
        })
    }
}

/// An entry's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EntryState {
    /// The first request is running on `owner` (a process's id) since `started_at_ms`.
    InProgress { owner: String, started_at_ms: u64 },
    /// Its answer, stored after it ran (routes whose effect repeats harmlessly).
    Done { status: u16, location: Option<String>, content_type: Option<String>, body_base64: String },
    /// Its answer, committed with its effect: the template, completed by the outcomes stored
    /// after this JSON in the same record.
    Committed { template: Template },
}

/// One entry: its scope, the request's fingerprint, its times and state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub format: u8,
    pub principal: String,
    pub method: String,
    pub path: String,
    pub key: String,
    pub fingerprint: String,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
    #[serde(flatten)]
    pub state: EntryState,
}

/// Why a stored value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an idempotency entry could not be read: {0}")]
pub struct DecodeError(String);

impl Entry {
    pub fn scope(&self) -> Scope {
        Scope {
            principal: self.principal.clone(),
            method: self.method.clone(),
            path: self.path.clone(),
            key: self.key.clone(),
        }
    }

    /// The record value of this entry, with no outcomes.
    pub fn encode(&self) -> Vec<u8> {
        with_outcomes(&self.json(), &[])
    }

    /// This entry's JSON, the part of the record value before the outcomes.
    pub fn json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an entry serializes")
    }

    /// Reads a record value: the entry and the outcomes stored after it.
    pub fn decode(value: &[u8]) -> Result<(Entry, Vec<StoredOutcome>), DecodeError> {
        let (json, outcomes) = split_outcomes(value).ok_or_else(|| DecodeError("not in the outcomes layout".into()))?;
        let entry: Entry = serde_json::from_slice(json).map_err(|e| DecodeError(e.to_string()))?;
        if entry.format != ENTRY_FORMAT {
            return Err(DecodeError(format!("format {} is not {ENTRY_FORMAT}", entry.format)));
        }
        Ok((entry, outcomes))
    }

    /// The stored answer of a finished entry; `None` while in progress.
    pub fn answer(&self, outcomes: &[StoredOutcome]) -> Option<StoredAnswer> {
        match &self.state {
            EntryState::InProgress { .. } => None,
            EntryState::Done { status, location, content_type, body_base64 } => Some(StoredAnswer {
                status: *status,
                location: location.clone(),
                content_type: content_type.clone(),
                body: base64::engine::general_purpose::STANDARD.decode(body_base64).ok()?,
            }),
            EntryState::Committed { template } => template.render(outcomes),
        }
    }

    /// The `Done` state of an answer.
    pub fn done(answer: &StoredAnswer) -> EntryState {
        EntryState::Done {
            status: answer.status,
            location: answer.location.clone(),
            content_type: answer.content_type.clone(),
            body_base64: base64::engine::general_purpose::STANDARD.encode(&answer.body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_store::{StoredAppended, StoredSent};

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert_eq!(validate_key(b"order-42"), Ok("order-42"));
        assert!(validate_key(&[b'k'; KEY_LEN_MAX]).is_ok());
        let too_long = [b'k'; KEY_LEN_MAX + 1];
        let bad: [&[u8]; 6] = [b"", &too_long, b"with space", b"tab\t", "é".as_bytes(), b"\x7f"];
        for bad in bad {
            assert_eq!(validate_key(bad), Err(KeyError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn fingerprints_ignore_key_order_and_whitespace_only() {
        let a = fingerprint(br#"{"b": 1, "a": {"y": [1, 2], "x": null}}"#);
        let b = fingerprint(br#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
        assert_eq!(a, b);
        assert_ne!(a, fingerprint(br#"{"a":{"x":null,"y":[2,1]},"b":1}"#), "array order counts");
        assert_ne!(a, fingerprint(br#"{"a":{"x":null,"y":[1,2]},"b":"1"}"#), "types count");
        assert_ne!(fingerprint(b"raw body"), fingerprint(b"raw  body"), "a raw body is compared byte for byte");
        assert_eq!(fingerprint(b""), hex(&Sha256::digest(b"")));
    }

    #[test]
    fn scopes_make_distinct_record_keys() {
        let s = Scope { principal: "p".into(), method: "POST".into(), path: "/v1/a".into(), key: "k".into() };
        let other_path = Scope { path: "/v1/b".into(), ..s.clone() };
        let other_principal = Scope { principal: "q".into(), ..s.clone() };
        // Length prefixes keep ("ab", "c") apart from ("a", "bc").
        let shifted = Scope { principal: "pP".into(), method: "OST".into(), ..s.clone() };
        let keys = [&s, &other_path, &other_principal, &shifted].map(Scope::record_key);
        for (i, a) in keys.iter().enumerate() {
            assert_eq!(a.len(), 64);
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(s.record_key(), s.clone().record_key());
    }

    #[test]
    fn a_template_is_completed_by_its_outcomes() {
        let template = Template {
            status: 200,
            location: None,
            body: serde_json::json!({"results": [{"id": null}, {"error": "x"}, {"id": null}], "p": 0, "o": 0}),
            fills: vec![
                Fill { pointer: "/results/0/id".into(), write: 0, item: 0, field: FillField::Id },
                Fill { pointer: "/results/2/id".into(), write: 0, item: 1, field: FillField::Id },
                Fill { pointer: "/p".into(), write: 1, item: 0, field: FillField::Partition },
                Fill { pointer: "/o".into(), write: 1, item: 0, field: FillField::Offset },
                Fill { pointer: "/results/1".into(), write: 1, item: 0, field: FillField::Duplicate },
            ],
        };
        let sent = |id: &str| StoredSent { id: id.into(), seq: 1, duplicate: false, dead_lettered: false, depth: None };
        let outcomes = vec![
            StoredOutcome::Sent(vec![sent("a"), sent("b")]),
            StoredOutcome::Appended(vec![StoredAppended { partition: 3, offset: 9, timestamp_ms: 1, duplicate: true }]),
        ];
        let answer = template.render(&outcomes).expect("renders");
        let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
        assert_eq!(
            body,
            serde_json::json!({"results": [{"id": "a"}, {"error": "x", "duplicate": true}, {"id": "b"}], "p": 3, "o": 9})
        );
        assert!(template.render(&outcomes[..1]).is_none(), "a missing outcome is not papered over");
    }

    #[test]
    fn a_send_template_says_what_was_dead_lettered_and_the_depth_after() {
        let template = Template {
            status: 200,
            location: None,
            body: serde_json::json!({"results": [{"id": ""}, {"id": ""}]}),
            fills: vec![
                Fill { pointer: "/results/0/id".into(), write: 0, item: 0, field: FillField::Id },
                Fill { pointer: "/results/1/id".into(), write: 0, item: 1, field: FillField::Id },
                Fill { pointer: "".into(), write: 0, item: 1, field: FillField::Depth },
            ],
        };
        let depth =
            sluice_store::StoredDepth { messages: 2, bytes: 10, max_depth_messages: Some(2), max_depth_bytes: None };
        let outcomes = vec![StoredOutcome::Sent(vec![
            StoredSent { id: "a".into(), seq: 1, duplicate: false, dead_lettered: false, depth: Some(depth) },
            StoredSent { id: "b".into(), seq: 2, duplicate: false, dead_lettered: true, depth: Some(depth) },
        ])];
        let body: serde_json::Value = serde_json::from_slice(&template.render(&outcomes).unwrap().body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "results": [{"id": "a"}, {"id": "b", "dead_lettered": true}],
                "depth": {"messages": 2, "bytes": 10, "max_depth_messages": 2}
            })
        );
        // An unbounded queue reports no depth, and the answer has none.
        let plain = vec![StoredOutcome::Sent(vec![
            StoredSent { id: "a".into(), seq: 1, duplicate: false, dead_lettered: false, depth: None },
            StoredSent { id: "b".into(), seq: 2, duplicate: false, dead_lettered: false, depth: None },
        ])];
        let body: serde_json::Value = serde_json::from_slice(&template.render(&plain).unwrap().body).unwrap();
        assert_eq!(body, serde_json::json!({"results": [{"id": "a"}, {"id": "b"}]}));
    }

    #[test]
    fn entries_round_trip_in_every_state() {
        let base = Entry {
            format: ENTRY_FORMAT,
            principal: "anonymous".into(),
            method: "POST".into(),
            path: "/v1/queues".into(),
            key: "k".into(),
            fingerprint: fingerprint(b"{}"),
            created_at_ms: 5,
            expires_at_ms: 10,
            state: EntryState::InProgress { owner: "me".into(), started_at_ms: 5 },
        };
        let answer = StoredAnswer {
            status: 201,
            location: Some("/v1/x".into()),
            content_type: Some("application/json".into()),
            body: b"{\"a\":1}".to_vec(),
        };
        let done = Entry { state: Entry::done(&answer), ..base.clone() };
        for entry in [base.clone(), done.clone()] {
            let (read, outcomes) = Entry::decode(&entry.encode()).expect("decodes");
            assert_eq!(read, entry);
            assert!(outcomes.is_empty());
        }
        assert_eq!(done.answer(&[]), Some(answer));
        assert_eq!(base.answer(&[]), None);
        assert!(Entry::decode(b"{}").is_err());
    }
}

//! The event rules, driven by small scripts against a reference model of one stream.

use super::*;

/// One stream as the simplest thing that can hold it: every event id ever appended in version
/// order, and the state the rules keep.
#[derive(Default)]
struct Model {
    ids: Vec<String>,
    state: Option<StreamState>,
}

impl Model {
    fn state(&self) -> StreamState {
        self.state.unwrap_or(StreamState::NONE)
    }

    /// Looks the first id up among the visible events, as a backend does, and applies the
    /// decision; answers `first..=last` or the error.
    fn append(&mut self, expected: ExpectedVersion, ids: &[&str]) -> Result<(u64, u64, bool), AppendError> {
        let state = self.state();
        let from = state.visible_from as usize;
        let found = self.ids[from..].iter().position(|id| id == ids[0]).map(|i| from + i);
        let stored: Vec<String> =
            found.map(|at| self.ids[at..].iter().take(ids.len()).cloned().collect()).unwrap_or_default();
        let prior = found.map(|at| Prior { first_version: at as u64, ids: &stored });
        let last = ids.len() as u64 - 1;
        match decide_append(&state, expected, ids, prior)? {
            Decision::Append { first_version } => {
                assert_eq!(first_version, self.ids.len() as u64, "versions are gapless");
                self.ids.extend(ids.iter().map(|s| s.to_string()));
                self.state = Some(state.appended(ids.len() as u64));
                Ok((first_version, first_version + last, false))
            }
            Decision::Duplicate { first_version } => Ok((first_version, first_version + last, true)),
        }
    }

    fn delete(&mut self, hard: bool) -> Result<(), AppendError> {
        self.state = Some(self.state().deleted(hard)?);
        Ok(())
    }
}

/// Runs a script: each line an operation and what it must answer.
/// `append EXPECTED id,id -> first..last [dup]` | `-> wrong ACTUAL` | `-> conflict V` |
/// `-> tombstoned`; `delete soft|hard -> ok|not_found|tombstoned`; `last -> V|none`.
fn check(script: &str) {
    let mut m = Model::default();
    for (n, line) in script.lines().map(str::trim).filter(|l| !l.is_empty()).enumerate() {
        let (op, want) = line.split_once("->").unwrap_or_else(|| panic!("line {n}: no ->"));
        let words: Vec<&str> = op.split_whitespace().collect();
        let got = match words[0] {
            "append" => {
                let expected = ExpectedVersion::parse(words[1]).expect("expected version");
                let ids: Vec<&str> = words[2].split(',').collect();
                match m.append(expected, &ids) {
                    Ok((a, b, dup)) => format!("{a}..{b}{}", if dup { " dup" } else { "" }),
                    Err(AppendError::WrongExpectedVersion { actual, .. }) => {
                        format!("wrong {}", actual.map_or("none".to_owned(), |v| v.to_string()))
                    }
                    Err(AppendError::EventIdConflict { version, .. }) => format!("conflict {version}"),
                    Err(AppendError::StreamTombstoned) => "tombstoned".to_owned(),
                    Err(AppendError::StreamNotFound) => "not_found".to_owned(),
                }
            }
            "delete" => match m.delete(words[1] == "hard") {
                Ok(()) => "ok".to_owned(),
                Err(AppendError::StreamTombstoned) => "tombstoned".to_owned(),
                Err(AppendError::StreamNotFound) => "not_found".to_owned(),
                Err(e) => panic!("line {n}: {e}"),
            },
            "last" => m.state().last_version().map_or("none".to_owned(), |v| v.to_string()),
            other => panic!("line {n}: unknown operation {other}"),
        };
        assert_eq!(got, want.trim(), "line {n}: {line}");
    }
}

#[test]
fn expected_versions() {
    check(
        "
        last -> none
        append exists a -> wrong none
        append 0 a -> wrong none
        append no_stream a,b -> 0..1
        last -> 1
        append no_stream c -> wrong 1
        append 0 c -> wrong 1
        append 1 c -> 2..2
        append exists d -> 3..3
        append any e,f -> 4..5
        append 5 g -> 6..6
        last -> 6
        ",
    );
}

#[test]
fn resending_the_same_ids_answers_the_original() {
    check(
        "
        append no_stream a,b -> 0..1
        append no_stream a,b -> 0..1 dup
        append 1 c -> 2..2
        append 1 c -> 2..2 dup
        append 3 d -> wrong 2
        append any e -> 3..3
        append any e -> 3..3 dup
        append no_stream a,b -> 0..1 dup
        append no_stream a -> 0..0 dup
        append 0 b -> 1..1 dup
        append 5 c -> conflict 2
        append any c,x -> conflict 2
        append any e,x -> conflict 3
        last -> 3
        ",
    );
}

#[test]
fn soft_and_hard_deletes() {
    check(
        "
        delete soft -> not_found
        append no_stream a,b -> 0..1
        delete soft -> ok
        last -> none
        append 1 c -> wrong none
        append exists c -> wrong none
        append no_stream c -> 2..2
        last -> 2
        append no_stream a -> wrong 2
        append any a -> 3..3
        delete soft -> ok
        delete soft -> not_found
        delete hard -> ok
        append any z -> tombstoned
        append no_stream z -> tombstoned
        delete hard -> tombstoned
        ",
    );
}

#[test]
fn expected_version_wire_form() {
    assert_eq!(ExpectedVersion::parse("any"), Ok(ExpectedVersion::Any));
    assert_eq!(ExpectedVersion::parse("no_stream"), Ok(ExpectedVersion::NoStream));
    assert_eq!(ExpectedVersion::parse("exists"), Ok(ExpectedVersion::Exists));
    assert_eq!(ExpectedVersion::parse("17"), Ok(ExpectedVersion::Exact(17)));
    assert!(ExpectedVersion::parse("-1").is_err());
    assert!(ExpectedVersion::parse("latest").is_err());
    for v in [ExpectedVersion::Any, ExpectedVersion::NoStream, ExpectedVersion::Exists, ExpectedVersion::Exact(3)] {
        assert_eq!(ExpectedVersion::parse(&v.to_string()), Ok(v));
    }
}

fn event(id: &str) -> NewEvent {
    NewEvent { id: id.into(), r#type: "OrderPlaced".into(), data: "{\"n\":1}".into(), ..Default::default() }
}

#[test]
fn events_are_validated_with_named_limits() {
    assert!(validate_events(&[event("a"), event("b")]).is_ok());
    let field = |events: &[NewEvent]| validate_events(events).expect_err("refused").field;
    assert_eq!(field(&[]), "events");
    assert_eq!(field(&vec![event("a"); EVENTS_PER_APPEND_MAX + 1]), "events");
    assert_eq!(field(&[event("a"), event("a")]), "events[1].id");
    assert_eq!(field(&[event("")]), "events[0].id");
    assert_eq!(field(&[event(&"i".repeat(EVENT_ID_LEN_MAX + 1))]), "events[0].id");
    assert_eq!(field(&[NewEvent { r#type: "has space".into(), ..event("a") }]), "events[0].type");
    assert_eq!(field(&[NewEvent { data: "not json".into(), ..event("a") }]), "events[0].data");
    assert_eq!(field(&[NewEvent { metadata: Some("{".into()), ..event("a") }]), "events[0].metadata");
    assert_eq!(field(&[NewEvent { correlation_id: Some(String::new()), ..event("a") }]), "events[0].correlation_id");
    let big = format!("\"{}\"", "x".repeat(EVENT_BYTES_MAX));
    assert_eq!(field(&[NewEvent { data: big, ..event("a") }]), "events[0]");
    let half = format!("\"{}\"", "x".repeat(EVENT_BYTES_MAX - 100));
    let many: Vec<NewEvent> = (0..9).map(|i| NewEvent { data: half.clone(), ..event(&i.to_string()) }).collect();
    assert_eq!(field(&many), "events");
}

#[test]
fn stream_ids_and_subscription_names() {
    for ok in ["order-123", "a", "tenant:orders@eu.1_x", &"s".repeat(EVENT_STREAM_ID_LEN_MAX)] {
        assert!(validate_stream_id(ok).is_ok(), "{ok}");
    }
    for bad in ["", "$all", "a/b", "a b", "é", &"s".repeat(EVENT_STREAM_ID_LEN_MAX + 1)] {
        assert!(validate_stream_id(bad).is_err(), "{bad}");
    }
    assert!(validate_subscription_name("billing.v2").is_ok());
    assert!(validate_subscription_name("a:b").is_err());
    assert!(validate_subscription_name("").is_err());
}

#[test]
fn checkpoints_only_move_forward() {
    assert_eq!(advance_checkpoint(None, 0, 1), Ok(true));
    assert_eq!(advance_checkpoint(Some(4), 9, 10), Ok(true));
    assert_eq!(advance_checkpoint(Some(4), 4, 10), Ok(false));
    assert_eq!(advance_checkpoint(Some(4), 3, 10), Err(CheckpointError::Regression { current: 4, asked: 3 }));
    assert_eq!(advance_checkpoint(Some(4), 10, 10), Err(CheckpointError::PastEnd { asked: 10, head: 10 }));
    assert_eq!(advance_checkpoint(None, 0, 0), Err(CheckpointError::PastEnd { asked: 0, head: 0 }));
}

#[test]
fn filters_match_types_prefixes_and_correlation() {
    let f =
        EventFilter { types: vec!["A".into(), "B".into()], stream_prefix: Some("order-".into()), ..Default::default() };
    assert!(f.matches("order-1", "A", None));
    assert!(!f.matches("order-1", "C", None));
    assert!(!f.matches("user-1", "A", None));
    let c = EventFilter { correlation_id: Some("k".into()), ..Default::default() };
    assert!(c.matches("x", "T", Some("k")));
    assert!(!c.matches("x", "T", Some("j")));
    assert!(!c.matches("x", "T", None));
    assert!(EventFilter::default().is_empty());
    let own = EventFilter { untenanted: true, ..Default::default() };
    assert!(!own.is_empty(), "the default tenant's filter is a filter");
    assert!(own.matches("order-1", "A", None));
    assert!(!own.matches("acme~order-1", "A", None), "a tenant's stream is not the default tenant's");
    assert!(validate_stream_id("acme~order-1").is_ok());
    assert_eq!(validate_stream_id("Acme~order-1").unwrap_err().field, "stream_id");
    assert!(
        EventFilter { types: vec!["x".into(); EVENT_FILTER_TYPES_MAX + 1], ..Default::default() }.validate().is_err()
    );
}

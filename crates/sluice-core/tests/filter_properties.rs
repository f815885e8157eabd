//! Properties of SNS filter policies, on random policies and messages:
//! - a policy built from an attribute's own value (exact, prefix, suffix, ignoring case,
//!   numeric bounds, its network, exists) matches the message that carries it;
//! - `anything-but` of a value never matches that value;
//! - `{"$or": [A, B]}` matches exactly when A or B does;
//! - a policy over message attributes ignores the body;
//! - a numeric range matches exactly when `f64` comparison says the value is inside, for values
//!   within SNS's limits (±1e9, five decimal places);
//! - parsing and matching never panic, whatever the text.
//!
//! Failures are reproducible: proptest records the seed in
//! `tests/proptest-regressions/filter_properties.txt`, which is replayed first on every run
//! (keep it in git). `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Value, json};
use sluice_core::filter::{FilterPolicy, FilterScope, MessageView};
use sluice_core::message::{AttributeData, AttributeValue};

type Attributes = BTreeMap<String, AttributeValue>;

fn attribute(data_type: &str, value: &str) -> AttributeValue {
    AttributeValue { data_type: data_type.into(), value: AttributeData::Text(value.into()) }
}

fn one(name: &str, data_type: &str, value: &str) -> Attributes {
    BTreeMap::from([(name.to_string(), attribute(data_type, value))])
}

fn matches(policy: &Value, attributes: &Attributes, body: &str) -> bool {
    let text = policy.to_string();
    let policy = FilterPolicy::parse(&text, FilterScope::MessageAttributes)
        .unwrap_or_else(|e| panic!("{text} should be a valid policy: {e}"));
    policy.matches(&MessageView::new(attributes, body))
}

/// A number within SNS's limits, as an integer count of 1e-5 and as the f64 it stands for.
fn number() -> impl Strategy<Value = (i64, f64)> {
    prop_oneof![-100_000_000_000_000i64..=100_000_000_000_000, -1_000_000i64..=1_000_000]
        .prop_map(|k| (k, k as f64 / 100_000.0))
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9 ._-]{0,12}", any::<String>().prop_map(|s| s.chars().take(12).collect())]
}

/// An attribute and a policy on it, derived from the attribute's own value.
fn own_value_policy() -> impl Strategy<Value = (Attributes, Value)> {
    let string = (text(), 0usize..13, 0usize..8).prop_map(|(s, cut, form)| {
        let cut = (0..=cut.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        let condition = match form {
            0 => json!(s),
            1 => json!({"prefix": s[..cut]}),
            2 => json!({"suffix": s[cut..]}),
            3 => json!({"equals-ignore-case": s.to_ascii_uppercase()}),
            4 => json!({"exists": true}),
            5 => json!({"anything-but": format!("{s}~")}),
            6 => json!({"anything-but": {"prefix": format!("~{s}")}}),
            _ => json!(["other", s]),
        };
        let condition = if condition.is_array() { condition } else { json!([condition]) };
        (one("a", "String", &s), json!({"a": condition}))
    });
    let numeric = (number(), 0usize..5).prop_map(|((_, v), form)| {
        let condition = match form {
            0 => json!(v),
            1 => json!({"numeric": ["=", v]}),
            2 => json!({"numeric": [">=", v]}),
            3 => json!({"numeric": ["<=", v]}),
            _ => json!({"anything-but": [v + 1.0]}),
        };
        (one("n", "Number", &v.to_string()), json!({"n": [condition]}))
    });
    let array = (proptest::collection::vec(text(), 1..5), any::<prop::sample::Index>()).prop_map(|(items, pick)| {
        let chosen = pick.get(&items).clone();
        (one("a", "String.Array", &serde_json::to_string(&items).unwrap()), json!({"a": [chosen]}))
    });
    let network = (any::<u32>(), 0u8..=32).prop_map(|(ip, len)| {
        let ip = std::net::Ipv4Addr::from(ip).to_string();
        (one("ip", "String", &ip), json!({"ip": [{"cidr": format!("{ip}/{len}")}]}))
    });
    prop_oneof![4 => string, 3 => numeric, 1 => array, 1 => network]
}

/// Values from a small domain, so that random policies and messages often meet.
const WORDS: [&str; 4] = ["x", "y", "xy", "10.0.0.1"];
const NUMBERS: [f64; 4] = [0.0, 1.0, 2.5, -3.0];
const KEYS: [&str; 3] = ["a", "b", "c"];

fn word() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(&WORDS[..])
}

fn small_number() -> impl Strategy<Value = f64> {
    proptest::sample::select(&NUMBERS[..])
}

fn condition() -> impl Strategy<Value = Value> {
    prop_oneof![
        word().prop_map(|w| json!(w)),
        small_number().prop_map(|n| json!(n)),
        word().prop_map(|w| json!({"prefix": w})),
        word().prop_map(|w| json!({"suffix": w})),
        word().prop_map(|w| json!({"equals-ignore-case": w.to_uppercase()})),
        word().prop_map(|w| json!({"anything-but": w})),
        small_number().prop_map(|n| json!({"anything-but": [n]})),
        small_number().prop_map(|n| json!({"numeric": [">", n]})),
        small_number().prop_map(|n| json!({"numeric": [">=", n - 1.0, "<", n + 1.0]})),
        any::<bool>().prop_map(|b| json!({"exists": b})),
        Just(json!({"cidr": "10.0.0.0/24"})),
    ]
}

/// A policy of one or two keys, each with one or two conditions.
fn simple_policy() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(
        proptest::sample::select(&KEYS[..]),
        proptest::collection::vec(condition(), 1..3),
        1..3,
    )
    .prop_map(|keys| Value::Object(keys.into_iter().map(|(k, v)| (k.to_string(), Value::Array(v))).collect()))
}

fn attribute_value() -> impl Strategy<Value = AttributeValue> {
    prop_oneof![
        word().prop_map(|w| attribute("String", w)),
        small_number().prop_map(|n| attribute("Number", &n.to_string())),
        proptest::collection::vec(
            prop_oneof![word().prop_map(|w| json!(w)), small_number().prop_map(|n| json!(n))],
            0..3
        )
        .prop_map(|items| attribute("String.Array", &Value::Array(items).to_string())),
        Just(AttributeValue { data_type: "Binary".into(), value: AttributeData::Bytes(vec![1, 2]) }),
    ]
}

fn attributes() -> impl Strategy<Value = Attributes> {
    proptest::collection::btree_map(proptest::sample::select(&KEYS[..]).prop_map(String::from), attribute_value(), 0..4)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/proptest-regressions/filter_properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_policy_built_from_a_value_matches_it((attrs, policy) in own_value_policy()) {
        prop_assert!(matches(&policy, &attrs, ""), "policy {policy} attributes {attrs:?}");
    }

    #[test]
    fn anything_but_a_value_never_matches_it(s in text(), (_, v) in number(), cut in 1usize..13, others in proptest::collection::vec(text(), 0..3)) {
        let mut excluded = others.clone();
        excluded.push(s.clone());
        let mut cases = vec![
            (json!({"a": [{"anything-but": s}]}), one("a", "String", &s)),
            (json!({"a": [{"anything-but": excluded}]}), one("a", "String", &s)),
            (json!({"a": [{"anything-but": s}]}), one("a", "String.Array", &json!([s, s]).to_string())),
            (json!({"n": [{"anything-but": v}]}), one("n", "Number", &v.to_string())),
            (json!({"n": [{"anything-but": [v, v + 1.0]}]}), one("n", "Number", &v.to_string())),
        ];
        if let Some(cut) = (1..=cut.min(s.len())).rev().find(|&i| s.is_char_boundary(i)) {
            cases.push((json!({"a": [{"anything-but": {"prefix": &s[..cut]}}]}), one("a", "String", &s)));
            let from = s.len() - cut;
            if s.is_char_boundary(from) {
                cases.push((json!({"a": [{"anything-but": {"suffix": &s[from..]}}]}), one("a", "String", &s)));
            }
        }
        for (policy, attrs) in cases {
            prop_assert!(!matches(&policy, &attrs, ""), "{} matched {:?}", policy, attrs);
        }
    }

    #[test]
    fn or_matches_when_either_side_does(a in simple_policy(), b in simple_policy(), attrs in attributes()) {
        let either = json!({"$or": [a, b]});
        prop_assert_eq!(matches(&either, &attrs, ""), matches(&a, &attrs, "") || matches(&b, &attrs, ""), "{}", either);
    }

    #[test]
    fn or_inside_a_conjunction(a in simple_policy(), b in simple_policy(), attrs in attributes(), w in word()) {
        let policy = json!({"c": [w], "$or": [a, b]});
        let c = json!({"c": [w]});
        let expected = matches(&c, &attrs, "") && (matches(&a, &attrs, "") || matches(&b, &attrs, ""));
        // A key repeated inside an alternative is ANDed with the outer one.
        prop_assert_eq!(matches(&policy, &attrs, ""), expected, "{}", policy);
    }

    #[test]
    fn the_attributes_scope_ignores_the_body(policy in simple_policy(), attrs in attributes(), one_body in ".{0,40}", other in ".{0,40}") {
        let json_body = json!({"a": "x", "b": 1, "c": ["y"]}).to_string();
        let got = matches(&policy, &attrs, &one_body);
        prop_assert_eq!(got, matches(&policy, &attrs, &other));
        prop_assert_eq!(got, matches(&policy, &attrs, &json_body));
    }

    #[test]
    fn numeric_ranges_agree_with_f64(
        (_, low) in number(), (_, high) in number(), (_, v) in number(),
        low_inclusive in any::<bool>(), high_inclusive in any::<bool>(), form in 0usize..4,
    ) {
        let (low, high) = if low < high { (low, high) } else if high < low { (high, low) } else { (low, low + 1.0) };
        let above = |x: f64| if low_inclusive { x >= low } else { x > low };
        let below = |x: f64| if high_inclusive { x <= high } else { x < high };
        let lower_op = if low_inclusive { ">=" } else { ">" };
        let upper_op = if high_inclusive { "<=" } else { "<" };
        let (range, expected) = match form {
            0 => (json!([lower_op, low, upper_op, high]), above(v) && below(v)),
            1 => (json!([lower_op, low]), above(v)),
            2 => (json!([upper_op, high]), below(v)),
            _ => (json!(["=", low]), v == low),
        };
        let policy = json!({"n": [{"numeric": range}]});
        prop_assert_eq!(matches(&policy, &one("n", "Number", &v.to_string()), ""), expected, "{} against {}", policy, v);
    }

    #[test]
    fn parsing_and_matching_never_panic(text in ".{0,200}", attrs in attributes(), body in ".{0,100}", body_scope in any::<bool>()) {
        let scope = if body_scope { FilterScope::MessageBody } else { FilterScope::MessageAttributes };
        if let Ok(policy) = FilterPolicy::parse(&text, scope) {
            let _ = policy.matches(&MessageView::new(&attrs, &body));
        }
    }

    #[test]
    fn random_policies_parse_in_both_scopes_and_never_panic(policy in simple_policy(), attrs in attributes(), body in ".{0,60}") {
        let text = policy.to_string();
        for scope in [FilterScope::MessageAttributes, FilterScope::MessageBody] {
            let parsed = FilterPolicy::parse(&text, scope);
            prop_assert!(parsed.is_ok(), "{} in {:?}: {:?}", text, scope, parsed);
            let _ = parsed.unwrap().matches(&MessageView::new(&attrs, &body));
        }
    }
}

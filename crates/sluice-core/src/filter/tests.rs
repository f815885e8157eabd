//! Filter policies by example: each table is policies and messages with the expected answer,
//! checked by one function. Most examples are from AWS's documentation (the SNS developer
//! guide's filter-policy pages) and from LocalStack's tests recorded against real AWS; the
//! errors are checked word for word.

use std::collections::BTreeMap;

use super::*;
use crate::message::AttributeData;

/// `(name, data type, value)`; a Binary attribute's value is its bytes.
type Attr<'a> = (&'a str, &'a str, &'a str);

fn attributes(list: &[Attr<'_>]) -> BTreeMap<String, AttributeValue> {
    list.iter()
        .map(|&(name, data_type, value)| {
            let value = if data_type.starts_with("Binary") {
                AttributeData::Bytes(value.as_bytes().to_vec())
            } else {
                AttributeData::Text(value.to_string())
            };
            (name.to_string(), AttributeValue { data_type: data_type.to_string(), value })
        })
        .collect()
}

fn policy(text: &str, scope: FilterScope) -> FilterPolicy {
    FilterPolicy::parse(text, scope).unwrap_or_else(|e| panic!("{text} should parse: {e}"))
}

/// Every case is `(attributes, expected)` against a policy in the attributes scope.
fn check_attributes(text: &str, cases: &[(&[Attr<'_>], bool)]) {
    let policy = policy(text, FilterScope::MessageAttributes);
    for (list, expected) in cases {
        let attrs = attributes(list);
        let got = policy.matches(&MessageView::new(&attrs, "{\"ignored\": true}"));
        assert_eq!(got, *expected, "policy {text}\nattributes {list:?}");
    }
}

/// Every case is `(body, expected)` against a policy in the body scope.
fn check_body(text: &str, cases: &[(&str, bool)]) {
    let policy = policy(text, FilterScope::MessageBody);
    let none = BTreeMap::new();
    for (body, expected) in cases {
        assert_eq!(policy.matches(&MessageView::new(&none, body)), *expected, "policy {text}\nbody {body}");
    }
}

fn error(text: &str, scope: FilterScope) -> String {
    match FilterPolicy::parse(text, scope) {
        Ok(p) => panic!("{text} should be refused, compiled to {p:?}"),
        Err(e) => e.to_string(),
    }
}

const S: &str = "String";
const N: &str = "Number";
const A: &str = "String.Array";

#[test]
fn exact_strings_and_or_within_a_key() {
    check_attributes(
        r#"{"customer_interests": ["rugby", "tennis"]}"#,
        &[
            (&[("customer_interests", S, "rugby")], true),
            (&[("customer_interests", S, "tennis")], true),
            (&[("customer_interests", S, "Rugby")], false),
            (&[("customer_interests", S, "football")], false),
            (&[("other", S, "rugby")], false),
            (&[], false),
        ],
    );
}

#[test]
fn keys_are_anded() {
    check_attributes(
        r#"{"customer_interests": ["rugby"], "price_usd": [{"numeric": [">", 100]}]}"#,
        &[
            (&[("customer_interests", S, "rugby"), ("price_usd", N, "100.01")], true),
            (&[("customer_interests", S, "rugby"), ("price_usd", N, "100")], false),
            (&[("customer_interests", S, "rugby")], false),
            (&[("price_usd", N, "500")], false),
        ],
    );
}

#[test]
fn values_compare_by_type() {
    check_attributes(
        r#"{"n": [99]}"#,
        &[(&[("n", N, "99")], true), (&[("n", N, "99.000")], true), (&[("n", S, "99")], false)],
    );
    check_attributes(r#"{"n": ["99"]}"#, &[(&[("n", S, "99")], true), (&[("n", N, "99")], false)]);
    check_attributes(r#"{"n": [301.5]}"#, &[(&[("n", N, "3.015e2")], true), (&[("n", N, "301.50001")], false)]);
    check_attributes(r#"{"n": [123456789]}"#, &[(&[("n", N, "123456789")], true), (&[("n", N, "123456790")], false)]);
    check_attributes(r#"{"b": [true]}"#, &[(&[("b", A, "[true]")], true), (&[("b", S, "true")], false)]);
    check_attributes(r#"{"x": [null]}"#, &[(&[("x", A, "[null]")], true), (&[("x", S, "null")], false), (&[], false)]);
    // Custom type labels keep their base type.
    check_attributes(r#"{"n": [{"numeric": [">", 1]}]}"#, &[(&[("n", "Number.float", "1.5")], true)]);
}

#[test]
fn string_arrays_match_any_element() {
    check_attributes(
        r#"{"customer_interests": ["rugby"]}"#,
        &[
            (&[("customer_interests", A, r#"["rugby", "soccer"]"#)], true),
            (&[("customer_interests", A, r#"["soccer"]"#)], false),
            (&[("customer_interests", A, "[]")], false),
            (&[("customer_interests", A, "not json")], false),
        ],
    );
    check_attributes(
        r#"{"n": [{"numeric": [">=", 10]}]}"#,
        &[(&[("n", A, r#"["a", 3, 12]"#)], true), (&[("n", A, r#"[3]"#)], false)],
    );
    // A String.Array that holds one JSON value instead of an array (SNS takes the publish) is
    // matched on that value.
    check_attributes(
        r#"{"price": [100, 500]}"#,
        &[
            (&[("price", A, "100")], true),
            (&[("price", A, "200")], false),
            (&[("price", A, r#""100""#)], false),
            (&[("price", A, "not json")], false),
        ],
    );
    check_attributes(r#"{"tier": ["gold"]}"#, &[(&[("tier", A, r#""gold""#)], true), (&[("tier", A, "gold")], false)]);
    check_attributes(r#"{"tier": [{"exists": true}]}"#, &[(&[("tier", A, "gold")], true)]);
    check_attributes(
        r#"{"customer_interests": [{"anything-but": ["rugby", "tennis"]}]}"#,
        &[
            (&[("customer_interests", A, r#"["rugby", "baseball"]"#)], true),
            (&[("customer_interests", A, r#"["rugby", "tennis"]"#)], false),
        ],
    );
}

#[test]
fn binary_attributes_are_ignored() {
    check_attributes(
        r#"{"b": [{"exists": true}]}"#,
        &[(&[("b", "Binary", "\u{1}\u{2}")], false), (&[("b", S, "x")], true)],
    );
    check_attributes(r#"{"b": [{"exists": false}]}"#, &[(&[("b", "Binary", "x")], true), (&[("b", N, "1")], false)]);
}

#[test]
fn prefix_suffix_and_ignoring_case() {
    check_attributes(
        r#"{"customer_interests": [{"prefix": "bas"}]}"#,
        &[
            (&[("customer_interests", S, "baseball")], true),
            (&[("customer_interests", S, "basketball")], true),
            (&[("customer_interests", S, "rugby")], false),
            (&[("customer_interests", N, "123")], false),
        ],
    );
    check_attributes(
        r#"{"customer_interests": [{"suffix": "ball"}]}"#,
        &[(&[("customer_interests", S, "baseball")], true), (&[("customer_interests", S, "rugby")], false)],
    );
    check_attributes(
        r#"{"customer_interests": [{"equals-ignore-case": "tennis"}]}"#,
        &[
            (&[("customer_interests", S, "TENNIS")], true),
            (&[("customer_interests", S, "Tennis")], true),
            (&[("customer_interests", S, "tennis ")], false),
        ],
    );
    check_attributes(r#"{"city": [{"equals-ignore-case": "ÉTÉ"}]}"#, &[(&[("city", S, "été")], true)]);
}

#[test]
fn anything_but() {
    check_attributes(
        r#"{"customer_interests": [{"anything-but": ["rugby", "tennis"]}]}"#,
        &[
            (&[("customer_interests", S, "football")], true),
            (&[("customer_interests", S, "rugby")], false),
            (&[("customer_interests", S, "tennis")], false),
            (&[("customer_interests", N, "5")], true),
            // anything-but needs the key: an absent attribute does not match.
            (&[], false),
        ],
    );
    check_attributes(
        r#"{"price": [{"anything-but": [100, 500]}]}"#,
        &[(&[("price", N, "100")], false), (&[("price", N, "1e2")], false), (&[("price", N, "101")], true)],
    );
    check_attributes(
        r#"{"price": [{"anything-but": 100}]}"#,
        &[(&[("price", N, "100")], false), (&[("price", N, "7")], true)],
    );
    check_attributes(
        r#"{"event": [{"anything-but": {"prefix": "order-"}}]}"#,
        &[(&[("event", S, "order-cancelled")], false), (&[("event", S, "data-entry")], true)],
    );
    check_attributes(
        r#"{"event": [{"anything-but": {"suffix": "-cancelled"}}]}"#,
        &[(&[("event", S, "order-cancelled")], false), (&[("event", S, "order-placed")], true)],
    );
    check_attributes(
        r#"{"event": [{"anything-but": {"equals-ignore-case": ["Rugby", "TENNIS"]}}]}"#,
        &[(&[("event", S, "rugby")], false), (&[("event", S, "Tennis")], false), (&[("event", S, "golf")], true)],
    );
    // Recorded from AWS: with no attribute at all, neither `null` nor anything-but matches.
    check_attributes(
        r#"{"attr1": [null, {"anything-but": "whatever"}]}"#,
        &[(&[], false), (&[("attr1", S, "x")], true)],
    );
}

#[test]
fn numeric_ranges() {
    check_attributes(
        r#"{"price_usd": [{"numeric": ["=", 301.5]}]}"#,
        &[
            (&[("price_usd", N, "301.5")], true),
            (&[("price_usd", N, "3.015e2")], true),
            (&[("price_usd", N, "301.6")], false),
        ],
    );
    check_attributes(
        r#"{"price_usd": [{"numeric": ["<", 0]}]}"#,
        &[(&[("price_usd", N, "-0.00001")], true), (&[("price_usd", N, "0")], false)],
    );
    check_attributes(
        r#"{"attr1": [{"numeric": [">", 0, "<=", 100]}]}"#,
        &[
            (&[("attr1", N, "99")], true),
            (&[("attr1", N, "100")], true),
            (&[("attr1", N, "111")], false),
            (&[("attr1", N, "0")], false),
            (&[("attr1", S, "50")], false),
        ],
    );
    check_attributes(
        r#"{"v": [{"numeric": [">=", -1000000000, "<", 1000000000]}]}"#,
        &[(&[("v", N, "-1000000000")], true), (&[("v", N, "999999999.99999")], true), (&[("v", N, "1e12")], false)],
    );
    check_attributes(
        r#"{"v": [{"numeric": [">", 0]}]}"#,
        &[(&[("v", N, "5e12")], true), (&[("v", N, "-5e12")], false)],
    );
    // Five decimal places: further ones are rounded, in the policy and in the message.
    check_attributes(
        r#"{"v": [{"numeric": ["=", 8.244530000000001]}]}"#,
        &[(&[("v", N, "8.24453")], true), (&[("v", N, "8.244529999")], true), (&[("v", N, "8.24454")], false)],
    );
}

#[test]
fn cidr_blocks() {
    check_attributes(
        r#"{"source_ip": [{"cidr": "10.0.0.0/24"}]}"#,
        &[
            (&[("source_ip", S, "10.0.0.0")], true),
            (&[("source_ip", S, "10.0.0.255")], true),
            (&[("source_ip", S, "10.0.1.0")], false),
            (&[("source_ip", S, "not an ip")], false),
            (&[("source_ip", S, "::ffff:10.0.0.1")], false),
        ],
    );
    check_attributes(
        r#"{"source_ip": [{"cidr": "2001:db8::/32"}]}"#,
        &[
            (&[("source_ip", S, "2001:db8:1::9")], true),
            (&[("source_ip", S, "2001:db9::1")], false),
            (&[("source_ip", S, "10.0.0.1")], false),
        ],
    );
    check_attributes(
        r#"{"ip": [{"cidr": "10.0.0.7/32"}]}"#,
        &[(&[("ip", S, "10.0.0.7")], true), (&[("ip", S, "10.0.0.8")], false)],
    );
    check_attributes(r#"{"ip": [{"cidr": "10.0.0.7/24"}]}"#, &[(&[("ip", S, "10.0.0.1")], true)]);
    check_attributes(
        r#"{"ip": [{"cidr": "0.0.0.0/0"}]}"#,
        &[(&[("ip", S, "192.168.1.1")], true), (&[("ip", S, "::1")], false)],
    );
}

#[test]
fn exists() {
    check_attributes(
        r#"{"store": [{"exists": true}]}"#,
        &[(&[("store", N, "99"), ("def", N, "99")], true), (&[("attr1", N, "111")], false)],
    );
    check_attributes(
        r#"{"store": [{"exists": false}]}"#,
        &[(&[("def", N, "99")], true), (&[("store", S, "x")], false)],
    );
    check_attributes(
        r#"{"store": [{"exists": false}, "example_corp"]}"#,
        &[(&[], true), (&[("store", S, "example_corp")], true), (&[("store", S, "other")], false)],
    );
}

#[test]
fn or_across_keys() {
    check_attributes(
        r#"{"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}]}"#,
        &[
            (&[("source", S, "aws.cloudwatch"), ("metricName", S, "CPUUtilization")], true),
            (&[("source", S, "aws.cloudwatch"), ("namespace", S, "AWS/EC2")], true),
            (&[("source", S, "aws.cloudwatch"), ("namespace", S, "AWS/ES")], false),
            (&[("metricName", S, "CPUUtilization")], false),
        ],
    );
    // Nested: source && (metricName || (metricType && (metricId || spaceId))).
    check_attributes(
        r#"{"source": ["aws.cloudwatch"],
            "$or": [{"metricName": ["CPUUtilization", "ReadLatency"]},
                    {"metricType": ["MetricType"], "$or": [{"metricId": [1234, 4321]}, {"spaceId": [1000, 2000, 3000]}]}]}"#,
        &[
            (&[("source", S, "aws.cloudwatch"), ("metricName", S, "ReadLatency")], true),
            (&[("source", S, "aws.cloudwatch"), ("metricType", S, "MetricType"), ("spaceId", N, "2000")], true),
            (&[("source", S, "aws.cloudwatch"), ("metricType", S, "MetricType"), ("metricId", N, "1")], false),
            (&[("source", S, "aws.cloudwatch"), ("spaceId", N, "2000")], false),
        ],
    );
    // Not an OR relationship (a reserved name inside, or fewer than two objects): `$or` is a key.
    check_attributes(
        r#"{"$or": [{"numeric": [">", 1]}, {"prefix": "abc"}]}"#,
        &[(&[("$or", N, "5")], true), (&[("$or", S, "abcd")], true), (&[("$or", S, "x")], false)],
    );
    check_attributes(r#"{"$or": ["a", "b"]}"#, &[(&[("$or", S, "b")], true)]);
}

#[test]
fn empty_policy_matches_everything() {
    check_attributes("{}", &[(&[], true), (&[("a", S, "b")], true)]);
    check_body("{}", &[("not json", true), (r#"{"a": 1}"#, true)]);
}

#[test]
fn body_scope_nests_and_looks_through_arrays() {
    // Recorded against AWS (LocalStack `test_filter_policy_on_message_body_array_of_object_attributes`).
    let created = r#"{"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": "b"}, "object": {"key": "auto-insurance-2314.xml", "size": 17}}}]}"#;
    let removed = created.replace("ObjectCreated:Put", "ObjectRemoved:Delete");
    let home = created.replace("auto-insurance", "home-insurance");
    let multiple = r#"{"Records": [
        {"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {"object": [[{"key": "auto-insurance-2314.xml", "size": 17}]]}},
        {"eventSource": "aws:s3", "eventName": "ObjectRemoved:Delete", "s3": {"object": {"key": "home-insurance-2314.xml", "size": 17}}}]}"#;
    check_body(
        r#"{"Records": {"s3": {"object": {"key": [{"prefix": "auto-"}]}}, "eventName": [{"prefix": "ObjectCreated:"}]}}"#,
        &[(multiple, true), (created, true), (&removed, false), (&home, false)],
    );
    // Recorded: `test_filter_policy_on_message_body_array_attributes`.
    check_body(
        r#"{"headers": {"route-to": ["queue1"]}}"#,
        &[
            (r#"{"headers": {"route-to": ["queue3"]}}"#, false),
            (r#"{"headers": {"route-to": ["queue1"]}}"#, true),
            (r#"{"headers": {"route-to": ["queue2"]}}"#, false),
            (r#"{"headers": {"route-to": ["queue1", "queue2"]}}"#, true),
        ],
    );
}

#[test]
fn body_scope_reads_dots_as_nesting() {
    // Recorded: `test_filter_policy_on_message_body_dot_attribute`.
    check_body(
        r#"{"object": {"nested": ["string.value"]}}"#,
        &[
            (r#"{"object": {"nested": "string.value"}}"#, true),
            (r#"{"object.nested": "string.value"}"#, true),
            (r#"{"object": {"nested": "test-auto"}}"#, false),
        ],
    );
    check_body(
        r#"{"object.nested.test": ["string.value"]}"#,
        &[
            (r#"{"object": {"nested": {"test": "string.value"}}}"#, true),
            (r#"{"object.nested.test": "string.value"}"#, true),
            (r#"{"object.nested": {"test": "string.value"}}"#, true),
            (r#"{"object": {"nested.test": "string.value"}}"#, true),
            (r#"{"object": {"nested": {"test": "string.notvalue"}}}"#, false),
        ],
    );
}

#[test]
fn body_scope_types_and_absence() {
    check_body(
        r#"{"a": [null], "b": [true], "c": [{"numeric": [">", 1]}]}"#,
        &[
            (r#"{"a": null, "b": true, "c": 2}"#, true),
            (r#"{"a": "null", "b": true, "c": 2}"#, false),
            (r#"{"a": null, "b": "true", "c": 2}"#, false),
        ],
    );
    check_body(
        r#"{"a": [{"exists": false}]}"#,
        &[
            (r#"{"b": 1}"#, true),
            (r#"{"a": []}"#, true),
            (r#"{"a": {"x": 1}}"#, true),
            (r#"{"a": 0}"#, false),
            (r#"{"a": null}"#, false),
        ],
    );
    // The body must be a JSON object.
    check_body(r#"{"a": [{"exists": false}]}"#, &[("[1, 2]", false), ("not json", false), ("", false)]);
}

#[test]
fn body_scope_or() {
    // From LocalStack's `test_filter_policy_on_message_body_or_attribute` (whose recorded
    // snapshot is empty: the expectations here follow the documented semantics).
    check_body(
        r#"{"$or": [{"metricName": ["CPUUtilization", "ReadLatency"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}],
            "detail": {"scope": ["Service"], "$or": [{"source": ["aws.cloudwatch"]}, {"type": ["CloudWatch Alarm State Change"]}]}}"#,
        &[
            (
                r#"{"metricName": "CPUUtilization", "detail": {"scope": "aws.cloudwatch", "type": "CloudWatch Alarm State Change"}}"#,
                false,
            ),
            (r#"{"metricName": "CPUUtilization", "detail": {"scope": "Service", "type": "CPUUtilization"}}"#, false),
            (r#"{"metricName": "CPUUtilization", "detail": {"type": "CloudWatch Alarm State Change"}}"#, false),
            (r#"{"metricName": "CPUUtilization", "detail": {"scope": "Service"}}"#, false),
            (r#"{"metricName": "CPUUtilization", "scope": "Service"}"#, false),
            (r#"{"metricName": "CPUUtilization", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}"#, true),
            (r#"{"metricName": "ReadLatency", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}"#, true),
            (r#"{"namespace": "AWS/EC2", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}"#, true),
            (r#"{"namespace": "AWS/ES", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}"#, true),
            (
                r#"{"metricName": "CPUUtilization", "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"}}"#,
                true,
            ),
            (
                r#"{"metricName": "AWS/EC2", "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"}}"#,
                false,
            ),
        ],
    );
}

#[test]
fn attributes_scope_ignores_the_body_and_body_scope_ignores_attributes() {
    let attrs = attributes(&[("a", S, "x")]);
    let on_attributes = policy(r#"{"a": ["x"]}"#, FilterScope::MessageAttributes);
    assert!(on_attributes.matches(&MessageView::new(&attrs, "not json")));
    assert!(on_attributes.matches(&MessageView::new(&attrs, r#"{"a": "y"}"#)));
    let on_body = policy(r#"{"a": ["x"]}"#, FilterScope::MessageBody);
    assert!(!on_body.matches(&MessageView::new(&attrs, r#"{"a": "y"}"#)));
    assert!(on_body.matches(&MessageView::new(&BTreeMap::new(), r#"{"a": "x"}"#)));
}

#[test]
fn a_key_given_twice_keeps_the_last() {
    check_attributes(r#"{"a": ["x"], "a": ["y"]}"#, &[(&[("a", S, "y")], true), (&[("a", S, "x")], false)]);
}

#[test]
fn keys_and_combinations_are_counted_as_aws_counts_them() {
    let p = policy(
        r#"{"key_a": ["value_one", "value_two", "value_three"], "key_b": ["value_one"], "key_c": ["value_one", "value_two"]}"#,
        FilterScope::MessageAttributes,
    );
    assert_eq!((p.keys().len(), p.combinations()), (3, 6));
    // Recorded as accepted by AWS: 3 * (6 + 4 * (4 + 7)) = 150.
    let p = policy(
        r#"{"source": ["aws.cloudwatch", "aws.events", "aws.test"],
            "$or": [{"metricName": ["CPUUtilization", "ReadLatency", "TestVal", "TestVal2", "TestVal3", "TestVal4"]},
                    {"metricType": ["MetricType", "TestType", "TestType2", "TestType3"],
                     "$or": [{"metricId": [1234, 4321, 5678, 9012]}, {"spaceId": [1, 2, 3, 4, 5, 6, 7]}]}]}"#,
        FilterScope::MessageAttributes,
    );
    assert_eq!((p.keys().len(), p.combinations()), (5, 150));
    assert_eq!(p.keys(), ["source", "metricName", "metricType", "metricId", "spaceId"]);
    let nested = policy(r#"{"a": {"b": {"c": ["x", "y"]}}, "d": ["z"]}"#, FilterScope::MessageBody);
    assert_eq!(nested.keys(), ["a.b.c", "d"]);
    assert_eq!(nested.combinations(), 2 * 3);
}

#[test]
fn limits_refuse_what_aws_refuses() {
    let attrs = FilterScope::MessageAttributes;
    let many: Vec<String> = (0..151).map(|i| format!("\"value{i}\"")).collect();
    assert_eq!(error(&format!("{{\"key\": [{}]}}", many.join(",")), attrs), "Filter policy is too complex");
    let hundred: Vec<String> = (0..100).map(|i| format!("\"v{i}\"")).collect();
    let fifty_one: Vec<String> = (0..51).map(|i| format!("\"v{i}\"")).collect();
    assert_eq!(
        error(&format!("{{\"key1\": [{}], \"key2\": [{}]}}", hundred.join(","), fifty_one.join(",")), attrs),
        "Filter policy is too complex"
    );
    assert_eq!(
        error(
            r#"{"key1": ["value1"], "key2": ["value2"], "key3": ["value3"], "key4": ["value4"], "key5": ["value5"], "key6": ["value6"]}"#,
            attrs
        ),
        "Filter policy can not have more than 5 keys"
    );
    // (4 * 6) + (4 * 4 * 4) + (4 * 4 * 4) = 152.
    assert_eq!(
        error(
            r#"{"source": ["aws.cloudwatch", "aws.events", "aws.test", "aws.test2"],
                "$or": [{"metricName": ["CPUUtilization", "ReadLatency", "t1", "t2", "t3", "t4"]},
                        {"metricType": ["MetricType", "TestType", "TestType2", "TestType3"],
                         "$or": [{"metricId": [1234, 4321, 5678, 9012]}, {"spaceId": [1, 2, 3, 4]}]}]}"#,
            attrs
        ),
        "Filter policy is too complex"
    );
    // Nested keys multiply by their depth: (3 * 4 * 2) + (3 * 4 * 6) + (2 * 4 * 2) + (2 * 4 * 6) = 160.
    assert_eq!(
        error(
            r#"{"$or": [{"metricName": ["CPUUtilization", "ReadLatency", "TestValue"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}],
                "detail": {"scope": ["Service", "Test"],
                           "$or": [{"source": ["aws.cloudwatch"]}, {"type": ["CloudWatch Alarm State Change", "TestValue", "TestValue2"]}]}}"#,
            FilterScope::MessageBody
        ),
        "Filter policy is too complex"
    );
    // 3 * 4 * 2 * 3 * 1 * 3 = 216.
    assert_eq!(
        error(
            r#"{"key_a": {"key_b": {"key_c": ["value_one", "value_two", "value_three", "value_four"]}},
                "key_d": {"key_e": ["value_one", "value_two", "value_three"]},
                "key_f": ["value_one", "value_two", "value_three"]}"#,
            FilterScope::MessageBody
        ),
        "Filter policy is too complex"
    );
    assert_eq!(
        error(
            r#"{"a": {"b": ["x"]}, "c": {"d": ["x"], "e": ["x"]}, "f": ["x"], "g": {"h": ["x"], "i": ["x"]}}"#,
            FilterScope::MessageBody
        ),
        "Filter policy can not have more than 5 keys"
    );
    let big = format!("{{\"a\": [\"{}\"]}}", "x".repeat(crate::limits::FILTER_POLICY_BYTES_MAX));
    assert_eq!(error(&big, attrs), "Filter policy can not be larger than 262144 bytes");
}

#[test]
fn grammar_errors_are_aws_words() {
    let attrs = FilterScope::MessageAttributes;
    // (policy, reason SNS gives). Recorded from AWS unless marked.
    let cases: &[(&str, &str)] = &[
        (r#"{"key": [["value"]]}"#, "Match value must be String, number, true, false, or null"),
        (r#"{"key": [{"wrong-operator": true}]}"#, "Unrecognized match type wrong-operator"),
        (r#"{"key": [{"suffix": "value", "prefix": "value2"}]}"#, "Only one key allowed in match expression"),
        (r#"{"key": [{"suffix": 100}]}"#, "suffix match pattern must be a string"),
        (r#"{"key": [{"suffix": null}]}"#, "suffix match pattern must be a string"),
        (r#"{"key": [{"suffix": []}]}"#, "suffix match pattern must be a string"),
        (r#"{"key": [{"suffix": ["test", "test2"]}]}"#, "suffix match pattern must be a string"),
        (r#"{"key": {"suffix": "value"}}"#, "\"suffix\" must be an object or an array"),
        (r#"{"key": {"suffix": "value", "prefix": "value"}}"#, "\"suffix\" must be an object or an array"),
        (r#"{"key": {"not-an-operator": "value"}}"#, "\"not-an-operator\" must be an object or an array"),
        (r#"{"key_a": "value_one"}"#, "\"key_a\" must be an object or an array"),
        (r#"{"key": [{"numeric": []}]}"#, "Invalid member in numeric match: ]"),
        (r#"{"key": [{"numeric": ["operator"]}]}"#, "Unrecognized numeric range operator: operator"),
        (r#"{"key": [{"numeric": [1, "<="]}]}"#, "Invalid member in numeric match: 1"),
        (r#"{"key": [{"numeric": ["=", "000"]}]}"#, "Value of equals must be numeric"),
        (r#"{"key": [{"numeric": [">="]}]}"#, "Value of >= must be numeric"),
        (r#"{"key": [{"numeric": ["<", 100, ">", 10]}]}"#, "Too many elements in numeric expression"),
        (r#"{"key": [{"numeric": [">=", 1, ">", 2]}]}"#, "Bad numeric range operator: >"),
        (r#"{"key": [{"numeric": [">", 3, "<", 1]}]}"#, "Bottom must be less than top"),
        (r#"{"key": [{"numeric": [">", 20, "<="]}]}"#, "Value of <= must be numeric"),
        (r#"{"key": [{"numeric": [">", 20, 30]}]}"#, "Bad value in numeric range: 30"),
        (r#"{"key": [{"numeric": [">", 20, "test"]}]}"#, "Bad numeric range operator: test"),
        (r#"{"key": [{"numeric": [">", "20", "<", "30"]}]}"#, "Value of > must be numeric"),
        (r#"{"key": [{"numeric": [">", 20, "<", "30"]}]}"#, "Value of < must be numeric"),
        (r#"{"key": [{"numeric": [">", 20, "<", 30, "<", 50]}]}"#, "Too many terms in numeric range expression"),
        (r#"{"key": [{"exists": null}]}"#, "exists match pattern must be either true or false."),
        (r#"{"key": [{"exists": "no"}]}"#, "exists match pattern must be either true or false."),
        (
            r#"{"key": [{"anything-but": {"wrong-operator": null}}]}"#,
            "Unsupported anything-but pattern: wrong-operator",
        ),
        (r#"{"key": [{"anything-but": {"exists": false}}]}"#, "Unsupported anything-but pattern: exists"),
        (r#"{"key": [{"anything-but": {"prefix": false}}]}"#, "prefix match pattern must be a string"),
        // From AWS's event-ruler, not recorded against SNS.
        (r#"[]"#, "Filter is not an object"),
        (r#"{"key": []}"#, "Empty arrays are not allowed"),
        (r#"{"key": {}}"#, "Empty objects are not allowed"),
        (r#"{"key": [{}]}"#, "Match expression name not found"),
        (r#"{"key": [{"equals-ignore-case": 5}]}"#, "equals-ignore-case match pattern must be a string"),
        (r#"{"key": [{"numeric": "=5"}]}"#, "Value of numeric must be an array."),
        (r#"{"key": [{"numeric": ["=", 5, 6]}]}"#, "Too many elements in numeric expression"),
        (r#"{"key": [{"numeric": ["<=", 5, ">", 1]}]}"#, "Too many elements in numeric expression"),
        (r#"{"key": [{"anything-but": {}}]}"#, "Anything-But expression name not found"),
        (r#"{"key": [{"anything-but": {"prefix": ""}}]}"#, "Null prefix/suffix not allowed"),
        (r#"{"key": [{"anything-but": {"prefix": "a", "suffix": "b"}}]}"#, "Only one key allowed in match expression"),
        (
            r#"{"key": [{"anything-but": true}]}"#,
            "Value of anything-but must be an array or single string/number value.",
        ),
        (r#"{"key": [{"anything-but": [null]}]}"#, "Inside anything but list, start|null|boolean is not supported."),
        (
            r#"{"key": [{"anything-but": ["a", 1]}]}"#,
            "Inside anything but list, either all values are number or string, mixed type is not supported",
        ),
        (
            r#"{"key": [{"anything-but": []}]}"#,
            "Inside anything but list, either all values are number or string, mixed type is not supported",
        ),
        (
            r#"{"key": [{"anything-but": {"equals-ignore-case": [1]}}]}"#,
            "Inside anything-but/equals-ignore-case list, number|start|null|boolean is not supported.",
        ),
        (r#"{"key": [{"cidr": 10}]}"#, "prefix match pattern must be a string"),
        (r#"{"key": [{"cidr": "10.0.0.0"}]}"#, "Malformed CIDR, one '/' required"),
        (r#"{"key": [{"cidr": "10.0.0.0/8/8"}]}"#, "Malformed CIDR, one '/' required"),
        (r#"{"key": [{"cidr": "10.0.0.0/x"}]}"#, "Malformed CIDR, mask bits must be an integer"),
        (r#"{"key": [{"cidr": "10.0.0.0/-1"}]}"#, "Malformed CIDR, mask bits must not be negative"),
        (r#"{"key": [{"cidr": "10.0.0/8"}]}"#, "Nonstandard IP address: 10.0.0"),
        (r#"{"key": [{"numeric": [">", 1000000000.5]}]}"#, "Value must be between -1.0E9 and 1.0E9, inclusive"),
        (r#"{"key": [{"anything-but": [-1e10]}]}"#, "Value must be between -1.0E9 and 1.0E9, inclusive"),
        // SNS refuses exact numbers outside its range too (issue 25).
        (r#"{"store": [1000000001]}"#, "Value must be between -1.0E9 and 1.0E9, inclusive"),
        (r#"{"store": [-1000000000.5]}"#, "Value must be between -1.0E9 and 1.0E9, inclusive"),
        // Sluice's wording.
        (r#"{"key": [{"cidr": "10.0.0.0/33"}]}"#, "IPv4 mask bits must be at most 32"),
        (r#"{"key": [{"cidr": "::/129"}]}"#, "IPv6 mask bits must be at most 128"),
    ];
    for (text, reason) in cases {
        assert_eq!(error(text, attrs), *reason, "policy {text}");
    }
}

#[test]
fn the_first_mistake_in_document_order_is_reported() {
    let attrs = FilterScope::MessageAttributes;
    assert_eq!(error(r#"{"z": [{"bad": 1}], "a": []}"#, attrs), "Unrecognized match type bad");
    assert_eq!(error(r#"{"z": [], "a": [{"bad": 1}]}"#, attrs), "Empty arrays are not allowed");
    // Grammar first, limits after: six keys and a grammar error report the grammar error.
    assert_eq!(
        error(r#"{"a": ["1"], "b": ["1"], "c": ["1"], "d": ["1"], "e": ["1"], "f": [[]]}"#, attrs),
        "Match value must be String, number, true, false, or null"
    );
}

#[test]
fn nesting_needs_the_body_scope() {
    let nested = r#"{"object": {"key": [{"prefix": "auto-"}]}}"#;
    assert_eq!(
        FilterPolicy::parse(nested, FilterScope::MessageAttributes),
        Err(FilterPolicyError::NestedInAttributesScope)
    );
    assert!(FilterPolicy::parse(nested, FilterScope::MessageBody).is_ok());
    // `$or` is not nesting.
    assert!(FilterPolicy::parse(r#"{"$or": [{"a": ["x"]}, {"b": ["y"]}]}"#, FilterScope::MessageAttributes).is_ok());
}

#[test]
fn json_errors_carry_aws_prefix() {
    let e = error("{invalid-json}", FilterScope::MessageAttributes);
    assert!(e.starts_with("failed to parse JSON. "), "{e}");
    assert_eq!(
        FilterPolicy::parse("{invalid-json}", FilterScope::MessageAttributes)
            .unwrap_err()
            .sns_message(SnsCall::SetSubscriptionAttributes)
            .split_once(". ")
            .map(|(lead, _)| lead),
        Some("Invalid parameter: FilterPolicy: failed to parse JSON")
    );
    let deep = format!("{{\"a\": {}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(error(&deep, FilterScope::MessageBody).starts_with("failed to parse JSON. "));
}

#[test]
fn scopes_parse_as_sns_names_them() {
    assert_eq!("MessageBody".parse(), Ok(FilterScope::MessageBody));
    assert_eq!("MessageAttributes".parse(), Ok(FilterScope::MessageAttributes));
    assert_eq!(FilterScope::default(), FilterScope::MessageAttributes);
    assert_eq!(
        "RandomValue".parse::<FilterScope>().unwrap_err().to_string(),
        "Invalid value [RandomValue]. Please use either MessageBody or MessageAttributes"
    );
    assert_eq!(FilterScope::MessageBody.to_string(), "MessageBody");
}

#[test]
fn hostile_bodies_stay_cheap() {
    // A deep body with long keys and many leaves: the walk only follows keys on a policy path.
    let long_key = "k".repeat(1_000);
    let mut body = String::new();
    for _ in 0..100 {
        body.push_str(&format!("{{\"{long_key}\": "));
    }
    body.push('[');
    body.push_str(&vec!["{\"x\": 1}"; 20_000].join(","));
    body.push(']');
    body.push_str(&"}".repeat(100));
    let p = policy(r#"{"a": {"b": [{"exists": true}]}}"#, FilterScope::MessageBody);
    let none = BTreeMap::new();
    let started = std::time::Instant::now();
    assert!(!p.matches(&MessageView::new(&none, &body)));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

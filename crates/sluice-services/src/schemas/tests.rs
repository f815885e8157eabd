//! The registry's pure parts: which earlier versions a mode checks, and in which direction.

use serde_json::json;

use super::record::{RECORD_FORMAT, VersionRecord};
use super::*;

fn version(v: u32, schema: Value) -> VersionRecord {
    VersionRecord { format: RECORD_FORMAT, name: "t".into(), version: v, schema: schema.to_string(), created_at_ms: 0 }
}

#[test]
fn modes_pick_versions_and_directions() {
    let versions = vec![version(1, json!({"type": "integer"})), version(2, json!({"type": "number"}))];
    // Back to integer: every number message of version 2 is not an integer (backward); every
    // integer is a number (forward holds).
    let integer = json!({"type": "integer"});
    let backward = incompatibilities(Compatibility::Backward, &versions, &integer).unwrap();
    assert_eq!(backward.iter().map(|r| (r.version, r.direction)).collect::<Vec<_>>(), vec![(2, "backward")]);
    assert!(incompatibilities(Compatibility::Forward, &versions, &integer).unwrap().is_empty());
    let full = incompatibilities(Compatibility::Full, &versions, &integer).unwrap();
    assert_eq!(full.len(), 1);
    // A string breaks everything, against every version when transitive.
    let string = json!({"type": "string"});
    let all = incompatibilities(Compatibility::FullTransitive, &versions, &string).unwrap();
    let pairs: Vec<_> = all.iter().map(|r| (r.version, r.direction)).collect();
    assert_eq!(pairs, vec![(2, "backward"), (2, "forward"), (1, "backward"), (1, "forward")]);
    assert!(incompatibilities(Compatibility::None, &versions, &string).unwrap().is_empty());
    assert!(incompatibilities(Compatibility::Backward, &[], &string).unwrap().is_empty());
}

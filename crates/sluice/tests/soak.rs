//! The soak scenario's short version, as CI runs it: `sluice bench --scenario soak` at a fixed
//! rate for a few seconds, its samples and its ledger read back from `--json`. The 30-minute
//! run is `sluice bench --scenario soak` (docs/reliability.md, "Soak").

mod common;

use common::run_cli;
use serde_json::Value;

#[test]
fn a_short_soak_accounts_for_every_message_and_samples_memory() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("soak.json");
    let json_arg = json.to_str().unwrap();
    let tmp_arg = dir.path().to_str().unwrap();
    let args = [
        "bench",
        "--scenario",
        "soak",
        "--rate",
        "400",
        "--duration",
        "6s",
        "--sample-every",
        "1s",
        "--json",
        json_arg,
        "--tmp-dir",
        tmp_arg,
    ];
    let out = run_cli(&args, None, None);
    assert_eq!(out.code, Some(0), "the soak failed:\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("verdict     passed"), "{}", out.stdout);

    let rows: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = &rows[0];
    assert_eq!(row["scenario"], "soak");
    assert_eq!(row["passed"], true);
    assert_eq!(row["lost"], 0, "{row:#}");
    assert_eq!(row["unexpected"], 0, "{row:#}");
    let acked = row["acked"].as_u64().unwrap();
    assert!(acked > 1_000, "6 s at 400 msg/s acknowledged only {acked}");
    assert!(row["received"].as_u64().unwrap() >= acked - row["duplicated"].as_u64().unwrap());

    let samples = row["samples"].as_array().unwrap();
    assert!((5..=7).contains(&samples.len()), "one sample a second over 6 s, got {}", samples.len());
    for sample in samples {
        let rss = sample["rss_mib"].as_f64().expect("an in-process soak samples memory");
        assert!(rss > 1.0 && rss < row["memory_max_mib"].as_f64().unwrap(), "{sample}");
        assert!(sample["open_files"].as_u64().unwrap() > 0, "{sample}");
        assert!(sample["data_mib"].as_f64().is_some(), "{sample}");
    }
}

#[test]
fn a_soak_over_its_memory_bound_fails() {
    let dir = tempfile::tempdir().unwrap();
    let tmp_arg = dir.path().to_str().unwrap();
    let args = [
        "bench",
        "--scenario",
        "soak",
        "--rate",
        "100",
        "--duration",
        "2s",
        "--sample-every",
        "1s",
        "--memory-max",
        "1",
        "--tmp-dir",
        tmp_arg,
    ];
    let out = run_cli(&args, None, None);
    assert_eq!(out.code, Some(1), "a 1 MiB bound cannot hold:\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("over the bound of 1 MiB"), "{}", out.stderr);
}

//! Architecture invariant: the server built without the `peers` feature
//! (`cargo build --release -p sluice --no-default-features`) links none of the benchmark's peer
//! drivers; they come in through `sluice-bench/peers` only (see ARCHITECTURE.md).

use std::process::Command;

/// The clients `sluice bench --scenario peers` needs and nothing else does. tokio-postgres is not
/// here: the PostgreSQL backend (sluice-postgres) uses it too, so the slim server has it anyway.
const PEER_DRIVERS: [&str; 6] = ["async-nats", "aws-sdk-sqs", "aws-smithy-http-client", "lapin", "plotters", "redis"];

/// The names of the crates `sluice` depends on at run time, with `features` passed to `cargo tree`.
fn normal_dependencies(features: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", "sluice", "-e", "normal", "--prefix", "none", "--locked", "--offline"])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    tree.lines().filter_map(|line| line.split(' ').next()).map(str::to_owned).collect()
}

#[test]
fn the_slim_server_links_no_peer_driver() {
    let slim = normal_dependencies(&["--no-default-features"]);
    assert!(slim.iter().any(|name| name == "sluice-server"), "cargo tree listed the server's crates: {slim:?}");
    let linked: Vec<&str> = PEER_DRIVERS.into_iter().filter(|driver| slim.iter().any(|name| name == driver)).collect();
    assert_eq!(linked, Vec::<&str>::new(), "peer drivers in `-p sluice --no-default-features`");
    // The names above are the ones the default build really links, so the check above can fail.
    let default = normal_dependencies(&[]);
    let missing: Vec<&str> =
        PEER_DRIVERS.into_iter().filter(|driver| !default.iter().any(|name| name == driver)).collect();
    assert_eq!(missing, Vec::<&str>::new(), "peer drivers the default build does not link");
}

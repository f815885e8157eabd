//! Runs the example's real binary against a Sluice server on port 0 (in this test's process,
//! over a temporary embedded store) and checks the outcome it reports: the first order
//! completes and ships; the second is declined by the payment service (through the reply
//! queue), so its reservation is released exactly once and nothing after the charge runs.

use std::sync::Arc;

use serde_json::Value;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declined_order_releases_its_inventory_and_the_other_ships() {
    let dir = tempfile::tempdir().unwrap();
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(config).expect("open the store"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sluice_server::run(listener, store, async {
        let _ = stopped.await;
    }));

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_order-saga"))
        .args(["--server", &url, "--json"])
        .env_remove("SLUICE_SERVER")
        .output()
        .await
        .expect("run the example");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the example failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)));

    let instances = report["instances"].as_array().unwrap();
    let summary: Vec<(&str, &str, Vec<&str>)> = instances
        .iter()
        .map(|i| {
            let steps = i["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
            (i["correlation_id"].as_str().unwrap(), i["status"].as_str().unwrap(), steps)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("order-1", "completed", vec!["succeeded", "succeeded", "succeeded"]),
            ("order-2", "compensated", vec!["compensated", "failed", "skipped"]),
        ],
        "{report:#}"
    );
    assert_eq!(instances[0]["steps"][2]["output"]["tracking"], "T-order-1");
    assert!(instances[1]["steps"][1]["error"].as_str().unwrap().contains("card declined"), "{report:#}");

    let ledger = &report["ledger"];
    assert_eq!(ledger["stock"]["book-7"], 8, "10 in stock, 2 shipped, the 3 held for order-2 put back");
    assert_eq!(ledger["reserved"], serde_json::json!(["hold-order-1", "hold-order-2"]));
    assert_eq!(ledger["released"], serde_json::json!(["hold-order-2"]), "released exactly once");
    assert_eq!(ledger["charged"], serde_json::json!(["order-1"]));
    assert_eq!(ledger["declined"], serde_json::json!(["order-2"]));
    assert_eq!(ledger["refunded"], serde_json::json!([]), "a declined charge took no effect: nothing to refund");
    assert_eq!(ledger["shipped"], serde_json::json!(["order-1"]), "no step after the decline");

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

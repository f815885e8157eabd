//! `sluice bench`: throughput and latency of a Sluice server beside the storage engine's own
//! write rate, measured in the same run (the program lives in `sluice-bench`).

/// Benchmark throughput and latency beside the storage engine's own write rate.
///
/// Runs producers and consumers over HTTP against an in-process server (or `--server`), and
/// measures in the same run the storage engine's batched write rate and an empty HTTP handler.
///
/// Example:
///   sluice bench --quick
///   sluice bench --durability interval:10 --batch 10,100 --json results.json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    bench: sluice_bench::BenchArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    sluice_bench::run(args.bench).await
}

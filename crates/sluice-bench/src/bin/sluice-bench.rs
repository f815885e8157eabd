//! `sluice-bench`: the same program as `sluice bench`, runnable on its own.

use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "sluice-bench",
    version,
    about = "Measure Sluice's queue throughput and latency beside the storage and HTTP ceilings"
)]
struct Cli {
    #[command(flatten)]
    args: sluice_bench::BenchArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    match sluice_bench::run(Cli::parse().args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `{:#}` prints the cause chain on one line, without a backtrace.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

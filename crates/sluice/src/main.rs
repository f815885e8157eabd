//! `sluice`: the broker's one binary. `sluice serve` runs the server; every other command is a
//! client of a running server's native API. Each command lives in its own file under `cmd/`.

mod cmd;
mod output;
mod report;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of glibc's malloc. Under load the server allocates and frees many small,
/// short-lived buffers on several threads (JSON bodies, batch records, fjall's memtable nodes);
/// `perf` put glibc's malloc, free and `malloc_consolidate` at about 28 % of the server's CPU
/// (docs/benchmarks.md, "Where the time goes").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Sluice message broker: durable queues behind one port",
    after_help = "Examples:\n  sluice serve --data-dir ./sluice-data\n  sluice queue create jobs\n  sluice send jobs 'hello'\n  sluice receive jobs --wait 20s --ack"
)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            report::print(&error);
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod cli_shape {
    use clap::CommandFactory;

    /// clap's own checks of every subcommand (unique argument names, valid defaults), which it
    /// otherwise runs only for the subcommand a user happens to call.
    #[test]
    fn every_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}

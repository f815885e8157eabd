//! `sluice peek`: look at a queue's messages without receiving them.

use anyhow::Result;

use super::ClientArgs;
use crate::output::{self, MessageColumns};

/// Show messages in a queue without receiving them (no receipt, no change of state).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice peek jobs\n  sluice peek jobs-dlq --limit 100 --json")]
pub struct Args {
    /// Queue to look into.
    queue: String,
    /// Most messages to show (1 to 1000); the server's default when absent.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: Option<u32>,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let peeked = args.client.client()?.peek(&args.queue, args.limit).await?;
    if args.client.json {
        return output::json(&peeked);
    }
    if peeked.messages.is_empty() {
        eprintln!("queue {} is empty", args.queue);
        return Ok(());
    }
    output::print_messages(&peeked.messages, MessageColumns::State);
    Ok(())
}

//! `sluice ack`: delete received messages by receipt.

use anyhow::{Result, bail};

use super::ClientArgs;
use crate::output;

/// Ack (delete) received messages, given the receipts `sluice receive` printed.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice ack jobs AAAAAQAAAAIAAAAD... AAAAAQAAAAIAAAAE...")]
pub struct Args {
    /// Queue the messages were received from.
    queue: String,
    /// Receipts of the messages to ack.
    #[arg(required = true, value_name = "RECEIPT")]
    receipts: Vec<String>,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let response = args.client.client()?.ack(&args.queue, args.receipts.iter().cloned()).await?;
    if args.client.json {
        output::json(&response)?;
    }
    let mut failed = 0;
    for (receipt, result) in args.receipts.iter().zip(&response.results) {
        if let Some(error) = &result.error {
            failed += 1;
            if !args.client.json {
                eprintln!("error: {receipt}: {} ({})", error.message, error.code);
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} receipts were not acked", args.receipts.len());
    }
    if !args.client.json {
        println!("acked {} messages", args.receipts.len());
    }
    Ok(())
}

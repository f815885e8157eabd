//! `sluice receive`: receive messages (long-polling), print them, and optionally ack them.

use anyhow::{Result, bail};
use sluice_api::ReceiveRequest;

use super::{ClientArgs, parse_duration_ms};
use crate::output::{self, MessageColumns};

/// Receive messages from a queue.
///
/// Received messages stay hidden from other consumers for the visibility timeout; ack them
/// (here with --ack, or later with `sluice ack QUEUE RECEIPT`) or they come back.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice receive jobs\n  sluice receive jobs --max 10 --wait 20s --ack\n  sluice receive jobs --visibility-timeout 5m --json"
)]
pub struct Args {
    /// Queue to receive from.
    queue: String,
    /// Most messages to receive (1 to 1000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max: u32,
    /// Wait up to this long (at most 20s) for a message; the queue's receive wait when absent.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    wait: Option<u64>,
    /// Hide the received messages this long; the queue's visibility timeout when absent.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    visibility_timeout: Option<u64>,
    /// Ack (delete) the messages after printing them.
    #[arg(long)]
    ack: bool,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let client = args.client.client()?;
    let request =
        ReceiveRequest { max: Some(args.max), wait_ms: args.wait, visibility_timeout_ms: args.visibility_timeout };
    let received = client.receive_messages(&args.queue, &request).await?;
    if args.client.json {
        output::json(&received)?;
    } else if received.messages.is_empty() {
        eprintln!("no messages");
    } else {
        output::print_messages(&received.messages, MessageColumns::Receipt);
    }
    if !args.ack || received.messages.is_empty() {
        return Ok(());
    }
    let receipts = received.messages.iter().filter_map(|m| m.receipt.clone());
    let acked = client.ack(&args.queue, receipts).await?;
    let mut failed = 0;
    for (message, result) in received.messages.iter().zip(&acked.results) {
        if let Some(error) = &result.error {
            failed += 1;
            eprintln!("error: ack of {}: {} ({})", message.id, error.message, error.code);
        }
    }
    if failed > 0 {
        bail!("{failed} of {} messages were not acked and will be delivered again", received.messages.len());
    }
    if !args.client.json {
        eprintln!("acked {} messages", received.messages.len());
    }
    Ok(())
}

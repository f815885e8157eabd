//! `sluice trace`: what carried a correlation id, in causal order.

use anyhow::Result;
use sluice_api::TraceEntry;

use super::ClientArgs;
use crate::output;

/// List every message, publish, push, stream record, event, job and saga step that carried a
/// correlation id, each after what caused it (its `causation_id`), otherwise oldest first.
/// Entries are kept for the server's `--trace-retention` (7 days by default).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice trace order-123\n  sluice trace order-123 --json\n\n\
Writers name the id with `correlation_id` (and what caused them with `causation_id`): \
`sluice send QUEUE BODY --correlation-id order-123`, a publish's or a stream record's \
`--correlation-id`, an event's `correlation_id`, a job's, a saga's start.")]
pub struct Args {
    /// The correlation id.
    correlation_id: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    let trace = args.client.client()?.trace(&args.correlation_id).await?;
    if args.client.json {
        return output::json(&trace);
    }
    let hint = format!(
        "nothing carried the correlation id {:?} (or its entries are past the server's --trace-retention)",
        args.correlation_id
    );
    output::print_rows(&trace.entries, &hint, &["AT", "KIND", "ID", "TARGET", "DETAIL"], &[], row);
    if trace.truncated {
        eprintln!("the trace holds more entries than one answer lists: these are its oldest {}", trace.entries.len());
    }
    Ok(())
}

/// One entry; its id is indented by its depth, so that effects sit under their causes.
fn row(e: &TraceEntry) -> Vec<String> {
    let depth = usize::try_from(e.depth).unwrap_or(usize::MAX).min(20);
    vec![
        e.at.clone(),
        e.kind.clone(),
        format!("{}{}", "  ".repeat(depth), e.id),
        e.target.clone(),
        e.detail.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

//! `sluice dlq ...`: move dead-lettered messages back (redrive), watch and cancel redrives.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sluice_api::{RedriveRequest, RedriveTask};
use sluice_client::Client;

use super::ClientArgs;
use crate::output;

/// How often a waiting redrive asks the server for progress.
const REDRIVE_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Work with dead-letter queues: redrive their messages back, watch and cancel redrives.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice dlq redrive jobs-dlq\n  sluice dlq status\n  sluice dlq cancel 0192f1c3-..."
)]
pub struct Args {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    Redrive(RedriveArgs),
    Status(StatusArgs),
    Cancel(CancelArgs),
}

/// Move a dead-letter queue's messages back to the queues they came from (or to --to).
///
/// Waits with a progress bar until the redrive finishes; Ctrl-C cancels it on the server
/// (messages already moved stay moved). With --no-wait, prints the task and returns at once.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice dlq redrive jobs-dlq\n  sluice dlq redrive jobs-dlq --to jobs-retry --rate 50\n  sluice dlq redrive jobs-dlq --no-wait --json"
)]
struct RedriveArgs {
    /// The dead-letter queue to empty.
    dlq: String,
    /// Send every message to this queue instead of its source.
    #[arg(long, value_name = "QUEUE")]
    to: Option<String>,
    /// Most messages moved per second (server default 500).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rate: Option<u32>,
    /// Print the started task and return instead of waiting for it.
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Show redrive tasks: one by id, those of one queue, or all (since the server started).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice dlq status\n  sluice dlq status --queue jobs-dlq\n  sluice dlq status 0192f1c3-... --json"
)]
struct StatusArgs {
    /// A task id, as `sluice dlq redrive` printed it.
    id: Option<String>,
    /// Only the tasks of this queue.
    #[arg(long, value_name = "QUEUE", conflicts_with = "id")]
    queue: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Cancel a running redrive; messages already moved stay moved.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice dlq cancel 0192f1c3-...")]
struct CancelArgs {
    /// The task id.
    id: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        DlqCommand::Redrive(args) => redrive(args).await,
        DlqCommand::Status(args) => status(args).await,
        DlqCommand::Cancel(args) => cancel(args).await,
    }
}

async fn redrive(args: RedriveArgs) -> Result<()> {
    let client = args.client.client()?;
    let request = RedriveRequest { to: args.to.clone(), max_per_second: args.rate };
    let mut task = client.start_redrive(&args.dlq, &request).await?;
    if args.no_wait {
        return print_task(&task, args.client.json);
    }
    let bar = output::progress(task.total, "messages");
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    while task.status == "running" {
        bar.set_length(task.total.max(task.moved));
        bar.set_position(task.moved);
        tokio::select! {
            _ = tokio::time::sleep(REDRIVE_POLL_INTERVAL) => {}
            _ = &mut ctrl_c => {
                bar.abandon();
                let task = cancel_task(&client, &task.id).await?;
                if args.client.json {
                    output::json(&task)?;
                }
                bail!("redrive {} cancelled after moving {} of {} messages", task.id, task.moved, task.total);
            }
        }
        task = client.get_redrive(&task.id).await?;
    }
    bar.finish_and_clear();
    if args.client.json {
        output::json(&task)?;
    }
    let destination = task.to.as_deref().unwrap_or("their source queues");
    match task.status.as_str() {
        "completed" if task.failed == 0 => {
            if !args.client.json {
                println!("moved {} messages from {} to {destination}", task.moved, task.source);
            }
            Ok(())
        }
        "completed" => bail!(
            "moved {} messages; {} stayed in {} because their destination queue does not exist",
            task.moved,
            task.failed,
            task.source
        ),
        "cancelled" => bail!("redrive {} was cancelled after moving {} messages", task.id, task.moved),
        status => bail!("redrive {} {status}: {}", task.id, task.error.as_deref().unwrap_or("no reason given")),
    }
}

async fn cancel_task(client: &Client, id: &str) -> Result<RedriveTask> {
    client.cancel_redrive(id).await.with_context(|| format!("cancelling redrive {id}"))
}

async fn status(args: StatusArgs) -> Result<()> {
    let client = args.client.client()?;
    if let Some(id) = &args.id {
        let task = client.get_redrive(id).await?;
        return print_task(&task, args.client.json);
    }
    let tasks = match &args.queue {
        Some(queue) => client.list_redrives(queue).await?.tasks,
        None => client.list_all_redrives().await?.tasks,
    };
    if args.client.json {
        return output::json(&sluice_api::RedriveTaskList { tasks });
    }
    output::print_rows(
        &tasks,
        "no redrive tasks",
        &["id", "source", "to", "status", "moved", "total", "failed", "started at"],
        &[4, 5, 6],
        |t| {
            vec![
                t.id.clone(),
                t.source.clone(),
                t.to.clone().unwrap_or_else(|| "(sources)".into()),
                t.status.clone(),
                t.moved.to_string(),
                t.total.to_string(),
                t.failed.to_string(),
                t.started_at.clone(),
            ]
        },
    );
    Ok(())
}

async fn cancel(args: CancelArgs) -> Result<()> {
    let client = args.client.client()?;
    let task = cancel_task(&client, &args.id).await?;
    print_task(&task, args.client.json)
}

fn print_task(t: &RedriveTask, json: bool) -> Result<()> {
    if json {
        return output::json(t);
    }
    output::print_table(&output::key_values(vec![
        ("id", t.id.clone()),
        ("source", t.source.clone()),
        ("to", t.to.clone().unwrap_or_else(|| "(each message's source queue)".into())),
        ("status", t.status.clone()),
        ("moved", format!("{} of {}", t.moved, t.total)),
        ("failed", t.failed.to_string()),
        ("rate", format!("{}/s", t.max_per_second)),
        ("started at", t.started_at.clone()),
        ("finished at", t.finished_at.clone().unwrap_or_else(|| "-".into())),
        ("error", t.error.clone().unwrap_or_else(|| "-".into())),
    ]));
    Ok(())
}

//! `sluice saga ...`: define sagas from a JSON file, start instances, follow them, list,
//! cancel, and retry a failed compensation.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Subcommand;
use sluice_api::{DefineSagaRequest, SagaInstance, SagaInstanceList, StartSagaRequest};
use sluice_client::SagaInstanceQuery;

use super::ClientArgs;
use crate::output;

/// Run business operations across services as sagas: each step has a compensation, and a step
/// that fails for good undoes what completed, in reverse order.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice saga define order --file order-saga.json\n  sluice saga start order --input '{\"sku\": \"b-7\", \"amount\": 42}' --correlation-id order-7\n  sluice saga get 0192f1c3-...\n  sluice saga list --saga order --status failed\n  sluice saga cancel 0192f1c3-...\n  sluice saga retry 0192f1c3-..."
)]
pub struct Args {
    #[command(subcommand)]
    command: SagaCommand,
}

#[derive(Debug, Subcommand)]
enum SagaCommand {
    Define(DefineArgs),
    Show(ShowArgs),
    Start(StartArgs),
    Get(IdArgs),
    List(ListArgs),
    Cancel(IdArgs),
    Retry(IdArgs),
}

/// Write a new version of a saga from a JSON file: `{"steps": [...]}` (see the README's
/// "Sagas"); the same steps as the latest version change nothing.
#[derive(Debug, clap::Args)]
struct DefineArgs {
    /// The saga's name: letters, digits, `_`, `.`, `-`, up to 80 characters.
    name: String,
    /// The definition as JSON (`-`: standard input).
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
    #[command(flatten)]
    client: ClientArgs,
}

/// Print a saga's definition (the latest version unless --version).
#[derive(Debug, clap::Args)]
struct ShowArgs {
    name: String,
    #[arg(long)]
    version: Option<u32>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Start an instance of a saga's latest version; prints its id.
#[derive(Debug, clap::Args)]
struct StartArgs {
    name: String,
    /// The input, as JSON; templates read it as {{input.…}}.
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// Carried by every call as X-Correlation-Id (default: the instance id).
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// An instance's status and every step's attempts, outputs and errors.
#[derive(Debug, clap::Args)]
struct IdArgs {
    /// The instance id.
    id: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// List instances in start order.
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Only instances of this saga.
    #[arg(long)]
    saga: Option<String>,
    /// Only instances in this status: running, compensating, completed, compensated, failed.
    #[arg(long)]
    status: Option<String>,
    /// Most instances to print.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        SagaCommand::Define(args) => {
            let text = read(&args.file).await?;
            let request: DefineSagaRequest = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a saga definition ({{\"steps\": [...]}})", args.file.display()))?;
            let (saga, created) = args.client.client()?.define_saga(&args.name, &request).await?;
            if args.client.json {
                return output::json(&saga);
            }
            let what = if created { "defined" } else { "unchanged, still" };
            println!("saga {} {what} at version {} ({} steps)", saga.name, saga.version, saga.steps.len());
            Ok(())
        }
        SagaCommand::Show(args) => {
            let saga = args.client.client()?.get_saga(&args.name, args.version).await?;
            output::json(&saga)
        }
        SagaCommand::Start(args) => {
            let input = match &args.input {
                Some(text) => serde_json::from_str(text).context("--input is not JSON")?,
                None => serde_json::Value::Null,
            };
            let request = StartSagaRequest { input, correlation_id: args.correlation_id };
            let instance = args.client.client()?.start_saga(&args.name, &request).await?;
            if args.client.json {
                return output::json(&instance);
            }
            println!("{}", instance.id);
            Ok(())
        }
        SagaCommand::Get(args) => {
            let instance = args.client.client()?.get_saga_instance(&args.id).await?;
            print_instance(&instance, args.client.json)
        }
        SagaCommand::Cancel(args) => {
            let instance = args.client.client()?.cancel_saga_instance(&args.id).await?;
            print_instance(&instance, args.client.json)
        }
        SagaCommand::Retry(args) => {
            let instance = args.client.client()?.retry_saga_instance(&args.id).await?;
            print_instance(&instance, args.client.json)
        }
        SagaCommand::List(args) => list(args).await,
    }
}

async fn read(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        return tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin()))
            .await?
            .context("cannot read the definition from standard input");
    }
    tokio::fs::read_to_string(path).await.with_context(|| format!("cannot read {}", path.display()))
}

async fn list(args: ListArgs) -> Result<()> {
    let client = args.client.client()?;
    let mut query = SagaInstanceQuery {
        saga: args.saga,
        status: args.status,
        limit: Some(args.limit.clamp(1, 1_000) as u32),
        next_token: None,
    };
    let mut instances = Vec::new();
    loop {
        let page = client.list_saga_instances(&query).await?;
        instances.extend(page.instances);
        match page.next_token {
            Some(next) if instances.len() < args.limit => query.next_token = Some(next),
            _ => break,
        }
    }
    instances.truncate(args.limit);
    if args.client.json {
        return output::json(&SagaInstanceList { instances, next_token: None });
    }
    output::print_rows(
        &instances,
        "no saga instances",
        &["id", "saga", "version", "status", "step", "started at", "error"],
        &[2],
        |i| {
            vec![
                i.id.clone(),
                i.saga.clone(),
                i.version.to_string(),
                i.status.clone(),
                current_step(i),
                i.created_at.clone(),
                i.error.clone().map_or_else(|| "-".into(), |e| e.replace('\n', " ")),
            ]
        },
    );
    Ok(())
}

/// The step being done or undone, or `-` once settled.
fn current_step(i: &SagaInstance) -> String {
    i.steps
        .iter()
        .find(|s| {
            matches!(s.status.as_str(), "running" | "compensating")
                || (s.status == "pending" && s.next_attempt_at.is_some())
        })
        .map_or_else(|| "-".into(), |s| s.name.clone())
}

fn print_instance(i: &SagaInstance, json: bool) -> Result<()> {
    if json {
        return output::json(i);
    }
    let status = if i.cancel_requested && i.status == "running" {
        "running (cancel requested)".into()
    } else {
        i.status.clone()
    };
    let rows = vec![
        ("id", i.id.clone()),
        ("saga", format!("{} v{}", i.saga, i.version)),
        ("status", status),
        ("correlation id", i.correlation_id.clone()),
        ("error", i.error.clone().unwrap_or_else(|| "-".into())),
        ("started at", i.created_at.clone()),
        ("finished at", i.finished_at.clone().unwrap_or_else(|| "-".into())),
    ];
    output::print_table(&output::key_values(rows));
    println!();
    output::print_rows(
        &i.steps,
        "",
        &["step", "status", "attempts", "undo attempts", "output", "error"],
        &[2, 3],
        |s| {
            vec![
                s.name.clone(),
                s.status.clone(),
                s.attempts.to_string(),
                s.compensation_attempts.to_string(),
                s.output.as_ref().map_or_else(|| "-".into(), |o| o.to_string()),
                s.error.clone().unwrap_or_else(|| "-".into()),
            ]
        },
    );
    Ok(())
}

//! `sluice job ...`: enqueue async jobs, inspect, list, cancel and wait for them.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sluice_api::{EnqueueJobRequest, Job, JobBackoff, JobList};
use sluice_client::{JobQuery, is_finished};

use super::{ClientArgs, parse_duration_ms};
use crate::output;

/// Enqueue async jobs and follow them: get one, list them, cancel, wait for a result.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice job enqueue reports monthly --payload '{\"month\": \"2024-05\"}'\n  sluice job get 0192f1c3-...\n  sluice job list --queue reports --status dead\n  sluice job wait 0192f1c3-... --timeout 2m\n  sluice job cancel 0192f1c3-..."
)]
pub struct Args {
    #[command(subcommand)]
    command: JobCommand,
}

#[derive(Debug, Subcommand)]
enum JobCommand {
    // Boxed: its many flags would make every subcommand as large as it.
    Enqueue(Box<EnqueueArgs>),
    Get(IdArgs),
    List(ListArgs),
    Cancel(IdArgs),
    Wait(WaitArgs),
    Stats(StatsArgs),
    CallbackSecret(SecretArgs),
}

/// Enqueue a job; prints its id (with --wait, waits for it to finish and prints it).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice job enqueue reports monthly --payload '{\"month\": \"2024-05\"}'\n  sluice job enqueue mail welcome --payload '{\"user\": 7}' --delay 10m --max-attempts 5\n  sluice job enqueue reports monthly --unique-key 2024-05 --callback-url https://example.com/hook\n  sluice job enqueue images resize --payload '{\"id\": 1}' --wait --timeout 1m"
)]
struct EnqueueArgs {
    /// The job queue.
    queue: String,
    /// The job's type (workers claim by type).
    #[arg(value_name = "TYPE")]
    job_type: String,
    /// The payload, as JSON (default null).
    #[arg(long, value_name = "JSON")]
    payload: Option<String>,
    /// 0 to 9, higher first.
    #[arg(long)]
    priority: Option<u8>,
    /// Claimable only after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, conflicts_with = "run_at")]
    delay: Option<u64>,
    /// Claimable only from this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    run_at: Option<String>,
    /// The longest one attempt may run.
    #[arg(long = "job-timeout", value_name = "DURATION", value_parser = parse_duration_ms)]
    job_timeout: Option<u64>,
    /// Attempts in all (default 3).
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// The first retry's delay bound (default 1s); each next one grows by --backoff-multiplier.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    backoff: Option<u64>,
    /// No retry waits longer (default 5m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    backoff_max: Option<u64>,
    /// Growth of the delay bound per retry (default 2).
    #[arg(long, value_name = "X")]
    backoff_multiplier: Option<f64>,
    /// `full` (default) or `none`.
    #[arg(long, value_name = "JITTER", value_parser = ["full", "none"])]
    jitter: Option<String>,
    /// Within --unique-for, the same key on the same queue returns the existing job.
    #[arg(long, value_name = "KEY")]
    unique_key: Option<String>,
    /// How long the unique key holds (default 24h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, requires = "unique_key")]
    unique_for: Option<u64>,
    /// Receives a signed POST of the job's final view when it finishes.
    #[arg(long, value_name = "URL")]
    callback_url: Option<String>,
    /// How long the finished job and its result are kept (default 24h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    result_ttl: Option<u64>,
    /// A tag; repeat for several.
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// The business operation the job belongs to; `sluice trace ID` lists its enqueue.
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    /// What caused the job (a message, event or saga step id).
    #[arg(long, value_name = "ID", requires = "correlation_id")]
    causation_id: Option<String>,
    /// Wait for the job to finish and print it (exit 1 unless it succeeded).
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, default_value = "5m", requires = "wait")]
    timeout: u64,
    #[command(flatten)]
    client: ClientArgs,
}

/// Show a job: status, attempts, progress, result, last error and times.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice job get 0192f1c3-...")]
struct IdArgs {
    /// The job id, as enqueue printed it.
    id: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// List jobs in creation order (all pages, up to --limit), filtered.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice job list\n  sluice job list --queue reports --status failed\n  sluice job list --type monthly --tag tenant:acme --json"
)]
struct ListArgs {
    #[arg(long)]
    queue: Option<String>,
    /// queued, running, succeeded, failed (will retry), dead or cancelled.
    #[arg(long, value_parser = ["queued", "running", "succeeded", "failed", "dead", "cancelled"])]
    status: Option<String>,
    #[arg(long = "type", value_name = "TYPE")]
    job_type: Option<String>,
    #[arg(long)]
    tag: Option<String>,
    /// Most jobs to show.
    #[arg(long, default_value_t = 1_000)]
    limit: usize,
    #[command(flatten)]
    client: ClientArgs,
}

/// Wait for a job to finish and print it (exit 1 unless it succeeded).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice job wait 0192f1c3-... --timeout 2m")]
struct WaitArgs {
    id: String,
    /// Give up after this long (exit 1).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, default_value = "5m")]
    timeout: u64,
    #[command(flatten)]
    client: ClientArgs,
}

/// Every job queue's jobs counted by status, in one call however many jobs there are.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice job stats\n  sluice job stats --json")]
struct StatsArgs {
    #[command(flatten)]
    client: ClientArgs,
}

/// Print the secret completion webhooks are signed with.
#[derive(Debug, clap::Args)]
struct SecretArgs {
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        JobCommand::Enqueue(args) => enqueue(*args).await,
        JobCommand::Get(args) => {
            let job = args.client.client()?.get_job(&args.id, None).await?;
            print_job(&job, args.client.json)
        }
        JobCommand::List(args) => list(args).await,
        JobCommand::Cancel(args) => {
            let job = args.client.client()?.cancel_job(&args.id).await?;
            print_job(&job, args.client.json)
        }
        JobCommand::Wait(args) => {
            let client = args.client.client()?;
            let job = client.wait_job(&args.id, Duration::from_millis(args.timeout)).await?;
            finished(&job, args.client.json, args.timeout)
        }
        JobCommand::Stats(args) => stats(args).await,
        JobCommand::CallbackSecret(args) => {
            let secret = args.client.client()?.job_callback_secret().await?;
            if args.client.json {
                return output::json(&sluice_api::CallbackSecret { secret });
            }
            println!("{secret}");
            Ok(())
        }
    }
}

async fn enqueue(args: EnqueueArgs) -> Result<()> {
    let payload = match &args.payload {
        Some(text) => serde_json::from_str(text).context("--payload is not JSON")?,
        None => serde_json::Value::Null,
    };
    let backoff = (args.backoff.is_some()
        || args.backoff_max.is_some()
        || args.backoff_multiplier.is_some()
        || args.jitter.is_some())
    .then(|| JobBackoff {
        initial_ms: args.backoff,
        max_ms: args.backoff_max,
        multiplier: args.backoff_multiplier,
        jitter: args.jitter.clone(),
    });
    let request = EnqueueJobRequest {
        queue: args.queue,
        job_type: args.job_type,
        payload,
        priority: args.priority,
        delay_ms: args.delay,
        run_at: args.run_at,
        timeout_ms: args.job_timeout,
        max_attempts: args.max_attempts,
        backoff,
        unique_key: args.unique_key,
        unique_for_ms: args.unique_for,
        callback_url: args.callback_url,
        result_ttl_ms: args.result_ttl,
        tags: args.tags,
        correlation_id: args.correlation_id,
        causation_id: args.causation_id,
    };
    let client = args.client.client()?;
    let enqueued = client.enqueue_job(&request).await?;
    if args.wait {
        let job = client.wait_job(&enqueued.job.id, Duration::from_millis(args.timeout)).await?;
        return finished(&job, args.client.json, args.timeout);
    }
    if args.client.json {
        return output::json(&enqueued.job);
    }
    if !enqueued.created {
        eprintln!("the unique key is held by this job; nothing was enqueued");
    }
    println!("{}", enqueued.job.id);
    Ok(())
}

/// Prints a job that was waited for; an error unless it succeeded.
fn finished(job: &Job, json: bool, timeout_ms: u64) -> Result<()> {
    print_job(job, json)?;
    if !is_finished(job) {
        bail!("job {} is still {} after {}", job.id, job.status, output::duration_ms(timeout_ms));
    }
    if job.status != "succeeded" {
        bail!("job {} ended {}: {}", job.id, job.status, job.error.as_deref().unwrap_or("no error given"));
    }
    Ok(())
}

async fn list(args: ListArgs) -> Result<()> {
    let client = args.client.client()?;
    let mut query = JobQuery {
        queue: args.queue,
        status: args.status,
        job_type: args.job_type,
        tag: args.tag,
        limit: Some(args.limit.clamp(1, 1_000) as u32),
        next_token: None,
    };
    let mut jobs = Vec::new();
    loop {
        let page = client.list_jobs(&query).await?;
        jobs.extend(page.jobs);
        match page.next_token {
            Some(next) if jobs.len() < args.limit && Some(&next) != query.next_token.as_ref() => {
                query.next_token = Some(next);
            }
            _ => break,
        }
    }
    jobs.truncate(args.limit);
    if args.client.json {
        return output::json(&JobList { jobs, next_token: None });
    }
    output::print_rows(
        &jobs,
        "no jobs",
        &["id", "queue", "type", "status", "attempts", "priority", "created at", "error"],
        &[4, 5],
        |j| {
            vec![
                j.id.clone(),
                j.queue.clone(),
                j.job_type.clone(),
                j.status.clone(),
                format!("{}/{}", j.attempts, j.max_attempts),
                j.priority.to_string(),
                j.created_at.clone(),
                j.error.clone().map_or_else(|| "-".into(), |e| one_line(&e)),
            ]
        },
    );
    Ok(())
}

async fn stats(args: StatsArgs) -> Result<()> {
    let answer = args.client.client()?.job_stats().await?;
    if args.client.json {
        return output::json(&answer);
    }
    output::print_rows(
        &answer.queues,
        "no job queue holds jobs",
        &["queue", "queued", "running", "succeeded", "failed", "dead", "cancelled", "total", "result bytes"],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        |q| {
            vec![
                q.queue.clone(),
                q.queued.to_string(),
                q.running.to_string(),
                q.succeeded.to_string(),
                q.failed.to_string(),
                q.dead.to_string(),
                q.cancelled.to_string(),
                q.total.to_string(),
                q.result_bytes.to_string(),
            ]
        },
    );
    Ok(())
}

fn one_line(text: &str) -> String {
    let line = text.replace('\n', " ");
    if line.chars().count() > 60 { format!("{}…", line.chars().take(59).collect::<String>()) } else { line }
}

fn json_cell(value: &Option<serde_json::Value>) -> String {
    value.as_ref().map_or_else(|| "-".into(), |v| v.to_string())
}

fn print_job(j: &Job, json: bool) -> Result<()> {
    if json {
        return output::json(j);
    }
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut rows = vec![
        ("id", j.id.clone()),
        ("queue", j.queue.clone()),
        ("type", j.job_type.clone()),
        (
            "status",
            if j.cancel_requested && j.status == "running" {
                "running (cancel requested)".into()
            } else {
                j.status.clone()
            },
        ),
        ("attempts", format!("{} of {}", j.attempts, j.max_attempts)),
        ("priority", j.priority.to_string()),
        ("payload", json_cell(&j.payload)),
        ("progress", json_cell(&j.progress)),
        ("result", json_cell(&j.result)),
        ("error", or_dash(&j.error)),
        ("created at", j.created_at.clone()),
        ("run at", j.run_at.clone()),
        ("started at", or_dash(&j.started_at)),
        ("finished at", or_dash(&j.finished_at)),
        ("lease until", or_dash(&j.lease_expires_at)),
        ("kept until", or_dash(&j.expires_at)),
    ];
    if !j.tags.is_empty() {
        rows.push(("tags", j.tags.join(", ")));
    }
    if let Some(key) = &j.unique_key {
        rows.push(("unique key", key.clone()));
    }
    if let Some(url) = &j.callback_url {
        rows.push(("callback", url.clone()));
    }
    output::print_table(&output::key_values(rows));
    Ok(())
}

//! `sluice schedule ...`: create, list, inspect, pause, resume and delete recurring sends.

use anyhow::Result;
use clap::Subcommand;
use sluice_api::{Attribute, CatchUp, CreateScheduleRequest, Schedule, ScheduleTarget, SendMessage};

use super::{ClientArgs, parse_attribute, parse_duration_ms};
use crate::output;

/// Send a message into a queue, a topic or a stream on a cron schedule or at a fixed interval;
/// each tick fires exactly once, across restarts and servers.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schedule create nightly-report --cron '0 2 * * *' --timezone Europe/Paris --queue reports --body 'build the report'\n  sluice schedule create heartbeat --every 30s --topic health --body ping\n  sluice schedule list\n  sluice schedule pause nightly-report"
)]
pub struct Args {
    #[command(subcommand)]
    command: ScheduleCommand,
}

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    // Boxed: its many flags would make every variant as large as it.
    Create(Box<CreateArgs>),
    List(ListArgs),
    Get(NameArgs),
    Pause(NameArgs),
    Resume(NameArgs),
    Delete(NameArgs),
}

/// Create a schedule (succeeds without change if one with this definition exists).
///
/// Every tick sends the message with the attribute `scheduled_at` (the tick's time, RFC 3339)
/// and `sluice.schedule` (its name); into a stream, as headers of a record keyed by the
/// schedule's name, with `NAME/TICK_MS` as its dedup id.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schedule create weekdays --cron '0 9 * * MON-FRI' --timezone America/New_York --queue standup --body 'stand-up in 5 minutes'\n  sluice schedule create every-ten-seconds --cron '*/10 * * * * *' --queue ticks --body tick\n  sluice schedule create heartbeat --every 30s --topic health --body ping --catch-up latest\n  sluice schedule create audit-tick --every 1m --stream audit --body tick\n  sluice schedule create nightly-report --cron '0 2 * * *' --job-queue reports --job-type build-report --body '{\"period\":\"day\"}'\n  sluice schedule create campaign --every 1h --queue mails --body send --start-at 2030-01-01T00:00:00Z --end-at 2030-01-31T00:00:00Z",
    group(clap::ArgGroup::new("target").required(true).multiple(false).args(["queue", "topic", "stream", "job_queue"]))
)]
struct CreateArgs {
    /// Schedule name: letters, digits, `.`, `-` and `_`, up to 128 characters.
    name: String,
    /// A cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first.
    #[arg(long, value_name = "EXPR", required_unless_present = "every", conflicts_with = "every")]
    cron: Option<String>,
    /// A fixed interval instead of --cron (e.g. 30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    every: Option<u64>,
    /// The IANA time zone of the cron expression (default UTC).
    #[arg(long, value_name = "ZONE", requires = "cron")]
    timezone: Option<String>,
    /// Send into this queue.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Publish to this topic.
    #[arg(long, value_name = "TOPIC")]
    topic: Option<String>,
    /// Append to this stream (one record per tick, keyed by the schedule's name).
    #[arg(long, value_name = "STREAM")]
    stream: Option<String>,
    /// Enqueue a job in this job queue every tick (with --job-type; --body is its JSON payload).
    #[arg(long, value_name = "QUEUE", requires = "job_type")]
    job_queue: Option<String>,
    /// The type of the job each tick enqueues.
    #[arg(long, value_name = "TYPE", requires = "job_queue")]
    job_type: Option<String>,
    /// The message every tick sends, as text (for a job: its JSON payload).
    #[arg(long)]
    body: String,
    /// A typed attribute: NAME=String:text, NAME=Number:42 or NAME=Binary:<base64>; repeat for
    /// several.
    #[arg(long = "attr", value_name = "NAME=TYPE:VALUE", value_parser = parse_attribute)]
    attributes: Vec<(String, Attribute)>,
    /// The message's priority, 0 to 9.
    #[arg(long)]
    priority: Option<u8>,
    /// The message's type.
    #[arg(long = "type", value_name = "TYPE")]
    message_type: Option<String>,
    /// After downtime: fire none of the missed ticks, the latest of them, or all of them.
    #[arg(long, value_enum, default_value = "none")]
    catch_up: CatchUpArg,
    /// No tick before this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    start_at: Option<String>,
    /// No tick after this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    end_at: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CatchUpArg {
    None,
    Latest,
    All,
}

/// List schedules with their next fire times (all pages).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice schedule list\n  sluice schedule list --prefix report- --json")]
struct ListArgs {
    /// Only schedules whose names start with this.
    #[arg(long)]
    prefix: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// A schedule by name.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice schedule get nightly-report\n  sluice schedule resume nightly-report")]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        ScheduleCommand::Create(args) => create(*args).await,
        ScheduleCommand::List(args) => list(args).await,
        ScheduleCommand::Get(args) => {
            let schedule = args.client.client()?.get_schedule(&args.name).await?;
            print_schedule(&schedule, args.client.json)
        }
        ScheduleCommand::Pause(args) => {
            let schedule = args.client.client()?.pause_schedule(&args.name).await?;
            print_schedule(&schedule, args.client.json)
        }
        ScheduleCommand::Resume(args) => {
            let schedule = args.client.client()?.resume_schedule(&args.name).await?;
            print_schedule(&schedule, args.client.json)
        }
        ScheduleCommand::Delete(args) => {
            args.client.client()?.delete_schedule(&args.name).await?;
            if !args.client.json {
                println!("deleted schedule {}", args.name);
            }
            Ok(())
        }
    }
}

async fn create(args: CreateArgs) -> Result<()> {
    let request = CreateScheduleRequest {
        name: args.name.clone(),
        cron: args.cron.clone(),
        every_ms: args.every,
        timezone: args.timezone.clone(),
        target: ScheduleTarget {
            queue: args.queue.clone(),
            topic: args.topic.clone(),
            stream: args.stream.clone(),
            job: args.job_queue.clone().map(|queue| sluice_api::ScheduleJob {
                queue,
                job_type: args.job_type.clone().unwrap_or_default(),
                ..Default::default()
            }),
        },
        message: SendMessage {
            body: Some(args.body.clone()),
            attributes: args.attributes.iter().cloned().collect(),
            priority: args.priority,
            message_type: args.message_type.clone(),
            ..Default::default()
        },
        catch_up: match args.catch_up {
            CatchUpArg::None => CatchUp::None,
            CatchUpArg::Latest => CatchUp::Latest,
            CatchUpArg::All => CatchUp::All,
        },
        start_at: args.start_at.clone(),
        end_at: args.end_at.clone(),
    };
    let created = args.client.client()?.create_schedule(&request).await?;
    if args.client.json {
        return output::json(&created.schedule);
    }
    let s = &created.schedule;
    if created.created {
        println!("created schedule {}; next tick {}", s.name, s.next_fire_at.as_deref().unwrap_or("none"));
    } else {
        println!("schedule {} already exists with this definition", s.name);
    }
    Ok(())
}

fn recurrence(s: &Schedule) -> String {
    match (&s.cron, s.every_ms) {
        (Some(cron), _) => format!("cron {cron} ({})", s.timezone),
        (None, Some(ms)) => format!("every {}", output::duration_ms(ms)),
        (None, None) => "-".into(),
    }
}

fn target(s: &Schedule) -> String {
    match (&s.target.queue, &s.target.topic, &s.target.stream) {
        (Some(q), _, _) => format!("queue {q}"),
        (None, Some(t), _) => format!("topic {t}"),
        (None, None, Some(st)) => format!("stream {st}"),
        _ => match &s.target.job {
            Some(job) => format!("job {} ({})", job.queue, job.job_type),
            None => "-".into(),
        },
    }
}

async fn list(args: ListArgs) -> Result<()> {
    let schedules = args.client.client()?.list_all_schedules(args.prefix.as_deref()).await?;
    if args.client.json {
        return output::json(&sluice_api::ScheduleList { schedules, next_token: None });
    }
    output::print_rows(
        &schedules,
        "no schedules; create one with `sluice schedule create NAME --cron EXPR --queue QUEUE --body TEXT`",
        &["name", "recurrence", "target", "status", "next fire", "fired", "last error"],
        &[5],
        |s| {
            vec![
                s.name.clone(),
                recurrence(s),
                target(s),
                s.status.clone(),
                s.next_fire_at.clone().unwrap_or_else(|| "-".into()),
                s.fired.to_string(),
                s.last_error.clone().unwrap_or_else(|| "-".into()),
            ]
        },
    );
    Ok(())
}

fn print_schedule(s: &Schedule, json: bool) -> Result<()> {
    if json {
        return output::json(s);
    }
    let catch_up = match s.catch_up {
        CatchUp::None => "none",
        CatchUp::Latest => "latest",
        CatchUp::All => "all",
    };
    output::print_table(&output::key_values(vec![
        ("name", s.name.clone()),
        ("recurrence", recurrence(s)),
        ("target", target(s)),
        ("status", s.status.clone()),
        ("next fire times", if s.upcoming.is_empty() { "-".into() } else { s.upcoming.join("\n") }),
        ("catch up", catch_up.into()),
        ("window", format!("{} to {}", s.start_at.as_deref().unwrap_or("-"), s.end_at.as_deref().unwrap_or("-"))),
        ("fired", s.fired.to_string()),
        ("skipped after downtime", s.skipped.to_string()),
        ("last tick", s.last_tick_at.clone().unwrap_or_else(|| "-".into())),
        ("last error", s.last_error.clone().unwrap_or_else(|| "-".into())),
        ("created at", s.created_at.clone()),
    ]));
    Ok(())
}

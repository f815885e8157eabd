//! `sluice relay ...`: create, list, inspect, pause, resume and delete outbox relays.

use anyhow::{Result, bail};
use clap::Subcommand;
use sluice_api::{AfterPublish, CreateRelayRequest, Relay, RelayColumns, RelayList, RelayTarget};

use super::{ClientArgs, parse_tag};
use crate::output;

/// Publish the rows of an outbox table in your application's database.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice relay create orders --source postgres://app:secret@db/shop --table outbox --topic orders\n  sluice relay create events --source 'sqlite:///var/lib/app.db' --table outbox --topic 'events-${routedByValue}' --route-by aggregatetype\n  sluice relay list\n  sluice relay get orders\n  sluice relay pause orders"
)]
pub struct Args {
    #[command(subcommand)]
    command: RelayCommand,
}

#[derive(Debug, Subcommand)]
enum RelayCommand {
    // Boxed: its many flags would make every variant as large as it.
    Create(Box<CreateArgs>),
    List(ListArgs),
    Get(NameArgs),
    Pause(NameArgs),
    Resume(NameArgs),
    Delete(NameArgs),
}

/// Create a relay (succeeds without change if one with this configuration exists). The
/// server connects to the source and checks the table and columns first.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice relay create orders --source postgres://app:secret@db/shop --table outbox --topic orders\n  sluice relay create billing --source mysql://app@db/shop --table outbox --queue billing.fifo --mark --dlq billing-dlq\n  sluice relay create legacy --source 'sqlite:///srv/app.db' --table events --queue legacy --column id=event_id --column payload=body"
)]
struct CreateArgs {
    /// Relay name: letters, digits, `-` and `_`, up to 80 characters.
    name: String,
    /// The application's database: postgres://USER:PASSWORD@HOST/DB, mysql://... (MariaDB
    /// too) or sqlite:///PATH. Shown with the password masked.
    #[arg(long, value_name = "URL")]
    source: String,
    /// The outbox table (`name` or `schema.name`).
    #[arg(long, value_name = "TABLE")]
    table: String,
    /// Publish to this topic.
    #[arg(long, value_name = "TOPIC", required_unless_present_any = ["queue", "stream"], conflicts_with_all = ["queue", "stream"])]
    topic: Option<String>,
    /// Send to this queue (a FIFO queue groups by aggregate and deduplicates by row id).
    #[arg(long, value_name = "QUEUE", conflicts_with = "stream")]
    queue: Option<String>,
    /// Append to this stream: keyed by the aggregate id, the row id as the dedup id.
    #[arg(long, value_name = "STREAM")]
    stream: Option<String>,
    /// A column whose value names the target, in place of ${routedByValue} in its name.
    #[arg(long, value_name = "COLUMN")]
    route_by: Option<String>,
    /// Mark rows (set published_at) instead of deleting them.
    #[arg(long)]
    mark: bool,
    /// Pause between polls that found less than a full batch, in milliseconds (10 to 60000).
    #[arg(long, value_name = "MS")]
    poll_ms: Option<u64>,
    /// Most rows per poll (1 to 1000).
    #[arg(long, value_name = "N")]
    batch_max: Option<u32>,
    /// A queue for rows that can never be published.
    #[arg(long, value_name = "QUEUE")]
    dlq: Option<String>,
    /// A column other than Debezium's default: ROLE=COLUMN, ROLE one of id, aggregate_type,
    /// aggregate_id, type, payload, headers, published_at, position. Repeat for several.
    #[arg(long = "column", value_name = "ROLE=COLUMN", value_parser = parse_tag)]
    columns: Vec<(String, String)>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List relays with their state.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice relay list\n  sluice relay list --json")]
struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
}

/// A relay by name.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice relay get orders\n  sluice relay resume orders\n  sluice relay delete orders"
)]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        RelayCommand::Create(args) => create(*args).await,
        RelayCommand::List(args) => list(args).await,
        RelayCommand::Get(args) => {
            let relay = args.client.client()?.get_relay(&args.name).await?;
            print_relay(&relay, args.client.json)
        }
        RelayCommand::Pause(args) => {
            let relay = args.client.client()?.pause_relay(&args.name).await?;
            done(&relay, args.client.json, "paused")
        }
        RelayCommand::Resume(args) => {
            let relay = args.client.client()?.resume_relay(&args.name).await?;
            done(&relay, args.client.json, "resumed")
        }
        RelayCommand::Delete(args) => {
            args.client.client()?.delete_relay(&args.name).await?;
            if !args.client.json {
                println!("deleted relay {} (its table is left as it is)", args.name);
            }
            Ok(())
        }
    }
}

fn columns(pairs: &[(String, String)]) -> Result<Option<RelayColumns>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut c = RelayColumns::default();
    for (role, column) in pairs {
        let slot = match role.as_str() {
            "id" => &mut c.id,
            "aggregate_type" => &mut c.aggregate_type,
            "aggregate_id" => &mut c.aggregate_id,
            "type" => &mut c.event_type,
            "payload" => &mut c.payload,
            "headers" => &mut c.headers,
            "published_at" => &mut c.published_at,
            "position" => &mut c.position,
            other => bail!(
                "--column {other}=...: the role is one of id, aggregate_type, aggregate_id, type, payload, headers, published_at, position"
            ),
        };
        *slot = Some(column.clone());
    }
    Ok(Some(c))
}

async fn create(args: CreateArgs) -> Result<()> {
    let request = CreateRelayRequest {
        name: args.name.clone(),
        source: args.source.clone(),
        table: args.table.clone(),
        columns: columns(&args.columns)?,
        target: RelayTarget { topic: args.topic.clone(), queue: args.queue.clone(), stream: args.stream.clone() },
        route_by: args.route_by.clone(),
        after_publish: args.mark.then_some(AfterPublish::Mark),
        poll_ms: args.poll_ms,
        batch_max: args.batch_max,
        dead_letter_queue: args.dlq.clone(),
    };
    let created = args.client.client()?.create_relay(&request).await?;
    if args.client.json {
        return output::json(&created.relay);
    }
    let r = &created.relay;
    if created.created {
        println!("created relay {} from {} table {} to {}", r.name, r.source, r.table, target(r));
    } else {
        println!("relay {} already exists with this configuration", r.name);
    }
    Ok(())
}

fn target(r: &Relay) -> String {
    let t = &r.target;
    match (&t.topic, &t.queue, &t.stream) {
        (Some(topic), _, _) => format!("topic {topic}"),
        (_, Some(queue), _) => format!("queue {queue}"),
        (_, _, Some(stream)) => format!("stream {stream}"),
        _ => "-".to_owned(),
    }
}

fn done(relay: &Relay, json: bool, what: &str) -> Result<()> {
    if json {
        return output::json(relay);
    }
    println!("{what} relay {}", relay.name);
    Ok(())
}

async fn list(args: ListArgs) -> Result<()> {
    let relays = args.client.client()?.list_all_relays().await?;
    if args.client.json {
        return output::json(&RelayList { relays, next_token: None });
    }
    output::print_rows(
        &relays,
        "no relays; create one with `sluice relay create NAME --source URL --table TABLE --topic TOPIC`",
        &["name", "state", "source", "table", "target", "lag", "published", "errors", "blocked"],
        &[5, 6, 7, 8],
        |r| {
            vec![
                r.name.clone(),
                r.status.state.clone(),
                r.source.clone(),
                r.table.clone(),
                target(r),
                output::age_ms(Some(r.status.lag_ms)),
                r.status.published.to_string(),
                r.status.errors.to_string(),
                r.status.blocked_rows.to_string(),
            ]
        },
    );
    Ok(())
}

fn print_relay(r: &Relay, json: bool) -> Result<()> {
    if json {
        return output::json(r);
    }
    let s = &r.status;
    let c = &r.columns;
    let column = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    output::print_table(&output::key_values(vec![
        ("name", r.name.clone()),
        ("state", s.state.clone()),
        ("active node", s.active_node.clone().unwrap_or_else(|| "-".to_owned())),
        ("source", format!("{} ({})", r.source, r.source_kind)),
        ("table", r.table.clone()),
        ("target", target(r)),
        ("route by", r.route_by.clone().unwrap_or_else(|| "-".to_owned())),
        ("after publish", format!("{:?}", r.after_publish).to_lowercase()),
        ("poll", output::duration_ms(r.poll_ms)),
        ("batch max", r.batch_max.to_string()),
        ("dead-letter queue", r.dead_letter_queue.clone().unwrap_or_else(|| "-".to_owned())),
        (
            "columns",
            format!(
                "id={} aggregate_type={} aggregate_id={} type={} payload={} position={}",
                column(&c.id),
                column(&c.aggregate_type),
                column(&c.aggregate_id),
                column(&c.event_type),
                column(&c.payload),
                column(&c.position)
            ),
        ),
        ("lag", output::duration_ms(s.lag_ms)),
        ("published", s.published.to_string()),
        ("dead-lettered", s.dead_lettered.to_string()),
        ("errors", s.errors.to_string()),
        ("blocked rows", s.blocked_rows.to_string()),
        ("rows/s", format!("{:.1}", s.rows_per_second)),
        ("last error", s.last_error.clone().unwrap_or_else(|| "-".to_owned())),
        ("last error at", s.last_error_at.clone().unwrap_or_else(|| "-".to_owned())),
        ("created at", r.created_at.clone()),
    ]));
    Ok(())
}

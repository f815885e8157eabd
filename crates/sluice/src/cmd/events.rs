//! `sluice events ...`: append events with an expected version, read a stream or `$all`, and
//! follow a durable subscription (fetch, print, checkpoint).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sluice_api::events::{
    AppendEventsRequest, CreateEventSubscriptionRequest, EventWire, ExpectedName, ExpectedVersionWire, NewEventWire,
    SubscriptionFrom, SubscriptionFromName,
};
use sluice_client::events::AllQuery;

use super::ClientArgs;
use crate::output;

/// The event store: append with optimistic concurrency, read streams and the global order.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice events append order-1 OrderPlaced '{\"total\": 42}' --expected-version no_stream\n  sluice events read order-1\n  sluice events read order-1 --backward --max 5\n  sluice events all --types OrderPlaced,OrderShipped --from 0\n  sluice events subscribe billing --from start --follow"
)]
pub struct Args {
    #[command(subcommand)]
    command: EventsCommand,
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    Append(AppendArgs),
    Read(ReadArgs),
    All(AllArgs),
    Subscribe(SubscribeArgs),
}

/// Append one event to a stream; prints its version and position. A mismatched
/// --expected-version fails (exit 1) with the stream's actual version, appending nothing.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice events append order-1 OrderPlaced '{\"total\": 42}' --expected-version no_stream\n  sluice events append order-1 OrderShipped '{}' --expected-version 0 --id 7f0c...\n  sluice events append order-1 Note '\"hello\"' --correlation-id req-9 --json"
)]
struct AppendArgs {
    /// The stream (one per aggregate, e.g. order-123).
    stream_id: String,
    /// The event's type.
    #[arg(value_name = "TYPE")]
    event_type: String,
    /// The event's data, as JSON.
    #[arg(value_name = "JSON")]
    data: String,
    /// any (default), no_stream, exists, or the stream's last version.
    #[arg(long, default_value = "any", value_name = "VERSION")]
    expected_version: String,
    /// The event id (default: a new UUID); the same id re-sent appends nothing twice.
    #[arg(long)]
    id: Option<String>,
    /// Metadata, as JSON.
    #[arg(long, value_name = "JSON")]
    metadata: Option<String>,
    #[arg(long)]
    correlation_id: Option<String>,
    #[arg(long)]
    causation_id: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Read one stream's events, forward from a version or backward from the end.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice events read order-1\n  sluice events read order-1 --from 10 --max 20\n  sluice events read order-1 --backward --max 1 --json"
)]
struct ReadArgs {
    stream_id: String,
    /// The first version to read (inclusive).
    #[arg(long, value_name = "VERSION")]
    from: Option<u64>,
    /// Newest first.
    #[arg(long)]
    backward: bool,
    /// At most this many events (1 to 1000).
    #[arg(long, default_value_t = 100)]
    max: u32,
    #[command(flatten)]
    client: ClientArgs,
}

/// Read every event in the global order ($all), filtered; --follow keeps tailing.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice events all\n  sluice events all --from 1000 --types OrderPlaced --stream-prefix order-\n  sluice events all --follow"
)]
struct AllArgs {
    /// The first position to read (inclusive).
    #[arg(long, default_value_t = 0, value_name = "POSITION")]
    from: u64,
    /// Events per read (1 to 1000).
    #[arg(long, default_value_t = 100)]
    max: u32,
    /// Only these types, comma-separated.
    #[arg(long, value_delimiter = ',')]
    types: Vec<String>,
    #[arg(long)]
    stream_prefix: Option<String>,
    #[arg(long)]
    correlation_id: Option<String>,
    /// Keep reading as events arrive (until interrupted).
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Create (or reuse) a durable subscription and print its next events, checkpointing each
/// batch after it was printed; --follow keeps going.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice events subscribe billing --from start\n  sluice events subscribe audit --from end --types OrderPlaced --follow\n  sluice events subscribe replay --from 1200 --no-checkpoint --json"
)]
struct SubscribeArgs {
    /// The subscription's name.
    name: String,
    /// start, end, or a position; used when the subscription is created.
    #[arg(long, default_value = "start")]
    from: String,
    #[arg(long, value_delimiter = ',')]
    types: Vec<String>,
    #[arg(long)]
    stream_prefix: Option<String>,
    /// Events per fetch (1 to 1000).
    #[arg(long, default_value_t = 100)]
    max: u32,
    /// Print without moving the checkpoint.
    #[arg(long)]
    no_checkpoint: bool,
    /// Keep fetching as events arrive (until interrupted).
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        EventsCommand::Append(a) => append(a).await,
        EventsCommand::Read(a) => read(a).await,
        EventsCommand::All(a) => all(a).await,
        EventsCommand::Subscribe(a) => subscribe(a).await,
    }
}

fn expected(text: &str) -> Result<ExpectedVersionWire> {
    Ok(match text {
        "any" => ExpectedVersionWire::Named(ExpectedName::Any),
        "no_stream" => ExpectedVersionWire::Named(ExpectedName::NoStream),
        "exists" => ExpectedVersionWire::Named(ExpectedName::Exists),
        n => ExpectedVersionWire::Version(
            n.parse().with_context(|| format!("--expected-version {n:?}: any, no_stream, exists or a number"))?,
        ),
    })
}

fn parse_json(flag: &str, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).with_context(|| format!("{flag} is not JSON: {text:?}"))
}

async fn append(args: AppendArgs) -> Result<()> {
    let event = NewEventWire {
        id: args.id,
        r#type: args.event_type,
        data: parse_json("the data", &args.data)?,
        metadata: args.metadata.as_deref().map(|m| parse_json("--metadata", m)).transpose()?,
        correlation_id: args.correlation_id,
        causation_id: args.causation_id,
    };
    let request = AppendEventsRequest { expected_version: expected(&args.expected_version)?, events: vec![event] };
    let client = args.client.client()?;
    let done = match client.append_events(&args.stream_id, &request).await {
        Ok(done) => done,
        Err(e) => match sluice_client::events::actual_version(&e) {
            Some(actual) => bail!(
                "{} is at {}, not {}; nothing was appended",
                args.stream_id,
                actual.map_or("no_stream".to_owned(), |v| format!("version {v}")),
                args.expected_version
            ),
            None => return Err(e.into()),
        },
    };
    if args.client.json {
        return output::json(&done);
    }
    output::print_table(&output::key_values(vec![
        ("version", done.last_version.to_string()),
        ("position", done.last_position.to_string()),
    ]));
    Ok(())
}

fn print_events(events: &[EventWire]) {
    output::print_rows(events, "no events", &["position", "stream", "version", "type", "time", "data"], &[0, 2], |e| {
        let mut data = e.data.to_string();
        if data.chars().count() > 60 {
            data = data.chars().take(59).collect::<String>() + "…";
        }
        vec![e.position.to_string(), e.stream_id.clone(), e.version.to_string(), e.r#type.clone(), e.time.clone(), data]
    });
}

async fn read(args: ReadArgs) -> Result<()> {
    let client = args.client.client()?;
    let got = client.read_events(&args.stream_id, args.from, args.backward, Some(args.max)).await?;
    if args.client.json {
        return output::json(&got);
    }
    print_events(&got.events);
    Ok(())
}

async fn all(args: AllArgs) -> Result<()> {
    let client = args.client.client()?;
    let mut q = AllQuery {
        from_position: Some(args.from),
        max: Some(args.max),
        types: args.types,
        stream_prefix: args.stream_prefix,
        correlation_id: args.correlation_id,
        wait_ms: args.follow.then_some(10_000),
    };
    loop {
        let got = client.read_all_events(&q).await?;
        if args.client.json {
            output::json(&got)?;
        } else if !got.events.is_empty() || !args.follow {
            print_events(&got.events);
        }
        if !args.follow {
            return Ok(());
        }
        q.from_position = Some(got.next_position);
    }
}

async fn subscribe(args: SubscribeArgs) -> Result<()> {
    let from = match args.from.as_str() {
        "start" => SubscriptionFrom::Named(SubscriptionFromName::Start),
        "end" => SubscriptionFrom::Named(SubscriptionFromName::End),
        n => SubscriptionFrom::Position {
            position: n.parse().with_context(|| format!("--from {n:?}: start, end or a position"))?,
        },
    };
    let client = args.client.client()?;
    let request = CreateEventSubscriptionRequest {
        name: args.name.clone(),
        from,
        types: args.types,
        stream_prefix: args.stream_prefix,
    };
    let sub = client.create_event_subscription(&request).await?.value;
    let mut checkpoint = sub.checkpoint;
    loop {
        let wait = args.follow.then_some(10_000);
        let got = client.fetch_events(&args.name, Some(args.max), wait).await?;
        if args.client.json {
            output::json(&got)?;
        } else if !got.events.is_empty() || !args.follow {
            print_events(&got.events);
        }
        // The checkpoint is the last position handled: after a filtered fetch that passed
        // over events, the last one looked at, so they are not looked at again.
        let last = got.next_position.checked_sub(1).filter(|&l| l >= sub.start_position);
        if !args.no_checkpoint
            && let Some(last) = last
            && checkpoint.is_none_or(|c| c < last)
        {
            checkpoint = client.checkpoint_events(&args.name, last).await?.checkpoint;
        }
        if !args.follow {
            return Ok(());
        }
        if got.events.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

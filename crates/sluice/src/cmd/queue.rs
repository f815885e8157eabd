//! `sluice queue ...`: create, list, inspect, change, delete and purge queues.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::Subcommand;
use sluice_api::{CreateQueueRequest, DeadLetter, Overflow, Queue, RateLimit, UpdateQueueRequest};

use super::{ClientArgs, parse_duration_ms, parse_tag};
use crate::output;

/// Create, list, inspect, change, delete and purge queues.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice queue create jobs --dlq jobs-dlq --max-receive-count 5\n  sluice queue list --prefix jobs\n  sluice queue get jobs"
)]
pub struct Args {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    Create(CreateArgs),
    List(ListArgs),
    Get(NameArgs),
    Update(UpdateArgs),
    Delete(DeleteArgs),
    Purge(PurgeArgs),
}

/// Queue attributes as flags; anything left out keeps its default (create) or current value
/// (update).
#[derive(Debug, clap::Args)]
struct AttributeArgs {
    /// How long a received message stays hidden from other consumers.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    visibility_timeout: Option<u64>,
    /// Delay applied to every message sent without its own.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    delay: Option<u64>,
    /// How long a message is kept before it is dropped unreceived.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    retention: Option<u64>,
    /// Largest message (body plus attributes), in bytes.
    #[arg(long, value_name = "BYTES")]
    message_bytes_max: Option<u64>,
    /// Default long-poll wait of a receive that does not give one.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    receive_wait: Option<u64>,
    /// Dead-letter queue that takes messages received more than --max-receive-count times.
    #[arg(long, value_name = "QUEUE")]
    dlq: Option<String>,
    /// Receives after which a message moves to the dead-letter queue (1 to 1000).
    #[arg(long, value_name = "N")]
    max_receive_count: Option<u32>,
    /// A tag; repeat for several. On update, the given tags replace all current ones.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
    /// Check every send against the schema registered for its type and version
    /// (`sluice schema register`): `true` or `false`.
    #[arg(long, value_name = "BOOL")]
    schema_validation: Option<bool>,
    /// Most messages the queue holds (visible, delayed and in flight); a send past it follows
    /// --overflow. On update, `none` removes the bound.
    #[arg(long, value_name = "N|none", value_parser = parse_bound)]
    max_depth_messages: Option<Bound>,
    /// Most bytes (bodies and attributes) the queue holds, at least --message-bytes-max. On
    /// update, `none` removes the bound.
    #[arg(long, value_name = "BYTES|none", value_parser = parse_bound)]
    max_depth_bytes: Option<Bound>,
    /// What a send into a full queue does: `reject` (429 queue_full, the default),
    /// `drop-head` (the oldest messages move to the DLQ) or `reject-to-dlq` (the new message
    /// goes to the DLQ). The last two need --dlq.
    #[arg(long, value_name = "POLICY", value_parser = ["reject", "drop-head", "reject-to-dlq"])]
    overflow: Option<String>,
    /// Move messages whose retention ran out to the DLQ instead of deleting them (needs
    /// --dlq): `true` or `false`.
    #[arg(long, value_name = "BOOL")]
    expired_to_dlq: Option<bool>,
    /// A token bucket on sends: `PER_SECOND` (burst the same) or `PER_SECOND/BURST`, e.g.
    /// `100/500`; past it entries are refused as rate_limited. On update, `none` removes it.
    #[arg(long, value_name = "PER_SECOND[/BURST]|none", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<RateLimit>>,
}

/// `PER_SECOND`, `PER_SECOND/BURST` or `none`.
pub(crate) fn parse_rate_limit(text: &str) -> Result<Bound<RateLimit>, String> {
    if text == "none" {
        return Ok(Bound(None));
    }
    let number = |t: &str| t.parse::<u64>().map_err(|_| format!("{t:?} is not a number"));
    let (per_second, burst) = match text.split_once('/') {
        Some((rate, burst)) => (number(rate)?, number(burst)?),
        None => (number(text)?, number(text)?),
    };
    Ok(Bound(Some(RateLimit { per_second, burst })))
}

/// A flag that sets a bound or, with `none`, removes it. (A newtype, because clap reads a
/// field of `Option<Option<_>>` as a flag whose value may be left out.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound<T = u64>(pub(crate) Option<T>);

/// A depth bound: a number, or `none` for no bound.
pub(crate) fn parse_bound(text: &str) -> Result<Bound, String> {
    if text == "none" {
        return Ok(Bound(None));
    }
    text.parse().map(|n| Bound(Some(n))).map_err(|_| format!("{text:?} is not a number or `none`"))
}

impl AttributeArgs {
    fn overflow(&self) -> Option<Overflow> {
        self.overflow.as_deref().map(|o| match o {
            "drop-head" => Overflow::DropHead,
            "reject-to-dlq" => Overflow::RejectToDlq,
            _ => Overflow::Reject,
        })
    }

    fn tags(&self) -> Option<BTreeMap<String, String>> {
        (!self.tags.is_empty()).then(|| self.tags.iter().cloned().collect())
    }
}

/// Create a queue (succeeds without change if an identical one exists).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice queue create jobs\n  sluice queue create jobs-dlq --retention 14d\n  sluice queue create jobs --dlq jobs-dlq --max-receive-count 5\n  sluice queue create jobs --visibility-timeout 1m --tag team=billing\n  sluice queue create events --max-depth-messages 100000 --overflow drop-head --dlq events-dlq --max-receive-count 5"
)]
struct CreateArgs {
    /// Queue name: letters, digits, `-` and `_`, up to 80 characters.
    name: String,
    #[command(flatten)]
    attributes: AttributeArgs,
    /// Make it a FIFO queue (strict order per message group; every send needs --group).
    #[arg(long)]
    fifo: bool,
    /// FIFO: deduplicate sends without --dedup-id by the SHA-256 of their body.
    #[arg(long, requires = "fifo")]
    content_based_dedup: bool,
    /// FIFO: how long a dedup id is remembered (default 5m).
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_ms, requires = "fifo")]
    dedup_window: Option<u64>,
    /// FIFO: dedup ids are unique per queue (default) or per message group.
    #[arg(long, value_name = "SCOPE", value_parser = ["queue", "message-group"], requires = "fifo")]
    dedup_scope: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List queues with their live counts (all pages).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice queue list\n  sluice queue list --prefix billing- --json")]
struct ListArgs {
    /// Only queues whose names start with this.
    #[arg(long)]
    prefix: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Show a queue's attributes and live counts.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice queue get jobs")]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Change a queue's attributes; flags left out keep their current value.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice queue update jobs --visibility-timeout 5m\n  sluice queue update jobs --max-receive-count 10\n  sluice queue update jobs --no-dlq"
)]
struct UpdateArgs {
    name: String,
    #[command(flatten)]
    attributes: AttributeArgs,
    /// Remove the dead-letter policy.
    #[arg(long, conflicts_with_all = ["dlq", "max_receive_count"])]
    no_dlq: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Delete a queue and every message in it.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice queue delete jobs")]
struct DeleteArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Delete every message in a queue, keeping the queue.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice queue purge jobs")]
struct PurgeArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        QueueCommand::Create(args) => create(args).await,
        QueueCommand::List(args) => list(args).await,
        QueueCommand::Get(args) => get(args).await,
        QueueCommand::Update(args) => update(args).await,
        QueueCommand::Delete(args) => delete(args).await,
        QueueCommand::Purge(args) => purge(args).await,
    }
}

async fn create(args: CreateArgs) -> Result<()> {
    let a = &args.attributes;
    let dead_letter = match (&a.dlq, a.max_receive_count) {
        (Some(queue), Some(max_receive_count)) => Some(DeadLetter { queue: queue.clone(), max_receive_count }),
        (None, None) => None,
        (Some(_), None) => bail!("--dlq needs --max-receive-count: how many receives before a message moves there"),
        (None, Some(_)) => bail!("--max-receive-count needs --dlq: the queue messages move to"),
    };
    let request = CreateQueueRequest {
        name: args.name.clone(),
        visibility_timeout_ms: a.visibility_timeout,
        delay_ms: a.delay,
        retention_ms: a.retention,
        message_bytes_max: a.message_bytes_max,
        receive_wait_ms: a.receive_wait,
        dead_letter,
        fifo: args.fifo.then_some(true),
        content_based_dedup: args.content_based_dedup.then_some(true),
        dedup_window_ms: args.dedup_window,
        dedup_scope: args.dedup_scope.as_deref().map(|s| {
            if s == "message-group" { sluice_api::DedupScope::MessageGroup } else { sluice_api::DedupScope::Queue }
        }),
        tags: a.tags(),
        schema_validation: a.schema_validation,
        max_depth_messages: a.max_depth_messages.and_then(|b| b.0),
        max_depth_bytes: a.max_depth_bytes.and_then(|b| b.0),
        overflow: a.overflow(),
        expired_to_dlq: a.expired_to_dlq,
        rate_limit: a.rate_limit.and_then(|b| b.0),
    };
    let created = args.client.client()?.create_queue(&request).await?;
    if args.client.json {
        return output::json(&created.queue);
    }
    if created.created {
        println!("created queue {}", created.queue.name);
    } else {
        println!("queue {} already exists with these attributes", created.queue.name);
    }
    Ok(())
}

async fn list(args: ListArgs) -> Result<()> {
    let queues = args.client.client()?.list_all_queues(args.prefix.as_deref()).await?;
    if args.client.json {
        return output::json(&sluice_api::QueueList { queues, next_token: None });
    }
    output::print_rows(
        &queues,
        "no queues; create one with `sluice queue create NAME`",
        &["name", "visible", "in flight", "delayed", "oldest age", "dlq depth", "max depth", "refused"],
        &[1, 2, 3, 4, 5, 6, 7],
        |q| {
            vec![
                q.name.clone(),
                q.counts.visible.to_string(),
                q.counts.in_flight.to_string(),
                q.counts.delayed.to_string(),
                output::age_ms(q.counts.oldest_age_ms),
                output::count(q.counts.dlq_depth),
                output::count(q.max_depth_messages),
                refused(&q.counts.refusals).to_string(),
            ]
        },
    );
    Ok(())
}

async fn get(args: NameArgs) -> Result<()> {
    let queue = args.client.client()?.get_queue(&args.name).await?;
    print_queue(&queue, args.client.json)
}

async fn update(args: UpdateArgs) -> Result<()> {
    let client = args.client.client()?;
    let a = &args.attributes;
    let dead_letter = if args.no_dlq {
        Some(None)
    } else {
        match (&a.dlq, a.max_receive_count) {
            (Some(queue), Some(max_receive_count)) => {
                Some(Some(DeadLetter { queue: queue.clone(), max_receive_count }))
            }
            (None, None) => None,
            // One half of the policy given: keep the other half from the queue as it is.
            (queue, count) => {
                let current = client.get_queue(&args.name).await?.dead_letter;
                let queue = queue.clone().or_else(|| current.as_ref().map(|d| d.queue.clone()));
                let count = count.or(current.map(|d| d.max_receive_count));
                match (queue, count) {
                    (Some(queue), Some(max_receive_count)) => Some(Some(DeadLetter { queue, max_receive_count })),
                    _ => bail!(
                        "queue {} has no dead-letter policy yet; give both --dlq and --max-receive-count",
                        args.name
                    ),
                }
            }
        }
    };
    let request = UpdateQueueRequest {
        visibility_timeout_ms: a.visibility_timeout,
        delay_ms: a.delay,
        retention_ms: a.retention,
        message_bytes_max: a.message_bytes_max,
        receive_wait_ms: a.receive_wait,
        dead_letter,
        content_based_dedup: None,
        dedup_window_ms: None,
        tags: a.tags(),
        schema_validation: a.schema_validation,
        max_depth_messages: a.max_depth_messages.map(|b| b.0),
        max_depth_bytes: a.max_depth_bytes.map(|b| b.0),
        overflow: a.overflow(),
        expired_to_dlq: a.expired_to_dlq,
        rate_limit: a.rate_limit.map(|b| b.0),
    };
    if request == UpdateQueueRequest::default() {
        bail!("nothing to change: give at least one attribute flag (see `sluice queue update --help`)");
    }
    let queue = client.update_queue(&args.name, &request).await?;
    print_queue(&queue, args.client.json)
}

async fn delete(args: DeleteArgs) -> Result<()> {
    args.client.client()?.delete_queue(&args.name).await?;
    // The API answers 204 without a body, so --json prints nothing either.
    if !args.client.json {
        println!("deleted queue {}", args.name);
    }
    Ok(())
}

async fn purge(args: PurgeArgs) -> Result<()> {
    let purged = args.client.client()?.purge_queue(&args.name).await?;
    if args.client.json {
        return output::json(&purged);
    }
    println!("purged {} messages from {}", purged.purged, args.name);
    Ok(())
}

fn print_queue(q: &Queue, json: bool) -> Result<()> {
    if json {
        return output::json(q);
    }
    let dead_letter = match &q.dead_letter {
        Some(d) => format!("{} after {} receives", d.queue, d.max_receive_count),
        None => "-".to_owned(),
    };
    output::print_table(&output::key_values(vec![
        ("name", q.name.clone()),
        ("fifo", q.fifo.to_string()),
        ("visibility timeout", output::duration_ms(q.visibility_timeout_ms)),
        ("delay", output::duration_ms(q.delay_ms)),
        ("retention", output::duration_ms(q.retention_ms)),
        ("message bytes max", q.message_bytes_max.to_string()),
        ("receive wait", output::duration_ms(q.receive_wait_ms)),
        ("dead letter", dead_letter),
        ("tags", output::pairs(&q.tags)),
        ("schema validation", if q.schema_validation { "on" } else { "off" }.to_owned()),
        ("created at", q.created_at.clone()),
        ("visible", q.counts.visible.to_string()),
        ("in flight", q.counts.in_flight.to_string()),
        ("delayed", q.counts.delayed.to_string()),
        ("oldest age", output::age_ms(q.counts.oldest_age_ms)),
        ("dlq depth", output::count(q.counts.dlq_depth)),
        ("max depth messages", output::count(q.max_depth_messages)),
        ("max depth bytes", output::count(q.max_depth_bytes)),
        ("overflow", overflow_name(q.overflow).to_owned()),
        ("expiry to dlq", if q.expired_to_dlq { "on" } else { "off" }.to_owned()),
        ("rate limit", q.rate_limit.map_or("-".to_owned(), |r| format!("{}/s, burst {}", r.per_second, r.burst))),
        ("depth bytes", q.counts.depth_bytes.to_string()),
        ("refused full", q.counts.refusals.queue_full.to_string()),
        ("dropped to dlq", q.counts.refusals.drop_head.to_string()),
        ("rejected to dlq", q.counts.refusals.rejected_to_dlq.to_string()),
        ("expired to dlq", q.counts.refusals.expired_to_dlq.to_string()),
        ("refused rate", q.counts.refusals.rate_limited.to_string()),
    ]));
    Ok(())
}

/// Every message the queue's limits kept out of it or moved out of it.
fn refused(r: &sluice_api::Refusals) -> u64 {
    r.queue_full + r.drop_head + r.rejected_to_dlq + r.expired_to_dlq + r.rate_limited
}

fn overflow_name(o: Overflow) -> &'static str {
    match o {
        Overflow::Reject => "reject",
        Overflow::DropHead => "drop-head",
        Overflow::RejectToDlq => "reject-to-dlq",
    }
}

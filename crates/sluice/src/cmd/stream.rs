//! `sluice stream ...`: create, list, inspect, change and delete streams; append and read records
//! (`read --follow` keeps reading as records arrive, `tail` shows the last ones); consumer
//! groups (`stream group create|list|get|seek`).

use std::io::{BufRead, Read};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine;
use clap::Subcommand;
use sluice_api::{
    AppendRecord, CreateGroupRequest, CreateStreamRequest, GroupMode, GroupStart, RateLimit, SeekRequest, StartName,
    Stream, StreamGroup, StreamRecord, UpdateStreamRequest,
};
use sluice_client::streams::From;

use super::queue::{Bound, parse_bound, parse_rate_limit};
use super::{ClientArgs, parse_duration_ms, parse_tag};
use crate::output;

/// Partitioned, replayable logs: append records, read them from any offset or time, and
/// consume them in groups.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream create orders --partitions 8 --retention 7d\n  sluice stream append orders '{\"id\": 7}' --key customer-42\n  sluice stream read orders --partition 3 --from-offset 0\n  sluice stream read orders --follow\n  sluice stream group create orders billing --start earliest\n  sluice stream get orders"
)]
pub struct Args {
    #[command(subcommand)]
    command: StreamCommand,
}

#[derive(Debug, Subcommand)]
enum StreamCommand {
    Create(CreateArgs),
    List(ListArgs),
    Get(NameArgs),
    Update(UpdateArgs),
    Delete(NameArgs),
    Append(AppendArgs),
    Read(ReadArgs),
    Tail(TailArgs),
    #[command(subcommand)]
    Group(GroupCommand),
}

/// Create a stream (succeeds without change if an identical one exists).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream create orders\n  sluice stream create clicks --partitions 16 --retention 1d --retention-bytes 10000000000"
)]
struct CreateArgs {
    /// 1 to 80 letters, digits, `-`, `_` and `.`.
    name: String,
    /// 1 to 1024 [default: 1].
    #[arg(long)]
    partitions: Option<u32>,
    /// Remove records older than this, a segment at a time [default: 7d].
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    retention: Option<u64>,
    /// Per partition, remove old segments while the rest holds this many bytes [default: none].
    #[arg(long, value_name = "BYTES")]
    retention_bytes: Option<u64>,
    /// Largest record [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    record_bytes_max: Option<u64>,
    /// Roll a segment once it holds this much [default: 67108864].
    #[arg(long, value_name = "BYTES")]
    segment_bytes: Option<u64>,
    /// Check every appended record against the schema registered for its type and version
    /// (`sluice schema register`): `true` or `false` [default: false].
    #[arg(long, value_name = "BOOL")]
    schema_validation: Option<bool>,
    /// A token bucket on appends, shared by every node: `PER_SECOND` (burst the same) or
    /// `PER_SECOND/BURST`, e.g. `1000/5000`; past it records are refused as rate_limited.
    #[arg(long, value_name = "PER_SECOND[/BURST]", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<RateLimit>>,
    /// Most records the whole stream keeps; appends past it are refused as queue_full until
    /// retention makes room.
    #[arg(long, value_name = "N", value_parser = parse_bound)]
    max_depth_messages: Option<Bound>,
    /// Most bytes the whole stream keeps (at least --record-bytes-max + 4 KiB); appends past it
    /// are refused as queue_full.
    #[arg(long, value_name = "BYTES", value_parser = parse_bound)]
    max_depth_bytes: Option<Bound>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Change a stream's settings; those not given keep their current values.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sluice stream update orders --schema-validation true
  sluice stream update orders --retention 30d --partitions 16
  sluice stream update orders --rate-limit 1000/5000
  sluice stream update orders --max-depth-messages 1000000")]
struct UpdateArgs {
    name: String,
    /// More partitions (they can only grow; keys then map to other partitions, as in Kafka).
    #[arg(long)]
    partitions: Option<u32>,
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    retention: Option<u64>,
    #[arg(long, value_name = "BYTES")]
    record_bytes_max: Option<u64>,
    /// Check every appended record against its type's schema: `true` or `false`. Other nodes
    /// see the change within a second.
    #[arg(long, value_name = "BOOL")]
    schema_validation: Option<bool>,
    /// A token bucket on appends: `PER_SECOND`, `PER_SECOND/BURST`, or `none` to remove it.
    #[arg(long, value_name = "PER_SECOND[/BURST]|none", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<RateLimit>>,
    /// Most records the whole stream keeps, or `none` to remove the bound.
    #[arg(long, value_name = "N|none", value_parser = parse_bound)]
    max_depth_messages: Option<Bound>,
    /// Most bytes the whole stream keeps, or `none` to remove the bound.
    #[arg(long, value_name = "BYTES|none", value_parser = parse_bound)]
    max_depth_bytes: Option<Bound>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List streams (all pages).
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Only streams whose names start with this.
    #[arg(long)]
    prefix: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// A stream by name.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice stream get orders\n  sluice stream delete orders")]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Append records and print where each went.
///
/// The body is BODY, or standard input with --stdin (one record, or one per line with --lines).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream append orders 'hello'\n  sluice stream append orders '{\"total\": 3}' --key customer-7 --header source=web --type order.created\n  seq 1 1000 | sluice stream append orders --stdin --lines"
)]
struct AppendArgs {
    stream: String,
    #[arg(required_unless_present = "stdin", conflicts_with = "stdin")]
    body: Option<String>,
    #[arg(long)]
    stdin: bool,
    /// With --stdin: one record per line.
    #[arg(long, requires = "stdin")]
    lines: bool,
    /// The key: records with one key go to one partition (Kafka's partitioner).
    #[arg(long)]
    key: Option<String>,
    /// An explicit partition.
    #[arg(long)]
    partition: Option<u32>,
    /// A header; repeat for several.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_tag)]
    headers: Vec<(String, String)>,
    /// The record's type: on a stream with schema validation, the schema its body must pass.
    #[arg(long = "type", value_name = "TYPE")]
    record_type: Option<String>,
    /// The schema version to check against (the header `sluice.version`); default: the latest.
    #[arg(long = "version", value_name = "N", requires = "record_type")]
    schema_version: Option<u32>,
    #[arg(long)]
    correlation_id: Option<String>,
    /// A retry with the same id within 5 minutes is appended once.
    #[arg(long)]
    dedup_id: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Read a partition from an offset or a time; with --follow, keep reading as records arrive.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream read orders\n  sluice stream read orders --partition 2 --from-offset 1000 --max 50\n  sluice stream read orders --since 10m\n  sluice stream read orders --follow"
)]
struct ReadArgs {
    stream: String,
    #[arg(long, default_value_t = 0)]
    partition: u32,
    /// The first offset [default: the first kept record].
    #[arg(long, conflicts_with = "since")]
    from_offset: Option<u64>,
    /// Start this long ago (e.g. 10m, 2h).
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    since: Option<u64>,
    /// Most records per request.
    #[arg(long, default_value_t = 100)]
    max: u32,
    /// Keep reading: wait for new records at the end, print them as they arrive (Ctrl-C stops).
    #[arg(long, short = 'f')]
    follow: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// The last records of a partition; --follow keeps printing new ones.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream tail orders\n  sluice stream tail orders --partition 3 -n 50 --follow"
)]
struct TailArgs {
    stream: String,
    #[arg(long, default_value_t = 0)]
    partition: u32,
    /// How many of the last records.
    #[arg(short = 'n', long, default_value_t = 10)]
    lines: u64,
    #[arg(long, short = 'f')]
    follow: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// Consumer groups.
#[derive(Debug, Subcommand)]
enum GroupCommand {
    Create(GroupCreateArgs),
    List(NameArgs),
    Get(GroupArgs),
    Seek(GroupSeekArgs),
}

/// Create a consumer group.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream group create orders billing\n  sluice stream group create orders audit --start latest\n  sluice stream group create orders workers --mode shared --key-ordered --dlq orders-dlq --max-deliveries 5"
)]
struct GroupCreateArgs {
    stream: String,
    name: String,
    /// `offsets` (partitions shared among members, commits) or `shared` (receipts, acks).
    #[arg(long, default_value = "offsets", value_parser = ["offsets", "shared"])]
    mode: String,
    /// `earliest`, `latest`, or an offset.
    #[arg(long, default_value = "earliest")]
    start: String,
    /// Offsets mode: members silent this long lose their partitions.
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    session_timeout: Option<u64>,
    /// Shared mode: how long a delivered record is held.
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    ack_timeout: Option<u64>,
    /// Shared mode: failed deliveries before the dead-letter queue.
    #[arg(long)]
    max_deliveries: Option<u32>,
    /// Shared mode: the dead-letter queue (must exist).
    #[arg(long, value_name = "QUEUE")]
    dlq: Option<String>,
    /// Shared mode: one record per key out at once, in order.
    #[arg(long)]
    key_ordered: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// A group by name.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice stream group get orders billing")]
struct GroupArgs {
    stream: String,
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Set where a group reads a partition from (the only way back): an offset or a time.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice stream group seek orders billing --partition 0 --offset 0\n  sluice stream group seek orders billing --partition 0 --since 1h"
)]
struct GroupSeekArgs {
    stream: String,
    name: String,
    #[arg(long)]
    partition: u32,
    #[arg(long, required_unless_present = "since", conflicts_with = "since")]
    offset: Option<u64>,
    /// This long ago.
    #[arg(long, value_parser = parse_duration_ms, value_name = "DURATION")]
    since: Option<u64>,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        StreamCommand::Create(a) => create(a).await,
        StreamCommand::List(a) => list(a).await,
        StreamCommand::Get(a) => get(a).await,
        StreamCommand::Update(a) => update(a).await,
        StreamCommand::Delete(a) => delete(a).await,
        StreamCommand::Append(a) => append(a).await,
        StreamCommand::Read(a) => read(a).await,
        StreamCommand::Tail(a) => tail(a).await,
        StreamCommand::Group(GroupCommand::Create(a)) => group_create(a).await,
        StreamCommand::Group(GroupCommand::List(a)) => group_list(a).await,
        StreamCommand::Group(GroupCommand::Get(a)) => group_get(a).await,
        StreamCommand::Group(GroupCommand::Seek(a)) => group_seek(a).await,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

async fn create(a: CreateArgs) -> Result<()> {
    let request = CreateStreamRequest {
        name: a.name.clone(),
        partitions: a.partitions,
        retention_ms: a.retention,
        retention_bytes: a.retention_bytes,
        record_bytes_max: a.record_bytes_max,
        segment_bytes: a.segment_bytes,
        schema_validation: a.schema_validation,
        rate_limit: a.rate_limit.and_then(|b| b.0),
        max_depth_messages: a.max_depth_messages.and_then(|b| b.0),
        max_depth_bytes: a.max_depth_bytes.and_then(|b| b.0),
        overflow: None,
    };
    let created = a.client.client()?.create_stream(&request).await?;
    if a.client.json {
        return output::json(&created.value);
    }
    let verb = if created.created { "created" } else { "already exists with these settings:" };
    println!("stream {} {verb} ({} partitions)", created.value.name, created.value.partitions);
    Ok(())
}

async fn list(a: ListArgs) -> Result<()> {
    let streams = a.client.client()?.list_all_streams(a.prefix.as_deref()).await?;
    if a.client.json {
        return output::json(&streams);
    }
    output::print_rows(
        &streams,
        "no streams; create one with `sluice stream create NAME`",
        &["name", "partitions", "records", "bytes", "groups", "lag", "retention"],
        &[1, 2, 3, 4, 5],
        |s| {
            let records: u64 = s.partition_details.iter().map(|p| p.next_offset - p.first_offset).sum();
            let bytes: u64 = s.partition_details.iter().map(|p| p.bytes).sum();
            vec![
                s.name.clone(),
                s.partitions.to_string(),
                records.to_string(),
                bytes.to_string(),
                s.groups.len().to_string(),
                s.groups.iter().map(|g| g.lag).sum::<u64>().to_string(),
                output::duration_ms(s.retention_ms),
            ]
        },
    );
    Ok(())
}

fn print_stream(s: &Stream) {
    output::print_table(&output::key_values(vec![
        ("name", s.name.clone()),
        ("partitions", s.partitions.to_string()),
        ("retention", output::duration_ms(s.retention_ms)),
        ("retention bytes", s.retention_bytes.map_or_else(|| "-".to_owned(), |b| b.to_string())),
        ("record bytes max", s.record_bytes_max.to_string()),
        ("segment bytes", s.segment_bytes.to_string()),
        ("schema validation", s.schema_validation.to_string()),
        ("rate limit", s.rate_limit.map_or("-".to_owned(), |r| format!("{}/s, burst {}", r.per_second, r.burst))),
        ("depth", format!("{} records, {} bytes", s.depth_messages, s.depth_bytes)),
        ("max depth messages", output::count(s.max_depth_messages)),
        ("max depth bytes", output::count(s.max_depth_bytes)),
        ("created at", s.created_at.clone()),
    ]));
    println!();
    let mut t = output::table(&["partition", "first offset", "next offset", "bytes"], &[0, 1, 2, 3]);
    for p in &s.partition_details {
        t.add_row(vec![
            p.partition.to_string(),
            p.first_offset.to_string(),
            p.next_offset.to_string(),
            p.bytes.to_string(),
        ]);
    }
    output::print_table(&t);
    if !s.groups.is_empty() {
        println!();
        print_groups(&s.groups);
    }
}

fn print_groups(groups: &[StreamGroup]) {
    let mut t = output::table(&["group", "mode", "members", "generation", "lag", "in flight"], &[2, 3, 4, 5]);
    for g in groups {
        let mode = if g.mode == GroupMode::Shared { "shared" } else { "offsets" };
        t.add_row(vec![
            g.name.clone(),
            mode.to_owned(),
            g.members.len().to_string(),
            output::count(g.generation),
            g.lag.to_string(),
            output::count(g.in_flight),
        ]);
    }
    output::print_table(&t);
}

async fn get(a: NameArgs) -> Result<()> {
    let s = a.client.client()?.get_stream(&a.name).await?;
    if a.client.json {
        return output::json(&s);
    }
    print_stream(&s);
    Ok(())
}

async fn update(a: UpdateArgs) -> Result<()> {
    let request = UpdateStreamRequest {
        partitions: a.partitions,
        retention_ms: a.retention,
        record_bytes_max: a.record_bytes_max,
        schema_validation: a.schema_validation,
        rate_limit: a.rate_limit.map(|b| b.0),
        max_depth_messages: a.max_depth_messages.map(|b| b.0),
        max_depth_bytes: a.max_depth_bytes.map(|b| b.0),
        ..Default::default()
    };
    if request == UpdateStreamRequest::default() {
        bail!("nothing to change: give at least one setting flag (see `sluice stream update --help`)");
    }
    let s = a.client.client()?.update_stream(&a.name, &request).await?;
    if a.client.json {
        return output::json(&s);
    }
    print_stream(&s);
    Ok(())
}

async fn delete(a: NameArgs) -> Result<()> {
    a.client.client()?.delete_stream(&a.name).await?;
    if !a.client.json {
        println!("deleted stream {}", a.name);
    }
    Ok(())
}

async fn append(a: AppendArgs) -> Result<()> {
    let bodies: Vec<String> = match (&a.body, a.stdin, a.lines) {
        (Some(b), _, _) => vec![b.clone()],
        (None, true, true) => {
            std::io::stdin().lock().lines().collect::<std::io::Result<_>>().context("reading standard input")?
        }
        (None, _, _) => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
            vec![text]
        }
    };
    if bodies.is_empty() {
        bail!("nothing to append: standard input was empty");
    }
    let client = a.client.client()?;
    let mut all = Vec::new();
    for chunk in bodies.chunks(sluice_core::stream::limits::APPEND_RECORDS_MAX) {
        let records = chunk
            .iter()
            .map(|body| AppendRecord {
                key: a.key.clone(),
                partition: a.partition,
                body: Some(body.clone()),
                headers: a.headers.iter().cloned().collect(),
                record_type: a.record_type.clone(),
                version: a.schema_version.map(|v| v.to_string()),
                correlation_id: a.correlation_id.clone(),
                dedup_id: if chunk.len() == 1 { a.dedup_id.clone() } else { None },
                ..Default::default()
            })
            .collect();
        all.extend(client.append(&a.stream, records).await?);
    }
    let failed = all.iter().filter(|r| r.error.is_some()).count();
    if a.client.json {
        output::json(&all)?;
    } else {
        let mut t = output::table(&["partition", "offset", "timestamp", "result"], &[0, 1]);
        for r in &all {
            let result = match (&r.error, r.duplicate) {
                (Some(e), _) => format!("{} ({})", e.message, e.code),
                (None, true) => "duplicate (the original's place)".to_owned(),
                (None, false) => "appended".to_owned(),
            };
            t.add_row(vec![
                output::count(r.partition.map(u64::from)),
                output::count(r.offset),
                output::count(r.timestamp_ms),
                result,
            ]);
        }
        output::print_table(&t);
    }
    if failed > 0 {
        bail!("{failed} of {} records were refused", all.len());
    }
    Ok(())
}

fn record_body(r: &StreamRecord) -> String {
    match (&r.body, &r.body_base64) {
        (Some(text), _) => text.replace('\n', "\\n"),
        (None, Some(b64)) => {
            let len = base64::engine::general_purpose::STANDARD.decode(b64).map_or(0, |b| b.len());
            format!("<{len} bytes binary>")
        }
        _ => String::new(),
    }
}

fn print_records(records: &[StreamRecord], json: bool) -> Result<()> {
    if json {
        for r in records {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    for r in records {
        let key = r
            .key
            .clone()
            .or_else(|| r.key_base64.as_ref().map(|k| format!("base64:{k}")))
            .unwrap_or_else(|| "-".into());
        println!("{:>3} {:>10}  {}  {key}  {}", r.partition, r.offset, r.timestamp, record_body(r));
    }
    Ok(())
}

/// Reads from `from`, printing as it goes; with `follow`, long-polls at the end forever.
async fn read_loop(a: &ClientArgs, stream: &str, partition: u32, mut from: From, max: u32, follow: bool) -> Result<()> {
    let client = a.client()?;
    let wait_ms = if follow { sluice_core::stream::limits::READ_WAIT_MS_MAX } else { 0 };
    loop {
        let batch = client.read_records(stream, partition, from, max, wait_ms).await?;
        print_records(&batch.records, a.json)?;
        match batch.records.last() {
            Some(last) => from = From::Offset(last.offset + 1),
            None if !follow => return Ok(()),
            None => from = From::Offset(batch.next_offset.max(batch.first_offset)),
        }
        if !follow && batch.records.len() < max as usize {
            return Ok(());
        }
        if follow && batch.records.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn read(a: ReadArgs) -> Result<()> {
    let from = match (a.from_offset, a.since) {
        (Some(o), _) => From::Offset(o),
        (None, Some(ago)) => From::TimeMs(now_ms().saturating_sub(ago)),
        (None, None) => From::Start,
    };
    read_loop(&a.client, &a.stream, a.partition, from, a.max, a.follow).await
}

async fn tail(a: TailArgs) -> Result<()> {
    let s = a.client.client()?.get_stream(&a.stream).await?;
    let Some(p) = s.partition_details.get(a.partition as usize) else {
        bail!("stream {} has partitions 0 to {}", a.stream, s.partitions.saturating_sub(1));
    };
    let from = p.next_offset.saturating_sub(a.lines).max(p.first_offset);
    read_loop(&a.client, &a.stream, a.partition, From::Offset(from), 1_000, a.follow).await
}

async fn group_create(a: GroupCreateArgs) -> Result<()> {
    let start = match a.start.as_str() {
        "earliest" => GroupStart::Named(StartName::Earliest),
        "latest" => GroupStart::Named(StartName::Latest),
        n => GroupStart::Offset {
            offset: n.parse().with_context(|| format!("--start {n:?}: use earliest, latest or an offset"))?,
        },
    };
    let request = CreateGroupRequest {
        name: a.name.clone(),
        mode: Some(if a.mode == "shared" { GroupMode::Shared } else { GroupMode::Offsets }),
        start: Some(start),
        session_timeout_ms: a.session_timeout,
        ack_timeout_ms: a.ack_timeout,
        max_deliveries: a.max_deliveries,
        dead_letter_queue: a.dlq.clone(),
        key_ordered: a.key_ordered.then_some(true),
    };
    let created = a.client.client()?.create_group(&a.stream, &request).await?;
    if a.client.json {
        return output::json(&created.value);
    }
    let verb = if created.created { "created" } else { "already exists with these settings:" };
    println!("group {} of stream {} {verb} (lag {})", created.value.name, a.stream, created.value.lag);
    Ok(())
}

async fn group_list(a: NameArgs) -> Result<()> {
    let groups = a.client.client()?.list_groups(&a.name).await?;
    if a.client.json {
        return output::json(&groups);
    }
    if groups.is_empty() {
        eprintln!("no groups; create one with `sluice stream group create {} NAME`", a.name);
        return Ok(());
    }
    print_groups(&groups);
    Ok(())
}

async fn group_get(a: GroupArgs) -> Result<()> {
    let g = a.client.client()?.get_group(&a.stream, &a.name).await?;
    if a.client.json {
        return output::json(&g);
    }
    print_groups(std::slice::from_ref(&g));
    println!();
    let mut t = output::table(&["partition", "committed", "lag", "owner"], &[0, 1, 2]);
    for p in &g.partitions {
        t.add_row(vec![
            p.partition.to_string(),
            p.committed_offset.to_string(),
            p.lag.to_string(),
            p.owner.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    output::print_table(&t);
    Ok(())
}

async fn group_seek(a: GroupSeekArgs) -> Result<()> {
    let request = SeekRequest {
        partition: a.partition,
        offset: a.offset,
        time_ms: a.since.map(|ago| now_ms().saturating_sub(ago)),
    };
    let sought = a.client.client()?.seek(&a.stream, &a.name, &request).await?;
    if a.client.json {
        return output::json(&sought);
    }
    println!("group {} now reads partition {} from offset {}", a.name, sought.partition, sought.offset);
    Ok(())
}

//! `sluice topic ...`: create, list, inspect, change and delete topics; subscribe queues and
//! HTTP(S) endpoints, list and remove subscriptions; publish.

use std::io::Read;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sluice_api::{
    Attribute, CreateTopicRequest, FilterPolicyScope, PublishMessage, PublishRequest, RateLimit, SubscribeRequest,
    Subscription, Topic, UpdateTopicRequest,
};

use super::queue::{Bound, parse_rate_limit};
use super::{ClientArgs, parse_attribute, parse_tag};
use crate::output;
use crate::report::hinted;

/// Create topics, subscribe queues and endpoints to them, and publish.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice topic create orders\n  sluice topic subscribe orders --queue billing --raw\n  sluice topic publish orders '{\"id\": 7}' --attr kind=String:created\n  sluice topic subscriptions orders"
)]
pub struct Args {
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, Subcommand)]
enum TopicCommand {
    Create(CreateArgs),
    List(ListArgs),
    Get(NameArgs),
    Update(UpdateArgs),
    Delete(NameArgs),
    Subscribe(SubscribeArgs),
    Unsubscribe(UnsubscribeArgs),
    Subscriptions(SubscriptionsArgs),
    Publish(PublishArgs),
}

/// Create a topic (succeeds without change if a matching one exists).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice topic create orders\n  sluice topic create orders.fifo --fifo --content-based-dedup\n  sluice topic create orders --tag team=billing\n  sluice topic create orders --schema-validation true"
)]
struct CreateArgs {
    /// Topic name: letters, digits, `-` and `_`, up to 256 characters (FIFO topics end in .fifo).
    name: String,
    /// Make it a FIFO topic: order per message group, deduplication, queue subscriptions only
    /// (every publish needs --group). Implied by a name ending in .fifo.
    #[arg(long)]
    fifo: bool,
    /// FIFO: deduplicate publishes without --dedup-id by the SHA-256 of their body.
    #[arg(long)]
    content_based_dedup: bool,
    /// The topic's display name.
    #[arg(long, value_name = "TEXT")]
    display_name: Option<String>,
    /// A tag; repeat for several.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
    /// Check every publish against the schema registered for its type and version
    /// (`sluice schema register`): `true` or `false`.
    #[arg(long, value_name = "BOOL")]
    schema_validation: Option<bool>,
    /// A token bucket on publishes, shared by every node: `PER_SECOND` (burst the same) or
    /// `PER_SECOND/BURST`, e.g. `100/500`; past it messages are refused as rate_limited.
    #[arg(long, value_name = "PER_SECOND[/BURST]", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<RateLimit>>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Change a topic's settings; those not given keep their current values.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice topic update orders --schema-validation true\n  sluice topic update orders --display-name 'Order events'\n  sluice topic update orders --display-name ''\n  sluice topic update orders --rate-limit 100/500\n  sluice topic update orders --rate-limit none"
)]
struct UpdateArgs {
    name: String,
    /// Check every publish against the schema registered for its type and version: `true`
    /// or `false`. Other nodes see the change within a second.
    #[arg(long, value_name = "BOOL")]
    schema_validation: Option<bool>,
    /// The topic's display name (`''` removes it).
    #[arg(long, value_name = "TEXT")]
    display_name: Option<String>,
    /// FIFO topics: deduplicate publishes without --dedup-id by the SHA-256 of their body.
    #[arg(long, value_name = "BOOL")]
    content_based_dedup: Option<bool>,
    /// A token bucket on publishes: `PER_SECOND`, `PER_SECOND/BURST`, or `none` to remove it.
    #[arg(long, value_name = "PER_SECOND[/BURST]|none", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<RateLimit>>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List topics (all pages).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice topic list\n  sluice topic list --prefix billing- --json")]
struct ListArgs {
    /// Only topics whose names start with this.
    #[arg(long)]
    prefix: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// A topic by name.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice topic get orders\n  sluice topic delete orders")]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Subscribe a queue or an HTTP(S) endpoint to a topic.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice topic subscribe orders --queue billing\n  sluice topic subscribe orders --queue audit --raw --filter-policy '{\"kind\": [\"created\"]}'\n  sluice topic subscribe orders --queue big --filter-policy '{\"total\": [{\"numeric\": [\">\", 100]}]}' --filter-body\n  sluice topic subscribe orders --endpoint https://example.com/hook"
)]
struct SubscribeArgs {
    topic: String,
    /// The queue to deliver into (a name, or an SQS queue ARN).
    #[arg(long, value_name = "QUEUE", required_unless_present = "endpoint", conflicts_with = "endpoint")]
    queue: Option<String>,
    /// An http:// or https:// URL to POST to (pending until the endpoint confirms).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Deliver the message itself, not the SNS JSON envelope.
    #[arg(long)]
    raw: bool,
    /// An SNS filter policy (JSON): only matching messages are delivered.
    #[arg(long, value_name = "JSON")]
    filter_policy: Option<String>,
    /// Apply the filter policy to the JSON body instead of the attributes.
    #[arg(long, requires = "filter_policy")]
    filter_body: bool,
    /// A queue for messages the subscription can never take.
    #[arg(long, value_name = "QUEUE")]
    dlq: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Remove a subscription.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  sluice topic unsubscribe orders 1c0e4f0a-...")]
struct UnsubscribeArgs {
    topic: String,
    /// The subscription's id (see `sluice topic subscriptions TOPIC`).
    id: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// List the subscriptions of a topic, or of every topic.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice topic subscriptions orders\n  sluice topic subscriptions --json")]
struct SubscriptionsArgs {
    topic: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Publish a message to a topic and print its id.
///
/// The body is the BODY argument, or standard input with --stdin. Exits non-zero if the
/// message was refused or not acknowledged.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice topic publish orders 'hello'\n  sluice topic publish orders '{\"total\": 120}' --attr kind=String:created --subject 'new order'\n  sluice topic publish orders.fifo 'step 1' --group order-7 --dedup-id 7-1\n  echo hello | sluice topic publish orders --stdin"
)]
struct PublishArgs {
    topic: String,
    /// The message, as text.
    #[arg(required_unless_present = "stdin", conflicts_with = "stdin")]
    body: Option<String>,
    /// Read the message from standard input.
    #[arg(long)]
    stdin: bool,
    /// The envelope's Subject.
    #[arg(long)]
    subject: Option<String>,
    /// A typed attribute: NAME=String:text, NAME=Number:42 or NAME=Binary:<base64>; repeat for
    /// several.
    #[arg(long = "attr", value_name = "NAME=TYPE:VALUE", value_parser = parse_attribute)]
    attributes: Vec<(String, Attribute)>,
    /// Message group: required on FIFO topics.
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// FIFO: a publish with the same id inside the dedup window is delivered once.
    #[arg(long, value_name = "ID")]
    dedup_id: Option<String>,
    /// The message's type (the attribute `sluice.type`): the schema a topic with schema
    /// validation checks the body against.
    #[arg(long = "type", value_name = "TYPE")]
    message_type: Option<String>,
    /// The schema version to check against (the attribute `sluice.version`); default: the
    /// type's latest.
    #[arg(long = "version", value_name = "N", requires = "message_type")]
    schema_version: Option<u32>,
    /// The business operation the message belongs to (the attribute
    /// `sluice.correlation_id`); `sluice trace ID` lists the publish.
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    /// What caused the message (the attribute `sluice.causation_id`).
    #[arg(long, value_name = "ID")]
    causation_id: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        TopicCommand::Create(args) => create(args).await,
        TopicCommand::List(args) => list(args).await,
        TopicCommand::Get(args) => get(args).await,
        TopicCommand::Update(args) => update(args).await,
        TopicCommand::Delete(args) => delete(args).await,
        TopicCommand::Subscribe(args) => subscribe(args).await,
        TopicCommand::Unsubscribe(args) => unsubscribe(args).await,
        TopicCommand::Subscriptions(args) => subscriptions(args).await,
        TopicCommand::Publish(args) => publish(args).await,
    }
}

async fn create(args: CreateArgs) -> Result<()> {
    let request = CreateTopicRequest {
        name: args.name.clone(),
        fifo: Some(args.fifo || args.name.ends_with(".fifo")),
        content_based_dedup: args.content_based_dedup.then_some(true),
        display_name: args.display_name.clone(),
        tags: (!args.tags.is_empty()).then(|| args.tags.iter().cloned().collect()),
        schema_validation: args.schema_validation,
        rate_limit: args.rate_limit.and_then(|b| b.0),
        ..Default::default()
    };
    let created = args.client.client()?.create_topic(&request).await?;
    if args.client.json {
        return output::json(&created.topic);
    }
    if created.created {
        println!("created topic {} ({})", created.topic.name, created.topic.arn);
    } else {
        println!("topic {} already exists with these attributes", created.topic.name);
    }
    Ok(())
}

async fn list(args: ListArgs) -> Result<()> {
    let topics = args.client.client()?.list_all_topics(args.prefix.as_deref()).await?;
    if args.client.json {
        return output::json(&sluice_api::TopicList { topics, next_token: None });
    }
    output::print_rows(
        &topics,
        "no topics; create one with `sluice topic create NAME`",
        &["name", "fifo", "arn", "created at"],
        &[],
        |t| vec![t.name.clone(), t.fifo.to_string(), t.arn.clone(), t.created_at.clone()],
    );
    Ok(())
}

async fn get(args: NameArgs) -> Result<()> {
    let topic = args.client.client()?.get_topic(&args.name).await?;
    print_topic(&topic, args.client.json)
}

async fn update(args: UpdateArgs) -> Result<()> {
    let request = UpdateTopicRequest {
        content_based_dedup: args.content_based_dedup,
        display_name: args.display_name.clone(),
        schema_validation: args.schema_validation,
        rate_limit: args.rate_limit.map(|b| b.0),
        ..Default::default()
    };
    if request == UpdateTopicRequest::default() {
        bail!("nothing to change: give at least one setting flag (see `sluice topic update --help`)");
    }
    let topic = args.client.client()?.update_topic(&args.name, &request).await?;
    print_topic(&topic, args.client.json)
}

fn print_topic(t: &Topic, json: bool) -> Result<()> {
    if json {
        return output::json(t);
    }
    let counts = t.subscriptions.as_ref();
    output::print_table(&output::key_values(vec![
        ("name", t.name.clone()),
        ("arn", t.arn.clone()),
        ("fifo", t.fifo.to_string()),
        ("content-based dedup", t.content_based_dedup.map_or("-".to_owned(), |b| b.to_string())),
        ("schema validation", t.schema_validation.to_string()),
        ("rate limit", t.rate_limit.map_or("-".to_owned(), |r| format!("{}/s, burst {}", r.per_second, r.burst))),
        ("attributes", output::pairs(&t.attributes)),
        ("tags", output::pairs(&t.tags)),
        ("subscriptions", counts.map_or("-".to_owned(), |c| c.confirmed.to_string())),
        ("pending confirmation", counts.map_or("-".to_owned(), |c| c.pending.to_string())),
        ("created at", t.created_at.clone()),
    ]));
    Ok(())
}

async fn delete(args: NameArgs) -> Result<()> {
    args.client.client()?.delete_topic(&args.name).await?;
    if !args.client.json {
        println!("deleted topic {} and its subscriptions", args.name);
    }
    Ok(())
}

async fn subscribe(args: SubscribeArgs) -> Result<()> {
    let filter_policy =
        args.filter_policy.as_deref().map(serde_json::from_str::<serde_json::Value>).transpose().map_err(|e| {
            hinted(format!("--filter-policy is not JSON: {e}"), "write it as JSON, e.g. '{\"kind\": [\"created\"]}'")
        })?;
    let request = SubscribeRequest {
        queue: args.queue.clone(),
        endpoint: args.endpoint.clone(),
        raw: args.raw.then_some(true),
        filter_policy,
        filter_policy_scope: args.filter_body.then_some(FilterPolicyScope::Body),
        dead_letter_queue: args.dlq.clone(),
        delivery_policy: None,
    };
    let created = args.client.client()?.subscribe(&args.topic, &request).await?;
    if args.client.json {
        return output::json(&created.subscription);
    }
    let s = &created.subscription;
    let what = if created.created { "subscribed" } else { "already subscribed with these settings:" };
    println!("{what} {} to {} (subscription {})", s.endpoint, s.topic, s.id);
    if s.pending_confirmation {
        println!("pending: the endpoint receives a SubscriptionConfirmation request and must confirm it");
    }
    Ok(())
}

async fn unsubscribe(args: UnsubscribeArgs) -> Result<()> {
    args.client.client()?.unsubscribe(&args.topic, &args.id).await?;
    if !args.client.json {
        println!("removed subscription {} of {}", args.id, args.topic);
    }
    Ok(())
}

async fn subscriptions(args: SubscriptionsArgs) -> Result<()> {
    let subscriptions = args.client.client()?.list_all_subscriptions(args.topic.as_deref()).await?;
    if args.client.json {
        return output::json(&sluice_api::SubscriptionList { subscriptions, next_token: None });
    }
    output::print_rows(
        &subscriptions,
        "no subscriptions; add one with `sluice topic subscribe TOPIC --queue QUEUE`",
        &["topic", "id", "protocol", "endpoint", "raw", "filter", "state"],
        &[],
        subscription_row,
    );
    Ok(())
}

fn subscription_row(s: &Subscription) -> Vec<String> {
    let filter = match &s.filter_policy {
        Some(policy) => {
            let scope = if s.filter_policy_scope == FilterPolicyScope::Body { "body " } else { "" };
            format!("{scope}{policy}")
        }
        None => "-".to_owned(),
    };
    let state = if s.pending_confirmation { "pending confirmation" } else { "confirmed" };
    vec![
        s.topic.clone(),
        s.id.clone(),
        s.protocol.clone(),
        s.endpoint.clone(),
        s.raw.to_string(),
        filter,
        state.to_owned(),
    ]
}

async fn publish(args: PublishArgs) -> Result<()> {
    let body = match &args.body {
        Some(body) => body.clone(),
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("reading the message from standard input")?;
            text
        }
    };
    let message = PublishMessage {
        body,
        subject: args.subject.clone(),
        attributes: args.attributes.iter().cloned().collect(),
        group_id: args.group.clone(),
        dedup_id: args.dedup_id.clone(),
        message_type: args.message_type.clone(),
        version: args.schema_version.map(|v| v.to_string()),
        correlation_id: args.correlation_id.clone(),
        causation_id: args.causation_id.clone(),
    };
    let response = args.client.client()?.publish(&args.topic, &PublishRequest { messages: vec![message] }).await?;
    if args.client.json {
        output::json(&response)?;
    }
    match response.results.into_iter().next() {
        Some(result) => match (result.id, result.error) {
            (_, Some(error)) => Err(anyhow::Error::from(sluice_client::ClientError::Rejected {
                code: error.code,
                message: error.message,
                details: error.details,
            })),
            (Some(id), None) => {
                if !args.client.json {
                    let deliveries = result.deliveries.unwrap_or(0);
                    match result.sequence_number {
                        Some(seq) => println!("{id} (sequence {seq}) to {deliveries} subscriptions"),
                        None => println!("{id} to {deliveries} subscriptions"),
                    }
                }
                Ok(())
            }
            (None, None) => bail!("the server's answer has no result for the message"),
        },
        None => bail!("the server's answer has no result for the message"),
    }
}

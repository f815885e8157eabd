//! `sluice alert ...`: alert rules evaluated by the server, and the alerts firing now.

use anyhow::Result;
use clap::Subcommand;
use sluice_api::{Alert, AlertKind, AlertNotify, AlertRule, CreateAlertRuleRequest};

use super::{ClientArgs, parse_duration_ms};
use crate::output;

/// Alert rules the server evaluates (DLQ depth, oldest message age, subscription lag), and
/// the alerts firing now.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice alert create orders-late --kind oldest-age-above-ms --target 'orders*' --threshold 60000 --for 30s\n  sluice alert create dlq-not-empty --kind dlq-depth-above --target '*' --threshold 0 --webhook https://hooks.example/sluice\n  sluice alert firing\n  sluice alert delete dlq-not-empty    # turns the built-in rule off"
)]
pub struct Args {
    #[command(subcommand)]
    command: AlertCommand,
}

#[derive(Debug, Subcommand)]
enum AlertCommand {
    Create(CreateArgs),
    List(ListArgs),
    Get(NameArgs),
    Delete(NameArgs),
    Firing(FiringArgs),
}

/// What a rule measures.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Kind {
    /// Messages in each dead-letter queue the target matches.
    DlqDepthAbove,
    /// Age in ms of the oldest message of each queue the target matches.
    OldestAgeAboveMs,
    /// Backlog of each subscription (`TOPIC/ID`) the target matches.
    LagAbove,
    /// Growth of that backlog over the last --for.
    LagGrowing,
    /// Refusals per second of each resource the target matches.
    RejectedRateAbove,
    /// Failed saga instances (`SAGA/ID`) of each saga the target matches.
    SagaFailed,
}

impl From<Kind> for AlertKind {
    fn from(kind: Kind) -> AlertKind {
        match kind {
            Kind::DlqDepthAbove => AlertKind::DlqDepthAbove,
            Kind::OldestAgeAboveMs => AlertKind::OldestAgeAboveMs,
            Kind::LagAbove => AlertKind::LagAbove,
            Kind::LagGrowing => AlertKind::LagGrowing,
            Kind::RejectedRateAbove => AlertKind::RejectedRateAbove,
            Kind::SagaFailed => AlertKind::SagaFailed,
        }
    }
}

/// Create a rule (the same settings again change nothing; other settings under a taken name
/// are refused: delete it first). A rule named dlq-not-empty replaces the built-in one.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice alert create jobs-dlq --kind dlq-depth-above --target 'jobs-*' --threshold 10 --for 1m\n  sluice alert create billing-lag --kind lag-above --target 'orders/*' --threshold 1000 --webhook http://127.0.0.1:8080/hook"
)]
struct CreateArgs {
    /// 1 to 60 letters, digits, '-' or '_'.
    name: String,
    #[arg(long, value_enum)]
    kind: Kind,
    /// A queue or subscription name, or a pattern with * and ?.
    #[arg(long, default_value = "*")]
    target: String,
    /// The alert fires while the figure is above this.
    #[arg(long)]
    threshold: f64,
    /// How long the condition must hold before firing (for lag-growing: the window).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration_ms, default_value = "0")]
    for_ms: u64,
    /// POST a signed JSON notification here when an alert fires and when it resolves.
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List every rule.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice alert list\n  sluice alert list --json")]
struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
}

/// Show or delete one rule (deleting dlq-not-empty turns the built-in rule off).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice alert get orders-late\n  sluice alert delete orders-late")]
struct NameArgs {
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// Show the alerts firing now, since when.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice alert firing\n  sluice alert firing --pending --json")]
struct FiringArgs {
    /// Also show pending alerts (their condition holds, for less than the rule's --for).
    #[arg(long)]
    pending: bool,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        AlertCommand::Create(args) => create(args).await,
        AlertCommand::List(args) => list(args).await,
        AlertCommand::Get(args) => {
            let rule = args.client.client()?.get_alert_rule(&args.name).await?;
            print_rule(&rule, args.client.json)
        }
        AlertCommand::Delete(args) => {
            args.client.client()?.delete_alert_rule(&args.name).await?;
            if !args.client.json {
                println!("deleted alert rule {}", args.name);
            }
            Ok(())
        }
        AlertCommand::Firing(args) => firing(args).await,
    }
}

async fn create(args: CreateArgs) -> Result<()> {
    let request = CreateAlertRuleRequest {
        name: args.name,
        kind: args.kind.into(),
        target: args.target,
        threshold: args.threshold,
        for_ms: args.for_ms,
        notify: args.webhook.map(|url| AlertNotify { webhook: Some(url) }),
    };
    let created = args.client.client()?.create_alert_rule(&request).await?;
    if !created.created && !args.client.json {
        eprintln!("alert rule {} already exists with these settings", created.rule.name);
    }
    print_rule(&created.rule, args.client.json)
}

fn kind(kind: AlertKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n}") }
}

async fn list(args: ListArgs) -> Result<()> {
    let rules = args.client.client()?.list_alert_rules().await?;
    if args.client.json {
        return output::json(&rules);
    }
    output::print_rows(
        &rules.rules,
        "no alert rules (the built-in dlq-not-empty is turned off)",
        &["name", "kind", "target", "threshold", "for", "webhook"],
        &[3, 4],
        |r| {
            let name = if r.builtin { format!("{} (built in)", r.name) } else { r.name.clone() };
            vec![
                name,
                kind(r.kind),
                r.target.clone(),
                number(r.threshold),
                output::duration_ms(r.for_ms),
                r.notify.as_ref().and_then(|n| n.webhook.clone()).unwrap_or_else(|| "-".into()),
            ]
        },
    );
    Ok(())
}

fn print_rule(r: &AlertRule, json: bool) -> Result<()> {
    if json {
        return output::json(r);
    }
    output::print_table(&output::key_values(vec![
        ("name", r.name.clone()),
        ("kind", kind(r.kind)),
        ("target", r.target.clone()),
        ("threshold", number(r.threshold)),
        ("for", output::duration_ms(r.for_ms)),
        ("webhook", r.notify.as_ref().and_then(|n| n.webhook.clone()).unwrap_or_else(|| "-".into())),
        ("signing secret", r.signing_secret.clone().unwrap_or_else(|| "-".into())),
        ("built in", if r.builtin { "yes" } else { "no" }.into()),
        ("created at", r.created_at.clone().unwrap_or_else(|| "-".into())),
    ]));
    Ok(())
}

async fn firing(args: FiringArgs) -> Result<()> {
    let alerts = args.client.client()?.alerts(args.pending).await?;
    if args.client.json {
        return output::json(&alerts);
    }
    output::print_rows(
        &alerts.alerts,
        "no alert is firing",
        &["status", "rule", "subject", "value", "threshold", "since"],
        &[3, 4],
        |a: &Alert| {
            vec![
                a.status.clone(),
                a.rule.clone(),
                a.subject.clone(),
                number(a.value),
                number(a.threshold),
                a.since.clone(),
            ]
        },
    );
    Ok(())
}

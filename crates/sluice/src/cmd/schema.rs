//! `sluice schema ...`: register JSON Schema versions per message type, list and read them, set
//! a type's compatibility mode, and check a schema or a message body before using it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sluice_api::{CheckSchemaRequest, CheckSchemaResponse, Compatibility, SchemaType};

use super::ClientArgs;
use crate::output;
use crate::report::hinted;

/// The compatibility modes, by their API names, for help texts and errors.
const MODES: &str = "backward, backward_transitive, forward, forward_transitive, full, full_transitive, none";

/// Register JSON Schema (2020-12) versions per message type and check messages against them.
///
/// A queue or topic with schema validation on refuses a message whose body breaks the schema
/// of its type (`sluice send --type T [--version N]`, or the attributes `sluice.type` and
/// `sluice.version` over SQS and SNS).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schema register order.created --file order.schema.json\n  sluice schema list\n  sluice schema get order.created --version latest\n  sluice schema check order.created --body '{\"id\": \"o-1\", \"total\": 5}'\n  sluice schema config order.created --compatibility full"
)]
pub struct Args {
    #[command(subcommand)]
    command: SchemaCommand,
}

#[derive(Debug, Subcommand)]
enum SchemaCommand {
    Register(RegisterArgs),
    List(ListArgs),
    Get(GetArgs),
    Check(CheckArgs),
    Config(ConfigArgs),
}

/// Register a schema as the type's next version (succeeds without change if it is already
/// the latest or an earlier version).
///
/// The new version is checked against earlier ones under the type's compatibility mode
/// (`backward` unless `sluice schema config` set another); an incompatible one is refused with
/// the reasons.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schema register order.created --file order.schema.json\n  sluice schema register order.created --file - < order.schema.json"
)]
struct RegisterArgs {
    /// Message type: 1 to 256 letters, digits, `.`, `_`, `-` and `:`, e.g. order.created.
    #[arg(value_name = "TYPE")]
    message_type: String,
    /// The JSON Schema document (`-`: standard input); at most 256 KiB, local `$ref`s only.
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
    #[command(flatten)]
    client: ClientArgs,
}

/// List registered types with their latest version and mode (all pages).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  sluice schema list\n  sluice schema list --json")]
struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
}

/// A type and its versions, or with --version the schema of one version.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schema get order.created\n  sluice schema get order.created --version 2\n  sluice schema get order.created --version latest --json"
)]
struct GetArgs {
    #[arg(value_name = "TYPE")]
    message_type: String,
    /// Show this version's schema: a number, or `latest`.
    #[arg(long = "version", value_name = "N|latest", value_parser = parse_version)]
    schema_version: Option<VersionArg>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Check a schema before registering it, or a message body before sending it.
///
/// With --file: whether the schema would be accepted as the type's next version. With --body:
/// whether a message of this type would pass, against --version or the latest. Exits non-zero
/// when it would be refused, printing why.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schema check order.created --file order.v3.schema.json\n  sluice schema check order.created --body '{\"id\": \"o-1\", \"total\": -5}'\n  sluice schema check order.created --body \"$(cat order.json)\" --version 1"
)]
struct CheckArgs {
    #[arg(value_name = "TYPE")]
    message_type: String,
    /// A JSON Schema document to check against the type's mode (`-`: standard input).
    #[arg(long, value_name = "SCHEMA", required_unless_present = "body", conflicts_with = "body")]
    file: Option<PathBuf>,
    /// A message body, as it would be sent.
    #[arg(long, value_name = "JSON")]
    body: Option<String>,
    /// With --body: the version to check against (default: the latest).
    #[arg(long = "version", value_name = "N", requires = "body")]
    schema_version: Option<u32>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Set how each new version of a type must relate to earlier ones.
///
/// backward (the default): consumers on the new version read the previous version's messages.
/// forward: consumers on the previous version read the new version's messages. full: both.
/// The _transitive variants check against every earlier version, not only the latest. none:
/// no check.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice schema config order.created --compatibility full\n  sluice schema config audit --compatibility none"
)]
struct ConfigArgs {
    #[arg(value_name = "TYPE")]
    message_type: String,
    /// backward, backward_transitive, forward, forward_transitive, full, full_transitive or none.
    #[arg(long, value_name = "MODE", value_parser = parse_compatibility)]
    compatibility: Compatibility,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VersionArg {
    Latest,
    Number(u32),
}

fn parse_version(s: &str) -> Result<VersionArg, String> {
    match s {
        "latest" => Ok(VersionArg::Latest),
        n => n
            .parse::<u32>()
            .ok()
            .filter(|&v| v > 0)
            .map(VersionArg::Number)
            .ok_or_else(|| format!("{s:?} is not a version: give a number (1, 2, ...) or latest")),
    }
}

/// A mode by its API name; `-` may stand for `_` (`full-transitive`).
fn parse_compatibility(s: &str) -> Result<Compatibility, String> {
    serde_json::from_value(serde_json::Value::String(s.replace('-', "_")))
        .map_err(|_| format!("{s:?} is not a compatibility mode; give one of {MODES}"))
}

fn mode_name(c: Compatibility) -> String {
    serde_json::to_value(c).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        SchemaCommand::Register(args) => register(args).await,
        SchemaCommand::List(args) => list(args).await,
        SchemaCommand::Get(args) => get(args).await,
        SchemaCommand::Check(args) => check(args).await,
        SchemaCommand::Config(args) => {
            let ty = args.client.client()?.set_schema_compatibility(&args.message_type, args.compatibility).await?;
            if args.client.json {
                return output::json(&ty);
            }
            println!("{}: new versions are checked as {}", ty.message_type, mode_name(ty.compatibility));
            Ok(())
        }
    }
}

/// Reads and parses a schema document; `-` is standard input.
async fn read_schema(path: &Path) -> Result<serde_json::Value> {
    let text = if path == Path::new("-") {
        tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin()))
            .await?
            .context("cannot read the schema from standard input")?
    } else {
        tokio::fs::read_to_string(path).await.with_context(|| format!("cannot read {}", path.display()))?
    };
    serde_json::from_str(&text).map_err(|e| {
        hinted(
            format!("{} is not JSON: {e}", path.display()),
            "a schema is a JSON document, e.g. {\"type\": \"object\", \"required\": [\"id\"]}",
        )
    })
}

async fn register(args: RegisterArgs) -> Result<()> {
    let schema = read_schema(&args.file).await?;
    let done = args.client.client()?.register_schema(&args.message_type, &schema).await?;
    if args.client.json {
        return output::json(&done.registered);
    }
    let r = &done.registered;
    if done.created {
        println!("registered {} version {}", r.message_type, r.version);
    } else {
        println!("{} version {} is already this schema; nothing registered", r.message_type, r.version);
    }
    Ok(())
}

async fn list(args: ListArgs) -> Result<()> {
    let types = args.client.client()?.list_all_schemas().await?;
    if args.client.json {
        return output::json(&sluice_api::SchemaTypeList { types, next_token: None });
    }
    output::print_rows(
        &types,
        "no schemas; register one with `sluice schema register TYPE --file SCHEMA.json`",
        &["type", "latest", "compatibility", "updated at"],
        &[1],
        |t| vec![t.message_type.clone(), latest(t), mode_name(t.compatibility), t.updated_at.clone()],
    );
    Ok(())
}

fn latest(t: &SchemaType) -> String {
    t.latest_version.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

async fn get(args: GetArgs) -> Result<()> {
    let client = args.client.client()?;
    let Some(version) = args.schema_version else {
        let ty = client.get_schema_type(&args.message_type).await?;
        if args.client.json {
            return output::json(&ty);
        }
        let versions = ty.versions.as_deref().unwrap_or_default();
        let versions = if versions.is_empty() {
            "-".to_owned()
        } else {
            versions.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        };
        output::print_table(&output::key_values(vec![
            ("type", ty.message_type.clone()),
            ("compatibility", mode_name(ty.compatibility)),
            ("latest version", latest(&ty)),
            ("versions", versions),
            ("created at", ty.created_at.clone()),
            ("updated at", ty.updated_at.clone()),
        ]));
        return Ok(());
    };
    let number = match version {
        VersionArg::Latest => None,
        VersionArg::Number(n) => Some(n),
    };
    let found = client.get_schema_version(&args.message_type, number).await?;
    if args.client.json {
        return output::json(&found);
    }
    output::print_table(&output::key_values(vec![
        ("type", found.message_type.clone()),
        ("version", found.version.to_string()),
        ("created at", found.created_at.clone()),
    ]));
    println!("{}", serde_json::to_string_pretty(&found.schema)?);
    Ok(())
}

async fn check(args: CheckArgs) -> Result<()> {
    let request = match (&args.file, &args.body) {
        (Some(path), _) => CheckSchemaRequest { schema: Some(read_schema(path).await?), ..Default::default() },
        (None, Some(body)) => {
            CheckSchemaRequest { body: Some(body.clone()), version: args.schema_version, ..Default::default() }
        }
        (None, None) => bail!("nothing to check: give --file SCHEMA or --body JSON"),
    };
    let answer = args.client.client()?.check_schema(&args.message_type, &request).await?;
    if args.client.json {
        output::json(&answer)?;
    }
    verdict(&args.message_type, &answer, args.client.json)
}

/// Prints what the check found (unless the JSON was printed) and fails when the schema or
/// the body would be refused, so that scripts can stop on it.
fn verdict(message_type: &str, answer: &CheckSchemaResponse, json: bool) -> Result<()> {
    if let Some(compatible) = answer.compatible {
        if compatible {
            if !json {
                println!("compatible: {message_type} would take this schema as its next version");
            }
            return Ok(());
        }
        if !json && !answer.reasons.is_empty() {
            output::print_rows(&answer.reasons, "", &["version", "direction", "kind", "path", "reason"], &[0], |r| {
                vec![r.version.to_string(), r.direction.clone(), r.kind.clone(), r.path.clone(), r.message.clone()]
            });
        }
        return Err(hinted(
            format!(
                "the schema is not compatible with {message_type}'s earlier versions ({})",
                count(answer.reasons.len(), "reason")
            ),
            format!(
                "change the schema as the reasons say, or relax the mode with `sluice schema config {message_type} --compatibility none`"
            ),
        ));
    }
    let version = answer.version.map_or_else(|| "-".to_owned(), |v| v.to_string());
    if answer.valid == Some(true) {
        if !json {
            println!("valid: the body passes {message_type} version {version}");
        }
        return Ok(());
    }
    if !json && !answer.errors.is_empty() {
        output::print_rows(&answer.errors, "", &["pointer", "schema path", "reason"], &[], |e| {
            let pointer = if e.pointer.is_empty() { "(the body)".to_owned() } else { e.pointer.clone() };
            vec![pointer, e.schema_path.clone(), e.message.clone()]
        });
    }
    Err(hinted(
        format!("the body breaks {message_type} version {version} ({})", count(answer.errors.len(), "error")),
        "fix the body at the pointers shown; a destination with schema validation would refuse it",
    ))
}

/// `1 reason`, `3 reasons`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_modes_parse_or_say_what_is_accepted() {
        assert_eq!(parse_version("latest"), Ok(VersionArg::Latest));
        assert_eq!(parse_version("3"), Ok(VersionArg::Number(3)));
        assert!(parse_version("0").unwrap_err().contains("latest"));
        assert!(parse_version("first").is_err());
        assert_eq!(parse_compatibility("full_transitive"), Ok(Compatibility::FullTransitive));
        assert_eq!(parse_compatibility("backward-transitive"), Ok(Compatibility::BackwardTransitive));
        assert!(parse_compatibility("sideways").unwrap_err().contains("forward_transitive"));
        assert_eq!(mode_name(Compatibility::None), "none");
        assert_eq!((count(1, "error"), count(2, "error")), ("1 error".to_owned(), "2 errors".to_owned()));
    }
}

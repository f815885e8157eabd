//! `sluice key ...`: make, list, inspect and revoke API keys.

use anyhow::Result;
use clap::Subcommand;
use sluice_api::{ApiKey, CreateKeyRequest};

use super::ClientArgs;
use crate::output;

/// Make and revoke the API keys every `/v1` call carries (`Authorization: Bearer <key>`).
///
/// A key belongs to a tenant and holds scopes `kind:name-pattern:actions`: kinds queues,
/// topics, streams, events, jobs, sagas, relays, schedules, schemas, admin (or *); `*` in a
/// name pattern is any run of characters; actions per kind (read, send, receive, publish,
/// subscribe, append, enqueue, work, start, reply, manage), or admin for all of them. Making the
/// first key turns authentication on (give it `*:*:admin`, or start the server with
/// --admin-key-file). Managing keys needs `admin:keys:manage`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice key create --name admin --scopes '*:*:admin'\n  sluice key create --tenant acme --name ci --scopes 'queues:orders-*:send,receive' --scopes 'streams:*:read'\n  SLUICE_KEY=slk_... sluice key list\n  sluice key revoke 3f2a9c0d1e4b5a67"
)]
pub struct Args {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    Create(CreateArgs),
    List(ListArgs),
    Get(IdArgs),
    Revoke(IdArgs),
}

/// Make a key and print its token, the only time it is shown (only a hash is stored).
#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// What the key is for, shown in lists.
    #[arg(long)]
    name: String,
    /// The key's tenant (`[a-z0-9-]`); `default` when left out.
    #[arg(long)]
    tenant: Option<String>,
    /// Scopes `kind:name-pattern:actions`, one or more after the flag or the flag repeated,
    /// e.g. `--scopes 'queues:orders-*:send,receive' 'streams:*:read'`.
    #[arg(long = "scopes", value_name = "SCOPE", required = true, num_args = 1..)]
    scopes: Vec<String>,
    /// Also make an AWS access key id and secret with the same scopes, for SigV4 clients
    /// (boto3, the aws CLI, the AWS SDKs); printed after the token. SigV4 needs the secret
    /// itself, so it is stored as it is, unlike the token.
    #[arg(long)]
    aws: bool,
    /// Calls per second the key may make, all nodes together: `PER_SECOND/BURST`, e.g.
    /// `100/500`; past it calls are refused 429 rate_limited with Retry-After.
    #[arg(long, value_name = "PER_SECOND[/BURST]", value_parser = super::queue::parse_rate_limit)]
    rate_limit: Option<super::queue::Bound<sluice_api::RateLimit>>,
    #[command(flatten)]
    client: ClientArgs,
}

/// List every key (revoked ones too), without secrets.
#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, clap::Args)]
struct IdArgs {
    /// The key's id (16 hex digits, as `sluice key list` shows; also inside the token).
    id: String,
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        KeyCommand::Create(args) => {
            let request = CreateKeyRequest {
                tenant: args.tenant,
                name: args.name,
                scopes: args.scopes,
                aws: args.aws,
                rate_limit: args.rate_limit.and_then(|b| b.0),
            };
            let created = args.client.client()?.create_key(&request).await?;
            if args.client.json {
                return output::json(&created);
            }
            println!("{}", created.key);
            if let (Some(id), Some(secret)) = (&created.api_key.aws_access_key_id, &created.aws_secret_access_key) {
                println!("AWS_ACCESS_KEY_ID={id}");
                println!("AWS_SECRET_ACCESS_KEY={secret}");
            }
            eprintln!(
                "made key {} (tenant {}, scopes {}): the line above is its token, shown only now; send it as `Authorization: Bearer <token>` or SLUICE_KEY",
                created.api_key.id,
                created.api_key.tenant,
                created.api_key.scopes.join(" ")
            );
            Ok(())
        }
        KeyCommand::List(args) => {
            let keys = args.client.client()?.list_keys().await?;
            if args.client.json {
                return output::json(&keys);
            }
            output::print_rows(
                &keys.keys,
                "no API keys: authentication is off until the first is made (`sluice key create`)",
                &["ID", "TENANT", "NAME", "SCOPES", "CREATED", "REVOKED"],
                &[],
                row,
            );
            Ok(())
        }
        KeyCommand::Get(args) => {
            let key = args.client.client()?.get_key(&args.id).await?;
            print_key(&key, args.client.json)
        }
        KeyCommand::Revoke(args) => {
            let key = args.client.client()?.revoke_key(&args.id).await?;
            if !args.client.json {
                eprintln!("revoked key {}: refused at once here and within a second on every node", key.id);
            }
            print_key(&key, args.client.json)
        }
    }
}

fn row(k: &ApiKey) -> Vec<String> {
    vec![
        k.id.clone(),
        k.tenant.clone(),
        k.name.clone(),
        k.scopes.join(" "),
        k.created_at.clone(),
        k.revoked_at.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

fn print_key(key: &ApiKey, json: bool) -> Result<()> {
    if json {
        return output::json(key);
    }
    output::print_table(&output::key_values(vec![
        ("id", key.id.clone()),
        ("tenant", key.tenant.clone()),
        ("name", key.name.clone()),
        ("scopes", key.scopes.join(" ")),
        ("aws access key", key.aws_access_key_id.clone().unwrap_or_else(|| "-".to_owned())),
        ("created", key.created_at.clone()),
        ("revoked", key.revoked_at.clone().unwrap_or_else(|| "no".to_owned())),
    ]));
    Ok(())
}

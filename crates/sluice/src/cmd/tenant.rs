//! `sluice tenant ...`: tenants' quotas.

use anyhow::Result;
use clap::Subcommand;
use sluice_api::{Tenant, TenantQuotas};

use super::ClientArgs;
use super::queue::{Bound, parse_bound, parse_rate_limit};
use crate::output;

/// Set and view tenants' quotas.
///
/// A tenant is the namespace of its keys' queues, topics and streams (`sluice key create --tenant T`):
/// other tenants never see them. Its quotas bound how many queues, topics and streams it has
/// (--max-resources), how many bytes its queues hold (--max-stored-bytes: sends and publishes
/// past it are refused, receives never are) and how many calls a second all its keys make
/// together (--rate-limit). Past one, calls are refused 429 quota_exceeded or rate_limited.
/// Managing tenants needs `admin:tenants:manage`; the default tenant has no quotas.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice tenant set acme --max-resources 50 --max-stored-bytes 1000000000 --rate-limit 200/400\n  sluice tenant set acme --rate-limit none\n  sluice tenant get acme\n  sluice tenant list"
)]
pub struct Args {
    #[command(subcommand)]
    command: TenantCommand,
}

#[derive(Debug, Subcommand)]
enum TenantCommand {
    Set(SetArgs),
    Get(NameArgs),
    List(ListArgs),
    Delete(NameArgs),
}

/// Set some of a tenant's quotas; the ones not given keep their values (`none` removes one).
#[derive(Debug, clap::Args)]
struct SetArgs {
    /// The tenant (`[a-z0-9-]`).
    name: String,
    /// Most queues, topics and streams the tenant may have.
    #[arg(long, value_name = "N|none", value_parser = parse_bound)]
    max_resources: Option<Bound>,
    /// Most bytes (bodies and attributes) its queues may hold.
    #[arg(long, value_name = "BYTES|none", value_parser = parse_bound)]
    max_stored_bytes: Option<Bound>,
    /// Calls a second of all its keys together: `PER_SECOND` or `PER_SECOND/BURST`.
    #[arg(long, value_name = "PER_SECOND[/BURST]|none", value_parser = parse_rate_limit)]
    rate_limit: Option<Bound<sluice_api::RateLimit>>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, clap::Args)]
struct NameArgs {
    /// The tenant.
    name: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// List every tenant with quotas, with what each holds.
#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    client: ClientArgs,
}

pub async fn run(args: Args) -> Result<()> {
    match args.command {
        TenantCommand::Set(args) => {
            let client = args.client.client()?;
            let mut quotas = client.get_tenant(&args.name).await?.quotas;
            merge(&mut quotas, args.max_resources, args.max_stored_bytes, args.rate_limit);
            let tenant = client.set_tenant(&args.name, &quotas).await?;
            print_tenant(&tenant, args.client.json)
        }
        TenantCommand::Get(args) => {
            let tenant = args.client.client()?.get_tenant(&args.name).await?;
            print_tenant(&tenant, args.client.json)
        }
        TenantCommand::List(args) => {
            let tenants = args.client.client()?.list_tenants().await?;
            if args.client.json {
                return output::json(&tenants);
            }
            output::print_rows(
                &tenants.tenants,
                "no tenant has quotas (`sluice tenant set TENANT --max-resources N` sets one)",
                &["TENANT", "RESOURCES", "MAX RESOURCES", "STORED BYTES", "MAX STORED BYTES", "RATE LIMIT"],
                &[1, 2, 3, 4],
                row,
            );
            Ok(())
        }
        TenantCommand::Delete(args) => {
            args.client.client()?.remove_tenant(&args.name).await?;
            eprintln!("removed the quotas of {} (its queues, topics and streams stay)", args.name);
            Ok(())
        }
    }
}

/// The flags given over the quotas the tenant has.
fn merge(
    quotas: &mut TenantQuotas,
    max_resources: Option<Bound>,
    max_stored_bytes: Option<Bound>,
    rate_limit: Option<Bound<sluice_api::RateLimit>>,
) {
    if let Some(Bound(value)) = max_resources {
        quotas.max_resources = value;
    }
    if let Some(Bound(value)) = max_stored_bytes {
        quotas.max_stored_bytes = value;
    }
    if let Some(Bound(value)) = rate_limit {
        quotas.rate_limit = value;
    }
}

fn rate(quotas: &TenantQuotas) -> String {
    quotas.rate_limit.map_or_else(|| "-".to_owned(), |r| format!("{}/s, burst {}", r.per_second, r.burst))
}

fn row(t: &Tenant) -> Vec<String> {
    vec![
        t.name.clone(),
        t.usage.resources.to_string(),
        output::count(t.quotas.max_resources),
        t.usage.stored_bytes.to_string(),
        output::count(t.quotas.max_stored_bytes),
        rate(&t.quotas),
    ]
}

fn print_tenant(tenant: &Tenant, json: bool) -> Result<()> {
    if json {
        return output::json(tenant);
    }
    output::print_table(&output::key_values(vec![
        ("tenant", tenant.name.clone()),
        ("resources", format!("{} of {}", tenant.usage.resources, output::count(tenant.quotas.max_resources))),
        ("stored bytes", format!("{} of {}", tenant.usage.stored_bytes, output::count(tenant.quotas.max_stored_bytes))),
        ("rate limit", rate(&tenant.quotas)),
        ("quotas set", tenant.updated_at.clone().unwrap_or_else(|| "never".to_owned())),
    ]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_change_only_the_quotas_they_name() {
        let limit = sluice_api::RateLimit { per_second: 5, burst: 10 };
        let mut quotas = TenantQuotas { max_resources: Some(3), max_stored_bytes: Some(100), rate_limit: Some(limit) };
        merge(&mut quotas, Some(Bound(Some(7))), None, Some(Bound(None)));
        assert_eq!(quotas, TenantQuotas { max_resources: Some(7), max_stored_bytes: Some(100), rate_limit: None });
    }
}

//! `sluice migrate`: apply the PostgreSQL backend's schema migrations without serving.

use anyhow::Result;

/// Create or upgrade Sluice's tables in a PostgreSQL database (`serve --store` also does this
/// at start). Safe to run from several machines at once.
///
/// Example:
///   sluice migrate --store postgres://postgres@127.0.0.1:5432/sluice
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The database, as `postgres://USER@HOST:PORT/DATABASE`.
    #[arg(long, env = "SLUICE_STORE", value_name = "URL")]
    store: String,
}

pub async fn run(args: Args) -> Result<()> {
    let report = sluice_postgres::migrate(&args.store).await?;
    if report.applied.is_empty() {
        println!("schema already at version {}", report.version);
    } else {
        println!("applied migrations {:?}; schema at version {}", report.applied, report.version);
    }
    Ok(())
}

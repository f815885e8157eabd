//! PostgreSQL's own limit on this machine, for the systems that run on it: pgbench's built-in
//! TPC-B-like script (three UPDATEs, a SELECT and an INSERT per transaction, one commit each)
//! in a scratch database created for it and dropped afterwards, at the server's own durability
//! settings, measured in the same run as the systems.

use std::time::Duration;

use anyhow::{Context, bail};

use super::postgres::{commit_settings, open};

/// pgbench's clients and threads (`-c`, `-j`) and how long it runs (`-T`).
pub(crate) const PGBENCH_CLIENTS: usize = 4;
pub(crate) const PGBENCH_THREADS: usize = 2;
pub(crate) const PGBENCH_DURATION: Duration = Duration::from_secs(10);
/// `pgbench -i -s`: one branch, ten tellers, 100,000 accounts.
const PGBENCH_SCALE: usize = 1;

/// What pgbench measured.
#[derive(Debug, Clone)]
pub(crate) struct Pgbench {
    pub tps: f64,
    /// e.g. "pgbench (PostgreSQL) 15.20", and the server's commit settings.
    pub version: String,
    pub durability_setting: String,
}

impl Pgbench {
    /// The command line, as the report prints it.
    pub fn command() -> String {
        format!(
            "pgbench -i -s {PGBENCH_SCALE}; pgbench -T {} -c {PGBENCH_CLIENTS} -j {PGBENCH_THREADS}",
            PGBENCH_DURATION.as_secs()
        )
    }
}

/// Runs pgbench against a scratch database on the server at `url` (`postgres://…/DB`).
pub(crate) async fn measure(url: &str) -> anyhow::Result<Pgbench> {
    let (admin, connection) = open(url).await.with_context(|| format!("connecting to PostgreSQL at {url}"))?;
    let commit = commit_settings(&admin).await?;
    let database = format!("sluice_pgbench_{}", crate::workload::run_nonce());
    admin.batch_execute(&format!("CREATE DATABASE {database}")).await.context("creating pgbench's database")?;
    let scratch = with_database(url, &database)?;
    let outcome = tokio::task::spawn_blocking(move || run_pgbench(&scratch)).await.context("pgbench panicked");
    let dropped = admin.batch_execute(&format!("DROP DATABASE {database}")).await;
    drop(admin);
    connection.await.context("the PostgreSQL connection task panicked")?;
    let (tps, version) = outcome??;
    dropped.with_context(|| format!("dropping database {database}"))?;
    Ok(Pgbench {
        tps,
        version: format!("{version}; server {}", commit.version),
        durability_setting: commit.durability_setting,
    })
}

/// Initialises and runs pgbench; returns its tps and `pgbench --version`.
fn run_pgbench(url: &str) -> anyhow::Result<(f64, String)> {
    let run = |args: &[String]| -> anyhow::Result<String> {
        let out = std::process::Command::new("pgbench")
            .args(args)
            .arg(url)
            .output()
            .context("running pgbench (is it installed and on PATH?)")?;
        if !out.status.success() {
            bail!("pgbench {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let version = std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    run(&["-i".into(), "-q".into(), "-s".into(), PGBENCH_SCALE.to_string()])?;
    let text = run(&[
        "-T".into(),
        PGBENCH_DURATION.as_secs().to_string(),
        "-c".into(),
        PGBENCH_CLIENTS.to_string(),
        "-j".into(),
        PGBENCH_THREADS.to_string(),
    ])?;
    let tps = tps(&text).with_context(|| format!("no tps in pgbench's output: {text}"))?;
    Ok((tps, version))
}

/// The rate from pgbench's "tps = 1234.5 (without initial connection time)" line.
fn tps(output: &str) -> Option<f64> {
    output.lines().find_map(|l| l.strip_prefix("tps = "))?.split_whitespace().next()?.parse().ok()
}

/// `url` with its database replaced by `database`: `postgres://USER@HOST:PORT/DB?QUERY`.
fn with_database(url: &str, database: &str) -> anyhow::Result<String> {
    let (rest, query) = url.split_once('?').map_or((url, ""), |(r, q)| (r, q));
    let Some(scheme_end) = rest.find("://") else { bail!("{url:?} is not a postgres:// URL") };
    let authority_and_path = &rest[scheme_end + 3..];
    let authority = authority_and_path.split('/').next().unwrap_or("");
    let mut out = format!("{}{authority}/{database}", &rest[..scheme_end + 3]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_is_replaced_and_the_rest_kept() {
        let check =
            |url: &str, expected: &str| assert_eq!(with_database(url, "scratch").ok().as_deref(), Some(expected));
        check("postgres://postgres@127.0.0.1:5432/test", "postgres://postgres@127.0.0.1:5432/scratch");
        check("postgres://u:p@h/test?sslmode=disable", "postgres://u:p@h/scratch?sslmode=disable");
        check("postgresql://h:5432", "postgresql://h:5432/scratch");
        assert!(with_database("host=h dbname=test", "scratch").is_err());
    }

    #[test]
    fn tps_is_read_from_pgbench_output() {
        let output = "latency average = 2.9 ms\ninitial connection time = 5.1 ms\ntps = 1371.263 (without initial connection time)\n";
        assert_eq!(tps(output), Some(1371.263));
        assert_eq!(tps("no figures"), None);
    }
}

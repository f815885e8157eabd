//! `sluice serve`: opens the embedded store, binds the port and serves the API until SIGINT or
//! SIGTERM, then finishes the requests in flight and syncs the store before exiting.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use crate::report::hinted;

/// Run the Sluice server.
///
/// Prints one line, `sluice listening on http://ADDR`, on stdout once it accepts connections
/// (with the real port when --addr ends in :0), and logs on stderr. SIGINT or SIGTERM stops it
/// gracefully: no new connections, requests in flight finish, the store is synced, exit 0.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sluice serve\n  sluice serve --addr 0.0.0.0:9324 --data-dir /var/lib/sluice --durability interval:10\n  SLUICE_LOG=debug sluice serve --addr 127.0.0.1:0"
)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "SLUICE_ADDR", default_value = "127.0.0.1:9324", value_name = "HOST:PORT")]
    addr: String,
    /// Directory of the embedded store; created if missing.
    #[arg(long, env = "SLUICE_DATA_DIR", default_value = "./sluice-data", value_name = "DIR")]
    data_dir: PathBuf,
    /// `fsync`: acknowledge a write after it is on disk. `interval:MS`: sync every MS
    /// milliseconds and acknowledge before (a power loss can lose up to MS of writes).
    #[arg(long, env = "SLUICE_DURABILITY", default_value = "fsync", value_name = "MODE", value_parser = parse_durability)]
    durability: Durability,
    /// Log filter: a level (error, warn, info, debug, trace) or directives such as
    /// `info,sluice_server=debug`.
    #[arg(long, env = "SLUICE_LOG", default_value = "info", value_name = "LEVEL")]
    log_level: String,
    /// Keep all state in PostgreSQL instead of the embedded store (`postgres://USER@HOST/DB`);
    /// any number of servers may share one database. Migrations run at start.
    #[arg(long, env = "SLUICE_STORE", value_name = "URL")]
    store: Option<String>,
    /// With --store: vacuum a churning table (messages, dedup, fair_groups) once it has more
    /// than ROWS dead rows, checked every second by one of the servers sharing the database,
    /// whatever the database's autovacuum does; 0 leaves vacuuming to autovacuum alone.
    #[arg(
        long,
        env = "SLUICE_PG_VACUUM_DEAD_ROWS",
        default_value_t = sluice_postgres::VACUUM_DEAD_ROWS_MAX_DEFAULT,
        value_name = "ROWS",
        requires = "store"
    )]
    pg_vacuum_dead_rows: u64,
    /// AWS account id in SQS queue URLs and ARNs, and in STS GetCallerIdentity.
    #[arg(long, env = "SLUICE_ACCOUNT", default_value = "000000000000", value_name = "ID")]
    account: String,
    /// AWS region in SQS ARNs.
    #[arg(long, env = "SLUICE_REGION", default_value = "us-east-1", value_name = "REGION")]
    region: String,
    /// Verify SigV4 signatures of SQS requests against this access key (repeatable). Without
    /// any, every request is accepted whatever it is signed with.
    #[arg(long = "access-key", env = "SLUICE_ACCESS_KEYS", value_name = "ID:SECRET", value_delimiter = ',')]
    access_keys: Vec<sluice_server::AccessKey>,
    /// How often the dashboard's history (`/v1/stats`) is sampled, in milliseconds (1,000 to
    /// 600,000); 360 samples are kept, an hour at the default.
    #[arg(
        long,
        env = "SLUICE_STATS_SAMPLE_MS",
        default_value_t = sluice_server::STATS_SAMPLE_MS_DEFAULT,
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1_000..=600_000)
    )]
    stats_sample_ms: u64,
    /// The secret job completion webhooks are signed with (HMAC-SHA256, as HTTP push). Without
    /// it one is made at first use and kept in the store, shared by every node; read it with
    /// `sluice job callback-secret`.
    #[arg(long, env = "SLUICE_JOB_CALLBACK_SECRET", value_name = "SECRET", hide_env_values = true)]
    job_callback_secret: Option<String>,
    /// How long the answer of a request sent with an `Idempotency-Key` is kept, so that a retry
    /// with the same key gets it instead of running again: a number and a unit (ms, s, m, h,
    /// d), 1 s to 30 d.
    #[arg(long, env = "SLUICE_IDEMPOTENCY_TTL", default_value = "24h", value_name = "DURATION", value_parser = parse_ttl)]
    idempotency_ttl: u64,
    /// Most idempotency answers kept at once; a request with a new key past it is refused (429
    /// `idempotency_keys_full`) until older keys expire, never by dropping a kept answer.
    #[arg(
        long,
        env = "SLUICE_IDEMPOTENCY_ENTRIES_MAX",
        default_value_t = sluice_server::idempotency_settings::ENTRIES_COUNT_MAX_DEFAULT,
        value_name = "COUNT"
    )]
    idempotency_entries_max: u64,
    /// Most bytes of idempotency answers kept at once, with the same refusal past it.
    #[arg(
        long,
        env = "SLUICE_IDEMPOTENCY_BYTES_MAX",
        default_value_t = sluice_server::idempotency_settings::ENTRIES_BYTES_MAX_DEFAULT,
        value_name = "BYTES"
    )]
    idempotency_bytes_max: u64,
    /// How long the causal trace keeps what carried a correlation id (`sluice trace ID`,
    /// `GET /v1/trace/{id}`): a number and a unit (ms, s, m, h, d), 1 s to 30 d.
    #[arg(long, env = "SLUICE_TRACE_RETENTION", default_value = "7d", value_name = "DURATION", value_parser = parse_ttl)]
    trace_retention: u64,
    /// Load shedding: refuse low-priority writes (503 shedding) once this many calls wait for
    /// the embedded store's writer; `off` to never shed on it. Priorities 0-2 are refused at the
    /// watermark, 3-6 at 1.25 times it, 7-9 never.
    #[arg(long, env = "SLUICE_SHED_BACKLOG", default_value = "20000", value_name = "CALLS|off", value_parser = parse_watermark)]
    shed_backlog: Option<Watermark>,
    /// Load shedding on the server's resident memory, in bytes (suffixes k, M, G); default 80%
    /// of the machine's memory; `off` to never shed on it.
    #[arg(long, env = "SLUICE_SHED_MEMORY", value_name = "BYTES|off", value_parser = parse_watermark)]
    shed_memory: Option<Watermark>,
    /// Load shedding on the data disk's free space, in bytes (suffixes k, M, G): shed below it;
    /// default 1G; `off` to never shed on it (embedded store).
    #[arg(long, env = "SLUICE_SHED_DISK_FREE", value_name = "BYTES|off", value_parser = parse_watermark)]
    shed_disk_free: Option<Watermark>,
    /// A file holding the bootstrap admin key (at least 24 characters; one line, surrounding
    /// whitespace ignored): a bearer token with every scope that is never stored, for making
    /// the first keys (`sluice key create`). `SLUICE_ADMIN_KEY` may hold the key itself instead.
    /// Either turns authentication on, as does any key in the store.
    #[arg(long, env = "SLUICE_ADMIN_KEY_FILE", value_name = "FILE")]
    admin_key_file: Option<PathBuf>,
    /// Let every call in without a key, whatever keys exist. Without it, a server bound to an
    /// address other than loopback refuses to start until it has an admin key or stored keys.
    #[arg(long, env = "SLUICE_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,
    /// Put `/metrics` behind the scope `admin:metrics:read` when keys are asked for (open by
    /// default, for scrapers).
    #[arg(long, env = "SLUICE_PROTECT_METRICS")]
    protect_metrics: bool,
    /// Put `/healthz` and `/readyz` behind the scope `admin:health:read` when keys are asked
    /// for (open by default, for load balancers).
    #[arg(long, env = "SLUICE_PROTECT_HEALTH")]
    protect_health: bool,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first); needs
    /// --tls-key. Both files are read again on SIGHUP, so a renewed certificate needs no restart.
    #[arg(long, env = "SLUICE_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "SLUICE_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Let the server's outbound calls (HTTP push, alert and job webhooks, saga steps) go only
    /// to these CIDRs or host patterns (repeatable or comma-separated, e.g. `10.0.0.0/8`,
    /// `*.hooks.example.com`). Link-local addresses (169.254.0.0/16, fe80::/10, where cloud
    /// metadata lives) are refused whatever this says.
    #[arg(long, env = "SLUICE_EGRESS_ALLOW", value_name = "CIDR|HOST", value_delimiter = ',')]
    egress_allow: Vec<sluice_server::egress::Rule>,
    /// Refuse outbound calls to these CIDRs or host patterns (repeatable or comma-separated).
    #[arg(long, env = "SLUICE_EGRESS_DENY", value_name = "CIDR|HOST", value_delimiter = ',')]
    egress_deny: Vec<sluice_server::egress::Rule>,
}

/// The certificate to serve, if asked for, and a SIGHUP handler that reads it again.
fn tls(args: &Args) -> Result<Option<Arc<sluice_server::tls::Tls>>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else { return Ok(None) };
    let tls = Arc::new(sluice_server::tls::Tls::load(cert, key).map_err(|e| {
        hinted(e.to_string(), "give PEM files: the certificate chain to --tls-cert, its private key to --tls-key")
    })?);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        let reloading = Arc::clone(&tls);
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                match reloading.reload() {
                    Ok(()) => tracing::info!("SIGHUP: TLS certificate read again; new connections get it"),
                    Err(e) => {
                        tracing::error!(error = %e, "SIGHUP: TLS certificate not reloaded; still serving the previous one")
                    }
                }
            }
        });
    }
    Ok(Some(tls))
}

/// Shortest bootstrap admin key taken.
const ADMIN_KEY_LEN_MIN: usize = 24;

/// The bootstrap admin key, from `--admin-key-file` or `SLUICE_ADMIN_KEY`.
fn admin_key(args: &Args) -> Result<Option<String>> {
    let key = match (&args.admin_key_file, std::env::var("SLUICE_ADMIN_KEY")) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| {
                hinted(
                    format!("cannot read --admin-key-file {}: {e}", path.display()),
                    "give a readable file holding the key",
                )
            })?
            .trim()
            .to_string(),
        (None, Ok(key)) => key.trim().to_string(),
        (None, Err(_)) => return Ok(None),
    };
    if key.len() < ADMIN_KEY_LEN_MIN || key.chars().any(char::is_whitespace) {
        return Err(hinted(
            format!(
                "the admin key is {} characters; it must be at least {ADMIN_KEY_LEN_MIN}, without spaces",
                key.len()
            ),
            "make one with `openssl rand -base64 32`",
        ));
    }
    Ok(Some(key))
}

/// Refuses to serve a network address with no way to authenticate: no admin key, no stored
/// key, and no `--insecure-no-auth`. Loopback is let in (a developer's own machine).
async fn check_exposure(args: &Args, addr: SocketAddr, admin: bool, store: &dyn Store) -> Result<()> {
    if args.insecure_no_auth {
        tracing::warn!(%addr, "authentication is off (--insecure-no-auth): anyone who reaches this address can do anything");
        return Ok(());
    }
    let stored = sluice_server::auth_settings::keys_exist(store)
        .await
        .map_err(|e| hinted(format!("cannot read the API keys: {e}"), "check the store"))?;
    if admin || stored {
        tracing::info!(
            admin_key = admin,
            stored_keys = stored,
            "authentication on: /v1 calls need `Authorization: Bearer <key>`"
        );
        return Ok(());
    }
    if !addr.ip().is_loopback() {
        return Err(hinted(
            format!("refusing to listen on {addr} without authentication: no admin key and no API keys"),
            "give --admin-key-file FILE (or SLUICE_ADMIN_KEY), or listen on 127.0.0.1, or pass --insecure-no-auth to let anyone in",
        ));
    }
    tracing::info!(%addr, "authentication off until the first key is made (loopback only); `sluice key create` makes one");
    Ok(())
}

/// A watermark flag's value: `None` for `off`. (A newtype, because clap reads a field of
/// `Option<Option<_>>` as a flag whose value may be left out.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watermark(Option<u64>);

/// A watermark: a number with an optional k, M or G suffix (powers of 1024), or `off`.
fn parse_watermark(s: &str) -> Result<Watermark, String> {
    if s == "off" {
        return Ok(Watermark(None));
    }
    let (digits, scale) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is not a number (with k, M or G) or `off`"))?;
    n.checked_mul(scale).map(|n| Watermark(Some(n))).ok_or_else(|| format!("{s} is too large"))
}

/// A duration as `--idempotency-ttl` and `--trace-retention` take it, in milliseconds.
fn parse_ttl(s: &str) -> Result<u64, String> {
    use sluice_server::idempotency_settings::{TTL_MS_MAX, TTL_MS_MIN};
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration such as 24h, 90m or 30s"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?} has no unit; write e.g. 24h, 90m, 30s or 1500ms")),
    };
    let ms = number.checked_mul(unit_ms).filter(|ms| (TTL_MS_MIN..=TTL_MS_MAX).contains(ms));
    ms.ok_or_else(|| format!("{s:?} is outside 1s to 30d"))
}

use sluice_server::idempotency_settings::IdempotencyConfig;

fn parse_durability(s: &str) -> Result<Durability, String> {
    s.parse()
}

pub async fn run(args: Args) -> Result<()> {
    init_logging(&args.log_level)?;
    let listener = bind(&args.addr).await?;
    let addr = listener.local_addr().context("reading the listening address")?;

    if let Some(url) = args.store.clone() {
        return serve_postgres(args, &url, listener, addr).await;
    }
    let config = EmbeddedConfig { data_dir: args.data_dir.clone(), durability: args.durability };
    // Opening replays the data directory, which is blocking disk work.
    let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
        .await
        .context("opening the store failed unexpectedly")?
        .map_err(|e| hinted(e.to_string(), e.hint()))?;
    let store = Arc::new(store);
    tracing::info!(%addr, data_dir = %args.data_dir.display(), durability = ?args.durability, "store open");
    let admin = admin_key(&args)?;
    check_exposure(&args, addr, admin.is_some(), store.as_ref()).await?;
    let tls = tls(&args)?;

    // Install the signal handlers before announcing, so a signal sent right after the
    // announcement is a graceful stop and not the default (immediate) death.
    let signals = Signals::install()?;
    announce(addr, tls.is_some())?;

    // One process per data directory (fjall locks it), so a lease held under this name was
    // held by an earlier run of this server, which is dead: take its relays back at once.
    let data_dir = std::fs::canonicalize(&args.data_dir).unwrap_or_else(|_| args.data_dir.clone());
    let config = sluice_server::ServerConfig {
        relay_node: Some(format!("embedded:{}", data_dir.display())),
        tls,
        ..server_config(&args, admin)
    };
    // The same reason: an idempotency claim in progress left by another process was left by
    // an earlier run, which died, so a retry of it runs at once.
    let config = sluice_server::ServerConfig {
        idempotency: IdempotencyConfig { single_process: true, ..config.idempotency.clone() },
        ..config
    };
    let served = sluice_server::run_with(listener, Arc::clone(&store) as Arc<dyn Store>, config, signals.first()).await;
    tracing::info!("stopped accepting; syncing the store");
    // Close even when serving failed: the last batch of acknowledged writes must reach disk.
    let closing = Arc::clone(&store);
    tokio::task::spawn_blocking(move || closing.close()).await.context("closing the store failed unexpectedly")?;
    served.context("serving failed")?;
    tracing::info!("stopped");
    Ok(())
}

fn server_config(args: &Args, admin_token: Option<String>) -> sluice_server::ServerConfig {
    if !args.access_keys.is_empty() {
        tracing::info!(keys = args.access_keys.len(), "verifying SigV4 signatures of AWS requests");
    }
    sluice_server::ServerConfig {
        account: args.account.clone(),
        region: args.region.clone(),
        access_keys: args.access_keys.clone(),
        stats_sample_ms: args.stats_sample_ms,
        job_callback_secret: args.job_callback_secret.clone(),
        shed: shed_config(args),
        idempotency: IdempotencyConfig {
            ttl_ms: args.idempotency_ttl,
            entries_count_max: args.idempotency_entries_max,
            entries_bytes_max: args.idempotency_bytes_max,
            ..IdempotencyConfig::default()
        },
        trace_retention_ms: args.trace_retention,
        auth: sluice_server::auth_settings::AuthConfig { admin_token, disabled: args.insecure_no_auth },
        protected: sluice_server::Protected { metrics: args.protect_metrics, health: args.protect_health },
        egress: sluice_server::egress::Egress::new(args.egress_allow.clone(), args.egress_deny.clone()),
        ..sluice_server::ServerConfig::default()
    }
}

/// The watermarks: flags given, `off` as off, the machine's defaults for the others. Only the
/// embedded store has a data disk and a writer backlog to watch.
fn shed_config(args: &Args) -> sluice_server::ShedConfig {
    let embedded = args.store.is_none();
    let defaults = sluice_server::ShedConfig {
        backlog_max: args.shed_backlog.and_then(|w| w.0).filter(|_| embedded),
        memory_bytes_max: args.shed_memory.and_then(|w| w.0),
        disk_free_bytes_min: args.shed_disk_free.and_then(|w| w.0),
        data_dir: embedded.then(|| args.data_dir.clone()),
        ..sluice_server::ShedConfig::default()
    }
    .with_machine_defaults();
    let config = sluice_server::ShedConfig {
        memory_bytes_max: if args.shed_memory == Some(Watermark(None)) { None } else { defaults.memory_bytes_max },
        disk_free_bytes_min: match args.shed_disk_free {
            Some(Watermark(None)) => None,
            _ if !embedded => None,
            _ => defaults.disk_free_bytes_min,
        },
        ..defaults
    };
    tracing::info!(
        backlog = ?config.backlog_max, memory_bytes = ?config.memory_bytes_max, disk_free_bytes = ?config.disk_free_bytes_min,
        "load shedding watermarks"
    );
    config
}

/// `serve --store postgres://…`: every write is committed by PostgreSQL before it is
/// acknowledged, so there is nothing to sync at shutdown.
async fn serve_postgres(args: Args, url: &str, listener: TcpListener, addr: SocketAddr) -> Result<()> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(hinted(
            format!("--store {url:?} is not a PostgreSQL URL"),
            "give postgres://USER@HOST:PORT/DATABASE, or leave --store out for the embedded store",
        ));
    }
    let options = sluice_postgres::PostgresOptions {
        vacuum_dead_rows_max: args.pg_vacuum_dead_rows,
        ..sluice_postgres::PostgresOptions::default()
    };
    let store = sluice_postgres::PostgresStore::connect(url, options).await.map_err(|e| {
        hinted(format!("cannot use PostgreSQL: {e}"), "check that the database is up and the URL is right")
    })?;
    tracing::info!(%addr, vacuum_dead_rows_max = args.pg_vacuum_dead_rows, "PostgreSQL store open");
    let admin = admin_key(&args)?;
    check_exposure(&args, addr, admin.is_some(), &store).await?;
    let tls = tls(&args)?;
    let signals = Signals::install()?;
    announce(addr, tls.is_some())?;
    let config = sluice_server::ServerConfig { tls, ..server_config(&args, admin) };
    let served = sluice_server::run_with(listener, Arc::new(store) as Arc<dyn Store>, config, signals.first()).await;
    served.context("serving failed")?;
    tracing::info!("stopped");
    Ok(())
}

fn init_logging(filter: &str) -> Result<()> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|e| hinted(format!("invalid --log-level {filter:?}: {e}"), "use a level such as info or debug"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

async fn bind(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => hinted(
            format!("address {addr} is already in use"),
            "another server (maybe another `sluice serve`) listens there; stop it or choose another address with --addr",
        ),
        std::io::ErrorKind::PermissionDenied => hinted(
            format!("not allowed to listen on {addr}"),
            "ports below 1024 need privileges; choose another with --addr",
        ),
        _ => hinted(format!("cannot listen on {addr}: {e}"), "pass --addr as HOST:PORT, e.g. --addr 127.0.0.1:9324"),
    })
}

/// The one line scripts and tests wait for.
fn announce(addr: SocketAddr, tls: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let scheme = if tls { "https" } else { "http" };
    writeln!(out, "sluice listening on {scheme}://{addr}").context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
    Ok(())
}

/// SIGINT and SIGTERM, registered up front. The first one starts a graceful shutdown; a second
/// one exits at once for an operator who does not want to wait for long polls to finish.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    #[cfg(not(unix))]
    fn install() -> Result<Signals> {
        Ok(Signals {})
    }

    #[cfg(unix)]
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }

    #[cfg(not(unix))]
    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }

    /// Resolves on the first signal and arms the second.
    async fn first(mut self) {
        let name = self.next().await;
        tracing::info!("{name} received: finishing requests in flight (send it again to exit at once)");
        tokio::spawn(async move {
            let name = self.next().await;
            tracing::warn!("{name} received again: exiting without waiting");
            std::process::exit(1);
        });
    }
}

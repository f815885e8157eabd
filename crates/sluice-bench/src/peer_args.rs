//! The peers scenario's command-line flags. They are parsed in every build, with or without the
//! `peers` feature, so that `sluice bench --help` and scripts see one set of flags; a build without
//! the feature refuses the scenario itself (`Plan::new`), not its flags.

use std::path::PathBuf;

/// Command-line settings of the peers scenario, flattened into `BenchArgs`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Peers scenario (--scenario peers)")]
pub struct PeerArgs {
    /// Systems to measure, comma-separated: families (sluice, sluice-pg, rabbitmq, nats, redis,
    /// postgres) or names (sluice-fsync, sluice-interval, sluice-sqs, sluice-pg, sluice-pg-3nodes,
    /// rabbitmq-classic, rabbitmq-quorum, nats-default, nats-always, redis-default, redis-always,
    /// postgres) [default: all].
    #[arg(long, value_delimiter = ',', value_name = "SYSTEMS")]
    pub only: Vec<String>,

    /// Message sizes in bytes, one workload each [default: 256,4096, or 256 with --quick].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub sizes: Vec<usize>,

    /// Client counts, one workload each: N means N producers and N consumers [default: 1,4,16,
    /// or 4 with --quick].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub clients: Vec<usize>,

    /// Messages loaded, then consumed, by the backlog-drain workload, run at the first size with
    /// 4 producers and 4 consumers (or the first client count without 4); 0 skips it
    /// [default: 1000000, or 20000 with --quick].
    #[arg(long, value_name = "MESSAGES")]
    pub drain_messages: Option<u64>,

    /// Also draw the max-rate results as an SVG chart in FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// Sync interval of Sluice's `interval` mode, in milliseconds [default: 10].
    #[arg(long, value_name = "MS")]
    pub sluice_interval_ms: Option<u64>,

    /// RabbitMQ to measure [default: amqp://guest:guest@127.0.0.1:5672/%2f].
    #[arg(long, value_name = "URL")]
    pub rabbitmq_url: Option<String>,

    /// NATS server with JetStream to measure at its default sync [default: nats://127.0.0.1:4222].
    #[arg(long, value_name = "URL")]
    pub nats_url: Option<String>,

    /// Redis to measure as configured [default: redis://127.0.0.1:6379/].
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// PostgreSQL database for the queue tables, Sluice's PostgreSQL store (a fresh schema) and
    /// pgbench (a scratch database beside it) [default: postgres://postgres@127.0.0.1:5432/test].
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
}

impl PeerArgs {
    /// The flags given, for refusing them outside the peers scenario.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let flags = [
            ("--only", !self.only.is_empty()),
            ("--sizes", !self.sizes.is_empty()),
            ("--clients", !self.clients.is_empty()),
            ("--drain-messages", self.drain_messages.is_some()),
            ("--svg", self.svg.is_some()),
            ("--sluice-interval-ms", self.sluice_interval_ms.is_some()),
            ("--rabbitmq-url", self.rabbitmq_url.is_some()),
            ("--nats-url", self.nats_url.is_some()),
            ("--redis-url", self.redis_url.is_some()),
            ("--postgres-url", self.postgres_url.is_some()),
        ];
        flags.into_iter().filter(|(_, given)| *given).map(|(flag, _)| flag).collect()
    }
}

//! The streams scenario's settings (`--scenario streams`), checked, with defaults resolved: a
//! module of its own so that the scenario (`streams/`) and its peer drivers
//! (`peers/streams.rs`) both read it without importing each other.

/// Records of the replay and restart stream when `--stream-records` is not given (the issue's
/// figure), and with `--quick`.
pub(crate) const STREAM_RECORDS_DEFAULT: u64 = 10_000_000;
pub(crate) const STREAM_RECORDS_QUICK: u64 = 1_000_000;
/// Most records of the replay stream: each takes disk in the temporary directory.
pub(crate) const STREAM_RECORDS_MAX: u64 = 100_000_000;
/// Records the consume phase preloads and drains.
const CONSUME_RECORDS_DEFAULT: u64 = 1_000_000;
const CONSUME_RECORDS_QUICK: u64 = 50_000;
/// The end-to-end phase's total rate, the same for every system so that latencies compare.
const E2E_RATE_DEFAULT: f64 = 5_000.0;
/// The streams scenario's settings, checked, with defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct StreamPlan {
    pub records: u64,
    pub sizes: Vec<usize>,
    pub batches: Vec<usize>,
    pub consume_records: u64,
    pub e2e_rate: f64,
    /// `--only`, resolved by `peers::streams::select`.
    pub only: Vec<String>,
    pub sluice_interval_ms: u64,
    pub rabbitmq_url: String,
    pub nats_url: String,
    pub redis_url: String,
}

impl StreamPlan {
    pub(crate) fn new(
        args: &crate::PeerArgs,
        records: Option<u64>,
        batches: &[u32],
        quick: bool,
    ) -> Result<StreamPlan, String> {
        let records = records.unwrap_or(if quick { STREAM_RECORDS_QUICK } else { STREAM_RECORDS_DEFAULT });
        if records == 0 || records > STREAM_RECORDS_MAX {
            return Err(format!("--stream-records {records}: use 1 to {STREAM_RECORDS_MAX}"));
        }
        for (flag, given) in [("--clients", !args.clients.is_empty()), ("--svg", args.svg.is_some())] {
            if given {
                return Err(format!("{flag} does not apply to the streams scenario (4 producers and 4 consumers)"));
            }
        }
        if args.postgres_url.is_some() {
            return Err("--postgres-url does not apply to the streams scenario".into());
        }
        let sizes = if args.sizes.is_empty() { vec![256, 4096] } else { args.sizes.clone() };
        if let Some(bad) = sizes.iter().find(|&&s| !(crate::BODY_BYTES_MIN..=(1 << 20)).contains(&s)) {
            return Err(format!("--sizes {bad}: use {} to 1048576", crate::BODY_BYTES_MIN));
        }
        let batches = if batches.is_empty() { vec![1, 10, 100] } else { batches.iter().map(|&b| b as usize).collect() };
        Ok(StreamPlan {
            records,
            sizes,
            batches,
            consume_records: args.drain_messages.unwrap_or(if quick {
                CONSUME_RECORDS_QUICK
            } else {
                CONSUME_RECORDS_DEFAULT
            }),
            e2e_rate: E2E_RATE_DEFAULT,
            only: args.only.clone(),
            sluice_interval_ms: args.sluice_interval_ms.unwrap_or(10),
            rabbitmq_url: args.rabbitmq_url.clone().unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into()),
            nats_url: args.nats_url.clone().unwrap_or_else(|| "nats://127.0.0.1:4222".into()),
            redis_url: args.redis_url.clone().unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
        })
    }
}

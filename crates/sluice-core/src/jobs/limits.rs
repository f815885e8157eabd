//! Every limit of the jobs API, named with its unit last, and the per-queue budget of finished
//! jobs ([`JobLimits`]). Each is checked before anything is allocated for the request it
//! guards; the README's "Jobs" section lists them.

/// Job queue names: as queue names, 1 to 80 ASCII letters, digits, `-` and `_`.
pub const JOB_QUEUE_NAME_LEN_MAX: usize = 80;
/// Job types: 1 to 128 bytes of ASCII letters, digits and `-_.:/`.
pub const JOB_TYPE_LEN_MAX: usize = 128;
/// The payload, the result and the progress, as JSON text.
pub const JOB_PAYLOAD_BYTES_MAX: usize = 1024 * 1024;
pub const JOB_RESULT_BYTES_MAX: usize = 1024 * 1024;
pub const JOB_PROGRESS_BYTES_MAX: usize = 64 * 1024;
/// A failure's error text.
pub const JOB_ERROR_BYTES_MAX: usize = 4 * 1024;
/// Tags: how many per job and the longest (bytes of ASCII letters, digits and `-_.:=/`).
pub const JOB_TAGS_MAX: usize = 10;
pub const JOB_TAG_LEN_MAX: usize = 64;
/// A unique key, in bytes of UTF-8, and how long it holds (default and longest).
pub const JOB_UNIQUE_KEY_LEN_MAX: usize = 255;
pub const JOB_UNIQUE_FOR_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;
pub const JOB_UNIQUE_FOR_MS_MAX: u64 = 30 * 24 * 60 * 60 * 1000;
/// A callback URL, in bytes.
pub const JOB_CALLBACK_URL_LEN_MAX: usize = 2_048;
/// Attempts: default and most.
pub const JOB_MAX_ATTEMPTS_DEFAULT: u32 = 3;
pub const JOB_MAX_ATTEMPTS_MAX: u32 = 1_000;
/// Backoff between attempts: defaults and bounds of `initial_ms`, `max_ms` and `multiplier`.
pub const JOB_BACKOFF_INITIAL_MS_DEFAULT: u64 = 1_000;
pub const JOB_BACKOFF_MAX_MS_DEFAULT: u64 = 5 * 60 * 1000;
pub const JOB_BACKOFF_MS_MAX: u64 = 24 * 60 * 60 * 1000;
pub const JOB_BACKOFF_MULTIPLIER_DEFAULT: f64 = 2.0;
pub const JOB_BACKOFF_MULTIPLIER_MAX: f64 = 10.0;
/// The longest one attempt may run (`timeout_ms`); without one, only the lease bounds it.
pub const JOB_TIMEOUT_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// How long a finished job and its result are kept (`result_ttl_ms`): default and longest.
pub const JOB_RESULT_TTL_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;
pub const JOB_RESULT_TTL_MS_MAX: u64 = 30 * 24 * 60 * 60 * 1000;
/// The furthest a job may be delayed (`delay_ms`, or `run_at` from now).
pub const JOB_DELAY_MS_MAX: u64 = 365 * 24 * 60 * 60 * 1000;
/// A claim's lease (`lease_ms`): default and bounds; each heartbeat extends it by as much.
pub const JOB_LEASE_MS_DEFAULT: u64 = 30_000;
pub const JOB_LEASE_MS_MIN: u64 = 100;
pub const JOB_LEASE_MS_MAX: u64 = 12 * 60 * 60 * 1000;
/// One claim: most jobs, most queues and types named, longest long poll.
pub const JOB_CLAIM_MAX: u32 = 100;
pub const JOB_CLAIM_QUEUES_MAX: usize = 16;
pub const JOB_CLAIM_TYPES_MAX: usize = 16;
pub const JOB_WAIT_MS_MAX: u64 = 20_000;
/// One list page: default and most jobs.
pub const JOB_LIST_LIMIT_DEFAULT: u32 = 100;
pub const JOB_LIST_LIMIT_MAX: u32 = 1_000;
/// Per queue: result bytes of finished jobs kept at most, and finished jobs kept at most.
pub const JOB_RESULT_BYTES_PER_QUEUE_MAX_DEFAULT: u64 = 256 * 1024 * 1024;
pub const JOB_FINISHED_PER_QUEUE_MAX_DEFAULT: u64 = 1_000_000;

/// The budget of a queue's finished jobs. Finishing a job that would take its queue past
/// either bound prunes the queue's oldest finished jobs first, so that a backlog of finished
/// jobs can never fill memory or disk unnoticed (every pruned job is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Result bytes of a queue's finished jobs (a single result larger than this is kept,
    /// alone: the newest finished job is never pruned to make room for itself).
    pub result_bytes_per_queue_max: u64,
    /// Finished jobs of a queue; at least 1.
    pub finished_per_queue_max: u64,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            result_bytes_per_queue_max: JOB_RESULT_BYTES_PER_QUEUE_MAX_DEFAULT,
            finished_per_queue_max: JOB_FINISHED_PER_QUEUE_MAX_DEFAULT,
        }
    }
}

impl JobLimits {
    /// The limits with the count raised to 1 at least (the newest finished job is kept).
    pub fn sane(self) -> JobLimits {
        JobLimits { finished_per_queue_max: self.finished_per_queue_max.max(1), ..self }
    }
}

//! Every saga limit, named with its unit last.

/// A saga's name: 1 to this many characters of `[A-Za-z0-9_.-]`.
pub const SAGA_NAME_LEN_MAX: usize = 80;
/// Steps in one definition.
pub const SAGA_STEPS_MAX: usize = 32;
/// A step's name: 1 to this many characters of `[a-z0-9_]`, so that a template can name it
/// (`{{steps.reserve.output.id}}`).
pub const SAGA_STEP_NAME_LEN_MAX: usize = 64;
/// Versions of one saga kept (a running instance keeps the version it started with).
pub const SAGA_VERSIONS_MAX: u32 = 1_000;
/// An HTTP step's URL.
pub const SAGA_URL_LEN_MAX: usize = 2_048;
/// A step's body template, as JSON text.
pub const SAGA_BODY_BYTES_MAX: usize = 64 * 1024;
/// An instance's input, and a step's output, as JSON text. With every output of an instance
/// together bounded too, an instance (kept as one store record of at most 1 MiB) always fits.
pub const SAGA_INPUT_BYTES_MAX: usize = 128 * 1024;
pub const SAGA_OUTPUT_BYTES_MAX: usize = 128 * 1024;
pub const SAGA_OUTPUTS_BYTES_MAX: usize = 512 * 1024;
/// A step's error text (longer ones are cut, not refused: a participant's error must never be
/// the reason its failure is lost).
pub const SAGA_ERROR_BYTES_MAX: usize = 4 * 1024;
/// Attempts of one action or compensation.
pub const SAGA_STEP_ATTEMPTS_DEFAULT: u32 = 3;
pub const SAGA_STEP_ATTEMPTS_MAX: u32 = 100;
/// How long one attempt may take before it counts as failed.
pub const SAGA_STEP_TIMEOUT_MS_DEFAULT: u64 = 30_000;
pub const SAGA_STEP_TIMEOUT_MS_MAX: u64 = 24 * 60 * 60 * 1000;
/// A compensation that keeps failing is retried this many times in all before the instance is
/// `failed` (a person must look); `retry_compensation` starts a new round.
pub const SAGA_COMPENSATION_ATTEMPTS_DEFAULT: u32 = 10;
/// Attempts an instance remembers per step (older ones are summarised by the count), and the
/// error text each remembered attempt keeps.
pub const SAGA_ATTEMPTS_KEPT_MAX: usize = 5;
pub const SAGA_ATTEMPT_ERROR_BYTES_MAX: usize = 512;
/// A correlation id: 1 to this many visible ASCII characters.
pub const SAGA_CORRELATION_ID_LEN_MAX: usize = 128;
/// Instances running (not yet settled) at once, across the whole store: what the orchestrator
/// looks through for due work is bounded by it.
pub const SAGA_ACTIVE_MAX: usize = 10_000;

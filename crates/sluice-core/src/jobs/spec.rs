//! What an enqueue and a claim ask for, and the rules they must keep.

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::limits::*;
use crate::TimeMs;
use crate::backoff::full_jitter_ms;
use crate::limits::PRIORITY_MAX;
use crate::validation::ValidationError;

/// How a retry's delay is drawn from its bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Jitter {
    /// Uniform between zero and the bound (spreads the retries of jobs that failed together).
    #[default]
    Full,
    /// Exactly the bound.
    None,
}

impl Jitter {
    pub const fn as_str(self) -> &'static str {
        match self {
            Jitter::Full => "full",
            Jitter::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Jitter> {
        match s {
            "full" => Some(Jitter::Full),
            "none" => Some(Jitter::None),
            _ => None,
        }
    }
}

/// The spacing of a job's retries: the delay before retry `k` (0 for the first) is bounded by
/// `min(max_ms, initial_ms · multiplier^k)`, drawn by `jitter`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JobBackoff {
    pub initial_ms: u64,
    pub max_ms: u64,
    pub multiplier: f64,
    pub jitter: Jitter,
}

impl Default for JobBackoff {
    fn default() -> Self {
        JobBackoff {
            initial_ms: JOB_BACKOFF_INITIAL_MS_DEFAULT,
            max_ms: JOB_BACKOFF_MAX_MS_DEFAULT,
            multiplier: JOB_BACKOFF_MULTIPLIER_DEFAULT,
            jitter: Jitter::Full,
        }
    }
}

impl JobBackoff {
    /// The bound of retry `retry`'s delay (0 for the first retry).
    pub fn bound_ms(&self, retry: u32) -> u64 {
        let grown = self.initial_ms as f64 * self.multiplier.powi(retry.min(i32::MAX as u32) as i32);
        if grown.is_finite() && grown < self.max_ms as f64 { grown as u64 } else { self.max_ms }
    }

    /// The delay before retry `retry`, given a uniform random `draw` in `0..=u64::MAX`.
    pub fn delay_ms(&self, retry: u32, draw: u64) -> u64 {
        let bound = self.bound_ms(retry);
        match self.jitter {
            Jitter::Full => full_jitter_ms(bound, draw),
            Jitter::None => bound,
        }
    }

    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.initial_ms == 0 || self.initial_ms > JOB_BACKOFF_MS_MAX {
            return Err(ValidationError::new("backoff.initial_ms", format!("must be 1 to {JOB_BACKOFF_MS_MAX}")));
        }
        if self.max_ms < self.initial_ms || self.max_ms > JOB_BACKOFF_MS_MAX {
            return Err(ValidationError::new(
                "backoff.max_ms",
                format!("must be from backoff.initial_ms to {JOB_BACKOFF_MS_MAX}"),
            ));
        }
        if !(1.0..=JOB_BACKOFF_MULTIPLIER_MAX).contains(&self.multiplier) {
            return Err(ValidationError::new(
                "backoff.multiplier",
                format!("must be 1 to {JOB_BACKOFF_MULTIPLIER_MAX}"),
            ));
        }
        Ok(())
    }
}

/// An enqueue, as the API hands it to a store. Optional fields take the defaults of
/// `limits` (see [`NewJob::validate`] for every rule).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewJob {
    pub queue: String,
    pub job_type: String,
    /// JSON text.
    pub payload: Vec<u8>,
    pub priority: u8,
    /// Claimable this long after the enqueue (or at `run_at`; not both).
    pub delay_ms: Option<u64>,
    pub run_at: Option<TimeMs>,
    pub timeout_ms: Option<u64>,
    pub max_attempts: Option<u32>,
    pub backoff: JobBackoff,
    pub unique_key: Option<String>,
    pub unique_for_ms: Option<u64>,
    pub callback_url: Option<String>,
    pub result_ttl_ms: Option<u64>,
    pub tags: Vec<String>,
}

impl NewJob {
    /// Checks every field; `now` bounds `run_at`.
    pub fn validate(&self, now: TimeMs) -> Result<(), ValidationError> {
        validate_job_queue(&self.queue, "queue")?;
        validate_job_type(&self.job_type, "type")?;
        if self.payload.len() > JOB_PAYLOAD_BYTES_MAX {
            return Err(ValidationError::new("payload", format!("at most {JOB_PAYLOAD_BYTES_MAX} bytes of JSON")));
        }
        if self.priority > PRIORITY_MAX {
            return Err(ValidationError::new("priority", format!("must be 0 to {PRIORITY_MAX}")));
        }
        match (self.delay_ms, self.run_at) {
            (Some(_), Some(_)) => return Err(ValidationError::new("run_at", "give delay_ms or run_at, not both")),
            (Some(delay), None) if delay > JOB_DELAY_MS_MAX => {
                return Err(ValidationError::new("delay_ms", format!("must be at most {JOB_DELAY_MS_MAX}")));
            }
            (None, Some(at)) if at > now.saturating_add(JOB_DELAY_MS_MAX) => {
                return Err(ValidationError::new("run_at", format!("must be within {JOB_DELAY_MS_MAX} ms from now")));
            }
            _ => {}
        }
        if let Some(t) = self.timeout_ms
            && (t == 0 || t > JOB_TIMEOUT_MS_MAX)
        {
            return Err(ValidationError::new("timeout_ms", format!("must be 1 to {JOB_TIMEOUT_MS_MAX}")));
        }
        if let Some(n) = self.max_attempts
            && (n == 0 || n > JOB_MAX_ATTEMPTS_MAX)
        {
            return Err(ValidationError::new("max_attempts", format!("must be 1 to {JOB_MAX_ATTEMPTS_MAX}")));
        }
        self.backoff.validate()?;
        match (&self.unique_key, self.unique_for_ms) {
            (None, Some(_)) => return Err(ValidationError::new("unique_for_ms", "needs a unique_key")),
            (Some(key), _) if key.is_empty() || key.len() > JOB_UNIQUE_KEY_LEN_MAX => {
                return Err(ValidationError::new("unique_key", format!("must be 1 to {JOB_UNIQUE_KEY_LEN_MAX} bytes")));
            }
            (_, Some(ms)) if ms == 0 || ms > JOB_UNIQUE_FOR_MS_MAX => {
                return Err(ValidationError::new("unique_for_ms", format!("must be 1 to {JOB_UNIQUE_FOR_MS_MAX}")));
            }
            _ => {}
        }
        if let Some(url) = &self.callback_url {
            validate_callback_url(url)?;
        }
        if let Some(ttl) = self.result_ttl_ms
            && (ttl == 0 || ttl > JOB_RESULT_TTL_MS_MAX)
        {
            return Err(ValidationError::new("result_ttl_ms", format!("must be 1 to {JOB_RESULT_TTL_MS_MAX}")));
        }
        validate_tags(&self.tags)
    }

    /// When the job first becomes claimable.
    pub fn run_at(&self, now: TimeMs) -> TimeMs {
        match (self.delay_ms, self.run_at) {
            (_, Some(at)) => at.max(now),
            (Some(delay), None) => now.saturating_add(delay),
            (None, None) => now,
        }
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(JOB_MAX_ATTEMPTS_DEFAULT)
    }

    pub fn result_ttl_ms(&self) -> u64 {
        self.result_ttl_ms.unwrap_or(JOB_RESULT_TTL_MS_DEFAULT)
    }

    pub fn unique_for_ms(&self) -> u64 {
        self.unique_for_ms.unwrap_or(JOB_UNIQUE_FOR_MS_DEFAULT)
    }
}

/// A claim's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    /// The queues to take jobs from (1 to `JOB_CLAIM_QUEUES_MAX`).
    pub queues: Vec<String>,
    /// Only jobs of these types; every type when empty.
    pub types: Vec<String>,
    pub max: u32,
    pub lease_ms: u64,
}

impl ClaimSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.queues.is_empty() || self.queues.len() > JOB_CLAIM_QUEUES_MAX {
            return Err(ValidationError::new("queues", format!("name 1 to {JOB_CLAIM_QUEUES_MAX} queues")));
        }
        for (i, q) in self.queues.iter().enumerate() {
            validate_job_queue(q, &format!("queues[{i}]"))?;
        }
        if self.types.len() > JOB_CLAIM_TYPES_MAX {
            return Err(ValidationError::new("types", format!("name at most {JOB_CLAIM_TYPES_MAX} types")));
        }
        for (i, t) in self.types.iter().enumerate() {
            validate_job_type(t, &format!("types[{i}]"))?;
        }
        if self.max == 0 || self.max > JOB_CLAIM_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {JOB_CLAIM_MAX}")));
        }
        validate_lease_ms(self.lease_ms, "lease_ms")
    }
}

pub fn validate_lease_ms(lease_ms: u64, field: &str) -> Result<(), ValidationError> {
    if !(JOB_LEASE_MS_MIN..=JOB_LEASE_MS_MAX).contains(&lease_ms) {
        return Err(ValidationError::new(field, format!("must be {JOB_LEASE_MS_MIN} to {JOB_LEASE_MS_MAX}")));
    }
    Ok(())
}

/// A job queue's stored name: 1 to `JOB_QUEUE_NAME_LEN_MAX` of `[A-Za-z0-9_-]`, after its
/// tenant if it has one (`acme~reports`, see `crate::name`).
pub fn validate_job_queue(name: &str, field: &str) -> Result<(), ValidationError> {
    // A bad tenant leaves the separator in, which the rule below refuses.
    let name = crate::name::without_tenant(name).unwrap_or(name);
    let ok = !name.is_empty()
        && name.len() <= JOB_QUEUE_NAME_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("a job queue name is 1 to {JOB_QUEUE_NAME_LEN_MAX} ASCII letters, digits, '-' and '_'"),
        ))
    }
}

pub fn validate_job_type(name: &str, field: &str) -> Result<(), ValidationError> {
    let ok = !name.is_empty()
        && name.len() <= JOB_TYPE_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("a job type is 1 to {JOB_TYPE_LEN_MAX} ASCII letters, digits and '-_.:/'"),
        ))
    }
}

fn validate_tags(tags: &[String]) -> Result<(), ValidationError> {
    if tags.len() > JOB_TAGS_MAX {
        return Err(ValidationError::new("tags", format!("at most {JOB_TAGS_MAX} tags")));
    }
    for (i, tag) in tags.iter().enumerate() {
        validate_tag(tag, &format!("tags[{i}]"))?;
    }
    Ok(())
}

pub fn validate_tag(tag: &str, field: &str) -> Result<(), ValidationError> {
    let ok = !tag.is_empty()
        && tag.len() <= JOB_TAG_LEN_MAX
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:=/".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(field, format!("a tag is 1 to {JOB_TAG_LEN_MAX} ASCII letters, digits and '-_.:=/'")))
    }
}

/// A callback URL: `http://` or `https://` with a host, at most `JOB_CALLBACK_URL_LEN_MAX`
/// bytes, and not a link-local or cloud-metadata address (169.254.0.0/16, fe80::/10,
/// `metadata.google.internal`), which outbound calls never reach (DESIGN.md, "Auth").
pub fn validate_callback_url(url: &str) -> Result<(), ValidationError> {
    let invalid = |why: &str| ValidationError::new("callback_url", why.to_string());
    if url.len() > JOB_CALLBACK_URL_LEN_MAX {
        return Err(invalid(&format!("at most {JOB_CALLBACK_URL_LEN_MAX} bytes")));
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| invalid("must start with http:// or https://"))?;
    if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(invalid("must not contain spaces or control characters"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("").to_ascii_lowercase()
    } else {
        host_port.split(':').next().unwrap_or("").to_ascii_lowercase()
    };
    if host.is_empty() {
        return Err(invalid("needs a host"));
    }
    let link_local_v4 = host.starts_with("169.254.");
    let link_local_v6 = ["fe8", "fe9", "fea", "feb"].iter().any(|p| host.starts_with(p)) && host.contains(':');
    if link_local_v4 || link_local_v6 || host == "metadata.google.internal" {
        return Err(invalid("link-local and cloud-metadata addresses are refused"));
    }
    Ok(())
}

/// The key a unique key is held under: 16 bytes of the SHA-256 of the queue and the key, so
/// that memory holds a fixed size per key whatever its length.
pub fn unique_key_hash(queue: &str, key: &str) -> [u8; 16] {
    let mut hasher = sha2::Sha256::new();
    hasher.update(queue.as_bytes());
    hasher.update([0u8]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_multiplier_and_caps() {
        let b = JobBackoff { initial_ms: 100, max_ms: 1_000, multiplier: 3.0, jitter: Jitter::None };
        let bounds: Vec<u64> = (0..5).map(|r| b.bound_ms(r)).collect();
        assert_eq!(bounds, [100, 300, 900, 1_000, 1_000]);
        assert_eq!(b.bound_ms(5_000), 1_000);
        assert_eq!(b.delay_ms(1, u64::MAX), 300, "no jitter: the bound");
        let full = JobBackoff { jitter: Jitter::Full, ..b };
        assert_eq!(full.delay_ms(1, 0), 0);
        assert_eq!(full.delay_ms(1, u64::MAX), 300);
        assert_eq!(full.delay_ms(1, u64::MAX / 2), 150);
        assert!(JobBackoff { multiplier: 0.5, ..b }.validate().is_err());
        assert!(JobBackoff { max_ms: 50, ..b }.validate().is_err());
        assert!(JobBackoff { initial_ms: 0, ..b }.validate().is_err());
        assert!(b.validate().is_ok());
    }

    #[test]
    fn jobs_are_checked_field_by_field() {
        let ok = NewJob {
            queue: "reports".into(),
            job_type: "pdf.build".into(),
            payload: b"{}".to_vec(),
            ..NewJob::default()
        };
        assert!(ok.validate(0).is_ok());
        let field = |job: NewJob| job.validate(1_000).unwrap_err().field;
        assert_eq!(field(NewJob { queue: "a b".into(), ..ok.clone() }), "queue");
        assert_eq!(field(NewJob { job_type: String::new(), ..ok.clone() }), "type");
        assert_eq!(field(NewJob { priority: 10, ..ok.clone() }), "priority");
        assert_eq!(field(NewJob { delay_ms: Some(1), run_at: Some(1), ..ok.clone() }), "run_at");
        assert_eq!(field(NewJob { max_attempts: Some(0), ..ok.clone() }), "max_attempts");
        assert_eq!(field(NewJob { unique_for_ms: Some(5), ..ok.clone() }), "unique_for_ms");
        assert_eq!(field(NewJob { unique_key: Some(String::new()), ..ok.clone() }), "unique_key");
        assert_eq!(field(NewJob { tags: vec!["a".into(); JOB_TAGS_MAX + 1], ..ok.clone() }), "tags");
        assert_eq!(field(NewJob { tags: vec!["has space".into()], ..ok.clone() }), "tags[0]");
        assert_eq!(field(NewJob { payload: vec![b' '; JOB_PAYLOAD_BYTES_MAX + 1], ..ok.clone() }), "payload");
        assert_eq!(field(NewJob { result_ttl_ms: Some(0), ..ok.clone() }), "result_ttl_ms");
        assert_eq!(NewJob { delay_ms: Some(5), ..ok.clone() }.run_at(10), 15);
        assert_eq!(NewJob { run_at: Some(3), ..ok.clone() }.run_at(10), 10, "a time in the past is now");
    }

    #[test]
    fn callback_urls_refuse_link_local_and_metadata_addresses() {
        for good in ["http://127.0.0.1:8080/hook", "https://example.com", "http://[::1]:9/x", "http://u:p@host/x"] {
            assert!(validate_callback_url(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://example.com",
            "http://",
            "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/x",
            "http://metadata.google.internal/x",
            "http://a b/",
        ] {
            assert!(validate_callback_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn claims_are_checked() {
        let ok = ClaimSpec { queues: vec!["q".into()], types: vec![], max: 1, lease_ms: 30_000 };
        assert!(ok.validate().is_ok());
        assert_eq!(ClaimSpec { queues: vec![], ..ok.clone() }.validate().unwrap_err().field, "queues");
        assert_eq!(ClaimSpec { max: 0, ..ok.clone() }.validate().unwrap_err().field, "max");
        assert_eq!(ClaimSpec { lease_ms: 1, ..ok.clone() }.validate().unwrap_err().field, "lease_ms");
        assert_eq!(ClaimSpec { types: vec!["a b".into()], ..ok }.validate().unwrap_err().field, "types[0]");
        assert_ne!(unique_key_hash("q", "k"), unique_key_hash("q2", "k"));
        assert_ne!(unique_key_hash("q", "k"), unique_key_hash("q", "k2"));
    }
}

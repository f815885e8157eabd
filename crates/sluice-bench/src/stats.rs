//! What each benchmark task counts: operations, errors and a latency histogram, merged at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Longest latency told apart from "longer"; anything slower is recorded as this.
const LATENCY_US_MAX: u64 = 60_000_000;

/// Latencies in microseconds, three significant digits.
#[derive(Debug, Clone)]
pub(crate) struct Latency(Histogram<u64>);

impl Latency {
    pub fn new() -> Latency {
        Latency(Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("constant bounds are valid"))
    }

    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).max(1);
        self.0.saturating_record(us);
    }

    pub fn merge(&mut self, other: &Latency) {
        // Both sides have the same bounds, so adding cannot run out of range.
        self.0.add(&other.0).expect("histograms share bounds");
    }

    /// The latency at quantile `q` (0.5 for the median) in milliseconds; `None` without samples.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.value_at_quantile(q) as f64 / 1_000.0)
    }

    /// The longest latency recorded, in milliseconds (to the histogram's precision); `None`
    /// without samples.
    pub fn max_ms(&self) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.max() as f64 / 1_000.0)
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// "p50 / p99" in milliseconds, or a dash without samples.
    pub fn p50_p99(&self) -> String {
        match (self.quantile_ms(0.5), self.quantile_ms(0.99)) {
            (Some(p50), Some(p99)) => format!("{} / {}", ms(p50), ms(p99)),
            _ => "-".into(),
        }
    }
}

/// A millisecond figure with the precision that matters at its size.
pub(crate) fn ms(value: f64) -> String {
    if value < 1.0 {
        format!("{value:.3}")
    } else if value < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// One task's (or, merged, one phase's) counts.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Messages (or requests) that completed inside the measured window.
    pub count: u64,
    /// Failed calls and refused entries, warm-up included.
    pub errors: u64,
    /// The first error seen, to tell the reader what went wrong.
    pub first_error: Option<String>,
    pub latency: Latency,
}

impl Tally {
    pub fn new() -> Tally {
        Tally { count: 0, errors: 0, first_error: None, latency: Latency::new() }
    }

    pub fn error(&mut self, n: u64, what: impl FnOnce() -> String) {
        self.errors += n;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.count += other.count;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        self.latency.merge(&other.latency);
    }

    /// `count` per second of `window`.
    pub fn rate(&self, window: Duration) -> f64 {
        self.count as f64 / window.as_secs_f64()
    }
}

/// What one batch call answered, entry by entry: acknowledged (`true`) or refused with an error.
pub(crate) fn batch_answer<'a>(
    entries: impl Iterator<Item = (bool, Option<&'a sluice_api::ErrorBody>)>,
) -> BatchAnswer {
    let mut answer = BatchAnswer { acked: 0, entries: 0, first_error: None };
    for (acked, error) in entries {
        answer.entries += 1;
        answer.acked += u64::from(acked);
        if answer.first_error.is_none() {
            answer.first_error = error.map(|e| format!("{}: {}", e.code, e.message));
        }
    }
    answer
}

/// A batch call's entries: how many, how many acknowledged, and the first refusal.
pub(crate) struct BatchAnswer {
    pub acked: u64,
    pub entries: u64,
    pub first_error: Option<String>,
}

/// Makes batch calls of `batch` entries closed-loop until `end`, adding every acknowledged
/// entry to `acked_total`; counts the entries of calls that start after `measure_from` and end
/// by `end`. Returns the tally (entries) and the number of calls measured.
pub(crate) async fn closed_loop<F, Fut>(
    batch: u32,
    measure_from: Instant,
    end: Instant,
    acked_total: &AtomicU64,
    mut call: F,
) -> (Tally, u64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<BatchAnswer, String>>,
{
    let mut tally = Tally::new();
    let mut calls = 0;
    while Instant::now() < end {
        let sent = Instant::now();
        let outcome = call().await;
        let done = Instant::now();
        match outcome {
            Ok(answer) => {
                acked_total.fetch_add(answer.acked, Ordering::Relaxed);
                if let Some(error) = answer.first_error {
                    tally.error(answer.entries - answer.acked, || error);
                }
                if sent >= measure_from && done <= end {
                    tally.count += answer.acked;
                    tally.latency.record(done - sent);
                    calls += 1;
                }
            }
            Err(e) => {
                tally.error(u64::from(batch), || e);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    (tally, calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_tallies_add_counts_and_keep_the_first_error() {
        let mut a = Tally::new();
        a.count = 3;
        a.latency.record(Duration::from_millis(2));
        let mut b = Tally::new();
        b.count = 1;
        b.error(2, || "first".into());
        b.error(1, || "second".into());
        b.latency.record(Duration::from_millis(10));
        a.merge(&b);
        assert_eq!((a.count, a.errors, a.first_error.as_deref()), (4, 3, Some("first")));
        assert_eq!(a.rate(Duration::from_millis(500)), 8.0);
        assert_eq!(a.latency.p50_p99(), "2.0 / 10.0");
        assert_eq!((a.latency.len(), a.latency.max_ms().map(ms).as_deref()), (2, Some("10.0")));
        assert_eq!(Latency::new().p50_p99(), "-");
        assert_eq!(Latency::new().max_ms(), None);
    }
}

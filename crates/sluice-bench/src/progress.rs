//! The progress bar shown on stderr during each phase; indicatif hides it when stderr is not a
//! terminal, so redirected output stays clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar that fills over `total` (the caller sets the position in milliseconds) and spins on
/// its own between updates.
pub(crate) fn phase(label: &str, total: Duration) -> ProgressBar {
    let bar = ProgressBar::new(u64::try_from(total.as_millis()).unwrap_or(u64::MAX));
    let style = ProgressStyle::with_template("{spinner} {prefix:<22} [{bar:24}] {elapsed:>3} {msg}")
        .expect("the template is valid")
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(label.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

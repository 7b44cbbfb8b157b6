//! Progress bars (indicatif) on stderr, hidden when stderr is not a terminal or when the
//! caller asks (`--json`).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar labelled `label`; the benchmark sets its length. Hidden unless `visible` and stderr
/// is a terminal.
pub fn bar(label: &str, visible: bool) -> ProgressBar {
    if !visible || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>10.bold} [{bar:32.cyan/blue}] {pos}/{len} {msg} ({elapsed})",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(label.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

//! SIGINT/SIGTERM/SIGHUP turn into a flag that every benchmark loop polls, so a Ctrl-C stops
//! the run through the normal return path: guards drop (the clocksource is restored), burner
//! threads stop, and the command exits 130.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{BenchError, Result};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicBool> {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Install the handlers (idempotent). Signals after the first one are absorbed too: the run
/// is already on its way out and must not be killed half-way through restoring state.
pub fn install() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(sig, Arc::clone(flag()))
                .map_err(|e| format!("installing signal handler: {e}"))?;
        }
        Ok(())
    })
    .clone()
    .map_err(BenchError::Invalid)
}

/// Whether a stop signal arrived.
pub fn interrupted() -> bool {
    flag().load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once a stop signal arrived.
pub fn check() -> Result<()> {
    if interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

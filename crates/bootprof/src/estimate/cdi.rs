//! The kata-agent's CDI wait as one model, shared by `analyze` (which measures a boot's
//! pace) and `estimate` (which predicts one).
//!
//! The agent tries to inject the CDI devices, and after each failed try logs
//! `waiting for CDI spec(s) to be generated (N of M max tries)` and sleeps one second; it
//! numbers the tries from 0 and gives up after the one numbered M (kata-agent
//! `handle_cdi_devices`: `for i in 0..=cdi_timeout`). A try takes longer than the sleep: the
//! Kata GPU boot study's agent logged try 0 at 16:05:15.71 and try 39 at 16:06:37.46, 2.10 s
//! apart on average (its second boot: tries 5 → 40 in 75.3 s, 2.15 s).

/// Seconds between two tries in the Kata GPU boot study (run 1, tries 0 → 39).
pub const STUDY_INTERVAL_S: f64 = 81.750_041 / 39.0;
/// The agent's default number of tries (`cdi_timeout` = 100 s, one try per second intended).
pub const DEFAULT_MAX_TRIES: u32 = 100;

/// How long the agent keeps trying.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdiModel {
    /// The number of the last try (`M` in `N of M max tries`).
    pub max_tries: u32,
    /// Seconds from one try to the next.
    pub interval_s: f64,
}

impl Default for CdiModel {
    /// The study's pace and the default limit.
    fn default() -> Self {
        CdiModel {
            max_tries: DEFAULT_MAX_TRIES,
            interval_s: STUDY_INTERVAL_S,
        }
    }
}

impl CdiModel {
    /// Seconds from the first try to the last one: the longest a CDI wait can take before
    /// the agent gives up (it sleeps once more, then fails `create_container`).
    pub fn limit_s(&self) -> f64 {
        f64::from(self.max_tries) * self.interval_s
    }

    /// The try number the agent prints `wait_s` after its first try.
    pub fn try_at(&self, wait_s: f64) -> u32 {
        if self.interval_s <= 0.0 || !wait_s.is_finite() || wait_s <= 0.0 {
            return 0;
        }
        (wait_s / self.interval_s).floor().min(f64::from(u32::MAX)) as u32
    }

    /// Share of the limit a wait of `wait_s` uses.
    pub fn used(&self, wait_s: f64) -> f64 {
        let l = self.limit_s();
        if l > 0.0 {
            wait_s / l
        } else {
            f64::INFINITY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_pace_and_limit() {
        let m = CdiModel::default();
        assert!((m.interval_s - 2.096).abs() < 0.001);
        assert!((m.limit_s() - 209.6).abs() < 0.1);
        // the study's run 1: try 39 was printed 81.75 s after try 0
        assert_eq!(m.try_at(81.76), 39);
        assert_eq!(m.try_at(0.0), 0);
        assert!((m.used(104.8) - 0.5).abs() < 0.001);
    }
}

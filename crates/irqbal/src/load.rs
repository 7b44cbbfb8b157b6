//! Windowed rates from cumulative counters, and an exponentially decaying load.

use serde::{Deserialize, Serialize};

/// Rate of a cumulative counter between two samples: `(new - old) / dt`, 0 when the counter
/// went backwards (a CPU hot-unplugged and back) or no time passed.
pub fn rate(old: u64, new: u64, dt_ns: u64) -> f64 {
    if dt_ns == 0 || new < old {
        0.0
    } else {
        (new - old) as f64 / dt_ns as f64
    }
}

/// A load that decays exponentially with a half-life: `add` records work done (e.g. ns of
/// interrupt processing), `get` reads the decayed sum. Both the simulator and the daemon use
/// it to weigh recent interrupt time over old.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecayingLoad {
    value: f64,
    last_ns: u64,
    half_life_ns: u64,
}

impl DecayingLoad {
    pub fn new(half_life_ns: u64) -> Self {
        Self {
            value: 0.0,
            last_ns: 0,
            half_life_ns: half_life_ns.max(1),
        }
    }

    fn decay_to(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let dt = (now_ns - self.last_ns) as f64 / self.half_life_ns as f64;
            self.value *= (-dt * std::f64::consts::LN_2).exp();
            self.last_ns = now_ns;
        }
    }

    /// Record `amount` of work finished at `now_ns` (times earlier than the last one count
    /// as the last one).
    pub fn add(&mut self, now_ns: u64, amount: f64) {
        self.decay_to(now_ns);
        self.value += amount;
    }

    /// The decayed load at `now_ns`.
    pub fn get(&self, now_ns: u64) -> f64 {
        let mut c = *self;
        c.decay_to(now_ns);
        c.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(rate(10, 30, 10), 2.0);
        assert_eq!(rate(30, 10, 10), 0.0);
        assert_eq!(rate(1, 2, 0), 0.0);
    }

    #[test]
    fn decays_by_half_per_half_life() {
        let mut l = DecayingLoad::new(100);
        l.add(0, 8.0);
        assert!((l.get(100) - 4.0).abs() < 1e-9);
        assert!((l.get(300) - 1.0).abs() < 1e-9);
        l.add(100, 4.0);
        assert!((l.get(100) - 8.0).abs() < 1e-9);
        // going back in time does not grow the value
        assert!((l.get(50) - 8.0).abs() < 1e-9);
    }
}

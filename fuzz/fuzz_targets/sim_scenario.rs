//! Fuzz the scenario TOML parser and validator: any input must give Ok or a one-line Err,
//! never a panic; a scenario that validates must also build a simulator.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match sim::Scenario::from_toml(text, "fuzz.toml") {
        Ok(sc) => {
            for &sched in &sc.schedulers {
                for &pol in &sc.policies {
                    // construction validates and sets up every entity; running is bounded by
                    // duration and too slow for fuzzing
                    let _ = sim::Sim::new(&sc, sched, pol);
                }
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});

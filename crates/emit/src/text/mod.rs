//! Host and plan as text for a person: the host's tree (`vmtune topo`) and the plan's report
//! (`vmtune plan` without `--json`), beside the picture of both (`picture/`).

mod report;
mod tree;

pub use report::{plain, plan_report};
pub use tree::host_tree;

/// Human-readable byte size with binary units.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

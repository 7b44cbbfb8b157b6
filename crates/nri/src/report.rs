//! What the agent shows of itself: the status file (`status.json`, read by
//! `vmtune nri status`) and the Prometheus textfile (`metrics.prom`, for node-exporter's
//! textfile collector), both written whole and renamed into place after every event.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use topo::CpuSet;

use crate::agent::{Agent, Allocation, Counters, Decision};

/// Everything `vmtune nri status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub host_source: String,
    pub connected: bool,
    pub housekeeping: CpuSet,
    pub pool: CpuSet,
    pub shared_containers: usize,
    pub allocations: Vec<Allocation>,
    pub counters: Counters,
    pub recent: Vec<Decision>,
    /// Seconds since the epoch when the file was written.
    pub written_unix: u64,
}

impl Status {
    pub fn of(agent: &Agent, connected: bool) -> Status {
        Status {
            host_source: agent.host().source.clone(),
            connected,
            housekeeping: agent.housekeeping().clone(),
            pool: agent.pool(),
            shared_containers: agent.shared_containers().count(),
            allocations: agent.allocations().cloned().collect(),
            counters: agent.counters().clone(),
            recent: agent.recent().cloned().collect(),
            written_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// A short report: the pools, then one line per allocation.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "vmtune nri: {} ({})\n",
            if self.connected {
                "connected"
            } else {
                "not connected"
            },
            self.host_source
        ));
        s.push_str(&format!("housekeeping CPUs {}\n", self.housekeeping));
        s.push_str(&format!(
            "shared pool {} ({} CPUs, {} containers)\n",
            self.pool,
            self.pool.len(),
            self.shared_containers
        ));
        if self.allocations.is_empty() {
            s.push_str("no container holds CPUs of its own\n");
        } else {
            s.push_str(&format!(
                "{} containers hold CPUs of their own:\n",
                self.allocations.len()
            ));
            let w = self
                .allocations
                .iter()
                .map(|a| a.name.len())
                .max()
                .unwrap_or(0);
            for a in &self.allocations {
                let mems = if a.mems.is_empty() {
                    "-".to_string()
                } else {
                    plan::memory::list(&a.mems)
                };
                let emu = if a.emulator_cpus.is_empty() {
                    String::new()
                } else {
                    format!("  emulator {}", a.emulator_cpus)
                };
                s.push_str(&format!(
                    "  {:w$}  cpus {:<12} mems {:<5} {}{emu}\n",
                    a.name,
                    a.cpus.to_string(),
                    mems,
                    a.how
                ));
            }
        }
        let c = &self.counters;
        let refused: u64 = c.refused.values().sum();
        s.push_str(&format!(
            "decisions: {} placed, {} adopted, {} shared, {} released, {refused} without a placement; {} synchronizations, {} updates\n",
            c.placed, c.adopted, c.shared, c.released, c.synchronizations, c.updates_sent
        ));
        s
    }
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics in Prometheus' text format.
pub fn metrics(status: &Status) -> String {
    let mut s = String::new();
    let mut gauge = |name: &str, help: &str, v: u64| {
        s.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}\n"
        ));
    };
    gauge(
        "vmtune_nri_connected",
        "Whether the agent is connected to the runtime's NRI socket.",
        u64::from(status.connected),
    );
    gauge(
        "vmtune_nri_allocations",
        "Containers holding CPUs of their own.",
        status.allocations.len() as u64,
    );
    let exclusive: usize = status
        .allocations
        .iter()
        .map(|a| a.cpus.len() + a.emulator_cpus.len())
        .sum();
    gauge(
        "vmtune_nri_exclusive_cpus",
        "CPUs held by containers of their own, Kata emulator cores included.",
        exclusive as u64,
    );
    gauge(
        "vmtune_nri_shared_pool_cpus",
        "CPUs of the shared pool (housekeeping included).",
        status.pool.len() as u64,
    );
    gauge(
        "vmtune_nri_housekeeping_cpus",
        "Housekeeping CPUs, never given to a container of its own.",
        status.housekeeping.len() as u64,
    );
    gauge(
        "vmtune_nri_shared_containers",
        "Containers running on the shared pool.",
        status.shared_containers as u64,
    );
    let c = &status.counters;
    s.push_str("# HELP vmtune_nri_decisions_total Placement decisions by result.\n# TYPE vmtune_nri_decisions_total counter\n");
    for (result, v) in [
        ("placed", c.placed),
        ("adopted", c.adopted),
        ("shared", c.shared),
        ("released", c.released),
    ] {
        s.push_str(&format!(
            "vmtune_nri_decisions_total{{result=\"{result}\"}} {v}\n"
        ));
    }
    s.push_str("# HELP vmtune_nri_refusals_total Exclusive containers the planner found no placement for, by reason.\n# TYPE vmtune_nri_refusals_total counter\n");
    if c.refused.is_empty() {
        s.push_str("vmtune_nri_refusals_total{reason=\"none\"} 0\n");
    }
    for (reason, v) in &c.refused {
        s.push_str(&format!(
            "vmtune_nri_refusals_total{{reason=\"{}\"}} {v}\n",
            label(reason)
        ));
    }
    s.push_str(&format!(
        "# HELP vmtune_nri_synchronizations_total Synchronizations with the runtime (each connection starts with one).\n# TYPE vmtune_nri_synchronizations_total counter\nvmtune_nri_synchronizations_total {}\n",
        c.synchronizations
    ));
    s.push_str(&format!(
        "# HELP vmtune_nri_updates_total Cpuset updates of existing containers asked of the runtime.\n# TYPE vmtune_nri_updates_total counter\nvmtune_nri_updates_total {}\n",
        c.updates_sent
    ));
    s
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
    }
    std::fs::rename(&tmp, dir.join(name))
}

/// Writes `status.json` and `metrics.prom` into `dir`.
pub fn write(dir: &Path, status: &Status) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(status).map_err(std::io::Error::other)?;
    write_atomic(dir, "status.json", json.as_bytes())?;
    write_atomic(dir, "metrics.prom", metrics(status).as_bytes())
}

/// Reads `dir/status.json`.
pub fn read(dir: &Path) -> Result<Status, String> {
    let path = dir.join("status.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (is `vmtune nri` running with this --state-dir?)",
            path.display()
        )
    })?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a vmtune nri status file: {e}", path.display()))
}

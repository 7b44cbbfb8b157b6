//! The boot analysis result: what [`crate::analyze()`] returns for one boot and what the
//! renderers ([`crate::render::boot`]) and the findings read. Plain data, no logic beyond small
//! accessors, so every step of the pipeline can depend on it without depending on another.

use serde::Serialize;

use crate::parse::ingest::{SrcRef, Stats};
use crate::parse::time::Nanos;

/// The Kata agent's CDI retry limit when its messages do not print one (pre-3.14 agents).
pub const DEFAULT_CDI_MAX_TRIES: u32 = 100;
/// VFIO type1 `dma_entry_limit` default (drivers/vfio/vfio_iommu_type1.c).
pub const DMA_ENTRY_LIMIT: u64 = 65_535;
/// Pin calls shorter than this are counted but not drawn as phases.
pub const PIN_PHASE_MIN_S: f64 = 0.010;

/// A named interval on the host time axis.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `vm_create`, `kernel_boot`, `pci_enumeration`, `gpu_driver_init`, `dma_pinning`,
    /// `cdi_wait`, `memory_hotplug`, `container_start`.
    pub name: &'static str,
    /// Short label: the GPU for per-GPU phases, the size for pin calls.
    pub label: String,
    pub gpu: Option<String>,
    /// Seconds from the timeline origin (`t0`).
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    #[serde(skip)]
    pub start_ns: Nanos,
    #[serde(skip)]
    pub end_ns: Nanos,
    /// `file:line` of the lines that open and close the phase.
    pub start_line: Option<String>,
    pub end_line: Option<String>,
    #[serde(skip)]
    pub start_src: Option<SrcRef>,
    #[serde(skip)]
    pub end_src: Option<SrcRef>,
    /// The end is inferred (no closing line was seen), not read.
    pub estimated: bool,
    /// Its duration is a lower bound: the log starts after the boot began and this phase
    /// may have begun before it ([`crate::analyze::state::cut_by_late_start`]; the fleet leaves it
    /// out of its percentiles as `started_late`), or it is a memory hotplug whose host side
    /// (pinning the memory before the guest onlines it) is not traced (`untraced`).
    pub at_least: bool,
    pub detail: String,
    /// For a `dma_pinning` phase, what the pinned region is (`bar`, `ram`, or `unknown`
    /// for a call whose size the trace does not show: a return without its call line).
    #[serde(skip)]
    pub pin_kind: Option<&'static str>,
}

/// One host-side `vfio_pin_pages_remote` call (bpftrace) of this VM.
#[derive(Debug, Clone, Serialize)]
pub struct PinCall {
    pub start_s: Option<f64>,
    pub duration_s: f64,
    pub bytes: Option<u64>,
    pub npage: Option<u64>,
    /// The user address pinned (`0x…`), if traced.
    pub vaddr: Option<String>,
    /// The process that pinned (QEMU), if traced.
    pub pid: Option<u32>,
    /// The GPU whose BAR this is (by time, then by address).
    pub gpu: Option<String>,
    /// `bar` (a GPU BAR by size and time), `ram` (guest memory), or `unknown`.
    pub kind: &'static str,
    pub source: &'static str,
    pub line: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    pub bdf: String,
    /// PCI ids, when the log shows the device being enumerated.
    pub vendor_id: Option<String>,
    pub device_id: Option<String>,
    /// Largest BAR seen (bytes).
    pub largest_bar: Option<u64>,
    pub found_s: Option<f64>,
    pub enabled_s: Option<f64>,
    pub driver_init_s: Option<f64>,
    /// `driver_init_s` was estimated from the other GPUs (no bind, pin or next enable).
    pub driver_init_estimated: bool,
    /// Seconds of host pinning of this GPU's BARs; `null` when there is no pin trace.
    pub pin_s: Option<f64>,
}

/// How the clocks were put on one axis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Clocks {
    /// Guest boot instant (host axis), RFC 3339.
    pub guest_boot: Option<String>,
    /// `host` (console lines carry host times), `agent-order` (kernel/agent interleaving),
    /// or `none` (kernel times shown relative to guest boot).
    pub guest_boot_from: &'static str,
    /// host − agent clock, seconds (minimum over paired lines; negative: agent ahead).
    pub agent_offset_s: Option<f64>,
    /// Largest delay between the guest printing a console line and the host logging it.
    pub max_console_delay_s: Option<f64>,
    /// Lines whose own clock disagreed with the host by more than 1 s (host time used).
    pub disagreements: u64,
    /// Zone of the journald prefixes (`+08:00`), used for lines that have no `time=`.
    pub journal_zone: Option<String>,
    /// `--tz`, `prefix vs time=`, `time= zone`, `assumed UTC`, or `not needed`.
    pub journal_zone_from: &'static str,
    /// Whole hours added to the host trace's (bpftrace) stamps to put them on the journal's
    /// clock; `null` when none was needed or it could not be told.
    pub trace_shift_h: Option<i64>,
    /// Heavy host pin calls (0.5 s or more) that start at this boot's GPU enables on the
    /// trace clock it was read with (inferred or given): evidence a fleet's node weighs
    /// when its boots disagree on the trace's clock.
    #[serde(skip)]
    pub trace_shift_aligned: usize,
    /// The trace was read as stamped, or shifted by the hours that undo the journal's zone
    /// (bpftrace printing local time with a literal `Z`): the shifts expected without
    /// evidence, which a fleet's node weighs last.
    #[serde(skip)]
    pub trace_shift_expected: bool,
    /// This VM's pin calls on that clock that fit its boot and those that do not
    /// ([`crate::analyze::join::Join::fit`]): what a fleet's node weighs first.
    #[serde(skip)]
    pub trace_fit: (u64, u64),
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriticalStep {
    pub phase: &'static str,
    pub label: String,
    pub start_s: f64,
    pub duration_s: f64,
    /// The part of this step not already covered by the steps before it: the steps' shares
    /// and gaps add up to the path's span, never more than the boot.
    pub on_path_s: f64,
    /// Gap from the previous step's end (idle or unexplained time).
    pub gap_before_s: f64,
    /// Phases nested inside this one (name, label, seconds).
    pub contains: Vec<String>,
    /// Its phase's duration is a lower bound (the log starts after the boot began).
    pub at_least: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub phase: &'static str,
    /// Seconds measured for what the finding is about; `null` when it is not a duration
    /// (a failure, missing input).
    pub measured_s: Option<f64>,
    pub text: String,
    pub fix: String,
    /// Seconds the fix would take off this phase, by the estimator's constants.
    pub saving_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PinSummary {
    /// Whether any host pin trace (bpftrace pin calls or function_graph records) was read.
    pub traced: bool,
    /// This VM's pin calls (bpftrace).
    pub calls: u64,
    /// Their seconds; `null` without any.
    pub total_s: Option<f64>,
    pub heavy_calls: u64,
    /// Bytes of the calls whose size the trace shows.
    pub bytes: u64,
    /// Calls whose size (and process) the trace does not show: returns whose call line it
    /// lacks (the trace began during the call, or the call line was cut). Counted in `calls`
    /// and `total_s`, not in `bytes`, which is then a lower bound.
    pub size_unknown: u64,
    /// Guest RAM pinning speed over this VM's RAM pin calls, seconds per GiB.
    pub ram_s_per_gib: Option<f64>,
    /// What that speed says about the pages backing guest RAM: `small pages` (4 KiB, faulted
    /// in by the pin), `hugepages or pre-faulted`, or `null` when there are no RAM pins.
    /// (The trace script's `size` is npage × 4096, so it does not tell the page size.)
    pub ram_backing: Option<&'static str>,
    /// bpftrace `@hist` buckets as printed (ms), summed over hist blocks.
    pub hist: Vec<(u64, u64, u64)>,
    pub ftrace_calls: u64,
    pub ftrace_heavy: Vec<f64>,
    pub map_ioctls: u64,
    /// `IOMMU_IOAS_MAP` among the map ioctls: the VM used IOMMUFD.
    pub iommufd_maps: u64,
    /// Pin calls of other processes or outside this boot's time window, left out.
    pub foreign_calls: u64,
    pub foreign_pids: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CdiSummary {
    /// Tries seen: the agent numbers them from 0, so `(39 of 100 max tries)` is the 40th.
    pub tries: u32,
    /// The agent's limit (`max tries`); `null` for agents that do not print it.
    pub max_tries: Option<u32>,
    /// The number of the first try in the log (0 unless the log starts late).
    pub first_try: Option<u32>,
    pub interval_s: Option<f64>,
    /// When the agent gives up at this pace: max tries × interval (the shared CDI model).
    pub limit_s: Option<f64>,
    /// `measured` (interval from this log) or `model` (the study's interval).
    pub limit_from: &'static str,
    pub devices: u32,
    /// The specs appeared (`all devices injected successfully`).
    pub resolved: bool,
}

/// Why a boot failed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// `cold_plug`, `vfio_hotplug`, `cdi_wait`, `create_container`, `sandbox_start`,
    /// `shim`.
    pub step: &'static str,
    /// One line in plain words.
    pub summary: String,
    /// The error as logged.
    pub message: String,
    pub at_s: Option<f64>,
    pub line: Option<String>,
}

/// PCI resources of GPUs (or of devices the log does not show to be anything else) that the
/// guest kernel could not assign, and what the kernel and the GPU driver said about them.
#[derive(Debug, Clone, Serialize)]
pub struct BarAssignment {
    /// In log order: the GPUs' BARs, then the bridge windows above them.
    pub failures: Vec<BarFailure>,
    /// The kernel's hint `Some PCI device resources are unassigned, try booting with
    /// pci=realloc` was logged.
    pub realloc_hint: bool,
    /// The NVIDIA driver's `BARn is 0M @ 0x0 (PCI:BDF)`, as `BDF BARn`.
    pub nvrm_invalid: Vec<String>,
    /// Drivers whose probe failed: `driver BDF error`.
    pub probe_failed: Vec<String>,
}

/// One resource left unassigned.
#[derive(Debug, Clone, Serialize)]
pub struct BarFailure {
    pub bdf: String,
    /// `BAR 1`, `VF BAR 0`, `ROM`, `bridge window`.
    pub resource: String,
    /// `null` when the line does not give it.
    pub bytes: Option<u64>,
    pub pref64: bool,
    /// The device is a GPU (enumerated as one, or named by the GPU driver); `false` for a
    /// bridge or a device the log does not show.
    pub gpu: bool,
    pub line: String,
}

/// What the inputs say about how the boot went.
#[derive(Debug, Clone, Serialize)]
pub struct BootState {
    /// `complete` (the container started), `failed`, `unfinished` (the log ends while the
    /// boot is still going), `stopped` (the sandbox was stopped before its container
    /// started), or `unknown` (the inputs cannot show the end).
    pub status: &'static str,
    /// Why the log looks like it starts after the boot began (empty: it does not).
    pub started_late: Vec<String>,
    pub failure: Option<Failure>,
    /// For unfinished boots: what was going on when the log ends; for stopped ones, the
    /// line that stopped the sandbox.
    pub ends_during: Option<String>,
    /// A complete boot whose sandbox was stopped afterwards: when, and by which line (the
    /// stop's time is not the boot's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Which boot of which sandbox a report is about.
#[derive(Debug, Clone, Serialize)]
pub struct BootSummary {
    pub sandbox: Option<String>,
    /// The host the journal names (its host field), if it names one.
    pub node: Option<String>,
    /// The shim's `pid=`, when the journal names it.
    pub shim_pid: Option<u32>,
    /// 1-based number of this boot among the boots of its sandbox, in time order.
    pub boot: usize,
    pub boots_of_sandbox: usize,
    pub first: Option<String>,
    pub last: Option<String>,
    pub lines: u64,
    /// Guest kernel and kata-agent records.
    pub console: u64,
    #[serde(skip)]
    pub first_ns: Option<Nanos>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub sandbox: Option<String>,
    /// This boot, and the other boots of its sandbox id in the input.
    pub boot: Option<BootSummary>,
    pub other_boots: Vec<BootSummary>,
    pub other_sandboxes: Vec<String>,
    pub files: Vec<String>,
    /// Timeline origin, RFC 3339 (or `guest boot` when only guest-relative times exist);
    /// `null` when no input dates anything (an ftrace trace alone).
    pub t0: Option<String>,
    /// `null` when no phase could be timed and kubectl gives no total (a boot that failed
    /// before the VM started).
    pub total_s: Option<f64>,
    /// `kubectl` (Start Time → Started) or `timeline` (first to last phase).
    pub total_from: &'static str,
    /// `total_s` is a lower bound: it runs first to last phase of a log that starts after
    /// the boot began or ends before it did (the fleet gives such a boot no total).
    pub total_at_least: bool,
    pub state: BootState,
    /// GPUs in the VM: the largest count any input shows (see `gpu_count_from`); `null` when
    /// none shows the guest's PCI enumeration, a GPU driver's enable or a CDI request.
    pub gpu_count: Option<usize>,
    pub gpu_count_from: String,
    pub gpus: Vec<Gpu>,
    pub phases: Vec<Phase>,
    pub pins: Vec<PinCall>,
    pub pin_summary: PinSummary,
    pub cdi: Option<CdiSummary>,
    pub critical_path: Vec<CriticalStep>,
    /// GPU BARs the guest kernel could not assign (`null`-free: absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bar_assignment: Option<BarAssignment>,
    pub findings: Vec<Finding>,
    /// The findings' savings added up (`null` when none names one): the most the fixes
    /// together take off `total_s` (all of it where the phases they shorten are critical).
    pub fixes_save_s: Option<f64>,
    pub clocks: Clocks,
    pub stats: Stats,
}

impl Report {
    /// The boot's total in words: "155.7 s", "at least 100.3 s" when the log starts after the
    /// boot began or ends before it did, or "unknown" when no phase could be timed.
    pub fn total_words(&self) -> String {
        match self.total_s {
            Some(t) => format!(
                "{}{} s",
                if self.total_at_least { "at least " } else { "" },
                secs_fmt(t, 1)
            ),
            None => "unknown".to_string(),
        }
    }
}

impl Report {
    /// Total seconds of the phases named `name`.
    pub fn phase_s(&self, name: &str) -> f64 {
        self.phases
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.duration_s)
            .sum()
    }

    /// The first phase named `name`.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// Seconds with `digits` decimals, never `-0.0`: a value that rounds to zero prints as 0.
pub fn secs_fmt(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    if s.starts_with('-')
        && s.trim_start_matches('-')
            .chars()
            .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// Bytes as GiB.
pub fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_negative_zero() {
        assert_eq!(secs_fmt(-0.0004, 3), "0.000");
        assert_eq!(secs_fmt(-0.04, 1), "0.0");
        assert_eq!(secs_fmt(-0.06, 1), "-0.1");
        assert_eq!(secs_fmt(2.3456, 2), "2.35");
    }
}

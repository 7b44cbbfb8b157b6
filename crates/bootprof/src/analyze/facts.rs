//! Step 3 of the analysis: from parsed lines to dated facts about one boot — GPUs found and
//! their BARs, driver enables and binds, CDI tries, RPCs, memory uevents, errors, and the
//! host's pin calls (each call paired with its return). Guest, agent and journal times are
//! on the host axis; pin calls are still on the trace's own clock (step 4 checks it).

use std::collections::HashMap;

use crate::analyze::clocks::{secs_ns, Axis};
use crate::parse::agent::{AgentKind, UeventAction};
use crate::parse::dmesg::{is_passthrough_gpu, KernelKind, GPU_DRIVERS};
use crate::parse::ingest::{Body, Event, SrcRef};
use crate::parse::kubectl::KubectlLine;
use crate::parse::time::{format_rfc3339, Nanos, NS_PER_S};

/// A point on the host axis with where it came from.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pub t: Nanos,
    pub src: SrcRef,
}

/// A GPU the guest enumerated (or that a GPU driver enabled).
#[derive(Debug, Clone, Default)]
pub struct GpuSeen {
    pub bdf: String,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub found: Option<Mark>,
    /// Memory BARs: (index, bytes).
    pub bars: Vec<(u8, u64)>,
}

impl GpuSeen {
    pub fn largest_bar(&self) -> Option<u64> {
        self.bars.iter().map(|b| b.1).max()
    }
}

/// One try of the agent's CDI wait.
#[derive(Debug, Clone, Copy)]
pub struct CdiTry {
    pub attempt: Option<u32>,
    pub max: Option<u32>,
    pub devices: u32,
    pub m: Mark,
}

/// A line that reports a failure.
#[derive(Debug, Clone)]
pub struct ErrorLine {
    pub m: Mark,
    pub msg: String,
    pub error: Option<String>,
    /// `vfio-device-BDF=`: the host device a VFIO hot-plug line is about.
    pub device: Option<String>,
    /// A line of QEMU's own stderr, relayed by the shim ([`crate::parse::ingest::HostLine::qemu`]).
    pub qemu: bool,
}

/// What QEMU's (or Cloud Hypervisor's) messages of a VFIO device they could not attach
/// contain: `group N is not viable`, `group N used in multiple address spaces`, `failed to
/// setup container for group N`, `error getting device from group N`, `VFIO_MAP_DMA failed`
/// (QEMU's hw/vfio, across versions), `Failed to hotplug device … VfioMapRegion(…)` (Cloud
/// Hypervisor), `Device 'vfio-…' not found` (the device or port QMP was to plug into), and
/// the Kata shim's own `failed to hotplug VFIO device` and `cold_plug_vfio= or
/// hot_plug_vfio= port is not set for device …` (lowercase).
const VFIO_FAILURES: [&str; 10] = [
    "failed to hotplug vfio device",
    "is not viable",
    "used in multiple address spaces",
    "failed to setup container for group",
    "error getting device from group",
    "failed to get group",
    "vfio_map_dma failed",
    "vfiomapregion",
    "failed to hotplug device &{id:vfio-",
    "hot_plug_vfio= port is not set",
];

/// What a hypervisor that did not start says (lowercase): QEMU's `unable to map backing
/// store for guest RAM` (a hugepage pool too small: kata-containers#10341,
/// kata-containers/runtime#1210, #1745) and `cannot set up guest memory`, Kata 1.x's
/// `Unable to launch <qemu>: exit status 1` and `failed to launch qemu`, and Kata 1.x's
/// Firecracker driver's `Failed to connect to firecrackerinstance`
/// (kata-containers/runtime#1123), and runtime-rs's QEMU monitor that never answered:
/// `timed out waiting for QMP ready` in the error chain, `couldn't initialise QMP` in the
/// shim's log (kata-containers#13084, #13395); the Go shim's QEMU that exited during the QMP
/// handshake, `Failed to negotiate QMP capabilities` (`qemu.go`'s `qmpCapErrMsg`, written
/// `Capabilities` before 3.x) and the sandbox's `Cannot start VM`; QEMU's own `Could not
/// access KVM kernel module` and `failed to initialize KVM` (a host without KVM).
const VM_START_FAILURES: [&str; 11] = [
    "unable to map backing store for guest ram",
    "cannot set up guest memory",
    "unable to launch ",
    "failed to launch qemu",
    "failed to connect to firecrackerinstance",
    "timed out waiting for qmp ready",
    "couldn't initialise qmp",
    "failed to negotiate qmp capabilities",
    "cannot start vm",
    "could not access kvm kernel module",
    "failed to initialize kvm",
];

/// What a shim that never reached the kata-agent says (lowercase): Kata 1.x's `Failed to
/// check if grpc server is working` (kata-containers/runtime#1222, #1408) and the Go
/// shim's `timed out connecting to vsock` / `hybrid vsocket` (kata-containers#5662,
/// #11859).
const AGENT_FAILURES: [&str; 3] = [
    "failed to check if grpc server is working",
    "timed out connecting to vsock",
    "timed out connecting to hybrid vsocket",
];

/// The failing step a message names, and a plain summary.
pub fn classify_error(text: &str) -> (&'static str, &'static str) {
    let t = text.to_ascii_lowercase();
    if t.contains("cold plug") {
        (
            "cold_plug",
            "the host could not cold-plug the devices into the VM",
        )
    } else if t.contains("failed to inject devices after cdi timeout") {
        (
            "cdi_wait",
            "the kata-agent gave up waiting for the CDI specs",
        )
    } else if VFIO_FAILURES.iter().any(|w| t.contains(w))
        || (t.contains("device 'vfio-") && t.contains("' not found"))
    {
        (
            "vfio_hotplug",
            "the hypervisor could not hot-plug a VFIO device into the VM",
        )
    } else if VM_START_FAILURES.iter().any(|w| t.contains(w)) {
        ("vm_create", "the hypervisor could not start the VM")
    } else if AGENT_FAILURES.iter().any(|w| t.contains(w)) {
        (
            "agent_connect",
            "the shim could not reach the kata-agent in the guest",
        )
    } else if (t.contains("createcontainer")
        || t.contains("create_container")
        || t.contains("container create"))
        && (t.contains("timed out") || t.contains("deadline") || t.contains("timeout"))
    {
        ("create_container", "create_container timed out")
    } else if t.contains("container create failed") {
        (
            "create_container",
            "the kata-agent could not create the container",
        )
    } else if t.contains("runpodsandbox") || t.contains("failed to start sandbox") {
        ("sandbox_start", "the sandbox failed to start")
    } else {
        ("shim", "the shim reported an error")
    }
}

/// A VFIO device the hypervisor could not attach: the host device, when the message names
/// it, and the hypervisor's reason as it wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VfioFailure {
    pub device: Option<String>,
    pub reason: String,
}

/// Where QEMU's reason starts, among the `: `-separated parts of a Go error chain
/// (lowercase).
const VFIO_REASONS: [&str; 8] = [
    "group ",
    "failed to setup container for group",
    "error getting device from group",
    "failed to get group",
    "vfio_map_dma",
    "device 'vfio-",
    "cold_plug_vfio=",
    "hot_plug_vfio=",
];

/// A PCI address as a VFIO message writes it, with its domain (`1a:00.0` → `0000:1a:00.0`:
/// Kata's `vfio-device-BDF` drops domain 0).
pub fn full_bdf(s: &str) -> String {
    let s = s.trim_matches(|c| c == '"' || c == ' ');
    if crate::parse::dmesg::is_bdf(s) {
        s.to_string()
    } else if crate::parse::dmesg::is_bdf(&format!("0000:{s}")) {
        format!("0000:{s}")
    } else {
        s.to_string()
    }
}

/// Read a VFIO attach failure out of `text` (a message and its error chain): `None` unless
/// it is one ([`classify_error`] names `vfio_hotplug`).
pub fn vfio_failure(text: &str) -> Option<VfioFailure> {
    if classify_error(text).0 != "vfio_hotplug" {
        return None;
    }
    // Cloud Hypervisor: `Failed to hotplug device &{ID:… BDF:0000:19:00.0 …} error: 500
    // reason: Error from device manager: VfioMapRegion(…)`
    if let Some((head, reason)) = text
        .contains("Failed to hotplug device")
        .then(|| text.rsplit_once("reason: "))
        .flatten()
    {
        let device = head
            .split_once("BDF:")
            .and_then(|(_, b)| b.split([' ', '}']).next())
            .filter(|b| !b.is_empty())
            .map(full_bdf);
        return Some(VfioFailure {
            device,
            reason: strip_code(reason.trim()).to_string(),
        });
    }
    let parts: Vec<&str> = text.split(": ").collect();
    let lower: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    let start = lower.iter().position(|p| {
        VFIO_REASONS.iter().any(|r| p.starts_with(r))
            && (!p.starts_with("group ") || p.contains("viable") || p.contains("address spaces"))
    });
    let Some(i) = start else {
        // the shim's own line without QEMU's reason: its text is the reason
        return Some(VfioFailure {
            device: None,
            reason: strip_code(parts.last().copied().unwrap_or(text).trim()).to_string(),
        });
    };
    // `vfio 0000:1a:00.0: group …` (QEMU ≥ 3), `vfio error: 0000:01:00.0: group …` (2.9–2.12)
    let before = i
        .checked_sub(1)
        .and_then(|k| parts.get(k))
        .copied()
        .unwrap_or("");
    let word = before.rsplit(' ').next().unwrap_or("");
    let mut device = (before.starts_with("vfio ") || crate::parse::dmesg::is_bdf(word))
        .then(|| full_bdf(word))
        .filter(|d| !d.is_empty());
    let chain = parts.get(i..).unwrap_or(&[]).join(": ");
    // QEMU's hint (`Please ensure all devices …`) follows on a line of its own
    let reason = strip_code(chain.lines().next().unwrap_or("")).to_string();
    if device.is_none() {
        // `… port is not set for device 0000:5e:02.1 (…)`
        device = reason
            .split_once("for device ")
            .and_then(|(_, d)| d.split(' ').next())
            .map(full_bdf);
    }
    Some(VfioFailure { device, reason })
}

/// An error chain without the gRPC/ttrpc code containerd appends (`…: unknown`,
/// `…: not found`).
fn strip_code(s: &str) -> &str {
    let s = s.trim_end();
    for code in [": unknown", ": not found", ": internal"] {
        if let Some(r) = s.strip_suffix(code) {
            return r;
        }
    }
    s
}

impl ErrorLine {
    /// The boot step this error names, if it names one (not a teardown or generic error).
    pub fn step(&self) -> Option<&'static str> {
        let (step, _) = classify_error(&self.text());
        (step != "shim").then_some(step)
    }

    /// The message and its error, as one text.
    pub fn text(&self) -> String {
        format!("{} {}", self.msg, self.error.as_deref().unwrap_or(""))
    }

    /// The VFIO device this line says the hypervisor could not attach, and why.
    pub fn vfio(&self) -> Option<VfioFailure> {
        let mut v = vfio_failure(&self.text())?;
        if v.device.is_none() {
            v.device = self.device.as_deref().map(full_bdf);
        }
        Some(v)
    }
}

pub use crate::parse::journal::is_stop;

/// The boot's first line that stops its sandbox, on the host axis.
fn stop_of(events: &[&Event], axis: &Axis) -> Option<(Mark, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            Body::Host(h) if is_stop(&h.msg) => Some((
                Mark {
                    t: axis.host(e)?,
                    src: e.src,
                },
                h.msg.clone(),
            )),
            _ => None,
        })
        .min_by_key(|(m, _)| m.t)
}

/// A PCI resource the guest kernel could not assign.
#[derive(Debug, Clone)]
pub struct BarFailed {
    pub bdf: String,
    /// `BAR 1`, `VF BAR 0`, `ROM`, `bridge window`.
    pub name: String,
    pub size: Option<u64>,
    pub pref64: bool,
    pub m: Mark,
}

/// `BAR1 is 0M @ 0x0 (PCI:0000:0a:00.0)` (the NVIDIA driver's second line of `This PCI
/// I/O region assigned to your NVIDIA device is invalid:`): the BAR and the device.
fn nvrm_bar_invalid(msg: &str) -> Option<(String, String)> {
    let (bar, rest) = msg.split_once(" is 0M")?;
    let bdf = rest.split_once("(PCI:")?.1.strip_suffix(')')?;
    (bar.starts_with("BAR") && crate::parse::dmesg::is_bdf(bdf))
        .then(|| (bar.to_string(), bdf.to_string()))
}

/// A host pin call paired with its return.
#[derive(Debug, Clone, Copy)]
pub struct RawPin {
    /// Start on the trace's clock.
    pub start: Option<Nanos>,
    pub dur_s: f64,
    pub npage: Option<u64>,
    pub size: Option<u64>,
    pub vaddr: Option<u64>,
    pub pid: Option<u32>,
    pub src: SrcRef,
    pub end_src: SrcRef,
    pub source: &'static str,
}

impl RawPin {
    pub fn end(&self) -> Option<Nanos> {
        self.start.map(|s| s.saturating_add(secs_ns(self.dur_s)))
    }
}

/// Everything step 4 on needs.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub first_host: Option<Mark>,
    pub first_kernel: Option<Mark>,
    pub run_init: Option<Mark>,
    pub first_agent: Option<Mark>,
    /// Smallest guest kernel stamp (seconds since guest boot).
    pub kernel_min_t: Option<f64>,
    pub kernel_lines: u64,
    pub agent_lines: u64,
    pub journal_lines: u64,
    /// Earliest and latest journal / guest / agent instants: the boot's time window.
    pub first_any: Option<Mark>,
    pub last_any: Option<Mark>,
    pub gpus: Vec<GpuSeen>,
    /// Emulated display controllers (`1234:1111` …): not counted as GPUs.
    pub emulated_displays: Vec<String>,
    pub pci_last: Option<Mark>,
    /// `enabling device` of GPUs, in time order.
    pub enables: Vec<(String, Mark)>,
    /// pci `bind` uevents, in time order.
    pub binds: Vec<(String, Mark)>,
    pub cdi_tries: Vec<CdiTry>,
    pub cdi_done: Option<Mark>,
    pub cdi_failed: Option<(Mark, String)>,
    pub mem_uevents: MemUevents,
    pub rpcs: Vec<(String, Mark)>,
    pub nvrm_fbhub: Vec<Mark>,
    pub kube_start: Option<Mark>,
    pub kube_started: Option<Mark>,
    /// PCI resources the guest kernel could not assign (each BAR once), in log order.
    pub bar_failures: Vec<BarFailed>,
    /// The kernel's `try booting with pci=realloc` hint.
    pub pci_realloc: Option<Mark>,
    /// The NVIDIA driver's `BARn is 0M @ 0x0 (PCI:BDF)`: (BAR as it names it, BDF, mark).
    pub nvrm_bar_invalid: Vec<(String, String, Mark)>,
    /// A driver's `probe of BDF failed with error N`: (driver, BDF, error, mark).
    pub probe_failed: Vec<(String, String, i64, Mark)>,
    /// Devices the guest enumerated that are not GPUs (their failed BARs are not a GPU's).
    pub non_gpus: Vec<String>,
    /// The first line that stops the sandbox (the shim's `Stopping Sandbox`, containerd's
    /// `StopPodSandbox for "ID"`, …), and its message: nothing after it is the boot's.
    pub stopped: Option<(Mark, String)>,
    pub errors: Vec<ErrorLine>,
    pub notes: Vec<String>,
}

impl Facts {
    pub fn rpc(&self, name: &str) -> Option<Mark> {
        self.rpcs.iter().find(|(n, _)| n == name).map(|(_, m)| *m)
    }

    /// The boot's window on the host axis, if the journal or the guest dates it.
    pub fn window(&self) -> Option<(Nanos, Nanos)> {
        Some((self.first_any?.t, self.last_any?.t))
    }

    fn gpu_mut(&mut self, bdf: &str) -> &mut GpuSeen {
        let i = match self.gpus.iter().position(|g| g.bdf == bdf) {
            Some(i) => i,
            None => {
                self.gpus.push(GpuSeen {
                    bdf: bdf.to_string(),
                    ..GpuSeen::default()
                });
                self.gpus.len() - 1
            }
        };
        &mut self.gpus[i]
    }
}

fn note(m: Mark, slot: &mut Option<Mark>) {
    if slot.is_none_or(|s| m.t < s.t) {
        *slot = Some(m);
    }
}

/// The agent's memory-block uevents of a boot (one per 128 MiB block a hotplug onlines:
/// hundreds of thousands in a fleet's journal): how many, the first, the earliest and the
/// latest (each the first line with that time).
#[derive(Debug, Clone, Copy, Default)]
pub struct MemUevents {
    n: usize,
    first: Option<Mark>,
    min: Option<Mark>,
    max: Option<Mark>,
}

impl MemUevents {
    pub fn push(&mut self, m: Mark) {
        self.n += 1;
        self.first.get_or_insert(m);
        note(m, &mut self.min);
        if self.max.is_none_or(|x| m.t > x.t) {
            self.max = Some(m);
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The first in the log.
    pub fn first(&self) -> Option<Mark> {
        self.first
    }

    /// The earliest (the first of those at that time).
    pub fn earliest(&self) -> Option<Mark> {
        self.min
    }

    /// The latest (the first of those at that time).
    pub fn latest(&self) -> Option<Mark> {
        self.max
    }
}

/// Collect the facts of one boot's records.
pub fn collect(events: &[&Event], axis: &Axis) -> Facts {
    let mut f = Facts {
        stopped: stop_of(events, axis),
        ..Facts::default()
    };
    // the boot is over at the stop: nothing from then on is the boot's (the guest powering
    // down, teardown errors, a stop hours later stretching its window)
    let over = f.stopped.as_ref().map(|(m, _)| m.t);
    // BARs of every device, kept until we know which are GPUs
    let mut bars: HashMap<String, Vec<(u8, u64)>> = HashMap::new();
    for e in events {
        let at: Option<Nanos> = match &e.body {
            Body::Kernel(k) => axis.kernel(k.t).or_else(|| axis.host(e)),
            Body::Agent(a) => Some(axis.agent(a.ts)),
            Body::Host(_) => axis.host(e),
            Body::Kube(KubectlLine::StartTime(t) | KubectlLine::Started(t)) => Some(*t),
            _ => None,
        };
        if over.is_some_and(|o| at.is_some_and(|t| t >= o)) && !matches!(e.body, Body::Kube(_)) {
            continue;
        }
        let mark = at.map(|t| Mark { t, src: e.src });
        if let Some(m) = mark {
            if !matches!(e.body, Body::Kube(_)) {
                f.any(m);
            }
        }
        match &e.body {
            Body::Host(h) => {
                f.journal_lines += 1;
                let Some(m) = mark else { continue };
                note(m, &mut f.first_host);
                if h.is_error {
                    f.errors.push(ErrorLine {
                        m,
                        msg: h.msg.clone(),
                        error: h.error.clone(),
                        device: h.device.clone(),
                        qemu: h.qemu,
                    });
                }
            }
            Body::Kernel(k) => {
                f.kernel_lines += 1;
                f.kernel_min_t = Some(f.kernel_min_t.map_or(k.t, |t: f64| t.min(k.t)));
                let Some(m) = mark else { continue };
                note(m, &mut f.first_kernel);
                match &k.kind {
                    KernelKind::RunInit => note(m, &mut f.run_init),
                    KernelKind::PciFound {
                        bdf,
                        vendor,
                        device,
                        class,
                    } if crate::parse::dmesg::is_gpu_class(*class) => {
                        if is_passthrough_gpu(*vendor, *class) {
                            let g = f.gpu_mut(bdf);
                            if g.found.is_none() {
                                g.found = Some(m);
                                g.vendor = Some(*vendor);
                                g.device = Some(*device);
                            }
                            f.pci_last = Some(m);
                        } else if !f.emulated_displays.contains(bdf) {
                            f.emulated_displays
                                .push(format!("{bdf} [{vendor:04x}:{device:04x}]"));
                        }
                    }
                    KernelKind::Bar {
                        bdf,
                        index,
                        size,
                        assigned,
                    } => {
                        let v = bars.entry(bdf.clone()).or_default();
                        if !v.contains(&(*index, *size)) {
                            v.push((*index, *size));
                        }
                        let is_gpu = f.gpus.iter().any(|g| &g.bdf == bdf);
                        if *assigned && is_gpu && f.pci_last.is_none_or(|p| m.t >= p.t) {
                            f.pci_last = Some(m);
                        }
                    }
                    KernelKind::DriverEnable { driver, bdf } => {
                        let known = f.gpus.iter().any(|g| &g.bdf == bdf);
                        if known || GPU_DRIVERS.contains(&driver.as_str()) {
                            f.gpu_mut(bdf);
                            f.enables.push((bdf.clone(), m));
                        }
                    }
                    KernelKind::Nvrm(msg) if msg.contains("FBHUB") => f.nvrm_fbhub.push(m),
                    KernelKind::PciFound { bdf, .. } => {
                        if !f.non_gpus.contains(bdf) {
                            f.non_gpus.push(bdf.clone());
                        }
                    }
                    k => f.bar_fact(k, m),
                }
            }
            // each line as the `Body::Agent` it would be on its own
            Body::AgentRun(run) => {
                for (src, _, ts) in run.each(e.src.file) {
                    let m = Mark {
                        t: axis.agent(ts),
                        src,
                    };
                    if over.is_some_and(|o| m.t >= o) {
                        continue;
                    }
                    f.any(m);
                    f.agent(m, &run.kind);
                }
            }
            Body::Agent(a) => {
                let Some(m) = mark else {
                    f.agent_lines += 1;
                    continue;
                };
                f.agent(m, &a.kind);
            }
            // the host's traces and kubectl output: `crate::analyze::traces`
            Body::Bpf(_) | Body::Ftrace(_) | Body::Kube(_) => {}
        }
    }
    for g in &mut f.gpus {
        if let Some(b) = bars.get(&g.bdf) {
            g.bars = b.clone();
        }
    }
    f.enables.sort_by_key(|(_, m)| m.t);
    f.binds.sort_by_key(|(_, m)| m.t);
    f
}

impl Facts {
    /// What a kernel line at `m` says of PCI resources left unassigned, if anything.
    fn bar_fact(&mut self, k: &KernelKind, m: Mark) {
        match k {
            KernelKind::BarFailed {
                bdf,
                name,
                size,
                pref64,
            }
            // the old wording says it twice (`no space for`, `failed to assign`)
            if !self
                .bar_failures
                .iter()
                .any(|b| &b.bdf == bdf && &b.name == name) =>
            {
                self.bar_failures.push(BarFailed {
                    bdf: bdf.clone(),
                    name: name.clone(),
                    size: *size,
                    pref64: *pref64,
                    m,
                });
            }
            KernelKind::PciRealloc => note(m, &mut self.pci_realloc),
            KernelKind::Nvrm(msg) => {
                if let Some((bar, bdf)) = nvrm_bar_invalid(msg) {
                    self.nvrm_bar_invalid.push((bar, bdf, m));
                }
            }
            KernelKind::ProbeFailed { driver, bdf, error } => {
                self.probe_failed
                    .push((driver.clone(), bdf.clone(), *error, m));
            }
            _ => {}
        }
    }

    /// A line of the boot's own (not kubectl's) at `m`.
    fn any(&mut self, m: Mark) {
        if self.last_any.is_none_or(|l| m.t > l.t) {
            self.last_any = Some(m);
        }
        note(m, &mut self.first_any);
    }

    /// A kata-agent record of kind `kind` at `m`.
    fn agent(&mut self, m: Mark, kind: &AgentKind) {
        let f = self;
        f.agent_lines += 1;
        note(m, &mut f.first_agent);
        {
            match kind {
                AgentKind::Rpc(name) => f.rpcs.push((name.clone(), m)),
                AgentKind::CdiWait {
                    attempt,
                    max,
                    devices,
                } => f.cdi_tries.push(CdiTry {
                    attempt: *attempt,
                    max: *max,
                    devices: *devices,
                    m,
                }),
                AgentKind::CdiDone => note(m, &mut f.cdi_done),
                AgentKind::CdiFailed(msg) => {
                    if f.cdi_failed.is_none() {
                        f.cdi_failed = Some((m, msg.clone()));
                    }
                }
                AgentKind::Uevent {
                    action,
                    memory,
                    bdf,
                } => {
                    if *memory {
                        f.mem_uevents.push(m);
                    } else if *action == UeventAction::Bind {
                        if let Some(b) = bdf {
                            f.binds.push((b.clone(), m));
                        }
                    }
                }
                AgentKind::Other => {}
            }
        }
    }
}

/// One pod of `kubectl describe pod(s)` output: its Start Time and its containers' latest
/// Started.
#[derive(Debug, Clone)]
pub(crate) struct Pod {
    pub file: u32,
    pub start: Option<Mark>,
    pub started: Option<Mark>,
}

/// The pod of this boot among the `kubectl describe` output (`kubectl describe pods`
/// lists many): the one whose Start Time → Started overlaps the logs' span, give or take the
/// time a pod can spend before its VM starts (image pull) or after its last logged line, and
/// of those the one that starts nearest the logs. A pod of another boot (a different pod or
/// day) must not stretch this one.
pub(crate) fn kubectl_of_this_boot(f: &mut Facts, pods: &[Pod], files: &[String]) {
    let told: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.start.is_some() || p.started.is_some())
        .collect();
    let (Some(first), Some(last)) = (f.first_any, f.last_any) else {
        // kubectl alone: its (first) pod is the boot
        if let Some(p) = told.first() {
            f.kube_start = p.start;
            f.kube_started = p.started;
        }
        return;
    };
    const SLACK_NS: Nanos = 15 * 60 * NS_PER_S;
    let fits = |p: &Pod| {
        let s = p.start.map_or(first.t, |m| m.t);
        let e = p.started.map_or(last.t, |m| m.t);
        !(s > last.t.saturating_add(SLACK_NS) || e < first.t.saturating_sub(SLACK_NS))
    };
    let pick = told.iter().filter(|p| fits(p)).min_by_key(|p| {
        let s = p.start.or(p.started).map_or(0, |m| m.t);
        (i128::from(s) - i128::from(first.t)).abs()
    });
    if let Some(p) = pick.or(told.first()) {
        f.kube_start = p.start;
        f.kube_started = p.started;
    }
    if !told.is_empty() && pick.is_none() {
        let which = f.kube_start.or(f.kube_started).map(|m| m.src);
        f.notes.push(format!(
            "kubectl times ({} → {}) are not this boot's (logs span {} → {}); ignored{}",
            f.kube_start.map_or("?".into(), |m| format_rfc3339(m.t)),
            f.kube_started.map_or("?".into(), |m| format_rfc3339(m.t)),
            format_rfc3339(first.t),
            format_rfc3339(last.t),
            which.map_or(String::new(), |src| format!(
                " ({}:{})",
                files.get(src.file as usize).map_or("?", String::as_str),
                src.line
            ))
        ));
        f.kube_start = None;
        f.kube_started = None;
    }
}

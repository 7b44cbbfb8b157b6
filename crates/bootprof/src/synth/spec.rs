//! What to generate ([`Spec`], the boot's shape and the logs' quirks) and what the
//! generated records are ([`Records`]: the inputs and the [`Truth`] behind them).

use crate::parse::time::Nanos;

/// When a GPU's driver `bind` uevent is logged, relative to the host pinning its BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// While the host is still pinning (the study's own log).
    Before,
    /// After the pin is done.
    After,
    /// Not logged.
    Absent,
}

/// When the sandbox is stopped, in a wording the seed picks (the Kata shim's `Stopping
/// Sandbox`, `Stopping sandbox in the VM` + `Stopping VM`, Cloud Hypervisor's `Stop Sandbox`,
/// containerd's `StopPodSandbox for "ID"`, `shim disconnected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Half a minute to an hour after the container started: the boot is complete.
    AfterStart,
    /// Where [`Spec::tail_cut`] would end the log (halfway when none): the boot is stopped.
    BeforeStart,
}

/// Kata 1.x: the guest kernel's console lines through `kata-proxy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyConsole {
    /// `name=kata-proxy pid=… sandbox=… source=agent` (kata-containers/runtime#1551).
    WithSandbox,
    /// Without `sandbox=` (Kata 1.0, kata-containers/osbuilder#118): only for a journal
    /// of one boot, whose console they are.
    NoSandbox,
}

/// How the guest kernel words a BAR it could not assign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarWording {
    /// Before 6.8: `BAR 2: no space for [mem size 0x… 64bit pref]`, `BAR 2: failed to
    /// assign […]`.
    Old,
    /// 6.8 (and 6.1.167+ / 6.6.y with the backport): `BAR 2 [mem size 0x… 64bit pref]:
    /// can't assign; no space`, `…: failed to assign`.
    New,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    /// The CDI specs never appear; the agent gives up after its tries.
    CdiNeverResolved,
    /// The shim's create_container timeout fires while the agent waits for CDI.
    CreateTimeout,
    /// The host cannot cold-plug the devices: the VM never boots.
    ColdPlugFailed,
    /// The VM boots, then the hypervisor refuses to hot-plug the GPU (a VFIO device), in
    /// a wording drawn from the seed among QEMU's and Cloud Hypervisor's.
    HotplugFailed,
}

/// How `journalctl` printed the journal (`-o FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalFormat {
    /// `Nov 20 17:55:38 host containerd[pid]: …` (zh_CN: `11月 20 …`).
    Short,
    /// `Nov 20 17:55:38.490120 host …`.
    ShortPrecise,
    /// `2025-11-20T17:55:38+0000 host …` (systemd before 254: no colon in the offset).
    ShortIso,
    /// `2025-11-20T17:55:38.490120+00:00 host …`.
    ShortIsoPrecise,
    /// `Thu 2025-11-20 17:55:38 CST host …` (the zone's abbreviation).
    ShortFull,
    /// `-o cat`: the message alone, no time, no host (and no other units' lines: `-u
    /// containerd`).
    Cat,
    /// `-o json`: one object a line with journald's fields (`__REALTIME_TIMESTAMP` in µs,
    /// `_HOSTNAME`, `SYSLOG_IDENTIFIER`, `_PID`, …) and `MESSAGE`; a message that is not
    /// printable text is an array of its bytes, as journald writes it.
    Json,
}

impl JournalFormat {
    /// Every shape, in the order above.
    pub const ALL: [JournalFormat; 7] = [
        JournalFormat::Short,
        JournalFormat::ShortPrecise,
        JournalFormat::ShortIso,
        JournalFormat::ShortIsoPrecise,
        JournalFormat::ShortFull,
        JournalFormat::Cat,
        JournalFormat::Json,
    ];
}

/// A CI runner's clock that a job's log puts before each journal line it prints
/// ([`Spec::ci_clock`]): the runner's own time (UTC, a little after the host logged the
/// line), never the boot's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CiClock {
    /// Jenkins' timestamper: `17:55:41 `.
    Hms,
    /// `[17:55:41] `.
    Bracketed,
    /// `17:55:41.123 `.
    Millis,
    /// GitHub Actions: `2025-11-20T17:55:41.1234567Z `.
    Rfc3339,
}

/// Pages backing guest RAM (they set how fast the host pins it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamPages {
    Small,
    Huge,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub seed: u64,
    pub gpus: usize,
    /// BAR 2 (VRAM) size of each GPU, GiB.
    pub bar_gib: u64,
    /// `reg 0x18:` / `BAR 2: assigned [mem …]` (older kernels) instead of 6.x wording.
    pub old_bar_lines: bool,
    pub boot_ram_gib: u64,
    pub hot_ram_gib: u64,
    pub ram_pages: RamPages,
    /// A bpftrace pin trace of the host (type1); `false`: IOMMUFD or none.
    pub pin_trace: bool,
    /// Per GPU, in enumeration order.
    pub binds: Vec<Bind>,
    /// Enumeration indices in the order the driver enables them.
    pub enable_order: Vec<usize>,
    /// The host's zone, minutes east of UTC (journald prefixes are local time).
    pub zone_min: i64,
    /// zh_CN journald prefixes (`11月 20 17:55:38`).
    pub zh_prefix: bool,
    /// `time=` written with the zone's offset (`+08:00`) instead of `Z`.
    pub zoned_time_field: bool,
    /// Shim lines (not console lines) with only a prefix time, per cent; the first line
    /// of the boot is one of them when this is over 50.
    pub prefix_only_pct: u8,
    /// The agent's clock minus the host's, ms (whole hours: a guest clock in local time).
    pub agent_offset_ms: i64,
    /// bpftrace stamps this many hours off the host's UTC clock (−8: they read 8 h early).
    pub trace_shift_h: i64,
    /// An earlier boot's pins (another QEMU pid) in the same trace.
    pub foreign_pins: bool,
    /// Another QEMU pinning RAM while this VM boots.
    pub concurrent_pins: bool,
    /// Another sandbox's (smaller) boot interleaved in the journal.
    pub other_sandbox: bool,
    /// The same sandbox id booted two days earlier by another shim.
    pub earlier_boot: bool,
    pub emulated_vga: bool,
    /// The pre-3.14 agent's `error injecting devices: "unresolvable CDI devices …"`.
    pub pre314: bool,
    /// Every shim line with a `time=` logged twice, under `kata[SHIM]` (the shim's syslog
    /// hook) and `containerd[PID]` (containerd copying its log FIFO), as kata-containers
    /// PR #4130 and #10622 show them.
    pub dup_identifiers: bool,
    /// The first GPU's VRAM BAR finds no space in the guest (the BAR-failure lines in this
    /// wording, the kernel's `pci=realloc` hint, the NVIDIA driver's `BARn is 0M` and its
    /// failed probe): that GPU is never enabled and the CDI specs never resolve (a Complete
    /// outcome becomes CdiNeverResolved).
    pub bar_unassigned: Option<BarWording>,
    /// The sandbox stopped (a complete boot's after its start, or one's before it).
    pub stop: Option<Stop>,
    /// The guest kernel's console lines written as Kata 1.x's `kata-proxy[PID]` lines
    /// (`msg="[ … ] …\n"`), the agent's records still in `vmconsole=`.
    pub proxy_console: Option<ProxyConsole>,
    /// The shim is the Rust one (runtime-rs, Kata ≥ 3.20, through journald): its lines are
    /// `kata[SHIM]: message` with no logfmt, the console `vm console: "…"` (`{:?}`), the
    /// agent's records as they are, and the sandbox named only in the QEMU command it logs
    /// after its first line. containerd's own lines stay logfmt. Its failures name no level
    /// in the short formats: only for boots that fail in the guest or not at all.
    pub rust_shim: bool,
    pub outcome: Outcome,
    /// The journal starts this far (0..1) from guest boot + 2 s to the last GPU's enable.
    pub head_cut: Option<f64>,
    /// The logs end this far (0..1) from the first CDI try to the container start.
    pub tail_cut: Option<f64>,
    pub kubectl: bool,
    /// The node's host name (journald's host field, kubectl's `Node:`).
    pub host: String,
    pub journal_format: JournalFormat,
    /// Every line of a journald text format behind a CI runner's clock (`-o cat` and
    /// `-o json` are left as they are).
    pub ci_clock: Option<CiClock>,
    /// When the boot starts (its first line); `None`: a time within a year of the study's
    /// boot, from the seed.
    pub start: Option<Nanos>,
}

impl Spec {
    /// The study's boot: 7 H100 (128 GiB BARs), 10 + 100 GiB at 4 KiB pages, type1.
    pub fn study(seed: u64) -> Spec {
        Spec {
            seed,
            gpus: 7,
            bar_gib: 128,
            old_bar_lines: false,
            boot_ram_gib: 10,
            hot_ram_gib: 96,
            ram_pages: RamPages::Small,
            pin_trace: true,
            binds: vec![Bind::After; 7],
            enable_order: vec![0, 5, 4, 3, 2, 1, 6],
            zone_min: 0,
            zh_prefix: false,
            zoned_time_field: false,
            prefix_only_pct: 0,
            agent_offset_ms: 0,
            trace_shift_h: 0,
            foreign_pins: false,
            concurrent_pins: false,
            other_sandbox: false,
            earlier_boot: false,
            emulated_vga: false,
            pre314: false,
            dup_identifiers: false,
            bar_unassigned: None,
            stop: None,
            proxy_console: None,
            rust_shim: false,
            outcome: Outcome::Complete,
            head_cut: None,
            tail_cut: None,
            kubectl: false,
            host: "gpu-node-3".to_string(),
            journal_format: JournalFormat::Short,
            ci_clock: None,
            start: None,
        }
    }
}

/// One GPU's truth.
#[derive(Debug, Clone)]
pub struct GpuTruth {
    pub bdf: String,
    /// Driver init: enable until the later of bind and BAR pin (or the driver's own work).
    pub init_s: f64,
    /// Seconds the host spent pinning its BARs (as the trace prints them), with a trace.
    pub pin_s: Option<f64>,
    /// Its enable and the line that closes its init are both inside the logs.
    pub checkable: bool,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Truth {
    pub sandbox: String,
    pub shim_pid: u32,
    pub qemu_pid: u32,
    pub gpus: usize,
    /// In enable order.
    pub per_gpu: Vec<GpuTruth>,
    /// First CDI try → specs injected; `None` when not resolved or the log misses either.
    pub cdi_wait_s: Option<f64>,
    /// Tries in the log, when it holds them all.
    pub cdi_tries: Option<u32>,
    /// First hotplug pin (or `online_cpu_mem` untraced) → last memory block onlined.
    pub memory_hotplug_s: Option<f64>,
    pub status: &'static str,
    pub failure_step: Option<&'static str>,
    /// The device a failed VFIO hot-plug names (with its domain), and the hypervisor's
    /// reason: both must be in the failure's summary.
    pub failure_device: Option<String>,
    pub failure_reason: Option<String>,
    /// The line that stops the sandbox after its container started, when the log has it:
    /// the report must say so.
    pub stopped_after_start: bool,
    /// A GPU BAR the guest could not assign: (GPU, `BAR n`, bytes); a finding must name
    /// all three.
    pub bar_unassigned: Option<(String, String, u64)>,
    pub started_late: bool,
    /// Hours to add to the trace's stamps to put them on the host clock.
    pub trace_shift_h: i64,
    /// The boot's first line, host clock.
    pub vm_start: Nanos,
    /// Whether that line has only a prefix time (whole seconds).
    pub vm_start_prefix_only: bool,
    /// First line (or kubectl's Start Time) to the container started (or kubectl's
    /// Started), for a complete boot whose logs hold all of it.
    pub total_s: Option<f64>,
    /// Seconds of this VM's host pin calls of 10 ms or more (as the trace prints them),
    /// with a trace; `None` without one.
    pub pins_s: Option<f64>,
    /// The pages backing guest RAM.
    pub ram_pages: RamPages,
    /// The copies of shim lines the journal holds ([`Spec::dup_identifiers`]): the
    /// records a reader must drop.
    pub duplicates: u64,
}

/// The generated inputs.
#[derive(Debug, Clone)]
pub struct Records {
    pub journal: String,
    pub bpftrace: Option<String>,
    pub kubectl: Option<String>,
    pub truth: Truth,
}

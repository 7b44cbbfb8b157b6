//! Boot records with known truth: a containerd journal (guest console and kata-agent
//! records inside `vmconsole=`, shim and CRI lines), the host's bpftrace pin trace and a
//! `kubectl describe pod`, written in the shapes real clusters produce, from a [`Spec`] that
//! varies everything the analysis must not depend on — GPU count, BAR and RAM sizes, page
//! backing, when each GPU's driver binds (before its BAR pin ends, after, or never logged),
//! the order GPUs are enabled in, the journal's zone and locale, lines with only a prefix
//! time, the agent's and the trace's clock offsets, a late start or an early end of the log,
//! other VMs' pins, other sandboxes, an earlier boot of the same sandbox id, an emulated VGA,
//! the pre-3.14 agent wording, and failures. [`Truth`] is what happened; the property tests
//! check that the analysis recovers it.
//!
//! The causal model is the Kata GPU boot study's: the guest driver enables one GPU at a
//! time; the enable makes QEMU map the GPU's BARs, so the host pins them right after; the
//! GPU is ready when both its bind and that pin are done, and the driver goes on to the
//! next; the agent retries CDI every ~2.1 s until NVRC has generated the specs after the
//! last GPU; the shim then hotplugs memory (pinned on the host before the guest onlines its
//! blocks) and starts the container.

pub mod gen;

use serde_json::json;

use crate::parse::time::{civil_from_nanos, days_from_civil, Nanos, NS_PER_S};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    /// The CDI specs never appear; the agent gives up after its tries.
    CdiNeverResolved,
    /// The shim's create_container timeout fires while the agent waits for CDI.
    CreateTimeout,
    /// The host cannot cold-plug the devices: the VM never boots.
    ColdPlugFailed,
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
    pub outcome: Outcome,
    /// The journal starts this far (0..1) from guest boot + 2 s to the last GPU's enable.
    pub head_cut: Option<f64>,
    /// The logs end this far (0..1) from the first CDI try to the container start.
    pub tail_cut: Option<f64>,
    pub kubectl: bool,
    /// The node's host name (journald's host field, kubectl's `Node:`).
    pub host: String,
    pub journal_format: JournalFormat,
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
            outcome: Outcome::Complete,
            head_cut: None,
            tail_cut: None,
            kubectl: false,
            host: "gpu-node-3".to_string(),
            journal_format: JournalFormat::Short,
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
}

/// The generated inputs.
#[derive(Debug, Clone)]
pub struct Records {
    pub journal: String,
    pub bpftrace: Option<String>,
    pub kubectl: Option<String>,
    pub truth: Truth,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn hex(&mut self, n: usize) -> String {
        let mut s = String::new();
        while s.len() < n {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(n);
        s
    }
}

fn ns(s: f64) -> Nanos {
    (s * 1e9).round() as Nanos
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `2025-11-20T17:55:38.490000781+08:00` (or `Z`).
fn rfc3339(t: Nanos, zone_s: Option<i64>) -> String {
    let off = zone_s.unwrap_or(0);
    let (y, mo, d, h, mi, s, sub) = civil_from_nanos(t + off * NS_PER_S);
    let z = match zone_s {
        None => "Z".to_string(),
        Some(o) => crate::parse::time::format_offset(o),
    };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{sub:09}{z}")
}

/// The abbreviation `short-full` prints for a zone (`%Z`).
fn zone_name(zone_s: i64) -> String {
    match zone_s {
        0 => "UTC".into(),
        28_800 => "CST".into(),
        -14_400 => "EDT".into(),
        19_800 => "IST".into(),
        3_600 => "CET".into(),
        o => crate::parse::time::format_offset(o).replace(':', ""),
    }
}

/// A journald prefix of `spec`'s format in the host's zone, with the host and the
/// identifier: `Nov 20 17:55:38 host ident: ` (nothing for `-o cat`).
fn prefix(t: Nanos, zone_s: i64, spec: &Spec, ident: &str) -> String {
    let local = t + zone_s * NS_PER_S;
    let (y, mo, d, h, mi, s, sub) = civil_from_nanos(local);
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let wd = DAYS
        .get(local.div_euclid(86_400 * NS_PER_S).rem_euclid(7) as usize)
        .copied()
        .unwrap_or("Mon");
    let month = if spec.zh_prefix {
        format!("{mo}月")
    } else {
        MONTHS
            .get(mo as usize - 1)
            .copied()
            .unwrap_or("Jan")
            .to_string()
    };
    let off = crate::parse::time::format_offset(zone_s);
    let stamp = match spec.journal_format {
        JournalFormat::Short => format!("{month} {d:02} {h:02}:{mi:02}:{s:02}"),
        JournalFormat::ShortPrecise => {
            format!("{month} {d:02} {h:02}:{mi:02}:{s:02}.{:06}", sub / 1000)
        }
        JournalFormat::ShortIso => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}",
            off.replace(':', "")
        ),
        JournalFormat::ShortIsoPrecise => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}{off}",
            sub / 1000
        ),
        JournalFormat::ShortFull => format!(
            "{wd} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} {}",
            zone_name(zone_s)
        ),
        JournalFormat::Cat | JournalFormat::Json => return String::new(),
    };
    format!("{stamp} {} {ident}: ", spec.host)
}

/// Go `%q` of a console payload.
fn go_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// What a journal line carries.
enum Body {
    Shim {
        level: &'static str,
        msg: String,
        error: Option<String>,
        prefix_only: bool,
    },
    Console(String),
    /// containerd's CRI plugin: no shim pid, the sandbox named in the text.
    Cri {
        msg: String,
        error: String,
    },
}

struct JLine {
    /// When the host logged it.
    t: Nanos,
    sandbox: String,
    shim: u32,
    body: Body,
}

struct Out {
    lines: Vec<JLine>,
    /// (start, dur ms, vaddr, size, pid)
    pins: Vec<(Nanos, u64, u64, u64, u32)>,
}

struct Guest<'a> {
    out: &'a mut Out,
    rng: &'a mut Rng,
    sandbox: String,
    shim: u32,
    boot: Nanos,
    agent_offset: Nanos,
}

impl Guest<'_> {
    fn delay(&mut self) -> Nanos {
        ns(self.rng.f(0.001, 0.015))
    }
    fn kernel(&mut self, t: Nanos, text: &str) {
        let g = (t - self.boot) as f64 / 1e9;
        let d = self.delay();
        self.out.lines.push(JLine {
            t: t + d,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Console(format!("[{g:>12.6}] {text}")),
        });
    }
    fn agent(&mut self, t: Nanos, subsystem: &str, msg: &str, extra: Option<(&str, String)>) {
        let mut v = json!({
            "msg": msg,
            "level": "INFO",
            "ts": rfc3339(t + self.agent_offset, None),
            "pid": "1",
            "version": "0.1.0",
            "subsystem": subsystem,
            "name": "kata-agent",
            "source": "agent",
        });
        if let (Some((k, x)), Some(m)) = (extra, v.as_object_mut()) {
            m.insert(k.to_string(), json!(x));
        }
        let d = self.delay();
        self.out.lines.push(JLine {
            t: t + d,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Console(v.to_string()),
        });
    }
    fn uevent(&mut self, t: Nanos, action: &str, devpath: &str, subsystem: &str, seq: u64) {
        let ev = format!(
            "Uevent {{ action: \"{action}\", devpath: \"{devpath}\", devname: \"\", subsystem: \"{subsystem}\", seqnum: \"{seq}\", interface: \"\" }}"
        );
        self.agent(t, "uevent", "got uevent message", Some(("event", ev)));
    }
    fn shim(
        &mut self,
        t: Nanos,
        level: &'static str,
        msg: &str,
        error: Option<String>,
        prefix_only: bool,
    ) {
        self.out.lines.push(JLine {
            t,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Shim {
                level,
                msg: msg.to_string(),
                error,
                prefix_only,
            },
        });
    }
}

fn bar_range(base: u64, size: u64) -> String {
    format!("0x{base:x}-0x{:x}", base + size - 1)
}

/// Generate the records of `spec`.
pub fn render(spec: &Spec) -> Records {
    let mut rng = Rng(spec.seed ^ 0x5EED_0001);
    let gpus = spec.gpus.min(16);
    let zone_s = spec.zone_min * 60;
    // 2025-11-20 17:55:38.49 UTC plus up to a year, on a whole second plus a fraction
    let day = days_from_civil(2025, 11, 20) + (rng.next() % 365) as i64;
    let t0 = day * 86_400 * NS_PER_S + ns(64_538.0 + rng.f(0.0, 3600.0).floor() + rng.f(0.2, 0.8));
    let t0 = spec.start.unwrap_or(t0);
    let sandbox = rng.hex(64);
    let shim_pid = 1000 + (rng.next() % 4_000_000) as u32;
    let qemu_pid = shim_pid + 48;
    let mut out = Out {
        lines: Vec::new(),
        pins: Vec::new(),
    };
    let s = |x: f64| ns(x);
    let pin_rate = |rng: &mut Rng| match spec.ram_pages {
        RamPages::Small => rng.f(0.10, 0.14),
        RamPages::Huge => rng.f(0.0025, 0.004),
    };
    let pin_ms = |secs: f64| (secs * 1000.0).round().max(0.0) as u64;

    let mut g = Guest {
        out: &mut out,
        rng: &mut rng,
        sandbox: sandbox.clone(),
        shim: shim_pid,
        boot: 0,
        agent_offset: spec.agent_offset_ms * 1_000_000,
    };
    let first_prefix_only = spec.prefix_only_pct > 50 && spec.journal_format != JournalFormat::Cat;
    g.shim(t0, "info", "Creating sandbox", None, first_prefix_only);
    let mut truth = Truth {
        sandbox: sandbox.clone(),
        shim_pid,
        qemu_pid,
        gpus,
        per_gpu: Vec::new(),
        cdi_wait_s: None,
        cdi_tries: None,
        memory_hotplug_s: None,
        status: "complete",
        failure_step: None,
        started_late: spec.head_cut.is_some(),
        trace_shift_h: -spec.trace_shift_h,
        vm_start: t0,
        vm_start_prefix_only: first_prefix_only,
        total_s: None,
        pins_s: None,
        ram_pages: spec.ram_pages,
    };
    let prefix_only = |rng: &mut Rng| (rng.next() % 100) < u64::from(spec.prefix_only_pct);

    if spec.outcome == Outcome::ColdPlugFailed {
        let p = prefix_only(g.rng);
        g.shim(t0 + s(0.3), "info", "Starting VM", None, p);
        let t = t0 + s(g.rng.f(1.0, 5.0));
        g.out.lines.push(JLine {
            t,
            sandbox: sandbox.clone(),
            shim: 0,
            body: Body::Cri {
                msg: "RunPodSandbox for &PodSandboxMetadata{Name:gpu-job,Uid:5c1e,Namespace:default,Attempt:0,} failed, error".into(),
                error: format!("rpc error: code = Unknown desc = failed to start sandbox \"{sandbox}\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=0"),
            },
        });
        truth.status = "failed";
        truth.failure_step = Some("cold_plug");
        truth.started_late = false;
        let journal = finish(
            spec,
            &mut rng_for_rest(spec),
            out,
            zone_s,
            &sandbox,
            t0,
            t + s(1.0),
        );
        return Records {
            journal,
            bpftrace: None,
            kubectl: None,
            truth,
        };
    }

    let p = prefix_only(g.rng);
    g.shim(t0 + s(0.5), "info", "Starting VM", None, p);
    // vm_create: QEMU starts, boot RAM is pinned
    let mut t = t0 + s(g.rng.f(1.0, 2.0));
    let rate = pin_rate(g.rng);
    let boot_pin = spec.boot_ram_gib as f64 * rate;
    if spec.pin_trace && spec.boot_ram_gib > 0 {
        g.out.pins.push((
            t,
            pin_ms(boot_pin),
            0x7b30_7400_0000,
            spec.boot_ram_gib << 30,
            qemu_pid,
        ));
    }
    t += s(boot_pin + g.rng.f(2.0, 20.0));
    let boot = t;
    g.boot = boot;
    let p = prefix_only(g.rng);
    g.shim(boot - s(0.2), "info", "VM started", None, p);
    g.kernel(boot, "Linux version 6.12.47-nvidia-gpu (root@kata) #1 SMP");
    g.kernel(boot + s(0.437), "brd: module loaded");
    if spec.emulated_vga {
        g.kernel(
            boot + s(0.45),
            "pci 0000:00:01.0: [1234:1111] type 00 class 0x030000 conventional PCI endpoint",
        );
        g.kernel(
            boot + s(0.451),
            "pci 0000:00:01.0: BAR 0 [mem 0xfd000000-0xfdffffff pref]",
        );
    }
    let init_at = boot + s(g.rng.f(1.0, 1.3));
    g.kernel(init_at, "Run /init as init process");
    let agent_at = init_at + s(g.rng.f(0.1, 0.4));
    g.agent(
        agent_at,
        "rpc",
        "rpc call from shim to agent: \"create_sandbox\"",
        None,
    );

    // ---- PCI enumeration ------------------------------------------------------------------
    let bdfs: Vec<String> = (0..gpus)
        .map(|k| format!("0000:{:02x}:00.0", k + 2))
        .collect();
    let ports: Vec<String> = (0..gpus)
        .map(|k| format!("0000:00:{:02x}.0", k + 5))
        .collect();
    let bar = spec.bar_gib << 30;
    let mut tf = agent_at + s(g.rng.f(2.0, 10.0));
    let mut seq = 1300u64;
    for k in 0..gpus {
        let bdf = &bdfs[k];
        g.kernel(
            tf,
            &format!("pci {bdf}: [10de:2330] type 00 class 0x030200 PCIe Endpoint"),
        );
        let sizes = [(0u8, 16u64 << 20), (2, bar), (4, 32 << 20)];
        for (j, (idx, sz)) in sizes.iter().enumerate() {
            let line = if spec.old_bar_lines {
                format!(
                    "pci {bdf}: reg 0x{:x}: [mem {} 64bit pref]",
                    0x10 + 4 * idx,
                    bar_range(0, *sz)
                )
            } else {
                format!(
                    "pci {bdf}: BAR {idx} [mem {} 64bit pref]",
                    bar_range(0, *sz)
                )
            };
            g.kernel(tf + s(0.0003 * (j + 1) as f64), &line);
        }
        let base = 0x3a40_0000_0000u64 + (k as u64) * 0x40_0000_0000;
        let mut off = 0u64;
        for (j, (idx, sz)) in [(2u8, bar), (4, 32u64 << 20), (0, 16 << 20)]
            .iter()
            .enumerate()
        {
            let r = bar_range(base + off, *sz);
            off += sz;
            let line = if spec.old_bar_lines {
                format!("pci {bdf}: BAR {idx}: assigned [mem {r} 64bit pref]")
            } else {
                format!("pci {bdf}: BAR {idx} [mem {r} 64bit pref]: assigned")
            };
            g.kernel(tf + s(0.004 + 0.0003 * j as f64), &line);
        }
        let devpath = format!("/devices/pci0000:00/{}/{bdf}", ports[k]);
        seq += 1;
        g.uevent(tf + s(0.006), "add", &devpath, "pci", seq);
        tf += s(g.rng.f(0.005, 0.3));
    }
    let last_found = tf;
    let create = last_found + s(g.rng.f(0.05, 0.5));
    g.agent(
        create,
        "rpc",
        "rpc call from shim to agent: \"create_container\"",
        None,
    );
    let c0 = create + s(0.01);
    let interval = g.rng.f(2.02, 2.15);

    // ---- driver init, one GPU at a time --------------------------------------------------
    let mut te = c0.max(last_found) + s(g.rng.f(2.0, 6.0));
    let mut per_gpu = Vec::new();
    let mut closes: Vec<Option<Nanos>> = Vec::new();
    let mut ends: Vec<Nanos> = Vec::new();
    let mut enables: Vec<Nanos> = Vec::new();
    // when the journal got each enable line (the console adds a delay): a log cut after it
    // has lost that GPU's start
    let mut enables_logged: Vec<Nanos> = Vec::new();
    let order: Vec<usize> = {
        let mut o: Vec<usize> = spec
            .enable_order
            .iter()
            .copied()
            .filter(|k| *k < gpus)
            .collect();
        for k in 0..gpus {
            if !o.contains(&k) {
                o.push(k);
            }
        }
        o.dedup();
        o
    };
    for &k in &order {
        let bdf = bdfs[k].clone();
        let e = te;
        enables.push(e);
        g.kernel(e, &format!("nvidia {bdf}: enabling device (0140 -> 0142)"));
        enables_logged.push(g.out.lines.last().map_or(e, |l| l.t));
        let vbase = 0x7800_0000_0000u64 + (k as u64) * 0x40_0000_0000;
        let (pin_end, pin_s) = if spec.pin_trace {
            let p0 = e + s(g.rng.f(0.002, 0.01));
            g.out
                .pins
                .push((p0, 0, vbase + 0x20_0000_0000, 16 << 20, qemu_pid));
            g.out
                .pins
                .push((p0 + s(0.001), 0, vbase + 0x21_0000_0000, 32 << 20, qemu_pid));
            let p = e + s(g.rng.f(0.02, 0.3));
            let ms = pin_ms(spec.bar_gib as f64 * g.rng.f(0.024, 0.028));
            g.out.pins.push((p, ms, vbase, bar, qemu_pid));
            (Some(p + (ms as Nanos) * 1_000_000), Some(ms as f64 / 1e3))
        } else {
            (None, None)
        };
        let bind_kind = spec.binds.get(k).copied().unwrap_or(Bind::After);
        let own = e + s(g.rng.f(0.3, 1.0));
        let bind = match bind_kind {
            Bind::Before => Some(match pin_end {
                Some(pe) => (e + s(g.rng.f(0.05, 0.25))).min(pe - s(0.01)),
                None => own,
            }),
            Bind::After => Some(pin_end.unwrap_or(own).max(own) + s(g.rng.f(0.01, 0.2))),
            Bind::Absent => None,
        };
        let end = match (bind, pin_end) {
            (Some(b), Some(p)) => b.max(p),
            (Some(b), None) => b,
            (None, Some(p)) => p,
            (None, None) => own,
        };
        if let Some(b) = bind {
            seq += 1;
            let devpath = format!("/devices/pci0000:00/{}/{bdf}", ports[k]);
            g.uevent(b, "bind", &devpath, "pci", seq);
        }
        ends.push(end);
        // the line that closes it in the logs: the pin's return when traced, else the bind;
        // with neither, the next enable (or the first FBHUB clear), filled in below
        closes.push(pin_end.or(bind));
        te = end + s(g.rng.f(0.01, 0.3));
        per_gpu.push(GpuTruth {
            bdf,
            init_s: (end - e) as f64 / 1e9,
            pin_s,
            checkable: true,
        });
    }
    let last_end = ends.last().copied().unwrap_or(c0);
    let fbhub0 = last_end + s(g.rng.f(0.01, 0.3));
    let closes: Vec<Nanos> = closes
        .iter()
        .enumerate()
        .map(|(i, c)| c.unwrap_or_else(|| enables.get(i + 1).copied().unwrap_or(fbhub0)))
        .collect();
    for n in 0..gpus {
        g.kernel(
            fbhub0 + s(2.12 * n as f64),
            "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
        );
    }
    let fbhub_end = fbhub0 + s(2.12 * gpus as f64);

    // ---- CDI ---------------------------------------------------------------------------------
    let mut devices: Vec<String> = (0..gpus).map(|i| format!("nvidia.com/gpu={i}")).collect();
    for i in (1..devices.len()).rev() {
        let j = (g.rng.next() % (i as u64 + 1)) as usize;
        devices.swap(i, j);
    }
    let list = devices.join(", ");
    let (done, fail_at) = match spec.outcome {
        Outcome::Complete => (Some(fbhub_end + s(g.rng.f(5.0, 45.0))), None),
        Outcome::CdiNeverResolved => (None, Some(c0 + s(interval * 100.0 + 1.05))),
        Outcome::CreateTimeout => (
            None,
            Some(create + s(g.rng.f(60.0, 150.0)).max(fbhub_end - create + s(5.0))),
        ),
        Outcome::ColdPlugFailed => (None, None),
    };
    let wait_end = done.or(fail_at).unwrap_or(c0);
    let mut tries = 0u32;
    // when the journal got the first try's line (the console adds a delay): a log cut after
    // it has lost the start of the wait
    let mut first_try_logged: Option<Nanos> = None;
    loop {
        let at = c0 + s(interval * f64::from(tries));
        if at >= wait_end || tries > 100 {
            break;
        }
        let msg = if spec.pre314 {
            format!("error injecting devices: \"unresolvable CDI devices {list}\"")
        } else {
            format!("waiting for CDI spec(s) to be generated ({tries} of 100 max tries) \"unresolvable CDI devices {list}\"")
        };
        g.agent(at, "rpc", &msg, None);
        if tries == 0 {
            first_try_logged = g.out.lines.last().map(|l| l.t);
        }
        tries += 1;
    }
    // when the line that ends the CDI wait reached the journal
    let mut done_logged: Option<Nanos> = None;
    let end_of_boot = match spec.outcome {
        Outcome::Complete => {
            let d = done.unwrap_or(c0);
            g.agent(d, "rpc", "all devices injected successfully, modified CDI container spec: Spec { version: \"1.1.0\" }", None);
            done_logged = g.out.lines.last().map(|l| l.t);
            truth.cdi_wait_s = Some((d - c0) as f64 / 1e9);
            truth.cdi_tries = Some(tries);
            // memory hotplug, then the container starts
            let h0 = d + s(g.rng.f(5.0, 20.0));
            let mut th = h0;
            let rate = pin_rate(g.rng);
            let mut left = spec.hot_ram_gib;
            let mut addr = 0x7832_c000_0000u64;
            while left > 0 {
                let chunk = left.min(4);
                let ms = pin_ms(chunk as f64 * rate);
                if spec.pin_trace {
                    g.out.pins.push((th, ms, addr, chunk << 30, qemu_pid));
                }
                addr += chunk << 30;
                left -= chunk;
                th += (ms as Nanos) * 1_000_000 + s(g.rng.f(0.05, 0.15));
            }
            let mut last = th;
            if spec.hot_ram_gib > 0 {
                let online = th + s(g.rng.f(0.2, 0.4));
                g.agent(
                    online,
                    "rpc",
                    "rpc call from shim to agent: \"online_cpu_mem\"",
                    None,
                );
                let mut tu = online + s(0.015);
                for b in 0..spec.hot_ram_gib * 8 {
                    seq += 1;
                    g.uevent(
                        tu,
                        "add",
                        &format!("/devices/system/memory/memory{}", 80 + b),
                        "memory",
                        seq,
                    );
                    last = tu;
                    tu += s(g.rng.f(0.00005, 0.0001));
                }
                let start = if spec.pin_trace { h0 } else { online };
                truth.memory_hotplug_s = Some((last - start) as f64 / 1e9);
            }
            let started = last + s(g.rng.f(0.5, 3.0));
            g.agent(
                started,
                "rpc",
                "rpc call from shim to agent: \"start_container\"",
                None,
            );
            truth.total_s = Some((started - t0) as f64 / 1e9);
            started
        }
        Outcome::CdiNeverResolved => {
            let f = fail_at.unwrap_or(c0);
            g.agent(
                f,
                "rpc",
                "failed to inject devices after CDI timeout of 100 seconds",
                None,
            );
            g.shim(f + s(0.01), "error", "createContainer failed", Some("rpc error: code = Internal desc = failed to inject devices after CDI timeout of 100 seconds".into()), false);
            truth.status = "failed";
            truth.failure_step = Some("cdi_wait");
            truth.cdi_tries = Some(tries);
            f + s(0.02)
        }
        Outcome::CreateTimeout => {
            let f = fail_at.unwrap_or(c0);
            g.shim(
                f,
                "error",
                "createContainer failed",
                Some(
                    "rpc error: code = DeadlineExceeded desc = CreateContainerRequest timed out"
                        .into(),
                ),
                false,
            );
            truth.status = "failed";
            truth.failure_step = Some("create_container");
            f + s(0.01)
        }
        // returned above: the VM never boots
        Outcome::ColdPlugFailed => c0,
    };

    // ---- cuts --------------------------------------------------------------------------------
    let head = spec.head_cut.map(|x| {
        let lo = boot + s(2.0);
        let hi = enables.last().copied().unwrap_or(lo).max(lo + s(0.1));
        lo + ((hi - lo) as f64 * x.clamp(0.0, 0.98)) as Nanos
    });
    let tail = spec.tail_cut.map(|x| {
        let lo = c0 + s(1.0);
        let hi = (end_of_boot - s(0.3)).max(lo + s(0.1));
        lo + ((hi - lo) as f64 * x.clamp(0.0, 1.0)) as Nanos
    });
    if let Some(h) = head {
        for (i, gt) in per_gpu.iter_mut().enumerate() {
            if enables_logged.get(i).is_none_or(|e| *e < h) {
                gt.checkable = false;
            }
        }
        // the CDI wait is whole when the log still has its first try
        if first_try_logged.is_none_or(|t| t < h) {
            truth.cdi_wait_s = None;
            truth.cdi_tries = None;
        }
        truth.vm_start = h;
        truth.total_s = None;
    }
    if let Some(tc) = tail {
        for (i, gt) in per_gpu.iter_mut().enumerate() {
            let closer = closes.get(i).copied().unwrap_or(Nanos::MAX);
            if closer + s(0.05) > tc {
                gt.checkable = false;
            }
        }
        // the CDI wait is whole when the log still has the line that ends it (the line
        // reaches the journal a few ms after the agent printed it)
        if done_logged.is_none_or(|t| t > tc) {
            truth.cdi_wait_s = None;
            truth.cdi_tries = None;
        }
        truth.memory_hotplug_s = None;
        truth.total_s = None;
        // the logs end before the container started (or the failure was logged)
        truth.status = "unfinished";
        truth.failure_step = None;
    }
    truth.per_gpu = per_gpu;

    // ---- the rest: other boots, traces, kubectl --------------------------------------------
    let mut rest = rng_for_rest(spec);
    if spec.earlier_boot {
        let t = t0 - 2 * 86_400 * NS_PER_S;
        let old_shim = shim_pid.wrapping_sub(7777).max(2);
        let mut g2 = Guest {
            out: &mut out,
            rng: &mut rest,
            sandbox: sandbox.clone(),
            shim: old_shim,
            boot: t + s(5.0),
            agent_offset: spec.agent_offset_ms * 1_000_000,
        };
        g2.shim(t, "info", "Creating sandbox", None, false);
        g2.kernel(
            t + s(5.0),
            "Linux version 6.12.47-nvidia-gpu (root@kata) #1 SMP",
        );
        g2.kernel(t + s(6.1), "Run /init as init process");
        g2.agent(
            t + s(6.3),
            "rpc",
            "rpc call from shim to agent: \"create_sandbox\"",
            None,
        );
    }
    if spec.other_sandbox {
        let other = rest.hex(64);
        let t = t0 + s(rest.f(-30.0, 30.0));
        let mut g3 = Guest {
            out: &mut out,
            rng: &mut rest,
            sandbox: other,
            shim: shim_pid + 1,
            boot: t + s(3.0),
            agent_offset: 0,
        };
        g3.shim(t, "info", "Creating sandbox", None, false);
        g3.kernel(t + s(3.0), "Linux version 6.12.47 (root@kata) #1 SMP");
        g3.kernel(t + s(4.1), "Run /init as init process");
        for i in 0..5 {
            g3.agent(
                t + s(4.3 + f64::from(i)),
                "rpc",
                "rpc call from shim to agent: \"stats_container\"",
                None,
            );
        }
    }
    let last_logged = tail.unwrap_or(Nanos::MAX);
    let first_logged = head.unwrap_or(Nanos::MIN);
    let journal = finish(
        spec,
        &mut rest,
        out_take(&mut out, first_logged, last_logged),
        zone_s,
        &sandbox,
        t0,
        end_of_boot,
    );

    truth.pins_s = spec.pin_trace.then(|| {
        out.pins
            .iter()
            .filter(|p| p.4 == qemu_pid && p.1 >= 10)
            .filter(|p| p.0 + (p.1 as Nanos) * 1_000_000 <= last_logged)
            .map(|p| p.1 as f64 / 1e3)
            .sum()
    });
    let bpftrace = spec.pin_trace.then(|| {
        let mut pins: Vec<(Nanos, u64, u64, u64, u32)> = out
            .pins
            .iter()
            .copied()
            .filter(|p| p.0 + (p.1 as Nanos) * 1_000_000 <= last_logged)
            .collect();
        let foreign = qemu_pid + 1000;
        if spec.foreign_pins {
            let t = t0 - s(rest.f(600.0, 3000.0));
            for k in 0..gpus.max(1) {
                let ms = pin_ms(spec.bar_gib as f64 * 0.026);
                pins.push((t + s(4.0 * k as f64), ms, 0x7000_0000_0000 + (k as u64) * 0x40_0000_0000, bar, foreign));
            }
            for k in 0..6u64 {
                pins.push((t + s(60.0 + 0.6 * k as f64), 500, 0x7100_0000_0000 + k * (4 << 30), 4 << 30, foreign));
            }
        }
        if spec.concurrent_pins {
            let span = ((end_of_boot - t0) as f64 / 1e9).max(10.0);
            for k in 0..12u64 {
                let at = t0 + s(rest.f(0.0, span));
                pins.push((at, 480 + k, 0x7200_0000_0000 + k * (4 << 30), 4 << 30, foreign + 1));
            }
        }
        let shift = spec.trace_shift_h * 3600 * NS_PER_S;
        let mut lines: Vec<(Nanos, String)> = Vec::new();
        for (start, ms, vaddr, size, pid) in pins {
            let npage = size / 4096;
            lines.push((
                start,
                format!(
                    "{}: vfio_pin_pages_remote(): vaddr=0x{vaddr:x} npage={npage} size={}B limit=2048 pid={pid}",
                    rfc3339(start + shift, None),
                    npage * 4096
                ),
            ));
            let end = start + (ms as Nanos) * 1_000_000;
            lines.push((
                end,
                format!("{}: vfio_pin_pages_remote took {ms} ms", rfc3339(end + shift, None)),
            ));
        }
        lines.sort_by_key(|l| l.0);
        let mut text = String::from("Attaching 2 probes...\n");
        for (_, l) in lines {
            text.push_str(&l);
            text.push('\n');
        }
        text
    });
    let kubectl = (spec.kubectl && spec.outcome == Outcome::Complete && tail.is_none()).then(|| {
        let start = t0 - s(rest.f(0.5, 3.0));
        let started = end_of_boot + s(rest.f(0.0, 0.5));
        // the describe output has whole seconds
        let whole = |t: Nanos| t.div_euclid(NS_PER_S) * NS_PER_S;
        if head.is_none() {
            truth.total_s = Some((whole(started) - whole(start)) as f64 / 1e9);
        }
        format!(
            "Name:             gpu-job\nNamespace:        default\nNode:             {}/10.0.0.{}\nStart Time:       {}\nStatus:           Running\nContainers:\n  cuda:\n    State:          Running\n      Started:      {}\n",
            spec.host,
            1 + spec.seed % 250,
            rfc1123(start, zone_s),
            rfc1123(started, zone_s)
        )
    });
    Records {
        journal,
        bpftrace,
        kubectl,
        truth,
    }
}

/// One node of a generated fleet: its containerd journal, its host pin trace, its pods'
/// `kubectl describe` output, and what happened in each boot.
#[derive(Debug, Clone)]
pub struct NodeRecords {
    pub host: String,
    pub journal: String,
    /// `None` when no boot of the node was traced.
    pub bpftrace: Option<String>,
    /// `kubectl describe pods` of the node's pods that have one (`None`: none has).
    pub kubectl: Option<String>,
    /// Each boot's spec (as rendered: its host and start set) and truth, in time order.
    pub boots: Vec<(Spec, Truth)>,
}

/// Boots of several nodes with known truth. Each node's specs are rendered one after
/// another, `spacing_s` apart from `start` on, on that node's host (a node has one zone,
/// one locale, one journal format and one trace clock: the first spec's are used for all
/// its boots), and their
/// logs are joined as one host keeps them: one journal, one pin trace, one `kubectl
/// describe pods`.
pub fn fleet(nodes: &[(String, Vec<Spec>)], start: Nanos, spacing_s: i64) -> Vec<NodeRecords> {
    nodes
        .iter()
        .enumerate()
        .map(|(ni, (host, specs))| {
            let first = specs.first().cloned();
            let mut out = NodeRecords {
                host: host.clone(),
                journal: String::new(),
                bpftrace: None,
                kubectl: None,
                boots: Vec::new(),
            };
            for (i, spec) in specs.iter().enumerate() {
                let mut spec = spec.clone();
                // every boot its own sandbox id and shim, even from equal specs
                spec.seed = spec.seed.wrapping_add(
                    (ni as u64 * 1_000 + i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                );
                spec.host = host.clone();
                spec.start = Some(start + i as Nanos * spacing_s * NS_PER_S);
                if let Some(f) = &first {
                    spec.zone_min = f.zone_min;
                    spec.zh_prefix = f.zh_prefix;
                    spec.zoned_time_field = f.zoned_time_field;
                    spec.trace_shift_h = f.trace_shift_h;
                    spec.journal_format = f.journal_format;
                }
                let rec = render(&spec);
                out.journal.push_str(&rec.journal);
                if let Some(b) = &rec.bpftrace {
                    out.bpftrace.get_or_insert_with(String::new).push_str(b);
                }
                if let Some(k) = &rec.kubectl {
                    let all = out.kubectl.get_or_insert_with(String::new);
                    if !all.is_empty() {
                        all.push('\n');
                    }
                    all.push_str(k);
                }
                out.boots.push((spec, rec.truth));
            }
            out
        })
        .collect()
}

fn rng_for_rest(spec: &Spec) -> Rng {
    Rng(spec.seed ^ 0xA11C_E5ED)
}

/// The lines logged between `from` and `to` (a journal that starts late or ends early).
fn out_take(out: &mut Out, from: Nanos, to: Nanos) -> Out {
    let lines = std::mem::take(&mut out.lines)
        .into_iter()
        .filter(|l| l.t >= from && l.t <= to)
        .collect();
    Out {
        lines,
        pins: Vec::new(),
    }
}

/// `Thu, 20 Nov 2025 17:55:38 +0800`.
fn rfc1123(t: Nanos, zone_s: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let local = t + zone_s * NS_PER_S;
    let (y, mo, d, h, mi, s, _) = civil_from_nanos(local);
    let wd = DAYS
        .get(local.div_euclid(86_400 * NS_PER_S).rem_euclid(7) as usize)
        .copied()
        .unwrap_or("Mon");
    let z = crate::parse::time::format_offset(zone_s).replace(':', "");
    format!(
        "{wd}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} {z}",
        MONTHS.get(mo as usize - 1).copied().unwrap_or("Jan")
    )
}

/// Write the journal: sort by host time, add noise from other units, format.
fn finish(
    spec: &Spec,
    rng: &mut Rng,
    mut out: Out,
    zone_s: i64,
    _sandbox: &str,
    t0: Nanos,
    end: Nanos,
) -> String {
    // noise from other units across the boot
    let span = ((end - t0) as f64 / 1e9).max(1.0);
    let noise: Vec<(Nanos, String)> = (0..(span as usize / 4 + 3))
        .map(|i| {
            let t = t0 + ns(rng.f(0.0, span));
            (
                t,
                format!(
                    "kubelet[2211]: I1120 {:02}:00:00.000000 2211 prober.go:107] \"Probe failed\" probeType=\"Readiness\" pod=\"default/web-{i}\"",
                    i % 24
                ),
            )
        })
        .collect();
    out.lines.sort_by_key(|l| l.t);
    let cat = spec.journal_format == JournalFormat::Cat;
    let field_zone = spec.zoned_time_field.then_some(zone_s);
    let mut text = String::new();
    let mut ni = noise.into_iter().peekable();
    for l in &out.lines {
        while let Some((t, n)) = ni.peek() {
            if *t > l.t {
                break;
            }
            if !cat {
                // `kubelet[2211]: message`: the identifier is the noise line's own
                if let Some((ident, msg)) = n.split_once(": ") {
                    journal_entry(&mut text, *t, zone_s, spec, ident, msg);
                }
            }
            ni.next();
        }
        let time = rfc3339(l.t, field_zone);
        let msg = match &l.body {
            Body::Console(payload) => format!(
                "time=\"{time}\" level=debug msg=\"reading guest console\" console-protocol=unix console-url=/run/vc/vm/{sb}/console.sock name=containerd-shim-v2 pid={pid} sandbox={sb} source=virtcontainers subsystem=sandbox vmconsole={}",
                go_quote(payload),
                sb = l.sandbox,
                pid = l.shim
            ),
            Body::Shim {
                level,
                msg,
                error,
                prefix_only,
            } => {
                // `-o cat` has no prefix: every line keeps its time=
                let t = if *prefix_only && !cat {
                    String::new()
                } else {
                    format!("time=\"{time}\" ")
                };
                let err = error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" error={}", go_quote(e)));
                format!(
                    "{t}level={level} msg={}{err} name=containerd-shim-v2 pid={} sandbox={} source=virtcontainers subsystem=sandbox",
                    go_quote(msg),
                    l.shim,
                    l.sandbox
                )
            }
            Body::Cri { msg, error } => format!(
                "time=\"{time}\" level=error msg={} error={}",
                go_quote(msg),
                go_quote(error)
            ),
        };
        journal_entry(&mut text, l.t, zone_s, spec, "containerd[2771108]", &msg);
    }
    text
}

/// One journal entry as `journalctl -o FORMAT` prints it: the prefix and the message, or
/// for `-o json` an object of journald's fields.
fn journal_entry(text: &mut String, t: Nanos, zone_s: i64, spec: &Spec, ident: &str, msg: &str) {
    if spec.journal_format != JournalFormat::Json {
        text.push_str(&prefix(t, zone_s, spec, ident));
        text.push_str(msg);
        text.push('\n');
        return;
    }
    let (name, pid) = ident
        .strip_suffix(']')
        .and_then(|i| i.split_once('['))
        .unwrap_or((ident, ""));
    let us = t.div_euclid(1000);
    // journald writes a message holding control characters as its bytes
    let message = if msg.bytes().any(|b| b < 0x20) {
        serde_json::json!(msg.as_bytes())
    } else {
        serde_json::json!(msg)
    };
    let entry = serde_json::json!({
        "__CURSOR": format!("s=5e1c;i={us:x};b=7a0e;m={:x};t={us:x};x=1", us % 0xffff_ffff),
        "__REALTIME_TIMESTAMP": us.to_string(),
        "__MONOTONIC_TIMESTAMP": (us % 1_000_000_000_000).to_string(),
        "_BOOT_ID": "7a0e0c6f0e4b4f7e9a0d3c1b2a190807",
        "PRIORITY": "6",
        "SYSLOG_FACILITY": "3",
        "_UID": "0",
        "_GID": "0",
        "_TRANSPORT": "stdout",
        "_SYSTEMD_UNIT": format!("{name}.service"),
        "SYSLOG_IDENTIFIER": name,
        "_PID": pid,
        "_COMM": name,
        "_HOSTNAME": spec.host,
        "MESSAGE": message,
    });
    text.push_str(&entry.to_string());
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_boot_renders() {
        let r = render(&Spec::study(1));
        assert!(r.journal.lines().count() > 800);
        assert!(r
            .bpftrace
            .as_ref()
            .unwrap()
            .contains("vfio_pin_pages_remote took"));
        assert_eq!(r.truth.per_gpu.len(), 7);
        for g in &r.truth.per_gpu {
            assert!((3.0..=4.0).contains(&g.init_s), "{g:?}");
        }
        assert!(rfc1123(0, 8 * 3600).starts_with("Thu, 01 Jan 1970 08:00:00 +0800"));
        assert_eq!(go_quote("a\"b\\"), "\"a\\\"b\\\\\"");
    }
}

//! The boot itself, step by step as the study saw it: the shim starts QEMU (the host pins
//! boot RAM), the guest kernel boots and enumerates the GPUs, the driver enables them one at
//! a time (the host pins each one's BARs), the agent waits for the CDI specs, the shim
//! hotplugs memory and starts the container — or the boot fails on the way. Each step writes
//! its lines and pins and returns the instants the later steps and the log cuts need.

use super::guest::{Guest, Out, Pin};
use super::spec::{BarWording, Bind, GpuTruth, JournalFormat, Outcome, RamPages, Spec, Truth};
use super::{ns, pin_ms, Ids, Rng};
use crate::parse::time::Nanos;

/// The boot being generated: where its lines and pins go, and its truth so far.
pub(super) struct Vm<'a> {
    spec: &'a Spec,
    g: Guest<'a>,
    t0: Nanos,
    qemu_pid: u32,
    gpus: usize,
    /// The last uevent's seqnum.
    seq: u64,
    pub(super) truth: Truth,
}

/// The agent's `create_container` call: when it came, and how it retries CDI.
pub(super) struct Create {
    /// When the agent got the call.
    pub(super) at: Nanos,
    /// The first CDI try.
    pub(super) c0: Nanos,
    /// Seconds between CDI tries.
    interval: f64,
}

/// The GPUs' driver init, in enable order.
pub(super) struct Drivers {
    pub(super) enables: Vec<Nanos>,
    /// When the journal got each enable line (the console adds a delay): a log cut after
    /// it has lost that GPU's start.
    pub(super) enables_logged: Vec<Nanos>,
    /// The line that closes each GPU's init in the logs.
    pub(super) closes: Vec<Nanos>,
    /// When the FBHUB clears are over (NVRC generates the CDI specs after it).
    fbhub_end: Nanos,
}

/// The agent's wait for the CDI specs.
pub(super) struct Cdi {
    /// When the specs are injected (a complete boot).
    done: Option<Nanos>,
    /// When the boot fails in the wait (the CDI timeout, the create timeout).
    fail_at: Option<Nanos>,
    /// The tries logged.
    tries: u32,
    /// When the journal got the first try's line: a log cut after it has lost the start
    /// of the wait.
    pub(super) first_try_logged: Option<Nanos>,
}

/// How the boot ended.
pub(super) struct End {
    /// The boot's last line: the container's start, or the failure.
    pub(super) at: Nanos,
    /// When the line that ends the CDI wait reached the journal.
    pub(super) done_logged: Option<Nanos>,
}

/// A GPU's bus address, by enumeration index.
fn bdf(k: usize) -> String {
    format!("0000:{:02x}:00.0", k + 2)
}

/// The sysfs path of GPU `k` (behind its root port).
fn devpath(k: usize) -> String {
    format!("/devices/pci0000:00/0000:00:{:02x}.0/{}", k + 5, bdf(k))
}

/// The order the driver enables the GPUs in: `spec`'s order (indices of the boot's
/// GPUs), then those it leaves out.
fn enable_order(spec: &Spec, gpus: usize) -> Vec<usize> {
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
}

/// The line that closes GPU `i`'s init: its own, else the next enable (or the first
/// FBHUB clear).
fn close_of(i: usize, own: Option<Nanos>, enables: &[Nanos], fbhub0: Nanos) -> Nanos {
    own.unwrap_or_else(|| enables.get(i + 1).copied().unwrap_or(fbhub0))
}

impl<'a> Vm<'a> {
    /// A boot of `spec` with `ids`, writing to `out` and drawing from `rng`; its truth
    /// before anything happened.
    pub(super) fn new(spec: &'a Spec, ids: &Ids, out: &'a mut Out, rng: &'a mut Rng) -> Self {
        let gpus = spec.gpus.min(16);
        let truth = Truth {
            sandbox: ids.sandbox.clone(),
            shim_pid: ids.shim_pid,
            qemu_pid: ids.qemu_pid,
            gpus,
            per_gpu: Vec::new(),
            cdi_wait_s: None,
            cdi_tries: None,
            memory_hotplug_s: None,
            status: "complete",
            failure_step: None,
            failure_device: None,
            failure_reason: None,
            stopped_after_start: false,
            bar_unassigned: None,
            started_late: spec.head_cut.is_some(),
            trace_shift_h: -spec.trace_shift_h,
            vm_start: ids.t0,
            vm_start_prefix_only: Self::first_prefix_only(spec),
            total_s: None,
            pins_s: None,
            ram_pages: spec.ram_pages,
            duplicates: 0,
        };
        Vm {
            spec,
            g: Guest {
                out,
                rng,
                sandbox: ids.sandbox.clone(),
                shim: ids.shim_pid,
                boot: 0,
                agent_offset: spec.agent_offset_ms * 1_000_000,
            },
            t0: ids.t0,
            qemu_pid: ids.qemu_pid,
            gpus,
            seq: 1300,
            truth,
        }
    }

    /// How the boot ends: the spec's outcome, but a boot one of whose GPUs the guest could
    /// not give its BAR never has the CDI specs of all its GPUs.
    fn outcome(&self) -> Outcome {
        match self.spec.outcome {
            Outcome::Complete if self.bar_fails(0) => Outcome::CdiNeverResolved,
            o => o,
        }
    }

    /// Whether GPU `k`'s VRAM BAR finds no space in the guest ([`Spec::bar_unassigned`]).
    fn bar_fails(&self, k: usize) -> bool {
        k == 0 && self.gpus > 0 && self.spec.bar_unassigned.is_some()
    }

    /// Whether the boot's first line has only a prefix time.
    fn first_prefix_only(spec: &Spec) -> bool {
        spec.prefix_only_pct > 50 && spec.journal_format != JournalFormat::Cat
    }

    /// Whether the next shim line has only a prefix time.
    fn prefix_only(&mut self) -> bool {
        (self.g.rng.next() % 100) < u64::from(self.spec.prefix_only_pct)
    }

    /// Seconds the host takes to pin a GiB of guest RAM.
    fn pin_rate(&mut self) -> f64 {
        match self.spec.ram_pages {
            RamPages::Small => self.g.rng.f(0.10, 0.14),
            RamPages::Huge => self.g.rng.f(0.0025, 0.004),
        }
    }

    /// A pin call of this VM's QEMU (for a traced host).
    fn pin(&mut self, start: Nanos, ms: u64, vaddr: u64, size: u64) -> Pin {
        let p = Pin {
            start,
            ms,
            vaddr,
            size,
            pid: self.qemu_pid,
        };
        self.g.out.pins.push(p);
        p
    }

    /// The boot's first line.
    pub(super) fn creating_sandbox(&mut self) {
        let p = Self::first_prefix_only(self.spec);
        self.g.shim(self.t0, "info", "Creating sandbox", None, p);
    }

    /// The host cannot cold-plug the devices: containerd's CRI plugin logs the failure and
    /// the VM never boots. Returns the end of the journal's window.
    pub(super) fn cold_plug_failed(&mut self) -> Nanos {
        let p = self.prefix_only();
        self.g
            .shim(self.t0 + ns(0.3), "info", "Starting VM", None, p);
        let t = self.t0 + ns(self.g.rng.f(1.0, 5.0));
        let sandbox = self.g.sandbox.clone();
        self.g.cri(
            t,
            "RunPodSandbox for &PodSandboxMetadata{Name:gpu-job,Uid:5c1e,Namespace:default,Attempt:0,} failed, error",
            format!("rpc error: code = Unknown desc = failed to start sandbox \"{sandbox}\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=0"),
        );
        self.truth.status = "failed";
        self.truth.failure_step = Some("cold_plug");
        self.truth.started_late = false;
        t + ns(1.0)
    }

    /// The guest is up (its agent's first call at `agent_at`) and the shim hot-plugs the
    /// GPU: the hypervisor refuses it, the shim fails the container. Returns the end of the
    /// journal's window.
    pub(super) fn hotplug_failed(&mut self, agent_at: Nanos) -> Nanos {
        // the seed picks the wording
        let f = super::vfio::draw(self.g.rng, self.spec.seed);
        let t = agent_at + ns(self.g.rng.f(0.5, 4.0));
        let info = format!(
            " device-info=\"{{\\\"ID\\\":\\\"{}\\\",\\\"BDF\\\":\\\"{}\\\"}}\" hotplug-vfio-on-root-bus=true machine-type=q35 pcie-root-port=1",
            f.id, f.device_field
        );
        self.g.shim_with(
            t,
            "info",
            "Start hot-plug VFIO device",
            None,
            false,
            Some(("qemu", info)),
        );
        if let Some(e) = &f.qemu_stderr {
            let q = format!(" qemuPid={}", self.qemu_pid);
            self.g
                .shim_with(t + ns(0.05), "error", e, None, false, Some(("qemu", q)));
        }
        let at = t + ns(self.g.rng.f(0.1, 2.0));
        let fields = format!(
            " vfio-device-BDF=\"{}\" vfio-device-ID={}",
            f.device_field, f.id
        );
        let err = Some(f.error.clone());
        self.g.shim_with(
            at,
            "error",
            "failed to hotplug VFIO device",
            err.clone(),
            false,
            Some(("sandbox", fields)),
        );
        self.g.shim_with(
            at + ns(0.0002),
            "error",
            "Failed to add device",
            err.clone(),
            false,
            Some(("device", String::new())),
        );
        self.g.shim_with(
            at + ns(0.0003),
            "error",
            "container create failed",
            err,
            false,
            Some(("container", String::new())),
        );
        if self.g.rng.next().is_multiple_of(2) {
            // the CRI plugin's line, naming the sandbox in its text
            let sandbox = self.g.sandbox.clone();
            self.g.cri(
                at + ns(0.2),
                "RunPodSandbox for &PodSandboxMetadata{Name:gpu-job,Uid:5c1e,Namespace:default,Attempt:0,} failed, error",
                format!("rpc error: code = Unknown desc = failed to start sandbox \"{sandbox}\": failed to create containerd task: failed to create shim task: {}: unknown", f.error),
            );
        }
        self.truth.status = "failed";
        self.truth.failure_step = Some("vfio_hotplug");
        self.truth.failure_device = Some(f.device);
        self.truth.failure_reason = Some(f.reason);
        self.truth.gpus = 0;
        at + ns(1.0)
    }

    /// How many lines were logged so far.
    pub(super) fn logged(&self) -> usize {
        self.g.out.lines.len()
    }

    /// A pause of `lo` to `hi` seconds, drawn.
    pub(super) fn pause(&mut self, lo: f64, hi: f64) -> Nanos {
        ns(self.g.rng.f(lo, hi))
    }

    /// The sandbox is stopped at `at`, in the wording the seed picks; the guest powers
    /// down after it.
    pub(super) fn stop(&mut self, at: Nanos) {
        let sandbox = self.g.sandbox.clone();
        match (self.spec.seed >> 8) % 5 {
            0 => {
                let q = Some(("qemu", String::new()));
                self.g
                    .shim_with(at, "info", "Stopping Sandbox", None, false, q);
            }
            1 => {
                self.g
                    .shim(at, "info", "Stopping sandbox in the VM", None, false);
                self.g
                    .shim(at + ns(0.001), "info", "Stopping VM", None, false);
            }
            2 => {
                let f = Some(("cloudHypervisor", " function=StopVM".to_string()));
                self.g.shim_with(at, "info", "Stop Sandbox", None, false, f);
            }
            3 => {
                let msg = format!("StopPodSandbox for \"{sandbox}\"");
                self.g.containerd(at, "info", &msg, String::new());
                let q = Some(("qemu", String::new()));
                self.g
                    .shim_with(at + ns(0.002), "info", "Stopping Sandbox", None, false, q);
            }
            _ => {
                let id = format!(" id={sandbox} namespace=k8s.io");
                self.g
                    .containerd(at, "info", "shim disconnected", id.clone());
                self.g.containerd(
                    at + ns(0.00004),
                    "warning",
                    "cleaning up after shim disconnected",
                    id,
                );
            }
        }
        self.g.kernel(at + ns(0.05), "reboot: Power down");
    }

    /// vm_create: QEMU starts and the host pins boot RAM. Returns when the guest kernel
    /// starts.
    pub(super) fn start_vm(&mut self) -> Nanos {
        let p = self.prefix_only();
        self.g
            .shim(self.t0 + ns(0.5), "info", "Starting VM", None, p);
        let mut t = self.t0 + ns(self.g.rng.f(1.0, 2.0));
        let rate = self.pin_rate();
        let boot_ram_gib = self.spec.boot_ram_gib;
        let boot_pin = boot_ram_gib as f64 * rate;
        if self.spec.pin_trace && boot_ram_gib > 0 {
            self.pin(t, pin_ms(boot_pin), 0x7b30_7400_0000, boot_ram_gib << 30);
        }
        t += ns(boot_pin + self.g.rng.f(2.0, 20.0));
        let boot = t;
        self.g.boot = boot;
        let p = self.prefix_only();
        self.g.shim(boot - ns(0.2), "info", "VM started", None, p);
        boot
    }

    /// kernel_boot: the guest kernel from `boot` to init and the agent's first call.
    /// Returns that call's time.
    pub(super) fn kernel_boot(&mut self, boot: Nanos) -> Nanos {
        let g = &mut self.g;
        g.kernel(boot, "Linux version 6.12.47-nvidia-gpu (root@kata) #1 SMP");
        g.kernel(boot + ns(0.437), "brd: module loaded");
        if self.spec.emulated_vga {
            g.kernel(
                boot + ns(0.45),
                "pci 0000:00:01.0: [1234:1111] type 00 class 0x030000 conventional PCI endpoint",
            );
            g.kernel(
                boot + ns(0.451),
                "pci 0000:00:01.0: BAR 0 [mem 0xfd000000-0xfdffffff pref]",
            );
        }
        let init_at = boot + ns(g.rng.f(1.0, 1.3));
        g.kernel(init_at, "Run /init as init process");
        let agent_at = init_at + ns(g.rng.f(0.1, 0.4));
        g.agent(
            agent_at,
            "rpc",
            "rpc call from shim to agent: \"create_sandbox\"",
            None,
        );
        agent_at
    }

    /// pci_enumeration: the guest finds each GPU after `agent_at`. Returns when it found
    /// the last.
    pub(super) fn enumerate_pci(&mut self, agent_at: Nanos) -> Nanos {
        let mut tf = agent_at + ns(self.g.rng.f(2.0, 10.0));
        for k in 0..self.gpus {
            self.found_gpu(k, tf);
            tf += ns(self.g.rng.f(0.005, 0.3));
        }
        tf
    }

    /// GPU `k` found at `tf`: its BARs' sizes, their assigned ranges, its `add` uevent.
    fn found_gpu(&mut self, k: usize, tf: Nanos) {
        let bdf = bdf(k);
        let bar = self.spec.bar_gib << 30;
        let old = self.spec.old_bar_lines;
        self.g.kernel(
            tf,
            &format!("pci {bdf}: [10de:2330] type 00 class 0x030200 PCIe Endpoint"),
        );
        let sizes = [(0u8, 16u64 << 20), (2, bar), (4, 32 << 20)];
        for (j, (idx, sz)) in sizes.iter().enumerate() {
            let line = if old {
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
            self.g.kernel(tf + ns(0.0003 * (j + 1) as f64), &line);
        }
        let base = 0x3a40_0000_0000u64 + (k as u64) * 0x40_0000_0000;
        let mut off = 0u64;
        for (j, (idx, sz)) in [(2u8, bar), (4, 32u64 << 20), (0, 16 << 20)]
            .iter()
            .enumerate()
        {
            let at = tf + ns(0.004 + 0.0003 * j as f64);
            if *idx == 2 && self.bar_fails(k) {
                self.bar_failed(&bdf, at, *sz);
                continue;
            }
            let r = bar_range(base + off, *sz);
            off += sz;
            let line = if old {
                format!("pci {bdf}: BAR {idx}: assigned [mem {r} 64bit pref]")
            } else {
                format!("pci {bdf}: BAR {idx} [mem {r} 64bit pref]: assigned")
            };
            self.g.kernel(at, &line);
        }
        self.seq += 1;
        let seq = self.seq;
        self.g
            .uevent(tf + ns(0.006), "add", &devpath(k), "pci", seq);
    }

    /// The guest finds no space for GPU `bdf`'s VRAM BAR of `size` bytes at `at`, in the
    /// spec's wording, and the kernel hints `pci=realloc`.
    fn bar_failed(&mut self, bdf: &str, at: Nanos, size: u64) {
        let res = format!("[mem size {size:#x} 64bit pref]");
        let lines = match self.spec.bar_unassigned {
            Some(BarWording::Old) => [
                format!("pci {bdf}: BAR 2: no space for {res}"),
                format!("pci {bdf}: BAR 2: failed to assign {res}"),
            ],
            _ => [
                format!("pci {bdf}: BAR 2 {res}: can't assign; no space"),
                format!("pci {bdf}: BAR 2 {res}: failed to assign"),
            ],
        };
        for (j, l) in lines.iter().enumerate() {
            self.g.kernel(at + ns(0.0001 * j as f64), l);
        }
        self.g.kernel(
            at + ns(0.0003),
            "pci_bus 0000:00: Some PCI device resources are unassigned, try booting with pci=realloc",
        );
        self.truth.bar_unassigned = Some((bdf.to_string(), "BAR 2".to_string(), size));
    }

    /// The driver's probe of GPU `bdf`, whose BAR is unassigned, at `at`: the two-line
    /// `This PCI I/O region … is invalid:` / `BAR2 is 0M`, the failed probe.
    fn probe_failed(&mut self, bdf: &str, at: Nanos) {
        self.g.kernel(
            at,
            "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:",
        );
        self.g.console_raw(
            at,
            &format!("               NVRM: BAR2 is 0M @ 0x0 (PCI:{bdf})"),
        );
        self.g.kernel(
            at + ns(0.00001),
            "NVRM: The system BIOS may have misconfigured your GPU.",
        );
        self.g.kernel(
            at + ns(0.00002),
            &format!("nvidia: probe of {bdf} failed with error -1"),
        );
    }

    /// The shim's `create_container` reaches the agent after the last GPU was found.
    pub(super) fn create_container(&mut self, last_found: Nanos) -> Create {
        let at = last_found + ns(self.g.rng.f(0.05, 0.5));
        self.g.agent(
            at,
            "rpc",
            "rpc call from shim to agent: \"create_container\"",
            None,
        );
        Create {
            at,
            c0: at + ns(0.01),
            interval: self.g.rng.f(2.02, 2.15),
        }
    }

    /// gpu_driver_init: the driver enables one GPU at a time, each once the one before is
    /// ready, then clears each GPU's FBHUB interrupt.
    pub(super) fn driver_init(&mut self, create: &Create, last_found: Nanos) -> Drivers {
        let mut te = create.c0.max(last_found) + ns(self.g.rng.f(2.0, 6.0));
        let mut own_closes: Vec<Option<Nanos>> = Vec::new();
        let mut enables = Vec::new();
        let mut enables_logged = Vec::new();
        let mut last_end = None;
        for k in enable_order(self.spec, self.gpus) {
            if self.bar_fails(k) {
                // no BAR, no enable: the probe fails at once
                self.probe_failed(&bdf(k), te);
                te += ns(self.g.rng.f(0.01, 0.3));
                continue;
            }
            enables.push(te);
            let gpu = self.init_gpu(k, te);
            enables_logged.push(gpu.logged);
            own_closes.push(gpu.close);
            last_end = Some(gpu.end);
            te = gpu.end + ns(self.g.rng.f(0.01, 0.3));
        }
        let fbhub0 = last_end.unwrap_or(create.c0) + ns(self.g.rng.f(0.01, 0.3));
        let closes = own_closes
            .iter()
            .enumerate()
            .map(|(i, c)| close_of(i, *c, &enables, fbhub0))
            .collect();
        let inited = enables.len();
        for n in 0..inited {
            self.g.kernel(
                fbhub0 + ns(2.12 * n as f64),
                "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
            );
        }
        Drivers {
            enables,
            enables_logged,
            closes,
            fbhub_end: fbhub0 + ns(2.12 * inited as f64),
        }
    }

    /// GPU `k` enabled at `e`: the host pins its BARs (when traced), its driver binds
    /// (before the pin is done, after, or unlogged). Records its truth.
    fn init_gpu(&mut self, k: usize, e: Nanos) -> GpuInit {
        let bdf = bdf(k);
        self.g
            .kernel(e, &format!("nvidia {bdf}: enabling device (0140 -> 0142)"));
        let logged = self.g.out.lines.last().map_or(e, |l| l.t);
        let bar_pin = self.spec.pin_trace.then(|| self.pin_bars(k, e));
        let pin_end = bar_pin.map(|p| p.end());
        let own = e + ns(self.g.rng.f(0.3, 1.0));
        let bind = match self.spec.binds.get(k).copied().unwrap_or(Bind::After) {
            Bind::Before => Some(match pin_end {
                Some(pe) => (e + ns(self.g.rng.f(0.05, 0.25))).min(pe - ns(0.01)),
                None => own,
            }),
            Bind::After => Some(pin_end.unwrap_or(own).max(own) + ns(self.g.rng.f(0.01, 0.2))),
            Bind::Absent => None,
        };
        let end = match (bind, pin_end) {
            (Some(b), Some(p)) => b.max(p),
            (Some(b), None) => b,
            (None, Some(p)) => p,
            (None, None) => own,
        };
        if let Some(b) = bind {
            self.seq += 1;
            let seq = self.seq;
            self.g.uevent(b, "bind", &devpath(k), "pci", seq);
        }
        self.truth.per_gpu.push(GpuTruth {
            bdf,
            init_s: (end - e) as f64 / 1e9,
            pin_s: bar_pin.map(|p| p.ms as f64 / 1e3),
            checkable: true,
        });
        GpuInit {
            logged,
            end,
            // the later of the two ends it: a bind after the pin's return, cut from the
            // logs, leaves the init open (a tail cut between them found this)
            close: match (bind, pin_end) {
                (Some(b), Some(p)) => Some(b.max(p)),
                (b, p) => p.or(b),
            },
        }
    }

    /// The host pins GPU `k`'s BARs after its enable at `e`: the two small ones, then
    /// VRAM. Returns the VRAM pin.
    fn pin_bars(&mut self, k: usize, e: Nanos) -> Pin {
        let vbase = 0x7800_0000_0000u64 + (k as u64) * 0x40_0000_0000;
        let p0 = e + ns(self.g.rng.f(0.002, 0.01));
        self.pin(p0, 0, vbase + 0x20_0000_0000, 16 << 20);
        self.pin(p0 + ns(0.001), 0, vbase + 0x21_0000_0000, 32 << 20);
        let p = e + ns(self.g.rng.f(0.02, 0.3));
        let ms = pin_ms(self.spec.bar_gib as f64 * self.g.rng.f(0.024, 0.028));
        self.pin(p, ms, vbase, self.spec.bar_gib << 30)
    }

    /// cdi_wait: the agent retries CDI every `interval` from `c0` until NVRC has the specs
    /// (after the last FBHUB clear), or until the boot fails.
    pub(super) fn cdi_wait(&mut self, create: &Create, drivers: &Drivers) -> Cdi {
        let list = self.shuffled_devices().join(", ");
        let c0 = create.c0;
        let fbhub_end = drivers.fbhub_end;
        let (done, fail_at) = match self.outcome() {
            Outcome::Complete => (Some(fbhub_end + ns(self.g.rng.f(5.0, 45.0))), None),
            Outcome::CdiNeverResolved => (None, Some(c0 + ns(create.interval * 100.0 + 1.05))),
            Outcome::CreateTimeout => (
                None,
                Some(
                    create.at + ns(self.g.rng.f(60.0, 150.0)).max(fbhub_end - create.at + ns(5.0)),
                ),
            ),
            Outcome::ColdPlugFailed | Outcome::HotplugFailed => (None, None),
        };
        let wait_end = done.or(fail_at).unwrap_or(c0);
        let mut tries = 0u32;
        let mut first_try_logged: Option<Nanos> = None;
        loop {
            let at = c0 + ns(create.interval * f64::from(tries));
            if at >= wait_end || tries > 100 {
                break;
            }
            let msg = if self.spec.pre314 {
                format!("error injecting devices: \"unresolvable CDI devices {list}\"")
            } else {
                format!("waiting for CDI spec(s) to be generated ({tries} of 100 max tries) \"unresolvable CDI devices {list}\"")
            };
            self.g.agent(at, "rpc", &msg, None);
            if tries == 0 {
                first_try_logged = self.g.out.lines.last().map(|l| l.t);
            }
            tries += 1;
        }
        Cdi {
            done,
            fail_at,
            tries,
            first_try_logged,
        }
    }

    /// The CDI devices the container asks for, in a shuffled order.
    fn shuffled_devices(&mut self) -> Vec<String> {
        let mut devices: Vec<String> = (0..self.gpus)
            .map(|i| format!("nvidia.com/gpu={i}"))
            .collect();
        for i in (1..devices.len()).rev() {
            let j = (self.g.rng.next() % (i as u64 + 1)) as usize;
            devices.swap(i, j);
        }
        devices
    }

    /// How the boot ends after the CDI wait: the container starts, or the boot fails.
    pub(super) fn end(&mut self, create: &Create, cdi: &Cdi) -> End {
        let c0 = create.c0;
        match self.outcome() {
            Outcome::Complete => self.complete(c0, cdi),
            Outcome::CdiNeverResolved => {
                let f = cdi.fail_at.unwrap_or(c0);
                self.g.agent(
                    f,
                    "rpc",
                    "failed to inject devices after CDI timeout of 100 seconds",
                    None,
                );
                self.g.shim(f + ns(0.01), "error", "createContainer failed", Some("rpc error: code = Internal desc = failed to inject devices after CDI timeout of 100 seconds".into()), false);
                self.truth.status = "failed";
                self.truth.failure_step = Some("cdi_wait");
                self.truth.cdi_tries = Some(cdi.tries);
                End {
                    at: f + ns(0.02),
                    done_logged: None,
                }
            }
            Outcome::CreateTimeout => {
                let f = cdi.fail_at.unwrap_or(c0);
                self.g.shim(
                    f,
                    "error",
                    "createContainer failed",
                    Some(
                        "rpc error: code = DeadlineExceeded desc = CreateContainerRequest timed out"
                            .into(),
                    ),
                    false,
                );
                self.truth.status = "failed";
                self.truth.failure_step = Some("create_container");
                End {
                    at: f + ns(0.01),
                    done_logged: None,
                }
            }
            // returned before the CDI wait
            Outcome::ColdPlugFailed | Outcome::HotplugFailed => End {
                at: c0,
                done_logged: None,
            },
        }
    }

    /// A complete boot: the specs are injected, memory is hotplugged, the container starts.
    fn complete(&mut self, c0: Nanos, cdi: &Cdi) -> End {
        let d = cdi.done.unwrap_or(c0);
        self.g.agent(d, "rpc", "all devices injected successfully, modified CDI container spec: Spec { version: \"1.1.0\" }", None);
        let done_logged = self.g.out.lines.last().map(|l| l.t);
        self.truth.cdi_wait_s = Some((d - c0) as f64 / 1e9);
        self.truth.cdi_tries = Some(cdi.tries);
        let last = self.memory_hotplug(d);
        let started = last + ns(self.g.rng.f(0.5, 3.0));
        self.g.agent(
            started,
            "rpc",
            "rpc call from shim to agent: \"start_container\"",
            None,
        );
        self.truth.total_s = Some((started - self.t0) as f64 / 1e9);
        End {
            at: started,
            done_logged,
        }
    }

    /// memory_hotplug after the CDI wait ends at `d`: the host pins the memory 4 GiB at a
    /// time, then the guest onlines its blocks. Returns the last block's uevent (or the
    /// last pin's end with no memory to online).
    fn memory_hotplug(&mut self, d: Nanos) -> Nanos {
        let h0 = d + ns(self.g.rng.f(5.0, 20.0));
        let mut th = h0;
        let rate = self.pin_rate();
        let hot_ram_gib = self.spec.hot_ram_gib;
        let mut left = hot_ram_gib;
        let mut addr = 0x7832_c000_0000u64;
        while left > 0 {
            let chunk = left.min(4);
            let ms = pin_ms(chunk as f64 * rate);
            if self.spec.pin_trace {
                self.pin(th, ms, addr, chunk << 30);
            }
            addr += chunk << 30;
            left -= chunk;
            th += (ms as Nanos) * 1_000_000 + ns(self.g.rng.f(0.05, 0.15));
        }
        let mut last = th;
        if hot_ram_gib > 0 {
            let online = th + ns(self.g.rng.f(0.2, 0.4));
            self.g.agent(
                online,
                "rpc",
                "rpc call from shim to agent: \"online_cpu_mem\"",
                None,
            );
            let mut tu = online + ns(0.015);
            for b in 0..hot_ram_gib * 8 {
                self.seq += 1;
                let seq = self.seq;
                self.g.uevent(
                    tu,
                    "add",
                    &format!("/devices/system/memory/memory{}", 80 + b),
                    "memory",
                    seq,
                );
                last = tu;
                tu += ns(self.g.rng.f(0.00005, 0.0001));
            }
            let start = if self.spec.pin_trace { h0 } else { online };
            self.truth.memory_hotplug_s = Some((last - start) as f64 / 1e9);
        }
        last
    }
}

/// One GPU's init, as the later steps and the log cuts need it.
struct GpuInit {
    /// When the journal got its enable line.
    logged: Nanos,
    /// When it was ready.
    end: Nanos,
    /// The line that closes it in the logs: the later of the pin's return (when traced)
    /// and the bind (when logged).
    close: Option<Nanos>,
}

/// Where the logs start late or end early ([`Spec::head_cut`], [`Spec::tail_cut`]).
pub(super) struct Cut {
    pub(super) head: Option<Nanos>,
    pub(super) tail: Option<Nanos>,
}

impl Cut {
    /// The cuts `spec` asks for of a boot whose kernel started at `boot`.
    pub(super) fn new(
        spec: &Spec,
        boot: Nanos,
        drivers: &Drivers,
        create: &Create,
        end: &End,
    ) -> Cut {
        let head = spec.head_cut.map(|x| {
            let lo = boot + ns(2.0);
            let hi = drivers
                .enables
                .last()
                .copied()
                .unwrap_or(lo)
                .max(lo + ns(0.1));
            lo + ((hi - lo) as f64 * x.clamp(0.0, 0.98)) as Nanos
        });
        let tail = spec.tail_cut.map(|x| {
            let lo = create.c0 + ns(1.0);
            let hi = (end.at - ns(0.3)).max(lo + ns(0.1));
            lo + ((hi - lo) as f64 * x.clamp(0.0, 1.0)) as Nanos
        });
        Cut { head, tail }
    }

    /// No cut: the logs hold the whole boot.
    pub(super) fn none() -> Cut {
        Cut {
            head: None,
            tail: None,
        }
    }

    /// The first and last instants the logs hold.
    pub(super) fn window(&self) -> (Nanos, Nanos) {
        (
            self.head.unwrap_or(Nanos::MIN),
            self.tail.unwrap_or(Nanos::MAX),
        )
    }

    /// What the cut logs no longer show of `truth`.
    pub(super) fn apply(&self, truth: &mut Truth, drivers: &Drivers, cdi: &Cdi, end: &End) {
        if let Some(h) = self.head {
            for (i, gt) in truth.per_gpu.iter_mut().enumerate() {
                if drivers.enables_logged.get(i).is_none_or(|e| *e < h) {
                    gt.checkable = false;
                }
            }
            // the CDI wait is whole when the log still has its first try
            if cdi.first_try_logged.is_none_or(|t| t < h) {
                truth.cdi_wait_s = None;
                truth.cdi_tries = None;
            }
            truth.vm_start = h;
            truth.total_s = None;
        }
        if let Some(tc) = self.tail {
            for (i, gt) in truth.per_gpu.iter_mut().enumerate() {
                let closer = drivers.closes.get(i).copied().unwrap_or(Nanos::MAX);
                if closer + ns(0.05) > tc {
                    gt.checkable = false;
                }
            }
            // the CDI wait is whole when the log still has the line that ends it (the line
            // reaches the journal a few ms after the agent printed it)
            if end.done_logged.is_none_or(|t| t > tc) {
                truth.cdi_wait_s = None;
                truth.cdi_tries = None;
            }
            truth.memory_hotplug_s = None;
            truth.total_s = None;
            // the logs end before the container started (or the failure was logged)
            truth.status = "unfinished";
            truth.failure_step = None;
        }
    }
}

/// `0x…-0x…`: a BAR of `size` at `base`.
fn bar_range(base: u64, size: u64) -> String {
    format!("0x{base:x}-0x{:x}", base + size - 1)
}

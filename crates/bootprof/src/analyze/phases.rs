//! Step 5 of the analysis: the named phases of the boot, each with the lines that open and
//! close it.

use crate::analyze::clocks::{secs, secs_ns, Axis};
use crate::analyze::facts::{CdiTry, Facts, Mark};
use crate::analyze::join::Join;
use crate::analyze::model::{gib, CdiSummary, Phase, DEFAULT_CDI_MAX_TRIES, PIN_PHASE_MIN_S};
use crate::estimate::cdi::CdiModel;
use crate::parse::ingest::SrcRef;
use crate::parse::time::Nanos;

/// The phases built so far, and what they are built from.
struct Builder<'a> {
    f: &'a Facts,
    j: &'a Join,
    files: &'a [String],
    phases: Vec<Phase>,
}

/// What opens a phase.
struct Open {
    name: &'static str,
    label: String,
    gpu: Option<String>,
    at: Mark,
}

impl Builder<'_> {
    fn add(
        &mut self,
        o: Open,
        end: Nanos,
        end_src: Option<SrcRef>,
        estimated: bool,
        detail: String,
    ) {
        let end = end.max(o.at.t);
        self.phases.push(Phase {
            name: o.name,
            label: o.label,
            gpu: o.gpu,
            start_s: 0.0,
            end_s: 0.0,
            duration_s: secs(end, o.at.t),
            start_ns: o.at.t,
            end_ns: end,
            start_line: Some(o.at.src.at(self.files)),
            end_line: end_src.map(|s| s.at(self.files)),
            start_src: Some(o.at.src),
            end_src,
            estimated,
            at_least: false,
            detail,
            pin_kind: None,
        });
    }
}

/// The phases, and the CDI wait's summary.
pub struct Built {
    pub phases: Vec<Phase>,
    pub cdi: Option<CdiSummary>,
}

fn open(name: &'static str, label: impl Into<String>, at: Mark) -> Open {
    Open {
        name,
        label: label.into(),
        gpu: None,
        at,
    }
}

/// Build every phase the facts support.
pub fn build(f: &Facts, j: &Join, axis: &Axis, files: &[String]) -> Built {
    let mut b = Builder {
        f,
        j,
        files,
        phases: Vec::new(),
    };
    // where the guest kernel's clock starts, and whether the log shows the kernel starting
    let guest_boot = axis
        .boot
        .zip(f.first_kernel)
        .map(|(t, k)| Mark { t, src: k.src });
    let saw_start = f.kernel_min_t.is_some_and(|t| t <= 1.0);
    b.vm_create(guest_boot);
    b.kernel_boot(guest_boot, saw_start);
    b.pci_enumeration(saw_start);
    b.gpu_driver_init();
    b.dma_pinning();
    let cdi = b.cdi_wait();
    b.memory_hotplug();
    b.container_start();
    Built {
        phases: b.phases,
        cdi,
    }
}

/// How the agent's CDI tries are counted and paced.
struct CdiPace {
    /// Tries seen (by their numbers when numbered).
    tries: u32,
    first_try: Option<u32>,
    max: Option<u32>,
    /// The median seconds from one try to the next; `None` when not positive or unknown.
    interval: Option<f64>,
}

impl CdiPace {
    fn of(cdi_tries: &[CdiTry]) -> Self {
        let numbered: Vec<_> = cdi_tries.iter().filter(|c| c.attempt.is_some()).collect();
        let max = cdi_tries.iter().find_map(|c| c.max);
        let first_try = numbered.first().and_then(|c| c.attempt);
        // tries are numbered from 0: (39 of 100) is the 40th
        let tries = match (first_try, numbered.iter().filter_map(|c| c.attempt).max()) {
            (Some(a), Some(z)) if z >= a => z - a + 1,
            _ => cdi_tries.len() as u32,
        };
        let mut intervals: Vec<f64> = if numbered.len() >= 2 {
            numbered
                .windows(2)
                .filter_map(|w| match w {
                    [a, b] => {
                        let (x, y) = (a.attempt?, b.attempt?);
                        (y > x).then(|| secs(b.m.t, a.m.t) / f64::from(y - x))
                    }
                    _ => None,
                })
                .collect()
        } else {
            cdi_tries
                .windows(2)
                .filter_map(|w| match w {
                    [a, b] => Some(secs(b.m.t, a.m.t)),
                    _ => None,
                })
                .collect()
        };
        intervals.sort_by(f64::total_cmp);
        let interval = intervals
            .get(intervals.len() / 2)
            .copied()
            .filter(|v| *v > 0.0);
        CdiPace {
            tries,
            first_try,
            max,
            interval,
        }
    }
}

/// The guest RAM hotplug's extent: its pins on the host, and the guest onlining the memory.
#[derive(Default)]
struct Hotplug {
    start: Option<Mark>,
    end: Option<(Nanos, SrcRef)>,
    bytes: u64,
    pin_s: f64,
}

impl Builder<'_> {
    /// vm_create: pod accepted / first shim line → guest boot.
    fn vm_create(&mut self, guest_boot: Option<Mark>) {
        let f = self.f;
        let vm_start = [f.kube_start, f.first_host]
            .into_iter()
            .flatten()
            .min_by_key(|m| m.t);
        if let (Some(a), Some(gb)) = (vm_start, guest_boot) {
            if gb.t > a.t {
                self.add(
                    open("vm_create", "sandbox → guest boot", a),
                    gb.t,
                    Some(gb.src),
                    false,
                    "pod accepted / shim start until the guest kernel's clock starts (QEMU start, RAM allocation and pinning, device attach)".into(),
                );
            }
        }
    }

    /// kernel_boot: only when the log shows the kernel starting.
    fn kernel_boot(&mut self, guest_boot: Option<Mark>, saw_start: bool) {
        let f = self.f;
        if let (Some(gb), true) = (guest_boot, saw_start) {
            if let Some(e) = f.run_init.or(f.first_agent).filter(|e| e.t >= gb.t) {
                self.add(
                    open("kernel_boot", "guest kernel", gb),
                    e.t,
                    Some(e.src),
                    false,
                    if f.run_init.is_some() {
                        "guest boot until init runs"
                    } else {
                        "guest boot until the first kata-agent record"
                    }
                    .into(),
                );
            }
        }
    }

    /// pci_enumeration: the first GPU found until the last GPU BAR assigned.
    fn pci_enumeration(&mut self, saw_start: bool) {
        let f = self.f;
        let found: Vec<Mark> = f.gpus.iter().filter_map(|g| g.found).collect();
        if let (Some(a), Some(last)) = (found.iter().min_by_key(|m| m.t), f.pci_last) {
            self.add(
                open(
                    "pci_enumeration",
                    format!(
                        "{} GPU{}",
                        found.len(),
                        if found.len() == 1 { "" } else { "s" }
                    ),
                    *a,
                ),
                last.t,
                Some(last.src),
                false,
                format!(
                    "first GPU found until the last GPU BAR assigned ({} GPUs{})",
                    found.len(),
                    if saw_start {
                        ""
                    } else {
                        "; the log starts late, earlier GPUs may be missing"
                    }
                ),
            );
        }
    }

    /// gpu_driver_init per GPU, as joined.
    fn gpu_driver_init(&mut self) {
        for init in &self.j.inits {
            let Some(end) = init.end else { continue };
            self.add(
                Open {
                    name: "gpu_driver_init",
                    label: init.bdf.clone(),
                    gpu: Some(init.bdf.clone()),
                    at: init.enable,
                },
                end,
                init.end_src,
                init.estimated,
                format!("guest driver enabling the device, {}", init.how),
            );
        }
    }

    /// dma_pinning: this VM's pin calls of [`PIN_PHASE_MIN_S`] or more.
    fn dma_pinning(&mut self) {
        for p in &self.j.pins {
            let (Some(st), Some(en)) = (p.start, p.end) else {
                continue;
            };
            if p.pin.dur_s < PIN_PHASE_MIN_S {
                continue;
            }
            let label = match (p.pin.size, p.kind) {
                (Some(s), "bar") if p.gpu.is_none() => format!("BAR {:.0} GiB", gib(s)),
                (Some(s), _) => format!("{:.0} GiB", gib(s)),
                (None, _) => "pin, size unknown".to_string(),
            };
            self.add(
                Open {
                    name: "dma_pinning",
                    label,
                    gpu: p.gpu.clone(),
                    at: Mark {
                        t: st,
                        src: p.pin.src,
                    },
                },
                en,
                Some(p.pin.end_src),
                false,
                match p.pin.npage {
                    Some(n) => format!("vfio_pin_pages_remote, {n} pages ({})", p.kind),
                    None => format!(
                        "vfio_pin_pages_remote, pages unknown ({}): a return whose call the trace does not hold",
                        p.kind
                    ),
                },
            );
            if let Some(last) = self.phases.last_mut() {
                last.pin_kind = Some(p.kind);
            }
        }
    }

    /// cdi_wait: the agent's first CDI try until the specs appear or the wait fails (at
    /// least one more interval when the log ends first); and its summary.
    fn cdi_wait(&mut self) -> Option<CdiSummary> {
        let f = self.f;
        let first = f.cdi_tries.first()?;
        let pace = CdiPace::of(&f.cdi_tries);
        let (tries, max, interval) = (pace.tries, pace.max, pace.interval);
        let model = CdiModel {
            max_tries: max.unwrap_or(DEFAULT_CDI_MAX_TRIES),
            interval_s: interval.unwrap_or(crate::estimate::cdi::STUDY_INTERVAL_S),
        };
        let done = f.cdi_done.filter(|d| d.t >= first.m.t);
        let (end_t, end_src, est, how) = self.cdi_wait_end(first.m, done, &model);
        let devices = f.cdi_tries.iter().map(|c| c.devices).max().unwrap_or(0);
        self.add(
            open("cdi_wait", format!("{tries} tries"), first.m),
            end_t,
            end_src,
            est,
            format!(
                "kata-agent waiting for CDI specs of {devices} devices ({tries} tries{}{}), {how}",
                max.map_or(String::new(), |m| format!(", max {m}")),
                interval.map_or(String::new(), |i| format!(", one every {i:.2} s"))
            ),
        );
        Some(CdiSummary {
            tries,
            max_tries: max,
            first_try: pace.first_try,
            interval_s: interval,
            limit_s: Some(model.limit_s()),
            limit_from: if interval.is_some() {
                "measured"
            } else {
                "model"
            },
            devices,
            resolved: done.is_some(),
        })
    }

    /// Where the CDI wait that began at `first` ends (its end, line, whether estimated, and
    /// how): the specs `done`, the wait failing, or one `model` interval after the last try.
    fn cdi_wait_end(
        &self,
        first: Mark,
        done: Option<Mark>,
        model: &CdiModel,
    ) -> (Nanos, Option<SrcRef>, bool, &'static str) {
        let f = self.f;
        let last = f.cdi_tries.last().map_or(first, |c| c.m);
        let failed = f
            .cdi_failed
            .as_ref()
            .filter(|(m, _)| m.t >= first.t)
            .map(|(m, _)| *m);
        // a failure of the container while the agent was still waiting ends the wait too
        let stopped = f
            .errors
            .iter()
            .filter(|e| e.step().is_some())
            .map(|e| e.m)
            .filter(|m| m.t >= last.t)
            .min_by_key(|m| m.t);
        match (done, failed.or(stopped)) {
            (Some(d), _) => (d.t, Some(d.src), false, "until all devices were injected"),
            (None, Some(x)) => (x.t, Some(x.src), false, "until the wait failed"),
            (None, None) => (
                last.t.saturating_add(secs_ns(model.interval_s)),
                None,
                true,
                "the log ends while the agent is still waiting: at least this long",
            ),
        }
    }

    /// memory_hotplug: the RAM pins before the guest onlines the blocks.
    fn memory_hotplug(&mut self) {
        let (f, j) = (self.f, self.j);
        let h = self.hotplug_extent();
        let (Some(a), Some((e, esrc))) = (h.start, h.end) else {
            return;
        };
        let host = if j.hotplug.is_empty() {
            "the host side is not traced".to_string()
        } else {
            format!(
                "{:.0} GiB pinned on the host in {:.1} s over {} calls",
                gib(h.bytes),
                h.pin_s,
                j.hotplug.len()
            )
        };
        // no memory uevent in the log: how many blocks is not known, not 0
        let (label, blocks) = match f.mem_uevents.len() {
            0 => (
                "blocks unknown".to_string(),
                "the guest's memory blocks are not in the log".to_string(),
            ),
            n => (
                format!("{n} blocks"),
                format!("{n} memory blocks onlined in the guest"),
            ),
        };
        self.add(
            open("memory_hotplug", label, a),
            e,
            Some(esrc),
            false,
            format!("{blocks}; {host}"),
        );
        // untraced, only the guest's side is seen: the host pins the memory before the
        // guest onlines it, so what is seen is a lower bound
        if let Some(p) = self.phases.last_mut() {
            p.at_least = j.hotplug.is_empty();
        }
    }

    /// The hotplug's pins, widened by the guest's memory uevents and its online RPC.
    fn hotplug_extent(&self) -> Hotplug {
        let (f, j) = (self.f, self.j);
        let mut h = Hotplug::default();
        for &i in &j.hotplug {
            let Some(p) = j.pins.get(i) else { continue };
            let (Some(s), Some(e)) = (p.start, p.end) else {
                continue;
            };
            if h.start.is_none_or(|m| s < m.t) {
                h.start = Some(Mark {
                    t: s,
                    src: p.pin.src,
                });
            }
            if h.end.is_none_or(|m| e > m.0) {
                h.end = Some((e, p.pin.end_src));
            }
            h.bytes += p.pin.size.unwrap_or(0);
            h.pin_s += p.pin.dur_s;
        }
        let online = f.rpc("online_cpu_mem");
        // the uevents' earliest and latest are what each of them, one by one, leaves here
        for m in f.mem_uevents.earliest().iter().chain(online.iter()) {
            if h.start.is_none_or(|s| m.t < s.t) {
                h.start = Some(*m);
            }
        }
        for m in f.mem_uevents.latest().iter().chain(online.iter()) {
            if h.end.is_none_or(|e| m.t > e.0) {
                h.end = Some((m.t, m.src));
            }
        }
        h
    }

    /// container_start: after the devices and memory, until the container runs.
    fn container_start(&mut self) {
        let f = self.f;
        let before = self
            .phases
            .iter()
            .filter(|p| matches!(p.name, "cdi_wait" | "memory_hotplug"))
            .max_by_key(|p| p.end_ns)
            .map(|p| Mark {
                t: p.end_ns,
                src: p.end_src.or(p.start_src).unwrap_or(SrcRef {
                    file: 0,
                    line: 0,
                    offset: 0,
                }),
            });
        let create = f.rpc("create_container");
        let cs_start = before.or(create);
        let cs_end = [f.kube_started, f.rpc("start_container")]
            .into_iter()
            .flatten()
            .max_by_key(|m| m.t);
        if let (Some(a), Some(e)) = (cs_start, cs_end) {
            if e.t > a.t {
                self.add(
                    open("container_start", "container", a),
                    e.t,
                    Some(e.src),
                    false,
                    if before.is_some() {
                        "after the devices and memory are in, until the container started"
                    } else {
                        "create_container until the container started"
                    }
                    .into(),
                );
            }
        }
    }
}

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

mod boot;
pub mod gen;
mod guest;
mod host;
mod journal;
mod kubectl;
mod spec;
mod vfio;

pub use vfio::WORDINGS as HOTPLUG_WORDINGS;

pub use spec::{
    BarWording, Bind, CiClock, GpuTruth, JournalFormat, Outcome, ProxyConsole, RamPages, Records,
    Spec, Stop, Truth,
};

use crate::parse::time::{civil_from_nanos, days_from_civil, Nanos, NS_PER_S};

use boot::{Cut, Vm};
use guest::Out;

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

/// Milliseconds a pin of `secs` seconds prints.
fn pin_ms(secs: f64) -> u64 {
    (secs * 1000.0).round().max(0.0) as u64
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The abbreviated weekday of a local time.
fn weekday(local: Nanos) -> &'static str {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    DAYS.get(local.div_euclid(86_400 * NS_PER_S).rem_euclid(7) as usize)
        .copied()
        .unwrap_or("Mon")
}

/// The host's zone, seconds east of UTC.
fn zone_s(spec: &Spec) -> i64 {
    spec.zone_min * 60
}

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

/// Who boots and when: drawn first from the seed.
struct Ids {
    /// The boot's first line.
    t0: Nanos,
    sandbox: String,
    shim_pid: u32,
    qemu_pid: u32,
}

impl Ids {
    fn draw(spec: &Spec, rng: &mut Rng) -> Ids {
        // 2025-11-20 17:55:38.49 UTC plus up to a year, on a whole second plus a fraction
        let day = days_from_civil(2025, 11, 20) + (rng.next() % 365) as i64;
        let t0 =
            day * 86_400 * NS_PER_S + ns(64_538.0 + rng.f(0.0, 3600.0).floor() + rng.f(0.2, 0.8));
        let t0 = spec.start.unwrap_or(t0);
        let sandbox = rng.hex(64);
        let shim_pid = 1000 + (rng.next() % 4_000_000) as u32;
        Ids {
            t0,
            sandbox,
            shim_pid,
            qemu_pid: shim_pid + 48,
        }
    }
}

/// The generator of what surrounds the boot (other boots' lines, the journal's noise, the
/// trace's other QEMUs, kubectl's times), apart from the boot's own so that varying those
/// leaves the boot as it is.
fn rng_for_rest(spec: &Spec) -> Rng {
    Rng(spec.seed ^ 0xA11C_E5ED)
}

/// Generate the records of `spec`.
pub fn render(spec: &Spec) -> Records {
    let mut rng = Rng(spec.seed ^ 0x5EED_0001);
    let ids = Ids::draw(spec, &mut rng);
    let mut out = Out::default();
    let mut vm = Vm::new(spec, &ids, &mut out, &mut rng);
    vm.creating_sandbox();
    if spec.outcome == Outcome::ColdPlugFailed {
        let end = vm.cold_plug_failed();
        let mut truth = vm.truth;
        let (journal, copies) =
            journal::write(spec, &mut rng_for_rest(spec), out.lines, ids.t0, end);
        truth.duplicates = copies;
        return Records {
            journal,
            bpftrace: None,
            kubectl: None,
            truth,
        };
    }

    // ---- the boot ----------------------------------------------------------------------------
    let boot = vm.start_vm();
    let agent_at = vm.kernel_boot(boot);
    let (end_at, cut) = if spec.outcome == Outcome::HotplugFailed {
        // the VM is up, the GPU never arrives: a whole log, no cut
        let end = vm.hotplug_failed(agent_at);
        (end, Cut::none())
    } else {
        let last_found = vm.enumerate_pci(agent_at);
        let create = vm.create_container(last_found);
        let drivers = vm.driver_init(&create, last_found);
        let cdi = vm.cdi_wait(&create, &drivers);
        let end = vm.end(&create, &cdi);
        // a sandbox stopped before its container started: the log ends at the stop
        let stopped_early = spec.stop == Some(Stop::BeforeStart);
        let cut_spec = Spec {
            tail_cut: spec.tail_cut.or(stopped_early.then_some(0.5)),
            ..spec.clone()
        };
        let cut = Cut::new(&cut_spec, boot, &drivers, &create, &end);
        cut.apply(&mut vm.truth, &drivers, &cdi, &end);
        (end.at, cut)
    };
    // the stop's lines, kept apart from the cut
    let logged = vm.logged();
    match (spec.stop, cut.tail) {
        (Some(Stop::BeforeStart), Some(tail)) => {
            vm.stop(tail + 1);
            vm.truth.status = "stopped";
        }
        (Some(Stop::AfterStart), None) if vm.truth.status == "complete" => {
            let after = vm.pause(30.0, 3600.0);
            vm.stop(end_at + after);
            vm.truth.stopped_after_start = true;
        }
        _ => {}
    }
    let mut truth = vm.truth;
    let stop_lines = out.lines.split_off(logged.min(out.lines.len()));

    // ---- the rest: other boots, traces, kubectl --------------------------------------------
    let mut rest = rng_for_rest(spec);
    if spec.earlier_boot {
        guest::earlier_boot(spec, &ids, &mut out, &mut rest);
    }
    if spec.other_sandbox {
        guest::other_sandbox(&ids, &mut out, &mut rest);
    }
    let (first_logged, last_logged) = cut.window();
    let mut lines = out.take_lines(first_logged, last_logged);
    lines.extend(stop_lines);
    let (journal, copies) = journal::write(spec, &mut rest, lines, ids.t0, end_at);
    truth.duplicates = copies;
    truth.pins_s = spec
        .pin_trace
        .then(|| host::pins_s(&out.pins, ids.qemu_pid, last_logged));
    let bpftrace = spec
        .pin_trace
        .then(|| host::bpftrace(spec, &mut rest, &ids, &out.pins, last_logged, end_at));
    let kubectl = (spec.kubectl && truth.status == "complete" && cut.tail.is_none()).then(|| {
        let (text, total_s) = kubectl::describe(spec, &mut rest, ids.t0, end_at);
        if cut.head.is_none() {
            truth.total_s = Some(total_s);
        }
        text
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
/// one locale, one journal format, one trace clock, writes its shim lines once or
/// twice and its guests' console through the shim or Kata 1.x's proxy: the first spec's are
/// used for all its boots), and their
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
                    spec.dup_identifiers = f.dup_identifiers;
                    spec.proxy_console = f.proxy_console;
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

#[cfg(test)]
mod tests {
    use super::journal::go_quote;
    use super::kubectl::rfc1123;
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

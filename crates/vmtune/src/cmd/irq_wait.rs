//! `vmtune irq wait`: how long interrupts wait for their vCPU on this host (eBPF), or in a
//! recording of the same events.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use irqbal::wait::{self, render, tracer, WaitBook, WaitEvent};

use super::common::print_json;

pub const WAIT_HELP: &str = "\
For each interrupt the host's local APIC emulation accepts for a vCPU that is not in the
guest, the time until that vCPU next enters the guest, per VM, vCPU and the vCPU's state at
that moment: `preempted` (its thread was runnable but had no CPU: the wait vBalance's host
half and dedicated CPUs remove), `blocked` (halted: a wake-up), `host` (handling an exit).
Interrupts accepted while the vCPU ran in the guest are counted, not timed. It reads the
tracepoints kvm_apic_accept_irq, kvm_entry, kvm_exit, sched_switch and irq_handler_entry/exit
(root, kernel BTF) and ties each interrupt to its VM by the VFIO vector that delivered it, the
VM thread that raised it, or the only VM running.

Blind spot: interrupts posted by the IOMMU (VT-d posted interrupts, AVIC) reach a vCPU with no
host CPU involved and are not seen.

Examples:
  vmtune irq wait --duration 30
  vmtune irq wait --duration 10 --prometheus > /var/lib/node_exporter/vmtune_irq.prom
  vmtune irq wait --record waits.jsonl        # the raw events, one JSON object a line
  vmtune irq wait --replay waits.jsonl --json";

/// How long interrupts wait for their vCPU (host, eBPF).
#[derive(clap::Args, Debug)]
#[command(after_help = WAIT_HELP)]
pub struct WaitArgs {
    /// Measure for this many seconds (stops early on SIGINT/SIGTERM).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Only this VM process (its pid).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Also write every event to FILE as JSON lines (for --replay, or to send with a report).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Account a recording instead of measuring (no root needed).
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub replay: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print Prometheus' text format (for node_exporter's textfile collector).
    #[arg(long)]
    pub prometheus: bool,
}

fn output(a: &WaitArgs, r: &wait::WaitReport) -> anyhow::Result<()> {
    if a.json {
        print_json(r)
    } else if a.prometheus {
        print!("{}", render::prometheus(r));
        Ok(())
    } else {
        print!("{}", render::text(r));
        Ok(())
    }
}

fn keep(a: &WaitArgs, e: &WaitEvent) -> bool {
    let vm = match *e {
        WaitEvent::Accept { vm, .. }
        | WaitEvent::Entry { vm, .. }
        | WaitEvent::Blocked { vm, .. } => vm,
    };
    a.pid.is_none_or(|p| p == vm)
}

pub fn run(a: WaitArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.replay {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let events =
            wait::parse_recording(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut book = WaitBook::new();
        for e in events.iter().filter(|e| keep(&a, e)) {
            book.push(e);
        }
        let r = book.report(None, &[]);
        output(&a, &r)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !(a.duration.is_finite() && a.duration > 0.0 && a.duration <= 86_400.0) {
        bail!("--duration must be between 0 and 86400 seconds");
    }
    let mut rec = match &a.record {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let mut tr = tracer::WaitTracer::open().map_err(|e| anyhow::anyhow!("irq wait: {e}"))?;
    let mut seen = tr
        .refresh(a.pid)
        .map_err(|e| anyhow::anyhow!("irq wait: {e}"))?;
    if seen.is_empty() {
        let what = match a.pid {
            Some(p) => format!("process {p} is not a KVM VM (it holds no kvm-vm file)"),
            None => {
                "no KVM VM is running on this host (no process holds a kvm-vm file)".to_string()
            }
        };
        if a.json {
            print_json(&serde_json::json!({
                "status": "no-vm",
                "message": what,
                "attached": tracer::ATTACH.iter().map(|(_, tp)| tp).collect::<Vec<_>>(),
            }))?;
        } else if a.prometheus {
            println!("# {what}: nothing measured");
        } else {
            println!("The tracer loaded and attached; {what}: nothing to measure.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }
    eprintln!(
        "measuring {} VM(s) for {:.0} s: {}",
        seen.len(),
        a.duration,
        seen.iter()
            .map(|v| format!("{} (pid {})", v.name, v.pid))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.duration);
    let mut book = WaitBook::new();
    let mut all_seen = seen.clone();
    let mut next_scan = start + Duration::from_secs(1);
    let mut write_err = None;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tr.poll((deadline - now).min(Duration::from_millis(100)), |e| {
            if !keep(&a, &e) {
                return;
            }
            if let Some(w) = rec.as_mut() {
                if let Err(err) = serde_json::to_writer(&mut *w, &e)
                    .map_err(std::io::Error::from)
                    .and_then(|()| w.write_all(b"\n"))
                {
                    write_err.get_or_insert(err);
                }
            }
            book.push(&e);
        });
        if Instant::now() >= next_scan {
            // VMs start and stop: keep the program's maps current
            seen = tr
                .refresh(a.pid)
                .map_err(|e| anyhow::anyhow!("irq wait: {e}"))?;
            for v in &seen {
                if !all_seen.iter().any(|o| o.pid == v.pid) {
                    all_seen.push(v.clone());
                }
            }
            next_scan += Duration::from_secs(1);
        }
    }
    let end_ns = tracer::monotonic_ns();
    // what the ring buffer still holds
    tr.poll(Duration::ZERO, |e| {
        if keep(&a, &e) {
            book.push(&e);
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let counters = tr.counters();
    let mut r = book.report(Some(end_ns), &all_seen);
    // a VM that exited during the window is reported, marked as not running
    for vm in &mut r.vms {
        vm.running = Some(seen.iter().any(|v| v.pid == vm.pid));
    }
    r.window_s = Some(elapsed);
    r.lost = Some(counters.lost);
    let mut partial = Vec::new();
    if counters.lost > 0 {
        partial.push(format!(
            "{} event(s) lost (the ring buffer was full): waits are missing",
            counters.lost
        ));
    }
    if elapsed + 0.05 < a.duration {
        partial.push(format!(
            "stopped by a signal after {elapsed:.1} s of {:.1} s",
            a.duration
        ));
    }
    if let Some(e) = write_err {
        partial.push(format!("the recording is incomplete: {e}"));
    }
    if !partial.is_empty() {
        r.partial = Some(partial.join("; "));
    }
    if let Some(mut w) = rec {
        w.flush().context("writing the recording")?;
    }
    output(&a, &r)?;
    Ok(ExitCode::SUCCESS)
}

//! Step 6 of the analysis: how the boot went — complete, failed (which step, and the error
//! as logged), unfinished (the log ends while it is still going), or unknown — and whether
//! the log starts after the boot began.

use crate::analyze::facts::{classify_error, ErrorLine, Facts, Mark};
use crate::analyze::model::{BootState, CdiSummary, Failure, Phase};

/// Shorten a Go error chain for one line: its last three links.
fn tail(msg: &str) -> String {
    let parts: Vec<&str> = msg.split(": ").collect();
    let n = parts.len();
    if n <= 3 {
        msg.to_string()
    } else {
        format!("…: {}", parts[n - 3..].join(": "))
    }
}

/// Judge the boot.
pub fn assess(
    f: &Facts,
    phases: &[Phase],
    cdi: Option<&CdiSummary>,
    gpu_count: usize,
    t0: i64,
    files: &[String],
) -> BootState {
    // with no phase the boot's start is not known: no "N s into the boot"
    let at_s = |t: i64| (!phases.is_empty()).then(|| (t - t0) as f64 / 1e9);
    // ---- failure ----------------------------------------------------------------------
    let mut failure: Option<Failure> = None;
    if let Some((m, msg)) = &f.cdi_failed {
        failure = Some(Failure {
            step: "cdi_wait",
            summary: format!(
                "CDI never resolved: the kata-agent gave up after {} tries",
                cdi.map_or(0, |c| c.tries)
            ),
            message: msg.clone(),
            at_s: at_s(m.t),
            line: Some(m.src.at(files)),
        });
    }
    let started = f.rpc("start_container").or(f.kube_started);
    if failure.is_none() {
        failure = shim_failure(f, started, cdi, &at_s, files);
    }

    // ---- started late ---------------------------------------------------------------------
    let mut late = Vec::new();
    if let Some(t) = f.kernel_min_t.filter(|t| *t > 1.0) {
        late.push(format!(
            "the first guest kernel line is {t:.1} s into the boot (no earlier ones)"
        ));
    }
    if let Some(a) = cdi.and_then(|c| c.first_try).filter(|a| *a > 0) {
        late.push(format!("the first CDI try in the log is number {a}, not 0"));
    }
    let enumerated = f.gpus.iter().filter(|g| g.found.is_some()).count();
    if f.kernel_lines > 0 && gpu_count > enumerated {
        late.push(format!(
            "{gpu_count} GPUs are named (driver enables, the CDI request) but {enumerated} were seen being enumerated"
        ));
    }

    // ---- status ----------------------------------------------------------------------------
    let active = f.agent_lines + f.journal_lines > 0;
    let stop_words =
        |m: &crate::analyze::facts::Mark, msg: &str| format!("\"{msg}\" ({})", m.src.at(files));
    let stopped = match (&f.stopped, started) {
        (Some((m, msg)), Some(s)) if failure.is_none() => Some(format!(
            "the sandbox was stopped {} s after the container started: {}; not counted in the boot",
            crate::analyze::model::secs_fmt((m.t - s.t) as f64 / 1e9, 1),
            stop_words(m, msg)
        )),
        _ => None,
    };
    let (status, ends_during) = if failure.is_some() {
        ("failed", None)
    } else if started.is_some() {
        ("complete", None)
    } else if let Some((m, msg)) = &f.stopped {
        (
            "stopped",
            Some(format!(
                "the sandbox was stopped before its container started: {}{}",
                stop_words(m, msg),
                at_s(m.t).map_or(String::new(), |t| format!(
                    ", {} s into the boot",
                    crate::analyze::model::secs_fmt(t, 1)
                ))
            )),
        )
    } else if active {
        let open = if let Some(c) = cdi.filter(|c| !c.resolved) {
            format!(
                "cdi_wait: the agent was still waiting for the CDI specs ({} tries so far)",
                c.tries
            )
        } else if let Some(p) = phases.iter().max_by_key(|p| p.end_ns) {
            format!("{} ({}), the last phase seen", p.name, p.label)
        } else {
            "a boot none of whose phases the inputs show (a VM already running when the log starts, or another's teardown)".to_string()
        };
        ("unfinished", Some(open))
    } else {
        ("unknown", None)
    };
    BootState {
        status,
        started_late: late,
        failure,
        ends_during,
        stopped,
    }
}

/// The failure the shim's and the CRI plugin's errors show: the most specific error that
/// names a boot step (a VFIO device the hypervisor refused, preferably one that names the
/// device). Other errors (a console read failing at teardown) do not make a boot fail, nor
/// do errors after the container `started`.
fn shim_failure(
    f: &Facts,
    started: Option<Mark>,
    cdi: Option<&CdiSummary>,
    at_s: &dyn Fn(i64) -> Option<f64>,
    files: &[String],
) -> Option<Failure> {
    let unresolved = cdi.is_some_and(|c| !c.resolved);
    let mut best: Option<((u8, bool), &ErrorLine, &'static str, &'static str)> = None;
    for e in &f.errors {
        if started.is_some_and(|s| e.m.t > s.t) {
            continue;
        }
        let (step, summary) = classify_error(&e.text());
        let rank = match step {
            "cold_plug" | "cdi_wait" | "create_container" | "vfio_hotplug" | "vm_create"
            | "agent_connect" => 3,
            "sandbox_start" => 2,
            _ => continue,
        };
        let named = step == "vfio_hotplug" && e.vfio().is_some_and(|v| v.device.is_some());
        if best.is_none_or(|b| (rank, named) > b.0) {
            best = Some(((rank, named), e, step, summary));
        }
    }
    let (_, e, step, summary) = best?;
    let message = match &e.error {
        Some(err) if !err.is_empty() => format!("{}: {}", e.msg, err),
        _ => e.msg.clone(),
    };
    let summary = if step == "vfio_hotplug" {
        vfio_summary(f, e)
    } else if let Some(q) = qemu_last_error(f, started).filter(|_| step == "vm_create") {
        // QEMU's own words say why it stopped: the shim's line says only that it did
        let said = q.msg.trim().trim_end_matches('.').replace('\n', " / ");
        if std::ptr::eq(q, e) {
            format!("{summary}: {}", tail(&said))
        } else {
            format!(
                "{summary}: {}; QEMU's last error: {said}",
                tail(e.error.as_deref().unwrap_or(&e.msg))
            )
        }
    } else if unresolved {
        format!(
            "{summary} while the kata-agent was still waiting for the CDI specs: CDI never resolved ({} tries)",
            cdi.map_or(0, |c| c.tries)
        )
    } else {
        format!("{summary}: {}", tail(e.error.as_deref().unwrap_or(&e.msg)))
    };
    Some(Failure {
        // a sandbox error while the agent waits for CDI is the CDI wait failing; a
        // timeout names its own step (the summary says CDI never resolved)
        step: if unresolved && step == "sandbox_start" {
            "cdi_wait"
        } else {
            step
        },
        summary,
        message,
        at_s: at_s(e.m.t),
        line: Some(e.m.src.at(files)),
    })
}

/// The last line of QEMU's own stderr the shim relayed at level=error before the container
/// `started` (its warnings aside): why the hypervisor stopped, in its words.
fn qemu_last_error(f: &Facts, started: Option<Mark>) -> Option<&ErrorLine> {
    f.errors
        .iter()
        .filter(|q| q.qemu && started.is_none_or(|s| q.m.t <= s.t))
        .filter(|q| !q.msg.to_ascii_lowercase().contains(": warning:"))
        .max_by_key(|q| q.m.t)
}

/// "hot-plugging VFIO device 0000:1a:00.0 into the VM failed: group 40 is not viable": the
/// device from the line, else from another VFIO error of the boot (the shim's
/// `vfio-device-BDF`), and the hypervisor's reason.
fn vfio_summary(f: &Facts, e: &ErrorLine) -> String {
    let v = e.vfio();
    let device = v.as_ref().and_then(|v| v.device.clone()).or_else(|| {
        f.errors
            .iter()
            .filter_map(ErrorLine::vfio)
            .find_map(|v| v.device)
    });
    format!(
        "hot-plugging VFIO device {} into the VM failed: {}",
        device.as_deref().unwrap_or("(not named in the log)"),
        v.map_or_else(|| tail(&e.text()), |v| v.reason)
    )
}

/// Whether a log that starts after the boot began (`late`: [`BootState::started_late`] is
/// not empty) may have cut off the start of the phases of kind `kind`, so that what it shows
/// of them is a lower bound: the VM's creation, the guest kernel, PCI enumeration and the
/// host's pins before the first line, and a CDI wait whose first try in the log is not
/// number 0 (or, unnumbered, of a log that starts late). The single-boot report says "at
/// least" of them ([`crate::analyze::model::Phase::at_least`]); the fleet leaves them out of its
/// percentiles (`started_late`).
pub fn cut_by_late_start(kind: &str, late: bool, cdi: Option<&CdiSummary>) -> bool {
    match kind {
        "vm_create" | "kernel_boot" | "pci_enumeration" | "dma_pinning" => late,
        "cdi_wait" => cdi.is_some_and(|c| c.first_try.map_or(late, |t| t > 0)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_from_public_error_shapes() {
        use crate::analyze::facts::classify_error as classify;
        assert_eq!(
            classify("RunPodSandbox for &PodSandboxMetadata{Name:x} failed, error rpc error: code = Unknown desc = failed to start sandbox \"id\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=vfio1").0,
            "cold_plug"
        );
        assert_eq!(
            classify("createContainer failed rpc error: code = DeadlineExceeded desc = CreateContainerRequest timed out").0,
            "create_container"
        );
        assert_eq!(
            classify("failed to inject devices after CDI timeout of 100 seconds").0,
            "cdi_wait"
        );
        assert_eq!(classify("something else").0, "shim");
        assert_eq!(tail("a: b: c: d: e"), "…: c: d: e");
    }
}

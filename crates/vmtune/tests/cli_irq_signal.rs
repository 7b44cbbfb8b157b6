//! `vmtune irq` and its preemption signal on this machine: `show` and `balance` say which
//! signal they use and why; on a KVM guest with steal time (as root) that is the eBPF
//! preempted flag, and the daemon moves the IRQs of a preempted vCPU and puts every affinity
//! back on exit; a closed stdout ends it quietly; `--irq N` of an IRQ that does not exist is
//! refused. Two tests write /proc/irq (restoring it): run this file under
//! `flock /tmp/vmtune-host.lock cargo test -p vmtune --test cli_irq_signal`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{gateway_port80, ok_json, read, virtio_net_rx_irq, vmtune, RestoreIrqMask};

/// Whether the eBPF signal must work here: an x86 KVM guest with steal time, and root.
fn ebpf_expected() -> Result<(), String> {
    irqbal::ebpf::kvm_steal_time_offered().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    Ok(())
}

#[test]
fn show_refuses_an_irq_that_does_not_exist() {
    for cmd in [
        vec!["irq", "show", "--irq", "99999", "--interval", "0.1"],
        vec![
            "irq",
            "balance",
            "--irq",
            "99999",
            "--duration",
            "0.1",
            "--dry-run",
        ],
    ] {
        let out = vmtune().args(&cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("IRQ 99999 does not exist"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn show_says_which_preemption_signal_it_uses_and_why() {
    let v = ok_json(&["irq", "show", "--interval", "0.3", "--json"]);
    let sig = v["signal"]["signal"].as_str().unwrap();
    let why = v["signal"]["reason"].as_str().unwrap();
    assert!(!why.is_empty());
    match ebpf_expected() {
        Ok(()) => {
            assert_eq!(sig, "ebpf-preempted-flag", "{why}");
            let checks = v["signal"]["checks"].as_array().unwrap();
            assert_eq!(checks.len(), v["cpus"].as_array().unwrap().len());
            assert!(v["preemptions"].is_array());
        }
        Err(e) => {
            eprintln!("eBPF not expected here ({e}): {sig} because {why}");
            assert_eq!(sig, "procstat-steal");
            assert!(why.contains("unavailable"), "{why}");
        }
    }
    // asked for: /proc/stat, and said so
    let out = vmtune()
        .args(["irq", "show", "--interval", "0.1", "--signal", "procstat"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    assert!(
        first.starts_with("preemption signal: /proc/stat steal")
            && first.contains("--signal procstat"),
        "{text}"
    );
    // human names, not Rust's
    assert!(
        !text.contains("ManyToMany") && !text.contains("(Balanced)"),
        "{text}"
    );
    assert!(text.contains("many-to-many"), "{text}");
}

/// The first virtio-net receive-queue IRQ and its original mask and effective CPU.
fn virtio_net_rx() -> Option<(u32, String, String)> {
    let irq = virtio_net_rx_irq()?;
    Some((
        irq,
        read(&format!("/proc/irq/{irq}/smp_affinity_list"))?,
        read(&format!("/proc/irq/{irq}/effective_affinity_list"))?,
    ))
}

/// Network traffic that makes the receive IRQ fire: TCP connection attempts to the default
/// gateway (answered by SYN-ACK or RST), until `stop`.
fn traffic(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let gw = gateway_port80();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(addr) = gw {
                let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn balance_uses_the_ebpf_flag_moves_off_preempted_vcpus_and_restores_everything() {
    let _host = testkit::host_lock();
    if let Err(e) = ebpf_expected() {
        testkit::skip(
            &testkit::current_test(),
            format!("the eBPF signal is not expected here ({e})"),
        );
        return;
    }
    let Some((irq, mask0, eff0)) = virtio_net_rx() else {
        testkit::skip(
            &testkit::current_test(),
            "no virtio-net receive IRQ on this machine",
        );
        return;
    };
    let _restore = RestoreIrqMask(irq, mask0.clone());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let net = traffic(stop.clone());
    // busy vCPUs: the host preempts them when it is contended
    let burners: Vec<_> = (0..std::thread::available_parallelism().map_or(1, |n| n.get()))
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 1u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.rotate_left(7) ^ 0x9e37);
                }
            })
        })
        .collect();
    let steal0 = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let jdir = tempfile::tempdir().unwrap();
    let journal = jdir.path().join("balance.journal");
    let out = vmtune()
        .args([
            "irq",
            "balance",
            "--json",
            "-v",
            "--irq",
            &irq.to_string(),
            "--duration",
            "20",
            "--journal",
            journal.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in burners {
        let _ = b.join();
    }
    let _ = net.join();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let start = &evs[0];
    assert_eq!(start["event"], "start");
    assert_eq!(start["signal"]["signal"], "ebpf-preempted-flag", "{start}");
    assert_eq!(start["candidates"][0]["movable"], true, "{start}");
    // the move semantics come from the IRQ's chip: x86 MSI without remapping is deferred
    let chip = start["candidates"][0]["chip"].as_str().unwrap_or("");
    let want = if chip.starts_with("IR-") {
        "direct"
    } else {
        "deferred"
    };
    assert_eq!(start["moves"]["moves"], want, "{start}");
    assert!(
        start["plan"].as_str().is_some_and(|p| !p.is_empty()),
        "{start}"
    );
    let stop_ev = evs.last().unwrap();
    assert_eq!(stop_ev["event"], "stop", "{text}");
    let s = &stop_ev["summary"];
    eprintln!("summary: {s}");
    // everything comes back: the mask exactly, the effective CPU (traffic moves it back)
    assert_eq!(s["restore_failures"], 0);
    assert_eq!(
        read(&format!("/proc/irq/{irq}/smp_affinity_list")).as_deref(),
        Some(mask0.as_str())
    );
    let eff = read(&format!("/proc/irq/{irq}/effective_affinity_list")).unwrap();
    let note = s["effective_restored"][0][1].as_str().unwrap_or("");
    assert!(
        eff == eff0 || note.starts_with("not restored"),
        "effective {eff}, was {eff0}, but the daemon said {note:?}"
    );
    if eff != eff0 {
        eprintln!("effective CPU not back ({note}); no interrupt came in time");
    }
    let lat = &s["latencies"];
    let preemptions = lat["preemptions"].as_u64().unwrap();
    let steal1 = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    if preemptions == 0 {
        assert_eq!(
            steal0.lines().next(),
            steal1.lines().next(),
            "steal grew but no preemption was seen"
        );
        testkit::skip(
            &testkit::current_test(),
            "the host did not preempt this guest during the test",
        );
        return;
    }
    // each preemption seen by a running vCPU reached the daemon
    let pre: Vec<&serde_json::Value> = evs
        .iter()
        .filter(|e| e["event"] == "preempt" && e["preempted"] == true)
        .collect();
    assert_eq!(pre.len() as u64, preemptions);
    for e in &pre {
        assert_ne!(e["cpu"], e["observer"], "{e}");
        assert!(e["ring_us"].as_f64().unwrap() >= 0.0);
    }
    assert!(lat["seen_to_daemon_us"]["n"].as_u64().unwrap() > 0);
    let moves: Vec<&serde_json::Value> = evs
        .iter()
        .filter(|e| e["event"] == "move" && e["reason"] == "holder-offline")
        .collect();
    if start["moves"]["moves"] == "deferred" {
        // moves are deferred here (x86 MSI without remapping): the daemon must not follow
        // single preemptions, and it places the IRQ by availability over its window instead
        assert!(moves.is_empty(), "moves off single preemptions: {moves:?}");
        assert_eq!(s["move_kind"], "deferred");
        let avail = evs.iter().any(|e| {
            e["event"] == "decision"
                && e["cpus"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().all(|c| c["avail_steal"].is_number()))
        });
        assert!(avail, "no decision saw the availability window:\n{text}");
        for m in evs.iter().filter(|e| e["event"] == "move") {
            assert_eq!(m["ok"], true, "{m}");
            assert!(
                ["holder-starved", "imbalance"].contains(&m["reason"].as_str().unwrap_or("")),
                "{m}"
            );
        }
    }
    // a preemption of the IRQ's vCPU moves it off (unless the other vCPU was preempted too)
    for m in &moves {
        assert_eq!(m["ok"], true, "{m}");
        assert!(m["since_seen_us"].as_f64().unwrap() > 0.0, "{m}");
    }
    eprintln!(
        "{} preemptions, {} moves off preempted vCPUs; seen -> written {}",
        preemptions,
        moves.len(),
        lat["seen_to_written_us"]
    );
}

#[test]
fn a_closed_stdout_ends_the_daemon_quietly_and_it_still_restores() {
    let _host = testkit::host_lock();
    let Some((irq, mask0, _)) = virtio_net_rx() else {
        testkit::skip(
            &testkit::current_test(),
            "no virtio-net receive IRQ on this machine",
        );
        return;
    };
    let _restore = RestoreIrqMask(irq, mask0.clone());
    let jdir = tempfile::tempdir().unwrap();
    let journal = jdir.path().join("balance.journal");
    let mut child = vmtune()
        .args([
            "irq",
            "balance",
            "-v",
            "--irq",
            &irq.to_string(),
            "--duration",
            "60",
            "--journal",
            journal.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("vmtune irq balance (guest)"), "{first}");
    drop(lines); // the reader goes away, like `| head -1`
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the daemon kept running"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(!err.contains("panicked"), "{err}");
    assert!(status.success(), "{status:?} {err}");
    assert_eq!(
        read(&format!("/proc/irq/{irq}/smp_affinity_list")).as_deref(),
        Some(mask0.as_str())
    );
}

/// Per-CPU counts of `irq` in /proc/interrupts.
fn per_cpu_counts(irq: u32) -> Vec<u64> {
    let ints = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    ints.lines()
        .find(|l| {
            l.split_once(':')
                .is_some_and(|(a, _)| a.trim() == irq.to_string())
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map_while(|t| t.parse::<u64>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What the simulator's `vbalance` (deferred) and `-ir` (direct) variants assume about an
/// affinity write, checked on this machine: without interrupt remapping the effective CPU does
/// not change at the write, and the IRQ's next interrupt still lands on the old CPU, after
/// which the vector has moved.
#[test]
fn an_affinity_write_takes_effect_at_the_next_interrupt_on_the_old_cpu() {
    let _host = testkit::host_lock();
    let Some((irq, mask0, eff0)) = virtio_net_rx() else {
        testkit::skip(
            &testkit::current_test(),
            "no virtio-net receive IRQ on this machine",
        );
        return;
    };
    let Ok(old) = eff0.parse::<usize>() else {
        testkit::skip(
            &testkit::current_test(),
            format!("effective affinity {eff0:?} is not one CPU"),
        );
        return;
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ncpu < 2 {
        testkit::skip(&testkit::current_test(), "one CPU");
        return;
    }
    let new = (old + 1) % ncpu;
    let path = format!("/proc/irq/{irq}/smp_affinity_list");
    if std::fs::write(&path, new.to_string()).is_err() {
        testkit::skip(
            &testkit::current_test(),
            format!("cannot write {path} (run as root)"),
        );
        return;
    }
    let _restore = RestoreIrqMask(irq, mask0.clone());
    let eff_at_write = read(&format!("/proc/irq/{irq}/effective_affinity_list")).unwrap();
    let before = per_cpu_counts(irq);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let net = traffic(stop.clone());
    let t0 = Instant::now();
    let mut after = before.clone();
    while t0.elapsed() < Duration::from_secs(5) {
        after = per_cpu_counts(irq);
        let fired: u64 = after.iter().sum::<u64>() - before.iter().sum::<u64>();
        // a few interrupts, and the vector seen moved (the kernel finishes a deferred move
        // in the interrupt path, so under load the read may lag the first interrupt)
        let moved = read(&format!("/proc/irq/{irq}/effective_affinity_list")).as_deref()
            != Some(eff0.as_str());
        if fired >= 3 && moved {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let eff_after = read(&format!("/proc/irq/{irq}/effective_affinity_list")).unwrap();
    // put the vector back where it was (the traffic lets the move complete), then the mask
    let _ = std::fs::write(&path, old.to_string());
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(2)
        && read(&format!("/proc/irq/{irq}/effective_affinity_list")).as_deref()
            != Some(eff0.as_str())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = net.join();
    let _ = std::fs::write(&path, &mask0);
    let fired: u64 = after.iter().sum::<u64>() - before.iter().sum::<u64>();
    if fired == 0 {
        testkit::skip(
            &testkit::current_test(),
            format!("no interrupt on IRQ {irq} in 5 s of traffic"),
        );
        return;
    }
    let on_old = after[old] - before[old];
    eprintln!(
        "IRQ {irq}: effective {eff0} -> {eff_at_write} at the write, {eff_after} after {fired} \
         interrupt(s), {on_old} of them on the old CPU {old}"
    );
    if eff_at_write == new.to_string() {
        // interrupt remapping (or a kernel that moves in process context): direct
        eprintln!("moves take effect at once here (the simulator's -ir variants)");
    } else {
        // deferred: the old CPU took the first interrupt after the write, then it moved
        assert_eq!(eff_at_write, eff0);
        assert!(
            on_old >= 1,
            "no interrupt on the old CPU: {before:?} -> {after:?}"
        );
        // the interrupt that lands on the old CPU starts the move; one more shows it done
        // (a single interrupt in the whole window says nothing about the move yet)
        if fired >= 2 {
            assert_eq!(eff_after, new.to_string(), "after {fired} interrupts");
        }
    }
    assert_eq!(read(&path).as_deref(), Some(mask0.as_str()));
}

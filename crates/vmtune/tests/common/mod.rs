//! Helpers the CLI test files share: run the built `vmtune`, demand success, parse its JSON.
#![allow(dead_code)] // each test binary uses its own subset

pub mod libvirtd;

use std::process::{Command, Output};

/// The `vmtune` binary under test, ready for arguments.
pub fn vmtune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vmtune"))
}

/// Run `vmtune ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    vmtune().args(args).output().expect("running vmtune")
}

/// Run `vmtune ARGS`, which must succeed and print JSON; the parsed JSON.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(
        o.status.success(),
        "vmtune {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "vmtune {args:?}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// Policy, priority and EEVDF slice of a thread, from /proc/PID/task/TID/sched
/// (`policy=0 prio=120 se.slice=1400000`).
pub fn sched_of(pid: u32, tid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/sched")).unwrap_or_default();
    ["policy", "prio", "se.slice"]
        .iter()
        .map(|k| {
            let v = text
                .lines()
                .find_map(|l| {
                    let (key, val) = l.split_once(':')?;
                    (key.trim() == *k).then(|| val.trim().to_string())
                })
                .unwrap_or_else(|| "-".into());
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Read `from` line by line until one contains `marker` (returned) or `secs` pass or it ends
/// (the last line read, which does not contain it).
pub fn line_with(from: &mut impl std::io::BufRead, marker: &str, secs: u64) -> String {
    let start = std::time::Instant::now();
    let mut line = String::new();
    while !line.contains(marker) && start.elapsed() < std::time::Duration::from_secs(secs) {
        line.clear();
        if from.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
    }
    line
}

/// `vmtune restore --journal JOURNAL --json`, which must succeed; its report.
pub fn restore(journal: &std::path::Path) -> serde_json::Value {
    ok_json(&[
        "restore",
        "--journal",
        journal.to_str().expect("a UTF-8 path"),
        "--json",
    ])
}

/// A /proc or /sys file's contents, trimmed; `None` when it cannot be read.
pub fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The first virtio-net receive-queue IRQ (`virtioN-input.0` in /proc/interrupts of a
/// device the virtio_net driver owns); `None` on a machine without one.
pub fn virtio_net_rx_irq() -> Option<u32> {
    let devs: Vec<String> = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_net")
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("virtio"))
        .collect();
    let ints = std::fs::read_to_string("/proc/interrupts").ok()?;
    ints.lines().find_map(|line| {
        let (label, _) = line.split_once(':')?;
        let irq = label.trim().parse::<u32>().ok()?;
        devs.iter()
            .any(|d| line.trim_end().ends_with(&format!("{d}-input.0")))
            .then_some(irq)
    })
}

/// The default gateway's port 80 (from /proc/net/route): connection attempts to it make a
/// receive interrupt fire (answered by SYN-ACK or RST); `None` without a default route.
pub fn gateway_port80() -> Option<std::net::SocketAddr> {
    let route = std::fs::read_to_string("/proc/net/route").ok()?;
    let gw = route.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"00000000"))
            .then(|| u32::from_str_radix(f.get(2)?, 16).ok())
            .flatten()
    })?;
    Some(std::net::SocketAddr::from((
        std::net::Ipv4Addr::from(gw.swap_bytes()),
        80,
    )))
}

/// Puts an IRQ's `smp_affinity_list` back when the test ends, whatever happens.
pub struct RestoreIrqMask(pub u32, pub String);

impl Drop for RestoreIrqMask {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/proc/irq/{}/smp_affinity_list", self.0), &self.1);
    }
}

/// A two-CPU sysfs tree under `dir` (one node, one PU per core) whose CPUs have no `cache/`
/// directories: a source that says nothing about caches. Returns its root.
pub fn sysfs_without_caches(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("nocaches");
    let cpu = root.join("sys/devices/system/cpu");
    for c in 0..2 {
        let t = cpu.join(format!("cpu{c}/topology"));
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("core_cpus_list"), format!("{c}\n")).unwrap();
    }
    std::fs::write(cpu.join("online"), "0-1\n").unwrap();
    let node = root.join("sys/devices/system/node");
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-1\n").unwrap();
    root
}

/// A file of bootprof's test fixtures (the Kata GPU boot study's logs), by name.
pub fn fixture(name: &str) -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../bootprof/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

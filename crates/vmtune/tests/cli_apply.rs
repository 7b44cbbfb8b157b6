//! `vmtune apply` / `restore` / `hook` against the real host: a real QEMU (TCG, no guest
//! kernel), the machine's own IRQs, its cpuset hierarchy and hugepages.
//!
//! Every test holds the host lock that all test binaries share (`testkit::host_lock`), and
//! every one restores what it changed, also when it fails (drop guards run `vmtune restore`).
//! Each compares, before and after, the host values vmtune may change: IRQ affinities, the
//! default IRQ affinity and workqueue mask, cgroups and every task's cpuset and affinity, the
//! QEMU's threads. The 2 MiB hugepage pool is shared with every other process on the machine
//! (another VM's hook, an operator, a script), so it is not compared before and after: the
//! tests check what vmtune read, wrote and read back right after writing (its report and
//! journal), and crates/apply checks exact hugepage restore on a scratch pool.
//!
//! Requirements, each reported as a named skip when missing: `qemu-system-x86_64`, CPUs 0
//! and 1 online (the plans are written for them), and root for the tests that change IRQs,
//! masks, cpusets or hugepages.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::Snapshot;

mod common;
use common::{restore, sched_of, vmtune};

/// Whether this machine can run these tests at all (QEMU, CPUs 0 and 1); a named skip if not.
fn machine_ok() -> bool {
    let test = testkit::current_test();
    if testkit::which("qemu-system-x86_64").is_none() {
        testkit::skip(
            &test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
        return false;
    }
    let online = cpu_list(&read("/sys/devices/system/cpu/online"));
    if !(online.contains(&0) && online.contains(&1)) {
        testkit::skip(
            &test,
            "the test plans pin to CPUs 0 and 1; CPU 1 is not online",
        );
        return false;
    }
    true
}

/// Whether the test may change host state (root); a named skip saying what needs it if not.
fn root_ok(what: &str) -> bool {
    if testkit::is_root() {
        return true;
    }
    testkit::skip(&testkit::current_test(), format!("needs root: {what}"));
    false
}

/// `0-2,5` → {0, 1, 2, 5}; unparseable parts are ignored.
fn cpu_list(s: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a..=b);
        }
    }
    out
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("running vmtune")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "vmtune failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(p: impl AsRef<Path>) -> String {
    testkit::read_value(p)
}

/// A QEMU with 2 vCPUs, paused before any guest code (-S), no devices, QMP on a socket and
/// named threads. Killed on drop.
struct Qemu {
    child: Child,
    qmp: PathBuf,
    _dir: tempfile::TempDir,
}

impl Qemu {
    fn start() -> Qemu {
        let dir = tempfile::tempdir().unwrap();
        let qmp = dir.path().join("qmp.sock");
        let child = Command::new("qemu-system-x86_64")
            .args([
                "-accel",
                "tcg,thread=multi",
                "-smp",
                "2",
                "-m",
                "64",
                "-nodefaults",
                "-display",
                "none",
                "-S",
            ])
            .args(["-name", "vmtune-test,debug-threads=on"])
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 must be installed (Debian package qemu-system-x86)");
        let q = Qemu {
            child,
            qmp,
            _dir: dir,
        };
        let start = Instant::now();
        while !(q.qmp.exists()
            && q.threads()
                .iter()
                .filter(|(_, c)| c.starts_with("CPU "))
                .count()
                == 2)
        {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "QEMU did not come up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        q
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// (tid, comm) of every thread.
    fn threads(&self) -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .map(|t: u32| (t, read(format!("/proc/{}/task/{t}/comm", self.pid()))))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// tid → Cpus_allowed_list.
    fn affinities(&self) -> BTreeMap<u32, String> {
        self.threads()
            .into_iter()
            .map(|(t, _)| (t, cpus_allowed(self.pid(), t)))
            .collect()
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cpus_allowed(pid: u32, tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// Runs `vmtune restore` on drop, so a failing test leaves the host as it found it.
struct RestoreGuard(PathBuf);

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = vmtune()
                .arg("restore")
                .arg("--journal")
                .arg(&self.0)
                .output();
        }
    }
}

/// A plan for this 2-CPU machine written by hand: vCPUs on CPU 1, emulator and host on CPU 0.
fn plan_json(pages: u64) -> String {
    serde_json::json!({
        "request": {"name": "t", "vcpus": 2, "memory_bytes": 67108864u64, "devices": [], "profile": "gaming",
                    "os": "linux", "hugepages": "2M", "host_cpus": null},
        "host_source": "hand-written for the 2-CPU development machine",
        "vcpus": [{"vcpu": 0, "cpu": 1}, {"vcpu": 1, "cpu": 1}],
        "emulator_cpus": [0], "iothread_cpus": [], "host_cpus": [0],
        "guest_topology": {"sockets": 1, "dies": 1, "cores": 2, "threads": 1},
        "guest_numa": [],
        "memory": {"host_nodes": [0], "hugepage_size_kb": 2048, "pages": pages, "pages_per_node": [pages]},
        "devices": [],
        "irq": {"vfio_cpus": [1], "host_cpus": [0]},
        "cpu_features": {"hyperv": [], "invtsc": false, "hide_hypervisor": false, "kvm_hidden": false},
        "rationale": [], "warnings": []
    })
    .to_string()
}

fn write_plan(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("plan.json");
    std::fs::write(&p, text).unwrap();
    p
}

fn irq_numbers() -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/proc/irq")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    v
}

/// Interrupt totals per IRQ number from /proc/interrupts.
fn irq_counts() -> BTreeMap<u32, u64> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let ncpu = text
        .lines()
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (label, rest) = l.split_once(':')?;
            let n: u32 = label.trim().parse().ok()?;
            let total = rest
                .split_whitespace()
                .take(ncpu)
                .filter_map(|t| t.parse::<u64>().ok())
                .sum();
            Some((n, total))
        })
        .collect()
}

/// Every value vmtune may change, except the shared hugepage pool (see the module comment).
/// Effective IRQ affinity is the kernel's choice within the mask (and moves lazily, at the
/// next interrupt), so it is not part of the snapshot; tests check it against the mask.
fn snapshot(qemu: Option<&Qemu>) -> Snapshot {
    let mut m = Snapshot::new();
    for n in irq_numbers() {
        m.file(format!("/proc/irq/{n}/smp_affinity_list"));
    }
    m.file("/proc/irq/default_smp_affinity");
    m.file("/sys/devices/virtual/workqueue/cpumask");
    for root in ["/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/unified"] {
        if let Ok(rd) = std::fs::read_dir(root) {
            let mut dirs: Vec<String> = rd
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect();
            dirs.sort();
            m.insert(format!("cgroup {root} children"), dirs.join(","));
        }
    }
    m.file("/sys/fs/cgroup/cpuset/cpuset.cpus");
    if let Some(q) = qemu {
        for (t, c) in q.affinities() {
            m.insert(format!("qemu thread {t}"), c);
            m.insert(format!("qemu thread {t} sched"), sched_of(q.pid(), t));
        }
    }
    // every task's cpuset and affinity, keyed by tid and start time so that reused ids and
    // tasks that came or went in between are told apart
    for pid in std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for tid in rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
            let stat = read(format!("/proc/{pid}/task/{tid}/stat"));
            let start = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().nth(19))
                .unwrap_or("?")
                .to_string();
            let cs = read(format!("/proc/{pid}/task/{tid}/cpuset"));
            let cpus = cpus_allowed(pid, tid);
            if cs.starts_with('<') || cpus.is_empty() {
                continue;
            }
            m.insert(
                format!("task {tid}@{start}"),
                format!("cpuset {cs} cpus {cpus}"),
            );
        }
    }
    m
}

/// Compare snapshots: every key exactly, except that tasks and IRQ vectors may come and go
/// on a live machine (where both sides have them, they must agree).
fn assert_same(before: &Snapshot, after: &Snapshot, when: &str) {
    before.assert_same(
        after,
        |k| k.starts_with("task ") || k.starts_with("/proc/irq/") && !k.contains("default"),
        when,
    );
}

/// The hugepage steps of a restore report: each must have read back, right after writing,
/// the value it restored.
fn check_hugepage_restore(r: &Value) {
    for s in r["steps"].as_array().unwrap() {
        if s["actuator"] == "hugepages" && s["result"] == "restored" {
            assert_eq!(
                s["observed"], s["new"],
                "the pool read back right after restoring it: {s}"
            );
        }
    }
}

/// The records of a journal (JSON lines after the header).
fn journal_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The (intended record, outcome record) of a journal's hugepage step, if it has one.
fn journal_hugepage_step(path: &Path) -> Option<(Value, Option<Value>)> {
    let recs = journal_records(path);
    let intended = recs
        .iter()
        .find(|r| r["state"] == "intended" && r["target"]["actuator"] == "hugepages")?
        .clone();
    let outcome = recs
        .iter()
        .rfind(|r| r["step"] == intended["step"] && r["state"] != "intended")
        .cloned();
    Some((intended, outcome))
}

fn apply_json(plan: &Path, journal: &Path, extra: &[&str]) -> Value {
    let out = ok(&run(vmtune()
        .arg("apply")
        .arg(plan)
        .arg("--journal")
        .arg(journal)
        .args(extra)
        .arg("--json")));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn pins_every_qemu_thread_over_qmp_and_restores() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let before = q.affinities();
    let qmp = q.qmp.display().to_string();
    let rep = apply_json(&plan, &journal, &["--qmp", &qmp, "--only", "threads"]);
    assert_eq!(rep["qemu_pid"].as_u64(), Some(q.pid() as u64));
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        q.threads().len(),
        "one step per QEMU thread: {rep:#}"
    );
    for (tid, comm) in q.threads() {
        let want = if comm.starts_with("CPU ") { "1" } else { "0" };
        assert_eq!(cpus_allowed(q.pid(), tid), want, "thread {tid} {comm:?}");
    }
    let r = restore(&journal);
    assert_eq!(r["failed"], 0);
    assert!(!journal.exists(), "a restored journal is archived");
    assert!(PathBuf::from(format!("{}.restored", journal.display())).exists());
    assert_eq!(q.affinities(), before);
    // restore is idempotent
    let again = restore(&journal);
    assert_eq!(again["steps"].as_array().unwrap().len(), 0);
}

#[test]
fn pins_by_pid_from_thread_names() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let before = q.affinities();
    let pid = q.pid().to_string();
    apply_json(&plan, &journal, &["--pid", &pid, "--only", "threads"]);
    let vcpus: Vec<u32> = q
        .threads()
        .into_iter()
        .filter(|(_, c)| c.starts_with("CPU "))
        .map(|(t, _)| t)
        .collect();
    assert_eq!(vcpus.len(), 2);
    for (tid, _) in q.threads() {
        let want = if vcpus.contains(&tid) { "1" } else { "0" };
        assert_eq!(cpus_allowed(q.pid(), tid), want);
    }
    restore(&journal);
    assert_eq!(q.affinities(), before);
}

/// The request-queue IRQ of the virtio-rng device that backs /dev/hwrng, if that is the machine's RNG:
/// reading /dev/hwrng then makes it fire.
fn virtio_rng_irq() -> Option<u32> {
    if !read("/sys/class/misc/hw_random/rng_current").starts_with("virtio_rng") {
        return None;
    }
    let dev = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_rng")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("virtio"))?;
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    text.lines().find_map(|l| {
        let (n, rest) = l.split_once(':')?;
        rest.split_whitespace()
            .any(|w| w.starts_with(&format!("{dev}-")) && !w.ends_with("-config"))
            .then(|| n.trim().parse().ok())
            .flatten()
    })
}

/// Read /dev/hwrng a few times: with virtio-rng, each read is a request and an interrupt.
fn fire_hwrng() {
    if let Ok(mut f) = std::fs::File::open("/dev/hwrng") {
        let mut buf = [0u8; 64];
        for _ in 0..8 {
            let _ = std::io::Read::read(&mut f, &mut buf);
        }
    }
}

#[test]
fn routes_the_machines_irqs_and_restores_them() {
    if !machine_ok() || !root_ok("it writes /proc/irq/*/smp_affinity_list") {
        return;
    }
    let _host = testkit::host_lock();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let before = snapshot(None);
    let rep = apply_json(&plan, &journal, &["--only", "irqs"]);
    let counts0 = irq_counts();
    let steps = rep["steps"].as_array().unwrap();
    let mut moved = Vec::new();
    for s in steps.iter().filter(|s| s["actuator"] == "irq") {
        let n: u32 = s["target"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        match s["result"].as_str().unwrap() {
            "done" => {
                assert_eq!(
                    read(format!("/proc/irq/{n}/smp_affinity_list")),
                    "0",
                    "IRQ {n}"
                );
                moved.push(n);
            }
            // managed IRQs refuse (EIO/EPERM): reported, not fatal
            "skipped" => assert!(s["note"].as_str().unwrap().contains("refused"), "{s}"),
            other => panic!("IRQ {n}: {other}"),
        }
    }
    assert!(!moved.is_empty(), "no movable IRQ was moved: {rep:#}");
    // x86 moves an MSI vector at its next interrupt: where two or more arrived since the
    // move, the effective affinity must be inside the new mask. The virtio-rng IRQ, where
    // the machine has one, is made to fire, so the check cannot pass vacuously there.
    let rng = virtio_rng_irq().filter(|n| moved.contains(n));
    fire_hwrng();
    std::thread::sleep(Duration::from_millis(100));
    let counts1 = irq_counts();
    let mut checked = Vec::new();
    for n in &moved {
        if counts1.get(n).unwrap_or(&0) >= &(counts0.get(n).unwrap_or(&0) + 2) {
            assert_eq!(
                read(format!("/proc/irq/{n}/effective_affinity_list")),
                "0",
                "IRQ {n} effective"
            );
            checked.push(*n);
        }
    }
    eprintln!("effective affinity checked on IRQs with traffic: {checked:?}");
    if let Some(n) = rng {
        assert!(
            checked.contains(&n),
            "the virtio-rng IRQ {n} was moved and fired, but its effective affinity was not checked"
        );
    }
    assert_eq!(
        read("/proc/irq/default_smp_affinity").trim_start_matches('0'),
        "1"
    );
    let r = restore(&journal);
    assert_eq!(r["failed"], 0, "{r:#}");
    assert_same(&before, &snapshot(None), "after restore");
    fire_hwrng();
    for n in &moved {
        let mask = cpu_list(&read(format!("/proc/irq/{n}/smp_affinity_list")));
        let eff = cpu_list(&read(format!("/proc/irq/{n}/effective_affinity_list")));
        assert!(
            eff.is_subset(&mask),
            "IRQ {n}: effective {eff:?} outside {mask:?}"
        );
    }
}

/// 2 MiB pages in node 0's memory: more than its pool can ever have free.
fn node0_pages() -> u64 {
    let meminfo = read("/sys/devices/system/node/node0/meminfo");
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.split("MemTotal:").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("node0 MemTotal");
    kb / 2048
}

/// `previous -> new` of every step, in the text report.
fn arrows(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.trim_start().starts_with("- planned"))
        .filter_map(|l| {
            let (_, vals) = l.rsplit_once(": ")?;
            let (a, b) = vals.split_once(" -> ")?;
            Some((a.trim().to_string(), b.trim().to_string()))
        })
        .collect()
}

#[test]
fn dry_run_lists_every_change_and_changes_nothing() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    // a VM as large as node 0: no pool has that many pages free, so whatever this host has
    // reserved (none, 600, 8192 …), the dry run plans a hugepage step
    let huge = node0_pages() + 1;
    let plan = write_plan(dir.path(), &plan_json(huge));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let before = snapshot(Some(&q));
    let qmp = q.qmp.display().to_string();
    let rep = apply_json(&plan, &journal, &["--qmp", &qmp, "--dry-run"]);
    assert_same(&before, &snapshot(Some(&q)), "after --dry-run");
    assert!(!journal.exists(), "a dry run writes no journal");
    let steps = rep["steps"].as_array().unwrap();
    let kinds: Vec<&str> = steps
        .iter()
        .map(|s| s["actuator"].as_str().unwrap())
        .collect();
    // in order: threads, IRQs, masks, shielding; no pool change for a running QEMU (its guest
    // RAM was allocated when it started), a note on what it holds instead
    let first = |k: &str| {
        kinds
            .iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("no {k} step: {kinds:?}"))
    };
    assert!(!kinds.contains(&"hugepages"), "{kinds:?}");
    assert!(first("thread") < first("irq"));
    assert!(first("irq") < first("cgroup_tasks"));
    assert!(steps.iter().all(|s| s["result"] == "planned"));
    let running = format!("hugepages: QEMU {} is running", q.child.id());
    assert!(
        rep["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with(&running)),
        "{rep:#}"
    );
    // before a VM starts (no QEMU given), the pages are reserved
    let rep = apply_json(&plan, &journal, &["--only", "hugepages", "--dry-run"]);
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{rep:#}");
    // the step asks for exactly the pages missing from what the engine read
    let h = &steps[0];
    assert_eq!(h["actuator"], "hugepages");
    let (prev, new): (u64, u64) = (
        h["previous"].as_str().unwrap().parse().unwrap(),
        h["new"].as_str().unwrap().parse().unwrap(),
    );
    assert!(new > prev && new - prev <= huge, "{h}");

    // a small VM: the decision follows the pool the engine read, which the test cannot fix
    // (other processes may change it meanwhile): a step for the missing pages, or a note
    // naming the free pages it found
    let small = write_plan(dir.path(), &plan_json(4));
    let rep = apply_json(&small, &journal, &["--only", "hugepages", "--dry-run"]);
    let step = rep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["actuator"] == "hugepages");
    let notes: Vec<&str> = rep["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let found_free = notes.iter().find_map(|n| {
        n.strip_prefix("node 0: ")?
            .strip_suffix(" free 2048 kB pages already, 4 needed")?
            .parse::<u64>()
            .ok()
    });
    match (step, found_free) {
        (Some(s), None) => {
            let (prev, new): (u64, u64) = (
                s["previous"].as_str().unwrap().parse().unwrap(),
                s["new"].as_str().unwrap().parse().unwrap(),
            );
            assert!((1..=4).contains(&(new - prev)), "{s}");
        }
        (None, Some(free)) => assert!(free >= 4, "{notes:?}"),
        other => panic!("a step and an enough-free note, or neither: {other:?} {rep:#}"),
    }

    let text = ok(&run(vmtune()
        .arg("apply")
        .arg(&plan)
        .arg("--qmp")
        .arg(&qmp)
        .arg("--journal")
        .arg(&journal)
        .arg("--dry-run")));
    assert!(text.contains("would make"), "{text}");
    assert!(text.contains("-> 1"), "{text}");
    // one format per value: both sides of every change are spelled alike (masks in the
    // kernel's word layout, CPU lists as lists)
    let pairs = arrows(&text);
    assert!(pairs.len() >= 4, "{text}");
    let is_mask = |v: &str| v.chars().all(|c| c.is_ascii_hexdigit() || c == ',');
    for l in text
        .lines()
        .filter(|l| l.contains("default IRQ affinity") || l.contains("workqueue cpumask"))
    {
        let (_, vals) = l.rsplit_once(": ").unwrap();
        let (a, b) = vals.split_once(" -> ").unwrap();
        assert!(is_mask(a) && is_mask(b), "{l}");
        let words = |v: &str| v.split(',').map(str::len).collect::<Vec<_>>();
        assert_eq!(words(a), words(b), "mask spelled two ways: {l}");
    }
}

#[test]
fn refuses_bad_plans_and_changes_nothing() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let qmp = q.qmp.display().to_string();
    let before = snapshot(Some(&q));
    let base: Value = serde_json::from_str(&plan_json(4)).unwrap();
    let cases: Vec<(&str, Value)> = vec![
        ("no CPU", {
            let mut p = base.clone();
            p["host_cpus"] = serde_json::json!([]);
            p
        }),
        ("CPU 7", {
            let mut p = base.clone();
            p["vcpus"][1]["cpu"] = 7.into();
            p
        }),
        ("vCPU 2", {
            let mut p = base.clone();
            p["vcpus"] =
                serde_json::json!([{"vcpu":0,"cpu":1},{"vcpu":1,"cpu":1},{"vcpu":2,"cpu":1}]);
            p
        }),
        ("does not pin", {
            let mut p = base.clone();
            p["vcpus"] = serde_json::json!([{"vcpu":0,"cpu":1}]);
            p
        }),
        ("does not exist", {
            let mut p = base.clone();
            p["devices"] = serde_json::json!([{"bdf":"0000:99:00.0","kind":"gpu","numa":null,"iommu_group":null}]);
            p
        }),
        ("node 5", {
            let mut p = base.clone();
            p["memory"]["host_nodes"] = serde_json::json!([5]);
            p
        }),
    ];
    for (want, p) in cases {
        let plan = write_plan(dir.path(), &p.to_string());
        let out = run(vmtune()
            .arg("apply")
            .arg(&plan)
            .arg("--qmp")
            .arg(&qmp)
            .arg("--journal")
            .arg(&journal));
        assert_eq!(out.status.code(), Some(2), "{want}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{want}: {err}"
        );
        assert!(!journal.exists(), "{want}: a journal was written");
    }
    assert_same(&before, &snapshot(Some(&q)), "after refused plans");
    // not a plan at all
    let bad = write_plan(dir.path(), "{\"vcpus\": 3}");
    let out = run(vmtune()
        .arg("apply")
        .arg(&bad)
        .arg("--qmp")
        .arg(&qmp)
        .arg("--journal")
        .arg(&journal));
    assert_eq!(out.status.code(), Some(2));
    // QMP socket that is not there
    let plan = write_plan(dir.path(), &plan_json(0));
    let out = run(vmtune()
        .arg("apply")
        .arg(&plan)
        .arg("--qmp")
        .arg(dir.path().join("nope.sock"))
        .arg("--journal")
        .arg(&journal));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("QMP"));
}

#[test]
fn second_apply_is_refused_and_the_lock_excludes_others() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let qmp = q.qmp.display().to_string();
    apply_json(&plan, &journal, &["--qmp", &qmp, "--only", "threads"]);
    let out = run(vmtune()
        .arg("apply")
        .arg(&plan)
        .arg("--qmp")
        .arg(&qmp)
        .arg("--journal")
        .arg(&journal)
        .args(["--only", "threads"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("vmtune restore"));
    restore(&journal);
    // hold the lock with flock(1) and watch a restore give up
    let lock = dir.path().join("lock");
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .expect("flock(1) from util-linux");
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let out = run(vmtune()
        .arg("apply")
        .arg(&plan)
        .arg("--qmp")
        .arg(&qmp)
        .arg("--journal")
        .arg(&journal)
        .args(["--only", "threads"]));
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("locked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() >= Duration::from_secs(5));
    assert!(!journal.exists());
}

#[test]
fn sigkill_at_every_step_then_restore_gives_back_the_exact_host() {
    if !machine_ok() || !root_ok("it changes hugepages, IRQ affinity, masks and cpusets") {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    // with a 300 µs EEVDF slice for the vCPU threads (where the kernel has per-task slices)
    let slices = std::fs::read_to_string("/proc/self/sched").is_ok_and(|t| t.contains("se.slice"));
    let mut plan_v: Value = serde_json::from_str(&plan_json(8)).unwrap();
    if slices {
        plan_v["vcpu_sched"] = serde_json::json!({"slice_us": 300});
    }
    let plan = write_plan(dir.path(), &plan_v.to_string());
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let qmp = q.qmp.display().to_string();
    // Crash after step 1, 2, … until an apply has no step left to crash after: first the
    // reservation for a VM about to start (no QEMU: a hugepage step, if the free pages the
    // engine reads — which other processes may change meanwhile — are short), then the apply
    // to the running QEMU.
    let prepare = ["--only", "hugepages"];
    let running = ["--qmp", qmp.as_str()];
    for args in [&prepare, &running] {
        let mut k = 1;
        let full = loop {
            let before = snapshot(Some(&q));
            let out = run(vmtune()
                .arg("apply")
                .arg(&plan)
                .args(args)
                .arg("--journal")
                .arg(&journal)
                .arg("--json")
                .env("VMTUNE_CRASH_AFTER_STEP", k.to_string()));
            if out.status.success() {
                // fewer than k steps: this was a complete apply
                break (
                    before,
                    serde_json::from_slice::<Value>(&out.stdout).unwrap(),
                );
            }
            {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(
                    out.status.signal(),
                    Some(9),
                    "step {k}: apply should have been killed: {out:?}"
                );
            }
            assert!(journal.exists(), "step {k}: no journal after the crash");
            let last = journal_records(&journal)
                .into_iter()
                .rfind(|r| r["state"] == "intended")
                .expect("an intended record");
            assert_eq!(
                last["step"], k,
                "step {k}: the journal ends with the crashed step"
            );
            if last["target"]["actuator"] == "hugepages" {
                // the shared pool is not in the snapshot; the journal says what was written
                assert!(
                    last["new"].as_str().unwrap().parse::<u64>().unwrap()
                        > last["previous"].as_str().unwrap().parse::<u64>().unwrap(),
                    "{last}"
                );
            } else {
                assert_ne!(
                    before,
                    snapshot(Some(&q)),
                    "step {k}: the crash left no change to undo"
                );
            }
            let r = restore(&journal);
            assert_eq!(r["failed"], 0, "step {k}: {r:#}");
            assert_eq!(
                r["steps"].as_array().unwrap().len(),
                k,
                "step {k}: restore walks k steps"
            );
            check_hugepage_restore(&r);
            assert_same(
                &before,
                &snapshot(Some(&q)),
                &format!("crash after step {k}, then restore"),
            );
            k += 1;
            assert!(k < 500, "apply never completed");
        };
        let (before, rep) = full;
        let steps = rep["steps"].as_array().unwrap();
        if args == &prepare {
            // a reservation, or a note that enough pages were free
            assert!(steps.len() <= 1 && k <= 2, "{rep:#}");
            let r = restore(&journal);
            assert_eq!(r["failed"], 0, "{r:#}");
            check_hugepage_restore(&r);
            assert_same(&before, &snapshot(Some(&q)), "after prepare + restore");
            continue;
        }
        assert!(
            k > 10,
            "expected threads, IRQs, masks and shielding: {k} crash points"
        );
        assert!(steps
            .iter()
            .all(|s| s["result"] == "done" || s["result"] == "skipped"));
        assert_eq!(
            read("/proc/self/cpuset"),
            "/vmtune-host",
            "this test process is shielded onto the host CPUs"
        );
        if slices {
            let vcpus: Vec<u32> = q
                .threads()
                .into_iter()
                .filter(|(_, c)| c.starts_with("CPU "))
                .map(|(t, _)| t)
                .collect();
            assert_eq!(vcpus.len(), 2);
            for t in vcpus {
                assert!(
                    sched_of(q.pid(), t).ends_with("se.slice=300000"),
                    "vCPU thread {t}: {}",
                    sched_of(q.pid(), t)
                );
            }
            assert_eq!(
                steps
                    .iter()
                    .filter(|s| s["actuator"] == "thread_sched")
                    .count(),
                2,
                "{rep:#}"
            );
            assert!(
                rep["notes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n.as_str().unwrap().contains("vCPU slice 300 µs")),
                "{rep:#}"
            );
        } else {
            testkit::skip(
                &testkit::current_test(),
                "this kernel has no per-task EEVDF slices: the slice steps were not exercised",
            );
        }
        // the hugepages: the QEMU runs, its guest RAM allocated; no pool is changed
        assert!(
            steps.iter().all(|s| s["actuator"] != "hugepages"),
            "{rep:#}"
        );
        assert!(
            rep["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().contains("pools left alone")),
            "{rep:#}"
        );
        let r = restore(&journal);
        assert_eq!(r["failed"], 0, "{r:#}");
        check_hugepage_restore(&r);
        assert_same(&before, &snapshot(Some(&q)), "after apply + restore");
    }
}

const DOMAIN_XML: &str = r#"<domain type='kvm' id='3'>
  <name>NAME</name>
  <uuid>4dea22b3-1d52-d8f3-2516-782e98ab3fa0</uuid>
  <memory unit='KiB'>65536</memory>
  <currentMemory unit='KiB'>65536</currentMemory>
  <memoryBacking><hugepages><page size='2048' unit='KiB'/></hugepages></memoryBacking>
  <vcpu placement='static'>2</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='1'/>
    <vcpupin vcpu='1' cpuset='1'/>
    <emulatorpin cpuset='0'/>
  </cputune>
  METADATA
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
"#;

fn hook(dir: &Path, domain: &str, op: &str, sub: &str, xml: &str) -> (Output, Duration) {
    let t = Instant::now();
    let mut child = vmtune()
        .args(["hook", domain, op, sub, "-"])
        .arg("--plan-dir")
        .arg(dir.join("plans"))
        .arg("--journal-dir")
        .arg(dir.join("run"))
        .arg("--libvirt-run-dir")
        .arg(dir.join("libvirt"))
        .args(["--timeout-s", "10", "--no-watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (out, t.elapsed())
}

#[test]
fn libvirt_hook_prepare_started_release() {
    if !machine_ok() || !root_ok("the hook reserves hugepages and routes IRQs") {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    for d in ["plans", "run", "libvirt"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let journal = dir.path().join("run/win10.journal");
    let _r = RestoreGuard(journal.clone());
    std::fs::write(dir.path().join("plans/win10.json"), plan_json(8)).unwrap();
    std::fs::write(dir.path().join("libvirt/win10.pid"), q.pid().to_string()).unwrap();
    let xml = DOMAIN_XML.replace("NAME", "win10").replace("METADATA", "");
    let before = snapshot(Some(&q));

    let (out, t) = hook(dir.path(), "win10", "prepare", "begin", &xml);
    assert!(
        out.status.success() && t < Duration::from_secs(10),
        "{out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // prepare reserved the plan's 8 pages (vmtune's read-back right after writing the pool,
    // in the journal), or found them free already (a note)
    match journal_hugepage_step(&journal) {
        Some((_, Some(outcome))) => {
            assert_eq!(outcome["state"], "done", "{outcome}");
            assert!(
                outcome["note"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("node 0: 8 of 8 pages free"),
                "{outcome}"
            );
        }
        Some((intended, None)) => panic!("no outcome for {intended}"),
        None => assert!(stderr.contains("pages already, 8 needed"), "{stderr}"),
    }
    assert_eq!(
        q.affinities(),
        before
            .iter()
            .filter(|(k, _)| k.starts_with("qemu thread ") && !k.ends_with(" sched"))
            .map(|(k, v)| (k[12..].parse().unwrap(), v.to_string()))
            .collect(),
        "prepare pins nothing"
    );

    let (out, t) = hook(dir.path(), "win10", "started", "begin", &xml);
    assert!(
        out.status.success() && t < Duration::from_secs(10),
        "{out:?}"
    );
    for (tid, comm) in q.threads() {
        let want = if comm.starts_with("CPU ") { "1" } else { "0" };
        assert_eq!(
            cpus_allowed(q.pid(), tid),
            want,
            "thread {tid} {comm}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(std::fs::read_to_string(dir.path().join("run/win10.log"))
        .unwrap()
        .contains("changes made"));

    let (out, t) = hook(dir.path(), "win10", "release", "end", &xml);
    assert!(
        out.status.success() && t < Duration::from_secs(10),
        "{out:?}"
    );
    assert!(!journal.exists());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(" steps undone, 0 failed"), "{stderr}");
    assert_same(
        &before,
        &snapshot(Some(&q)),
        "after prepare/started/release",
    );

    // ignored operations, and release with nothing to restore
    for (op, sub) in [
        ("start", "begin"),
        ("stopped", "end"),
        ("migrate", "begin"),
        ("release", "end"),
    ] {
        let (out, t) = hook(dir.path(), "win10", op, sub, &xml);
        assert!(
            out.status.success() && t < Duration::from_secs(3),
            "{op} {sub}: {out:?}"
        );
    }
}

#[test]
fn libvirt_hook_plan_in_domain_metadata() {
    if !machine_ok() || !root_ok("the hook routes IRQs and shields CPUs") {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    for d in ["plans", "run", "libvirt"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let _r = RestoreGuard(dir.path().join("run/gpuvm.journal"));
    std::fs::write(dir.path().join("libvirt/gpuvm.pid"), q.pid().to_string()).unwrap();
    let meta = format!("<metadata><vmtune:plan xmlns:vmtune='https://vmtune.dev/xmlns/plan/1'>{}</vmtune:plan></metadata>", plan_json(0));
    let xml = DOMAIN_XML
        .replace("NAME", "gpuvm")
        .replace("METADATA", &meta);
    let before = q.affinities();
    let (out, _) = hook(dir.path(), "gpuvm", "started", "begin", &xml);
    assert!(out.status.success());
    let vcpus = q
        .threads()
        .into_iter()
        .filter(|(_, c)| c.starts_with("CPU "))
        .count();
    assert_eq!(vcpus, 2);
    for (tid, comm) in q.threads() {
        assert_eq!(
            cpus_allowed(q.pid(), tid),
            if comm.starts_with("CPU ") { "1" } else { "0" }
        );
    }
    let (out, _) = hook(dir.path(), "gpuvm", "release", "end", &xml);
    assert!(out.status.success());
    assert_eq!(q.affinities(), before);
}

#[test]
fn libvirt_hook_never_blocks_or_fails_a_vm_start() {
    if !machine_ok() {
        return;
    }
    let _host = testkit::host_lock();
    let dir = tempfile::tempdir().unwrap();
    for d in ["plans", "run", "libvirt"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let before = snapshot(None);
    let xml = DOMAIN_XML.replace("NAME", "broken").replace("METADATA", "");
    // no plan at all
    let (out, t) = hook(dir.path(), "broken", "started", "begin", &xml);
    assert!(out.status.success() && t < Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no vmtune plan"));
    // a plan that is not JSON
    std::fs::write(dir.path().join("plans/broken.json"), "not json").unwrap();
    let (out, t) = hook(dir.path(), "broken", "prepare", "begin", &xml);
    assert!(out.status.success() && t < Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a vmtune plan"));
    // a good plan but no QEMU pid file / a pid that is not QEMU
    std::fs::write(dir.path().join("plans/broken.json"), plan_json(0)).unwrap();
    let (out, t) = hook(dir.path(), "broken", "started", "begin", &xml);
    assert!(out.status.success() && t < Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pid"));
    std::fs::write(dir.path().join("libvirt/broken.pid"), "1").unwrap();
    let (out, t) = hook(dir.path(), "broken", "started", "begin", &xml);
    assert!(out.status.success() && t < Duration::from_secs(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("apply failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // garbage on stdin, a hostile domain name
    let (out, _) = hook(dir.path(), "../../etc", "prepare", "begin", "<<<");
    assert!(out.status.success());
    let (out, _) = hook(dir.path(), "broken", "started", "begin", "<<<");
    assert!(out.status.success());
    // the lock held by someone else: the hook gives up within its time limit, exit 0
    let lock = dir.path().join("run/lock");
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(dir.path().join("libvirt/broken.pid"), "1").unwrap();
    let (out, t) = hook(dir.path(), "broken", "prepare", "begin", &xml);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(
        out.status.success() && t < Duration::from_secs(10),
        "{out:?}"
    );
    assert_same(&before, &snapshot(None), "after failing hooks");
}

#[test]
fn watch_routes_irqs_that_appear_later_and_stops_with_qemu() {
    if !machine_ok() || !root_ok("it writes /proc/irq/*/smp_affinity_list") {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let before = snapshot(None);
    let mut watcher = vmtune()
        .arg("apply")
        .arg(&plan)
        .arg("--pid")
        .arg(q.pid().to_string())
        .arg("--journal")
        .arg(&journal)
        .args(["--only", "irqs", "--watch", "--poll-ms", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // a movable IRQ the first pass routed to CPU 0
    let t = Instant::now();
    let irq = loop {
        let found = irq_numbers().into_iter().find(|n| {
            read(format!("/proc/irq/{n}/smp_affinity_list")) == "0"
                && std::fs::read_dir(format!("/proc/irq/{n}"))
                    .unwrap()
                    .any(|e| {
                        e.unwrap()
                            .file_name()
                            .to_string_lossy()
                            .starts_with("virtio")
                    })
        });
        if let Some(n) = found {
            break n;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the watcher's first pass routed nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    // something puts it back on every CPU (a new vector, irqbalance): the watcher re-routes it
    std::fs::write(format!("/proc/irq/{irq}/smp_affinity_list"), "0-1").unwrap();
    let t = Instant::now();
    while read(format!("/proc/irq/{irq}/smp_affinity_list")) != "0" {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "IRQ {irq} was not re-routed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // QEMU goes away: the watcher ends by itself
    drop(q);
    let t = Instant::now();
    loop {
        if let Some(st) = watcher.try_wait().unwrap() {
            assert!(st.success());
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "watcher still running after QEMU exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = watcher.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("watch ended: QEMU"), "{text}");
    let journal_text = std::fs::read_to_string(&journal).unwrap();
    let mentions = journal_text.matches(&format!("\"irq\":{irq},")).count();
    assert_eq!(
        mentions, 2,
        "IRQ {irq} journaled by the first pass and by the watcher"
    );
    let r = restore(&journal);
    assert_eq!(r["failed"], 0);
    assert_same(&before, &snapshot(None), "after watch + restore");
}

#[test]
fn restore_after_qemu_exited_skips_its_threads_and_says_so() {
    if !machine_ok() || !root_ok("it writes /proc/irq/*/smp_affinity_list") {
        return;
    }
    let _host = testkit::host_lock();
    let q = Qemu::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &plan_json(0));
    let journal = dir.path().join("journal");
    let _r = RestoreGuard(journal.clone());
    let qmp = q.qmp.display().to_string();
    let before = snapshot(None);
    apply_json(&plan, &journal, &["--qmp", &qmp, "--only", "threads,irqs"]);
    let nthreads = q.threads().len();
    drop(q);
    let r = restore(&journal);
    assert_eq!(r["failed"], 0, "{r:#}");
    let skipped: Vec<&Value> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["result"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), nthreads, "{r:#}");
    assert!(skipped
        .iter()
        .all(|s| s["note"].as_str().unwrap().contains("no longer exists")));
    assert_same(&before, &snapshot(None), "after restore without QEMU");
}

#[test]
fn restore_names_a_missing_journal() {
    // nothing on the host is read or changed: no lock, no root
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("nonexistent/j");
    for extra in [&[][..], &["--dry-run"][..], &["--json"][..]] {
        let out = run(vmtune().arg("restore").arg("--journal").arg(&j).args(extra));
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&j.display().to_string()) && err.contains("does not exist"),
            "{err}"
        );
    }
    // a journal restored before is kept as JOURNAL.restored: restoring again is harmless
    std::fs::create_dir_all(j.parent().unwrap()).unwrap();
    std::fs::write(dir.path().join("nonexistent/j.restored"), "").unwrap();
    let text = ok(&run(vmtune().arg("restore").arg("--journal").arg(&j)));
    assert!(text.contains("restored already"), "{text}");
}

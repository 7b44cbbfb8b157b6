//! Journals as an earlier release wrote them are read, restored and written back unchanged.
//!
//! `tests/data/e131ae1/*.journal` were written by vmtune at commit e131ae1 (the release before
//! the actuators moved into their own files) with [`write_fixtures`] below: the same calls the
//! engine, `irq balance`, `irq boost` and `bench matrix` make (intend, apply, verify, outcome),
//! on scratch trees under [`ROOT`]. Beside each journal, `NAME.expected` holds what that
//! release said about it: each step's actuator kind and description, and for the journals
//! whose steps touch only scratch files, its restore report and the files afterwards.
//!
//! Each test here takes the journal's exact bytes, checks that every line parses and
//! serializes back to the same bytes (what a restore or `--watch` appending to the journal
//! relies on), and that restoring it does and says what that release did.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apply::journal::{self, Header, Journal, Lock, Record, State};
use apply::step::{Actuator, IrqClass, MovedTask, PlannedStep, Target, ThreadCpus};

/// Where the fixtures' scratch trees live (their paths are in the journals).
const ROOT: &str = "/tmp/vmtune-e131ae1-journals";

/// The fixtures' tree is one fixed path: one test run at a time uses it.
fn lock() -> Lock {
    Lock::acquire(
        Path::new("/tmp/vmtune-e131ae1-journals.lock"),
        Duration::from_secs(600),
    )
    .expect("fixture lock")
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/e131ae1")
}

fn root(name: &str) -> PathBuf {
    Path::new(ROOT).join(name)
}

fn put(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().expect("a parent")).unwrap();
    std::fs::write(p, text).unwrap();
}

fn fresh(name: &str) -> PathBuf {
    let r = root(name);
    let _ = std::fs::remove_dir_all(&r);
    std::fs::create_dir_all(&r).unwrap();
    r
}

// ---------------------------------------------------------------------------------------------
// the scratch trees: as before the apply, and as the apply left them

const POOL: &str = "sys/devices/system/node/node0/hugepages/hugepages-2048kB";

/// A host's files before an apply of hugepages, IRQs, masks and a cgroup v1 cpuset.
fn host_before(r: &Path) {
    for (f, v) in [
        ("nr_hugepages", "0\n"),
        ("free_hugepages", "0\n"),
        ("resv_hugepages", "0\n"),
        ("surplus_hugepages", "0\n"),
    ] {
        put(&r.join(POOL).join(f), v);
    }
    for (irq, action, eff) in [
        (38, "vfio-msix[0](0000:01:00.0)", "3"),
        (39, "vfio-msix[1](0000:01:00.0)", "4"),
        (40, "nvme0q1", "5"),
    ] {
        let d = r.join(format!("proc/irq/{irq}"));
        std::fs::create_dir_all(d.join(action)).unwrap();
        put(&d.join("smp_affinity_list"), "0-7\n");
        put(&d.join("effective_affinity_list"), &format!("{eff}\n"));
    }
    put(&r.join("proc/irq/default_smp_affinity"), "ff\n");
    put(&r.join("sys/devices/virtual/workqueue/cpumask"), "ff\n");
    put(&r.join("cgv1/machine/cpuset.cpus"), "0-7\n");
}

/// What the apply recorded in `host.journal` left (the kernel's spelling where it rewrites).
fn host_after(r: &Path) {
    host_before(r);
    put(&r.join(POOL).join("nr_hugepages"), "512\n");
    for (irq, aff, eff) in [(38, "2-5", "2"), (39, "2-5", "4"), (40, "0-1,6-7", "0")] {
        let d = r.join(format!("proc/irq/{irq}"));
        put(&d.join("smp_affinity_list"), &format!("{aff}\n"));
        put(&d.join("effective_affinity_list"), &format!("{eff}\n"));
    }
    put(&r.join("proc/irq/default_smp_affinity"), "c3\n");
    put(&r.join("sys/devices/virtual/workqueue/cpumask"), "c3\n");
    put(&r.join("cgv1/machine/cpuset.cpus"), "2-5\n");
}

/// A task that cannot exist on a real host (ids above any `pid_max`).
const TASK: i32 = 2_100_000_100;

fn fake_task(proc_root: &Path) {
    let stat = |id: i32| {
        format!("{id} (sshd) S 1 {TASK} {TASK} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 777 0 0\n")
    };
    let status = format!("Name:\tsshd\nTgid:\t{TASK}\nCpus_allowed_list:\t0-7\n");
    let p = proc_root.join(TASK.to_string());
    put(&p.join("stat"), &stat(TASK));
    put(&p.join("status"), &status);
    put(&p.join("cgroup"), "0::/\n");
    for tid in [TASK, TASK + 1] {
        let t = p.join("task").join(tid.to_string());
        put(&t.join("stat"), &stat(tid));
        put(&t.join("status"), &status);
        put(&t.join("comm"), "sshd\n");
    }
}

/// A cgroup v2 hierarchy without the cpuset controller enabled, and one movable task.
fn v2_before(r: &Path) {
    put(&r.join("cgv2/cgroup.subtree_control"), "memory pids\n");
    put(&r.join("cgv2/cpuset.mems.effective"), "0-1\n");
    put(&r.join("cgv2/cgroup.procs"), "");
    fake_task(&r.join("proc"));
}

/// What the apply recorded in `shield_v2.journal` left; the cgroup's control files, which
/// cgroupfs removes with the directory, are left out (plain files would keep it from going).
fn v2_after(r: &Path) {
    v2_before(r);
    put(
        &r.join("cgv2/cgroup.subtree_control"),
        "cpuset memory pids\n",
    );
    std::fs::create_dir_all(r.join("cgv2/vmtune-host")).unwrap();
}

/// IRQ 41 as `irq balance` left it (the threads of `threads.journal` are long gone).
fn threads_after(r: &Path) {
    let d = r.join("proc/irq/41");
    std::fs::create_dir_all(d.join("nvme0q2")).unwrap();
    put(&d.join("smp_affinity_list"), "3\n");
}

/// Every file under `r`, with its contents, and every directory.
fn listing(r: &Path) -> String {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(rel + "/", String::new());
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut m = BTreeMap::new();
    walk(r, r, &mut m);
    m.into_iter()
        .map(|(k, v)| format!("  {k} {v:?}\n"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// what a release says about a journal

/// Each step's kind and description.
fn describe(journal: &Path) -> String {
    let (_, steps) = journal::read(journal).unwrap();
    let mut s = String::from("steps:\n");
    for st in &steps {
        let _ = writeln!(
            s,
            "  {} {} {:?} {:?}: {}",
            st.step,
            st.target.kind(),
            st.state,
            st.applied,
            st.target.describe()
        );
    }
    s
}

fn restore_text(journal: &Path, r: &Path) -> String {
    let rep = apply::restore(journal, Duration::from_secs(5)).unwrap();
    let mut s = format!("restore: failed {}\n", rep.failed);
    for st in &rep.steps {
        let _ = writeln!(
            s,
            "  {:?} {} {} {:?} -> {:?}: {:?} observed {:?} pages {:?}",
            st.step, st.actuator, st.result, st.previous, st.new, st.note, st.observed, st.pages
        );
    }
    for n in &rep.notes {
        let _ = writeln!(s, "  note {n}");
    }
    let _ = writeln!(s, "archived: {}", rep.archived_as.is_some());
    s + "files:\n" + &listing(r)
}

/// The steps as a dry-run restore lists them (what it reads now is left out: it asks
/// systemd and libvirt).
fn dry_run_text(journal: &Path) -> String {
    let rep = apply::restore_dry_run(journal).unwrap();
    let mut s = String::from("dry run:\n");
    for st in &rep.steps {
        let _ = writeln!(
            s,
            "  {:?} {} {} {:?} -> {:?}: {}",
            st.step, st.actuator, st.result, st.previous, st.new, st.target
        );
    }
    s
}

/// Every line of the journal parses and serializes back to its own bytes.
fn round_trip(name: &str, text: &str) {
    let mut lines = text.lines();
    let head = lines.next().expect("a header");
    let h: Header = serde_json::from_str(head).unwrap();
    assert_eq!(serde_json::to_string(&h).unwrap(), head, "{name}: header");
    for (i, line) in lines.enumerate() {
        let r: Record = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name} line {}: {e}: {line}", i + 2));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            line,
            "{name} line {}",
            i + 2
        );
    }
}

/// What this build says about the journal in `file`, fixture `name`: `after` sets up the tree
/// as its apply left it, `None` for a journal restored only as a dry run.
fn report(file: &Path, name: &str, after: Option<After>) -> String {
    let bytes = std::fs::read(file).unwrap();
    round_trip(name, std::str::from_utf8(&bytes).unwrap());
    let r = fresh(name);
    let j = r.join("run/journal");
    put(&j, "");
    std::fs::write(&j, &bytes).unwrap();
    let mut s = describe(&j);
    match after {
        Some(f) => {
            f(&r);
            s += &restore_text(&j, &r);
        }
        None => s += &dry_run_text(&j),
    }
    let _ = std::fs::remove_dir_all(&r);
    s
}

/// Sets up a fixture's tree as its apply left it.
type After = fn(&Path);

const FIXTURES: [(&str, Option<After>); 4] = [
    ("host", Some(host_after)),
    ("shield_v2", Some(v2_after)),
    ("threads", Some(threads_after)),
    ("services", None),
];

#[test]
fn journals_of_the_previous_release_restore_as_they_did() {
    let _l = lock();
    for (name, after) in FIXTURES {
        let want = std::fs::read_to_string(data().join(format!("{name}.expected"))).unwrap();
        let got = report(&data().join(format!("{name}.journal")), name, after);
        assert_eq!(got, want, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// how the fixtures were written

fn header(qemu_pid: Option<i32>) -> Header {
    Header {
        journal: "vmtune".into(),
        version: 1,
        created_unix: 1_732_190_000,
        apply_pid: 4242,
        qemu_pid,
    }
}

/// The engine's step loop (`run_steps`): intend, apply, verify, outcome. `between` runs after
/// a step's change and before its read-back (what the kernel does in between on a real
/// host). Stops without an outcome after step `crash_after`.
fn run(
    j: &mut Journal,
    steps: &[PlannedStep],
    between: impl Fn(usize),
    crash_after: Option<usize>,
) {
    for (i, s) in steps.iter().enumerate() {
        let n = j.intend(&s.target, &s.previous, &s.new).unwrap();
        let r = s.target.apply(&s.new);
        between(i);
        if crash_after == Some(i + 1) {
            return;
        }
        match r {
            Ok(apply::step::Outcome::Done(note)) => {
                let v = s.target.verify(&s.new).ok();
                let note = match (&v, note) {
                    (Some(v), n) if !v.ok => Some(format!(
                        "{}read back {}",
                        n.map(|n| n + "; ").unwrap_or_default(),
                        v.observed
                    )),
                    (_, n) => n,
                };
                let applied = match (&s.target, &v) {
                    (Target::Hugepages(_), Some(v)) => Some(v.observed.clone()),
                    _ => None,
                };
                j.outcome_applied(n, State::Done, note, applied).unwrap();
            }
            Ok(apply::step::Outcome::Skipped(why)) => {
                j.outcome(n, State::Skipped, Some(why)).unwrap()
            }
            Err(e) => j.outcome(n, State::Failed, Some(e.to_string())).unwrap(),
        }
    }
}

fn host_journal(r: &Path, j: &Path) {
    host_before(r);
    let pool = r.join(POOL);
    let mut steps = vec![PlannedStep::new(
        Target::Hugepages(apply::step::Hugepages {
            node: 0,
            size_kb: 2048,
            path: pool.join("nr_hugepages"),
            compact: r.join("proc/sys/vm/compact_memory"),
            asked: 512,
            reserved: Some(pool.join("resv_hugepages")),
            own_pages: true,
        }),
        "0",
        "512",
    )];
    let irqs: Vec<apply::irq::IrqInfo> = [
        (38, "vfio-msix[0](0000:01:00.0)", "3"),
        (39, "vfio-msix[1](0000:01:00.0)", "4"),
        (40, "nvme0q1", "5"),
    ]
    .into_iter()
    .map(|(n, a, e)| apply::irq::IrqInfo {
        number: n,
        actions: a.into(),
        affinity: Some("0-7".into()),
        effective: Some(e.into()),
    })
    .collect();
    let guest = topo::CpuSet::parse_list("2-5").unwrap();
    let host = topo::CpuSet::parse_list("0-1,6-7").unwrap();
    steps.extend(apply::irq::route(
        &irqs,
        &["01:00.0".to_string()],
        &guest,
        &host,
        &r.join("proc"),
    ));
    for (p, what) in [
        ("proc/irq/default_smp_affinity", "default IRQ affinity"),
        ("sys/devices/virtual/workqueue/cpumask", "workqueue cpumask"),
    ] {
        steps.push(PlannedStep::new(
            Target::MaskFile(apply::step::MaskFile {
                path: r.join(p),
                what: what.into(),
            }),
            "ff",
            "c3",
        ));
    }
    steps.push(PlannedStep::new(
        Target::CgroupFile(apply::step::CgroupFile {
            path: r.join("cgv1/machine/cpuset.cpus"),
            created: false,
        }),
        "0-7",
        "2-5",
    ));
    let mut jr = Journal::create(j, &header(Some(4100))).unwrap();
    let n = steps.len();
    run(&mut jr, &steps, |_| {}, Some(n));
}

fn shield_v2_journal(r: &Path, j: &Path) {
    v2_before(r);
    let root = r.join("cgv2");
    let backend = apply::shield::Backend::V2 { root: root.clone() };
    let host = topo::CpuSet::parse_list("0-1").unwrap();
    let (steps, _) =
        apply::shield::plan_steps(&backend, &host, &r.join("proc"), Some(4100)).unwrap();
    let dir = root.join(apply::shield::HOST_CGROUP);
    let mut jr = Journal::create(j, &header(Some(4100))).unwrap();
    run(
        &mut jr,
        &steps,
        |i| match steps[i].target.kind() {
            // what cgroupfs does
            "cgroup_controller" => put(&root.join("cgroup.subtree_control"), "cpuset memory pids"),
            "cgroup_dir" => {
                for f in ["cpuset.cpus", "cpuset.mems", "cgroup.procs"] {
                    put(&dir.join(f), "");
                }
            }
            _ => {}
        },
        None,
    );
}

fn threads_journal(r: &Path, j: &Path) {
    // a thread of this process stands in for a QEMU vCPU thread
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        tx.send(rustix::thread::gettid().as_raw_nonzero().get())
            .unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let pid = std::process::id() as i32;
    let proc_root = PathBuf::from("/proc");
    let start = apply::proc::start_time(&proc_root, pid, tid).unwrap();
    let cpus = apply::proc::thread_cpus(&proc_root, pid, tid).unwrap();
    let sched = apply::sched::get(tid, apply::sched::base_slice_ns()).unwrap();
    let nicer = apply::sched::SchedState {
        nice: sched.nice + 5,
        ..sched
    };
    let steps = vec![
        PlannedStep::new(
            Target::Thread(apply::step::Thread {
                pid,
                tid,
                start_time: start,
                role: "vcpu 0".into(),
                proc_root: proc_root.clone(),
            }),
            cpus,
            "0",
        ),
        PlannedStep::new(
            Target::ThreadSched(apply::step::ThreadSched {
                pid,
                tid,
                start_time: start,
                role: "vcpu 0".into(),
                proc_root: proc_root.clone(),
            }),
            sched.to_value(),
            nicer.to_value(),
        ),
    ];
    let mut jr = Journal::create(j, &header(Some(pid))).unwrap();
    run(&mut jr, &steps, |_| {}, None);
    // `irq boost`: journaled as raised, the change made by the agent
    let raised = apply::sched::SchedState {
        slice_ns: 100_000,
        custom_slice: true,
        ..sched
    };
    let boost = Target::ThreadSched(apply::step::ThreadSched {
        pid,
        tid,
        start_time: start,
        role: "vcpu 0 (irq boost)".into(),
        proc_root,
    });
    let n = jr
        .intend(&boost, &sched.to_value(), &raised.to_value())
        .unwrap();
    jr.outcome(
        n,
        State::Done,
        Some("raised while an interrupt waits".into()),
    )
    .unwrap();
    // `irq balance`: an IRQ the daemon moves while it runs
    let irq = Target::Irq(apply::step::Irq {
        irq: 41,
        path: r.join("proc/irq/41/smp_affinity_list"),
        name: "nvme0q2".into(),
        class: IrqClass::Host,
        previous_effective: Some("2".into()),
    });
    let n = jr
        .intend(&irq, "0-7", "balanced by vmtune irq balance")
        .unwrap();
    jr.outcome(n, State::Done, Some("moved while the daemon runs".into()))
        .unwrap();
    drop(stop_tx);
    t.join().unwrap();
}

/// Steps that ask systemd and libvirt: journaled as `apply` (shielding on a systemd host)
/// and `bench matrix` (a scratch domain) write them, without making the changes here.
fn services_journal(r: &Path, j: &Path) {
    let mut jr = Journal::create(j, &header(None)).unwrap();
    for unit in apply::shield::SYSTEMD_UNITS {
        let t = Target::SystemdProperty(apply::step::SystemdProperty {
            unit: unit.into(),
            property: "AllowedCPUs".into(),
        });
        let n = jr.intend(&t, "", "0-1").unwrap();
        jr.outcome(n, State::Done, None).unwrap();
    }
    let t = Target::LibvirtDomain(apply::step::LibvirtDomain {
        uri: Some("test:///default".into()),
        name: "vmtune-matrix-win10-a".into(),
        xml: r.join("matrix/vmtune-matrix-win10-a.xml"),
        files: Vec::new(),
    });
    let n = jr.intend(&t, "absent", "defined").unwrap();
    jr.outcome(n, State::Done, None).unwrap();
    // a task list as the v1 backend journals it, for a journal restored without root
    let t = Target::CgroupTasks(apply::step::CgroupTasks {
        dest: r.join("cgv1/vmtune-host"),
        procs_file: "tasks".into(),
        tasks: vec![MovedTask {
            id: TASK,
            start_time: 777,
            from: r.join("cgv1"),
            threads: vec![ThreadCpus {
                tid: TASK,
                cpus: "0-7".into(),
            }],
        }],
        proc_root: r.join("proc"),
    });
    let n = jr
        .intend(
            &t,
            "origin",
            &r.join("cgv1/vmtune-host").display().to_string(),
        )
        .unwrap();
    jr.outcome(
        n,
        State::Done,
        Some("moved 1 tasks, 0 skipped (exited or not movable)".into()),
    )
    .unwrap();
}

/// Write the fixtures with this build: `VMTUNE_WRITE_JOURNALS=DIR cargo test -p apply --test
/// journal_fixtures -- --ignored`. Run at e131ae1 to make `tests/data/e131ae1`; a later
/// release keeps those and may add its own.
#[test]
#[ignore]
fn write_fixtures() {
    let Some(out) = std::env::var_os("VMTUNE_WRITE_JOURNALS").map(PathBuf::from) else {
        panic!("set VMTUNE_WRITE_JOURNALS to the directory to write");
    };
    let _l = lock();
    std::fs::create_dir_all(&out).unwrap();
    type Make = fn(&Path, &Path);
    let makers: [(&str, Make); 4] = [
        ("host", host_journal),
        ("shield_v2", shield_v2_journal),
        ("threads", threads_journal),
        ("services", services_journal),
    ];
    for (name, make) in makers {
        let r = fresh(name);
        let j = r.join("run/journal");
        make(&r, &j);
        std::fs::copy(&j, out.join(format!("{name}.journal"))).unwrap();
    }
    for (name, after) in FIXTURES {
        let text = report(&out.join(format!("{name}.journal")), name, after);
        std::fs::write(out.join(format!("{name}.expected")), text).unwrap();
    }
}

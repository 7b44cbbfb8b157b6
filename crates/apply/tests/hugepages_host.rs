//! Two VMs' hugepage reservations on the real host's 2 MiB pool of node 0, as the libvirt
//! hook makes them (`prepare` reserves, `release` restores), released in start order and in
//! reverse, with each "VM" holding its pages the way QEMU's preallocated guest RAM does (an
//! anonymous `MAP_HUGETLB` mapping, every page touched). A restore gives back only the pages
//! its own apply added: another VM's pages in use, and pages someone else reserved in between,
//! stay in the pool; after both restores the pool is what it was.
//!
//! Every test holds the host lock all vmtune test binaries share, and never asks for more than
//! a few dozen pages (the pool's free pages plus 6 at most, skipped above 900). What vmtune
//! read, wrote and read back is checked through its reports; the pool's totals are compared
//! directly, which needs a pool nobody else is rewriting: each test first watches the pool
//! for a second and is skipped, by name, when it changes (`.ci/hugepage-check` rewrites it
//! all the time on purpose).
//!
//! Requirements, each a named skip: root, CPU 0 online, a 2 MiB pool on node 0 that nobody
//! else is changing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apply::{ApplyOptions, ApplyReport, Phases, RestoreReport, StepReport};

const POOL: &str = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB";
const RESV: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages";
const PAGE: usize = 2 << 20;

fn read(name: &str) -> u64 {
    testkit::read_u64(Path::new(POOL).join(name))
        .unwrap_or_else(|| panic!("cannot read {POOL}/{name}"))
}

/// The persistent pool (nr_hugepages counts surplus pages too).
fn persistent() -> u64 {
    read("nr_hugepages") - read("surplus_hugepages")
}

/// Pages a new mapping can take now.
fn available() -> u64 {
    read("free_hugepages").saturating_sub(testkit::read_u64(RESV).unwrap_or(0))
}

fn host_ok() -> bool {
    let test = testkit::current_test();
    if !testkit::is_root() {
        testkit::skip(&test, "needs root: it writes node 0's nr_hugepages");
        return false;
    }
    if let Err(e) = testkit::can_write(Path::new(POOL).join("nr_hugepages")) {
        testkit::skip(&test, format!("no writable 2 MiB pool on node 0: {e}"));
        return false;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if !online.trim().starts_with('0') {
        testkit::skip(&test, "the plans pin to CPU 0, which is not online");
        return false;
    }
    true
}

/// The pool as (nr, free, surplus, reserved).
fn pool_now() -> (u64, u64, u64, u64) {
    (
        read("nr_hugepages"),
        read("free_hugepages"),
        read("surplus_hugepages"),
        testkit::read_u64(RESV).unwrap_or(0),
    )
}

/// Whether nobody changes the pool for a second (called with the host lock held, so no
/// vmtune test does); a named skip if someone does, or if the test would hold too many pages.
fn quiet_pool() -> bool {
    let first = pool_now();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        let now = pool_now();
        if now != first {
            testkit::skip(
                &testkit::current_test(),
                format!(
                    "another process is rewriting node 0's 2 MiB pool ({first:?} → {now:?} as (nr, free, surplus, reserved)): the pool's totals cannot be compared"
                ),
            );
            return false;
        }
    }
    let avail = available();
    if avail > 900 {
        testkit::skip(
            &testkit::current_test(),
            format!("{avail} free 2 MiB pages on node 0: the test would hold more than 1000"),
        );
        return false;
    }
    true
}

/// What every test here starts from: the host lock held, a quiet pool, its persistent and
/// available pages, and a directory for the journals; `None` (a named skip) when the host
/// cannot run it.
struct Start {
    _host: testkit::HostLock,
    p0: u64,
    avail0: u64,
    dir: tempfile::TempDir,
}

fn start() -> Option<Start> {
    if !host_ok() {
        return None;
    }
    let host = testkit::host_lock();
    if !quiet_pool() {
        return None;
    }
    Some(Start {
        _host: host,
        p0: persistent(),
        avail0: available(),
        dir: tempfile::tempdir().unwrap(),
    })
}

/// A VM's guest RAM: `n` 2 MiB pages, each touched (faulted in), unmapped on drop.
struct Vm {
    ptr: *mut std::ffi::c_void,
    n: usize,
}

impl Vm {
    fn start(n: u64) -> Vm {
        use rustix::mm::{mmap_anonymous, MapFlags, ProtFlags};
        let n = n as usize;
        // SAFETY: a fresh anonymous mapping, touched only inside its length below
        let ptr = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                n * PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB | MapFlags::POPULATE,
            )
        }
        .unwrap_or_else(|e| panic!("the VM could not get its {n} hugepages: {e}"));
        let vm = Vm { ptr, n };
        vm.touch(1);
        vm
    }

    /// Write and read back a byte on every page: the pages are still this VM's.
    fn touch(&self, v: u8) {
        for i in 0..self.n {
            // SAFETY: inside the mapping
            unsafe {
                let p = (self.ptr as *mut u8).add(i * PAGE);
                p.write_volatile(v);
                assert_eq!(p.read_volatile(), v);
            }
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // SAFETY: the mapping made in start
        let _ = unsafe { rustix::mm::munmap(self.ptr, self.n * PAGE) };
    }
}

fn plan(pages: u64) -> plan::Plan {
    serde_json::from_value(serde_json::json!({
        "request": {"name": "t", "vcpus": 1, "memory_bytes": pages * PAGE as u64, "devices": [],
                    "profile": "gaming", "os": "linux", "hugepages": "2M", "host_cpus": null},
        "host_source": "hand-written",
        "vcpus": [{"vcpu": 0, "cpu": 0}],
        "emulator_cpus": [0], "iothread_cpus": [], "host_cpus": [0],
        "guest_topology": {"sockets": 1, "dies": 1, "cores": 1, "threads": 1},
        "guest_numa": [],
        "memory": {"host_nodes": [0], "hugepage_size_kb": 2048, "pages": pages, "pages_per_node": [pages]},
        "devices": [],
        "irq": {"vfio_cpus": [0], "host_cpus": [0]},
        "cpu_features": {"hyperv": [], "invtsc": false, "hide_hypervisor": false, "kvm_hidden": false},
        "rationale": [], "warnings": []
    }))
    .unwrap()
}

/// Restores a journal if the test fails half way.
struct Guard(Vec<PathBuf>);

impl Drop for Guard {
    fn drop(&mut self) {
        for j in self.0.iter().rev() {
            let _ = apply::restore(j, Duration::from_secs(5));
        }
    }
}

/// `prepare`: reserve the plan's pages, as the hook does (its journal, hugepages only).
fn prepare(journal: &Path, pages: u64) -> ApplyReport {
    let mut o = ApplyOptions::new(journal);
    o.append = true;
    o.phases = Phases {
        hugepages: true,
        ..Phases::NONE
    };
    apply::apply(&plan(pages), None, &o).unwrap()
}

fn release(journal: &Path) -> RestoreReport {
    let r = apply::restore(journal, Duration::from_secs(5)).unwrap();
    assert_eq!(r.failed, 0, "{r:#?}");
    r
}

fn hugepage_step(steps: &[StepReport]) -> &StepReport {
    steps
        .iter()
        .find(|s| s.actuator == "hugepages")
        .unwrap_or_else(|| panic!("no hugepage step in {steps:#?}"))
}

fn n(s: &str) -> u64 {
    s.parse().unwrap()
}

/// The pages a restore step gave back, checked against what it read back right after
/// writing and against its report of them.
fn given_back(r: &RestoreReport) -> u64 {
    let s = hugepage_step(&r.steps);
    assert_eq!(s.result, "restored", "{s:#?}");
    assert_eq!(
        s.observed.as_deref(),
        Some(s.new.as_str()),
        "read back: {s:#?}"
    );
    let pages = s.pages.expect("a give-back reports its pages");
    let returned = n(&s.previous) - n(&s.new);
    assert_eq!(pages.returned, returned, "{s:#?}");
    assert_eq!(pages.missing, 0, "{s:#?}");
    assert_eq!(pages.freed + pages.in_use, returned, "{s:#?}");
    returned
}

/// (freed at once, still in use) of a restore's hugepage give-back.
fn freed_and_in_use(r: &RestoreReport) -> (u64, u64) {
    let p = hugepage_step(&r.steps).pages.unwrap();
    (p.freed, p.in_use)
}

/// Start A (it takes every available page and adds 6), then B (adds 4), then stop and
/// release them: A first (start order) or B first.
fn two_vms(a_first: bool) {
    let Some(st) = start() else { return };
    let (p0, avail0, dir) = (st.p0, st.avail0, &st.dir);
    let (ja, jb) = (dir.path().join("a.journal"), dir.path().join("b.journal"));
    let _g = Guard(vec![ja.clone(), jb.clone()]);

    let ra = prepare(&ja, avail0 + 6);
    let sa = hugepage_step(&ra.steps);
    assert_eq!(sa.result, "done", "{sa:#?}");
    let a = Vm::start(avail0 + 6);
    let rb = prepare(&jb, 4);
    let sb = hugepage_step(&rb.steps);
    assert_eq!(sb.result, "done", "{sb:#?}");
    let b = Vm::start(4);
    assert_eq!(persistent(), p0 + 10);

    if a_first {
        drop(a);
        let r = release(&ja);
        assert_eq!(given_back(&r), 6);
        assert_eq!(
            freed_and_in_use(&r),
            (6, 0),
            "B's pages are not A's to free"
        );
        b.touch(2);
        assert_eq!(persistent(), p0 + 4, "B's pages stay in the pool");
        drop(b);
        assert_eq!(given_back(&release(&jb)), 4);
    } else {
        drop(b);
        assert_eq!(given_back(&release(&jb)), 4);
        a.touch(2);
        drop(a);
        assert_eq!(given_back(&release(&ja)), 6);
    }
    assert_eq!(persistent(), p0, "the pool is back where it was");
    assert_eq!(read("surplus_hugepages"), 0);
}

#[test]
fn two_vms_released_in_start_order() {
    two_vms(true);
}

#[test]
fn two_vms_released_in_reverse_order() {
    two_vms(false);
}

/// Someone reserves pages for their own use while a VM runs (an operator's `echo`, a DPDK
/// setup script): the VM's release leaves them in the pool.
#[test]
fn pages_reserved_by_someone_else_meanwhile_stay() {
    let Some(st) = start() else { return };
    let (p0, avail0, dir) = (st.p0, st.avail0, &st.dir);
    let ja = dir.path().join("a.journal");
    let _g = Guard(vec![ja.clone()]);
    prepare(&ja, avail0 + 6);
    let a = Vm::start(avail0 + 6);
    // the operator's 5 pages, on top of whatever the pool has
    let nr = Path::new(POOL).join("nr_hugepages");
    let mine = persistent() + 5;
    std::fs::write(&nr, mine.to_string()).unwrap();
    struct Operator(PathBuf, u64);
    impl Drop for Operator {
        fn drop(&mut self) {
            let now = testkit::read_u64(&self.0).unwrap_or(0);
            let _ = std::fs::write(&self.0, now.saturating_sub(self.1).to_string());
        }
    }
    let op = Operator(nr.clone(), 5);
    drop(a);
    assert_eq!(given_back(&release(&ja)), 6);
    assert_eq!(
        persistent(),
        p0 + 5,
        "the operator's 5 pages are still there"
    );
    drop(op);
    assert_eq!(persistent(), p0);
}

/// `vmtune restore` while the VM still runs: its pages cannot go back to the kernel yet. The
/// restore lowers the pool anyway, the kernel keeps the VM's pages as surplus pages and
/// frees them when the VM lets go, and the report says how many were freed at once and how
/// many are still in use.
#[test]
fn a_restore_while_the_vm_runs_keeps_its_pages_until_it_stops() {
    let Some(st) = start() else { return };
    let (p0, avail0, dir) = (st.p0, st.avail0, &st.dir);
    let ja = dir.path().join("a.journal");
    let _g = Guard(vec![ja.clone()]);
    prepare(&ja, avail0 + 6);
    let a = Vm::start(avail0 + 6);
    let r = release(&ja);
    assert_eq!(given_back(&r), 6);
    assert_eq!(freed_and_in_use(&r), (0, 6));
    let note = hugepage_step(&r.steps).note.clone().unwrap();
    assert!(note.contains("6 still in use"), "{note}");
    a.touch(3);
    assert_eq!(persistent(), p0);
    drop(a);
    assert_eq!(persistent(), p0);
    assert_eq!(read("surplus_hugepages"), 0);
}

/// `vmtune apply PLAN --pid QEMU` for a VM that is already running: its guest RAM (here 4
/// pages mapped and touched, plus 2 mapped and not touched yet, as a hugetlbfs backend
/// without prealloc leaves them) was allocated at its start, so the apply changes no pool —
/// however few pages are free — and reports what the process holds, read from its own
/// smaps and numa_maps. Before this, it added the plan's pages a second time.
#[test]
fn an_apply_to_a_running_vm_reserves_nothing_more() {
    let Some(st) = start() else { return };
    let (p0, avail0, dir) = (st.p0, st.avail0, &st.dir);
    let (jp, ja) = (
        dir.path().join("prepare.journal"),
        dir.path().join("apply.journal"),
    );
    let _g = Guard(vec![jp.clone(), ja.clone()]);
    // every free page and 6 more, so nothing is left free for a second reservation
    prepare(&jp, avail0 + 6);
    let touched = Vm::start(avail0 + 4);
    // reserved by the mapping, not faulted in
    use rustix::mm::{mmap_anonymous, MapFlags, ProtFlags};
    // SAFETY: a fresh anonymous mapping, never touched, unmapped below
    let untouched = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            2 * PAGE,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB,
        )
    }
    .expect("2 reserved hugepages");
    let before = pool_now();
    let mut o = ApplyOptions::new(&ja);
    o.phases = Phases {
        hugepages: true,
        ..Phases::NONE
    };
    let me = std::process::id() as i32;
    let rep = apply::apply(&plan(avail0 + 6), Some(&apply::QemuRef::Pid(me)), &o).unwrap();
    assert!(rep.steps.is_empty(), "{:#?}", rep.steps);
    assert_eq!(pool_now(), before, "the pool was changed");
    let note = rep.notes.first().cloned().unwrap_or_default();
    assert!(
        note.contains(&format!("QEMU {me} is running"))
            && note.contains(&format!("it holds {} pages of 2048 kB", avail0 + 6))
            && note.contains(&format!("the plan asks for {}", avail0 + 6)),
        "{note}"
    );
    // SAFETY: the mapping made above
    let _ = unsafe { rustix::mm::munmap(untouched, 2 * PAGE) };
    drop(touched);
    release(&ja);
    assert_eq!(given_back(&release(&jp)), 6);
    assert_eq!(persistent(), p0);
}

/// Two VMs prepared before either starts, as libvirt may start two domains at once: A's
/// pages are free until its QEMU maps them, so without a claim B's prepare counted them as
/// its own and added nothing, and one of the two could not get its pages. With the hook's
/// claim ledger B adds its 4, both start, `started` ends each claim, and both releases
/// give back what they added.
#[test]
fn two_prepares_before_either_start_both_get_their_pages() {
    let Some(st) = start() else { return };
    let (p0, avail0, dir) = (st.p0, st.avail0, &st.dir);
    let (ja, jb) = (dir.path().join("a.journal"), dir.path().join("b.journal"));
    let _g = Guard(vec![ja.clone(), jb.clone()]);
    let claimed = |journal: &Path, owner: &str, pages: u64| {
        let mut o = ApplyOptions::new(journal);
        o.append = true;
        o.phases = Phases {
            hugepages: true,
            ..Phases::NONE
        };
        o.claims = Some(apply::engine::ClaimLedger {
            dir: dir.path().to_path_buf(),
            owner: owner.into(),
            pid_dir: None,
        });
        apply::apply(&plan(pages), None, &o).unwrap()
    };
    let ra = claimed(&ja, "a", avail0 + 6);
    assert_eq!(hugepage_step(&ra.steps).result, "done");
    // without the ledger, B would have seen A's pages as free
    let mut dry = ApplyOptions::new(dir.path().join("dry.journal"));
    dry.dry_run = true;
    dry.phases = Phases {
        hugepages: true,
        ..Phases::NONE
    };
    let unclaimed = apply::apply(&plan(4), None, &dry).unwrap();
    assert!(unclaimed.steps.is_empty(), "{:#?}", unclaimed.steps);
    let rb = claimed(&jb, "b", 4);
    let sb = hugepage_step(&rb.steps);
    assert_eq!(n(&sb.new) - n(&sb.previous), 4, "{rb:#?}");
    assert_eq!(persistent(), p0 + 10);
    let a = Vm::start(avail0 + 6);
    assert!(apply::hugepages::drop_claim(dir.path(), "a").unwrap());
    let b = Vm::start(4);
    assert!(apply::hugepages::drop_claim(dir.path(), "b").unwrap());
    a.touch(2);
    drop(a);
    assert_eq!(given_back(&release(&ja)), 6);
    b.touch(2);
    drop(b);
    assert_eq!(given_back(&release(&jb)), 4);
    assert_eq!(persistent(), p0, "the pool is back where it was");
}

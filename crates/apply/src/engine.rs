//! Observe → validate → build the ordered steps → apply each through the journal; restore;
//! watch for new VFIO vectors.
//!
//! Order of an apply: hugepages, QEMU threads (vCPUs, iothreads, emulator), IRQs, the default
//! IRQ affinity, the workqueue mask, CPU shielding. Restore walks the journal backwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plan::Plan;
use serde::Serialize;
use topo::CpuSet;

use crate::error::{read_trim, ApplyError, Result};
use crate::hugepages::{self, Pool, Returned};
use crate::journal::{self, Header, Journal, JournalStep, Lock, State};
use crate::qemu::{self, QemuThreads};
pub use crate::step::PlannedStep;
use crate::step::{self, Actuator, Outcome, Target};
use crate::{irq, proc, sched, shield};

/// Where procfs and sysfs are (tests may point them elsewhere for file-only actuators).
#[derive(Debug, Clone)]
pub struct HostPaths {
    pub proc_root: PathBuf,
    pub sys_root: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths {
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
        }
    }
}

/// How to find the VM's QEMU.
#[derive(Debug, Clone)]
pub enum QemuRef {
    /// A QMP socket (`-qmp unix:PATH,server=on,wait=off`).
    Qmp(PathBuf),
    /// A process id; threads are found by name (`-name …,debug-threads=on`).
    Pid(i32),
}

/// Which groups of changes to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Phases {
    pub hugepages: bool,
    pub threads: bool,
    pub irqs: bool,
    pub shield: bool,
}

impl Phases {
    pub const ALL: Phases = Phases {
        hugepages: true,
        threads: true,
        irqs: true,
        shield: true,
    };
    pub const NONE: Phases = Phases {
        hugepages: false,
        threads: false,
        irqs: false,
        shield: false,
    };

    /// Parse `hugepages,threads,irqs,shield` (any subset).
    pub fn parse(s: &str) -> Result<Phases, String> {
        let mut p = Phases::NONE;
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            match part {
                "hugepages" => p.hugepages = true,
                "threads" => p.threads = true,
                "irqs" => p.irqs = true,
                "shield" => p.shield = true,
                other => {
                    return Err(format!(
                        "unknown phase {other:?} (use hugepages, threads, irqs, shield)"
                    ))
                }
            }
        }
        if p == Phases::NONE {
            return Err("no phase given".into());
        }
        Ok(p)
    }
}

#[derive(Debug, Clone)]
pub struct ApplyOptions {
    pub journal: PathBuf,
    /// Print the steps, change nothing.
    pub dry_run: bool,
    /// Add to an existing journal instead of refusing (the hook: `prepare`, then `started`).
    pub append: bool,
    /// Test hook: SIGKILL ourselves right after step N's change, before its outcome record.
    pub crash_after_step: Option<u32>,
    pub lock_wait: Duration,
    pub phases: Phases,
    pub paths: HostPaths,
    pub qmp_timeout: Duration,
    /// Keep hugepage claims ([`hugepages::Claim`]): the libvirt hook's `prepare`.
    pub claims: Option<ClaimLedger>,
}

/// Where hugepage claims are kept, and whose this apply's is.
#[derive(Debug, Clone)]
pub struct ClaimLedger {
    pub dir: PathBuf,
    /// The libvirt domain.
    pub owner: String,
    /// Where libvirt writes `<domain>.pid` of running QEMUs: a claim whose QEMU holds its
    /// pages has ended even if the hook missed its `started`.
    pub pid_dir: Option<PathBuf>,
}

impl ApplyOptions {
    pub fn new(journal: impl Into<PathBuf>) -> Self {
        ApplyOptions {
            journal: journal.into(),
            dry_run: false,
            append: false,
            crash_after_step: None,
            lock_wait: Duration::from_secs(10),
            phases: Phases::ALL,
            paths: HostPaths::default(),
            qmp_timeout: Duration::from_secs(5),
            claims: None,
        }
    }
}

/// One step in a report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepReport {
    /// Journal step number (`null` in a dry run).
    pub step: Option<u32>,
    pub actuator: String,
    pub target: String,
    pub previous: String,
    pub new: String,
    /// `planned` (dry run), `done`, `skipped`, `failed`; for restore `restored`, `skipped`,
    /// `unchanged`, `failed`.
    pub result: String,
    pub note: Option<String>,
    /// Read back after the change.
    pub observed: Option<String>,
    /// A hugepage restore: what it gave back and what it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<Returned>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    pub journal: PathBuf,
    pub dry_run: bool,
    pub qemu_pid: Option<i32>,
    pub steps: Vec<StepReport>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    pub journal: PathBuf,
    /// Where the restored journal was moved (`JOURNAL.restored`); `null` if nothing was
    /// restored or a step failed (the journal stays for another try).
    pub archived_as: Option<PathBuf>,
    pub steps: Vec<StepReport>,
    pub failed: usize,
    pub notes: Vec<String>,
}

impl RestoreReport {
    fn new(journal: &Path) -> Self {
        RestoreReport {
            journal: journal.to_path_buf(),
            archived_as: None,
            steps: Vec::new(),
            failed: 0,
            notes: Vec::new(),
        }
    }
}

/// Check a plan against the host before anything changes. Pure.
pub fn validate(plan: &Plan, online: &CpuSet) -> Result<()> {
    if plan.host_cpus.is_empty() {
        return Err(ApplyError::Refused(
            "host_cpus is empty: the host would be left with no CPU".into(),
        ));
    }
    let sets: [(&str, CpuSet); 6] = [
        ("vcpus", plan.guest_cpus()),
        ("emulator_cpus", plan.emulator_cpus.clone()),
        ("iothread_cpus", plan.iothread_cpus.clone()),
        ("host_cpus", plan.host_cpus.clone()),
        ("irq.vfio_cpus", plan.irq.vfio_cpus.clone()),
        ("irq.host_cpus", plan.irq.host_cpus.clone()),
    ];
    for (name, set) in &sets {
        let missing = set.difference(online);
        if !missing.is_empty() {
            return Err(ApplyError::Refused(format!(
                "{name} names CPU {missing} which this host does not have online (online: {online})"
            )));
        }
    }
    let mut seen = CpuSet::new();
    for v in &plan.vcpus {
        if seen.contains(v.vcpu) {
            return Err(ApplyError::Refused(format!(
                "vCPU {} is pinned twice",
                v.vcpu
            )));
        }
        seen.insert(v.vcpu);
    }
    let m = &plan.memory;
    if m.pages > 0
        && m.hugepage_size_kb > 4
        && !m.pages_per_node.is_empty()
        && m.pages_per_node.len() != m.host_nodes.len()
    {
        return Err(ApplyError::Refused(format!(
            "memory.pages_per_node has {} entries for {} host_nodes",
            m.pages_per_node.len(),
            m.host_nodes.len()
        )));
    }
    Ok(())
}

/// Thread steps: each vCPU to its planned CPU, iothreads to `iothread_cpus` (or the
/// emulator CPUs), every other thread to `emulator_cpus`. `current` gives a thread's
/// (affinity, start time). Refuses when the plan and the QEMU disagree on vCPUs. Pure.
pub fn thread_steps(
    plan: &Plan,
    t: &QemuThreads,
    current: impl Fn(i32) -> Option<(String, u64)>,
    proc_root: &Path,
) -> Result<Vec<PlannedStep>> {
    for v in &plan.vcpus {
        if !t.vcpus.iter().any(|(i, _)| *i == v.vcpu) {
            return Err(ApplyError::Refused(format!(
                "the plan pins vCPU {} but QEMU {} has vCPUs {}",
                v.vcpu,
                t.pid,
                t.vcpus.iter().map(|v| v.0).collect::<CpuSet>()
            )));
        }
    }
    let mut wanted: Vec<(i32, String, CpuSet)> = Vec::new();
    for (idx, tid) in &t.vcpus {
        let Some(pin) = plan.vcpus.iter().find(|v| v.vcpu == *idx) else {
            return Err(ApplyError::Refused(format!(
                "QEMU {} has vCPU {idx} which the plan does not pin ({} vCPUs planned)",
                t.pid,
                plan.vcpus.len()
            )));
        };
        wanted.push((*tid, format!("vcpu {idx}"), [pin.cpu].into_iter().collect()));
    }
    let io_cpus = if plan.iothread_cpus.is_empty() {
        &plan.emulator_cpus
    } else {
        &plan.iothread_cpus
    };
    if !io_cpus.is_empty() {
        for (id, tid) in &t.iothreads {
            wanted.push((*tid, format!("iothread {id}"), io_cpus.clone()));
        }
    }
    if !plan.emulator_cpus.is_empty() {
        for tid in &t.emulator {
            wanted.push((*tid, "emulator".into(), plan.emulator_cpus.clone()));
        }
    }
    let mut out = Vec::new();
    for (tid, role, cpus) in wanted {
        // a thread that exited since we listed it needs no step
        let Some((cur, start)) = current(tid) else {
            continue;
        };
        if CpuSet::parse_list(&cur).map(|c| c == cpus).unwrap_or(false) {
            continue;
        }
        out.push(PlannedStep {
            target: Target::Thread(step::Thread {
                pid: t.pid,
                tid,
                start_time: start,
                role,
                proc_root: proc_root.to_path_buf(),
            }),
            previous: cur,
            new: cpus.to_list_string(),
        });
    }
    Ok(out)
}

/// The EEVDF slice steps of `plan.vcpu_sched`: each vCPU thread of a fair policy gets the
/// slice, its policy, nice and priority kept. Refused on a kernel without per-task slices;
/// the notes say the slice the scheduler will really give (HRTICK, the tick).
fn slice_steps(
    vs: plan::VcpuSched,
    t: &QemuThreads,
    paths: &HostPaths,
    notes: &mut Vec<String>,
) -> Result<Vec<PlannedStep>> {
    let slice_ns = u64::from(vs.slice_us) * 1000;
    if !(sched::SLICE_MIN_NS..=sched::SLICE_MAX_NS).contains(&slice_ns) {
        return Err(ApplyError::Refused(format!(
            "vcpu_sched.slice_us {} is outside the kernel's 100..=100000 µs",
            vs.slice_us
        )));
    }
    let Some(base) = sched::base_slice_ns() else {
        return Err(ApplyError::Refused(format!(
            "the plan sets a {} µs slice for the vCPU threads, but this kernel has no \
             per-task slices (Linux 6.12+: sched_attr.sched_runtime of a fair task)",
            vs.slice_us
        )));
    };
    let hrtick = sched::hrtick(&paths.sys_root.join("kernel/debug/sched/features"));
    let tick = sched::tick_ns(sched::kernel_config(&paths.proc_root).as_deref());
    let eff = sched::effective_slice_ns(slice_ns, hrtick.as_ref().ok().copied(), tick);
    let hr = match &hrtick {
        Ok(true) => "HRTICK on".to_string(),
        Ok(false) => "HRTICK off".to_string(),
        Err(why) => format!("HRTICK unknown: {why}"),
    };
    let tick_s = tick.map_or("tick unknown".to_string(), |t| {
        format!("tick {} µs", t / 1000)
    });
    notes.push(format!(
        "vCPU slice {} µs (base slice {} µs; {hr}, {tick_s}): effective {}",
        vs.slice_us,
        base / 1000,
        if eff == slice_ns {
            format!("{} µs", eff / 1000)
        } else {
            format!(
                "{} µs, the tick: a slice under the tick needs HRTICK \
                 (echo HRTICK > /sys/kernel/debug/sched/features); without it a short slice \
                 can be worse than the base one (the simulator's fig5: 12.0 ms ping p99 \
                 against 8.99 ms)",
                eff / 1000
            )
        }
    ));
    let mut out = Vec::new();
    for (idx, tid) in &t.vcpus {
        let Some(start) = proc::start_time(&paths.proc_root, t.pid, *tid) else {
            continue;
        };
        let cur = match sched::get(*tid, Some(base)) {
            Ok(c) => c,
            Err(e) if e.raw_os_error() == Some(crate::error::libc_errno::ESRCH) => continue,
            Err(e) => return Err(ApplyError::io(format!("sched_getattr(thread {tid})"), e)),
        };
        if !cur.policy.is_fair() {
            notes.push(format!(
                "vCPU {idx} (thread {tid}) runs {}: a slice applies to fair tasks only, left \
                 as it is",
                cur.policy.name()
            ));
            continue;
        }
        let want = sched::SchedState {
            slice_ns,
            custom_slice: true,
            ..cur
        };
        if want == cur {
            continue;
        }
        out.push(PlannedStep::new(
            Target::ThreadSched(step::ThreadSched {
                pid: t.pid,
                tid: *tid,
                start_time: start,
                role: format!("vcpu {idx}"),
                proc_root: paths.proc_root.clone(),
            }),
            cur.to_value(),
            want.to_value(),
        ));
    }
    Ok(out)
}

/// How long a restore waits for a hugepage pool another apply or restore holds.
const POOL_LOCK_WAIT: Duration = Duration::from_secs(30);

/// Lock the `nr_hugepages` of every pool the plan may grow, in node order (so two applies
/// never wait on each other crosswise). A pool that does not exist is left to
/// [`hugepage_steps`] to refuse.
fn lock_pools(plan: &Plan, paths: &HostPaths, wait: Duration) -> Result<Vec<Lock>> {
    let size = plan.memory.hugepage_size_kb;
    let mut nodes: Vec<u32> = hugepage_demand(plan)?.into_iter().map(|(n, _)| n).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .map(|node| {
            paths.sys_root.join(format!(
                "devices/system/node/node{node}/hugepages/hugepages-{size}kB/nr_hugepages"
            ))
        })
        .filter(|p| p.exists())
        .map(|p| Lock::acquire_existing(&p, wait))
        .collect()
}

/// Pages to reserve per node: (node, pages). Pure.
pub fn hugepage_demand(plan: &Plan) -> Result<Vec<(u32, u64)>> {
    let m = &plan.memory;
    if m.pages == 0 || m.hugepage_size_kb <= 4 {
        return Ok(Vec::new());
    }
    if !m.pages_per_node.is_empty() {
        return Ok(m
            .host_nodes
            .iter()
            .copied()
            .zip(m.pages_per_node.iter().copied())
            .filter(|(_, p)| *p > 0)
            .collect());
    }
    match m.host_nodes.as_slice() {
        [n] => Ok(vec![(*n, m.pages)]),
        [] => Err(ApplyError::Refused(
            "memory.pages is set but memory.host_nodes is empty".into(),
        )),
        _ => Err(ApplyError::Refused(
            "memory.pages spans several host_nodes without pages_per_node".into(),
        )),
    }
}

/// The sysfs directory of `node`'s pool of `size` kB pages; refused when the host has none.
fn pool_dir(paths: &HostPaths, node: u32, size: u64) -> Result<PathBuf> {
    let dir = paths.sys_root.join(format!(
        "devices/system/node/node{node}/hugepages/hugepages-{size}kB"
    ));
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(ApplyError::Refused(format!(
            "no {size} kB hugepages on NUMA node {node} ({} does not exist)",
            dir.display()
        )))
    }
}

/// Other VMs' live hugepage claims of `size` kB: a claim whose journal is gone (restored)
/// or whose QEMU already holds its pages has ended, and its file is removed unless `dry`
/// (the caller holds the pools' locks); a file that is not a claim is said and not counted.
fn live_claims(
    ledger: &ClaimLedger,
    paths: &HostPaths,
    size: u64,
    dry: bool,
    notes: &mut Vec<String>,
) -> Vec<hugepages::Claim> {
    let mut live = Vec::new();
    for (file, c) in hugepages::read_claims(&ledger.dir) {
        let c = match c {
            Ok(c) => c,
            Err(e) => {
                notes.push(format!(
                    "hugepages: {} is not a claim ({e}): not counted",
                    file.display()
                ));
                continue;
            }
        };
        if c.owner == ledger.owner || c.size_kb != size {
            continue;
        }
        let want: u64 = c.pages.values().sum();
        let held = ledger
            .pid_dir
            .as_ref()
            .and_then(|d| read_trim(&d.join(format!("{}.pid", c.owner))).ok())
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(|pid| proc::hugetlb_held(&paths.proc_root, pid, size).ok())
            .map(|h| h.pages);
        let ended = if !c.journal.exists() {
            Some("its journal was restored")
        } else if held.is_some_and(|h| h >= want) {
            Some("its QEMU holds its pages")
        } else {
            None
        };
        match ended {
            Some(why) => {
                let removed = !dry && hugepages::drop_claim(&ledger.dir, &c.owner).is_ok();
                notes.push(format!(
                    "hugepages: the claim of {} ended ({why}){}",
                    c.owner,
                    if removed { " and was removed" } else { "" }
                ));
            }
            None => live.push(c),
        }
    }
    live
}

fn hugepage_steps(
    plan: &Plan,
    opts: &ApplyOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<PlannedStep>> {
    let paths = &opts.paths;
    let ledger = opts.claims.as_ref();
    let size = plan.memory.hugepage_size_kb;
    let demand = hugepage_demand(plan)?;
    let claims = match ledger {
        Some(l) if !demand.is_empty() => live_claims(l, paths, size, opts.dry_run, notes),
        _ => Vec::new(),
    };
    let owner = ledger.map_or("", |l| l.owner.as_str());
    let mut out = Vec::new();
    for (node, pages) in demand {
        let dir = pool_dir(paths, node, size)?;
        let pool = Pool::read(&dir)?;
        // pages mappings reserved but have not touched are counted free: not the VM's
        let resv_file = paths.sys_root.join(format!(
            "kernel/mm/hugepages/hugepages-{size}kB/resv_hugepages"
        ));
        let resv = if resv_file.exists() {
            read_num(&resv_file)?
        } else {
            0
        };
        // and free pages promised to VMs prepared but not started yet are not this VM's
        let promised = hugepages::claimed(&claims, owner, size, node);
        if promised > 0 {
            let who: Vec<&str> = claims
                .iter()
                .filter(|c| c.owner != owner && c.pages.get(&node).is_some_and(|p| *p > 0))
                .map(|c| c.owner.as_str())
                .collect();
            notes.push(format!(
                "node {node}: {promised} {size} kB pages are promised to {} (prepared, not started yet): not counted as free",
                who.join(", ")
            ));
        }
        // (a claim a give-back has eaten into is made whole here: this apply adds those
        // pages too, and gives them back with its own)
        let Some(new) = hugepages::grow_to(&pool, resv, pages + promised) else {
            let avail = pool.available(resv).saturating_sub(promised);
            notes.push(if resv == 0 && promised == 0 {
                format!("node {node}: {avail} free {size} kB pages already, {pages} needed")
            } else {
                format!(
                    "node {node}: {avail} free {size} kB pages already ({} free, {resv} of them reserved by mappings, {promised} promised), {pages} needed",
                    pool.free
                )
            });
            continue;
        };
        out.push(PlannedStep {
            target: Target::Hugepages(step::Hugepages {
                node,
                size_kb: size,
                path: dir.join("nr_hugepages"),
                compact: paths.proc_root.join("sys/vm/compact_memory"),
                asked: pages,
                reserved: resv_file.exists().then_some(resv_file),
                own_pages: true,
            }),
            previous: pool.persistent().to_string(),
            new: new.to_string(),
        });
    }
    Ok(out)
}

/// Whether an apply grows hugepage pools: in the hugepages phase, for a VM about to start.
/// A running QEMU's guest RAM was allocated (its hugepages reserved) when it started, so
/// with one the pools are only checked ([`running_qemu_hugepages`]).
fn reserves_pages(phases: &Phases, qemu: Option<&QemuRef>) -> bool {
    phases.hugepages && qemu.is_none()
}

/// The hugepages phase with a running QEMU: its guest RAM was allocated when it started, so
/// no pool is changed (pages added now could not become that VM's); the notes say what the
/// QEMU holds against what the plan asks, and how to reserve pages before a start.
fn running_qemu_hugepages(plan: &Plan, paths: &HostPaths, pid: i32) -> Result<Vec<String>> {
    let demand = hugepage_demand(plan)?;
    if demand.is_empty() {
        return Ok(Vec::new());
    }
    let size = plan.memory.hugepage_size_kb;
    for (node, _) in &demand {
        pool_dir(paths, *node, size)?;
    }
    let want: u64 = demand.iter().map(|(_, p)| p).sum();
    let held = proc::hugetlb_held(&paths.proc_root, pid, size)?;
    let faulted = match &held.faulted {
        None => "which nodes hold them is not known: no numa_maps".to_string(),
        Some(f) if f.is_empty() => "none touched yet".to_string(),
        Some(f) => format!("touched: {}", per_node(f.iter().map(|(n, p)| (*n, *p)))),
    };
    let mut notes = vec![format!(
        "hugepages: QEMU {pid} is running, its guest RAM allocated when it started: pools left alone (to reserve pages for a VM, apply with `--only hugepages` before QEMU starts, as the libvirt hook's prepare does); it holds {} pages of {size} kB ({faulted}), the plan asks for {want} ({})",
        held.pages,
        per_node(demand.iter().copied())
    )];
    if held.pages < want {
        notes.push(format!(
            "hugepages: QEMU {pid} holds {} of the {want} {size} kB pages the plan asks for: the rest of its guest RAM is on other pages",
            held.pages
        ));
    }
    Ok(notes)
}

/// `32 on node 0, 16 on node 1`.
fn per_node(pages: impl IntoIterator<Item = (u32, u64)>) -> String {
    pages
        .into_iter()
        .map(|(n, p)| format!("{p} on node {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_num(p: &Path) -> Result<u64> {
    let s = read_trim(p)?;
    s.parse()
        .map_err(|_| ApplyError::parse(p, format!("not a number: {s:?}")))
}

fn mask_step(
    path: PathBuf,
    what: &str,
    cpus: &CpuSet,
    notes: &mut Vec<String>,
) -> Option<PlannedStep> {
    let cur = match read_trim(&path) {
        Ok(c) => c,
        Err(_) => {
            notes.push(format!("{what}: {} is absent, left alone", path.display()));
            return None;
        }
    };
    let writable = std::fs::metadata(&path)
        .map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o222 != 0
        })
        .unwrap_or(false);
    if !writable {
        notes.push(format!(
            "{what}: {} is read-only, left alone",
            path.display()
        ));
        return None;
    }
    if CpuSet::parse_mask(&cur)
        .map(|c| &c == cpus)
        .unwrap_or(false)
    {
        return None;
    }
    let new = mask_like(cpus, &cur);
    Some(PlannedStep {
        target: Target::MaskFile(step::MaskFile {
            path,
            what: what.into(),
        }),
        previous: cur,
        new,
    })
}

/// `cpus` as a hex mask spelled the way the kernel spelled `cur` (`%*pb`: as many 32-bit
/// words, the first one only as wide as nr_cpu_ids needs), so that one value has one format
/// in reports and journals: `3 -> 1`, `ff,ffffffff -> 00,0000000f`.
fn mask_like(cpus: &CpuSet, cur: &str) -> String {
    let words: Vec<&str> = cur.trim().split(',').collect();
    let mut parts: Vec<String> = cpus
        .to_mask_string(words.len())
        .split(',')
        .map(str::to_string)
        .collect();
    if parts.len() == words.len() {
        let kernel_width = words[0].trim().trim_start_matches("0x").len();
        let digits = parts[0].trim_start_matches('0');
        let width = kernel_width.max(digits.len()).max(1);
        parts[0] = format!("{digits:0>width$}");
    }
    parts.join(",")
}

/// Everything `apply` would do, in order, with nothing changed. Also the validation.
pub fn plan_steps(
    plan: &Plan,
    qemu: Option<&QemuRef>,
    opts: &ApplyOptions,
) -> Result<(Vec<PlannedStep>, Vec<String>, Option<i32>)> {
    let paths = &opts.paths;
    let online = proc::online_cpus(&paths.sys_root)?;
    validate(plan, &online)?;
    for d in &plan.devices {
        let bdf = irq::normalize_bdf(&d.bdf);
        let p = paths.sys_root.join("bus/pci/devices").join(&bdf);
        if !p.exists() {
            return Err(ApplyError::Refused(format!(
                "device {bdf} does not exist on this host ({})",
                p.display()
            )));
        }
    }
    let mut notes = Vec::new();
    let mut steps = Vec::new();
    // with a QMP socket, the hugepage check needs the QEMU's pid from it
    let qmp_pid_for_pages = opts.phases.hugepages && matches!(qemu, Some(QemuRef::Qmp(_)));
    let threads =
        if opts.phases.threads || opts.phases.shield || opts.phases.irqs || qmp_pid_for_pages {
            match qemu {
                Some(QemuRef::Qmp(sock)) => Some(qemu::threads_from_qmp(
                    &paths.proc_root,
                    sock,
                    opts.qmp_timeout,
                )?),
                Some(QemuRef::Pid(pid)) => Some(qemu::threads_from_proc(&paths.proc_root, *pid)?),
                None => None,
            }
        } else {
            None
        };
    let pid = threads.as_ref().map(|t| t.pid);
    if reserves_pages(&opts.phases, qemu) {
        steps.extend(hugepage_steps(plan, opts, &mut notes)?);
    } else if opts.phases.hugepages {
        let running = match qemu {
            Some(QemuRef::Pid(p)) => Some(*p),
            _ => pid,
        };
        if let Some(p) = running {
            notes.extend(running_qemu_hugepages(plan, paths, p)?);
        }
    }
    if opts.phases.threads {
        match &threads {
            Some(t) => {
                let pr = paths.proc_root.clone();
                let cur = |tid: i32| {
                    Some((
                        proc::thread_cpus(&pr, t.pid, tid).ok()?,
                        proc::start_time(&pr, t.pid, tid)?,
                    ))
                };
                steps.extend(thread_steps(plan, t, cur, &paths.proc_root)?);
                if let Some(vs) = plan.vcpu_sched {
                    steps.extend(slice_steps(vs, t, paths, &mut notes)?);
                }
            }
            None => notes.push("no QEMU given (--qmp/--pid): threads not pinned".into()),
        }
    }
    if opts.phases.irqs {
        let irqs = irq::observe(&paths.proc_root)?;
        let devices: Vec<String> = plan.devices.iter().map(|d| d.bdf.clone()).collect();
        let vfio_cpus = if plan.irq.vfio_cpus.is_empty() {
            plan.guest_cpus()
        } else {
            plan.irq.vfio_cpus.clone()
        };
        let host_cpus = if plan.irq.host_cpus.is_empty() {
            plan.host_cpus.clone()
        } else {
            plan.irq.host_cpus.clone()
        };
        steps.extend(irq::route(
            &irqs,
            &devices,
            &vfio_cpus,
            &host_cpus,
            &paths.proc_root,
        ));
        if !devices.is_empty()
            && !irqs.iter().any(|i| {
                irq::vfio_device(&i.actions)
                    .map(|d| {
                        devices.contains(&d) || devices.iter().any(|x| irq::normalize_bdf(x) == d)
                    })
                    .unwrap_or(false)
            })
        {
            notes.push("no vfio interrupts of the plan's devices yet (the guest driver enables them): use --watch".into());
        }
        steps.extend(mask_step(
            paths.proc_root.join("irq/default_smp_affinity"),
            "default IRQ affinity",
            &host_cpus,
            &mut notes,
        ));
    }
    if opts.phases.shield {
        steps.extend(mask_step(
            paths.sys_root.join("devices/virtual/workqueue/cpumask"),
            "workqueue cpumask",
            &plan.host_cpus,
            &mut notes,
        ));
        let backend = shield::detect_live(&paths.proc_root);
        let (s, n) = shield::plan_steps(&backend, &plan.host_cpus, &paths.proc_root, pid)?;
        notes.extend(n);
        steps.extend(s);
    }
    Ok((steps, notes, pid))
}

fn report(
    step: Option<u32>,
    s: &PlannedStep,
    result: &str,
    note: Option<String>,
    observed: Option<String>,
) -> StepReport {
    StepReport {
        step,
        actuator: s.target.kind().into(),
        target: s.target.describe(),
        previous: s.previous.clone(),
        new: s.new.clone(),
        result: result.into(),
        note,
        observed,
        pages: None,
    }
}

/// Apply a plan: every change journaled (and fsync'd) before it is made. On a hard failure
/// everything applied so far is rolled back and the error returned.
pub fn apply(plan: &Plan, qemu: Option<&QemuRef>, opts: &ApplyOptions) -> Result<ApplyReport> {
    let _lock = if opts.dry_run {
        None
    } else {
        Some(Lock::acquire(
            &journal::lock_path(&opts.journal),
            opts.lock_wait,
        )?)
    };
    if !opts.dry_run && !opts.append && opts.journal.exists() {
        return Err(ApplyError::journal(
            &opts.journal,
            "a journal of an earlier apply exists: run `vmtune restore` first",
        ));
    }
    // the hugepage pools this apply may grow, locked from the read that decides how many
    // pages to add until the apply is journaled and done: two applies with different
    // journals would otherwise both grow the pool from the same count (one VM's pages lost,
    // and each restore giving back pages the other counted)
    let pools = if opts.dry_run || !reserves_pages(&opts.phases, qemu) {
        Vec::new()
    } else {
        lock_pools(plan, &opts.paths, opts.lock_wait)?
    };
    let (steps, notes, pid) = plan_steps(plan, qemu, opts)?;
    let mut rep = ApplyReport {
        journal: opts.journal.clone(),
        dry_run: opts.dry_run,
        qemu_pid: pid,
        steps: Vec::new(),
        notes,
    };
    if opts.dry_run {
        rep.steps = steps
            .iter()
            .map(|s| report(None, s, "planned", None, None))
            .collect();
        return Ok(rep);
    }
    let mut j = if opts.append && opts.journal.exists() {
        Journal::open_append(&opts.journal)?
    } else {
        Journal::create(&opts.journal, &header(pid))?
    };
    if let Err(e) = run_steps(&mut j, &steps, opts.crash_after_step, &mut rep.steps) {
        drop(j);
        // the rollback's give-back takes the pools' locks itself
        drop(pools);
        let undo = restore_locked(&opts.journal);
        let how = match undo {
            Ok(r) if r.failed == 0 => "everything applied so far was rolled back".to_string(),
            Ok(r) => format!(
                "rollback left {} steps failed; the journal is kept",
                r.failed
            ),
            Err(e2) => format!("rollback failed too: {e2}"),
        };
        return Err(ApplyError::Other(format!("{e}; {how}")));
    }
    // the claim is written while the pools are still locked: the next prepare sees it
    if let Some(l) = opts
        .claims
        .as_ref()
        .filter(|_| reserves_pages(&opts.phases, qemu))
    {
        let pages: BTreeMap<u32, u64> = per_node_demand(plan)?;
        if !pages.is_empty() {
            let c = hugepages::Claim {
                owner: l.owner.clone(),
                size_kb: plan.memory.hugepage_size_kb,
                pages,
                journal: opts.journal.clone(),
            };
            match hugepages::write_claim(&l.dir, &c) {
                Ok(()) => rep.notes.push(format!(
                    "hugepages: {} pages claimed for {} until its QEMU has mapped them ({})",
                    c.pages.values().sum::<u64>(),
                    l.owner,
                    hugepages::claim_path(&l.dir, &l.owner).display()
                )),
                Err(e) => rep.notes.push(format!(
                    "hugepages: claim not written ({e}): a prepare before this VM starts may count its pages as free"
                )),
            }
        }
    }
    drop(pools);
    Ok(rep)
}

/// [`hugepage_demand`] summed per node.
fn per_node_demand(plan: &Plan) -> Result<BTreeMap<u32, u64>> {
    let mut m = BTreeMap::new();
    for (node, pages) in hugepage_demand(plan)? {
        *m.entry(node).or_insert(0) += pages;
    }
    Ok(m)
}

fn header(pid: Option<i32>) -> Header {
    Header {
        journal: "vmtune".into(),
        version: 1,
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        apply_pid: std::process::id(),
        qemu_pid: pid,
    }
}

fn run_steps(
    j: &mut Journal,
    steps: &[PlannedStep],
    crash_after: Option<u32>,
    out: &mut Vec<StepReport>,
) -> Result<()> {
    for s in steps {
        let n = j.intend(&s.target, &s.previous, &s.new)?;
        let r = s.target.apply(&s.new);
        if crash_after == Some(n) {
            crash_now();
        }
        match r {
            Ok(Outcome::Done(note)) => {
                let v = s.target.verify(&s.new).ok();
                let note = match (&v, note) {
                    (Some(v), n) if !v.ok => Some(format!(
                        "{}read back {}",
                        n.map(|n| n + "; ").unwrap_or_default(),
                        v.observed
                    )),
                    (_, n) => n,
                };
                // a hugepage step's restore gives back what the pool read back here
                let applied = match (&s.target, &v) {
                    (Target::Hugepages(_), Some(v)) => Some(v.observed.clone()),
                    _ => None,
                };
                j.outcome_applied(n, State::Done, note.clone(), applied)?;
                out.push(report(Some(n), s, "done", note, v.map(|v| v.observed)));
            }
            Ok(Outcome::Skipped(why)) => {
                j.outcome(n, State::Skipped, Some(why.clone()))?;
                out.push(report(Some(n), s, "skipped", Some(why), None));
            }
            Err(e) => {
                let _ = j.outcome(n, State::Failed, Some(e.to_string()));
                out.push(report(Some(n), s, "failed", Some(e.to_string()), None));
                return Err(ApplyError::Other(format!(
                    "step {n} ({}): {e}",
                    s.target.describe()
                )));
            }
        }
    }
    Ok(())
}

/// The crash-injection test hook: die by SIGKILL, as `kill -9` would.
fn crash_now() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    std::process::abort()
}

/// Undo everything a journal records, newest first. Idempotent: no journal, nothing to do.
/// Takes the directory's lock and the journal's own ([`journal::own_lock_path`]): a journal
/// whose long-running writer still holds its lock is refused.
pub fn restore(journal_path: &Path, lock_wait: Duration) -> Result<RestoreReport> {
    let _lock = Lock::acquire(&journal::lock_path(journal_path), lock_wait)?;
    // (no journal, nothing to restore, and no lock file left for it)
    let _own = if journal_path.exists() {
        Some(Lock::acquire(
            &journal::own_lock_path(journal_path),
            lock_wait,
        )?)
    } else {
        None
    };
    restore_locked(journal_path)
}

/// What restore would do, without doing it.
pub fn restore_dry_run(journal_path: &Path) -> Result<RestoreReport> {
    let mut rep = RestoreReport::new(journal_path);
    if !journal_path.exists() {
        rep.notes.push(missing_journal_note(journal_path));
        return Ok(rep);
    }
    let (_, steps) = journal::read(journal_path)?;
    for s in steps.iter().rev() {
        let mut r = undo_report(s);
        r.result = if s.state == State::Skipped {
            "unchanged"
        } else {
            "planned"
        }
        .into();
        r.observed = s.target.read_current().ok();
        if s.state != State::Skipped {
            match &s.undo {
                Some(u) => {
                    r.previous = u.from.clone();
                    r.new = u.to.clone();
                    if u.done {
                        r.result = "skipped".into();
                        r.note = Some("undone by an earlier restore".into());
                    }
                }
                None => {
                    if let Ok(Some(g)) =
                        s.target
                            .give_back(&s.previous, &s.new, s.applied.as_deref())
                    {
                        r.previous = g.from.to_string();
                        r.new = g.to.to_string();
                        let mut note = format!(
                            "would give back {} of the {} pages this apply added",
                            g.returned(),
                            g.added
                        );
                        if g.missing() > 0 {
                            note += &format!(
                                "; {} are gone already (the pool was lowered by someone else)",
                                g.missing()
                            );
                        }
                        r.note = Some(note);
                    }
                }
            }
        }
        rep.steps.push(r);
    }
    Ok(rep)
}

/// `JOURNAL.restored`: where a fully restored journal is kept.
pub fn archived_path(journal_path: &Path) -> PathBuf {
    let mut archived = journal_path.as_os_str().to_owned();
    archived.push(".restored");
    PathBuf::from(archived)
}

/// Why there is nothing to restore: the journal was restored already, or never written.
fn missing_journal_note(journal_path: &Path) -> String {
    let archived = archived_path(journal_path);
    if archived.exists() {
        format!(
            "{} was restored already (kept as {}): nothing to restore",
            journal_path.display(),
            archived.display()
        )
    } else {
        format!(
            "no journal at {}: nothing to restore",
            journal_path.display()
        )
    }
}

/// The report line of undoing one journal step (its previous and new values swapped), with
/// the result and observation left for the caller.
fn undo_report(s: &journal::JournalStep) -> StepReport {
    StepReport {
        step: Some(s.step),
        actuator: s.target.kind().into(),
        target: s.target.describe(),
        previous: s.new.clone(),
        new: s.previous.clone(),
        result: String::new(),
        note: None,
        observed: None,
        pages: None,
    }
}

fn restore_locked(journal_path: &Path) -> Result<RestoreReport> {
    let mut rep = RestoreReport::new(journal_path);
    if !journal_path.exists() {
        rep.notes.push(missing_journal_note(journal_path));
        return Ok(rep);
    }
    let (_, steps) = journal::read(journal_path)?;
    // opened when a step's undo must be journaled (a hugepage give-back)
    let mut j: Option<Journal> = None;
    for s in steps.iter().rev() {
        let mut r = undo_report(s);
        if s.state == State::Skipped {
            r.result = "unchanged".into();
            rep.steps.push(r);
            continue;
        }
        match give_back(journal_path, &mut j, s, &mut r) {
            Ok(true) => {
                rep.steps.push(r);
                continue;
            }
            Ok(false) => {}
            Err(e) => {
                r.result = "failed".into();
                r.note = Some(e.to_string());
                rep.failed += 1;
                rep.steps.push(r);
                continue;
            }
        }
        match s.target.rollback(&s.previous) {
            Ok(Outcome::Done(note)) => {
                r.result = "restored".into();
                r.note = note;
                // a file in a cgroup vmtune created goes away with it: nothing to read back
                if !matches!(&s.target, Target::CgroupFile(f) if f.created) {
                    r.observed = s.target.read_current().ok();
                }
            }
            Ok(Outcome::Skipped(why)) => {
                r.result = "skipped".into();
                r.note = Some(why);
            }
            Err(e) => {
                r.result = "failed".into();
                r.note = Some(e.to_string());
                rep.failed += 1;
            }
        }
        rep.steps.push(r);
    }
    if rep.failed == 0 {
        let archived = archived_path(journal_path);
        std::fs::rename(journal_path, &archived).map_err(|e| ApplyError::io(journal_path, e))?;
        if let Some(d) = journal_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(f) = std::fs::File::open(d) {
                let _ = f.sync_all();
            }
        }
        rep.archived_as = Some(archived);
    } else {
        rep.notes.push(format!(
            "{} steps failed; the journal is kept: fix the cause and run restore again",
            rep.failed
        ));
    }
    Ok(rep)
}

/// Undo a step that owns what it changed (a hugepage reservation) by giving back what it
/// added, journaled before the write; `Ok(false)`: not such a step, roll it back as usual.
/// An undo an earlier restore journaled is finished (its value written again) or, when it
/// was written, left alone.
fn give_back(
    journal_path: &Path,
    j: &mut Option<Journal>,
    s: &JournalStep,
    r: &mut StepReport,
) -> Result<bool> {
    // the pool locked while its count is read and lowered (see `apply`)
    let _pool = match &s.target {
        Target::Hugepages(h) if !h.path.exists() => {
            // the pool is gone (node offline): rollback says so
            return Ok(false);
        }
        Target::Hugepages(h) => Some(Lock::acquire_existing(&h.path, POOL_LOCK_WAIT)?),
        _ => None,
    };
    let (from, to, plan) = match &s.undo {
        Some(u) if u.done => {
            r.previous = u.from.clone();
            r.new = u.to.clone();
            r.result = "skipped".into();
            r.note = Some("undone by an earlier restore".into());
            return Ok(true);
        }
        // an earlier restore journaled this undo and stopped (crash, kill -9): write its
        // value again, as for an intended step
        Some(u) => (u.from.clone(), u.to.clone(), None),
        None => match s
            .target
            .give_back(&s.previous, &s.new, s.applied.as_deref())?
        {
            Some(g) => (g.from.to_string(), g.to.to_string(), Some(g)),
            None => return Ok(false),
        },
    };
    let before = s.target.pool().transpose()?;
    if j.is_none() {
        *j = Some(Journal::open_append(journal_path)?);
    }
    let jr = j.as_mut().expect("opened above");
    if plan.is_some() {
        jr.undoing(s.step, &from, &to)?;
    }
    r.previous = from;
    r.new = to.clone();
    match s.target.rollback(&to)? {
        Outcome::Skipped(why) => {
            r.result = "skipped".into();
            r.note = Some(why);
        }
        Outcome::Done(_) => {
            let after = s.target.pool().transpose()?;
            r.result = "restored".into();
            r.observed = after.map(|p| p.persistent().to_string());
            if let (Some(g), Some(b), Some(a)) = (plan, before, after) {
                let ret = Returned::new(&g, &b, &a);
                r.note = Some(ret.sentence());
                r.pages = Some(ret);
            } else {
                r.note = Some("the give-back an earlier restore began, written again".into());
            }
        }
    }
    jr.undone(s.step, r.note.clone())?;
    Ok(true)
}

/// Whether the journal has this IRQ (same number and name) as refused by the kernel.
fn refused_before(journal: &[journal::JournalStep], t: &Target) -> bool {
    let Target::Irq(step::Irq { irq, name, .. }) = t else {
        return false;
    };
    journal.iter().any(|s| {
        s.state == State::Skipped
            && matches!(&s.target, Target::Irq(q) if q.irq == *irq && q.name == *name)
    })
}

/// After an apply: re-route IRQs as new ones appear (VFIO vectors exist only once the guest
/// driver enables them), until the QEMU exits, the journal is restored, or `max` passes.
/// Each change goes through the same journal. `on_step` sees each step as it is made.
pub fn watch(
    plan: &Plan,
    pid: i32,
    opts: &ApplyOptions,
    poll: Duration,
    max: Option<Duration>,
    mut on_step: impl FnMut(&StepReport),
) -> Result<String> {
    let start = Instant::now();
    let irq_only = ApplyOptions {
        phases: Phases {
            hugepages: false,
            threads: false,
            irqs: true,
            shield: false,
        },
        dry_run: false,
        ..opts.clone()
    };
    loop {
        std::thread::sleep(poll);
        if !proc::process_running(&opts.paths.proc_root, pid) {
            return Ok(format!("QEMU {pid} exited"));
        }
        if max.map(|m| start.elapsed() >= m).unwrap_or(false) {
            return Ok("watch time limit reached".into());
        }
        let _lock = Lock::acquire(&journal::lock_path(&opts.journal), opts.lock_wait)?;
        if !opts.journal.exists() {
            return Ok("journal restored".into());
        }
        let (steps, _, _) = plan_steps(plan, None, &irq_only)?;
        // IRQs the kernel refused once (managed) are not asked again every poll
        let (_, done) = journal::read(&opts.journal)?;
        let steps: Vec<PlannedStep> = steps
            .into_iter()
            .filter(|s| !refused_before(&done, &s.target))
            .collect();
        if steps.is_empty() {
            continue;
        }
        let mut j = Journal::open_append(&opts.journal)?;
        let mut reps = Vec::new();
        let r = run_steps(&mut j, &steps, None, &mut reps);
        for s in &reps {
            on_step(s);
        }
        r?;
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use plan::*;
    use topo::CpuSet;

    pub(crate) fn small_plan() -> Plan {
        let cs = |s: &str| CpuSet::parse_list(s).unwrap();
        Plan {
            request: Request {
                name: Some("t".into()),
                vcpus: 2,
                memory_bytes: 64 << 20,
                devices: vec![],
                profile: Profile::Gaming,
                os: GuestOs::Linux,
                hugepages: HugepagePolicy::None,
                host_cpus: None,
                move_host_cpus: false,
                threads: plan::ThreadPolicy::Auto,
            },
            host_source: "test".into(),
            vcpus: vec![VcpuPin { vcpu: 0, cpu: 1 }, VcpuPin { vcpu: 1, cpu: 1 }],
            threads: Threads::Pack,
            idle_cpus: CpuSet::new(),
            emulator_cpus: cs("0"),
            iothread_cpus: cs(""),
            host_cpus: cs("0"),
            guest_topology: GuestTopology {
                sockets: 1,
                dies: 1,
                cores: 2,
                threads: 1,
            },
            guest_numa: vec![],
            memory: MemoryPlan {
                host_nodes: vec![0],
                hugepage_size_kb: 2048,
                pages: 0,
                pages_per_node: vec![],
            },
            devices: vec![],
            irq: IrqPlan {
                vfio_cpus: cs("1"),
                host_cpus: cs("0"),
            },
            cpu_features: CpuFeatures::default(),
            vcpu_sched: None,
            rationale: vec![],
            warnings: vec![],
        }
    }

    pub(crate) fn small_plan_json() -> String {
        serde_json::to_string(&small_plan()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::small_plan;
    use super::*;

    #[test]
    fn refuses_empty_host_and_unknown_cpus() {
        let online = CpuSet::parse_list("0-1").unwrap();
        let mut p = small_plan();
        assert!(validate(&p, &online).is_ok());
        p.host_cpus = CpuSet::new();
        let e = validate(&p, &online).unwrap_err().to_string();
        assert!(e.contains("no CPU"), "{e}");
        let mut p = small_plan();
        p.vcpus[1].cpu = 7;
        let e = validate(&p, &online).unwrap_err().to_string();
        assert!(e.contains("CPU 7"), "{e}");
        let mut p = small_plan();
        p.vcpus[1].vcpu = 0;
        assert!(validate(&p, &online).is_err());
    }

    #[test]
    fn thread_steps_match_vcpus_and_skip_noops() {
        let p = small_plan();
        let t = QemuThreads {
            pid: 100,
            vcpus: vec![(0, 101), (1, 102)],
            iothreads: vec![("io0".into(), 103)],
            emulator: vec![100, 104],
        };
        let cur = |tid: i32| {
            if tid == 104 {
                Some(("0".to_string(), 5))
            } else {
                Some(("0-1".to_string(), 5))
            }
        };
        let s = thread_steps(&p, &t, cur, Path::new("/proc")).unwrap();
        let got: Vec<(i32, String)> = s
            .iter()
            .map(|s| match &s.target {
                Target::Thread(t) => (t.tid, s.new.clone()),
                _ => unreachable!(),
            })
            .collect();
        // 104 is already on CPU 0: no step; io0 follows the emulator CPUs
        assert_eq!(
            got,
            vec![
                (101, "1".into()),
                (102, "1".into()),
                (103, "0".into()),
                (100, "0".into())
            ]
        );
        let t3 = QemuThreads {
            vcpus: vec![(0, 101), (1, 102), (2, 105)],
            ..t.clone()
        };
        assert!(thread_steps(&p, &t3, cur, Path::new("/proc")).is_err());
        let t1 = QemuThreads {
            vcpus: vec![(0, 101)],
            ..t
        };
        assert!(thread_steps(&p, &t1, cur, Path::new("/proc")).is_err());
    }

    /// A long-running writer holds only its journal's own lock: `apply` (the directory's
    /// lock) goes on beside it, and a restore of its journal is refused until it lets go.
    #[test]
    fn a_running_agents_journal_is_not_restored_and_does_not_block_apply() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("irq-boost.journal");
        let header = journal::Header {
            journal: "vmtune".into(),
            version: 1,
            created_unix: 0,
            apply_pid: std::process::id(),
            qemu_pid: None,
        };
        let own = Lock::acquire(&journal::own_lock_path(&path), Duration::from_secs(1)).unwrap();
        let _j = journal::Journal::create(&path, &header).unwrap();
        let dir = Lock::acquire(&journal::lock_path(&path), Duration::from_millis(100));
        assert!(
            dir.is_ok(),
            "the directory's lock is free while the agent runs"
        );
        drop(dir);
        let e = restore(&path, Duration::from_millis(100));
        assert!(e.is_err(), "restored under a live writer: {e:?}");
        assert!(path.exists());
        drop(own);
        let rep = restore(&path, Duration::from_millis(100)).unwrap();
        assert_eq!(rep.failed, 0);
        assert!(!path.exists() && archived_path(&path).exists());
    }

    /// A scratch sysfs/procfs with two online CPUs and node 0's 2 MiB pool at (total, free).
    fn fake_host(total: u64, free: u64) -> (tempfile::TempDir, ApplyOptions) {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("sys");
        let pool = sys.join("devices/system/node/node0/hugepages/hugepages-2048kB");
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::create_dir_all(sys.join("devices/system/cpu")).unwrap();
        std::fs::write(sys.join("devices/system/cpu/online"), "0-1\n").unwrap();
        std::fs::write(pool.join("nr_hugepages"), format!("{total}\n")).unwrap();
        std::fs::write(pool.join("free_hugepages"), format!("{free}\n")).unwrap();
        let mut o = ApplyOptions::new(d.path().join("run/journal"));
        o.paths = HostPaths {
            proc_root: d.path().join("proc"),
            sys_root: sys,
        };
        o.phases = Phases {
            hugepages: true,
            ..Phases::NONE
        };
        (d, o)
    }

    fn plan_with_pages(pages: u64) -> Plan {
        let mut p = small_plan();
        p.memory.pages = pages;
        p.memory.pages_per_node = vec![pages];
        p
    }

    /// Two VMs prepared before either starts (the libvirt hook's `prepare` with a claim
    /// ledger): the second prepare does not count the first one's pages, still free until
    /// its QEMU maps them, as its own; a claim ends when its journal is restored or its QEMU
    /// holds the pages, and an unreadable claim file is said, not counted.
    #[test]
    fn a_prepare_does_not_count_pages_promised_to_another_vm() {
        let (d, base) = fake_host(0, 0);
        let pool = base
            .paths
            .sys_root
            .join("devices/system/node/node0/hugepages/hugepages-2048kB");
        let set_pool = |total: u64, free: u64| {
            std::fs::write(pool.join("nr_hugepages"), format!("{total}\n")).unwrap();
            std::fs::write(pool.join("free_hugepages"), format!("{free}\n")).unwrap();
        };
        let run_dir = d.path().join("run");
        let pid_dir = d.path().join("libvirt");
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::create_dir_all(&pid_dir).unwrap();
        let prepare = |owner: &str, pages: u64| {
            let mut o = base.clone();
            o.journal = run_dir.join(format!("{owner}.journal"));
            o.append = true;
            o.claims = Some(ClaimLedger {
                dir: run_dir.clone(),
                owner: owner.into(),
                pid_dir: Some(pid_dir.clone()),
            });
            apply(&plan_with_pages(pages), None, &o).unwrap()
        };
        // A: the pool grows 0 -> 6 (the kernel frees 6 pages), and A's claim is left
        let a = prepare("vm-a", 6);
        assert_eq!(a.steps.len(), 1);
        assert_eq!(a.steps[0].new, "6");
        set_pool(6, 6);
        let claim = hugepages::claim_path(&run_dir, "vm-a");
        assert!(
            claim.exists()
                && a.notes
                    .iter()
                    .any(|n| n.contains("6 pages claimed for vm-a"))
        );
        // B before A starts: 6 free, all promised to A, so B adds its 4
        let b = prepare("vm-b", 4);
        assert_eq!(b.steps.len(), 1, "{:?}", b.notes);
        assert_eq!(
            (b.steps[0].previous.as_str(), b.steps[0].new.as_str()),
            ("6", "10")
        );
        assert!(
            b.notes
                .iter()
                .any(|n| n.contains("6 2048 kB pages are promised to vm-a")),
            "{:?}",
            b.notes
        );
        // without the ledger (as before claims) B would have added nothing
        let mut plain = base.clone();
        plain.dry_run = true;
        assert!(apply(&plan_with_pages(4), None, &plain)
            .unwrap()
            .steps
            .is_empty());
        set_pool(10, 10);
        // A's QEMU holds its 6 pages (reserved at its mmap): A's claim has ended, and C
        // counts only B's
        std::fs::write(pid_dir.join("vm-a.pid"), "4242\n").unwrap();
        let p = base.paths.proc_root.join("4242");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("smaps"),
            "7f3a40000000-7f3a40c00000 rw-s 00000000 00:01 2048 /memfd:m0 (deleted)\nSize: 12288 kB\nKernelPageSize: 2048 kB\n",
        )
        .unwrap();
        set_pool(10, 4);
        let mut dry = base.clone();
        dry.dry_run = true;
        dry.claims = Some(ClaimLedger {
            dir: run_dir.clone(),
            owner: "vm-c".into(),
            pid_dir: Some(pid_dir.clone()),
        });
        let c = apply(&plan_with_pages(2), None, &dry).unwrap();
        assert!(claim.exists(), "a dry run removed a claim");
        assert!(c
            .notes
            .iter()
            .any(|n| n.contains("claim of vm-a ended (its QEMU holds its pages)")));
        assert_eq!(c.steps.len(), 1, "{:?}", c.notes);
        assert_eq!(c.steps[0].new, "12", "4 free, 4 promised to vm-b: 2 more");
        // B's journal restored: its claim lapses; a file that is not a claim is said
        std::fs::rename(
            run_dir.join("vm-b.journal"),
            run_dir.join("vm-b.journal.restored"),
        )
        .unwrap();
        std::fs::write(run_dir.join("junk.hugepage-claim.json"), "{not json").unwrap();
        let c = apply(&plan_with_pages(2), None, &dry).unwrap();
        assert!(c.steps.is_empty(), "{:?} {:?}", c.steps, c.notes);
        assert!(c
            .notes
            .iter()
            .any(|n| n.contains("claim of vm-b ended (its journal was restored)")));
        assert!(c
            .notes
            .iter()
            .any(|n| n.contains("junk.hugepage-claim.json is not a claim")));
        // a dry run writes no claim
        assert!(!hugepages::claim_path(&run_dir, "vm-c").exists());
    }

    /// The dry run's hugepage decision, whatever the pool holds: a step for exactly the
    /// missing pages when fewer than needed are free, else none and a note with the count
    /// it read. (0, 600 and 8192 free are the pools of a bare host, a VFIO desktop and a
    /// GPU server.)
    #[test]
    fn hugepage_decision_follows_the_pool_it_reads() {
        for (total, free) in [
            (0, 0),
            (600, 600),
            (8192, 8192),
            (10, 3),
            (600, 2),
            (8192, 0),
        ] {
            for want in [1u64, 4, 600, 9000] {
                let (_d, mut o) = fake_host(total, free);
                o.dry_run = true;
                let rep = apply(&plan_with_pages(want), None, &o).unwrap();
                let steps: Vec<&StepReport> = rep
                    .steps
                    .iter()
                    .filter(|s| s.actuator == "hugepages")
                    .collect();
                if free >= want {
                    assert!(steps.is_empty(), "{total}/{free} for {want}: {steps:?}");
                    let note = format!("node 0: {free} free 2048 kB pages already, {want} needed");
                    assert!(rep.notes.contains(&note), "{:?}", rep.notes);
                } else {
                    assert_eq!(steps.len(), 1, "{total}/{free} for {want}");
                    assert_eq!(steps[0].previous, total.to_string());
                    assert_eq!(steps[0].new, (total + want - free).to_string());
                    assert_eq!(steps[0].result, "planned");
                }
            }
        }
    }

    proptest::proptest! {
        // each case fsyncs a journal: a few dozen cases keep this under a few seconds
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
        /// Apply then restore on a scratch pool: the pool grows by exactly the missing pages
        /// and comes back to exactly what it was.
        #[test]
        fn hugepage_apply_then_restore_is_exact(total in 0u64..20_000, used in 0u64..20_000, want in 1u64..20_000) {
            let free = total.saturating_sub(used);
            let (_d, o) = fake_host(total, free);
            let nr = o.paths.sys_root.join("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
            let rep = apply(&plan_with_pages(want), None, &o).unwrap();
            let want_nr = if free >= want { total } else { total + want - free };
            proptest::prop_assert_eq!(read_trim(&nr).unwrap(), want_nr.to_string());
            proptest::prop_assert_eq!(rep.steps.len(), usize::from(free < want));
            let r = restore(&o.journal, Duration::from_secs(1)).unwrap();
            proptest::prop_assert_eq!(r.failed, 0);
            proptest::prop_assert_eq!(read_trim(&nr).unwrap(), total.to_string());
        }
    }

    /// With a running QEMU (its guest RAM allocated when it started) the hugepages phase
    /// changes no pool, whatever the pool holds, and says what the QEMU holds against the
    /// plan; a QEMU that is gone is refused with nothing changed.
    #[test]
    fn a_running_qemu_gets_no_pool_change_only_a_note() {
        let smaps = |kb: u64| {
            format!(
                "7f3a40000000-7f3a44000000 rw-s 00000000 00:01 2048 /memfd:m0 (deleted)\nSize: {kb} kB\nKernelPageSize: 2048 kB\nVmFlags: rd wr sh ht\n"
            )
        };
        for (total, free, held, want) in
            [(0u64, 0u64, 32u64, 32u64), (32, 0, 32, 32), (40, 8, 16, 32)]
        {
            let (_d, mut o) = fake_host(total, free);
            let nr = o
                .paths
                .sys_root
                .join("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
            let pid_dir = o.paths.proc_root.join("4242");
            std::fs::create_dir_all(&pid_dir).unwrap();
            std::fs::write(pid_dir.join("smaps"), smaps(held * 2048)).unwrap();
            std::fs::write(
                pid_dir.join("numa_maps"),
                format!("7f3a40000000 bind:0 file=/memfd:m0 huge dirty={held} N0={held} kernelpagesize_kB=2048\n"),
            )
            .unwrap();
            o.phases = Phases {
                hugepages: true,
                ..Phases::NONE
            };
            let rep = apply(&plan_with_pages(want), Some(&QemuRef::Pid(4242)), &o).unwrap();
            assert!(rep.steps.is_empty(), "{:?}", rep.steps);
            assert_eq!(read_trim(&nr).unwrap(), total.to_string());
            let first = rep.notes.first().cloned().unwrap_or_default();
            assert!(
                first.contains("QEMU 4242 is running")
                    && first.contains(&format!(
                        "it holds {held} pages of 2048 kB (touched: {held} on node 0)"
                    ))
                    && first.contains(&format!("the plan asks for {want} ({want} on node 0)")),
                "{first}"
            );
            let short = rep
                .notes
                .iter()
                .any(|n| n.contains(&format!("holds {held} of the {want}")));
            assert_eq!(short, held < want, "{:?}", rep.notes);
            let _ = std::fs::remove_file(&o.journal);
        }
        let (_d, mut o) = fake_host(0, 0);
        o.phases = Phases {
            hugepages: true,
            ..Phases::NONE
        };
        // a kernel without numa_maps: the pages, and the nodes said to be unknown
        let pid_dir = o.paths.proc_root.join("4244");
        std::fs::create_dir_all(&pid_dir).unwrap();
        std::fs::write(pid_dir.join("smaps"), smaps(4 * 2048)).unwrap();
        let rep = apply(&plan_with_pages(4), Some(&QemuRef::Pid(4244)), &o).unwrap();
        assert!(
            rep.notes[0].contains("holds 4 pages of 2048 kB (which nodes hold them is not known"),
            "{:?}",
            rep.notes
        );
        std::fs::remove_file(&o.journal).unwrap();
        let e = apply(&plan_with_pages(4), Some(&QemuRef::Pid(4243)), &o).unwrap_err();
        assert!(e.to_string().contains("4243"), "{e}");
        assert!(!o.journal.exists());
        // a node the host lacks is refused as without a QEMU
        let mut p = plan_with_pages(4);
        p.memory.host_nodes = vec![5];
        let e = apply(&p, Some(&QemuRef::Pid(4243)), &o).unwrap_err();
        assert!(e.to_string().contains("NUMA node 5"), "{e}");
        assert!(!o.journal.exists());
    }

    /// The pool is read under its lock: an apply waits while another holds the pool, and
    /// then grows it from what the pool holds after the other is done, not from before.
    #[test]
    fn an_apply_reads_the_pool_only_under_its_lock() {
        let (_d, o) = fake_host(0, 0);
        let nr = o
            .paths
            .sys_root
            .join("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
        let held = Lock::acquire_existing(&nr, Duration::from_secs(1)).unwrap();
        let o2 = o.clone();
        let t = std::thread::spawn(move || apply(&plan_with_pages(10), None, &o2));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!o.journal.exists(), "applied while the pool was locked");
        // what another apply did meanwhile
        std::fs::write(&nr, "7\n").unwrap();
        drop(held);
        let rep = t.join().unwrap().unwrap();
        assert_eq!(rep.steps.len(), 1);
        assert_eq!(rep.steps[0].previous, "7");
        assert_eq!(rep.steps[0].new, "17");
        // a restore gives back its 10 pages, leaving the other's 7
        restore(&o.journal, Duration::from_secs(1)).unwrap();
        assert_eq!(read_trim(&nr).unwrap(), "7");
    }

    /// Applies with different journals growing one pool at once: every apply's pages are
    /// added (none computed from a count another was changing), and restoring all of them,
    /// in any order, brings the pool back to where it was.
    #[test]
    fn concurrent_applies_with_their_own_journals_add_every_page() {
        let (d, o) = fake_host(3, 0);
        let nr = o
            .paths
            .sys_root
            .join("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
        let wants = [4u64, 10, 1, 7, 2, 5];
        let opts: Vec<ApplyOptions> = (0..wants.len())
            .map(|i| {
                let mut oi = o.clone();
                oi.journal = d.path().join(format!("run{i}/journal"));
                oi
            })
            .collect();
        let threads: Vec<_> = wants
            .iter()
            .zip(opts.clone())
            .map(|(&w, oi)| std::thread::spawn(move || apply(&plan_with_pages(w), None, &oi)))
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let total: u64 = wants.iter().sum();
        assert_eq!(read_trim(&nr).unwrap(), (3 + total).to_string());
        for oi in opts.iter().rev().step_by(2).chain(opts.iter().step_by(2)) {
            let r = restore(&oi.journal, Duration::from_secs(5)).unwrap();
            assert_eq!(r.failed, 0);
        }
        assert_eq!(read_trim(&nr).unwrap(), "3");
    }

    #[test]
    fn a_missing_journal_is_named() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join("j");
        let r = restore(&j, Duration::from_secs(1)).unwrap();
        assert_eq!(
            r.notes,
            vec![format!("no journal at {}: nothing to restore", j.display())]
        );
        std::fs::write(archived_path(&j), "").unwrap();
        let r = restore_dry_run(&j).unwrap();
        assert!(r.notes[0].contains("restored already"), "{:?}", r.notes);
        assert!(r.notes[0].contains(&archived_path(&j).display().to_string()));
    }

    #[test]
    fn masks_keep_the_kernels_spelling() {
        let c = |l: &str| CpuSet::parse_list(l).unwrap();
        assert_eq!(mask_like(&c("0"), "3"), "1");
        assert_eq!(mask_like(&c("0-3"), "ff,ffffffff"), "00,0000000f");
        assert_eq!(mask_like(&c("0,39"), "ff,ffffffff"), "80,00000001");
        assert_eq!(mask_like(&c("0-1"), "00000003"), "00000003");
        assert_eq!(mask_like(&c("0"), "ffffffff,ffffffff"), "00000000,00000001");
        // every spelling reads back as the same CPUs
        for (cpus, cur) in [("0", "3"), ("0-3", "ff,ffffffff"), ("5", "fff")] {
            let m = mask_like(&c(cpus), cur);
            assert_eq!(CpuSet::parse_mask(&m).unwrap(), c(cpus), "{m}");
            assert_eq!(m.split(',').count(), cur.split(',').count(), "{m}");
        }
    }

    #[test]
    fn hugepage_demand_per_node() {
        let mut p = small_plan();
        assert!(hugepage_demand(&p).unwrap().is_empty());
        p.memory.pages = 32;
        assert_eq!(hugepage_demand(&p).unwrap(), vec![(0, 32)]);
        p.memory.host_nodes = vec![0, 1];
        assert!(hugepage_demand(&p).is_err());
        p.memory.pages_per_node = vec![16, 16];
        assert_eq!(hugepage_demand(&p).unwrap(), vec![(0, 16), (1, 16)]);
    }

    #[test]
    fn phases_parse() {
        assert_eq!(
            Phases::parse("irqs").unwrap(),
            Phases {
                irqs: true,
                ..Phases::NONE
            }
        );
        assert!(Phases::parse("bogus").is_err());
        assert!(Phases::parse("").is_err());
    }
}

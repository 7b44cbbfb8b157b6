//! What one change touches ([`Target`]), and the [`Actuator`] contract every target kind
//! fulfils: describe, read the current value, apply a new one, verify, roll back.
//!
//! A `Target` is stored in the journal, so rollback works from the journal alone (after a
//! crash, in another process). Values are strings in the spelling of the file they belong to
//! (`0-3,8` lists, `ff` masks, page counts, cgroup paths).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use topo::CpuSet;

use crate::error::{read_trim, write_value, ApplyError, Result};
use crate::hugepages::{self, GiveBack, Pool};
use crate::libvirt::Virsh;
use crate::sched::{self, SchedState};
use crate::{proc, shield};

/// Which side of the plan an IRQ belongs to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IrqClass {
    /// An interrupt of one of the plan's passed-through devices: goes to the guest CPUs.
    Vfio,
    /// Any other movable interrupt: goes to the host CPUs.
    Host,
}

/// A task moved between cgroups, with what is needed to put it back exactly.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MovedTask {
    /// Thread id (cgroup v1 `tasks`) or process id (v2 `cgroup.procs`).
    pub id: i32,
    /// `starttime` from /proc/ID/stat, to tell a reused id from the original task.
    pub start_time: u64,
    /// The cgroup directory it came from.
    pub from: PathBuf,
    /// Each thread's `Cpus_allowed_list` before the move (cpuset attach rewrites it).
    pub threads: Vec<ThreadCpus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadCpus {
    pub tid: i32,
    pub cpus: String,
}

/// One thing a step changes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "actuator", rename_all = "snake_case")]
pub enum Target {
    /// `nr_hugepages` of one size on one NUMA node. Values are persistent page counts
    /// (surplus pages not counted; see [`crate::hugepages`]).
    Hugepages {
        node: u32,
        size_kb: u64,
        path: PathBuf,
        /// `/proc/sys/vm/compact_memory`, written when the reservation falls short.
        compact: PathBuf,
        /// Free pages the plan asked for on this node.
        #[serde(default)]
        asked: u64,
        /// The size's `resv_hugepages` (pages mappings reserved, counted in
        /// `free_hugepages`), to say how many free pages the VM can take.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reserved: Option<PathBuf>,
        /// Restore gives back only the pages this step added, from whatever the pool holds
        /// then ([`crate::hugepages`]). Journals written before this field have `false`:
        /// their restore writes `previous` back.
        #[serde(default)]
        own_pages: bool,
    },
    /// CPU affinity of one QEMU thread (`sched_setaffinity`).
    Thread {
        pid: i32,
        tid: i32,
        start_time: u64,
        /// `vcpu 3`, `emulator`, `iothread iothread0`.
        role: String,
        /// Where /proc is (to read the thread back).
        proc_root: PathBuf,
    },
    /// Scheduling attributes of one thread (`sched_setattr`): policy, nice, real-time
    /// priority and EEVDF slice, in [`crate::sched::SchedState`]'s spelling.
    ThreadSched {
        pid: i32,
        tid: i32,
        start_time: u64,
        role: String,
        proc_root: PathBuf,
    },
    /// `/proc/irq/N/smp_affinity_list`.
    Irq {
        irq: u32,
        path: PathBuf,
        /// The action name (`vfio-msix[0](0000:01:00.0)`, `virtio2-input.0`).
        name: String,
        class: IrqClass,
        /// `effective_affinity_list` before the change, to put the vector back on the same
        /// CPU on rollback.
        previous_effective: Option<String>,
    },
    /// A file holding a hex CPU mask (`/proc/irq/default_smp_affinity`,
    /// `/sys/devices/virtual/workqueue/cpumask`).
    MaskFile { path: PathBuf, what: String },
    /// A cgroup file holding a list (`cpuset.cpus`, `cpuset.mems`).
    CgroupFile {
        path: PathBuf,
        /// In a cgroup vmtune created: undone by removing the cgroup, not by a write.
        #[serde(default)]
        created: bool,
    },
    /// A controller enabled in `cgroup.subtree_control` (v2). Values `on`/`off`.
    CgroupController { path: PathBuf, controller: String },
    /// A cgroup directory vmtune creates. Values `absent`/`present`.
    CgroupDir {
        path: PathBuf,
        /// `tasks` (v1) or `cgroup.procs` (v2): how to empty it on rollback.
        procs_file: String,
    },
    /// Tasks moved into `dest`. Values are `origin` and the destination path.
    CgroupTasks {
        dest: PathBuf,
        procs_file: String,
        tasks: Vec<MovedTask>,
        proc_root: PathBuf,
    },
    /// A systemd unit property set with `systemctl set-property --runtime`.
    SystemdProperty { unit: String, property: String },
    /// A scratch libvirt domain (`bench matrix`), defined from `xml`. Values
    /// `absent`/`defined`; undone by destroying and undefining it, then removing `files`.
    LibvirtDomain {
        /// The connection (`virsh -c`), `None` for virsh's default.
        uri: Option<String>,
        name: String,
        xml: PathBuf,
        /// Files made for it (disk overlays, an NVRAM copy), removed with it. Journals
        /// written before this field have none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<PathBuf>,
    },
}

/// A change to make: the target, the value now, the value wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    pub target: Target,
    pub previous: String,
    pub new: String,
}

impl PlannedStep {
    pub fn new(target: Target, previous: impl Into<String>, new: impl Into<String>) -> Self {
        PlannedStep {
            target,
            previous: previous.into(),
            new: new.into(),
        }
    }
}

/// What `apply`/`rollback` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Changed (with an optional remark, e.g. hugepages got/asked).
    Done(Option<String>),
    /// Not changed, for an expected reason that does not fail the apply.
    Skipped(String),
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub ok: bool,
    pub observed: String,
}

/// apply / verify / rollback for one target (the tuned model).
pub trait Actuator {
    /// One line: what this changes.
    fn describe(&self) -> String;
    /// The value now.
    fn read_current(&self) -> Result<String>;
    /// Make the change.
    fn apply(&self, new: &str) -> Result<Outcome>;
    /// Read back and compare with what was asked.
    fn verify(&self, new: &str) -> Result<Verified>;
    /// Put the previous value back. Idempotent; a target that no longer exists is skipped.
    /// (A hugepage step that owns its pages is undone with [`Target::give_back`]'s value.)
    fn rollback(&self, previous: &str) -> Result<Outcome>;
}

impl Target {
    /// Short actuator name (the JSON `actuator` tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Hugepages { .. } => "hugepages",
            Target::Thread { .. } => "thread",
            Target::ThreadSched { .. } => "thread_sched",
            Target::Irq { .. } => "irq",
            Target::MaskFile { .. } => "mask_file",
            Target::CgroupFile { .. } => "cgroup_file",
            Target::CgroupController { .. } => "cgroup_controller",
            Target::CgroupDir { .. } => "cgroup_dir",
            Target::CgroupTasks { .. } => "cgroup_tasks",
            Target::SystemdProperty { .. } => "systemd_property",
            Target::LibvirtDomain { .. } => "libvirt_domain",
        }
    }
}

/// `sched_setattr` of a journal value; a thread that exited is skipped.
fn set_sched(tid: i32, value: &str) -> Result<Outcome> {
    let st =
        SchedState::parse(value).map_err(|m| ApplyError::parse(Path::new("thread_sched"), m))?;
    match sched::set(tid, &st) {
        Ok(()) => Ok(Outcome::Done(None)),
        Err(e) if e.raw_os_error() == Some(libc_errno::ESRCH) => {
            Ok(Outcome::Skipped(format!("thread {tid} exited")))
        }
        Err(e) => Err(ApplyError::io(
            format!("sched_setattr(thread {tid}, {value})"),
            e,
        )),
    }
}

fn same_cpus(a: &str, b: &str) -> bool {
    match (CpuSet::parse_list(a), CpuSet::parse_list(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

fn same_mask(a: &str, b: &str) -> bool {
    match (CpuSet::parse_mask(a), CpuSet::parse_mask(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// errno values the kernel uses to refuse an affinity change it will never accept
/// (managed IRQs, per-CPU interrupts, chips without affinity support).
fn is_refusal(e: &ApplyError) -> bool {
    matches!(e.errno(), Some(libc_errno::EIO) | Some(libc_errno::EPERM))
}

/// The few errno numbers we look at (Linux values; avoids a libc dependency).
pub(crate) mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EIO: i32 = 5;
    pub const EBUSY: i32 = 16;
    pub const EINVAL: i32 = 22;
}

impl Actuator for Target {
    fn describe(&self) -> String {
        match self {
            Target::Hugepages {
                node,
                size_kb,
                path,
                ..
            } => {
                format!("hugepages {size_kb} kB on node {node} ({})", path.display())
            }
            Target::Thread { pid, tid, role, .. } => {
                format!("affinity of QEMU {pid} thread {tid} ({role})")
            }
            Target::ThreadSched { pid, tid, role, .. } => {
                format!("scheduling of QEMU {pid} thread {tid} ({role})")
            }
            Target::Irq {
                irq, name, class, ..
            } => {
                let c = match class {
                    IrqClass::Vfio => "vfio",
                    IrqClass::Host => "host",
                };
                format!("IRQ {irq} {name} [{c}] smp_affinity_list")
            }
            Target::MaskFile { path, what } => format!("{what} ({})", path.display()),
            Target::CgroupFile { path, .. } => format!("cgroup {}", path.display()),
            Target::CgroupController { path, controller } => {
                format!("controller {controller} in {}", path.display())
            }
            Target::CgroupDir { path, .. } => format!("cgroup directory {}", path.display()),
            Target::CgroupTasks { dest, tasks, .. } => {
                format!("move {} host tasks into {}", tasks.len(), dest.display())
            }
            Target::SystemdProperty { unit, property } => format!("systemd {unit} {property}="),
            Target::LibvirtDomain { uri, name, .. } => format!(
                "libvirt domain {name} (scratch copy){}",
                uri.as_deref()
                    .map(|u| format!(" on {u}"))
                    .unwrap_or_default()
            ),
        }
    }

    fn read_current(&self) -> Result<String> {
        match self {
            Target::Hugepages { path, .. } => Ok(pool_of(path)?.persistent().to_string()),
            Target::Thread {
                pid,
                tid,
                proc_root,
                ..
            } => proc::thread_cpus(proc_root, *pid, *tid),
            Target::ThreadSched { tid, .. } => sched::get(*tid, sched::base_slice_ns())
                .map(|s| s.to_value())
                .map_err(|e| ApplyError::io(format!("sched_getattr(thread {tid})"), e)),
            Target::Irq { path, .. }
            | Target::MaskFile { path, .. }
            | Target::CgroupFile { path, .. } => read_trim(path),
            Target::CgroupController { path, controller } => {
                let v = read_trim(path)?;
                Ok(if v.split_whitespace().any(|c| c == controller) {
                    "on"
                } else {
                    "off"
                }
                .into())
            }
            Target::CgroupDir { path, .. } => {
                Ok(if path.is_dir() { "present" } else { "absent" }.into())
            }
            Target::CgroupTasks { .. } => Ok("origin".into()),
            Target::SystemdProperty { unit, property } => shield::systemctl_show(unit, property),
            Target::LibvirtDomain { uri, name, .. } => {
                let present = Virsh::new(uri.clone()).state(name)?.is_some();
                Ok(if present { "defined" } else { "absent" }.into())
            }
        }
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        match self {
            Target::Hugepages {
                path,
                compact,
                asked,
                node,
                reserved,
                ..
            } => {
                let want: u64 = new
                    .parse()
                    .map_err(|_| ApplyError::parse(path, format!("bad page count {new:?}")))?;
                write_value(path, new)?;
                let mut got = pool_of(path)?.persistent();
                let mut compacted = false;
                if got < want && compact.exists() {
                    // fragmentation: compact memory, then ask again
                    write_value(compact, "1")?;
                    compacted = true;
                    write_value(path, new)?;
                    got = pool_of(path)?.persistent();
                }
                let resv = reserved
                    .as_deref()
                    .and_then(|r| read_count(r).ok())
                    .unwrap_or(0);
                let avail = pool_of(path).map_or(got, |p| p.available(resv));
                Ok(Outcome::Done(Some(format!(
                    "node {node}: {} of {asked} pages free for the VM (nr_hugepages {got} of {want}){}",
                    avail.min(*asked),
                    if compacted { ", after compacting memory" } else { "" }
                ))))
            }
            Target::Thread { tid, .. } => match proc::set_thread_cpus(*tid, new) {
                Ok(()) => Ok(Outcome::Done(None)),
                Err(e) if e.errno() == Some(libc_errno::ESRCH) => {
                    Ok(Outcome::Skipped(format!("thread {tid} exited")))
                }
                Err(e) => Err(e),
            },
            Target::ThreadSched { tid, .. } => set_sched(*tid, new),
            Target::Irq { path, irq, .. } => match write_value(path, new) {
                Ok(()) => Ok(Outcome::Done(None)),
                Err(e) if is_refusal(&e) => Ok(Outcome::Skipped(format!(
                    "IRQ {irq} refused the change (managed or per-CPU interrupt: {})",
                    e.errno().map(errno_name).unwrap_or("error")
                ))),
                Err(e) => Err(e),
            },
            Target::MaskFile { path, .. } | Target::CgroupFile { path, .. } => {
                write_value(path, new).map(|()| Outcome::Done(None))
            }
            Target::CgroupController { path, controller } => {
                let sign = if new == "on" { '+' } else { '-' };
                write_value(path, &format!("{sign}{controller}")).map(|()| Outcome::Done(None))
            }
            Target::CgroupDir { path, .. } => {
                if new == "present" {
                    std::fs::create_dir(path).map_err(|e| ApplyError::io(path, e))?;
                    Ok(Outcome::Done(None))
                } else {
                    self.rollback("absent")
                }
            }
            Target::CgroupTasks {
                dest,
                procs_file,
                tasks,
                proc_root,
            } => {
                let file = dest.join(procs_file);
                let (mut moved, mut skipped) = (0usize, 0usize);
                for t in tasks {
                    if !proc::task_alive(proc_root, t.id, t.start_time) {
                        skipped += 1;
                        continue;
                    }
                    match write_value(&file, &t.id.to_string()) {
                        Ok(()) => moved += 1,
                        // exited meanwhile, or a kernel thread bound to CPUs
                        Err(e)
                            if matches!(
                                e.errno(),
                                Some(libc_errno::ESRCH) | Some(libc_errno::EINVAL)
                            ) =>
                        {
                            skipped += 1
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(Outcome::Done(Some(format!(
                    "moved {moved} tasks, {skipped} skipped (exited or not movable)"
                ))))
            }
            Target::SystemdProperty { unit, property } => {
                shield::systemctl_set(unit, property, new).map(|()| Outcome::Done(None))
            }
            Target::LibvirtDomain { uri, xml, .. } => {
                if new == "defined" {
                    Virsh::new(uri.clone()).define(xml)?;
                    Ok(Outcome::Done(None))
                } else {
                    self.rollback("absent")
                }
            }
        }
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = match self {
            Target::Hugepages { .. } => {
                let want: u64 = new.parse().unwrap_or(u64::MAX);
                observed.parse::<u64>().map(|g| g >= want).unwrap_or(false)
            }
            Target::Thread { .. } | Target::Irq { .. } | Target::CgroupFile { .. } => {
                same_cpus(&observed, new)
            }
            Target::ThreadSched { .. } => {
                SchedState::parse(&observed).ok() == SchedState::parse(new).ok()
            }
            Target::MaskFile { .. } => same_mask(&observed, new),
            Target::CgroupController { .. }
            | Target::CgroupDir { .. }
            | Target::SystemdProperty { .. }
            | Target::LibvirtDomain { .. } => observed == new,
            Target::CgroupTasks { .. } => true,
        };
        let observed = match self {
            Target::Irq { path, .. } => {
                let eff = path.with_file_name("effective_affinity_list");
                match read_trim(&eff) {
                    Ok(e) => format!("{observed} (effective {e})"),
                    Err(_) => observed,
                }
            }
            _ => observed,
        };
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        match self {
            Target::Thread {
                pid,
                tid,
                start_time,
                proc_root,
                ..
            }
            | Target::ThreadSched {
                pid,
                tid,
                start_time,
                proc_root,
                ..
            } if !proc::thread_alive(proc_root, *pid, *tid, *start_time) => Ok(Outcome::Skipped(
                format!("thread {tid} of {pid} no longer exists (QEMU exited)"),
            )),
            Target::ThreadSched { tid, .. } => set_sched(*tid, previous),
            Target::Thread { tid, .. } => match proc::set_thread_cpus(*tid, previous) {
                Ok(()) => Ok(Outcome::Done(None)),
                Err(e) if e.errno() == Some(libc_errno::ESRCH) => {
                    Ok(Outcome::Skipped(format!("thread {tid} exited")))
                }
                Err(e) => Err(e),
            },
            Target::Irq {
                irq,
                path,
                name,
                previous_effective,
                ..
            } => {
                let dir = path.parent().unwrap_or(Path::new("/"));
                if !path.exists() {
                    return Ok(Outcome::Skipped(format!("IRQ {irq} no longer exists")));
                }
                // /proc/irq/N/<action>/ exists while a handler is registered: if the number
                // now serves another device, leave it alone
                let actions = proc::irq_actions(dir);
                let ours = name
                    .split(',')
                    .map(str::trim)
                    .any(|n| actions.iter().any(|a| a == n));
                if !actions.is_empty() && !ours {
                    return Ok(Outcome::Skipped(format!(
                        "IRQ {irq} now belongs to {}, not {name}",
                        actions.join(",")
                    )));
                }
                // put the vector back on the CPU it was on: x86 keeps the current target
                // CPU when it is still in the new mask
                if let Some(eff) = previous_effective {
                    let effp = path.with_file_name("effective_affinity_list");
                    let now = read_trim(&effp).ok();
                    if let (Ok(e), Ok(prev)) =
                        (CpuSet::parse_list(eff), CpuSet::parse_list(previous))
                    {
                        if e.len() == 1
                            && e.is_subset(&prev)
                            && now.as_deref().map(|n| !same_cpus(n, eff)).unwrap_or(false)
                        {
                            let _ = write_value(path, eff);
                        }
                    }
                }
                match write_value(path, previous) {
                    Ok(()) => Ok(Outcome::Done(None)),
                    Err(e) if is_refusal(&e) => {
                        Ok(Outcome::Skipped(format!("IRQ {irq} refuses changes")))
                    }
                    Err(e) => Err(e),
                }
            }
            Target::CgroupDir { path, procs_file } => {
                if previous == "present" {
                    return Ok(Outcome::Done(None));
                }
                shield::remove_cgroup(path, procs_file).map(|()| Outcome::Done(None))
            }
            Target::CgroupTasks {
                procs_file,
                tasks,
                proc_root,
                ..
            } => {
                let (mut back, mut gone) = (0usize, 0usize);
                for t in tasks {
                    if !proc::task_alive(proc_root, t.id, t.start_time) {
                        gone += 1;
                        continue;
                    }
                    let file = t.from.join(procs_file);
                    match write_value(&file, &t.id.to_string()) {
                        Ok(()) => {}
                        Err(e) if matches!(e.errno(), Some(libc_errno::ESRCH)) => {
                            gone += 1;
                            continue;
                        }
                        Err(e) if e.errno() == Some(libc_errno::EINVAL) => {}
                        Err(e) => return Err(e),
                    }
                    back += 1;
                    // cpuset attach rewrote the affinity: put each thread's own mask back
                    for th in &t.threads {
                        if let Ok(now) = proc::thread_cpus(proc_root, t.id_pid(proc_root), th.tid) {
                            if !same_cpus(&now, &th.cpus) {
                                let _ = proc::set_thread_cpus(th.tid, &th.cpus);
                            }
                        }
                    }
                }
                Ok(Outcome::Done(Some(format!(
                    "moved {back} tasks back, {gone} had exited"
                ))))
            }
            Target::Hugepages { path, .. } => {
                if !path.exists() {
                    return Ok(Outcome::Skipped(format!(
                        "{} no longer exists",
                        path.display()
                    )));
                }
                write_value(path, previous).map(|()| Outcome::Done(None))
            }
            Target::CgroupFile { created: true, .. } => Ok(Outcome::Done(Some(
                "undone with the removal of its cgroup".into(),
            ))),
            Target::MaskFile { path, .. } | Target::CgroupFile { path, .. } => {
                if !path.exists() {
                    return Ok(Outcome::Skipped(format!(
                        "{} no longer exists",
                        path.display()
                    )));
                }
                write_value(path, previous).map(|()| Outcome::Done(None))
            }
            Target::CgroupController { .. } => {
                if !matches!(self.read_current(), Ok(ref v) if v == previous) {
                    self.apply(previous)?;
                }
                Ok(Outcome::Done(None))
            }
            Target::SystemdProperty { unit, property } => {
                shield::systemctl_set(unit, property, previous).map(|()| Outcome::Done(None))
            }
            Target::LibvirtDomain {
                uri, name, files, ..
            } => {
                if previous != "absent" {
                    return Ok(Outcome::Skipped(format!(
                        "{name} was {previous} before: left as it is"
                    )));
                }
                let removed = Virsh::new(uri.clone()).remove(name)?;
                let mut gone = 0;
                for f in files {
                    // a directory goes once empty (the run's working directory, listed last)
                    let r = if f.is_dir() {
                        std::fs::remove_dir(f)
                    } else {
                        std::fs::remove_file(f)
                    };
                    match r {
                        Ok(()) => gone += 1,
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::NotFound
                                    | std::io::ErrorKind::DirectoryNotEmpty
                            ) => {}
                        Err(e) => return Err(ApplyError::io(f, e)),
                    }
                }
                let files = match gone {
                    0 => String::new(),
                    1 => ", its file removed".into(),
                    n => format!(", its {n} files removed"),
                };
                if removed {
                    Ok(Outcome::Done(Some(format!(
                        "{name} destroyed and undefined{files}"
                    ))))
                } else if gone > 0 {
                    Ok(Outcome::Done(Some(format!("{name} was gone{files}"))))
                } else {
                    Ok(Outcome::Skipped(format!("{name} is already gone")))
                }
            }
        }
    }
}

impl Target {
    /// How a restore undoes this step when writing `previous` back would be wrong: for a
    /// hugepage reservation that owns its pages, the give-back computed from the pool now
    /// ([`crate::hugepages`]); `None` for every other step (write `previous` back).
    /// `applied` is the value read back right after the change, when the journal has it.
    pub fn give_back(
        &self,
        previous: &str,
        new: &str,
        applied: Option<&str>,
    ) -> Result<Option<GiveBack>> {
        let Target::Hugepages {
            path,
            own_pages: true,
            ..
        } = self
        else {
            return Ok(None);
        };
        if !path.exists() {
            return Ok(None);
        }
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| ApplyError::parse(path, format!("journal: bad page count {v:?}")))
        };
        let now = pool_of(path)?.persistent();
        let applied = applied.map(num).transpose()?;
        let added = hugepages::added(num(previous)?, num(new)?, applied, now);
        Ok(Some(GiveBack::new(now, added)))
    }

    /// The hugepage pool this step writes, read now (`None` for other steps).
    pub fn pool(&self) -> Option<Result<Pool>> {
        match self {
            Target::Hugepages { path, .. } => Some(pool_of(path)),
            _ => None,
        }
    }
}

/// The pool whose `nr_hugepages` is `path`.
fn pool_of(path: &Path) -> Result<Pool> {
    Pool::read(path.parent().unwrap_or(Path::new("/")))
}

impl MovedTask {
    /// The process a moved task belongs to (its Tgid), for reading its threads back.
    fn id_pid(&self, proc_root: &Path) -> i32 {
        proc::tgid(proc_root, self.id).unwrap_or(self.id)
    }
}

fn read_count(path: &Path) -> Result<u64> {
    let s = read_trim(path)?;
    s.parse()
        .map_err(|_| ApplyError::parse(path, format!("not a page count: {s:?}")))
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc_errno::EIO => "EIO",
        libc_errno::EPERM => "EPERM",
        libc_errno::EINVAL => "EINVAL",
        libc_errno::ENOENT => "ENOENT",
        libc_errno::EBUSY => "EBUSY",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_targets_apply_verify_rollback() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cpuset.cpus");
        std::fs::write(&p, "0-3\n").unwrap();
        let t = Target::CgroupFile {
            path: p.clone(),
            created: false,
        };
        let prev = t.read_current().unwrap();
        assert_eq!(prev, "0-3");
        assert_eq!(t.apply("0,1").unwrap(), Outcome::Done(None));
        assert!(t.verify("0-1").unwrap().ok);
        assert!(!t.verify("2").unwrap().ok);
        t.rollback(&prev).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0-3");
        // idempotent
        t.rollback(&prev).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0-3");
    }

    #[test]
    fn mask_compare_ignores_padding() {
        assert!(same_mask("00000000,00000003", "3"));
        assert!(!same_mask("1", "3"));
        assert!(same_cpus("0-1", "0,1"));
    }

    #[test]
    fn cgroup_dir_create_and_remove() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vmtune-host");
        let t = Target::CgroupDir {
            path: p.clone(),
            procs_file: "tasks".into(),
        };
        assert_eq!(t.read_current().unwrap(), "absent");
        t.apply("present").unwrap();
        assert!(p.is_dir());
        t.rollback("absent").unwrap();
        assert!(!p.exists());
        t.rollback("absent").unwrap();
    }

    #[test]
    fn targets_round_trip_through_json() {
        let t = Target::Irq {
            irq: 38,
            path: "/proc/irq/38/smp_affinity_list".into(),
            name: "vfio-msix[0](0000:01:00.0)".into(),
            class: IrqClass::Vfio,
            previous_effective: Some("1".into()),
        };
        let s = serde_json::to_string(&t).unwrap();
        assert!(s.contains("\"actuator\":\"irq\""));
        assert_eq!(serde_json::from_str::<Target>(&s).unwrap(), t);
    }
}

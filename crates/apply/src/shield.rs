//! CPU shielding: keep host tasks off the guest CPUs while the VM runs.
//!
//! Three backends, chosen from what the host has mounted (see [`detect`]):
//! - **systemd** (cgroup v2 with the cpuset controller, systemd as PID 1):
//!   `systemctl set-property --runtime {system,user}.slice init.scope AllowedCPUs=HOST`.
//! - **cgroup v2** without systemd: enable `+cpuset` in the root's `cgroup.subtree_control`,
//!   create `vmtune-host` with the host CPUs, move the root cgroup's processes into it.
//! - **cgroup v1** cpuset (e.g. `/sys/fs/cgroup/cpuset`): create `vmtune-host` with the host
//!   CPUs and move the root cpuset's threads into it (what `cset shield` does).
//!
//! Kernel threads and QEMU processes (any process with `CPU n/…` threads: this VM and other
//! tenants) are never moved. Every write is a journaled step; cpuset attach rewrites a task's
//! affinity, so each moved thread's previous `Cpus_allowed_list` is journaled and put back.

use std::path::{Path, PathBuf};

use serde::Serialize;
use topo::CpuSet;

pub use crate::actuator::cgroup_dir::remove_cgroup;
pub use crate::actuator::systemd_property::{systemctl_set, systemctl_show};
use crate::actuator::{
    CgroupController, CgroupDir, CgroupFile, CgroupTasks, MovedTask, SystemdProperty, ThreadCpus,
};
use crate::error::{read_trim, ApplyError, Result};
use crate::proc;
use crate::qemu::{classify_comm, CommRole};
use crate::step::{PlannedStep, Target};

/// Name of the cgroup vmtune creates for host tasks.
pub const HOST_CGROUP: &str = "vmtune-host";

/// systemd units whose `AllowedCPUs=` shields the host (machine.slice holds the VMs).
pub const SYSTEMD_UNITS: [&str; 3] = ["system.slice", "user.slice", "init.scope"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "backend", rename_all = "snake_case")]
pub enum Backend {
    Systemd {
        root: PathBuf,
    },
    V2 {
        root: PathBuf,
    },
    V1 {
        root: PathBuf,
    },
    /// No usable cpuset hierarchy; the reason.
    Unavailable {
        reason: String,
    },
}

/// Choose the backend from `/proc/self/mounts`, the v2 root's `cgroup.controllers` (read by
/// `controllers`) and PID 1's `comm`. Pure.
pub fn detect(
    mounts: &str,
    controllers: impl Fn(&Path) -> Option<String>,
    pid1_comm: &str,
) -> Backend {
    let mut v1 = None;
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(mnt), Some(fstype), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        let mnt = PathBuf::from(unescape_mount(mnt));
        match *fstype {
            "cgroup2" if v2.is_none() => v2 = Some(mnt),
            "cgroup" if v1.is_none() && opts.split(',').any(|o| o == "cpuset") => v1 = Some(mnt),
            _ => {}
        }
    }
    if let Some(root) = v2 {
        let has_cpuset = controllers(&root)
            .map(|c| c.split_whitespace().any(|c| c == "cpuset"))
            .unwrap_or(false);
        if has_cpuset {
            return if pid1_comm.trim() == "systemd" {
                Backend::Systemd { root }
            } else {
                Backend::V2 { root }
            };
        }
    }
    if let Some(root) = v1 {
        return Backend::V1 { root };
    }
    Backend::Unavailable {
        reason: "no cgroup v2 hierarchy with the cpuset controller and no cgroup v1 cpuset mount"
            .into(),
    }
}

/// `/proc/mounts` escapes spaces and friends as octal (`\040`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Detect on the live host.
pub fn detect_live(proc_root: &Path) -> Backend {
    let mounts = std::fs::read_to_string(proc_root.join("self/mounts")).unwrap_or_default();
    let pid1 = std::fs::read_to_string(proc_root.join("1/comm")).unwrap_or_default();
    detect(
        &mounts,
        |root| std::fs::read_to_string(root.join("cgroup.controllers")).ok(),
        &pid1,
    )
}

/// The steps that shield `host_cpus`, in order, with their previous and new values.
/// `exclude_pid` is the VM's QEMU (never moved).
pub fn plan_steps(
    backend: &Backend,
    host_cpus: &CpuSet,
    proc_root: &Path,
    exclude_pid: Option<i32>,
) -> Result<(Vec<PlannedStep>, Vec<String>)> {
    let cpus = host_cpus.to_list_string();
    let mut steps = Vec::new();
    let mut notes = Vec::new();
    match backend {
        Backend::Unavailable { reason } => notes.push(format!("CPU shielding skipped: {reason}")),
        Backend::Systemd { .. } => {
            for unit in SYSTEMD_UNITS {
                let t = Target::SystemdProperty(SystemdProperty {
                    unit: unit.into(),
                    property: "AllowedCPUs".into(),
                });
                let prev = systemctl_show(unit, "AllowedCPUs")?;
                if prev != cpus {
                    steps.push(PlannedStep::new(t, prev, cpus.clone()));
                }
            }
        }
        Backend::V1 { root } | Backend::V2 { root } => {
            let v2 = matches!(backend, Backend::V2 { .. });
            let dir = root.join(HOST_CGROUP);
            if dir.exists() {
                return Err(ApplyError::Refused(format!(
                    "{} already exists (left by another tool or an apply that was not restored): run `vmtune restore` or remove it",
                    dir.display()
                )));
            }
            let procs_file = if v2 { "cgroup.procs" } else { "tasks" };
            if v2 {
                let sc = root.join("cgroup.subtree_control");
                let on = read_trim(&sc)?.split_whitespace().any(|c| c == "cpuset");
                if !on {
                    steps.push(PlannedStep::new(
                        Target::CgroupController(CgroupController {
                            path: sc,
                            controller: "cpuset".into(),
                        }),
                        "off",
                        "on",
                    ));
                }
            }
            let mems = if v2 {
                read_trim(&root.join("cpuset.mems.effective"))?
            } else {
                read_trim(&root.join("cpuset.mems"))?
            };
            steps.push(PlannedStep::new(
                Target::CgroupDir(CgroupDir {
                    path: dir.clone(),
                    procs_file: procs_file.into(),
                }),
                "absent",
                "present",
            ));
            steps.push(PlannedStep::new(
                Target::CgroupFile(CgroupFile {
                    path: dir.join("cpuset.cpus"),
                    created: true,
                }),
                String::new(),
                cpus.clone(),
            ));
            steps.push(PlannedStep::new(
                Target::CgroupFile(CgroupFile {
                    path: dir.join("cpuset.mems"),
                    created: true,
                }),
                String::new(),
                mems,
            ));
            let (tasks, skipped) = movable_tasks(proc_root, root, v2, exclude_pid)?;
            if skipped > 0 {
                notes.push(format!(
                    "{skipped} tasks left where they are (kernel threads, QEMU processes, or not in the root cgroup)"
                ));
            }
            steps.push(PlannedStep::new(
                Target::CgroupTasks(CgroupTasks {
                    dest: dir.clone(),
                    procs_file: procs_file.into(),
                    tasks,
                    proc_root: proc_root.to_path_buf(),
                }),
                "origin",
                dir.display().to_string(),
            ));
        }
    }
    Ok((steps, notes))
}

/// Whether a process runs QEMU vCPUs (has a thread named `CPU n/…`).
fn is_qemu(proc_root: &Path, pid: i32) -> bool {
    proc::tids(proc_root, pid)
        .map(|ts| {
            ts.iter().any(|t| {
                proc::comm(proc_root, pid, *t)
                    .map(|c| matches!(classify_comm(&c), CommRole::Vcpu(_)))
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

/// Tasks in the hierarchy's root that may be moved: v1 threads / v2 processes.
fn movable_tasks(
    proc_root: &Path,
    root: &Path,
    v2: bool,
    exclude_pid: Option<i32>,
) -> Result<(Vec<MovedTask>, usize)> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for pid in proc::pids(proc_root)? {
        if Some(pid) == exclude_pid
            || proc::is_kernel_thread(proc_root, pid)
            || is_qemu(proc_root, pid)
        {
            skipped += 1;
            continue;
        }
        let Ok(tids) = proc::tids(proc_root, pid) else {
            continue;
        };
        if v2 {
            let cg = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup"))
                .unwrap_or_default();
            if !cg.lines().any(|l| l == "0::/") {
                skipped += 1;
                continue;
            }
            let Some(start) = proc::start_time(proc_root, pid, pid) else {
                continue;
            };
            let threads = tids
                .iter()
                .filter_map(|t| {
                    proc::thread_cpus(proc_root, pid, *t)
                        .ok()
                        .map(|c| ThreadCpus { tid: *t, cpus: c })
                })
                .collect();
            out.push(MovedTask {
                id: pid,
                start_time: start,
                from: root.to_path_buf(),
                threads,
            });
        } else {
            for tid in tids {
                let cs = proc_root
                    .join(pid.to_string())
                    .join("task")
                    .join(tid.to_string())
                    .join("cpuset");
                match std::fs::read_to_string(&cs) {
                    Ok(s) if s.trim() == "/" => {}
                    _ => {
                        skipped += 1;
                        continue;
                    }
                }
                let (Some(start), Ok(cpus)) = (
                    proc::start_time(proc_root, pid, tid),
                    proc::thread_cpus(proc_root, pid, tid),
                ) else {
                    continue;
                };
                out.push(MovedTask {
                    id: tid,
                    start_time: start,
                    from: root.to_path_buf(),
                    threads: vec![ThreadCpus { tid, cpus }],
                });
            }
        }
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV_MACHINE: &str = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
    const UNIFIED: &str =
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n";

    #[test]
    fn v1_cpuset_beside_a_v2_without_cpuset() {
        let b = detect(DEV_MACHINE, |_| Some("hugetlb".into()), "process_api");
        assert_eq!(
            b,
            Backend::V1 {
                root: "/sys/fs/cgroup/cpuset".into()
            }
        );
    }

    #[test]
    fn unified_with_and_without_systemd() {
        let ctl = |_: &Path| Some("cpuset cpu io memory pids".to_string());
        assert_eq!(
            detect(UNIFIED, ctl, "systemd\n"),
            Backend::Systemd {
                root: "/sys/fs/cgroup".into()
            }
        );
        assert_eq!(
            detect(UNIFIED, ctl, "init"),
            Backend::V2 {
                root: "/sys/fs/cgroup".into()
            }
        );
        assert!(matches!(
            detect(UNIFIED, |_| Some("memory".into()), "init"),
            Backend::Unavailable { .. }
        ));
        assert!(matches!(
            detect("", |_| None, "init"),
            Backend::Unavailable { .. }
        ));
    }

    #[test]
    fn mount_escapes() {
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
        assert_eq!(unescape_mount("/a\\04"), "/a\\04");
        assert_eq!(unescape_mount("\\"), "\\");
    }

    /// The cgroup v2 path on a scratch hierarchy (plain files stand in for cgroupfs): the
    /// steps, their order, apply and rollback.
    #[test]
    fn v2_steps_on_a_scratch_hierarchy() {
        use crate::step::Actuator;
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::write(root.join("cgroup.subtree_control"), "memory pids").unwrap();
        std::fs::write(root.join("cpuset.mems.effective"), "0-1").unwrap();
        std::fs::write(root.join("cgroup.procs"), "").unwrap();
        let backend = Backend::V2 { root: root.clone() };
        let host: CpuSet = [0u32].into_iter().collect();
        // the whole machine's processes, excluding ourselves (we must not move the test)
        let me = std::process::id() as i32;
        let (steps, _) = plan_steps(&backend, &host, Path::new("/proc"), Some(me)).unwrap();
        let kinds: Vec<&str> = steps.iter().map(|s| s.target.kind()).collect();
        assert_eq!(
            kinds,
            [
                "cgroup_controller",
                "cgroup_dir",
                "cgroup_file",
                "cgroup_file",
                "cgroup_tasks"
            ]
        );
        let dir = root.join(HOST_CGROUP);
        // apply everything but the task move (real processes), then roll back in reverse
        for (i, s) in steps[..4].iter().enumerate() {
            s.target.apply(&s.new).unwrap();
            if i == 1 {
                // cgroupfs creates these with the directory
                std::fs::write(dir.join("cpuset.cpus"), "").unwrap();
                std::fs::write(dir.join("cpuset.mems"), "").unwrap();
                std::fs::write(dir.join("cgroup.procs"), "").unwrap();
            }
        }
        assert_eq!(
            std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
            "+cpuset"
        );
        // what cgroupfs reads back after `+cpuset`
        std::fs::write(root.join("cgroup.subtree_control"), "cpuset memory pids").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cpuset.cpus")).unwrap(),
            "0"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("cpuset.mems")).unwrap(),
            "0-1"
        );
        for (i, s) in steps[..4].iter().enumerate().rev() {
            if i == 1 {
                // cgroupfs removes the control files with the directory; plain files do not
                for f in ["cpuset.cpus", "cpuset.mems", "cgroup.procs"] {
                    std::fs::remove_file(dir.join(f)).unwrap();
                }
            }
            s.target.rollback(&s.previous).unwrap();
        }
        assert!(!dir.exists());
        assert_eq!(
            std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
            "-cpuset"
        );
        // an existing vmtune-host means an apply that was not restored: refuse
        std::fs::create_dir(&dir).unwrap();
        assert!(plan_steps(&backend, &host, Path::new("/proc"), Some(me)).is_err());
    }
}

//! Reading a container's CPUs back from the kernel: its cgroup's `cpuset.cpus` (cgroup v1's
//! cpuset hierarchy and the v2 hierarchy, whichever are mounted) and its main process's
//! `Cpus_allowed_list`; and the cgroup directories the harness removes after the pods.

use super::{Error, Result};
use std::path::{Path, PathBuf};
use topo::CpuSet;

/// One cgroup directory's CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupCpus {
    /// The container's cgroup directory in this hierarchy.
    pub dir: PathBuf,
    /// `cpuset.cpus`: what was asked for (on v2 empty unless someone set it); `None` where the
    /// hierarchy has no cpuset controller for this cgroup.
    pub cpus: Option<CpuSet>,
    /// `cpuset.effective_cpus` (v1) or `cpuset.cpus.effective` (v2): what the kernel grants.
    pub effective: Option<CpuSet>,
}

/// Every place a container's CPUs can be read, for a test to compare with the plugin's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCpuset {
    /// The container's main process (on the host).
    pub pid: u32,
    /// The OCI spec's `linux.cgroupsPath` (cgroupfs driver: `<cgroup_parent>/<container id>`).
    pub cgroups_path: String,
    /// The cgroup v1 cpuset hierarchy's directory of the process (`None`: no v1 cpuset mount).
    pub v1: Option<CgroupCpus>,
    /// The cgroup v2 hierarchy's directory of the process (`None`: no v2 mount); on a hybrid
    /// host the cpuset controller is bound to v1 and this has no CPUs.
    pub v2: Option<CgroupCpus>,
    /// `Cpus_allowed_list` of `/proc/PID/status`: the affinity the scheduler applies.
    pub proc_allowed: CpuSet,
}

impl ContainerCpuset {
    /// The cgroup's CPUs: v1's `cpuset.cpus`, else v2's effective CPUs.
    pub fn cgroup(&self) -> Option<&CpuSet> {
        self.v1
            .as_ref()
            .and_then(|c| c.cpus.as_ref())
            .or_else(|| self.v2.as_ref().and_then(|c| c.effective.as_ref()))
    }

    /// Every reading (labelled by file), for messages.
    pub fn readings(&self) -> Vec<(String, CpuSet)> {
        let mut out = Vec::new();
        for (v2, c) in [(false, &self.v1), (true, &self.v2)] {
            let Some(c) = c else { continue };
            if let Some(s) = &c.cpus {
                // v2's cpuset.cpus is empty unless set: then it says nothing
                if !(v2 && s.is_empty()) {
                    out.push((format!("{}/cpuset.cpus", c.dir.display()), s.clone()));
                }
            }
            if let Some(s) = &c.effective {
                let file = if v2 {
                    "cpuset.cpus.effective"
                } else {
                    "cpuset.effective_cpus"
                };
                out.push((format!("{}/{file}", c.dir.display()), s.clone()));
            }
        }
        out.push((
            format!("/proc/{}/status Cpus_allowed_list", self.pid),
            self.proc_allowed.clone(),
        ));
        out
    }

    /// The one CPU set every reading agrees on; `Err` lists them when they differ.
    pub fn agreed(&self) -> Result<CpuSet> {
        let r = self.readings();
        let first = r[0].1.clone();
        if r.iter().all(|(_, s)| *s == first) {
            Ok(first)
        } else {
            Err(Error(format!(
                "the container's CPU readings differ:\n{}",
                r.iter()
                    .map(|(k, s)| format!("  {k}: {s}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )))
        }
    }
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Result<CpuSet> {
    let p = "/sys/devices/system/cpu/online";
    let t = std::fs::read_to_string(p).map_err(|e| Error(format!("cannot read {p}: {e}")))?;
    CpuSet::parse_list(&t).map_err(|e| Error(format!("{p}: {e}")))
}

/// A cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone)]
pub struct CgroupMount {
    pub point: PathBuf,
    /// The mount's root inside the hierarchy (`/` unless in a cgroup namespace).
    pub root: String,
    /// `true` for cgroup2.
    pub v2: bool,
    /// v1: the controllers (`cpuset`, `cpu`, `name=systemd` ...).
    pub controllers: Vec<String>,
}

/// Every cgroup (v1) and cgroup2 mount.
pub fn cgroup_mounts() -> Vec<CgroupMount> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        // ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (pre.get(3), pre.get(4), post.first()) else {
            continue;
        };
        let v2 = match *fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let controllers = if v2 {
            Vec::new()
        } else {
            post.get(2)
                .map(|o| {
                    o.split(',')
                        .filter(|c| !matches!(*c, "rw" | "ro") && !c.contains("relatime"))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        out.push(CgroupMount {
            point: PathBuf::from(point),
            root: root.to_string(),
            v2,
            controllers,
        });
    }
    out
}

/// The directory of cgroup `path` (as `/proc/PID/cgroup` spells it) in mount `m`.
fn dir_in(m: &CgroupMount, path: &str) -> PathBuf {
    let rel = if m.root != "/" {
        path.strip_prefix(m.root.as_str()).unwrap_or(path)
    } else {
        path
    };
    m.point.join(rel.trim_start_matches('/'))
}

fn read_set(path: &Path) -> Result<Option<CpuSet>> {
    match std::fs::read_to_string(path) {
        Ok(t) => CpuSet::parse_list(&t)
            .map(Some)
            .map_err(|e| Error(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Read the CPUs of process `pid` (a container's main process) everywhere they show.
pub fn read_cpuset(pid: u32, cgroups_path: &str) -> Result<ContainerCpuset> {
    let cg_file = format!("/proc/{pid}/cgroup");
    let cg = std::fs::read_to_string(&cg_file).map_err(|e| {
        Error(format!(
            "cannot read {cg_file} (has the container exited?): {e}"
        ))
    })?;
    // HIER:CONTROLLERS:PATH
    let entries: Vec<(String, String)> = cg
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let _hier = it.next()?;
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect();
    let mounts = cgroup_mounts();
    let v1 = match (
        mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|c| c == "cpuset")),
        entries
            .iter()
            .find(|(c, _)| c.split(',').any(|c| c == "cpuset")),
    ) {
        (Some(m), Some((_, path))) => {
            let dir = dir_in(m, path);
            Some(CgroupCpus {
                cpus: read_set(&dir.join("cpuset.cpus"))?,
                effective: read_set(&dir.join("cpuset.effective_cpus"))?,
                dir,
            })
        }
        _ => None,
    };
    let v2 = match (
        mounts.iter().find(|m| m.v2),
        entries.iter().find(|(c, _)| c.is_empty()),
    ) {
        (Some(m), Some((_, path))) => {
            let dir = dir_in(m, path);
            Some(CgroupCpus {
                cpus: read_set(&dir.join("cpuset.cpus"))?,
                effective: read_set(&dir.join("cpuset.cpus.effective"))?,
                dir,
            })
        }
        _ => None,
    };
    let status_file = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&status_file)
        .map_err(|e| Error(format!("cannot read {status_file}: {e}")))?;
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| Error(format!("{status_file} has no Cpus_allowed_list")))?;
    let proc_allowed =
        CpuSet::parse_list(allowed).map_err(|e| Error(format!("{status_file}: {e}")))?;
    Ok(ContainerCpuset {
        pid,
        cgroups_path: cgroups_path.to_string(),
        v1,
        v2,
        proc_allowed,
    })
}

/// Remove the cgroup directory `rel` (like `kubepods/besteffort/pod<uid>`) from every
/// hierarchy where it exists; `Err` names those that stayed (a cgroup with tasks or children).
pub fn remove_cgroup(rel: &str) -> std::result::Result<(), String> {
    let rel = rel.trim_start_matches('/');
    let mut left = Vec::new();
    for m in cgroup_mounts() {
        let d = m.point.join(rel);
        match std::fs::remove_dir(&d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => left.push(format!("{}: {e}", d.display())),
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(left.join("; "))
    }
}

/// Whether cgroup `rel` exists in any hierarchy.
pub fn cgroup_exists(rel: &str) -> bool {
    let rel = rel.trim_start_matches('/');
    cgroup_mounts().iter().any(|m| m.point.join(rel).is_dir())
}

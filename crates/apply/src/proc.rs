//! Reading tasks and IRQs from procfs, and setting thread affinity. Thin I/O helpers; the
//! parsing parts are pure functions with tests.

use std::path::{Path, PathBuf};

use topo::CpuSet;

use crate::error::{read_trim, ApplyError, Result};

/// `PF_KTHREAD` in /proc/PID/stat `flags`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Fields of /proc/…/stat after the `(comm)`: index 0 is field 3 (`state`).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let close = stat.rfind(')')?;
    Some(stat.get(close + 1..)?.split_whitespace().collect())
}

/// `starttime` (field 22) from the text of a stat file.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    stat_fields(stat)?.get(19)?.parse().ok()
}

/// `flags` (field 9) from the text of a stat file.
pub fn parse_flags(stat: &str) -> Option<u64> {
    stat_fields(stat)?.get(6)?.parse().ok()
}

/// `Cpus_allowed_list` from the text of a status file.
pub fn parse_cpus_allowed_list(status: &str) -> Option<&str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
}

fn task_dir(proc_root: &Path, pid: i32, tid: i32) -> PathBuf {
    proc_root
        .join(pid.to_string())
        .join("task")
        .join(tid.to_string())
}

/// Start time of a thread, `None` if it does not exist.
pub fn start_time(proc_root: &Path, pid: i32, tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(task_dir(proc_root, pid, tid).join("stat")).ok()?;
    parse_start_time(&s)
}

/// Whether thread `tid` of `pid` still exists and is the same thread (same start time).
pub fn thread_alive(proc_root: &Path, pid: i32, tid: i32, start: u64) -> bool {
    start_time(proc_root, pid, tid) == Some(start)
}

/// Whether task `id` (thread or process id) exists with this start time.
pub fn task_alive(proc_root: &Path, id: i32, start: u64) -> bool {
    std::fs::read_to_string(proc_root.join(id.to_string()).join("stat"))
        .ok()
        .and_then(|s| parse_start_time(&s))
        == Some(start)
}

/// The process (thread group) a task id belongs to.
pub fn tgid(proc_root: &Path, id: i32) -> Option<i32> {
    let s = std::fs::read_to_string(proc_root.join(id.to_string()).join("status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether a process exists and is not a zombie.
pub fn process_running(proc_root: &Path, pid: i32) -> bool {
    std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|s| stat_fields(&s).and_then(|f| f.first().map(|st| *st != "Z" && *st != "X")))
        .unwrap_or(false)
}

/// Whether a process is a kernel thread.
pub fn is_kernel_thread(proc_root: &Path, pid: i32) -> bool {
    std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|s| parse_flags(&s))
        .map(|f| f & PF_KTHREAD != 0)
        .unwrap_or(false)
}

/// `Cpus_allowed_list` of a thread.
pub fn thread_cpus(proc_root: &Path, pid: i32, tid: i32) -> Result<String> {
    let p = task_dir(proc_root, pid, tid).join("status");
    let s = std::fs::read_to_string(&p).map_err(|e| ApplyError::io(&p, e))?;
    parse_cpus_allowed_list(&s)
        .map(str::to_string)
        .ok_or_else(|| ApplyError::parse(&p, "no Cpus_allowed_list line"))
}

/// `sched_setaffinity(tid, cpus)`; `cpus` in list spelling.
pub fn set_thread_cpus(tid: i32, cpus: &str) -> Result<()> {
    let set = CpuSet::parse_list(cpus).map_err(|e| ApplyError::Thread {
        tid,
        msg: e.to_string(),
    })?;
    let mut cs = rustix::thread::CpuSet::new();
    for c in set.iter() {
        let c = c as usize;
        if c >= rustix::thread::CpuSet::MAX_CPU {
            return Err(ApplyError::Thread {
                tid,
                msg: format!("CPU {c} above the affinity mask size"),
            });
        }
        cs.set(c);
    }
    let pid = rustix::process::Pid::from_raw(tid).ok_or(ApplyError::Thread {
        tid,
        msg: "not a thread id".into(),
    })?;
    rustix::thread::sched_setaffinity(Some(pid), &cs)
        .map_err(|e| ApplyError::io(format!("sched_setaffinity(thread {tid}, {cpus})"), e.into()))
}

/// Thread ids of a process, sorted.
pub fn tids(proc_root: &Path, pid: i32) -> Result<Vec<i32>> {
    numeric_entries(&proc_root.join(pid.to_string()).join("task"))
}

/// Process ids in /proc, sorted.
pub fn pids(proc_root: &Path) -> Result<Vec<i32>> {
    numeric_entries(proc_root)
}

/// The entries of `dir` whose names are numbers (pids, tids), sorted.
fn numeric_entries(dir: &Path) -> Result<Vec<i32>> {
    let rd = std::fs::read_dir(dir).map_err(|e| ApplyError::io(dir, e))?;
    let mut v: Vec<i32> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// `comm` of a thread.
pub fn comm(proc_root: &Path, pid: i32, tid: i32) -> Result<String> {
    read_trim(&task_dir(proc_root, pid, tid).join("comm"))
}

/// Names of the handler directories in /proc/irq/N/ (one per registered action).
pub fn irq_actions(irq_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(irq_dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// Online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus(sys_root: &Path) -> Result<CpuSet> {
    let p = sys_root.join("devices/system/cpu/online");
    let s = read_trim(&p)?;
    CpuSet::parse_list(&s).map_err(|e| ApplyError::parse(&p, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "1234 (CPU 0/TCG) S 1 1234 1234 0 -1 4194624 100 0 0 0 5 6 0 0 20 0 4 0 98765 1000000 200 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 -1 1 0 0 0 0 0";

    #[test]
    fn stat_fields_after_comm_with_spaces_and_parens() {
        assert_eq!(parse_start_time(STAT), Some(98765));
        assert_eq!(parse_flags(STAT), Some(4194624));
        let odd = STAT.replace("(CPU 0/TCG)", "(a) b (c))");
        assert_eq!(parse_start_time(&odd), Some(98765));
        assert_eq!(parse_start_time("garbage"), None);
        assert_eq!(parse_start_time("1 (x) S"), None);
    }

    #[test]
    fn cpus_allowed_list() {
        let s = "Name:\tbash\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t1\n";
        assert_eq!(parse_cpus_allowed_list(s), Some("0-1"));
        assert_eq!(parse_cpus_allowed_list("Name: x\n"), None);
    }

    #[test]
    fn own_thread_is_readable_and_settable() {
        let me = std::process::id() as i32;
        let proc_root = Path::new("/proc");
        let cpus = thread_cpus(proc_root, me, me).unwrap();
        assert!(start_time(proc_root, me, me).is_some());
        // setting our own current mask is a no-op that must succeed
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let mine = thread_cpus(proc_root, me, tid).unwrap();
        set_thread_cpus(tid, &mine).unwrap();
        assert!(!cpus.is_empty());
        assert!(set_thread_cpus(tid, "99999").is_err());
    }
}

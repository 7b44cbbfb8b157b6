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

/// The hugepages of one size a process holds: pages in its hugetlb mappings of that size
/// (reserved when mapped, whether touched yet or not), and of those the pages already
/// faulted in, per NUMA node (`None` where the kernel has no `numa_maps` to say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugetlbHeld {
    pub pages: u64,
    pub faulted: Option<std::collections::BTreeMap<u32, u64>>,
}

/// Pages of `size_kb` in the hugetlb mappings of a `/proc/PID/smaps` text: each mapping
/// whose `KernelPageSize` is `size_kb` counts `Size / KernelPageSize` pages. Lines that are
/// not `Key: N kB` are skipped.
pub fn parse_smaps_hugetlb(smaps: &str, size_kb: u64) -> u64 {
    let kb = |l: &str, key: &str| -> Option<u64> {
        l.strip_prefix(key)?
            .strip_prefix(':')?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()
    };
    let (mut pages, mut size) = (0u64, None);
    for l in smaps.lines() {
        if let Some(v) = kb(l, "Size") {
            size = Some(v);
        } else if let Some(k) = kb(l, "KernelPageSize") {
            if let (Some(sz), true) = (size.take(), k == size_kb && size_kb > 4) {
                pages = pages.saturating_add(sz / size_kb);
            }
        }
    }
    pages
}

/// Faulted-in pages per node of the `size_kb` hugetlb mappings in a `/proc/PID/numa_maps`
/// text: lines with the `huge` flag and `kernelpagesize_kB=size_kb`, their `N<node>=<pages>`.
pub fn parse_numa_maps_hugetlb(
    numa_maps: &str,
    size_kb: u64,
) -> std::collections::BTreeMap<u32, u64> {
    let mut out = std::collections::BTreeMap::new();
    let page = format!("kernelpagesize_kB={size_kb}");
    for l in numa_maps.lines() {
        let words: Vec<&str> = l.split_whitespace().collect();
        if !words.contains(&"huge") || !words.contains(&page.as_str()) {
            continue;
        }
        for w in &words {
            let Some((node, n)) = w.strip_prefix('N').and_then(|x| x.split_once('=')) else {
                continue;
            };
            if let (Ok(node), Ok(n)) = (node.parse::<u32>(), n.parse::<u64>()) {
                let e: &mut u64 = out.entry(node).or_default();
                *e = e.saturating_add(n);
            }
        }
    }
    out
}

/// The `size_kb` hugepages process `pid` holds ([`HugetlbHeld`]), from its `smaps` and
/// `numa_maps`.
pub fn hugetlb_held(proc_root: &Path, pid: i32, size_kb: u64) -> Result<HugetlbHeld> {
    let dir = proc_root.join(pid.to_string());
    let smaps = read_trim(&dir.join("smaps"))?;
    // numa_maps is absent on kernels without NUMA: no node split then
    let numa = read_trim(&dir.join("numa_maps")).ok();
    Ok(HugetlbHeld {
        pages: parse_smaps_hugetlb(&smaps, size_kb),
        faulted: numa.map(|n| parse_numa_maps_hugetlb(&n, size_kb)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "1234 (CPU 0/TCG) S 1 1234 1234 0 -1 4194624 100 0 0 0 5 6 0 0 20 0 4 0 98765 1000000 200 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 -1 1 0 0 0 0 0";

    /// A QEMU's maps as the kernel writes them (proc(5), Documentation/filesystems/proc.rst):
    /// a 2 MiB memfd backend half touched, a 1 GiB hugetlbfs backend untouched, ordinary and
    /// THP-backed anonymous memory.
    const SMAPS: &str = "\
55d5c0a00000-55d5c0c00000 r-xp 00000000 fd:01 1234                       /usr/bin/qemu-system-x86_64
Size:               2048 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                1024 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
VmFlags: rd ex mr mw me sd
7f3a40000000-7f3a44000000 rw-s 00000000 00:01 2048                       /memfd:m0 (deleted)
Size:              65536 kB
KernelPageSize:     2048 kB
MMUPageSize:        2048 kB
Rss:                   0 kB
Shared_Hugetlb:    32768 kB
Private_Hugetlb:       0 kB
VmFlags: rd wr sh mr mw me ms de ht sd
7f3b00000000-7f3b40000000 rw-s 00000000 00:2e 9                          /dev/hugepages1G/vm
Size:            1048576 kB
KernelPageSize:  1048576 kB
MMUPageSize:     1048576 kB
Shared_Hugetlb:        0 kB
VmFlags: rd wr sh mr mw me ms de ht sd
7f3c00000000-7f3c00400000 rw-p 00000000 00:00 0
Size:               4096 kB
KernelPageSize:        4 kB
AnonHugePages:      4096 kB
VmFlags: rd wr mr mw me ac sd hg
";

    const NUMA_MAPS: &str = "\
55d5c0a00000 default file=/usr/bin/qemu-system-x86_64 mapped=256 mapmax=2 N0=256 kernelpagesize_kB=4
7f3a40000000 bind:1 file=/memfd:m0\\040(deleted) huge dirty=16 N1=16 kernelpagesize_kB=2048
7f3b00000000 bind:0 file=/dev/hugepages1G/vm huge kernelpagesize_kB=1048576
7f3c00000000 default anon=1024 dirty=1024 N0=1000 N1=24 kernelpagesize_kB=4
";

    #[test]
    fn hugetlb_pages_a_process_holds() {
        assert_eq!(parse_smaps_hugetlb(SMAPS, 2048), 32);
        assert_eq!(parse_smaps_hugetlb(SMAPS, 1048576), 1);
        // transparent hugepages are not a hugetlb pool's
        assert_eq!(parse_smaps_hugetlb(SMAPS, 4), 0);
        assert_eq!(parse_smaps_hugetlb("", 2048), 0);
        assert_eq!(
            parse_smaps_hugetlb("Size: lots\nKernelPageSize: 2048 kB\n", 2048),
            0
        );
        assert_eq!(
            parse_numa_maps_hugetlb(NUMA_MAPS, 2048),
            std::collections::BTreeMap::from([(1, 16)])
        );
        assert!(parse_numa_maps_hugetlb(NUMA_MAPS, 1048576).is_empty());
        assert!(parse_numa_maps_hugetlb(NUMA_MAPS, 4).is_empty());
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("77")).unwrap();
        std::fs::write(d.path().join("77/smaps"), SMAPS).unwrap();
        // without numa_maps (a kernel without NUMA): the pages, no node split
        let h = hugetlb_held(d.path(), 77, 2048).unwrap();
        assert_eq!((h.pages, h.faulted), (32, None));
        std::fs::write(d.path().join("77/numa_maps"), NUMA_MAPS).unwrap();
        let h = hugetlb_held(d.path(), 77, 2048).unwrap();
        assert_eq!(h.pages, 32);
        assert_eq!(h.faulted, Some(std::collections::BTreeMap::from([(1, 16)])));
        assert!(hugetlb_held(d.path(), 78, 2048).is_err());
    }

    proptest::proptest! {
        /// Maps of any mix of mappings (4 kB, THP, 2 MiB and 1 GiB hugetlb, touched on any
        /// nodes), written as the kernel writes them: the hugetlb pages of each size, and the
        /// touched ones per node, are what went in.
        #[test]
        fn hugetlb_held_is_recovered_from_generated_maps(
            maps in proptest::collection::vec(
                (proptest::prop_oneof![proptest::strategy::Just(4u64), proptest::strategy::Just(2048), proptest::strategy::Just(1_048_576)],
                 1u64..64, proptest::collection::vec((0u32..4, 0u64..8), 0..3), proptest::bool::ANY),
                0..12)
        ) {
            let (mut smaps, mut numa) = (String::new(), String::new());
            let mut want: std::collections::BTreeMap<u64, u64> = Default::default();
            let mut touched: std::collections::BTreeMap<(u64, u32), u64> = Default::default();
            for (i, (page, n, nodes, thp)) in maps.iter().enumerate() {
                let addr = 0x7f00_0000_0000u64 + (i as u64) * 0x1_0000_0000;
                let huge = *page > 4;
                smaps.push_str(&format!(
                    "{addr:x}-{:x} rw-s 00000000 00:01 {i} /memfd:m{i} (deleted)\nSize: {:>12} kB\nKernelPageSize: {page:>6} kB\nMMUPageSize: {page:>6} kB\nRss: 0 kB\n{}VmFlags: rd wr sh{}\n",
                    addr + n * page * 1024,
                    n * page,
                    if *thp && !huge { "AnonHugePages: 2048 kB\n" } else { "" },
                    if huge { " ht" } else { "" },
                ));
                let counts: String = nodes.iter().map(|(node, c)| format!(" N{node}={c}")).collect();
                numa.push_str(&format!(
                    "{addr:x} default file=/memfd:m{i}{}{counts} kernelpagesize_kB={page}\n",
                    if huge { " huge" } else { "" },
                ));
                if huge {
                    *want.entry(*page).or_default() += n;
                    for (node, c) in nodes {
                        *touched.entry((*page, *node)).or_default() += c;
                    }
                }
            }
            for size in [2048u64, 1_048_576] {
                proptest::prop_assert_eq!(parse_smaps_hugetlb(&smaps, size), want.get(&size).copied().unwrap_or(0));
                let per_node: std::collections::BTreeMap<u32, u64> = touched
                    .iter()
                    .filter(|((p, _), _)| *p == size)
                    .map(|((_, node), c)| (*node, *c))
                    .collect();
                proptest::prop_assert_eq!(parse_numa_maps_hugetlb(&numa, size), per_node);
            }
        }
    }

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

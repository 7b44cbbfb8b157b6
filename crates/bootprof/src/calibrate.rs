//! QEMU prealloc calibration: start `qemu-system-x86_64` (TCG) with a preallocated memory
//! backend of 4 KiB pages (tmpfs `/dev/shm`, as Kata uses without hugepages), anonymous RAM
//! (eligible for THP) and 2 MiB hugetlbfs pages, time start-up until QMP answers, and read
//! the process's page-table memory (`VmPTE`). Hugepages are reserved through
//! `/proc/sys/vm/nr_hugepages` and the previous value is restored afterwards (also on error);
//! a hugetlbfs mount made for the run is unmounted.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}")]
    Failed(String),
}

fn io<E: std::fmt::Display>(what: E) -> impl FnOnce(std::io::Error) -> CalibrateError {
    let w = what.to_string();
    move |e| CalibrateError::Io(w, e)
}

/// One backend's measurement (medians over the runs).
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// `baseline` (no prealloc), `shm-4k`, `ram-thp`, `hugetlbfs-2m`.
    pub backend: String,
    pub startup_s: f64,
    pub vm_pte_kb: u64,
    pub vm_rss_kb: u64,
    pub hugetlb_kb: u64,
    pub samples_s: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub memory_bytes: u64,
    pub qemu: String,
    pub runs: Vec<Run>,
    /// (startup(4 KiB) − baseline) / (startup(2 MiB) − baseline): the prealloc ratio the
    /// estimator uses.
    pub prealloc_ratio_4k_2m: Option<f64>,
    /// VmPTE(4 KiB) / VmPTE(2 MiB).
    pub pte_ratio_4k_2m: Option<f64>,
    pub notes: Vec<String>,
}

struct Qemu {
    child: Child,
    sock: PathBuf,
}

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Start QEMU with `backend` and return (seconds to a QMP answer, VmPTE, VmRSS, HugetlbPages).
fn one(
    qemu: &str,
    backend: &str,
    mem: u64,
    dir: &Path,
    n: usize,
) -> Result<(f64, u64, u64, u64), CalibrateError> {
    let sock = dir.join(format!("vmtune-cal-{}-{n}.qmp", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let mb = mem >> 20;
    let obj = match backend {
        "shm-4k" => {
            format!("memory-backend-file,id=m0,size={mb}M,mem-path=/dev/shm,share=on,prealloc=on")
        }
        "ram-thp" => format!("memory-backend-ram,id=m0,size={mb}M,prealloc=on"),
        "baseline" => {
            format!("memory-backend-file,id=m0,size={mb}M,mem-path=/dev/shm,share=on,prealloc=off")
        }
        _ => format!(
            "memory-backend-file,id=m0,size={mb}M,mem-path=/dev/hugepages,share=on,prealloc=on"
        ),
    };
    let start = Instant::now();
    let child = Command::new(qemu)
        .args([
            "-accel",
            "tcg,thread=multi",
            "-nodefaults",
            "-display",
            "none",
            "-S",
            "-m",
        ])
        .arg(format!("{mb}M"))
        .args(["-object", &obj, "-machine", "pc,memory-backend=m0", "-qmp"])
        .arg(format!("unix:{},server=on,wait=off", sock.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(format!("starting {qemu}")))?;
    let mut q = Qemu {
        child,
        sock: sock.clone(),
    };
    let pid = q.child.id();
    // wait for the QMP greeting, then a command answer
    let deadline = start + Duration::from_secs(120);
    let stream = loop {
        if let Ok(Some(st)) = q.child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = q.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(CalibrateError::Failed(format!(
                "qemu ({backend}) exited with {st}: {}",
                err.trim()
            )));
        }
        if let Ok(s) = UnixStream::connect(&sock) {
            break s;
        }
        if Instant::now() > deadline {
            return Err(CalibrateError::Failed(format!(
                "qemu ({backend}) did not open QMP within 120 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(io("qmp"))?;
    let mut w = stream.try_clone().map_err(io("qmp"))?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).map_err(io("qmp greeting"))?;
    if !line.contains("QMP") {
        return Err(CalibrateError::Failed(format!(
            "unexpected QMP greeting {line:?}"
        )));
    }
    w.write_all(b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-status\"}\n")
        .map_err(io("qmp"))?;
    let mut answered = 0;
    while answered < 2 {
        line.clear();
        if r.read_line(&mut line).map_err(io("qmp"))? == 0 {
            return Err(CalibrateError::Failed("QMP closed".into()));
        }
        if line.contains("\"return\"") {
            answered += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let pte = status_kb(pid, "VmPTE:");
    let rss = status_kb(pid, "VmRSS:");
    let huge = status_kb(pid, "HugetlbPages:");
    let _ = w.write_all(b"{\"execute\":\"quit\"}\n");
    let _ = q.child.wait();
    Ok((secs, pte, rss, huge))
}

/// Restores `nr_hugepages` and unmounts a hugetlbfs it mounted, on drop.
struct HugeGuard {
    prev: Option<u64>,
    mounted: bool,
}

const NR: &str = "/proc/sys/vm/nr_hugepages";

impl Drop for HugeGuard {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("/dev/hugepages").status();
        }
        if let Some(p) = self.prev {
            let _ = std::fs::write(NR, p.to_string());
        }
    }
}

fn hugetlbfs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines().any(|l| {
                l.split_whitespace().nth(1) == Some("/dev/hugepages") && l.contains("hugetlbfs")
            })
        })
        .unwrap_or(false)
}

fn read_u64(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn prepare_hugepages(pages: u64, guard: &mut HugeGuard) -> Result<(), CalibrateError> {
    let free = read_u64("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").unwrap_or(0);
    if free < pages {
        let prev =
            read_u64(NR).ok_or_else(|| CalibrateError::Failed(format!("cannot read {NR}")))?;
        guard.prev = Some(prev);
        std::fs::write(NR, (prev + pages - free).to_string())
            .map_err(io(format!("writing {NR} (needs root)")))?;
        let now = read_u64("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").unwrap_or(0);
        if now < pages {
            return Err(CalibrateError::Failed(format!(
                "only {now} of {pages} 2 MiB hugepages could be reserved"
            )));
        }
    }
    if !hugetlbfs_mounted() {
        std::fs::create_dir_all("/dev/hugepages").map_err(io("creating /dev/hugepages"))?;
        let st = Command::new("mount")
            .args([
                "-t",
                "hugetlbfs",
                "-o",
                "pagesize=2M",
                "hugetlbfs",
                "/dev/hugepages",
            ])
            .status()
            .map_err(io("mount hugetlbfs"))?;
        if !st.success() {
            return Err(CalibrateError::Failed(
                "mounting hugetlbfs at /dev/hugepages failed".into(),
            ));
        }
        guard.mounted = true;
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Run the calibration: `runs` starts per backend, `memory` bytes each.
pub fn calibrate(qemu: &str, memory: u64, runs: usize) -> Result<Calibration, CalibrateError> {
    let dir = std::env::temp_dir();
    let mut out = Calibration {
        memory_bytes: memory,
        qemu: qemu.to_string(),
        runs: Vec::new(),
        prealloc_ratio_4k_2m: None,
        pte_ratio_4k_2m: None,
        notes: Vec::new(),
    };
    let mut guard = HugeGuard {
        prev: None,
        mounted: false,
    };
    let huge_ok = match prepare_hugepages(memory.div_ceil(2 << 20) + 8, &mut guard) {
        Ok(()) => true,
        Err(e) => {
            out.notes.push(format!("2 MiB hugepages skipped: {e}"));
            false
        }
    };
    let mut backends = vec!["baseline", "shm-4k", "ram-thp"];
    if huge_ok {
        backends.push("hugetlbfs-2m");
    }
    'backends: for b in backends {
        let mut samples = Vec::new();
        let mut last = (0, 0, 0);
        for n in 0..runs.max(1) {
            match one(qemu, b, memory, &dir, n) {
                Ok((s, pte, rss, huge)) => {
                    samples.push(s);
                    last = (pte, rss, huge);
                }
                // the shared pool may shrink between reserving and QEMU's mmap (another
                // process writing nr_hugepages): the 4 KiB results stand, the 2 MiB run is
                // reported as failed
                Err(e) if b == "hugetlbfs-2m" => {
                    out.notes.push(format!("2 MiB run failed: {e}"));
                    continue 'backends;
                }
                Err(e) => return Err(e),
            }
        }
        let mut sorted = samples.clone();
        out.runs.push(Run {
            backend: b.to_string(),
            startup_s: median(&mut sorted),
            vm_pte_kb: last.0,
            vm_rss_kb: last.1,
            hugetlb_kb: last.2,
            samples_s: samples,
        });
    }
    let changed = guard.prev;
    drop(guard);
    out.notes.push(match (changed, read_u64(NR)) {
        (Some(prev), Some(p)) => format!("nr_hugepages restored to {prev}: read back {p}"),
        (Some(prev), None) => format!("nr_hugepages restored to {prev}: cannot read it back"),
        (None, _) => "nr_hugepages not changed (enough 2 MiB pages were free)".into(),
    });
    let get = |n: &str| out.runs.iter().find(|r| r.backend == n);
    let base = get("baseline").map_or(0.0, |b| b.startup_s);
    if let (Some(a), Some(b)) = (get("shm-4k"), get("hugetlbfs-2m")) {
        let (pa, pb) = (a.startup_s - base, b.startup_s - base);
        if pb > 0.0 && pa > 0.0 {
            out.prealloc_ratio_4k_2m = Some(pa / pb);
        } else {
            out.notes.push(
                "2 MiB prealloc time not above the no-prealloc baseline; ratio not computed".into(),
            );
        }
        if b.vm_pte_kb > 0 {
            out.pte_ratio_4k_2m = Some(a.vm_pte_kb as f64 / b.vm_pte_kb as f64);
        }
    }
    Ok(out)
}

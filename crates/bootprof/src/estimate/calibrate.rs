//! QEMU prealloc calibration: start `qemu-system-x86_64` (TCG) with a preallocated memory
//! backend of 4 KiB pages (tmpfs `/dev/shm`, as Kata uses without hugepages), anonymous RAM
//! (eligible for THP) and 2 MiB hugetlbfs pages, time start-up until QMP answers, and read
//! the process's page-table memory (`VmPTE`). Hugepages are reserved through
//! `/proc/sys/vm/nr_hugepages` and the pages added are given back afterwards (also on error),
//! from whatever the shared pool holds then; a hugetlbfs mount made for the run is unmounted.

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

impl Qemu {
    /// The error for a QMP conversation that failed with `err`: when QEMU has exited (or
    /// exits within a few seconds: a reset connection comes before the exit status), it says
    /// so with its status and the last line it wrote on stderr; else `err`.
    fn failed(&mut self, backend: &str, err: CalibrateError) -> CalibrateError {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return self.exited(backend, st),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => return err,
            }
        }
    }

    /// QEMU exited with `st`: its status and the last line it wrote on stderr.
    fn exited(&mut self, backend: &str, st: std::process::ExitStatus) -> CalibrateError {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let last = err
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("nothing on stderr");
        CalibrateError::Failed(format!(
            "QEMU ({backend}) exited with {st} before answering QMP: {last}"
        ))
    }
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
            return Err(q.exited(backend, st));
        }
        if let Ok(s) = UnixStream::connect(&sock) {
            break s;
        }
        if Instant::now() > deadline {
            return Err(CalibrateError::Failed(format!(
                "QEMU ({backend}) did not open QMP within 120 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    qmp_status(&stream, backend).map_err(|e| q.failed(backend, e))?;
    let secs = start.elapsed().as_secs_f64();
    let pte = status_kb(pid, "VmPTE:");
    let rss = status_kb(pid, "VmRSS:");
    let huge = status_kb(pid, "HugetlbPages:");
    let _ = (&stream).write_all(b"{\"execute\":\"quit\"}\n");
    let _ = q.child.wait();
    Ok((secs, pte, rss, huge))
}

/// Read QEMU's QMP greeting, enter command mode and ask for the status; `Ok` once both
/// commands are answered.
fn qmp_status(stream: &UnixStream, backend: &str) -> Result<(), CalibrateError> {
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(io("qmp"))?;
    let mut w = stream.try_clone().map_err(io("qmp"))?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).map_err(io("qmp greeting"))?;
    if !line.contains("QMP") {
        return Err(CalibrateError::Failed(format!(
            "QEMU ({backend}): unexpected QMP greeting {line:?}"
        )));
    }
    w.write_all(b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-status\"}\n")
        .map_err(io("qmp"))?;
    let mut answered = 0;
    while answered < 2 {
        line.clear();
        if r.read_line(&mut line).map_err(io("qmp"))? == 0 {
            return Err(CalibrateError::Failed(format!(
                "QEMU ({backend}) closed QMP before answering"
            )));
        }
        if line.contains("\"return\"") {
            answered += 1;
        }
    }
    Ok(())
}

/// Gives back the hugepages calibration added and unmounts a hugetlbfs it mounted, on drop.
struct HugeGuard {
    /// Pages calibration added to the persistent pool.
    added: Option<u64>,
    mounted: bool,
}

const NR: &str = "/proc/sys/vm/nr_hugepages";
const FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
const RESV: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages";

impl HugeGuard {
    /// Lower the pool by the pages calibration added, from whatever it holds now (other
    /// programs and VMs share it: writing the old value back would take their pages or leave
    /// ours); (pool before, pool written). Once.
    fn give_back(&mut self) -> Option<(u64, u64)> {
        let added = self.added.take()?;
        let now = read_u64(NR)?;
        let to = now.saturating_sub(added);
        std::fs::write(NR, to.to_string()).ok()?;
        Some((now, to))
    }
}

impl Drop for HugeGuard {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("/dev/hugepages").status();
        }
        self.give_back();
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
    // free pages some mapping has reserved are not ours to use
    let avail = || {
        read_u64(FREE)
            .unwrap_or(0)
            .saturating_sub(read_u64(RESV).unwrap_or(0))
    };
    let free = avail();
    if free < pages {
        let prev =
            read_u64(NR).ok_or_else(|| CalibrateError::Failed(format!("cannot read {NR}")))?;
        std::fs::write(NR, (prev + pages - free).to_string())
            .map_err(io(format!("writing {NR} (needs root)")))?;
        guard.added = Some(read_u64(NR).unwrap_or(prev).saturating_sub(prev));
        let now = avail();
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
        added: None,
        mounted: false,
    };
    'backends: for b in ["baseline", "shm-4k", "ram-thp", "hugetlbfs-2m"] {
        // the shared pool is asked for pages only once the 4 KiB runs are done
        if b == "hugetlbfs-2m" {
            if let Err(e) = prepare_hugepages(memory.div_ceil(2 << 20) + 8, &mut guard) {
                out.notes.push(format!("2 MiB hugepages skipped: {e}"));
                continue;
            }
        }
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
    let added = guard.added;
    let given = guard.give_back();
    drop(guard);
    out.notes.push(match (added, given, read_u64(NR)) {
        (Some(a), Some((from, to)), Some(p)) => {
            format!("nr_hugepages restored to {to}: read back {p} (gave back the {a} pages calibration added; the pool was {from})")
        }
        (Some(a), _, _) => format!("nr_hugepages: the {a} pages calibration added could not be given back"),
        (None, _, _) => "nr_hugepages not changed (enough 2 MiB pages were free)".into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A QEMU that dies on an option it cannot accept (a memory backend whose alignment is
    /// not a power of two), started the way calibration starts it: the error says QEMU
    /// exited, with what it said last, whether it died before or after opening its QMP socket.
    #[test]
    fn a_qemu_that_dies_is_named_with_its_last_words() {
        let Some(qemu) = testkit::which("qemu-system-x86_64") else {
            return testkit::skip(
                "a_qemu_that_dies_is_named_with_its_last_words",
                "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
            );
        };
        let d = tempfile::tempdir().unwrap();
        let wrapper = d.path().join("qemu");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\necho 'a first line of noise' >&2\nexec {} \"$@\" -object memory-backend-file,id=bad,size=2M,mem-path=/dev/shm,align=3M\n",
                qemu.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        for n in 0..3 {
            let e = one(wrapper.to_str().unwrap(), "baseline", 64 << 20, d.path(), n)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("QEMU (baseline) exited with exit status: 1 before answering QMP: "),
                "{e}"
            );
            assert!(
                e.ends_with("alignment 0x300000 must be a power of two"),
                "{e}"
            );
            assert!(!e.contains("noise") && !e.contains('\n'), "{e}");
        }
    }
}

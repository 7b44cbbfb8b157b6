//! End-to-end test harness: a real containerd with NRI enabled in a temporary directory, CRI
//! pods and containers made with crictl the way the kubelet asks for them, and each
//! container's cpuset read back from its cgroup and from `/proc`.
//!
//! Used from an integration test of the `nri` crate with `mod support;`:
//!
//! ```ignore
//! mod support;
//! use support::{Containerd, ContainerdOpts, PodSpec, Runtime};
//!
//! #[test]
//! fn pins_a_guaranteed_pod() {
//!     testkit::skip_unless!(testkit::is_root(), "needs root: runs containerd");
//!     let rt = match Runtime::locate() {
//!         Ok(rt) => rt,
//!         Err(why) => return testkit::skip(&testkit::current_test(), why),
//!     };
//!     let _host = testkit::host_lock();
//!     let tmp = tempfile::tempdir().expect("a temporary directory");
//!     let opts = ContainerdOpts::default();
//!     let mut ctd = Containerd::start(&rt, tmp.path(), opts).expect("containerd");
//!     // ... connect the plugin to ctd.nri_socket() ...
//!     let pod = PodSpec::guaranteed("g", 1, 64 << 20);
//!     let pod_id = ctd.run_pod(&pod).expect("pod");
//!     let id = ctd.run_container(&pod_id, &pod.container("main"), &pod).expect("container");
//!     // ... or ctd.create(..) then ctd.start_container(..); ctd.stop_container, remove_container,
//!     // stop_pod, remove_pod, pid, inspect ...
//!     let cpus = ctd.cpuset_of(&id).expect("cpuset").agreed().expect("one cpuset");
//!     ctd.stop().expect("clean stop");
//! }
//! ```
//!
//! What it needs: root, the runtime built by `crates/nri/tests/e2e/build-runtime.sh` (found by
//! [`Runtime::locate`]), a static busybox (`busybox-static`), and bash, GNU tar, gzip,
//! sha256sum and jq for `deploy/oci-image.sh`, which builds the busybox and pause images.
//!
//! Everything containerd keeps lives in the temporary directory given to
//! [`Containerd::start`], except what containerd and runc put elsewhere by design: the pods'
//! cgroups (under `/kubepods` in every hierarchy, as the kubelet's cgroupfs driver names them;
//! removed again on stop) and the shims' sockets in `/run/containerd/s` (gone when the shims
//! exit). The temporary directory must outlive the [`Containerd`]: declare it first, so that it
//! drops last (and the host lock before both). Its path must be short: containerd's sockets
//! live there (`tempfile::tempdir()` under `/tmp` is fine).
//!
//! The directory's layout, for reading after a failure:
//!
//! ```text
//! config.toml        containerd's config (version 3: containerd 2.4 migrates it to its
//!                    version 4 at start, with a warning in the log)
//! containerd.log     containerd's output, every start appended, each after a `=== harness` line
//! containerd.sock    gRPC (crictl, ctr); containerd.sock.ttrpc, debug.sock beside it
//! nri/nri.sock       the NRI socket; nri/plugins, nri/conf.d empty
//! crictl.yaml        `crictl --config DIR/crictl.yaml ps -a` talks to this containerd
//! requests/          every pod and container config sent, as crictl's JSON
//! pods/              the pods' log directories (<ns>_<name>_<uid>/<container>/0.log)
//! images/            busybox.tar and pause.tar (deploy/oci-image.sh)
//! cdi/               CDI spec directory (empty; tests may write specs here)
//! cni/               empty CNI dirs (no pod networking: host-network pods only)
//! root/ state/ runc/ opt/   containerd's and runc's own state
//! ```
//!
//! Teardown ([`Containerd::stop`], or drop): every pod stopped and removed through CRI,
//! containerd stopped with SIGTERM, then anything left (runc containers, shims) killed,
//! everything mounted under the directory unmounted, the pods' cgroups removed (and
//! `/kubepods` when it did not exist before). `stop` says what it had to clean up by force.

#![allow(dead_code)] // each test binary uses a part of the harness

mod cgroup;
mod containerd;
mod cri;
mod process;

#[allow(unused_imports)]
pub use cgroup::{online_cpus, CgroupCpus, ContainerCpuset};
#[allow(unused_imports)]
pub use containerd::{Containerd, ContainerdOpts, BUSYBOX_IMAGE, PAUSE_IMAGE};
#[allow(unused_imports)]
pub use cri::{ContainerSpec, PodSpec, Qos, Resources};

/// The runtime, or `None` after a named skip when the test cannot run here (not root, or the
/// runtime not built).
pub fn runtime_or_skip(test: &str) -> Option<Runtime> {
    if !testkit::is_root() {
        testkit::skip(
            test,
            "needs root: runs containerd, mounts overlays, makes cgroups",
        );
        return None;
    }
    match Runtime::locate() {
        Ok(rt) => Some(rt),
        Err(why) => {
            testkit::skip(test, why);
            None
        }
    }
}

use std::fmt;
use std::path::{Path, PathBuf};

/// A harness failure: one message naming what failed, with the tool's output and the tail of
/// containerd's log where they help. `Debug` prints the message as it is (multi-line), so
/// `.expect(..)` and `-> Result<(), Error>` tests show it readably.
pub struct Error(pub String);

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The environment variable naming the runtime directory (what `build-runtime.sh DIR` built).
pub const RUNTIME_ENV: &str = "VMTUNE_NRI_RUNTIME";

/// The binaries `build-runtime.sh` builds, and the files the images are made from.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub dir: PathBuf,
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    pub shim: PathBuf,
    pub runc: PathBuf,
    pub crictl: PathBuf,
    /// A statically linked busybox, copied into the busybox and pause images.
    pub busybox: PathBuf,
    /// `deploy/oci-image.sh`.
    pub oci_image: PathBuf,
}

impl Runtime {
    /// Find the runtime: `$VMTUNE_NRI_RUNTIME`, else `nri-runtime` in the cargo target
    /// directory (`$CARGO_TARGET_DIR`, the one holding this test binary, or `<workspace>/target`).
    /// `Err` is a reason to skip the test with, saying what is missing and how to get it.
    pub fn locate() -> std::result::Result<Runtime, String> {
        let dir = runtime_dir()?;
        let bin = |name: &str| dir.join(name);
        let missing: Vec<&str> = [
            "containerd",
            "ctr",
            "containerd-shim-runc-v2",
            "runc",
            "crictl",
        ]
        .into_iter()
        .filter(|n| !is_executable(&bin(n)))
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the containerd runtime is not built in {} (missing {}): run \
                 crates/nri/tests/e2e/build-runtime.sh, or set {RUNTIME_ENV}",
                dir.display(),
                missing.join(", ")
            ));
        }
        let busybox = ["/usr/bin/busybox", "/bin/busybox"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("no busybox: apt-get install busybox-static")?;
        match elf_interpreter(&busybox) {
            Ok(None) => {}
            Ok(Some(interp)) => {
                return Err(format!(
                    "{} is dynamically linked (interpreter {interp}): the images need a static \
                     one, apt-get install busybox-static",
                    busybox.display()
                ))
            }
            Err(e) => return Err(format!("cannot read {}: {e}", busybox.display())),
        }
        for tool in ["bash", "tar", "gzip", "sha256sum", "jq"] {
            if testkit::which(tool).is_none() {
                return Err(format!(
                    "no {tool} on PATH: deploy/oci-image.sh needs bash, tar, gzip, sha256sum and jq"
                ));
            }
        }
        let oci_image = workspace_root().join("deploy/oci-image.sh");
        if !oci_image.is_file() {
            return Err(format!("{} is missing", oci_image.display()));
        }
        Ok(Runtime {
            containerd: bin("containerd"),
            ctr: bin("ctr"),
            shim: bin("containerd-shim-runc-v2"),
            runc: bin("runc"),
            crictl: bin("crictl"),
            busybox,
            oci_image,
            dir,
        })
    }
}

/// The workspace root (two levels above this package).
pub fn workspace_root() -> PathBuf {
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR"));
    pkg.ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| pkg.to_path_buf())
}

fn runtime_dir() -> std::result::Result<PathBuf, String> {
    if let Some(d) = std::env::var_os(RUNTIME_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    let mut tried = Vec::new();
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let t = workspace_root().join(t); // an absolute one replaces the root
        tried.push(t.join("nri-runtime"));
    }
    // the target directory holding this test binary: TARGET/debug/deps/NAME-HASH, or
    // TARGET/TRIPLE/debug/deps/NAME-HASH
    if let Ok(exe) = std::env::current_exe() {
        for up in exe.ancestors().skip(3).take(2) {
            tried.push(up.join("nri-runtime"));
        }
    }
    tried.push(workspace_root().join("target/nri-runtime"));
    if let Some(found) = tried.iter().find(|d| d.join("containerd").is_file()) {
        return Ok(found.clone());
    }
    Err(format!(
        "the containerd runtime is not built (looked in {}): run \
         crates/nri/tests/e2e/build-runtime.sh, or set {RUNTIME_ENV}",
        tried
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program interpreter of a 64-bit little-endian ELF file (`None`: statically linked, or
/// not a format this reads, which is then taken as static).
fn elf_interpreter(path: &Path) -> std::io::Result<Option<String>> {
    let data = std::fs::read(path)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "truncated ELF file");
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 || data[5] != 1 {
        return Ok(None);
    }
    let u16_at = |o: usize| -> std::io::Result<u64> {
        let b = data.get(o..o + 2).ok_or_else(bad)?;
        Ok(u64::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let u64_at = |o: usize| -> std::io::Result<u64> {
        let b = data.get(o..o + 8).ok_or_else(bad)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    for i in 0..phnum {
        let ph = usize::try_from(phoff + i * phentsize).map_err(|_| bad())?;
        let p_type = u32::try_from(u16_at(ph)? | (u16_at(ph + 2)? << 16)).map_err(|_| bad())?;
        if p_type == 3 {
            // PT_INTERP: p_offset at +8, p_filesz at +32
            let off = usize::try_from(u64_at(ph + 8)?).map_err(|_| bad())?;
            let len = usize::try_from(u64_at(ph + 32)?).map_err(|_| bad())?;
            let s = data.get(off..off + len).ok_or_else(bad)?;
            let s = String::from_utf8_lossy(s)
                .trim_end_matches('\0')
                .to_string();
            return Ok(Some(s));
        }
    }
    Ok(None)
}

/// The last `n` lines of a file (for error messages), or why it could not be read.
pub fn tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(b) => {
            let text = String::from_utf8_lossy(&b);
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(n);
            lines[from..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

//! Test support shared by every vmtune test binary (a dev-dependency only; never shipped).
//!
//! Three jobs, so that a test owns exactly what it asserts:
//!
//! * **One host lock for all test binaries** — [`host_lock`]: an exclusive `flock(2)` on
//!   `/run/lock/vmtune-tests.lock` (or `$VMTUNE_TEST_LOCK`). Every test that changes host
//!   state (IRQ affinity, masks, cpusets, hugepages, the clocksource, mounts), or compares
//!   host state that such tests change, holds it for its whole body. It serializes those tests
//!   across threads of one binary, across test binaries, and across concurrent `cargo test`
//!   runs of different checkouts. It is deliberately *not* `/tmp/vmtune-host.lock`: engineers
//!   take that one from the shell around whole cargo commands, and a test waiting on it would
//!   deadlock.
//! * **Named skips** — [`skip`] and [`skip_unless!`]: a test that cannot run here (no root, no
//!   QEMU, no guest kernel, no virtio-net device, no chromium …) says so by name instead of
//!   returning early as a silent `ok`. The line goes to stderr past the harness's output
//!   capture, and is appended to the skip log ([`skip_log_path`]: `$VMTUNE_SKIP_LOG`, else
//!   `target/<profile>/vmtune-test-skips.log`) that `.ci/run` summarizes after the suite. With
//!   `VMTUNE_TEST_NO_SKIP=1` a skip fails the test instead.
//! * **Snapshots of touched values** — [`Snapshot`]: read the values a test may change
//!   (files or computed key/values) before and after, and compare them key by key; keys
//!   that legitimately come and go (tasks, IRQ vectors) can be marked transient. Values that
//!   other processes share and change (the hugepage pool) do not belong in a snapshot: check
//!   what vmtune read, wrote and read back instead.
//!
//! [`layout`] reads a crate's source with `syn` for the layout tests: functions over a length
//! limit and import circles between modules.
//!
//! Probes for the usual requirements: [`is_root`], [`which`], [`can_write`], [`guest_kernel`],
//! [`read_u64`].
//!
//! ```no_run
//! #[test]
//! fn routes_irqs_and_restores_them() {
//!     testkit::skip_unless!(testkit::is_root(), "needs root: it writes /proc/irq/*/smp_affinity_list");
//!     let _host = testkit::host_lock();
//!     let before = testkit::Snapshot::of_files(["/proc/irq/default_smp_affinity"]);
//!     // ... change and restore ...
//!     before.assert_same(&before.reread(), |_| false, "after restore");
//! }
//! ```

pub mod kvm;
pub mod layout;
pub mod process;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Environment variable naming the host lock file (default [`DEFAULT_LOCK`]).
pub const LOCK_ENV: &str = "VMTUNE_TEST_LOCK";
/// The host lock shared by all test binaries.
pub const DEFAULT_LOCK: &str = "/run/lock/vmtune-tests.lock";
/// Environment variable naming the skip log (default: [`skip_log_path`]).
pub const SKIP_LOG_ENV: &str = "VMTUNE_SKIP_LOG";
/// Set to `1` to turn every skip into a failure.
pub const NO_SKIP_ENV: &str = "VMTUNE_TEST_NO_SKIP";
/// Environment variable naming the guest kernel for QEMU guest tests.
pub const GUEST_KERNEL_ENV: &str = "VMTUNE_GUEST_KERNEL";

// ---------------------------------------------------------------------------------------------
// the host lock

/// Held while a test touches the host; released on drop (also when the test panics).
#[derive(Debug)]
pub struct HostLock {
    _file: File,
    path: PathBuf,
}

impl HostLock {
    /// The lock file this guard holds.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The host lock's path: `$VMTUNE_TEST_LOCK`, else [`DEFAULT_LOCK`] where `/run/lock` exists,
/// else `vmtune-tests.lock` in the temporary directory.
pub fn lock_path() -> PathBuf {
    if let Some(p) = std::env::var_os(LOCK_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let default = Path::new(DEFAULT_LOCK);
    if default.parent().is_some_and(Path::is_dir) {
        default.to_path_buf()
    } else {
        std::env::temp_dir().join("vmtune-tests.lock")
    }
}

/// Take the host lock, waiting as long as it takes. A wait of more than a minute (another run holding it) is reported
/// on stderr, so a slow test run says what it waited for.
pub fn host_lock() -> HostLock {
    let path = lock_path();
    let file = open_lock_file(&path)
        .unwrap_or_else(|e| panic!("testkit: cannot open the host lock {}: {e}", path.display()));
    use rustix::fs::{flock, FlockOperation};
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let t = Instant::now();
            loop {
                match flock(&file, FlockOperation::LockExclusive) {
                    Ok(()) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => panic!("testkit: flock {}: {e}", path.display()),
                }
            }
            if t.elapsed() > Duration::from_secs(60) {
                loud(&format!(
                    "testkit: {} waited {:.1} s for the host lock {}",
                    current_test(),
                    t.elapsed().as_secs_f64(),
                    path.display()
                ));
            }
        }
        Err(e) => panic!("testkit: flock {}: {e}", path.display()),
    }
    HostLock { _file: file, path }
}

/// Open (creating it, world-writable, if needed) the lock file. `flock` needs no write
/// permission, so a lock file another user created is opened read-only.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    match OpenOptions::new().read(true).open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(d)?;
            }
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            use std::os::unix::fs::PermissionsExt;
            let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// named skips

/// The running test's name as the harness knows it (libtest names each test's thread after
/// the test), or `?` outside a test thread.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("?")
        .to_string()
}

/// The test binary's name without cargo's hash (`cli_bench-0123abcd…` → `cli_bench`).
pub fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            name.to_string()
        }
        _ => stem,
    }
}

/// The skip log: `$VMTUNE_SKIP_LOG`, else `vmtune-test-skips.log` in the cargo profile
/// directory of the running test binary (`target/debug/`), else in the temporary directory.
pub fn skip_log_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let profile_dir = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        // target/debug/deps/NAME-HASH → target/debug
        if deps.file_name()? == "deps" {
            deps.parent().map(Path::to_path_buf)
        } else {
            Some(deps.to_path_buf())
        }
    });
    profile_dir
        .unwrap_or_else(std::env::temp_dir)
        .join("vmtune-test-skips.log")
}

/// One skip, as written to the log: `UNIX_TIME BINARY::TEST: REASON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRecord {
    pub unix_time: u64,
    pub binary: String,
    pub test: String,
    pub reason: String,
}

impl SkipRecord {
    /// Parse one log line; `None` for a line that is not a skip record.
    pub fn parse(line: &str) -> Option<SkipRecord> {
        let (time, rest) = line.split_once(' ')?;
        let unix_time = time.parse().ok()?;
        let (name, reason) = rest.split_once(": ")?;
        let (binary, test) = name.split_once("::")?;
        Some(SkipRecord {
            unix_time,
            binary: binary.to_string(),
            test: test.to_string(),
            reason: reason.to_string(),
        })
    }
}

impl fmt::Display for SkipRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}::{}: {}",
            self.unix_time, self.binary, self.test, self.reason
        )
    }
}

/// Record that `test` did not run here, and why: a loud line on stderr (which the test
/// harness does not capture) and a line in the skip log. The caller returns right after.
/// With `VMTUNE_TEST_NO_SKIP=1` in the environment this panics instead, so a run that must
/// exercise everything fails on a missing requirement.
pub fn skip(test: &str, reason: impl fmt::Display) {
    let rec = SkipRecord {
        unix_time: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        binary: binary_name(),
        test: test.to_string(),
        reason: reason.to_string().replace(['\n', '\r'], " "),
    };
    if std::env::var(NO_SKIP_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        panic!(
            "{}::{} would be skipped ({}), and {NO_SKIP_ENV} is set",
            rec.binary, rec.test, rec.reason
        );
    }
    loud(&format!(
        "SKIPPED {}::{}: {}",
        rec.binary, rec.test, rec.reason
    ));
    let log = skip_log_path();
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(format!("{rec}\n").as_bytes()));
    if let Err(e) = written {
        loud(&format!(
            "testkit: could not record the skip in {}: {e}",
            log.display()
        ));
    }
}

/// Skip the current test (named by [`current_test`]) and return from it unless `cond` holds:
/// `skip_unless!(testkit::is_root(), "needs root: writes /proc/irq")`.
#[macro_export]
macro_rules! skip_unless {
    ($cond:expr, $($reason:tt)+) => {
        if !$cond {
            $crate::skip(&$crate::current_test(), format!($($reason)+));
            return;
        }
    };
}

/// All skips in a log (unparseable lines are ignored).
pub fn read_skip_log(path: &Path) -> Vec<SkipRecord> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter_map(SkipRecord::parse).collect())
        .unwrap_or_default()
}

/// Write to stderr directly: the harness captures `eprintln!` of passing tests, not this.
fn loud(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "\n*** {msg}");
}

// ---------------------------------------------------------------------------------------------
// probes

/// Whether the test runs as root (effective uid 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The first executable `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether this process may open `path` for writing (nothing is written): the honest test
/// for "may change this sysfs/procfs value", which root alone does not settle (read-only
/// mounts, containers).
pub fn can_write(path: impl AsRef<Path>) -> Result<(), String> {
    OpenOptions::new()
        .write(true)
        .open(path.as_ref())
        .map(drop)
        .map_err(|e| format!("cannot write {}: {e}", path.as_ref().display()))
}

/// A number from a sysfs/procfs file.
pub fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The guest kernel for QEMU guest tests: `$VMTUNE_GUEST_KERNEL` (which must exist when
/// set: a named kernel that is missing is a broken setup, not a reason to skip), else the
/// newest `/boot/vmlinuz-*`. `Err` says what to install.
pub fn guest_kernel() -> Result<PathBuf, String> {
    if let Some(k) = std::env::var_os(GUEST_KERNEL_ENV).filter(|k| !k.is_empty()) {
        let k = PathBuf::from(k);
        assert!(
            k.is_file(),
            "{GUEST_KERNEL_ENV}={} does not exist",
            k.display()
        );
        return Ok(k);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "no guest kernel: set {GUEST_KERNEL_ENV} or install one in /boot (.ci/run unpacks \
             Debian's linux-image-cloud-amd64 and sets {GUEST_KERNEL_ENV})"
        )
    })
}

// ---------------------------------------------------------------------------------------------
// snapshots

/// Values a test may change, by key: file contents (trimmed; an unreadable file is recorded
/// as `<unreadable: ERROR>`, so a file that appears or vanishes is a difference too) and
/// computed values the test inserts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    values: BTreeMap<String, String>,
    files: BTreeMap<String, PathBuf>,
}

/// One difference between two snapshots; `None` is "absent".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub key: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        write!(
            f,
            "{}: {} -> {}",
            self.key,
            show(&self.before),
            show(&self.after)
        )
    }
}

/// The trimmed contents of a file, or `<unreadable: ERROR>`.
pub fn read_value(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("<unreadable: {e}>"))
}

impl Snapshot {
    pub fn new() -> Snapshot {
        Snapshot::default()
    }

    /// A snapshot of these files, keyed by path.
    pub fn of_files<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Snapshot {
        let mut s = Snapshot::new();
        for p in paths {
            s.file(p);
        }
        s
    }

    /// Record a file's value under its path.
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Snapshot {
        let p = path.as_ref();
        let key = p.display().to_string();
        self.values.insert(key.clone(), read_value(p));
        self.files.insert(key, p.to_path_buf());
        self
    }

    /// Record a computed value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Snapshot {
        self.values.insert(key.into(), value.into());
        self
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The same files read again (computed values are not carried over).
    pub fn reread(&self) -> Snapshot {
        Snapshot::of_files(self.files.values())
    }

    /// Every key whose value differs. Keys for which `transient(key)` holds may be present on
    /// one side only (tasks and IRQ vectors come and go); where both sides have them, their
    /// values must still agree.
    pub fn differences(
        &self,
        after: &Snapshot,
        transient: impl Fn(&str) -> bool,
    ) -> Vec<Difference> {
        let mut out = Vec::new();
        for (k, v) in &self.values {
            match after.values.get(k) {
                Some(a) if a == v => {}
                None if transient(k) => {}
                a => out.push(Difference {
                    key: k.clone(),
                    before: Some(v.clone()),
                    after: a.cloned(),
                }),
            }
        }
        for (k, a) in &after.values {
            if !self.values.contains_key(k) && !transient(k) {
                out.push(Difference {
                    key: k.clone(),
                    before: None,
                    after: Some(a.clone()),
                });
            }
        }
        out
    }

    /// Panic with every difference listed (see [`Snapshot::differences`]).
    pub fn assert_same(&self, after: &Snapshot, transient: impl Fn(&str) -> bool, when: &str) {
        let d = self.differences(after, transient);
        assert!(
            d.is_empty(),
            "{when}: {} value(s) differ from before:\n{}",
            d.len(),
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// A hand-written plan (the `vmtune plan --json` schema) for one vCPU on CPU 0, 64 MiB of
/// 4 KiB pages, no device: applying any phase of it writes a journal and reserves nothing.
pub fn cpu0_plan_json(os: &str) -> String {
    format!(
        r#"{{"request": {{"name": "t", "vcpus": 1, "memory_bytes": 67108864, "devices": [], "profile": "gaming",
  "os": "{os}", "hugepages": "none", "host_cpus": null}},
 "host_source": "hand-written",
 "vcpus": [{{"vcpu": 0, "cpu": 0}}],
 "emulator_cpus": [0], "iothread_cpus": [], "host_cpus": [0],
 "guest_topology": {{"sockets": 1, "dies": 1, "cores": 1, "threads": 1}},
 "guest_numa": [],
 "memory": {{"host_nodes": [0], "hugepage_size_kb": 4, "pages": 0, "pages_per_node": []}},
 "devices": [],
 "irq": {{"vfio_cpus": [0], "host_cpus": [0]}},
 "cpu_features": {{"hyperv": [], "invtsc": false, "hide_hypervisor": false, "kvm_hidden": false}},
 "rationale": [], "warnings": []}}"#
    )
}

/// A headless-capable browser (chromium, chromium-browser or google-chrome), or `None` after
/// a named skip of the calling test.
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|c| which(c));
    if found.is_none() {
        skip(
            &current_test(),
            "chromium is not installed (Debian: chromium)",
        );
    }
    found
}

/// What headless chromium writes to stderr when a page has a problem: a script error, a
/// console message, a resource it could not load.
pub const BROWSER_PROBLEMS: [&str; 4] = [
    "Uncaught",
    "CONSOLE",
    "Failed to load resource",
    "ERR_FILE_NOT_FOUND",
];

/// Run headless `chromium` on `url` with `extra` arguments (`--dump-dom`,
/// `--screenshot=FILE`, …), its profile under `dir`, offline and logging to stderr.
pub fn headless(chromium: &Path, dir: &Path, extra: &[&str], url: &str) -> std::process::Output {
    std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("running chromium")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_names_lose_cargos_hash() {
        let n = binary_name();
        assert!(n.starts_with("testkit"), "{n}");
        assert!(!n.contains('-'), "{n}");
    }

    #[test]
    fn the_harness_names_test_threads() {
        assert_eq!(current_test(), "tests::the_harness_names_test_threads");
    }

    #[test]
    fn skip_records_round_trip() {
        let r = SkipRecord {
            unix_time: 17,
            binary: "cli_bench".into(),
            test: "suite_in_a_qemu_guest".into(),
            reason: "no guest kernel: set X: or Y".into(),
        };
        assert_eq!(SkipRecord::parse(&r.to_string()), Some(r));
        assert_eq!(SkipRecord::parse("garbage"), None);
        assert_eq!(SkipRecord::parse("12 no-colon-space"), None);
    }

    #[test]
    fn snapshots_compare_key_by_key() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, "1\n").unwrap();
        std::fs::write(&b, "x").unwrap();
        let mut before = Snapshot::of_files([&a, &b]);
        before.insert("task 7", "cpus 0-1");
        assert_eq!(before.get(&a.display().to_string()), Some("1"));
        assert!(before.differences(&before.clone(), |_| false).is_empty());
        std::fs::write(&a, "2").unwrap();
        std::fs::remove_file(&b).unwrap();
        let after = before.reread();
        let diffs = before.differences(&after, |k| k.starts_with("task "));
        assert_eq!(diffs.len(), 2, "{diffs:?}");
        assert_eq!(diffs[0].before.as_deref(), Some("1"));
        assert_eq!(diffs[0].after.as_deref(), Some("2"));
        assert!(diffs[1]
            .after
            .as_deref()
            .unwrap()
            .starts_with("<unreadable"));
        // the task is transient: absent afterwards is fine, but a changed value is not
        let mut moved = after.clone();
        moved.insert("task 7", "cpus 0");
        let d2 = before.differences(&moved, |k| k.starts_with("task "));
        assert!(d2.iter().any(|d| d.key == "task 7"), "{d2:?}");
        // a new non-transient key is a difference
        let mut extra = before.clone();
        extra.insert("new", "v");
        assert_eq!(before.differences(&extra, |_| false).len(), 1);
    }

    #[test]
    fn the_lock_excludes_other_holders() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub/lock");
        let f1 = open_lock_file(&path).unwrap();
        let f2 = open_lock_file(&path).unwrap();
        use rustix::fs::{flock, FlockOperation};
        flock(&f1, FlockOperation::NonBlockingLockExclusive).unwrap();
        // a second open file description, as another test thread or binary has
        assert!(flock(&f2, FlockOperation::NonBlockingLockExclusive).is_err());
        drop(f1);
        flock(&f2, FlockOperation::NonBlockingLockExclusive).unwrap();
    }

    #[test]
    fn skip_log_defaults_to_the_profile_dir() {
        if std::env::var_os(SKIP_LOG_ENV).is_none() {
            let p = skip_log_path();
            assert_eq!(p.file_name().unwrap(), "vmtune-test-skips.log");
            assert_ne!(p.parent().unwrap().file_name().unwrap(), "deps");
        }
    }

    /// Run by `skips_are_logged_and_can_be_made_fatal` in a child process with its own
    /// environment; does nothing otherwise.
    #[test]
    #[ignore]
    fn skip_helper() {
        if std::env::var_os("TESTKIT_SKIP_HELPER").is_some() {
            skip("the_named_test", "a reason: with a colon\nand a newline");
        }
    }

    #[test]
    fn skips_are_logged_and_can_be_made_fatal() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("skips.log");
        let child = |no_skip: &str| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["tests::skip_helper", "--exact", "--ignored", "--nocapture"])
                .env("TESTKIT_SKIP_HELPER", "1")
                .env(SKIP_LOG_ENV, &log)
                .env(NO_SKIP_ENV, no_skip)
                .output()
                .unwrap()
        };
        let out = child("0");
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("*** SKIPPED testkit::the_named_test: a reason"),
            "{err}"
        );
        let recs = read_skip_log(&log);
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert_eq!(recs[0].binary, "testkit");
        assert_eq!(recs[0].test, "the_named_test");
        assert_eq!(recs[0].reason, "a reason: with a colon and a newline");
        // VMTUNE_TEST_NO_SKIP=1: the skip fails the test, and is not logged as a skip
        let out = child("1");
        assert!(!out.status.success());
        assert_eq!(read_skip_log(&log).len(), 1);
    }

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("surely-not-a-command-vmtune").is_none());
    }
}

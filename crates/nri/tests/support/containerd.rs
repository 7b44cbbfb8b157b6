//! A containerd of its own in a temporary directory: config, start, readiness, images, restart,
//! and a teardown that leaves nothing mounted, running or in the cgroup trees.

use super::cgroup;
use super::process;
use super::{tail, Error, Result, Runtime};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The busybox image every container runs by default.
pub const BUSYBOX_IMAGE: &str = "vmtune.local/busybox:1";
/// The pause (sandbox) image: busybox's `sleep` as PID 1.
pub const PAUSE_IMAGE: &str = "vmtune.local/pause:1";

/// The busybox applets the busybox image links in `/bin`.
const APPLETS: &[&str] = &[
    "cat", "echo", "env", "false", "grep", "head", "id", "ls", "mkdir", "nproc", "ps", "rm", "sh",
    "sleep", "tail", "taskset", "touch", "true", "wc",
];

/// The longest unix socket path (`sun_path` is 108 bytes with its NUL; containerd's shims add
/// nothing to ours, but stay clear of the edge).
const MAX_SOCKET_PATH: usize = 100;

/// How containerd is configured and how long the harness waits for it.
#[derive(Debug, Clone)]
pub struct ContainerdOpts {
    /// NRI's `plugin_registration_timeout`: how long containerd waits for a plugin to register.
    pub nri_registration_timeout: Duration,
    /// NRI's `plugin_request_timeout`: how long containerd waits for a plugin's answer.
    pub nri_request_timeout: Duration,
    /// Runtime handlers besides `runc` (all run runc), for pods that name one.
    pub runtime_handlers: Vec<String>,
    /// How long containerd may take to answer after a start.
    pub start_timeout: Duration,
    /// How long containerd may take to exit after SIGTERM before it is killed.
    pub stop_timeout: Duration,
    /// crictl's `--timeout` (each CRI call).
    pub cri_timeout: Duration,
    /// containerd's log level (`info`; `debug` shows every CRI and NRI call).
    pub log_level: String,
}

impl Default for ContainerdOpts {
    fn default() -> ContainerdOpts {
        ContainerdOpts {
            nri_registration_timeout: Duration::from_secs(5),
            nri_request_timeout: Duration::from_secs(2),
            runtime_handlers: Vec::new(),
            start_timeout: Duration::from_secs(30),
            stop_timeout: Duration::from_secs(30),
            cri_timeout: Duration::from_secs(30),
            log_level: "info".into(),
        }
    }
}

/// A running containerd (see the module docs of `support`). Dropping it tears everything
/// down as [`Containerd::stop`] does, reporting problems on stderr.
pub struct Containerd {
    pub(super) runtime: Runtime,
    pub(super) dir: PathBuf,
    pub(super) opts: ContainerdOpts,
    child: Option<Child>,
    starts: u32,
    /// The pods' cgroup parents (`/kubepods/.../pod<uid>`), removed on stop.
    pod_cgroups: Mutex<Vec<String>>,
    /// Whether `/kubepods` existed in some hierarchy before the first start (then the QoS
    /// cgroups are someone else's and stay).
    kubepods_before: bool,
    /// Whether `/run/containerd` and `/run/containerd/s` (the shims' sockets) existed before.
    run_dirs_before: [bool; 2],
    torn_down: bool,
}

impl Containerd {
    /// Configure containerd in `dir` (an existing, preferably empty directory with a short
    /// path), start it, wait until it answers and its NRI socket exists, and import the busybox
    /// and pause images.
    pub fn start(runtime: &Runtime, dir: &Path, opts: ContainerdOpts) -> Result<Containerd> {
        let dir = dir
            .canonicalize()
            .map_err(|e| Error(format!("{}: {e}", dir.display())))?;
        let longest = dir.join("containerd.sock.ttrpc");
        if longest.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error(format!(
                "{} is too long for a unix socket path ({} > {MAX_SOCKET_PATH} bytes): use a \
                 shorter temporary directory",
                longest.display(),
                longest.as_os_str().len()
            )));
        }
        for h in &opts.runtime_handlers {
            if h.is_empty()
                || !h
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(Error(format!(
                    "runtime handler {h:?}: use letters, digits, - and _"
                )));
            }
        }
        for sub in [
            "root",
            "state",
            "opt",
            "nri/plugins",
            "nri/conf.d",
            "cni/bin",
            "cni/net.d",
            "cdi",
            "runc",
            "pods",
            "images",
            "requests",
        ] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d)
                .map_err(|e| Error(format!("cannot create {}: {e}", d.display())))?;
        }
        let mut ctd = Containerd {
            runtime: runtime.clone(),
            dir,
            opts,
            child: None,
            starts: 0,
            pod_cgroups: Mutex::new(Vec::new()),
            kubepods_before: cgroup::cgroup_exists("kubepods"),
            run_dirs_before: [
                Path::new("/run/containerd").exists(),
                Path::new("/run/containerd/s").exists(),
            ],
            torn_down: false,
        };
        ctd.write_config()?;
        let images = ctd.build_images()?;
        ctd.spawn()?;
        for image in &images {
            ctd.import(image)?;
        }
        for name in [PAUSE_IMAGE, BUSYBOX_IMAGE] {
            ctd.wait_for_image(name)?;
        }
        Ok(ctd)
    }

    /// The temporary directory everything lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// containerd's gRPC socket (what crictl and ctr talk to).
    pub fn grpc_socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// The NRI socket a plugin connects to.
    pub fn nri_socket(&self) -> PathBuf {
        self.dir.join("nri/nri.sock")
    }

    /// NRI's `plugin_config_path` (empty).
    pub fn nri_plugin_config_dir(&self) -> PathBuf {
        self.dir.join("nri/conf.d")
    }

    /// The directory containerd reads CDI specs from (empty; a test may write specs there).
    pub fn cdi_spec_dir(&self) -> PathBuf {
        self.dir.join("cdi")
    }

    /// containerd's log (all starts appended).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }

    /// The last `n` lines of containerd's log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log_path(), n)
    }

    /// containerd's pid, while it runs.
    pub fn containerd_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop containerd (SIGTERM; containers keep running in their shims) and start it again on
    /// the same root, waiting until it answers again. NRI plugins must reconnect.
    pub fn restart(&mut self) -> Result<()> {
        if self.torn_down {
            return Err(Error("restart after stop: start a new Containerd".into()));
        }
        self.terminate().map_err(|e| self.with_log(e))?;
        self.spawn()
    }

    /// Tear everything down: remove every pod through CRI, stop containerd, kill what is left
    /// of its shims and containers, unmount what it mounted under the directory, and remove the
    /// pods' cgroups. `Err` lists whatever could not be cleaned (the rest is still done).
    pub fn stop(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut problems = Vec::new();
        let running = self
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        if running {
            match self.crictl_bare(&["pods", "-q"]) {
                Ok(pods) => {
                    for p in pods.lines() {
                        if let Err(e) = self
                            .crictl_bare(&["stopp", p])
                            .and_then(|_| self.crictl_bare(&["rmp", p]))
                        {
                            problems.push(format!("removing pod {p}: {e}"));
                        }
                    }
                }
                Err(e) => problems.push(format!("listing pods: {e}")),
            }
        }
        if let Err(e) = self.terminate() {
            problems.push(e.0);
        }
        self.kill_leftovers(&mut problems);
        if let Err(e) = process::unmount_all(&self.dir) {
            problems.push(e.0);
        }
        self.remove_cgroups(&mut problems);
        self.remove_run_dirs();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(self.with_log(Error(format!(
                "containerd in {} did not stop cleanly:\n  {}",
                self.dir.display(),
                problems.join("\n  ")
            ))))
        }
    }

    /// Add `err`'s context: the tail of containerd's log.
    pub(super) fn with_log(&self, err: Error) -> Error {
        Error(format!(
            "{}\n--- the last lines of {} ---\n{}",
            err.0,
            self.log_path().display(),
            self.log_tail(30)
        ))
    }

    pub(super) fn note_pod_cgroup(&self, parent: &str) {
        if let Ok(mut v) = self.pod_cgroups.lock() {
            if !v.iter().any(|p| p == parent) {
                v.push(parent.to_string());
            }
        }
    }

    fn write_config(&self) -> Result<()> {
        let d = |sub: &str| toml_string(&self.dir.join(sub));
        let mut runtimes = String::new();
        for name in
            std::iter::once("runc").chain(self.opts.runtime_handlers.iter().map(String::as_str))
        {
            runtimes.push_str(&format!(
                "    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{name}]\n      \
                 runtime_type = \"io.containerd.runc.v2\"\n      \
                 [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{name}.options]\n        \
                 BinaryName = {runc}\n        Root = {root}\n        SystemdCgroup = false\n",
                runc = toml_string(&self.runtime.runc),
                root = d("runc"),
            ));
        }
        let config = format!(
            r#"# written by crates/nri/tests/support (the vmtune NRI end-to-end harness)
version = 3
root = {root}
state = {state}

[grpc]
  address = {grpc}

[ttrpc]
  address = {ttrpc}

[debug]
  address = {debug}
  level = "{level}"

[plugins.'io.containerd.internal.v1.opt']
  path = {opt}

[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = {nri}
  plugin_path = {nri_plugins}
  plugin_config_path = {nri_conf}
  plugin_registration_timeout = "{reg}ms"
  plugin_request_timeout = "{req}ms"

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [{cdi}]
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [{cni_bin}]
    conf_dir = {cni_conf}
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
{runtimes}"#,
            root = d("root"),
            state = d("state"),
            grpc = d("containerd.sock"),
            ttrpc = d("containerd.sock.ttrpc"),
            debug = d("debug.sock"),
            level = self.opts.log_level,
            opt = d("opt"),
            nri = d("nri/nri.sock"),
            nri_plugins = d("nri/plugins"),
            nri_conf = d("nri/conf.d"),
            reg = self.opts.nri_registration_timeout.as_millis(),
            req = self.opts.nri_request_timeout.as_millis(),
            pause = PAUSE_IMAGE,
            cdi = d("cdi"),
            cni_bin = d("cni/bin"),
            cni_conf = d("cni/net.d"),
        );
        let path = self.dir.join("config.toml");
        std::fs::write(&path, config)
            .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))?;
        // crictl reads /etc/crictl.yaml unless given a config: this one says the same as the
        // harness's flags, for a human debugging with `crictl --config DIR/crictl.yaml ps -a`
        let endpoint = format!("unix://{}", self.grpc_socket().display());
        let crictl = format!(
            "runtime-endpoint: {endpoint}\nimage-endpoint: {endpoint}\ntimeout: {}\n\
             pull-image-on-create: false\n",
            self.opts.cri_timeout.as_secs().max(1)
        );
        let path = self.dir.join("crictl.yaml");
        std::fs::write(&path, crictl)
            .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))
    }

    /// Build the busybox and pause images with `deploy/oci-image.sh`.
    fn build_images(&self) -> Result<Vec<PathBuf>> {
        let busybox = format!("{}:/bin/busybox", self.runtime.busybox.display());
        let mut out = Vec::new();
        for (name, file, entrypoint, applets) in [
            (BUSYBOX_IMAGE, "busybox.tar", r#"["/bin/sh"]"#, APPLETS),
            (
                PAUSE_IMAGE,
                "pause.tar",
                r#"["/bin/sleep","2147483647"]"#,
                &["sleep"][..],
            ),
        ] {
            let tar = self.dir.join("images").join(file);
            let mut cmd = Command::new("bash");
            cmd.arg(&self.runtime.oci_image)
                .args([
                    "--name",
                    name,
                    "--entrypoint",
                    entrypoint,
                    "--file",
                    &busybox,
                ])
                .args(["--dir", "/tmp:1777", "--out"])
                .arg(&tar);
            for a in applets {
                cmd.args(["--symlink", &format!("/bin/{a}=busybox")]);
            }
            process::run(&mut cmd, Duration::from_secs(120))?;
            out.push(tar);
        }
        Ok(out)
    }

    fn import(&self, tar: &Path) -> Result<()> {
        let mut cmd = Command::new(&self.runtime.ctr);
        cmd.arg("-a")
            .arg(self.grpc_socket())
            .args(["-n", "k8s.io", "images", "import"])
            .arg(tar);
        process::run(&mut cmd, Duration::from_secs(120))
            .map(drop)
            .map_err(|e| self.with_log(e))
    }

    /// Wait until the CRI plugin's image store has `name` (it follows the import's events).
    fn wait_for_image(&self, name: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.crictl(&["inspecti", name]) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(Error(format!("CRI does not see the imported {name}: {e}")))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn spawn(&mut self) -> Result<()> {
        self.starts += 1;
        let log_path = self.log_path();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Error(format!("cannot open {}: {e}", log_path.display())))?;
        {
            use std::io::Write;
            let _ = writeln!(
                log,
                "=== harness: start {} of containerd ({}) ===",
                self.starts,
                self.runtime.containerd.display()
            );
        }
        let log_err = log
            .try_clone()
            .map_err(|e| Error(format!("{}: {e}", log_path.display())))?;
        // the shim and runc are found next to containerd (and by BinaryName)
        let path = match std::env::var_os("PATH") {
            Some(p) => {
                let mut dirs = vec![self.runtime.dir.clone()];
                dirs.extend(std::env::split_paths(&p));
                std::env::join_paths(dirs).unwrap_or(p)
            }
            None => self.runtime.dir.clone().into_os_string(),
        };
        // a socket left by a containerd that was killed would make the readiness check pass
        // before this one listens
        let _ = std::fs::remove_file(self.nri_socket());
        let child = Command::new(&self.runtime.containerd)
            .arg("--config")
            .arg(self.dir.join("config.toml"))
            .env("PATH", path)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| {
                Error(format!(
                    "cannot start {}: {e}",
                    self.runtime.containerd.display()
                ))
            })?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Until containerd answers on its socket (`ctr version`) and the NRI socket exists.
    fn wait_ready(&mut self) -> Result<()> {
        let t0 = Instant::now();
        let deadline = t0 + self.opts.start_timeout;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(
                        self.with_log(Error(format!("containerd exited at start ({status})")))
                    );
                }
            }
            if self.grpc_socket().exists() && self.nri_socket().exists() {
                let mut cmd = Command::new(&self.runtime.ctr);
                cmd.arg("-a").arg(self.grpc_socket()).arg("version");
                if process::run(&mut cmd, Duration::from_secs(5)).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let missing = [self.grpc_socket(), self.nri_socket()]
                    .into_iter()
                    .filter(|p| !p.exists())
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>();
                let _ = self.terminate();
                return Err(self.with_log(Error(format!(
                    "containerd did not answer within {:.0} s{}",
                    self.opts.start_timeout.as_secs_f64(),
                    if missing.is_empty() {
                        String::new()
                    } else {
                        format!(" (no {})", missing.join(", no "))
                    }
                ))));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM containerd and wait for it; SIGKILL after `stop_timeout`.
    fn terminate(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error(format!("containerd had exited by itself ({status})")));
        }
        process::signal(child.id(), "TERM")?;
        match process::wait_timeout(&mut child, self.opts.stop_timeout) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Error(format!(
                "containerd did not exit within {:.0} s of SIGTERM (killed)",
                self.opts.stop_timeout.as_secs_f64()
            ))),
            Err(e) => Err(Error(format!("waiting for containerd: {e}"))),
        }
    }

    /// After containerd is gone: containers runc still knows (`runc delete --force` kills them
    /// and removes their cgroups) and shims still serving this containerd.
    fn kill_leftovers(&self, problems: &mut Vec<String>) {
        let runc_root = self.dir.join("runc/k8s.io");
        if runc_root.is_dir() {
            let mut list = Command::new(&self.runtime.runc);
            list.arg("--root").arg(&runc_root).args(["list", "-q"]);
            match process::run(&mut list, Duration::from_secs(30)) {
                Ok(out) => {
                    for id in out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
                        let mut del = Command::new(&self.runtime.runc);
                        del.arg("--root")
                            .arg(&runc_root)
                            .args(["delete", "--force", id]);
                        match process::run(&mut del, Duration::from_secs(30)) {
                            Ok(_) => problems.push(format!(
                                "container {id} was left (killed and deleted with runc delete \
                                 --force)"
                            )),
                            Err(e) => problems.push(e.0),
                        }
                    }
                }
                Err(e) => problems.push(e.0),
            }
        }
        let sock = self.grpc_socket().display().to_string();
        let shims = process::find_processes(|args| {
            args[0].ends_with("containerd-shim-runc-v2")
                && args.windows(2).any(|w| w[0] == "-address" && w[1] == sock)
        });
        for pid in shims {
            let _ = process::signal(pid, "KILL");
            problems.push(format!("shim {pid} was still running (killed)"));
        }
    }

    fn remove_cgroups(&self, problems: &mut Vec<String>) {
        let parents = self
            .pod_cgroups
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default();
        // runc removes a container's cgroup when the container is deleted, a moment after
        // the CRI call returns; give it that moment
        for parent in &parents {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match cgroup::remove_cgroup(parent) {
                    Ok(()) => break,
                    Err(e) if Instant::now() >= deadline => {
                        problems.push(format!("pod cgroup left: {e}"));
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
        if !self.kubepods_before && !parents.is_empty() {
            for qos in ["kubepods/besteffort", "kubepods/burstable", "kubepods"] {
                if let Err(e) = cgroup::remove_cgroup(qos) {
                    problems.push(format!("QoS cgroup left: {e}"));
                }
            }
        }
    }

    /// The shims' socket directory is containerd's fixed `/run/containerd/s`: remove it (and
    /// `/run/containerd`) when this harness made them and they are empty.
    fn remove_run_dirs(&self) {
        if !self.run_dirs_before[1] {
            let _ = std::fs::remove_dir("/run/containerd/s");
        }
        if !self.run_dirs_before[0] {
            let _ = std::fs::remove_dir("/run/containerd");
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("support::Containerd dropped: {e}");
        }
    }
}

/// A TOML basic string of a path.
fn toml_string(p: &Path) -> String {
    let s = p.display().to_string();
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

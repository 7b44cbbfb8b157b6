//! A Kubernetes control plane a test starts and stops: etcd, kube-apiserver and (when asked)
//! kube-scheduler and kube-controller-manager v1.37.2, the binaries
//! `deploy/check/build-apiserver.sh --control-plane` builds into
//! `$CARGO_TARGET_DIR/k8s-check` (or `$VMTUNE_K8S_CHECK`). Everything listens on 127.0.0.1 on
//! free ports and lives in a temporary directory; each daemon is stopped by its PID when the
//! value is dropped, newest first (the API server before etcd).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const K8S_CHECK_ENV: &str = "VMTUNE_K8S_CHECK";
pub const VMTUNE_BIN_ENV: &str = "VMTUNE_BIN";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding `names`, or why none does (a reason to skip with).
pub fn k8s_check_dir(names: &[&str]) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(d) = std::env::var_os(K8S_CHECK_ENV).filter(|d| !d.is_empty()) {
        tried.push(PathBuf::from(d));
    } else {
        if let Some(t) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
            tried.push(workspace_root().join(t).join("k8s-check"));
        }
        if let Ok(exe) = std::env::current_exe() {
            for up in exe.ancestors().skip(3).take(2) {
                tried.push(up.join("k8s-check"));
            }
        }
        tried.push(workspace_root().join("target/k8s-check"));
    }
    if let Some(d) = tried
        .iter()
        .find(|d| names.iter().all(|b| d.join(b).is_file()))
    {
        if testkit::which("openssl").is_none() {
            return Err("no openssl on PATH (the service-account keys)".into());
        }
        return Ok(d.clone());
    }
    Err(format!(
        "{} are not built (looked in {}): run deploy/check/build-apiserver.sh --control-plane, or set {K8S_CHECK_ENV}",
        names.join(", "),
        tried
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The vmtune binary: `$VMTUNE_BIN`, else `cargo build -p vmtune` (a no-op when it is up to
/// date) in this test's profile.
pub fn vmtune_binary() -> Result<PathBuf, String> {
    if let Some(b) = std::env::var_os(VMTUNE_BIN_ENV).filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(b));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(workspace_root()).args([
        "build",
        "-p",
        "vmtune",
        "--bin",
        "vmtune",
        "--message-format=json-render-diagnostics",
    ]);
    let profile = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?.parent()?;
        dir.file_name()?.to_str().map(str::to_string)
    });
    if profile.as_deref() == Some("release") {
        cmd.arg("--release");
    }
    let out = run(&mut cmd, None, Duration::from_secs(1800));
    if out.status.is_none() && out.stderr.contains("cannot run") {
        return Err(format!(
            "no cargo to build vmtune with; or set {VMTUNE_BIN_ENV}"
        ));
    }
    assert!(out.success(), "cargo build -p vmtune: {out}");
    let exe = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "vmtune")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo build named no vmtune executable: {out}"));
    Ok(exe)
}

pub use testkit::process::{run, Ran};

/// A command's stdout as JSON; it must have succeeded.
pub fn json(r: &Ran) -> serde_json::Value {
    assert!(r.success(), "{r}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

/// Polls `f` every 100 ms until it answers `Some`, for at most `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub struct ControlPlane {
    pub dir: tempfile::TempDir,
    pub bin: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    pub kubeconfig: PathBuf,
    /// The API server's self-signed serving certificate (and its CA).
    pub ca: PathBuf,
    /// A file holding a token of a `system:masters` user.
    pub admin_token: PathBuf,
    children: Vec<(String, Child)>,
}

impl ControlPlane {
    /// etcd and kube-apiserver; with `full`, kube-scheduler and kube-controller-manager's
    /// resourceclaim-controller too.
    pub fn start(bin: &Path, full: bool) -> ControlPlane {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let d = dir.path().to_path_buf();
        let mut cp = ControlPlane {
            server: String::new(),
            kubeconfig: d.join("kubeconfig"),
            ca: d.join("certs/apiserver.crt"),
            admin_token: d.join("admin.token"),
            bin: bin.to_path_buf(),
            dir,
            children: Vec::new(),
        };
        let token = format!(
            "{:032x}",
            std::process::id() as u128 * 0x9e37_79b9_7f4a_7c15
        );
        std::fs::write(&cp.admin_token, &token).unwrap();
        std::fs::write(
            d.join("tokens.csv"),
            format!("{token},vmtune-test,vmtune-test,system:masters\n"),
        )
        .unwrap();
        let openssl = |args: &[&str]| {
            let out = run(
                Command::new("openssl").args(args).current_dir(&d),
                None,
                Duration::from_secs(60),
            );
            assert!(out.success(), "{out}");
        };
        openssl(&["genrsa", "-out", "sa.key", "2048"]);
        openssl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd = format!("http://127.0.0.1:{etcd_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        cp.spawn(
            "etcd",
            &[
                "--name=test",
                &format!("--data-dir={}", d.join("etcd").display()),
                &format!("--listen-client-urls={etcd}"),
                &format!("--advertise-client-urls={etcd}"),
                &format!("--listen-peer-urls={peer}"),
                &format!("--initial-advertise-peer-urls={peer}"),
                &format!("--initial-cluster=test={peer}"),
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        );
        cp.spawn(
            "kube-apiserver",
            &[
                &format!("--etcd-servers={etcd}"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                &format!("--secure-port={api_port}"),
                &format!("--cert-dir={}", d.join("certs").display()),
                &format!("--token-auth-file={}", d.join("tokens.csv").display()),
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                &format!("--service-account-key-file={}", d.join("sa.pub").display()),
                &format!(
                    "--service-account-signing-key-file={}",
                    d.join("sa.key").display()
                ),
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--disable-admission-plugins=ServiceAccount",
            ],
        );
        cp.server = format!("https://127.0.0.1:{api_port}");
        cp.wait_ready();
        if full {
            cp.start_scheduler_and_controllers();
        }
        cp
    }

    fn spawn(&mut self, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        let child = Command::new(self.bin.join(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        self.children.push((name.to_string(), child));
    }

    /// Any daemon that has exited, with the end of its log.
    fn check_alive(&mut self) {
        for (name, child) in &mut self.children {
            if let Ok(Some(s)) = child.try_wait() {
                let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!("{name} exited ({s}):\n{}", tail.join("\n"));
            }
        }
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            self.check_alive();
            if !self.kubeconfig.exists() && self.ca.metadata().is_ok_and(|m| m.len() > 0) {
                let token = std::fs::read_to_string(&self.admin_token).unwrap();
                std::fs::write(
                    &self.kubeconfig,
                    format!(
                        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: t\n  user:\n    token: {token}\ncontexts:\n- name: t\n  context: {{cluster: t, user: t}}\ncurrent-context: t\n",
                        self.server,
                        self.ca.display()
                    ),
                )
                .unwrap();
            }
            if self.kubeconfig.exists() && self.kubectl(&["get", "--raw", "/readyz"]).success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready in 180 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn start_scheduler_and_controllers(&mut self) {
        let kc = self.kubeconfig.display().to_string();
        let config = self.dir.path().join("scheduler.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {{kubeconfig: {kc}}}\nleaderElection: {{leaderElect: false}}\nprofiles: [{{schedulerName: default-scheduler}}]\n"
            ),
        )
        .unwrap();
        let (sched_port, kcm_port) = (free_port(), free_port());
        self.spawn(
            "kube-scheduler",
            &[
                &format!("--config={}", config.display()),
                &format!("--authentication-kubeconfig={kc}"),
                &format!("--authorization-kubeconfig={kc}"),
                "--bind-address=127.0.0.1",
                &format!("--secure-port={sched_port}"),
                "-v=2",
            ],
        );
        self.spawn(
            "kube-controller-manager",
            &[
                &format!("--kubeconfig={kc}"),
                &format!("--authentication-kubeconfig={kc}"),
                &format!("--authorization-kubeconfig={kc}"),
                "--controllers=resourceclaim-controller",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={kcm_port}"),
                "-v=2",
            ],
        );
        std::thread::sleep(Duration::from_millis(500));
        self.check_alive();
    }

    pub fn kubectl_in(&self, args: &[&str], input: Option<&str>) -> Ran {
        let mut cmd = Command::new(self.bin.join("kubectl"));
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args);
        run(&mut cmd, input, Duration::from_secs(60))
    }

    /// `kubectl ARGS` as the bearer of `token` (no kubeconfig, so no admin certificate).
    pub fn kubectl_as(&self, token: &Path, args: &[&str], input: Option<&str>) -> Ran {
        let token = std::fs::read_to_string(token).expect("the token file");
        let empty = self.dir.path().join("empty.kubeconfig");
        if !empty.exists() {
            std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").expect("an empty kubeconfig");
        }
        let mut cmd = Command::new(self.bin.join("kubectl"));
        cmd.arg("--kubeconfig")
            .arg(&empty)
            .arg("--server")
            .arg(&self.server)
            .arg("--certificate-authority")
            .arg(&self.ca)
            .arg("--token")
            .arg(token.trim())
            .args(args);
        run(&mut cmd, input, Duration::from_secs(60))
    }

    pub fn kubectl(&self, args: &[&str]) -> Ran {
        self.kubectl_in(args, None)
    }

    /// `kubectl ARGS` must succeed.
    pub fn ok(&self, args: &[&str]) -> Ran {
        let out = self.kubectl(args);
        assert!(out.success(), "{out}");
        out
    }

    /// `kubectl apply -f -` of `doc` must succeed.
    pub fn apply(&self, doc: &str) {
        let out = self.kubectl_in(&["apply", "-f", "-"], Some(doc));
        assert!(out.success(), "{out}\n--- input\n{doc}");
    }

    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        json(&self.ok(&a))
    }

    /// The end of a daemon's log.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log")))
            .unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A fake Node (no kubelet): its status says Ready with `cpus` CPUs, and the not-ready
    /// taint TaintNodesByCondition puts on every new node is taken off (no node lifecycle
    /// controller runs to do it).
    pub fn add_node(&self, name: &str, cpus: usize) {
        self.apply(&format!(
            "{{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {{\"name\": \"{name}\", \"labels\": {{\"kubernetes.io/hostname\": \"{name}\", \"kubernetes.io/os\": \"linux\"}}}}}}"
        ));
        let status = format!(
            "{{\"status\": {{\"capacity\": {{\"cpu\": \"{cpus}\", \"memory\": \"512Gi\", \"pods\": \"110\"}}, \"allocatable\": {{\"cpu\": \"{cpus}\", \"memory\": \"512Gi\", \"pods\": \"110\"}}, \"conditions\": [{{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"KubeletReady\", \"message\": \"fake node\", \"lastHeartbeatTime\": \"2026-01-01T00:00:00Z\", \"lastTransitionTime\": \"2026-01-01T00:00:00Z\"}}]}}}}"
        );
        self.ok(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ]);
        let out = self.kubectl(&[
            "taint",
            "node",
            name,
            "node.kubernetes.io/not-ready:NoSchedule-",
        ]);
        assert!(out.success() || out.stderr.contains("not found"), "{out}");
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.children.pop() {
            stop(&mut child);
        }
    }
}

/// SIGTERM, up to 10 s, then SIGKILL.
pub fn stop(child: &mut Child) {
    let pid = child.id() as i32;
    // SAFETY: kill(2) on the PID of a child this process started and has not reaped
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

//! CRI requests as the kubelet makes them (pod sandbox and container configs in crictl's JSON,
//! which is the CRI API's own field naming: `cpu_period`, `cgroup_parent`, `CDI_devices`), and
//! the crictl calls that send them.
//!
//! What the kubelet (1.37, cgroupfs driver, CPU CFS quota on, CPU manager policy `none`) puts
//! in them, and the builders here reproduce:
//!
//! * the pod's `linux.cgroup_parent`: `/kubepods/pod<uid>` (Guaranteed),
//!   `/kubepods/burstable/pod<uid>`, `/kubepods/besteffort/pod<uid>`
//!   (`pkg/kubelet/cm`: `"pod" + uid` under the QoS class's cgroup, spelled by `ToCgroupfs`);
//! * `linux.resources` of a container (`calculateLinuxResources`): `cpu_shares` =
//!   request millicores × 1024 / 1000 (at least 2; the limit where only a limit is given),
//!   `cpu_period` 100000, `cpu_quota` = limit millicores × 100 (at least 1000; 0 without a
//!   limit), `memory_limit_in_bytes` where a limit is given, `oom_score_adj` -997 / 1000 /
//!   `1000 - 1000 × memory request / memory capacity` clamped to 3..=999 (Guaranteed /
//!   BestEffort / Burstable); `cpuset_cpus` is left empty (no static CPU manager);
//! * the sandbox's `linux.resources` (`calculateSandboxResources`): the same computed from the
//!   sum of the containers' requests and limits, and `linux.overhead` empty;
//! * host network: `namespace_options.network: 2` (NODE) in both the sandbox's and every
//!   container's security context, and no `hostname` (runc refuses one without a private UTS
//!   namespace); PID namespace per container (`pid: 1`), IPC per pod (`ipc: 0`);
//! * labels `io.kubernetes.pod.{name,namespace,uid}` (and `io.kubernetes.container.name` on
//!   containers); the pod's log directory `<ns>_<name>_<uid>`, a container's log `<name>/0.log`.
//!
//! Not reproduced: hugepage limits (the kubelet lists every page size with limit 0; there is no
//! hugetlb cgroup here), `memory_swap_limit_in_bytes`, DNS config, port mappings, seccomp
//! (unset is unconfined, as the kubelet's default), and pod networking: without a CNI plugin
//! only host-network pods start, so that is the builders' default.

use super::containerd::{Containerd, BUSYBOX_IMAGE};
use super::process::{self, Output};
use super::{cgroup, ContainerCpuset, Error, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A pod's Kubernetes QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// The kubelet's CFS period (µs).
pub const CPU_PERIOD: i64 = 100_000;

/// A container's CPU and memory requests and limits, as in a pod spec (millicores, bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_request_milli: Option<u64>,
    pub cpu_limit_milli: Option<u64>,
    pub memory_request: Option<u64>,
    pub memory_limit: Option<u64>,
}

impl Resources {
    /// Requests equal to limits: `cpus` whole CPUs and `memory` bytes.
    pub fn guaranteed(cpus: u64, memory: u64) -> Resources {
        Resources::guaranteed_milli(cpus * 1000, memory)
    }

    /// Requests equal to limits, in millicores (a fractional Guaranteed container).
    pub fn guaranteed_milli(cpu_milli: u64, memory: u64) -> Resources {
        Resources {
            cpu_request_milli: Some(cpu_milli),
            cpu_limit_milli: Some(cpu_milli),
            memory_request: Some(memory),
            memory_limit: Some(memory),
        }
    }

    /// A CPU request, optionally a CPU limit and a memory limit (the memory request defaults to
    /// the limit, as the API server fills it in).
    pub fn burstable(
        cpu_request_milli: u64,
        cpu_limit_milli: Option<u64>,
        memory_limit: Option<u64>,
    ) -> Resources {
        Resources {
            cpu_request_milli: Some(cpu_request_milli),
            cpu_limit_milli,
            memory_request: memory_limit,
            memory_limit,
        }
    }

    /// Nothing requested, nothing limited.
    pub fn best_effort() -> Resources {
        Resources::default()
    }

    /// The request where given, else the limit (the API server's defaulting).
    pub fn cpu_request(&self) -> Option<u64> {
        self.cpu_request_milli.or(self.cpu_limit_milli)
    }

    pub fn mem_request(&self) -> Option<u64> {
        self.memory_request.or(self.memory_limit)
    }

    /// This container's QoS class, by the rules of `GetPodQOS` for one container.
    pub fn qos(&self) -> Qos {
        let set = |v: Option<u64>| v.is_some_and(|v| v > 0);
        if !set(self.cpu_request_milli)
            && !set(self.cpu_limit_milli)
            && !set(self.memory_request)
            && !set(self.memory_limit)
        {
            return Qos::BestEffort;
        }
        let cpu_ok = set(self.cpu_limit_milli) && self.cpu_request() == self.cpu_limit_milli;
        let mem_ok = set(self.memory_limit) && self.mem_request() == self.memory_limit;
        if cpu_ok && mem_ok {
            Qos::Guaranteed
        } else {
            Qos::Burstable
        }
    }

    /// The sum over containers (requests after defaulting; limits of those that have one), as
    /// the kubelet's `PodRequestsAndLimits` adds them up.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Resources>) -> Resources {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        all.into_iter()
            .fold(Resources::default(), |acc, r| Resources {
                cpu_request_milli: add(acc.cpu_request_milli, r.cpu_request()),
                cpu_limit_milli: add(acc.cpu_limit_milli, r.cpu_limit_milli),
                memory_request: add(acc.memory_request, r.mem_request()),
                memory_limit: add(acc.memory_limit, r.memory_limit),
            })
    }

    /// `cpu_shares` (`MilliCPUToShares`): 2 for nothing, else millicores × 1024 / 1000, at
    /// least 2.
    pub fn cpu_shares(&self) -> i64 {
        let milli = self.cpu_request().unwrap_or(0);
        if milli == 0 {
            return 2;
        }
        i64::try_from(milli * 1024 / 1000)
            .unwrap_or(i64::MAX)
            .clamp(2, 262_144)
    }

    /// `cpu_quota` (`milliCPUToQuota`): 0 without a limit, else millicores × period / 1000, at
    /// least 1000.
    pub fn cpu_quota(&self) -> i64 {
        match self.cpu_limit_milli {
            None | Some(0) => 0,
            Some(m) => (i64::try_from(m)
                .unwrap_or(i64::MAX)
                .saturating_mul(CPU_PERIOD)
                / 1000)
                .max(1000),
        }
    }

    /// `LinuxContainerResources` as the kubelet fills it (no `oom_score_adj`).
    fn linux(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("cpu_period".into(), json!(CPU_PERIOD));
        m.insert("cpu_quota".into(), json!(self.cpu_quota()));
        m.insert("cpu_shares".into(), json!(self.cpu_shares()));
        if let Some(l) = self.memory_limit.filter(|l| *l > 0) {
            m.insert("memory_limit_in_bytes".into(), json!(l));
        }
        m
    }
}

/// A pod sandbox request. Host network unless [`PodSpec::host_network`] says otherwise.
#[derive(Debug, Clone)]
pub struct PodSpec {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub qos: Qos,
    /// The pod's total requests and limits (the sandbox's `linux.resources`).
    pub resources: Resources,
    pub host_network: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `crictl runp --runtime`: a runtime handler of containerd's config (see
    /// `ContainerdOpts::runtime_handlers`); `None` is the default (`runc`).
    pub runtime_handler: Option<String>,
}

impl PodSpec {
    /// A pod of containers with these resources (QoS and totals computed as the kubelet does).
    pub fn with_containers(name: &str, containers: &[Resources]) -> PodSpec {
        let qos = if containers.iter().all(|r| r.qos() == Qos::BestEffort) {
            Qos::BestEffort
        } else if !containers.is_empty() && containers.iter().all(|r| r.qos() == Qos::Guaranteed) {
            Qos::Guaranteed
        } else {
            Qos::Burstable
        };
        PodSpec {
            name: name.to_string(),
            namespace: "default".into(),
            uid: new_uid(),
            qos,
            resources: Resources::sum(containers),
            host_network: true,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            runtime_handler: None,
        }
    }

    /// A Guaranteed pod of one container with `cpus` whole CPUs and `memory` bytes.
    pub fn guaranteed(name: &str, cpus: u64, memory: u64) -> PodSpec {
        PodSpec::with_containers(name, &[Resources::guaranteed(cpus, memory)])
    }

    /// A Burstable pod of one container (see [`Resources::burstable`]).
    pub fn burstable(
        name: &str,
        cpu_request_milli: u64,
        cpu_limit_milli: Option<u64>,
        memory_limit: Option<u64>,
    ) -> PodSpec {
        PodSpec::with_containers(
            name,
            &[Resources::burstable(
                cpu_request_milli,
                cpu_limit_milli,
                memory_limit,
            )],
        )
    }

    /// A BestEffort pod of one container.
    pub fn best_effort(name: &str) -> PodSpec {
        PodSpec::with_containers(name, &[Resources::best_effort()])
    }

    pub fn namespace(mut self, ns: &str) -> PodSpec {
        self.namespace = ns.to_string();
        self
    }

    pub fn uid(mut self, uid: &str) -> PodSpec {
        self.uid = uid.to_string();
        self
    }

    /// Pod networking needs a CNI plugin, which the harness does not install.
    pub fn host_network(mut self, on: bool) -> PodSpec {
        self.host_network = on;
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> PodSpec {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> PodSpec {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn runtime_handler(mut self, handler: &str) -> PodSpec {
        self.runtime_handler = Some(handler.to_string());
        self
    }

    /// The kubelet's cgroupfs cgroup parent for this pod.
    pub fn cgroup_parent(&self) -> String {
        match self.qos {
            Qos::Guaranteed => format!("/kubepods/pod{}", self.uid),
            Qos::Burstable => format!("/kubepods/burstable/pod{}", self.uid),
            Qos::BestEffort => format!("/kubepods/besteffort/pod{}", self.uid),
        }
    }

    /// The kubelet's log directory name for this pod (under its pod log root).
    pub fn log_dir_name(&self) -> String {
        format!("{}_{}_{}", self.namespace, self.name, self.uid)
    }

    /// A container of this pod with the pod's resources (right for a one-container pod) that
    /// sleeps until stopped.
    pub fn container(&self, name: &str) -> ContainerSpec {
        ContainerSpec::new(name).resources(self.resources.clone())
    }

    fn namespace_options(&self) -> Value {
        json!({"network": if self.host_network { 2 } else { 0 }, "pid": 1, "ipc": 0})
    }

    /// The `PodSandboxConfig` (crictl's JSON), logging under `log_root`.
    pub fn to_json(&self, log_root: &Path) -> Value {
        let mut labels: Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        labels.insert("io.kubernetes.pod.name".into(), json!(self.name));
        labels.insert("io.kubernetes.pod.namespace".into(), json!(self.namespace));
        labels.insert("io.kubernetes.pod.uid".into(), json!(self.uid));
        let mut annotations: Map<String, Value> = BTreeMap::from([
            ("kubernetes.io/config.source".to_string(), "api".to_string()),
            (
                "kubernetes.io/config.seen".to_string(),
                "2026-01-01T00:00:00Z".to_string(),
            ),
        ])
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
        for (k, v) in &self.annotations {
            annotations.insert(k.clone(), json!(v));
        }
        let mut cfg = json!({
            "metadata": {
                "name": self.name, "namespace": self.namespace, "uid": self.uid, "attempt": 0
            },
            "log_directory": log_root.join(self.log_dir_name()),
            "labels": labels,
            "annotations": annotations,
            "linux": {
                "cgroup_parent": self.cgroup_parent(),
                "security_context": { "namespace_options": self.namespace_options() },
                "resources": Value::Object(self.resources.linux()),
                "overhead": {},
            },
        });
        if !self.host_network {
            cfg["hostname"] = json!(self.name);
        }
        cfg
    }
}

/// A container request (see the module's notes for what the kubelet puts in it).
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    /// Default: `/bin/sleep 2147483647`.
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub envs: Vec<(String, String)>,
    pub resources: Resources,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names (`vendor.com/class=name`): the `CDI_devices` field.
    pub cdi_devices: Vec<String>,
}

impl ContainerSpec {
    /// A BestEffort busybox container that sleeps until stopped.
    pub fn new(name: &str) -> ContainerSpec {
        ContainerSpec {
            name: name.to_string(),
            image: BUSYBOX_IMAGE.to_string(),
            command: vec!["/bin/sleep".into(), "2147483647".into()],
            args: Vec::new(),
            envs: Vec::new(),
            resources: Resources::best_effort(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            cdi_devices: Vec::new(),
        }
    }

    pub fn resources(mut self, r: Resources) -> ContainerSpec {
        self.resources = r;
        self
    }

    pub fn image(mut self, image: &str) -> ContainerSpec {
        self.image = image.to_string();
        self
    }

    pub fn command<S: AsRef<str>>(mut self, argv: &[S]) -> ContainerSpec {
        self.command = argv.iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> ContainerSpec {
        self.envs.push((key.to_string(), value.to_string()));
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> ContainerSpec {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> ContainerSpec {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn cdi_device(mut self, name: &str) -> ContainerSpec {
        self.cdi_devices.push(name.to_string());
        self
    }

    /// `oom_score_adj` by the pod's QoS (`GetContainerOOMScoreAdjust`).
    pub fn oom_score_adj(&self, pod: &PodSpec) -> i64 {
        match pod.qos {
            Qos::Guaranteed => -997,
            Qos::BestEffort => 1000,
            Qos::Burstable => {
                let capacity = memory_capacity().max(1);
                let req = self.resources.mem_request().unwrap_or(0).min(capacity);
                let adj = 1000
                    - i64::try_from(1000 * u128::from(req) / u128::from(capacity)).unwrap_or(1000);
                adj.clamp(3, 999)
            }
        }
    }

    /// The `ContainerConfig` (crictl's JSON) for a container of `pod`.
    pub fn to_json(&self, pod: &PodSpec) -> Value {
        let mut labels: Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        labels.insert("io.kubernetes.container.name".into(), json!(self.name));
        labels.insert("io.kubernetes.pod.name".into(), json!(pod.name));
        labels.insert("io.kubernetes.pod.namespace".into(), json!(pod.namespace));
        labels.insert("io.kubernetes.pod.uid".into(), json!(pod.uid));
        let mut annotations: Map<String, Value> = [
            ("io.kubernetes.container.restartCount", "0"),
            (
                "io.kubernetes.container.terminationMessagePath",
                "/dev/termination-log",
            ),
            ("io.kubernetes.container.terminationMessagePolicy", "File"),
            ("io.kubernetes.pod.terminationGracePeriod", "30"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
        for (k, v) in &self.annotations {
            annotations.insert(k.clone(), json!(v));
        }
        let mut resources = self.resources.linux();
        resources.insert("oom_score_adj".into(), json!(self.oom_score_adj(pod)));
        let mut cfg = json!({
            "metadata": { "name": self.name, "attempt": 0 },
            "image": { "image": self.image },
            "command": self.command,
            "args": self.args,
            "envs": self
                .envs
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect::<Vec<_>>(),
            "labels": labels,
            "annotations": annotations,
            "log_path": format!("{}/0.log", self.name),
            "linux": {
                "resources": Value::Object(resources),
                "security_context": { "namespace_options": pod.namespace_options() },
            },
        });
        if !self.cdi_devices.is_empty() {
            cfg["CDI_devices"] = json!(self
                .cdi_devices
                .iter()
                .map(|n| json!({ "name": n }))
                .collect::<Vec<_>>());
        }
        cfg
    }
}

/// A fresh pod UID (a random UUID, as the API server assigns).
pub fn new_uid() -> String {
    if let Ok(u) = std::fs::read_to_string("/proc/sys/kernel/random/uuid") {
        return u.trim().to_string();
    }
    // no procfs: time and a counter are unique enough within one test run
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        (t & 0xffff_ffff) as u32,
        (u64::from(std::process::id()) << 20) ^ n
    )
}

/// The machine's memory (MemTotal), which the kubelet reports as its capacity.
fn memory_capacity() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024)
}

// ---------------------------------------------------------------------------------------------
// crictl

impl Containerd {
    /// Run crictl against this containerd (`--runtime-endpoint`, `--image-endpoint`,
    /// `--timeout`); its stdout, trimmed. Errors carry crictl's output and containerd's log tail.
    pub fn crictl<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        self.crictl_bare(args).map_err(|e| self.with_log(e))
    }

    /// [`Containerd::crictl`] without the log tail in errors.
    pub(super) fn crictl_bare<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let mut cmd = Command::new(&self.runtime.crictl);
        let endpoint = format!("unix://{}", self.grpc_socket().display());
        cmd.arg("--config")
            .arg(self.dir.join("crictl.yaml"))
            .args([
                "--runtime-endpoint",
                &endpoint,
                "--image-endpoint",
                &endpoint,
            ])
            .arg("--timeout")
            .arg(format!("{}s", self.opts.cri_timeout.as_secs().max(1)))
            .args(args.iter().map(AsRef::as_ref));
        let deadline = self.opts.cri_timeout + std::time::Duration::from_secs(15);
        process::run(&mut cmd, deadline).map(|Output { stdout, .. }| stdout.trim().to_string())
    }

    /// `crictl runp [--runtime H] pod.json`: the pod sandbox's id.
    pub fn run_pod(&self, pod: &PodSpec) -> Result<String> {
        let log_root = self.dir.join("pods");
        let log_dir = log_root.join(pod.log_dir_name());
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| Error(format!("cannot create {}: {e}", log_dir.display())))?;
        let file = self.write_request(
            &format!("pod-{}-{}.json", pod.name, pod.uid),
            &pod.to_json(&log_root),
        )?;
        self.note_pod_cgroup(&pod.cgroup_parent());
        let mut args = vec!["runp".to_string()];
        if let Some(h) = &pod.runtime_handler {
            args.extend(["--runtime".to_string(), h.clone()]);
        }
        args.push(file);
        let out = self.crictl(&args)?;
        last_line_id(&out, "crictl runp")
    }

    /// `crictl create --no-pull POD container.json pod.json`: the container's id.
    pub fn create(&self, pod_id: &str, c: &ContainerSpec, pod: &PodSpec) -> Result<String> {
        let pod_file = self.write_request(
            &format!("pod-{}-{}.json", pod.name, pod.uid),
            &pod.to_json(&self.dir.join("pods")),
        )?;
        let c_file = self.write_request(
            &format!("container-{}-{}-{}.json", pod.name, c.name, pod.uid),
            &c.to_json(pod),
        )?;
        let out = self.crictl(&["create", "--no-pull", pod_id, &c_file, &pod_file])?;
        last_line_id(&out, "crictl create")
    }

    /// `crictl start ID`.
    pub fn start_container(&self, container_id: &str) -> Result<()> {
        self.crictl(&["start", container_id]).map(drop)
    }

    /// `create` then `start`: the container's id.
    pub fn run_container(&self, pod_id: &str, c: &ContainerSpec, pod: &PodSpec) -> Result<String> {
        let id = self.create(pod_id, c, pod)?;
        self.start_container(&id)?;
        Ok(id)
    }

    /// `crictl stop -t 0 ID` (SIGKILL at once: busybox as PID 1 ignores SIGTERM).
    pub fn stop_container(&self, container_id: &str) -> Result<()> {
        self.stop_container_within(container_id, 0)
    }

    /// `crictl stop -t SECONDS ID`.
    pub fn stop_container_within(&self, container_id: &str, seconds: u64) -> Result<()> {
        self.crictl(&["stop", "-t", &seconds.to_string(), container_id])
            .map(drop)
    }

    /// `crictl rm ID`.
    pub fn remove_container(&self, container_id: &str) -> Result<()> {
        self.crictl(&["rm", container_id]).map(drop)
    }

    /// `crictl stopp ID`.
    pub fn stop_pod(&self, pod_id: &str) -> Result<()> {
        self.crictl(&["stopp", pod_id]).map(drop)
    }

    /// `crictl rmp ID`.
    pub fn remove_pod(&self, pod_id: &str) -> Result<()> {
        self.crictl(&["rmp", pod_id]).map(drop)
    }

    /// Every pod sandbox's id (`crictl pods -q`).
    pub fn pods(&self) -> Result<Vec<String>> {
        Ok(self
            .crictl(&["pods", "-q"])?
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Every container's id, exited ones too (`crictl ps -a -q`).
    pub fn containers(&self) -> Result<Vec<String>> {
        Ok(self
            .crictl(&["ps", "-a", "-q"])?
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// `crictl inspect -o json ID`.
    pub fn inspect(&self, container_id: &str) -> Result<Value> {
        let out = self.crictl(&["inspect", "-o", "json", container_id])?;
        serde_json::from_str(&out).map_err(|e| {
            Error(format!(
                "crictl inspect {container_id}: not JSON ({e}): {out}"
            ))
        })
    }

    /// `crictl inspectp -o json ID`.
    pub fn inspect_pod(&self, pod_id: &str) -> Result<Value> {
        let out = self.crictl(&["inspectp", "-o", "json", pod_id])?;
        serde_json::from_str(&out)
            .map_err(|e| Error(format!("crictl inspectp {pod_id}: not JSON ({e}): {out}")))
    }

    /// The container's main process on the host (`.info.pid` of `crictl inspect`).
    pub fn pid(&self, container_id: &str) -> Result<u32> {
        let v = self.inspect(container_id)?;
        v.pointer("/info/pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                Error(format!(
                    "crictl inspect {container_id}: no .info.pid (is it running? state {})",
                    v.pointer("/status/state").unwrap_or(&Value::Null)
                ))
            })
    }

    /// The container's CPUs from its cgroup(s) and `/proc/PID/status`.
    pub fn cpuset_of(&self, container_id: &str) -> Result<ContainerCpuset> {
        let v = self.inspect(container_id)?;
        let pid = v
            .pointer("/info/pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| Error(format!("crictl inspect {container_id}: no .info.pid")))?;
        let path = v
            .pointer("/info/runtimeSpec/linux/cgroupsPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        cgroup::read_cpuset(pid, path)
    }

    /// The file a container's output goes to (its pod's log directory, `<name>/0.log`).
    pub fn container_log(&self, pod: &PodSpec, c: &ContainerSpec) -> std::path::PathBuf {
        self.dir
            .join("pods")
            .join(pod.log_dir_name())
            .join(&c.name)
            .join("0.log")
    }

    fn write_request(&self, name: &str, v: &Value) -> Result<String> {
        let dir = self.dir.join("requests");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(name);
        let text = serde_json::to_string_pretty(v)
            .map_err(|e| Error(format!("cannot serialize {name}: {e}")))?;
        std::fs::write(&path, text)
            .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))?;
        Ok(path.display().to_string())
    }
}

/// The id crictl prints as its last line (after any warnings).
fn last_line_id(out: &str, what: &str) -> Result<String> {
    out.lines()
        .map(str::trim)
        .rfind(|l| l.len() == 64 && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .ok_or_else(|| Error(format!("{what} printed no id: {out:?}")))
}

//! What the agent knows of pods and containers: the fields of NRI's `PodSandbox` and
//! `Container` that placement reads, as plain data (serde, so recorded event sequences can be
//! replayed without containerd). `convert` fills them from the protocol's messages.
//!
//! Unknown is `None`: a container whose spec has no CPU quota has `cpu_quota: None`, never 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A pod as containerd describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    /// The CRI runtime handler (`kata-qemu`, …); empty for the default runtime.
    #[serde(default)]
    pub runtime_handler: String,
    /// The kubelet's cgroup parent for the pod (`/kubepods/burstable/pod…`,
    /// `kubepods-besteffort-pod….slice`): where the QoS class is read.
    #[serde(default)]
    pub cgroup_parent: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Lifecycle state, as NRI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Unknown,
    Created,
    Paused,
    Running,
    Stopped,
}

/// A container as containerd describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    pub id: String,
    pub pod_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub state: State,
    /// `cpu.shares` of its spec (the kubelet writes the CPU request as shares).
    #[serde(default)]
    pub cpu_shares: Option<u64>,
    /// `cpu.quota` and `cpu.period` (the CPU limit).
    #[serde(default)]
    pub cpu_quota: Option<i64>,
    #[serde(default)]
    pub cpu_period: Option<u64>,
    /// `cpuset.cpus` as the spec has it now; empty when unset.
    #[serde(default)]
    pub cpuset_cpus: String,
    /// `cpuset.mems` as the spec has it now; empty when unset.
    #[serde(default)]
    pub cpuset_mems: String,
    /// Memory limit in bytes.
    #[serde(default)]
    pub memory_limit: Option<i64>,
    /// CDI device names (`vmtune.io/vfio=0000:18:00.0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi_devices: Vec<String>,
    /// Device nodes of the spec (`/dev/vfio/42`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// The container's cgroup path (`<parent>/<id>`, or systemd's `slice:prefix:id`).
    #[serde(default)]
    pub cgroups_path: String,
    #[serde(default)]
    pub pid: u32,
}

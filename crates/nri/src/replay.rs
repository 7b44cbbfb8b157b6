//! Event sequences run through the agent without containerd: recorded by `vmtune nri
//! --record FILE` on a real node, or generated with known shapes (the kubelet's own
//! arithmetic for Guaranteed, Burstable and BestEffort pods) for tests, the planner
//! comparison with the kubelet and the benchmarks.
//!
//! One event per line, JSON:
//!
//! ```text
//! {"event":"synchronize","pods":[…],"containers":[…]}
//! {"event":"run_pod","pod":{…}}
//! {"event":"create","pod":{…},"container":{…}}
//! {"event":"start","container":{…}}
//! {"event":"update","container":{…}}
//! {"event":"stop","container":{…}}
//! {"event":"remove","container":{…}}
//! {"event":"remove_pod","pod":{…}}
//! ```

use serde::{Deserialize, Serialize};

use crate::agent::{Agent, Outcome, Update};
use crate::model::{Container, Pod, State};

/// One NRI event, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Synchronize {
        pods: Vec<Pod>,
        containers: Vec<Container>,
    },
    RunPod {
        pod: Pod,
    },
    Create {
        pod: Pod,
        container: Container,
    },
    Start {
        container: Container,
    },
    Update {
        container: Container,
    },
    Stop {
        container: Container,
    },
    Remove {
        container: Container,
    },
    RemovePod {
        pod: Pod,
    },
}

/// What one event did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub event: String,
    /// The container (or pod) it was about.
    pub id: String,
    /// For a create: the cpuset it got, and whether those CPUs are its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mems: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
    /// A Kata VM's emulator core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator_cpus: Option<String>,
    pub updates: Vec<Update>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub log: Vec<String>,
}

/// Reads a sequence: one JSON event per line; blank lines and `#` comments are skipped.
pub fn parse(text: &str) -> Result<Vec<Event>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let ev: Event = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(ev);
    }
    Ok(out)
}

/// Runs one event through the agent.
pub fn apply(agent: &mut Agent, ev: &Event) -> Step {
    let (name, id, out): (&str, String, Outcome) = match ev {
        Event::Synchronize { pods, containers } => (
            "synchronize",
            String::new(),
            agent.synchronize(pods, containers),
        ),
        Event::RunPod { pod } => {
            agent.run_pod(pod);
            ("run_pod", pod.id.clone(), Outcome::default())
        }
        Event::Create { pod, container } => {
            ("create", container.id.clone(), agent.create(pod, container))
        }
        Event::Start { container } => {
            agent.started(container);
            ("start", container.id.clone(), Outcome::default())
        }
        Event::Update { container } => ("update", container.id.clone(), agent.update(container)),
        Event::Stop { container } => (
            "stop",
            container.id.clone(),
            agent.release(container, "stop", false),
        ),
        Event::Remove { container } => (
            "remove",
            container.id.clone(),
            agent.release(container, "remove", true),
        ),
        Event::RemovePod { pod } => ("remove_pod", pod.id.clone(), agent.remove_pod(pod)),
    };
    let alloc = agent
        .allocations()
        .find(|a| a.container_id == id && name == "create");
    Step {
        event: name.into(),
        cpus: out.adjust.as_ref().map(|a| a.cpus.to_list_string()),
        mems: out.adjust.as_ref().and_then(|a| a.mems.clone()),
        exclusive: out.adjust.as_ref().map(|_| alloc.is_some()),
        emulator_cpus: alloc
            .filter(|a| !a.emulator_cpus.is_empty())
            .map(|a| a.emulator_cpus.to_list_string()),
        id,
        updates: out.updates,
        error: out.error,
        log: out.log,
    }
}

/// Runs a whole sequence.
pub fn run(agent: &mut Agent, events: &[Event]) -> Vec<Step> {
    events.iter().map(|e| apply(agent, e)).collect()
}

/// The QoS class a generated pod has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Request = limit = `cpus` whole CPUs.
    Guaranteed,
    /// Request `milli`, limit twice that.
    Burstable,
    BestEffort,
}

/// A pod to generate: one container.
#[derive(Debug, Clone)]
pub struct PodShape {
    pub class: Class,
    /// Milli-CPUs (request; for Guaranteed also the limit).
    pub milli: u64,
    pub memory_bytes: u64,
    pub runtime_handler: String,
    pub cdi_devices: Vec<String>,
}

impl PodShape {
    pub fn guaranteed(cpus: u32) -> PodShape {
        PodShape {
            class: Class::Guaranteed,
            milli: u64::from(cpus) * 1000,
            memory_bytes: 2 << 30,
            runtime_handler: String::new(),
            cdi_devices: vec![],
        }
    }
}

/// The pod and container the kubelet (cgroupfs driver) would make of `shape`, numbered `i`,
/// as containerd passes them to NRI (kubelet pkg/kubelet/cm: `MilliCPUToShares`,
/// `MilliCPUToQuota`, QoS cgroup parents).
pub fn generated(i: usize, shape: &PodShape) -> (Pod, Container) {
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let parent = match shape.class {
        Class::Guaranteed => format!("/kubepods/pod{uid}"),
        Class::Burstable => format!("/kubepods/burstable/pod{uid}"),
        Class::BestEffort => format!("/kubepods/besteffort/pod{uid}"),
    };
    let pod = Pod {
        id: format!("pod{i:04}"),
        name: format!("p{i}"),
        namespace: "default".into(),
        uid,
        runtime_handler: shape.runtime_handler.clone(),
        cgroup_parent: parent.clone(),
        annotations: Default::default(),
    };
    let shares = |m: u64| (m * 1024 / 1000).max(crate::ask::MIN_SHARES);
    let quota = |m: u64| ((m * 100_000 / 1000).max(1000)) as i64;
    let (cpu_shares, cpu_quota, memory) = match shape.class {
        Class::Guaranteed => (
            shares(shape.milli),
            Some(quota(shape.milli)),
            Some(shape.memory_bytes as i64),
        ),
        Class::Burstable => (shares(shape.milli), Some(quota(shape.milli * 2)), None),
        Class::BestEffort => (crate::ask::MIN_SHARES, None, None),
    };
    let id = format!("ctr{i:04}");
    let c = Container {
        id: id.clone(),
        pod_id: pod.id.clone(),
        name: "main".into(),
        state: State::Unknown,
        cpu_shares: Some(cpu_shares),
        cpu_quota,
        cpu_period: cpu_quota.map(|_| 100_000),
        memory_limit: memory,
        cdi_devices: shape.cdi_devices.clone(),
        cgroups_path: format!("{parent}/{id}"),
        ..Container::default()
    };
    (pod, c)
}

/// `run_pod` and `create` for each shape, in order.
pub fn creates(shapes: &[PodShape]) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        let (pod, container) = generated(i, s);
        out.push(Event::RunPod { pod: pod.clone() });
        out.push(Event::Create { pod, container });
    }
    out
}

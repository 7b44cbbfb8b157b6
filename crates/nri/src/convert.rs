//! Between the protocol's messages and the agent's plain data.

use nri_proto::nri as api;
use nri_proto::MessageField;

use crate::agent::{Adjust, Update};
use crate::model::{Container, Pod, State};

pub fn pod(p: &api::PodSandbox) -> Pod {
    Pod {
        id: p.id.clone(),
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        uid: p.uid.clone(),
        runtime_handler: p.runtime_handler.clone(),
        cgroup_parent: p
            .linux
            .as_ref()
            .map(|l| l.cgroup_parent.clone())
            .unwrap_or_default(),
        annotations: p
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn state(s: api::ContainerState) -> State {
    match s {
        api::ContainerState::CONTAINER_UNKNOWN => State::Unknown,
        api::ContainerState::CONTAINER_CREATED => State::Created,
        api::ContainerState::CONTAINER_PAUSED => State::Paused,
        api::ContainerState::CONTAINER_RUNNING => State::Running,
        api::ContainerState::CONTAINER_STOPPED => State::Stopped,
    }
}

pub fn container(c: &api::Container) -> Container {
    let res = c.linux.as_ref().and_then(|l| l.resources.as_ref());
    let cpu = res.and_then(|r| r.cpu.as_ref());
    let mem = res.and_then(|r| r.memory.as_ref());
    Container {
        id: c.id.clone(),
        pod_id: c.pod_sandbox_id.clone(),
        name: c.name.clone(),
        state: c.state.enum_value().map(state).unwrap_or_default(),
        cpu_shares: cpu.and_then(|c| c.shares.as_ref()).map(|v| v.value),
        cpu_quota: cpu.and_then(|c| c.quota.as_ref()).map(|v| v.value),
        cpu_period: cpu.and_then(|c| c.period.as_ref()).map(|v| v.value),
        cpuset_cpus: cpu.map(|c| c.cpus.clone()).unwrap_or_default(),
        cpuset_mems: cpu.map(|c| c.mems.clone()).unwrap_or_default(),
        memory_limit: mem.and_then(|m| m.limit.as_ref()).map(|v| v.value),
        cdi_devices: c.CDI_devices.iter().map(|d| d.name.clone()).collect(),
        devices: c
            .linux
            .as_ref()
            .map(|l| l.devices.iter().map(|d| d.path.clone()).collect())
            .unwrap_or_default(),
        annotations: c
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        cgroups_path: c
            .linux
            .as_ref()
            .map(|l| l.cgroups_path.clone())
            .unwrap_or_default(),
        pid: c.pid,
    }
}

fn mems_string(m: &[u32]) -> String {
    m.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn resources(cpus: &topo::CpuSet, mems: Option<&Vec<u32>>) -> api::LinuxResources {
    let mut cpu = api::LinuxCPU::new();
    cpu.cpus = cpus.to_list_string();
    if let Some(m) = mems {
        cpu.mems = mems_string(m);
    }
    let mut r = api::LinuxResources::new();
    r.cpu = MessageField::some(cpu);
    r
}

pub fn adjustment(a: &Adjust) -> api::ContainerAdjustment {
    let mut linux = api::LinuxContainerAdjustment::new();
    linux.resources = MessageField::some(resources(&a.cpus, a.mems.as_ref()));
    let mut adj = api::ContainerAdjustment::new();
    adj.linux = MessageField::some(linux);
    adj.annotations = a
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    adj
}

pub fn update(u: &Update) -> api::ContainerUpdate {
    let mut linux = api::LinuxContainerUpdate::new();
    linux.resources = MessageField::some(resources(&u.cpus, u.mems.as_ref()));
    let mut up = api::ContainerUpdate::new();
    up.container_id = u.container_id.clone();
    up.linux = MessageField::some(linux);
    // a container that went away in the meantime is no reason to fail the event
    up.ignore_failure = true;
    up
}

pub fn updates(us: &[Update]) -> Vec<api::ContainerUpdate> {
    us.iter().map(update).collect()
}

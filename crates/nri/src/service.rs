//! The Plugin service: each NRI event through the [`Agent`], under one lock.
//!
//! Subscribed events ([`EVENTS`]) and what they do:
//!
//! | event | the agent | the answer |
//! |---|---|---|
//! | RunPodSandbox | remembers the pod | — |
//! | CreateContainer | places it | its cpuset.cpus/mems (and annotations), updates of shared containers |
//! | UpdateContainer | keeps the container's cpuset | the same cpuset, whatever the kubelet sent |
//! | StopContainer | CPUs back to the pool | updates of shared containers |
//! | RemoveContainer | forgets it (and releases, if it was never stopped) | updates sent afterwards, outside the event |
//! | StopPodSandbox, RemovePodSandbox | forgets the pod's containers | as above |
//!
//! A container that finds no placement starts in the shared pool; with `--strict` its creation
//! fails with the planner's reason (the kubelet retries). Every other error of ours is answered
//! with an empty reply, never a failure: a pod is never blocked by the agent.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use nri_proto::nri as api;
use nri_proto::nri_ttrpc::Plugin;
use ttrpc::{Code, TtrpcContext};

use crate::agent::{Agent, Outcome, Update};
use crate::convert;
use crate::replay::Event;

/// Events the agent subscribes to (NRI `Event` numbers).
pub const EVENTS: [api::Event; 8] = [
    api::Event::RUN_POD_SANDBOX,
    api::Event::STOP_POD_SANDBOX,
    api::Event::REMOVE_POD_SANDBOX,
    api::Event::CREATE_CONTAINER,
    api::Event::UPDATE_CONTAINER,
    api::Event::STOP_CONTAINER,
    api::Event::REMOVE_CONTAINER,
    api::Event::POST_START_CONTAINER,
];

/// The subscription mask: bit `e - 1` for each event `e`.
pub fn event_mask() -> i32 {
    EVENTS.iter().fold(0, |m, e| m | 1 << (*e as i32 - 1))
}

/// Where the service reports.
pub trait Sink: Send + Sync {
    /// One log line.
    fn log(&self, line: &str);
    /// The agent's state changed (write the status and metrics files).
    fn changed(&self, agent: &Agent);
    /// An event as the agent read it (`--record`).
    fn record(&self, _event: &Event) {}
}

/// The Plugin service over a shared agent.
pub struct Service {
    pub agent: Arc<Mutex<Agent>>,
    sink: Arc<dyn Sink>,
    /// Updates that must go to the runtime outside the event that caused them.
    later: Mutex<mpsc::Sender<Vec<Update>>>,
    /// Synchronize chunks received with `more` set.
    sync_parts: Mutex<(Vec<api::PodSandbox>, Vec<api::Container>)>,
    /// `--release-all`: answer Synchronize by moving every container back to every CPU.
    pub release_all: bool,
    /// Set once a Synchronize has been answered.
    pub synced: std::sync::atomic::AtomicBool,
}

impl Service {
    pub fn new(
        agent: Arc<Mutex<Agent>>,
        sink: Arc<dyn Sink>,
        later: mpsc::Sender<Vec<Update>>,
    ) -> Service {
        Service {
            agent,
            sink,
            later: Mutex::new(later),
            sync_parts: Mutex::new((Vec::new(), Vec::new())),
            release_all: false,
            synced: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Runs `f` on the agent, logs what it decided and reports the change.
    fn with_agent(&self, f: impl FnOnce(&mut Agent) -> Outcome) -> Result<Outcome, ttrpc::Error> {
        let mut agent = self
            .agent
            .lock()
            .map_err(|_| status(Code::INTERNAL, "agent state lock poisoned"))?;
        let out = f(&mut agent);
        for line in &out.log {
            self.sink.log(line);
        }
        self.sink.changed(&agent);
        Ok(out)
    }

    fn send_later(&self, updates: Vec<Update>) {
        if updates.is_empty() {
            return;
        }
        if let Ok(tx) = self.later.lock() {
            let _ = tx.send(updates);
        }
    }
}

fn status(code: Code, msg: &str) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg))
}

impl Plugin for Service {
    fn configure(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        self.sink.log(&format!(
            "configured by {} {} (NRI {}), request timeout {} ms",
            req.runtime_name, req.runtime_version, req.NRI_version, req.request_timeout
        ));
        let mut r = api::ConfigureResponse::new();
        r.events = event_mask();
        Ok(r)
    }

    fn synchronize(
        &self,
        _ctx: &TtrpcContext,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        let mut parts = self
            .sync_parts
            .lock()
            .map_err(|_| status(Code::INTERNAL, "sync lock poisoned"))?;
        parts.0.extend(req.pods);
        parts.1.extend(req.containers);
        let mut r = api::SynchronizeResponse::new();
        if req.more {
            // a chunk: answered with `more` and no updates, as the runtime requires
            r.more = true;
            return Ok(r);
        }
        let (pods, containers) = std::mem::take(&mut *parts);
        drop(parts);
        let pods: Vec<_> = pods.iter().map(convert::pod).collect();
        let containers: Vec<_> = containers.iter().map(convert::container).collect();
        self.sink.log(&format!(
            "synchronize: {} pods, {} containers",
            pods.len(),
            containers.len()
        ));
        self.sink.record(&Event::Synchronize {
            pods: pods.clone(),
            containers: containers.clone(),
        });
        let out = if self.release_all {
            self.with_agent(|a| a.release_all(&containers))?
        } else {
            self.with_agent(|a| a.synchronize(&pods, &containers))?
        };
        r.update = convert::updates(&out.updates);
        self.synced.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(r)
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::Empty) -> ttrpc::Result<api::Empty> {
        self.sink.log("the runtime is shutting down");
        Ok(api::Empty::new())
    }

    fn run_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        req: api::RunPodSandboxRequest,
    ) -> ttrpc::Result<api::RunPodSandboxResponse> {
        let pod = convert::pod(&req.pod);
        self.sink.record(&Event::RunPod { pod: pod.clone() });
        self.with_agent(|a| {
            a.run_pod(&pod);
            Outcome::default()
        })?;
        Ok(api::RunPodSandboxResponse::new())
    }

    fn update_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        _req: api::UpdatePodSandboxRequest,
    ) -> ttrpc::Result<api::UpdatePodSandboxResponse> {
        Ok(api::UpdatePodSandboxResponse::new())
    }

    fn post_update_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        _req: api::PostUpdatePodSandboxRequest,
    ) -> ttrpc::Result<api::PostUpdatePodSandboxResponse> {
        Ok(api::PostUpdatePodSandboxResponse::new())
    }

    fn stop_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        req: api::StopPodSandboxRequest,
    ) -> ttrpc::Result<api::StopPodSandboxResponse> {
        let pod = convert::pod(&req.pod);
        self.sink.record(&Event::RemovePod { pod: pod.clone() });
        let out = self.with_agent(|a| a.remove_pod(&pod))?;
        self.send_later(out.updates);
        Ok(api::StopPodSandboxResponse::new())
    }

    fn remove_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        req: api::RemovePodSandboxRequest,
    ) -> ttrpc::Result<api::RemovePodSandboxResponse> {
        let pod = convert::pod(&req.pod);
        self.sink.record(&Event::RemovePod { pod: pod.clone() });
        let out = self.with_agent(|a| a.remove_pod(&pod))?;
        self.send_later(out.updates);
        Ok(api::RemovePodSandboxResponse::new())
    }

    fn create_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        let pod = convert::pod(&req.pod);
        let c = convert::container(&req.container);
        self.sink.record(&Event::Create {
            pod: pod.clone(),
            container: c.clone(),
        });
        let out = self.with_agent(|a| a.create(&pod, &c))?;
        if let Some(e) = out.error {
            return Err(status(Code::RESOURCE_EXHAUSTED, &e));
        }
        let mut r = api::CreateContainerResponse::new();
        if let Some(adj) = &out.adjust {
            r.adjust = nri_proto::MessageField::some(convert::adjustment(adj));
        }
        r.update = convert::updates(&out.updates);
        Ok(r)
    }

    fn post_create_container(
        &self,
        _ctx: &TtrpcContext,
        _req: api::PostCreateContainerRequest,
    ) -> ttrpc::Result<api::PostCreateContainerResponse> {
        Ok(api::PostCreateContainerResponse::new())
    }

    fn start_container(
        &self,
        _ctx: &TtrpcContext,
        _req: api::StartContainerRequest,
    ) -> ttrpc::Result<api::StartContainerResponse> {
        Ok(api::StartContainerResponse::new())
    }

    fn post_start_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::PostStartContainerRequest,
    ) -> ttrpc::Result<api::PostStartContainerResponse> {
        let c = convert::container(&req.container);
        self.sink.record(&Event::Start {
            container: c.clone(),
        });
        self.with_agent(|a| {
            a.started(&c);
            Outcome::default()
        })?;
        Ok(api::PostStartContainerResponse::new())
    }

    fn update_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::UpdateContainerRequest,
    ) -> ttrpc::Result<api::UpdateContainerResponse> {
        let c = convert::container(&req.container);
        self.sink.record(&Event::Update {
            container: c.clone(),
        });
        let out = self.with_agent(|a| a.update(&c))?;
        let mut r = api::UpdateContainerResponse::new();
        r.update = convert::updates(&out.updates);
        Ok(r)
    }

    fn post_update_container(
        &self,
        _ctx: &TtrpcContext,
        _req: api::PostUpdateContainerRequest,
    ) -> ttrpc::Result<api::PostUpdateContainerResponse> {
        Ok(api::PostUpdateContainerResponse::new())
    }

    fn stop_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::StopContainerRequest,
    ) -> ttrpc::Result<api::StopContainerResponse> {
        let c = convert::container(&req.container);
        self.sink.record(&Event::Stop {
            container: c.clone(),
        });
        let out = self.with_agent(|a| a.release(&c, "stop", false))?;
        let mut r = api::StopContainerResponse::new();
        r.update = convert::updates(&out.updates);
        Ok(r)
    }

    fn remove_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::RemoveContainerRequest,
    ) -> ttrpc::Result<api::RemoveContainerResponse> {
        let c = convert::container(&req.container);
        self.sink.record(&Event::Remove {
            container: c.clone(),
        });
        let out = self.with_agent(|a| a.release(&c, "remove", true))?;
        self.send_later(out.updates);
        Ok(api::RemoveContainerResponse::new())
    }

    fn state_change(
        &self,
        _ctx: &TtrpcContext,
        _req: api::StateChangeEvent,
    ) -> ttrpc::Result<api::Empty> {
        Ok(api::Empty::new())
    }

    fn validate_container_adjustment(
        &self,
        _ctx: &TtrpcContext,
        _req: api::ValidateContainerAdjustmentRequest,
    ) -> ttrpc::Result<api::ValidateContainerAdjustmentResponse> {
        Ok(api::ValidateContainerAdjustmentResponse::new())
    }
}

//! `vmtune nri`: a containerd NRI plugin that gives Kubernetes containers their CPUs and memory
//! nodes as `vmtune plan` would, inside the runtime, as each container is created.
//!
//! ```text
//! containerd ──NRI socket──► nri_proto::conn::Session ──► service::Service (Plugin events)
//!                                                            │ convert: messages → model
//!                                                            ▼
//!                         ask (QoS, CPUs, Kata) ◄── agent::Agent ──► policy ──► plan::plan_for
//!                         devices (CDI → PCI)          │ allocations, pool      (the planner)
//!                                                      ▼
//!                                  report: status.json, metrics.prom, one log line a decision
//! ```
//!
//! * [`model`] — pods and containers as plain data; [`convert`] fills them from NRI messages.
//! * [`ask`] — what a container asks for (QoS class, CPU request and limit, exclusive CPUs).
//! * [`devices`] — its PCI devices, from CDI specs and VFIO nodes through the host model.
//! * [`policy`] — the planner's placement of one container or Kata VM.
//! * [`agent`] — the state machine: every event → cpusets, updates and log lines.
//! * [`service`] — the NRI Plugin service over the agent; [`serve`] — connect, reconnect, stop.
//! * [`report`] — the status file and the Prometheus textfile.
//! * [`replay`] — event sequences (recorded or generated) run through the agent offline.

pub mod agent;
pub mod ask;
pub mod config;
pub mod convert;
pub mod devices;
pub mod model;
pub mod policy;
pub mod replay;
pub mod report;
pub mod serve;
pub mod service;

pub use agent::{Agent, Settings};

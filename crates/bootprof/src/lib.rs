//! vmtune GPU VM boot-time profiler and estimator.
//!
//! * [`ingest`] reads any mix of containerd journals, kata-agent JSON, dmesg, bpftrace and
//!   ftrace output and `kubectl describe pod`, line by line as bytes, behind a byte-level
//!   prefilter that scans a memory-mapped file on all CPUs.
//! * [`timeline`] aligns the guest, agent and host clocks and builds the named phases, the
//!   critical path and the [`findings`].
//! * [`estimate`] models boot time by phase from cited constants.
//! * [`report`] renders the terminal table and the self-contained HTML Gantt page.
//! * [`trace`] holds the host-side tracing scripts; [`gen`] the synthetic journal generator;
//!   [`calibrate`] the QEMU prealloc calibration.

pub mod agent;
pub mod bpftrace;
pub mod calibrate;
pub mod dmesg;
pub mod estimate;
pub mod findings;
pub mod ftrace;
pub mod gen;
pub mod ingest;
pub mod journal;
pub mod kubectl;
pub mod report;
mod scan;
pub mod time;
pub mod timeline;
pub mod trace;

pub use ingest::{ingest_bytes, ingest_str, Ingest, Ingester, Options, Parallel};
pub use timeline::{build, Report};

//! vmtune GPU VM boot-time profiler and estimator.
//!
//! * [`ingest`] reads any mix of containerd journals, kata-agent JSON, dmesg, bpftrace and
//!   ftrace output and `kubectl describe pod`, line by line as bytes, behind a byte-level
//!   prefilter that scans a memory-mapped file on all CPUs.
//! * [`timeline`] runs the analysis of one boot, one module per step: [`select`] (which
//!   boots the inputs hold), [`clocks`] (one time axis), [`facts`] (dated facts), [`join`]
//!   (pins to this VM and its GPUs), [`phases`], [`state`] (complete / failed / unfinished /
//!   started late), [`critical`] (the critical path) and [`findings`]; the result types are
//!   in [`model`].
//! * [`estimate`] models boot time by phase from cited constants; [`cdi`] is the agent's CDI
//!   wait, shared by the analysis and the estimator.
//! * [`report`] renders the terminal table and the self-contained HTML Gantt page.
//! * [`trace`] holds the host-side tracing scripts; [`gen`] the journal generator for
//!   benchmarks; [`synth`] boot records with known truth for tests; [`calibrate`] the QEMU
//!   prealloc calibration.

pub mod agent;
pub mod bpftrace;
pub mod calibrate;
pub mod cdi;
pub mod clocks;
pub mod critical;
pub mod dmesg;
pub mod estimate;
pub mod facts;
pub mod findings;
pub mod fleet;
pub mod ftrace;
pub mod gen;
pub mod ingest;
pub mod join;
pub mod journal;
pub mod kubectl;
pub mod model;
pub mod phases;
pub mod report;
mod scan;
pub mod select;
pub mod state;
pub mod synth;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod traces;

pub use ingest::{ingest_bytes, ingest_str, Ingest, Ingester, Options, Parallel};
pub use timeline::{analyze, build, build_with, AnalyzeOptions, Report};

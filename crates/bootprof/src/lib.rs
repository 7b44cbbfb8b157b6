//! vmtune GPU VM boot-time profiler and estimator. The folders are the pipeline:
//!
//! ```text
//! parse ──▶ analyze ──▶ render          synth (generated inputs with known truth)
//!   │          │  ▲        ▲
//!   │          ▼  │        │
//!   │       estimate       │
//!   └──────▶ fleet ────────┘            trace (host-side tracing scripts)
//! ```
//!
//! * [`parse`] reads any mix of containerd journals, kata-agent JSON, dmesg, bpftrace and
//!   ftrace output and `kubectl describe pod`, line by line as bytes, behind a byte-level
//!   prefilter that scans a memory-mapped file on all CPUs ([`parse::ingest`]).
//! * [`mod@analyze`] runs the analysis of one boot, one module per step: `select` (which boots
//!   the inputs hold), `clocks` (one time axis), `facts` and `traces` (dated facts), `join`
//!   (pins to this VM and its GPUs), `phases`, `state` (complete / failed / unfinished /
//!   started late), `critical` (the critical path) and `findings`; the result types are in
//!   [`analyze::model`].
//! * [`fleet`] runs it on every boot of every node and compares them.
//! * [`estimate`] models boot time by phase from cited constants, with the agent's CDI wait
//!   ([`estimate::cdi`], shared with the analysis) and the QEMU prealloc calibration.
//! * [`render`] writes the terminal tables, JSON lines, Prometheus text and the
//!   self-contained HTML pages of one boot and of a fleet.
//! * [`synth`] writes boot records with known truth for tests and journals for benchmarks;
//!   [`trace`] holds the host-side tracing scripts.

pub mod analyze;
pub mod estimate;
pub mod fleet;
pub mod parse;
pub mod render;
pub mod synth;
pub mod trace;

pub use analyze::{analyze, build, build_with, AnalyzeOptions, Report};
pub use parse::ingest::{ingest_bytes, ingest_str, Ingest, Ingester, Options, Parallel};

//! Reading the inputs: one module per format, each a pure line parser, and [`ingest`], which
//! detects every line's format, runs the matching parser and collects the dated events.
//! [`time`] holds the timestamp grammar all of them share.

pub mod agent;
pub mod bpftrace;
pub mod dmesg;
pub mod ftrace;
pub mod ingest;
pub mod journal;
pub mod kubectl;
pub mod runtime_rs;
mod scan;
pub mod time;

//! What the fixture tests of public and runtime-rs log shapes share: a fixture read, ingested,
//! analyzed as one boot or as a fleet, and the phases of a report.
#![allow(dead_code)]

use bootprof::fleet::{self, Fleet, FleetOptions};
use bootprof::parse::ingest::{Ingest, Ingester, Options};
use bootprof::{build, Report};

pub fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn ingest(name: &str, sandbox: Option<&str>) -> Ingest {
    let mut ing = Ingester::new(Options {
        sandbox: sandbox.map(str::to_string),
    });
    ing.read(name, fixture(name).as_bytes()).unwrap();
    ing.finish()
}

pub fn analyze(name: &str, sandbox: Option<&str>) -> Report {
    build(&ingest(name, sandbox), sandbox).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn all(name: &str) -> Fleet {
    fleet::analyze(&ingest(name, None), &FleetOptions::default())
}

pub fn text(r: &Report) -> String {
    bootprof::render::boot::text(r)
}

/// The phases of a report, as (name, seconds) rounded to the millisecond.
pub fn phases(r: &Report) -> Vec<(&'static str, f64)> {
    r.phases
        .iter()
        .map(|p| (p.name, (p.duration_s * 1000.0).round() / 1000.0))
        .collect()
}

//! Helpers the CLI test files share: run the built `vmtune`, demand success, parse its JSON.
#![allow(dead_code)] // each test binary uses its own subset

use std::process::{Command, Output};

/// The `vmtune` binary under test, ready for arguments.
pub fn vmtune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vmtune"))
}

/// Run `vmtune ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    vmtune().args(args).output().expect("running vmtune")
}

/// Run `vmtune ARGS`, which must succeed and print JSON; the parsed JSON.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(
        o.status.success(),
        "vmtune {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "vmtune {args:?}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

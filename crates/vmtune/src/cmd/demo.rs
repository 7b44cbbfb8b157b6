//! `vmtune` with no arguments: the main job on the built-in example host.

use std::process::ExitCode;

pub fn run() -> anyhow::Result<ExitCode> {
    let host = topo::builtin::default_host();
    print!("{}", super::topo::render_tree(&host));
    Ok(ExitCode::SUCCESS)
}

//! `vmtune bench`. PLACEHOLDER: being written.

use std::process::ExitCode;

/// Not implemented yet.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`vmtune bench` is not implemented yet")
}

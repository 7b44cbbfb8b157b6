//! `vmtune apply`, `restore`, `hook`. PLACEHOLDER: being written.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}
#[derive(clap::Args, Debug)]
pub struct HookArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

pub fn run_apply(_a: ApplyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`vmtune apply` is not implemented yet")
}
pub fn run_restore(_a: RestoreArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`vmtune restore` is not implemented yet")
}
pub fn run_hook(_a: HookArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`vmtune hook` is not implemented yet")
}

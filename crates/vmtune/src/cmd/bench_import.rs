//! `vmtune bench import DIR`: a results tree (`results/<gpu>/<config>/`) read into the
//! comparison and report `bench matrix` makes. Thin shell over `bench::import`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};

use super::common::print_json;

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The results tree: `DIR/<gpu>/<config>/FILE` or `DIR/<config>/FILE`.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Print what was read and the reports as JSON.
    #[arg(long)]
    json: bool,
    /// Write matrix.json and matrix.html here (in OUT/GPU/ for each GPU tree).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the HTML report to this file (a tree with one GPU level or none).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

pub fn run(a: ImportArgs) -> Result<ExitCode> {
    let imported = bench::import::run(&bench::import::ImportOptions {
        dir: a.dir,
        out: a.out,
        html: a.html,
    })?;
    if a.json {
        print_json(&imported)?;
    } else {
        print!("{}", bench::import::text(&imported));
    }
    if let Some(s) = imported.sets.iter().find(|s| s.report.partial) {
        bail!(
            "the import is partial: a config in {} has no benchmark output (listed above)",
            s.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

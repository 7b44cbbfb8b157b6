//! `vmtune topo`: the host model as a tree (like `lstopo`) or JSON.

use std::process::ExitCode;

use anyhow::Context as _;

use super::common::{print_json, HostArgs};

/// Show the host topology. Without --topology, reads the live host from /sys and /proc.
///
/// The tree nests packages, dies, NUMA nodes, L3 and L2 caches and cores by the CPUs they
/// cover, like `lstopo`; GPUs and other devices appear under the NUMA node they are local to,
/// with their local CPUs. --json prints the full model (pus, cores, caches, numa_nodes,
/// distances, pci_devices, interrupts).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub host: HostArgs,
    /// Print the host model as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write a picture of the host as SVG, as lstopo draws it: packages, dies, NUMA nodes
    /// with memory and hugepage pools, L3 groups, cores (P/E told apart), PUs, PCI devices
    /// under their node. `vmtune plan --svg` draws a plan on it
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let host = args.host.load()?;
    if let Some(path) = &args.svg {
        let marks = emit::picture::Marks::host(&host);
        std::fs::write(path, emit::picture::svg(&host, &marks))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("vmtune: picture of the host written to {}", path.display());
    }
    if args.json {
        print_json(&host)?;
    } else {
        print!("{}", emit::text::host_tree(&host));
    }
    Ok(ExitCode::SUCCESS)
}

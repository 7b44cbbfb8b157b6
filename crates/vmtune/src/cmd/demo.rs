//! `vmtune` with no arguments: the main job on the built-in example host — its topology, and
//! the plan for the VFIO gaming-host write-up VM (12 vCPUs, Windows, GTX 1080 Ti at 01:00.0).

use std::process::ExitCode;

pub fn run() -> anyhow::Result<ExitCode> {
    let host = topo::builtin::default_host();
    print!("{}", emit::text::host_tree(&host));
    println!();
    println!("$ vmtune plan --topology builtin --vcpus 12 --memory 16G --gpu 01:00.0 --os windows");
    print!("{}", super::plan::demo_report(&host)?);
    println!();
    println!("Next: `vmtune topo` reads this machine; `vmtune plan --help` plans for it;");
    println!(
        "`--emit libvirt|qemu|kata|kubevirt` spells the plan; `vmtune --help` lists everything."
    );
    Ok(ExitCode::SUCCESS)
}

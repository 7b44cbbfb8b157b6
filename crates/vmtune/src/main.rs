//! `vmtune`: the thin command-line edge over the library crates. Each subcommand lives in
//! `cmd/<name>.rs` with its own clap `Args` and a `run` function; errors become one line on
//! stderr and exit code 2.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cmd;

/// Plan, apply and measure CPU, NUMA, hugepage and interrupt placement for KVM virtual machines
/// with passed-through (VFIO) devices.
///
/// Run with no arguments to see the built-in example host (the i9-9900K + GTX 1080 Ti desktop
/// of a VFIO gaming setup) and the plan vmtune makes for a 12-vCPU Windows VM on it.
/// Every command takes --json for machine output; host input is --topology PATH (hwloc XML,
/// sysfs snapshot directory or tarball, or `builtin`), the live host without it.
/// Sizes need a unit: 512M, 64G, 1T (K, M, G, T are 1024-based; B is bytes); a bare number
/// is refused.
#[derive(Parser)]
#[command(
    name = "vmtune",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Show the host topology: packages, NUMA nodes, caches, cores, PUs, GPUs and where they sit.
    Topo(cmd::topo::Args),
    /// Plan where every vCPU, emulator thread, page of memory and interrupt of a VM should live.
    Plan(cmd::plan::Args),
    /// Apply a plan to a running QEMU (pinning, IRQ routing, shielding, hugepages).
    Apply(cmd::apply::ApplyArgs),
    /// Undo everything a journal records, returning the host to its earlier state.
    Restore(cmd::apply::RestoreArgs),
    /// libvirt qemu hook entry point: `vmtune hook <domain> <op> <sub-op>` with domain XML on stdin.
    Hook(cmd::apply::HookArgs),
    /// Interrupts: show per-IRQ load, or run the vBalance-style balancer.
    Irq(cmd::irq::Args),
    /// Simulate hypervisor scheduling and interrupt delivery under several IRQ policies.
    Sim(cmd::sim::Args),
    /// GPU VM boot time: analyze logs and traces, print tracing scripts, estimate.
    Boot(cmd::boot::Args),
    /// Micro-benchmarks: timer, memory bandwidth, wakeup latency, frame times, comparisons.
    Bench(cmd::bench::Args),
    /// Write a CDI spec for the VFIO devices (legacy groups or IOMMUFD) for container runtimes.
    #[command(long_about = cmd::cdi::LONG_ABOUT)]
    Cdi(cmd::cdi::Args),
    /// On Kubernetes: the containerd NRI agent that gives pods their CPUs as `plan` would.
    #[command(long_about = cmd::nri::LONG_ABOUT)]
    Nri(Box<cmd::nri::Args>),
    /// On Kubernetes: the DRA driver's ResourceSlices and DeviceClasses, and their publisher.
    #[command(long_about = cmd::dra::LONG_ABOUT)]
    Dra(cmd::dra::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::generate::CompletionsArgs),
    /// Write the manual pages, one per command, generated from this help.
    Man(cmd::generate::ManArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // a libvirt hook must exit 0 whatever it is given (cmd::apply::hook_bad_arguments)
        Err(e) if e.use_stderr() && std::env::args().nth(1).as_deref() == Some("hook") => {
            return cmd::apply::hook_bad_arguments(&e)
        }
        Err(e) => e.exit(),
    };
    if !changes_host(cli.command.as_ref()) {
        default_sigpipe();
    }
    let result = match cli.command {
        None => cmd::demo::run(),
        Some(Command::Topo(a)) => cmd::topo::run(a),
        Some(Command::Plan(a)) => cmd::plan::run(a),
        Some(Command::Apply(a)) => cmd::apply::run_apply(a),
        Some(Command::Restore(a)) => cmd::apply::run_restore(a),
        Some(Command::Hook(a)) => cmd::apply::run_hook(a),
        Some(Command::Irq(a)) => cmd::irq::run(a),
        Some(Command::Sim(a)) => cmd::sim::run(a),
        Some(Command::Boot(a)) => cmd::boot::run(a),
        Some(Command::Bench(a)) => cmd::bench::run(a),
        Some(Command::Cdi(a)) => cmd::cdi::run(a),
        Some(Command::Nri(a)) => cmd::nri::run(*a),
        Some(Command::Dra(a)) => cmd::dra::run(a),
        Some(Command::Completions(a)) => cmd::generate::completions(a, Cli::command()),
        Some(Command::Man(a)) => cmd::generate::man(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vmtune: error: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// Commands that change host state keep Rust's ignored SIGPIPE, so a closed output pipe
/// cannot kill them before they restore what they changed.
fn changes_host(cmd: Option<&Command>) -> bool {
    match cmd {
        None
        | Some(
            Command::Topo(_)
            | Command::Plan(_)
            | Command::Sim(_)
            | Command::Completions(_)
            | Command::Man(_),
        ) => false,
        // the spec file is renamed into place before anything is printed
        Some(Command::Cdi(_)) => false,
        Some(Command::Apply(_) | Command::Restore(_) | Command::Hook(_)) => true,
        Some(Command::Irq(a)) => a.changes_host(),
        Some(Command::Boot(a)) => a.changes_host(),
        Some(Command::Bench(a)) => a.changes_host(),
        // the agent is a daemon: a closed log pipe must not kill it mid-event
        Some(Command::Nri(a)) => a.command.is_none(),
        Some(Command::Dra(a)) => a.is_daemon(),
    }
}

/// Read-only commands end quietly when their reader goes away (`vmtune topo | head`), as
/// Unix filters do, instead of panicking on the failed write.
fn default_sigpipe() {
    // SAFETY: resetting one signal's disposition to its default at the start of main, before
    // any thread is spawned; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error chain on one line, outermost first. A cause whose text the outer message already
/// quotes (library errors often print their source) is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.replace(['\n', '\r'], " ")
}

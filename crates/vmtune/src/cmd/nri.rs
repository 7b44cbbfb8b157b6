//! `vmtune nri`: the containerd NRI node agent, its status, and offline replays.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Subcommand;
use nri::config::FileConfig;
use nri::devices::{CdiRegistry, DEFAULT_CDI_DIRS};
use nri::serve::{serve, ServeOptions, StderrSink, Stop};
use nri::{Agent, Settings};
use topo::CpuSet;

use super::common::{parse_size, print_json, HostArgs};

/// `vmtune nri --help`.
pub const LONG_ABOUT: &str =
    "Run the containerd NRI node agent: place Kubernetes containers' CPUs and memory nodes as
`vmtune plan` does, inside containerd, as each container is created.

The agent connects to containerd's NRI socket (NRI v0.12.3, containerd 2.x), registers as
INDEX-NAME, and answers every pod and container event:
  Guaranteed, whole CPUs   CPUs of its own: whole cores, one L3 group where it fits, SMT
                           siblings together, never the housekeeping CPUs, on the node of its
                           devices (CDI names / VFIO nodes), cpuset.mems on the chosen nodes.
  Kata pod (runtime kata*) the same for the VM: its container's CPUs plus Kata's
                           default_vcpus, so Kata pins vCPU i to the i-th CPU, and an emulator
                           core kept free beside them.
  everything else          the shared pool: every CPU no container holds as its own; running
                           shared containers follow it as exclusive ones come and go.
One log line on stderr per decision, with the planner's reasons. When nothing fits, the
container starts in the shared pool (with --strict its creation fails and the kubelet
retries). The agent rebuilds its state from containerd after any restart of either; if it
is gone or slow, containerd starts containers without it.

Settings come from --config FILE (TOML, the flags' names with _), then the flags.

Examples:
  vmtune nri                                  # /var/run/nri/nri.sock, the live host
  vmtune nri --reserved-cpus 0,32 --state-dir /var/run/vmtune-nri
  vmtune nri status                           # what the running agent holds
  vmtune nri replay events.jsonl --topology node.xml   # a recorded night, offline

More: docs/nri.md.";

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<NriCommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum NriCommand {
    /// What the running agent holds: the pools and every container's own CPUs.
    Status(StatusArgs),
    /// Run a recorded or generated event sequence through the agent, without containerd.
    Replay(ReplayArgs),
}

/// Placement settings shared by the agent and the replay.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// Housekeeping CPUs never given to a container of its own (the kubelet's
    /// --reserved-cpus). Default: the ones `vmtune plan` keeps on this host.
    #[arg(long, value_name = "LIST")]
    pub reserved_cpus: Option<String>,
    /// Fail a container's creation when no placement fits (default: start it in the shared
    /// pool and say why).
    #[arg(long)]
    pub strict: bool,
    /// Pods whose runtime handler starts with this are Kata Containers VMs.
    #[arg(long, value_name = "PREFIX")]
    pub kata_runtime_prefix: Option<String>,
    /// Kata's default_vcpus (configuration.toml): vCPUs a Kata VM has beside its
    /// containers' CPU limits [default: 1].
    #[arg(long, value_name = "N")]
    pub kata_default_vcpus: Option<u32>,
    /// Kata's default_memory: memory a Kata VM has beside its containers' limits [default: 2G].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub kata_default_memory: Option<u64>,
    /// Directories of CDI specs, to find where a container's devices sit (repeatable)
    /// [default: /etc/cdi, /var/run/cdi].
    #[arg(long = "cdi-dir", value_name = "DIR")]
    pub cdi_dirs: Vec<PathBuf>,
    /// A TOML file with these settings (flags win).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Default)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// containerd's NRI socket [default: /var/run/nri/nri.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Plugin name: letters, digits and _ . + - [default: vmtune].
    #[arg(long)]
    pub name: Option<String>,
    /// Plugin index, two digits: plugins are called in ascending order [default: 90].
    #[arg(long, value_name = "NN")]
    pub index: Option<String>,
    /// Write status.json and metrics.prom (Prometheus textfile) here after every event.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Append every event, as the agent read it, to FILE (JSON lines; `vmtune nri replay`
    /// reads it).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Return when the first connection ends instead of connecting again.
    #[arg(long)]
    pub once: bool,
    /// The way back: connect once, move every container to every CPU and memory node, and
    /// exit (run it after removing the agent's DaemonSet; docs/nri.md, "Rolling back").
    #[arg(long)]
    pub release_all: bool,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The agent's --state-dir [default: /var/run/vmtune-nri].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Events, one JSON object per line (`vmtune nri --record`), or - for stdin.
    pub events: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Every step as JSON (one object per event, then the allocations).
    #[arg(long)]
    pub json: bool,
}

const DEFAULT_STATE_DIR: &str = "/var/run/vmtune-nri";

struct Resolved {
    host: topo::Host,
    settings: Settings,
    cdi_dirs: Vec<PathBuf>,
    file: FileConfig,
}

fn resolve(p: &PolicyArgs) -> Result<Resolved> {
    let file = match &p.config {
        Some(path) => FileConfig::load(path).map_err(|e| anyhow!(e))?,
        None => FileConfig::default(),
    };
    let host_args = HostArgs {
        topology: p.host.topology.clone().or_else(|| file.topology.clone()),
    };
    let host = host_args.load()?;
    let reserved = match p.reserved_cpus.as_ref().or(file.reserved_cpus.as_ref()) {
        Some(s) => {
            let set = CpuSet::parse_list(s).with_context(|| "--reserved-cpus")?;
            let missing = set.difference(&host.all_cpus());
            if !missing.is_empty() {
                bail!("--reserved-cpus {s}: the host has no CPU {missing}");
            }
            Some(set)
        }
        None => None,
    };
    let defaults = Settings::default();
    let kata_memory = match (p.kata_default_memory, &file.kata_default_memory) {
        (Some(b), _) => Some(b),
        (None, Some(s)) => Some(parse_size(s).map_err(|e| anyhow!("kata_default_memory: {e}"))?),
        (None, None) => None,
    };
    let settings = Settings {
        reserved_cpus: reserved,
        strict: p.strict || file.strict.unwrap_or(false),
        kata_runtime_prefix: p
            .kata_runtime_prefix
            .clone()
            .or_else(|| file.kata_runtime_prefix.clone())
            .unwrap_or(defaults.kata_runtime_prefix),
        kata_default_vcpus: p
            .kata_default_vcpus
            .or(file.kata_default_vcpus)
            .unwrap_or(defaults.kata_default_vcpus)
            .max(1),
        kata_default_memory_mib: kata_memory
            .map(|b| b >> 20)
            .unwrap_or(defaults.kata_default_memory_mib),
    };
    let cdi_dirs = if !p.cdi_dirs.is_empty() {
        p.cdi_dirs.clone()
    } else if let Some(d) = &file.cdi_dirs {
        d.clone()
    } else {
        DEFAULT_CDI_DIRS.iter().map(PathBuf::from).collect()
    };
    Ok(Resolved {
        host,
        settings,
        cdi_dirs,
        file,
    })
}

fn agent(r: &Resolved) -> Result<Agent> {
    let cdi = CdiRegistry::load(&r.cdi_dirs);
    Agent::new(r.host.clone(), r.settings.clone(), cdi).map_err(|e| anyhow!(e))
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.command {
        Some(NriCommand::Status(s)) => status(s),
        Some(NriCommand::Replay(r)) => replay(r),
        None => run_agent(a.run),
    }
}

fn run_agent(a: RunArgs) -> Result<ExitCode> {
    let r = resolve(&a.policy)?;
    let f = &r.file;
    let socket = a
        .socket
        .or_else(|| f.socket.clone())
        .unwrap_or_else(|| PathBuf::from("/var/run/nri/nri.sock"));
    let name = a
        .name
        .or_else(|| f.name.clone())
        .unwrap_or_else(|| "vmtune".into());
    let index = a
        .index
        .or_else(|| f.index.clone())
        .unwrap_or_else(|| "90".into());
    let mut conn = nri_proto::conn::Options::new(&socket, &name, &index);
    conn.check().map_err(|e| anyhow!(e))?;
    conn.call_timeout = Duration::from_secs(2);
    let state_dir = a.state_dir.or_else(|| f.state_dir.clone());
    if let Some(d) = &state_dir {
        std::fs::create_dir_all(d).with_context(|| format!("--state-dir {}", d.display()))?;
    }
    let record = match &a.record {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("--record {}", p.display()))?,
        ),
        None => None,
    };
    let agent = agent(&r)?;
    let sink = Arc::new(StderrSink::new(state_dir.clone(), record));
    use nri::service::Sink as _;
    sink.log(&format!(
        "{}: {} CPUs, housekeeping {}{}",
        r.host.source,
        r.host.all_cpus().len(),
        agent.housekeeping(),
        if r.settings.reserved_cpus.is_some() {
            " (--reserved-cpus)"
        } else {
            " (the planner's)"
        }
    ));
    for p in agent.cdi_problems() {
        sink.log(&format!("CDI spec not read: {p}"));
    }
    sink.changed(&agent);
    let stop = Stop::new();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.flag()).context("installing a signal handler")?;
    }
    let opts = ServeOptions {
        conn,
        state_dir,
        once: a.once || a.release_all,
        retry: Duration::from_secs(1),
        release_all: a.release_all,
    };
    serve(agent, &opts, &stop, sink).map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

fn status(a: StatusArgs) -> Result<ExitCode> {
    let dir = a
        .state_dir
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
    let s = nri::report::read(&dir).map_err(|e| anyhow!(e))?;
    if a.json {
        print_json(&s)?;
    } else {
        print!("{}", s.text());
    }
    Ok(ExitCode::SUCCESS)
}

fn read_events(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).context("reading stdin")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))
}

fn replay(a: ReplayArgs) -> Result<ExitCode> {
    let text = read_events(&a.events)?;
    let events = nri::replay::parse(&text).map_err(|e| anyhow!("{}: {e}", a.events.display()))?;
    let r = resolve(&a.policy)?;
    let mut agent = agent(&r)?;
    let steps = nri::replay::run(&mut agent, &events);
    let status = nri::report::Status::of(&agent, false);
    if a.json {
        print_json(&serde_json::json!({ "steps": steps, "status": status }))?;
    } else {
        for s in &steps {
            for l in &s.log {
                println!("{l}");
            }
            if let Some(e) = &s.error {
                println!("  error: {e}");
            }
        }
        print!("{}", status.text());
    }
    Ok(ExitCode::SUCCESS)
}

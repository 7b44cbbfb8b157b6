//! `vmtune dra`: the Kubernetes DRA driver's objects (what the node would publish, the
//! DeviceClasses) and the publisher that keeps a node's ResourceSlices in the API server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Subcommand;
use dra::publish::{Client, ClientConfig, ServeOptions};
use dra::{CpuGroups, GpuSelect, Options, Republisher};
use topo::CpuSet;

use super::common::HostArgs;

/// `vmtune dra --help`.
pub const LONG_ABOUT: &str =
    "vmtune as a Kubernetes DRA (Dynamic Resource Allocation, resource.k8s.io/v1) driver.

A node publishes two pools as ResourceSlices, so the stock kube-scheduler binds a pod whose
ResourceClaim asks for a GPU and N CPUs on the GPU's NUMA node only to a node that can give
them (matchAttribute: resource.kubernetes.io/numaNode):
  vfio.vmtune.io   the GPUs `vmtune cdi` puts in its spec (on vfio-pci), with pciBusID,
                   numaNode, pcieRoot, IOMMU group, vendor/device ids and link health
  cpu.vmtune.io    one device per NUMA node (or per L3 group), shared by many claims, its
                   capacity cpu.vmtune.io/cpus the whole cores off the housekeeping CPUs and
                   off CPUs the NRI agent gave containers without a claim; requests are
                   rounded up to whole cores
It publishes capacity, not what is free: the scheduler subtracts what claims consume.

Examples:
  vmtune dra slices --topology node.tar.gz --node-name gpu-7 --yaml   # what gpu-7 publishes
  vmtune dra classes | kubectl apply -f -
  vmtune dra publish --node-name $NODE_NAME --status-file /var/run/vmtune-nri/status.json

More: docs/nri.md.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: DraCommand,
}

#[derive(Subcommand, Debug)]
pub enum DraCommand {
    /// Print the ResourceSlices a node publishes (JSON List by default; --yaml for a stream).
    Slices(SlicesArgs),
    /// Print the DeviceClasses vfio.vmtune.io and cpu.vmtune.io.
    Classes(FormatArgs),
    /// Write this node's ResourceSlices to the API server and keep them current.
    Publish(PublishArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct FormatArgs {
    /// A JSON `List` (the default).
    #[arg(long, conflicts_with = "yaml")]
    pub json: bool,
    /// A YAML stream, one document per object.
    #[arg(long)]
    pub yaml: bool,
}

/// What the slices are made from.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// The Kubernetes node's name (the pool's name and the slices' nodeName).
    #[arg(long, value_name = "NAME")]
    pub node_name: String,
    /// Which GPUs: vfio (those `vmtune cdi` lists) or all (every GPU of the model, for
    /// review of a host not yet on vfio-pci or described by hwloc XML).
    #[arg(long, value_enum, default_value = "vfio")]
    pub gpus: GpuArg,
    /// One CPU device per NUMA node, or per L3 group.
    #[arg(long, value_enum, default_value = "numa")]
    pub cpu_groups: GroupArg,
    /// Housekeeping CPUs (the kubelet's --reserved-cpus), as `vmtune nri --reserved-cpus`.
    /// Default: the ones `vmtune plan` keeps on this host.
    #[arg(long, value_name = "LIST")]
    pub reserved_cpus: Option<String>,
    /// CPUs already held outside DRA (exclusive containers without a claim).
    #[arg(long, value_name = "LIST")]
    pub taken_cpus: Option<String>,
    /// The NRI agent's configuration file (`vmtune nri --config`): its topology and
    /// reserved_cpus (and, for publish, its state_dir's status.json) unless given here, so
    /// the slices and the agent decide from the same settings.
    #[arg(long, value_name = "FILE")]
    pub nri_config: Option<PathBuf>,
}

impl NodeArgs {
    /// The flags, with what the NRI agent's configuration file says filled in.
    fn merged(&self) -> Result<(NodeArgs, Option<PathBuf>)> {
        let Some(path) = &self.nri_config else {
            return Ok((self.clone(), None));
        };
        let file = nri::config::FileConfig::load(path).map_err(anyhow::Error::msg)?;
        let mut n = self.clone();
        n.host.topology = n.host.topology.or(file.topology);
        n.reserved_cpus = n.reserved_cpus.or(file.reserved_cpus);
        Ok((n, file.state_dir.map(|d| d.join("status.json"))))
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum GpuArg {
    Vfio,
    All,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum GroupArg {
    Numa,
    L3,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SlicesArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub format: FormatArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PublishArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The NRI agent's status file: its exclusive CPUs are republished as they change.
    /// Default: status.json in the state_dir of --nri-config's file, else none.
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
    /// API server (https://HOST:PORT). Default: the in-cluster address.
    #[arg(long, value_name = "URL", requires_all = ["token_file", "ca_file"])]
    pub server: Option<String>,
    /// Bearer token file (re-read before every sync). Default: the pod's ServiceAccount token.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
    /// CA bundle of the API server. Default: the pod's ServiceAccount ca.crt.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub ca_file: Option<PathBuf>,
    /// Seconds between reads of the status file.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub poll: f64,
    /// Seconds between checks of the slices in the API server when nothing changed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub resync: f64,
    /// Sync once and exit.
    #[arg(long)]
    pub once: bool,
}

impl Args {
    /// The publisher is a daemon: a closed log pipe must not kill it (as `vmtune nri`).
    pub fn is_daemon(&self) -> bool {
        matches!(self.command, DraCommand::Publish(_))
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.command {
        DraCommand::Slices(s) => {
            let (node, _) = s.node.merged()?;
            let host = node.host.load()?;
            let published = dra::slices(&host, &options(&node)?)?;
            for n in &published.inventory.notes {
                eprintln!("vmtune dra: {n}");
            }
            print(&published.slices, &s.format);
        }
        DraCommand::Classes(f) => print(&dra::classes(), &f),
        DraCommand::Publish(p) => publish(p)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn print<T: serde::Serialize>(items: &[T], f: &FormatArgs) {
    if f.yaml {
        print!("{}", dra::to_yaml(items));
    } else {
        print!("{}", dra::to_json(items));
    }
}

fn cpus(flag: &str, v: &Option<String>) -> Result<Option<CpuSet>> {
    v.as_deref()
        .map(|s| CpuSet::parse_list(s).with_context(|| format!("{flag} {s:?}")))
        .transpose()
}

fn options(n: &NodeArgs) -> Result<Options> {
    let mut o = Options::new(&n.node_name);
    o.gpus = match n.gpus {
        GpuArg::Vfio => GpuSelect::Vfio,
        GpuArg::All => GpuSelect::All,
    };
    o.cpu_groups = match n.cpu_groups {
        GroupArg::Numa => CpuGroups::Numa,
        GroupArg::L3 => CpuGroups::L3,
    };
    o.reserved_cpus = cpus("--reserved-cpus", &n.reserved_cpus)?;
    o.taken.cpus = cpus("--taken-cpus", &n.taken_cpus)?.unwrap_or_default();
    Ok(o)
}

fn seconds(flag: &str, v: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{flag} {v}: not a positive number of seconds"))
}

fn publish(p: PublishArgs) -> Result<()> {
    let cfg = match (&p.server, &p.token_file, &p.ca_file) {
        (Some(s), Some(t), Some(c)) => ClientConfig {
            server: s.clone(),
            token_file: t.clone(),
            ca_file: c.clone(),
        },
        _ => ClientConfig::in_cluster()?,
    };
    let (node, status_file) = p.node.merged()?;
    let serve = ServeOptions {
        status_file: p.status_file.clone().or(status_file),
        poll: seconds("--poll", p.poll)?,
        resync: seconds("--resync", p.resync)?,
        once: p.once,
    };
    let client = Client::new(&cfg)?;
    let host = node.host.load()?;
    let rep = Republisher::new(host, options(&node)?)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }
    dra::publish::serve(&client, rep, &serve, &stop, |line| {
        eprintln!("vmtune dra publish: {line}")
    })?;
    Ok(())
}

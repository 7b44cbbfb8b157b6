//! `vmtune bench matrix`: the r/VFIO pinning benchmark's layouts of one libvirt domain (and
//! the planner's own plan), built by the planner (`plan::layouts`), patched into scratch
//! copies of the domain (`emit::libvirt`), booted and measured one after another
//! (`bench::matrix`) — vmtune's measuring initramfs, or the domain's own OS through its
//! disks' overlays, reached by qemu-guest-agent or SSH — each scratch domain and the files
//! made for it a journal step (`apply`, `Target::LibvirtDomain`) so `vmtune restore`
//! removes whatever a killed run left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apply::journal::{Journal, State};
use apply::libvirt::Virsh;
use apply::step::Target;
use bench::matrix::{self, view, Domains, LayoutSpec, ScratchFiles, SshTarget, Transport};
use bench::BenchError;
use plan::layouts::{LayoutKind, Matrix};
use plan::{GuestOs, HugepagePolicy, Plan, Request};

use super::common::{parse_size, print_json, read_domain, start_journal, HostArgs};
use super::plan::ProfileArg;

/// Default journal of `bench matrix`.
pub const MATRIX_JOURNAL: &str = "/run/vmtune/bench-matrix.journal";

#[derive(clap::Args, Debug)]
pub struct MatrixArgs {
    /// The VM: a libvirt domain XML file, or the name of a domain libvirt has defined (read
    /// with `virsh dumpxml --inactive`). It is never changed: every layout runs as a scratch
    /// copy named `vmtune-matrix-NAME-LAYOUT-RUN`.
    #[arg(long, value_name = "NAME|FILE")]
    domain: String,
    /// libvirt connection URI (`virsh -c`), e.g. qemu:///system. Default: virsh's.
    #[arg(long, short = 'c', value_name = "URI")]
    connect: Option<String>,
    /// Layouts to measure, in table order; the first is the baseline of every change.
    /// `plan` is the planner's own plan for this domain (the verdict is about it);
    /// `pin-span` has pin-numa's host CPUs with the guest told one node, `smt-double` twice
    /// the vCPUs on pin-numa's cores (the study's controls A and C).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,pin,pin-numa,pin-numa-smt,plan,pin-span,smt-double",
        value_name = "LIST"
    )]
    layouts: Vec<String>,
    /// How the benchmarks reach the guest: `agent` boots the domain's own OS (its disks
    /// behind throw-away qcow2 overlays, never written) and runs `--run` commands through
    /// qemu-guest-agent; `ssh` the same through `--ssh`; `initramfs` boots vmtune's own
    /// measuring initramfs instead of the disks (the built-in suite). `auto`: agent when the
    /// domain has a writable disk, else initramfs (said).
    #[arg(long, value_enum, default_value = "auto")]
    transport: TransportArg,
    /// Where `--transport ssh` logs in: USER@HOST or USER@HOST:PORT (key authentication).
    #[arg(long, value_name = "USER@HOST[:PORT]")]
    ssh: Option<String>,
    /// The private key for `--ssh`.
    #[arg(long, value_name = "FILE")]
    ssh_key: Option<PathBuf>,
    /// Back every layout's memory with pages of this size (2M or 1G; the host's pool must
    /// hold them). Default: every layout keeps the domain's own `<memoryBacking>`.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    hugepages: Option<u64>,
    /// Boots per layout, interleaved: round r runs every layout once, starting at layout r.
    #[arg(long, default_value_t = 3, value_name = "N")]
    runs: usize,
    /// What the VM is for: the planner's choice, marked in the table, depends on it.
    #[arg(long, value_enum, default_value = "compute")]
    profile: ProfileArg,
    /// A command to run inside the guest after the built-in suite, its output read by the
    /// readers of STREAM, sysbench, nccl-tests, nvbandwidth, bandwidthTest or `name value
    /// unit` lines (repeatable), e.g. `--run stream=/opt/stream`.
    #[arg(long = "run", value_name = "NAME=COMMAND")]
    commands: Vec<String>,
    /// A host file to copy into the guest's /opt (a static benchmark binary; repeatable).
    #[arg(long = "guest-file", value_name = "FILE")]
    guest_files: Vec<PathBuf>,
    /// Guest kernel the scratch domains boot (default: the newest /boot/vmlinuz-*).
    #[arg(long, value_name = "FILE")]
    kernel: Option<PathBuf>,
    /// Built-in benchmarks to skip (comma separated: timer,membw,latency).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Size of each membw array inside the guest (default 64M or 4× L3).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    size: Option<u64>,
    /// Latency seconds inside the guest.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    latency_seconds: f64,
    /// Directory for matrix.json, matrix.html and the scratch domains' XML.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// The HTML report (default: OUT/matrix.html).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Journal of the scratch domains (`vmtune restore --journal FILE` after a crash).
    #[arg(long, default_value = MATRIX_JOURNAL, value_name = "FILE")]
    journal: PathBuf,
    /// Give up on one boot after this many seconds.
    #[arg(long, default_value_t = 600, value_name = "S")]
    guest_timeout: u64,
    /// Print the layouts and write their scratch XML to OUT; define nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result as JSON (what OUT/matrix.json holds).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TransportArg {
    Auto,
    Agent,
    Ssh,
    Initramfs,
}

/// `virsh` behind the matrix, each scratch domain journaled before it is defined (with the
/// overlays and NVRAM copy made for it, before they are made).
struct VirshDomains {
    virsh: Virsh,
    /// Opened once the runs start (a dry run has none).
    journal: Option<Journal>,
    /// The domain's disks and NVRAM (the guest transports overlay them).
    disks: Vec<emit::libvirt::DiskSource>,
    nvram: Option<String>,
    workdir: PathBuf,
    /// Per scratch domain made by `guest_xml`: its journal step and its files.
    made: BTreeMap<String, (u32, Vec<PathBuf>)>,
}

impl VirshDomains {
    fn journal(&mut self) -> bench::Result<&mut Journal> {
        self.journal.as_mut().ok_or_else(|| {
            BenchError::Invalid("no journal is open (a dry run defines nothing)".into())
        })
    }

    /// The overlay of each writable disk and the NVRAM copy of scratch domain `name`.
    fn files_of(&self, name: &str) -> (Vec<(String, PathBuf)>, Option<PathBuf>) {
        let overlays = self
            .disks
            .iter()
            .filter(|d| d.writable())
            .map(|d| {
                (
                    d.target.clone(),
                    self.workdir.join(format!("{name}-{}.qcow2", d.target)),
                )
            })
            .collect();
        (
            overlays,
            self.nvram
                .as_ref()
                .map(|_| self.workdir.join(format!("{name}_VARS.fd"))),
        )
    }

    fn make_files(&self, overlays: &[(String, PathBuf)], nvram: Option<&Path>) -> Result<()> {
        for (target, overlay) in overlays {
            let Some(d) = self.disks.iter().find(|d| &d.target == target) else {
                continue;
            };
            let Some(image) = &d.path else {
                bail!("disk {target} names no image");
            };
            let format = d.format.clone().unwrap_or_else(|| "raw".into());
            let out = std::process::Command::new("qemu-img")
                .args(["create", "-q", "-f", "qcow2", "-F", &format, "-b", image])
                .arg(overlay)
                .output()
                .context("running qemu-img (apt-get install qemu-utils)")?;
            if !out.status.success() {
                bail!(
                    "qemu-img create over {image}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        if let (Some(from), Some(to)) = (&self.nvram, nvram) {
            std::fs::copy(from, to).with_context(|| format!("copying the NVRAM {from}"))?;
        }
        Ok(())
    }
}

impl Domains for VirshDomains {
    fn scratch_xml(&self, l: &LayoutSpec, f: &ScratchFiles) -> bench::Result<String> {
        let s = emit::libvirt::Scratch {
            name: f.name.clone(),
            kernel: f.kernel.display().to_string(),
            initrd: f.initrd.display().to_string(),
            cmdline: f.cmdline.clone(),
            console_file: f.console.display().to_string(),
            result_file: f.result.display().to_string(),
        };
        emit::libvirt::scratch_domain(&l.domain_xml, &s)
            .map_err(|e| BenchError::Invalid(format!("{}: {e}", l.name)))
    }

    fn define(&mut self, name: &str, xml: &Path) -> bench::Result<()> {
        let step = match self.made.get(name) {
            Some((step, _)) => *step,
            None => {
                let target = Target::LibvirtDomain(apply::step::LibvirtDomain {
                    uri: self.virsh.uri.clone(),
                    name: name.to_string(),
                    xml: xml.to_path_buf(),
                    files: Vec::new(),
                });
                self.journal()?
                    .intend(&target, "absent", "defined")
                    .map_err(other)?
            }
        };
        let r = self.virsh.define(xml).map_err(other);
        let state = if r.is_ok() {
            State::Done
        } else {
            State::Failed
        };
        self.journal()?.outcome(step, state, None).map_err(other)?;
        r
    }

    fn start(&mut self, name: &str) -> bench::Result<()> {
        self.virsh.start(name).map_err(other)
    }

    fn state(&mut self, name: &str) -> bench::Result<Option<String>> {
        self.virsh.state(name).map_err(other)
    }

    fn remove(&mut self, name: &str) -> bench::Result<()> {
        self.virsh.remove(name).map_err(other)?;
        if let Some((_, files)) = self.made.get(name) {
            // the working directory (listed with the first run's files) goes at the end
            for f in files.iter().filter(|f| !f.is_dir()) {
                match std::fs::remove_file(f) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(BenchError::io(f, e)),
                }
            }
        }
        Ok(())
    }

    fn guest_xml(&mut self, l: &LayoutSpec, name: &str) -> bench::Result<String> {
        let (overlays, nvram) = self.files_of(name);
        let xml_path = self.workdir.join(format!("{name}.xml"));
        let mut files: Vec<PathBuf> = overlays.iter().map(|(_, p)| p.clone()).collect();
        files.extend(nvram.clone());
        files.push(xml_path.clone());
        if self.made.is_empty() {
            // the working directory goes last, once empty
            files.push(self.workdir.clone());
        }
        let target = Target::LibvirtDomain(apply::step::LibvirtDomain {
            uri: self.virsh.uri.clone(),
            name: name.to_string(),
            xml: xml_path,
            files: files.clone(),
        });
        let step = self
            .journal()?
            .intend(&target, "absent", "defined")
            .map_err(other)?;
        self.made.insert(name.to_string(), (step, files));
        self.make_files(&overlays, nvram.as_deref())
            .map_err(|e| BenchError::Invalid(format!("{}: {e:#}", l.name)))?;
        guest_scratch(&l.domain_xml, name, &overlays, nvram.as_deref())
            .map_err(|e| BenchError::Invalid(format!("{}: {e}", l.name)))
    }

    fn agent(&mut self, name: &str, request: &str, timeout: Duration) -> bench::Result<String> {
        let t = timeout.as_secs().max(1).to_string();
        self.virsh
            .run(&["qemu-agent-command", "--timeout", &t, name, request])
            .map_err(other)
    }
}

/// The scratch copy of `xml` named `name` booting its own OS through `overlays`.
fn guest_scratch(
    xml: &str,
    name: &str,
    overlays: &[(String, PathBuf)],
    nvram: Option<&Path>,
) -> std::result::Result<String, emit::EmitError> {
    let s = emit::libvirt::GuestScratch {
        name: name.to_string(),
        overlays: overlays
            .iter()
            .map(|(t, p)| (t.clone(), p.display().to_string()))
            .collect(),
        nvram: nvram.map(|p| p.display().to_string()),
        agent_channel: true,
    };
    emit::libvirt::scratch_guest(xml, &s)
}

fn other(e: apply::ApplyError) -> BenchError {
    BenchError::Invalid(e.to_string())
}

fn pins_of(p: &Plan) -> String {
    let mut s: Vec<String> = p
        .vcpus
        .iter()
        .map(|v| format!("{}→{}", v.vcpu, v.cpu))
        .collect();
    if s.len() > 8 {
        let n = s.len();
        s.truncate(6);
        s.push(format!("… ({n} vCPUs)"));
    }
    s.join(" ")
}

fn guest_of(p: &Plan) -> String {
    let t = &p.guest_topology;
    let mut s = format!(
        "{} socket(s) × {} core(s) × {} thread(s)",
        t.sockets, t.cores, t.threads
    );
    if p.guest_numa.len() > 1 {
        let cells: Vec<String> = p
            .guest_numa
            .iter()
            .map(|c| {
                format!(
                    "cell {}: vCPUs {} on node {}",
                    c.cell,
                    c.vcpus.to_list_string(),
                    c.host_nodes
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect();
        s.push_str("; ");
        s.push_str(&cells.join("; "));
    }
    s
}

/// What the guest of `xml` must see: its `<vcpu>`, `<topology>` and cells, and the
/// passed-through devices `devices` (host address, guest cell) with their ids from `host`.
fn expect_of(
    xml: &str,
    devices: &[(String, Option<u32>)],
    host: &topo::Host,
) -> Result<view::Expect> {
    let g = emit::libvirt::guest_shape(xml)?;
    Ok(view::Expect {
        vcpus: g.vcpus,
        topology: g.topology,
        cells: g
            .cells
            .into_iter()
            .map(|(id, vcpus, memory_bytes)| view::ExpectCell {
                id,
                vcpus,
                memory_bytes,
            })
            .collect(),
        devices: devices
            .iter()
            .map(|(bdf, cell)| {
                let d = host.pci_devices.iter().find(|d| &d.bdf == bdf);
                view::ExpectDevice {
                    bdf: bdf.clone(),
                    vendor_id: d.and_then(|d| d.vendor_id),
                    device_id: d.and_then(|d| d.device_id),
                    cell: *cell,
                }
            })
            .collect(),
    })
}

/// The `<memoryBacking>` every layout runs, and how the table says it.
fn backing(xml: &str, hugepages: Option<u64>) -> Result<(Option<String>, String)> {
    let own = emit::libvirt::memory_backing(xml)?;
    Ok(match hugepages {
        Some(bytes) => {
            let kb = bytes / 1024;
            if ![2048, 1 << 20].contains(&kb) {
                bail!("--hugepages {bytes}B: expected 2M or 1G");
            }
            (
                Some(emit::libvirt::hugepage_backing(own.as_deref(), kb)?),
                format!(
                    "memory: every layout on {} pages (--hugepages)",
                    if kb == 2048 { "2 MiB" } else { "1 GiB" }
                ),
            )
        }
        None => {
            let said = match &own {
                Some(b) if b.contains("<hugepages") => {
                    "memory: every layout keeps the domain's <memoryBacking> (its hugepages)"
                }
                Some(_) => "memory: every layout keeps the domain's <memoryBacking> (4 KiB pages)",
                None => "memory: every layout on 4 KiB pages, as the domain",
            };
            (own, said.to_string())
        }
    })
}

/// One row per layout: the domain each runs, every one with the same memory backing.
fn specs(
    m: &Matrix,
    xml: &str,
    shape: &emit::libvirt::DomainShape,
    mem: &(Option<String>, String),
    host: &topo::Host,
) -> Result<Vec<LayoutSpec>> {
    m.layouts
        .iter()
        .map(|l| {
            let mut notes = l.notes.clone();
            if l.kind == LayoutKind::Plan && l.plan.is_none() {
                bail!(
                    "layout plan: {}; leave plan out of --layouts",
                    l.notes.join("; ")
                );
            }
            let (domain_xml, vcpus, pins, guest, plan) = match &l.plan {
                None => {
                    if !shape.pinned.is_empty() {
                        notes.push(format!(
                            "the domain as given pins to host CPUs {}",
                            shape.pinned.to_list_string()
                        ));
                    }
                    let pins = if shape.pinned.is_empty() {
                        "none (libvirt's default)".to_string()
                    } else {
                        format!("as given: CPUs {}", shape.pinned.to_list_string())
                    };
                    (xml.to_string(), shape.vcpus, pins, "as given".into(), None)
                }
                Some(p) => {
                    let patched = emit::libvirt::patch(xml, p)
                        .with_context(|| format!("layout {}", l.kind.name()))?;
                    (
                        patched.xml,
                        p.vcpus.len() as u32,
                        pins_of(p),
                        guest_of(p),
                        Some(serde_json::to_value(&patched.plan)?),
                    )
                }
            };
            let (domain_xml, said) =
                emit::libvirt::with_memory_backing(&domain_xml, mem.0.as_deref())
                    .with_context(|| format!("layout {}", l.kind.name()))?;
            notes.extend(said);
            let devices: Vec<(String, Option<u32>)> = match &l.plan {
                Some(p) => p
                    .devices
                    .iter()
                    .map(|d| (d.bdf.clone(), d.guest_cell))
                    .collect(),
                None => shape.devices.iter().map(|b| (b.clone(), None)).collect(),
            };
            let expect = Some(expect_of(&domain_xml, &devices, host)?);
            Ok(LayoutSpec {
                name: l.kind.name().into(),
                describe: l.kind.describe().into(),
                domain_xml,
                vcpus,
                pins,
                guest,
                notes,
                plan,
                expect,
            })
        })
        .collect()
}

fn suite_args(a: &MatrixArgs) -> Result<Vec<String>> {
    for s in &a.skip {
        if !["timer", "membw", "latency"].contains(&s.as_str()) {
            bail!("--skip {s:?}: expected timer, membw or latency");
        }
    }
    let mut v = vec!["--config".to_string(), "guest".into()];
    if !a.skip.is_empty() {
        v.extend(["--skip".into(), a.skip.join(",")]);
    }
    if let Some(s) = a.size {
        v.extend(["--size".into(), format!("{s}B")]);
    }
    if !(a.latency_seconds.is_finite() && a.latency_seconds > 0.0) {
        bail!("--latency-seconds must be above 0");
    }
    v.extend(["--latency-seconds".into(), a.latency_seconds.to_string()]);
    Ok(v)
}

/// The transport `--transport` names, `auto` resolved from the domain's disks; the line
/// that says which and why.
fn transport(a: &MatrixArgs, disks: &[emit::libvirt::DiskSource]) -> Result<(Transport, String)> {
    let writable: Vec<&str> = disks
        .iter()
        .filter(|d| d.writable())
        .map(|d| d.target.as_str())
        .collect();
    let own_os = |how: &str| {
        format!(
            "transport: {how} — each layout boots the domain's own OS, its disk(s) {} behind throw-away qcow2 overlays (the images are only read)",
            writable.join(", ")
        )
    };
    let (t, line) = match a.transport {
        TransportArg::Auto if writable.is_empty() => {
            return Ok((
                Transport::Initramfs,
                "transport: initramfs — the domain has no writable disk, so each layout boots vmtune's measuring initramfs (--transport)".into(),
            ))
        }
        TransportArg::Initramfs => {
            return Ok((
                Transport::Initramfs,
                "transport: initramfs — each layout boots vmtune's measuring initramfs instead of the domain's disks".into(),
            ))
        }
        TransportArg::Auto | TransportArg::Agent => {
            (Transport::Agent, own_os("qemu-guest-agent (guest-exec)"))
        }
        TransportArg::Ssh => {
            let Some(dest) = &a.ssh else {
                bail!("--transport ssh needs --ssh USER@HOST[:PORT]");
            };
            let (destination, port) = match dest.rsplit_once(':') {
                Some((d, p)) => (
                    d.to_string(),
                    p.parse::<u16>()
                        .map_err(|_| anyhow::anyhow!("--ssh {dest:?}: the port {p:?} is not a number"))?,
                ),
                None => (dest.clone(), 22),
            };
            if let Some(k) = &a.ssh_key {
                if !k.is_file() {
                    bail!("--ssh-key {}: no such file", k.display());
                }
            }
            let line = own_os(&format!("SSH to {destination} port {port}"));
            (
                Transport::Ssh(SshTarget {
                    destination,
                    port,
                    key: a.ssh_key.clone(),
                }),
                line,
            )
        }
    };
    if writable.is_empty() {
        bail!(
            "--transport {}: the domain has no writable disk to boot its own OS from; use --transport initramfs",
            t.name()
        );
    }
    if a.commands.is_empty() {
        bail!(
            "--transport {} measures what --run runs in the guest: give at least one, e.g. --run cpu='sysbench cpu --time=10 run'",
            t.name()
        );
    }
    Ok((t, line))
}

pub fn run(a: MatrixArgs) -> Result<ExitCode> {
    let kinds = a
        .layouts
        .iter()
        .map(|s| {
            LayoutKind::parse(s.trim())
                .with_context(|| format!("--layouts {s:?}: expected {}", LayoutKind::names()))
        })
        .collect::<Result<Vec<_>>>()?;
    if kinds.is_empty() {
        bail!("--layouts is empty");
    }
    if !(1..=100).contains(&a.runs) {
        bail!("--runs {}: expected 1 to 100", a.runs);
    }
    if a.host.topology.is_some() && !a.dry_run {
        bail!("--topology plans on another host's model: use it with --dry-run only (the scratch domains pin this host's CPUs)");
    }
    let user_runs = a
        .commands
        .iter()
        .map(|c| bench::guest::UserRun::parse(c))
        .collect::<bench::Result<Vec<_>>>()?;
    for f in &a.guest_files {
        if !f.is_file() {
            bail!("--guest-file {}: no such file", f.display());
        }
    }
    let suite = suite_args(&a)?;
    let virsh = Virsh::new(a.connect.clone());
    let (xml, defined) = read_domain(&a.domain, &virsh)?;
    let shape =
        emit::libvirt::domain_shape(&xml).with_context(|| format!("domain {}", a.domain))?;
    let (disks, nvram) =
        emit::libvirt::domain_disks(&xml).with_context(|| format!("domain {}", a.domain))?;
    let (transport, transport_line) = transport(&a, &disks)?;
    let own_os = transport != Transport::Initramfs;
    if defined && !a.dry_run && (own_os || !shape.devices.is_empty()) {
        if let Some(state) = virsh.state(&shape.name)? {
            if state != "shut off" {
                let why = if own_os {
                    "its disks would be read while it writes them"
                } else {
                    "its passed-through devices can be in one guest at a time"
                };
                bail!(
                    "domain {} is {state}: shut it down first ({why})",
                    shape.name
                );
            }
        }
    }
    let host = a.host.load()?;
    let os = emit::libvirt::domain_guest_os(&xml)?
        .map(|d| d.os)
        .unwrap_or(GuestOs::Linux);
    let req = Request {
        name: Some(shape.name.clone()),
        vcpus: shape.vcpus,
        memory_bytes: shape.memory_bytes,
        devices: shape.devices.clone(),
        profile: a.profile.into(),
        os,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let m = plan::layouts::matrix(&req, &host, &[], &kinds).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mem = backing(&xml, a.hugepages)?;
    let layouts = specs(&m, &xml, &shape, &mem, &host)?;
    let setup = vec![transport_line, mem.1.clone()];
    let chosen = m.chosen_kind.map(|k| k.name().to_string());
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let prefix = format!("vmtune-matrix-{}", shape.name);
    let workdir = a
        .journal
        .parent()
        .unwrap_or(Path::new("/run/vmtune"))
        .join(format!("bench-matrix-{}", std::process::id()));
    let mut dom = VirshDomains {
        virsh,
        journal: None,
        disks,
        nvram,
        workdir: workdir.clone(),
        made: BTreeMap::new(),
    };
    if a.dry_run {
        return dry_run(&a, &layouts, &m, &prefix, &setup, own_os.then_some(&dom));
    }
    let (kernel, busybox) = if own_os {
        (PathBuf::new(), PathBuf::new())
    } else {
        initramfs_parts(&a)?
    };
    let opts = matrix::MatrixOptions {
        runs: a.runs,
        prefix,
        workdir: workdir.clone(),
        kernel,
        busybox,
        vmtune: std::env::current_exe().context("locating the vmtune binary")?,
        suite_args: suite,
        user_runs,
        files: a.guest_files.clone(),
        timeout: Duration::from_secs(a.guest_timeout.max(1)),
        transport,
    };
    let (lock, journal) = start_journal(&a.journal, None)?;
    dom.journal = Some(journal);
    if !a.json {
        for l in &setup {
            eprintln!("{l}");
        }
    }
    let bar = bench::progress::bar("matrix", !a.json);
    let records = matrix::run(&layouts, &opts, &mut dom, &bar);
    bar.finish_and_clear();
    // every scratch domain was removed as its run ended; restoring the journal checks that
    // and archives it
    drop(dom);
    drop(lock);
    let rep = apply::engine::restore(&a.journal, Duration::from_secs(10))
        .map_err(|e| anyhow::anyhow!("restoring {}: {e}", a.journal.display()))?;
    if rep.failed > 0 {
        bail!(
            "{} scratch domain(s) could not be removed: the journal is kept at {}",
            rep.failed,
            a.journal.display()
        );
    }
    let records = records?;
    let _ = std::fs::remove_dir_all(&workdir);
    let mut report = matrix::summarize(
        layouts,
        a.runs,
        records,
        chosen,
        m.chosen_note.clone(),
        Some(host),
    );
    report.setup = setup;
    report.views = matrix::remote::views(&report.records);
    write_reports(&a, &report)
}

/// The kernel and busybox the measuring initramfs is made of.
fn initramfs_parts(a: &MatrixArgs) -> Result<(PathBuf, PathBuf)> {
    let kernel = match &a.kernel {
        Some(k) => k.clone(),
        None => bench::guest::find_kernel(Path::new("/boot"))
            .context("no /boot/vmlinuz-* found; give the guest kernel with --kernel")?,
    };
    if !kernel.is_file() {
        bail!("--kernel {}: no such file", kernel.display());
    }
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .context("busybox not found (apt-get install busybox-static)")?;
    Ok((kernel, busybox))
}

fn write_reports(a: &MatrixArgs, report: &matrix::MatrixReport) -> Result<ExitCode> {
    let json_path = a.out.join("matrix.json");
    let html_path = a.html.clone().unwrap_or_else(|| a.out.join("matrix.html"));
    std::fs::write(&json_path, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    std::fs::write(
        &html_path,
        matrix::html(
            report,
            "vmtune bench matrix: the r/VFIO pinning benchmark's layouts on this host",
        ),
    )
    .with_context(|| format!("writing {}", html_path.display()))?;
    if a.json {
        print_json(report)?;
    } else {
        print!("{}", matrix::text(report));
        for l in &report.setup {
            println!("{l}");
        }
        println!("wrote {} and {}", json_path.display(), html_path.display());
    }
    if report.partial {
        bail!(
            "the matrix is partial: some runs failed (listed above and in {})",
            json_path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The layouts and their scratch XML; for the guest transports the XML each run would
/// define (its disks on overlays in the run's working directory, none made here).
fn dry_run(
    a: &MatrixArgs,
    layouts: &[LayoutSpec],
    m: &Matrix,
    prefix: &str,
    setup: &[String],
    own_os: Option<&VirshDomains>,
) -> Result<ExitCode> {
    let mut written = Vec::new();
    for l in layouts {
        let path = a.out.join(format!("{prefix}-{}.xml", l.name));
        let xml = match own_os {
            Some(dom) => {
                let name = format!("{prefix}-{}-1", l.name);
                let (overlays, nvram) = dom.files_of(&name);
                guest_scratch(&l.domain_xml, &name, &overlays, nvram.as_deref())
                    .with_context(|| format!("layout {}", l.name))?
            }
            None => l.domain_xml.clone(),
        };
        std::fs::write(&path, xml).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let order: Vec<String> = matrix::order(layouts.len(), a.runs)
        .into_iter()
        .map(|(l, r)| format!("{}#{}", layouts[l].name, r + 1))
        .collect();
    if a.json {
        print_json(&serde_json::json!({
            "dry_run": true,
            "layouts": layouts,
            "chosen": m.chosen_kind.map(|k| k.name()),
            "chosen_note": m.chosen_note,
            "setup": setup,
            "order": order,
            "written": written,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print!(
        "{}",
        matrix::layouts_text(layouts, m.chosen_kind.map(|k| k.name()), &m.chosen_note)
    );
    for l in setup {
        println!("{l}");
    }
    println!("order: {}", order.join(", "));
    for p in &written {
        println!("wrote {}", p.display());
    }
    println!("dry run: nothing defined");
    Ok(ExitCode::SUCCESS)
}

//! `vmtune bench matrix`: the r/VFIO pinning benchmark's four layouts of one libvirt domain,
//! built by the planner (`plan::layouts`), patched into scratch copies of the domain
//! (`emit::libvirt`), booted and measured one after another (`bench::matrix`), each scratch
//! domain a journal step (`apply`, `Target::LibvirtDomain`) so `vmtune restore` removes
//! whatever a killed run left.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apply::journal::{Journal, State};
use apply::libvirt::Virsh;
use apply::step::Target;
use bench::matrix::{self, Domains, LayoutSpec, ScratchFiles};
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
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,pin,pin-numa,pin-numa-smt",
        value_name = "LIST"
    )]
    layouts: Vec<String>,
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

/// `virsh` behind the matrix, each scratch domain journaled before it is defined.
struct VirshDomains {
    virsh: Virsh,
    journal: Journal,
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
        let target = Target::LibvirtDomain(apply::step::LibvirtDomain {
            uri: self.virsh.uri.clone(),
            name: name.to_string(),
            xml: xml.to_path_buf(),
        });
        let step = self
            .journal
            .intend(&target, "absent", "defined")
            .map_err(other)?;
        let r = self.virsh.define(xml).map_err(other);
        let state = if r.is_ok() {
            State::Done
        } else {
            State::Failed
        };
        self.journal.outcome(step, state, None).map_err(other)?;
        r
    }

    fn start(&mut self, name: &str) -> bench::Result<()> {
        self.virsh.start(name).map_err(other)
    }

    fn state(&mut self, name: &str) -> bench::Result<Option<String>> {
        self.virsh.state(name).map_err(other)
    }

    fn remove(&mut self, name: &str) -> bench::Result<()> {
        self.virsh.remove(name).map(drop).map_err(other)
    }
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

/// One row per layout: the domain each runs.
fn specs(m: &Matrix, xml: &str, shape: &emit::libvirt::DomainShape) -> Result<Vec<LayoutSpec>> {
    m.layouts
        .iter()
        .map(|l| {
            let mut notes = l.notes.clone();
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
            Ok(LayoutSpec {
                name: l.kind.name().into(),
                describe: l.kind.describe().into(),
                domain_xml,
                vcpus,
                pins,
                guest,
                notes,
                plan,
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

pub fn run(a: MatrixArgs) -> Result<ExitCode> {
    let kinds = a
        .layouts
        .iter()
        .map(|s| {
            LayoutKind::parse(s.trim()).with_context(|| {
                format!("--layouts {s:?}: expected default, pin, pin-numa or pin-numa-smt")
            })
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
    if defined && !a.dry_run && !shape.devices.is_empty() {
        if let Some(state) = virsh.state(&shape.name)? {
            if state != "shut off" {
                bail!(
                    "domain {} is {state}: shut it down first (its passed-through devices can be in one guest at a time)",
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
    let layouts = specs(&m, &xml, &shape)?;
    let chosen = m.chosen_kind.map(|k| k.name().to_string());
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let prefix = format!("vmtune-matrix-{}", shape.name);
    if a.dry_run {
        return dry_run(&a, &layouts, &m, &prefix);
    }
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
    let workdir = a
        .journal
        .parent()
        .unwrap_or(Path::new("/run/vmtune"))
        .join(format!("bench-matrix-{}", std::process::id()));
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
    };
    let (lock, journal) = start_journal(&a.journal, None)?;
    let mut dom = VirshDomains { virsh, journal };
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
    let report = matrix::summarize(
        layouts,
        a.runs,
        records,
        chosen,
        m.chosen_note.clone(),
        Some(host),
    );
    write_reports(&a, &report)
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

fn dry_run(a: &MatrixArgs, layouts: &[LayoutSpec], m: &Matrix, prefix: &str) -> Result<ExitCode> {
    let mut written = Vec::new();
    for l in layouts {
        let path = a.out.join(format!("{prefix}-{}.xml", l.name));
        std::fs::write(&path, &l.domain_xml)
            .with_context(|| format!("writing {}", path.display()))?;
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
            "order": order,
            "written": written,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print!(
        "{}",
        matrix::layouts_text(layouts, m.chosen_kind.map(|k| k.name()), &m.chosen_note)
    );
    println!("order: {}", order.join(", "));
    for p in &written {
        println!("wrote {}", p.display());
    }
    println!("dry run: nothing defined");
    Ok(ExitCode::SUCCESS)
}

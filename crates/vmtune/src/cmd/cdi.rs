//! `vmtune cdi`: a CDI spec for the host's VFIO devices, written atomically where container
//! runtimes look for it (or printed).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use cdi::{CdiError, Generated, Mode};
use serde_json::json;
use topo::DeviceKind;

use super::common::HostArgs;

/// `vmtune cdi --help`.
pub const LONG_ABOUT: &str =
    "Write a CDI (Container Device Interface) spec for the VFIO-bound devices of this host.

Each device that vfio-pci (or a vfio-pci variant driver) owns gets the nodes a VMM opens:
/dev/vfio/vfio and /dev/vfio/GROUP (legacy), or with --iommufd /dev/iommu and its own
/dev/vfio/devices/vfioN (Linux 6.6+), with their major:minor from sysfs. It is listed under
its index in BDF order (0, 1, ...), its BDF (0000:18:00.0) and, with --iommufd, its cdev
name (vfio3), e.g. `vmtune.io/vfio=0000:18:00.0`. A device whose IOMMU group also holds a
function on another driver (the group is not viable), a no-IOMMU group, or (with
--iommufd) no cdev is left out with the reason. The spec gets the lowest cdiVersion its
contents need, so older runtimes read it, and is checked against the CDI rules before it is
written.

Output: the live host's spec goes to /var/run/cdi/VENDOR-CLASS.json (written to a
temporary file and renamed); a --topology host's spec (another machine, or the built-in
example) to stdout. --output FILE, --output DIR or --output - choose. After writing a file,
a report (or with --json, the report as JSON) goes to stdout.

Exit status 2, nothing written: no usable VFIO device (a CDI spec must list one;
--allow-empty instead removes an old spec of this kind and exits 0), a --device that
cannot go in, or with --strict any device left out.

Examples:
  vmtune cdi                                   # /var/run/cdi/vmtune.io-vfio.json
  vmtune cdi --iommufd --class gpu --kind nvidia.com/pgpu   # in place of NVIDIA's sandbox plugin's
  vmtune cdi --topology builtin --iommufd      # the example host's spec on stdout
  vmtune cdi --topology node7.tar.gz -o node7.json --json   # another node's, with a JSON report

More: docs/cdi.md.";

/// The arguments of `vmtune cdi` (the help text is [`LONG_ABOUT`]).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub host: HostArgs,
    /// Use IOMMUFD: /dev/iommu and each device's /dev/vfio/devices/vfioN instead of
    /// /dev/vfio/vfio and the IOMMU group's /dev/vfio/GROUP.
    #[arg(long)]
    pub iommufd: bool,
    /// CDI kind (vendor/class). The kind must match the resource name a device plugin
    /// advertises (e.g. nvidia.com/pgpu) when the runtime resolves devices from it.
    #[arg(long, value_name = "VENDOR/CLASS", default_value = cdi::DEFAULT_KIND)]
    pub kind: String,
    /// Only this device (BDF: 18:00.0 or 0000:18:00.0); repeat for several. Each must be
    /// usable, or nothing is written.
    #[arg(long = "device", value_name = "BDF")]
    pub devices: Vec<String>,
    /// Only VFIO devices of this kind: gpu, nic, storage, accelerator, bridge (NVSwitches
    /// are PCI "other bridge" devices), other; repeat for several. Default: every kind.
    #[arg(
        long = "class",
        value_enum,
        value_name = "KIND",
        conflicts_with = "devices"
    )]
    pub classes: Vec<ClassArg>,
    /// Add per-device annotations (vmtune.io/bdf, pci-id, iommu-group, vfio-cdev,
    /// numa-node); they need cdiVersion 0.6.0.
    #[arg(long)]
    pub annotate: bool,
    /// Write this cdiVersion instead of the lowest the spec needs (e.g. 1.1.0).
    #[arg(long, value_name = "X.Y.Z")]
    pub cdi_version: Option<String>,
    /// Fail (exit 2, nothing written) when any VFIO device is left out.
    #[arg(long)]
    pub strict: bool,
    /// With no usable VFIO device: remove this kind's old spec file and exit 0 (a DaemonSet
    /// on a node whose GPUs are not, or no longer, on vfio-pci) instead of failing.
    #[arg(long)]
    pub allow_empty: bool,
    /// Where to write: a file (in a directory that exists), a directory (gets
    /// VENDOR-CLASS.json; created when written with a trailing /), or - for stdout.
    /// Default: /var/run/cdi/VENDOR-CLASS.json for the live host, stdout with --topology.
    #[arg(long, short = 'o', value_name = "FILE|DIR|-")]
    pub output: Option<PathBuf>,
    /// After writing a file, print the report as JSON (path, kind, cdi_version, mode,
    /// devices, refused, not_vfio, notes). The spec itself is JSON wherever it goes.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ClassArg {
    Gpu,
    Nic,
    Storage,
    Accelerator,
    Bridge,
    Other,
}

impl From<ClassArg> for DeviceKind {
    fn from(c: ClassArg) -> DeviceKind {
        match c {
            ClassArg::Gpu => DeviceKind::Gpu,
            ClassArg::Nic => DeviceKind::Nic,
            ClassArg::Storage => DeviceKind::Storage,
            ClassArg::Accelerator => DeviceKind::Accelerator,
            ClassArg::Bridge => DeviceKind::Bridge,
            ClassArg::Other => DeviceKind::Other,
        }
    }
}

fn kind_name(k: DeviceKind) -> &'static str {
    match k {
        DeviceKind::Gpu => "GPU",
        DeviceKind::Nic => "NIC",
        DeviceKind::Storage => "storage",
        DeviceKind::Accelerator => "accelerator",
        DeviceKind::Bridge => "bridge",
        DeviceKind::Other => "other",
    }
}

enum Dest {
    Stdout,
    /// A file, and whether its directory may be created.
    File(PathBuf, cdi::MissingDir),
}

fn destination(args: &Args) -> Result<Dest> {
    match &args.output {
        Some(p) if p.as_os_str() == "-" => Ok(Dest::Stdout),
        // an existing directory, or a path written as one (`/etc/cdi/`), gets VENDOR-CLASS.json;
        // the latter is created when missing
        Some(p) if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') => Ok(Dest::File(
            cdi::default_path(p, &args.kind)?,
            cdi::MissingDir::Create,
        )),
        // a file: its directory must exist (a typo must not leave a new tree behind)
        Some(p) => {
            let dir = cdi::parent_dir(p);
            if !dir.is_dir() {
                bail!(
                    "--output {}: {} (end --output with / to have the directory created)",
                    p.display(),
                    cdi::CdiError::NoDir(dir)
                );
            }
            Ok(Dest::File(p.clone(), cdi::MissingDir::Refuse))
        }
        None if args.host.topology.is_some() => Ok(Dest::Stdout),
        None => Ok(Dest::File(
            cdi::default_path(Path::new(cdi::DEFAULT_DIR), &args.kind)?,
            cdi::MissingDir::Create,
        )),
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    // a bad kind is an argument error: say so before reading the host
    cdi::names::parse_kind(&args.kind).map_err(|e| anyhow::anyhow!("--kind: {e}"))?;
    let dest = destination(&args)?;
    let host = args.host.load()?;
    let mode = if args.iommufd {
        Mode::Iommufd
    } else {
        Mode::Legacy
    };
    let opts = cdi::Options {
        kind: args.kind.clone(),
        mode,
        devices: args.devices.clone(),
        classes: args.classes.iter().map(|&c| c.into()).collect(),
        annotate: args.annotate,
        version: args.cdi_version.clone(),
    };
    let gen = match cdi::generate(&host, &opts) {
        Ok(g) => g,
        Err(CdiError::NoDevices(msg)) if args.allow_empty => {
            return allow_empty(&dest, &msg, args.json);
        }
        Err(e) => return Err(e.into()),
    };
    if args.strict && !gen.refused.is_empty() {
        let list: Vec<String> = gen
            .refused
            .iter()
            .map(|r| format!("{} {}", r.bdf, r.reason))
            .collect();
        bail!("--strict: left out {}; nothing written", list.join("; "));
    }
    for r in &gen.refused {
        eprintln!("vmtune: warning: {} left out: {}", r.bdf, r.reason);
    }
    for r in &gen.not_vfio {
        eprintln!("vmtune: note: {} {}: not in the spec", r.bdf, r.reason);
    }
    for n in &gen.notes {
        eprintln!("vmtune: note: {n}");
    }
    let text = gen.spec.to_json();
    match dest {
        Dest::Stdout => print!("{text}"),
        Dest::File(path, missing) => {
            cdi::write_atomic(&path, text.as_bytes(), missing)
                .with_context(|| "writing the CDI spec".to_string())?;
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report_json(&gen, mode, &path))?
                );
            } else {
                print!("{}", report_text(&gen, mode, &path));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// No usable device and --allow-empty: the node advertises nothing of this kind. A stale
/// spec from an earlier run (devices since unbound) is removed so runtimes stop offering it.
fn allow_empty(dest: &Dest, why: &str, json: bool) -> Result<ExitCode> {
    let why = why.trim_end_matches("; nothing written");
    let removed = match dest {
        // stdout carries specs only: the note goes to stderr, and stdout stays empty
        Dest::Stdout => {
            eprintln!("vmtune: note: {why}; no spec written");
            return Ok(ExitCode::SUCCESS);
        }
        Dest::File(p, _) if p.is_file() => {
            std::fs::remove_file(p).with_context(|| format!("removing {}", p.display()))?;
            Some(p.clone())
        }
        Dest::File(..) => None,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "path": null,
                "removed": removed.as_ref().map(|p| p.display().to_string()),
                "devices": [],
                "reason": why,
            }))?
        );
    } else {
        match &removed {
            Some(p) => println!("{why}; removed the old spec {}", p.display()),
            None => println!("{why}; no spec written"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Legacy => "legacy",
        Mode::Iommufd => "iommufd",
    }
}

fn node_text(n: &cdi::Node) -> String {
    match n.dev {
        Some(d) => format!("{} ({d})", n.path),
        None => format!("{} (numbers from the host)", n.path),
    }
}

/// `vvvv:dddd`; `None` (JSON `null`) unless both ids are known.
fn pci_id(e: &cdi::Entry) -> Option<String> {
    Some(format!("{:04x}:{:04x}", e.vendor_id?, e.device_id?))
}

fn report_text(gen: &Generated, mode: Mode, path: &Path) -> String {
    let mut out = String::new();
    let kind = &gen.spec.kind;
    let how = match mode {
        Mode::Legacy => "legacy VFIO groups (/dev/vfio/vfio + /dev/vfio/GROUP)",
        Mode::Iommufd => "IOMMUFD (/dev/iommu + /dev/vfio/devices/vfioN)",
    };
    let _ = writeln!(
        out,
        "wrote {}: kind {kind}, cdiVersion {} ({}), {how}",
        path.display(),
        gen.spec.cdi_version,
        gen.version_reason
    );
    for e in &gen.entries {
        let nodes: Vec<String> = e.nodes.iter().map(node_text).collect();
        let names: Vec<String> = e.names.iter().map(|n| format!("{kind}={n}")).collect();
        let _ = writeln!(
            out,
            "  {:>2}  {}  {} {}, IOMMU group {}: {}",
            e.index,
            e.bdf,
            pci_id(e).as_deref().unwrap_or("unknown id"),
            kind_name(e.kind),
            e.iommu_group,
            nodes.join(", ")
        );
        let _ = writeln!(out, "      names {}", names.join(", "));
    }
    if let Some(first) = gen.entries.first() {
        if let Some((k, v)) = cdi::request_annotation(kind, &first.index.to_string()) {
            let _ = writeln!(
                out,
                "Ask for a device in a pod's annotations (Kata cold plug without the kubelet Pod Resources API): {k}: \"{v}\""
            );
        }
    }
    if !gen.refused.is_empty() {
        let _ = writeln!(out, "Left out:");
        for r in &gen.refused {
            let _ = writeln!(out, "  {} {}", r.bdf, r.reason);
        }
    }
    out
}

fn report_json(gen: &Generated, mode: Mode, path: &Path) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = gen
        .entries
        .iter()
        .map(|e| {
            json!({
                "index": e.index,
                "bdf": e.bdf,
                "names": e.names,
                "pci_id": pci_id(e),
                "class": e.kind,
                "iommu_group": e.iommu_group,
                "vfio_cdev": e.cdev,
                "driver": e.driver,
                "nodes": e.nodes.iter().map(|n| json!({
                    "path": n.path,
                    "major": n.dev.map(|d| d.major),
                    "minor": n.dev.map(|d| d.minor),
                })).collect::<Vec<_>>(),
                "request_annotation": cdi::request_annotation(&gen.spec.kind, &e.index.to_string())
                    .map(|(k, v)| json!({"key": k, "value": v})),
            })
        })
        .collect();
    let refusals = |list: &[cdi::Refusal]| -> Vec<serde_json::Value> {
        list.iter()
            .map(|r| json!({"bdf": r.bdf, "reason": r.reason}))
            .collect()
    };
    json!({
        "path": path.display().to_string(),
        "kind": gen.spec.kind,
        "cdi_version": gen.spec.cdi_version,
        "mode": mode_name(mode),
        "devices": devices,
        "refused": refusals(&gen.refused),
        "not_vfio": refusals(&gen.not_vfio),
        "notes": gen.notes,
    })
}

//! `vmtune boot`: GPU VM boot time — analyze logs and traces, print the host tracing scripts,
//! estimate boot time by phase, calibrate the memory model with QEMU, generate a test journal,
//! and benchmark the parser against the grep | awk | jq pipeline.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bootprof::estimate::{self, Backend, Constants, Input, PageSize};
use bootprof::{fleet, render, Ingester, Options};
use clap::{Args as ClapArgs, Subcommand};
use serde::Serialize;

use bench::harness::{loadavg, paired, show_load, timed, Spread};

use super::common::{parse_size, print_json};

/// GPU VM boot time: where the minutes of a multi-GPU (Kata) VM boot go, and what would
/// shorten them.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

impl Args {
    /// Whether the command changes host state it must put back (`calibrate` reserves
    /// hugepages and may mount hugetlbfs).
    pub fn changes_host(&self) -> bool {
        matches!(self.cmd, Cmd::Calibrate(_))
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build a boot timeline from logs: containerd journals (`journalctl -u containerd`, any
    /// `-o short*` or `-o json`), the Rust shim's (runtime-rs: `journalctl -t kata`),
    /// kata-agent/guest console text, the guest's dmesg (plain, -r,
    /// -x, -d, or `journalctl -k -o short-monotonic`), bpftrace and ftrace output of `vmtune
    /// boot trace`, `kubectl describe pod`. Formats are detected per line; give as many files
    /// as you have. With --all: every boot of every node in the inputs, side by side.
    Analyze(AnalyzeArgs),
    /// Print the host-side tracing scripts (bpftrace pin-pages and map-ioctl probes, ftrace
    /// recipe), or run one with bpftrace while a VM boots.
    Trace(TraceArgs),
    /// Estimate boot time by phase from a model whose constants are all cited.
    Estimate(EstimateArgs),
    /// Check the estimator against the Kata GPU boot study's three measured boots (4 KiB, hugepages,
    /// hugepages + IOMMUFD): in-sample, and leave-one-out for the one fitted constant.
    Validate(ValidateArgs),
    /// Measure QEMU start-up with preallocated 4 KiB vs 2 MiB pages (TCG) and its page-table
    /// memory (VmPTE); the ratio feeds `estimate --calibration`. Needs root for hugepages.
    Calibrate(CalibrateArgs),
    /// Write a realistic containerd journal for benchmarks: the Kata GPU boot study's boot,
    /// one boot after another, each with its own sandbox ids, shim pids and times, with
    /// noise from other units.
    GenJournal(GenArgs),
    /// Time `analyze`'s parser on one journal against `wc -l` and against the Kata GPU boot
    /// study's `grep | awk | jq` pipeline.
    Bench(BenchArgs),
}

#[derive(ClapArgs, Debug)]
struct AnalyzeArgs {
    /// Input files (any mix of formats); `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Sandbox id (or a unique prefix) to report, `ID@N` for its N-th boot (default: its
    /// latest); default: the boot with most guest console records.
    #[arg(long, value_name = "ID", conflicts_with = "all")]
    sandbox: Option<String>,
    /// Every boot in the inputs (journals of many nodes; the node is the journal's host
    /// field; a trace, dmesg or kubectl file goes with the journal given before it): one
    /// row per boot, percentiles per phase, the slowest boots and the phase that made each
    /// slow, groupings by node, GPU count and page size. With --json: JSON lines.
    #[arg(long)]
    all: bool,
    /// With --all: also write the fleet's metrics (histograms `vmtune_boot_phase_seconds` by
    /// phase, boots by node and state) to FILE in node_exporter's textfile-collector format,
    /// atomically (a temporary file in the same directory, renamed).
    #[arg(long, value_name = "FILE", requires = "all")]
    prometheus: Option<PathBuf>,
    /// With --all: how many of the slowest boots to list (and chart, in HTML).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "all")]
    top: usize,
    /// Year of journald prefixes on lines without `time=` (default: from the inputs'
    /// complete timestamps).
    #[arg(long)]
    year: Option<i64>,
    /// Zone of journald prefixes on lines without `time=`, as a UTC offset (`+08:00`,
    /// `-04:00`, `UTC`); default: inferred from lines that carry both.
    #[arg(long, value_name = "OFFSET")]
    tz: Option<String>,
    /// Machine-readable report (with --all: JSON lines, one object per boot, then summary
    /// objects).
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML page with a Gantt chart of the phases (with --all:
    /// histograms per phase and the slowest boots' charts).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(ClapArgs, Debug)]
struct TraceArgs {
    /// Which script: `pin-pages` (kprobe on vfio_pin_pages_remote), `map-ioctls`
    /// (VFIO_IOMMU_MAP_DMA / IOMMU_IOAS_MAP; works when the function is inlined and for
    /// IOMMUFD), `ftrace` (function_graph recipe), or `all`.
    #[arg(long, default_value = "all")]
    script: String,
    /// Run the bpftrace script (needs bpftrace and root) for this many seconds, writing its
    /// output to stdout; feed that file to `vmtune boot analyze`.
    #[arg(long, value_name = "SECONDS")]
    run: Option<u64>,
    /// Print the scripts as JSON `{name: text}`.
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
struct EstimateArgs {
    /// Guest memory (e.g. 110G).
    #[arg(long, value_parser = parse_size)]
    memory: u64,
    /// Number of passed-through GPUs.
    #[arg(long)]
    gpus: u32,
    /// Largest BAR per GPU (H100: 128G).
    #[arg(long, value_parser = parse_size, default_value = "128G")]
    bar_size: u64,
    /// Host page size backing guest RAM: 4K, 2M or 1G (64K: a 64 KiB-page kernel, extrapolated).
    #[arg(long, default_value = "4K")]
    page_size: String,
    /// VFIO IOMMU backend: type1 (legacy container) or iommufd.
    #[arg(long, default_value = "type1")]
    backend: String,
    /// Preallocate guest RAM (implied by 2M/1G hugepages, as in Kata).
    #[arg(long)]
    prealloc: bool,
    /// QEMU prealloc threads.
    #[arg(long, default_value_t = 1)]
    prealloc_threads: u32,
    /// Host kernel version, e.g. 6.8 or 5.15.0.
    #[arg(long, default_value = "6.8")]
    kernel: String,
    /// Memory the VM boots with (Kata default_memory); the rest is hotplugged. Default: 10G
    /// (Kata GPU boot study) or all of --memory if less.
    #[arg(long, value_parser = parse_size)]
    boot_memory: Option<u64>,
    /// Size of each hotplugged memory region, if RAM is added in many small blocks (checks
    /// VFIO's dma_entry_limit).
    #[arg(long, value_parser = parse_size)]
    memory_block: Option<u64>,
    /// A `vmtune boot calibrate --json` result to take the 4K/2M prealloc ratio from.
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Seconds from pod accepted to guest boot (sandbox, image, QEMU start) on your cluster,
    /// instead of the value fitted on the Kata GPU boot study. Measure it as a boot's `kubectl describe pod`
    /// Start→Started time minus `estimate --sandbox-setup 0` for that boot.
    #[arg(long, value_name = "SECONDS")]
    sandbox_setup: Option<f64>,
    /// Machine-readable output (JSON on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
struct ValidateArgs {
    /// A `vmtune boot calibrate --json` result to take the 4K/2M prealloc ratio from.
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Machine-readable output (JSON on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
struct CalibrateArgs {
    /// Guest memory per QEMU start.
    #[arg(long, value_parser = parse_size, default_value = "2G")]
    memory: u64,
    /// Starts per backend (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// QEMU binary.
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu: String,
    /// Machine-readable output (JSON on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
struct GenArgs {
    /// Target size (e.g. 1G).
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    size: u64,
    /// Noise lines from other units per boot line.
    #[arg(long, default_value_t = 4)]
    noise: u32,
    /// PRNG seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    out: PathBuf,
    /// Machine-readable output (JSON on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
struct BenchArgs {
    /// Journal to parse (e.g. from `vmtune boot gen-journal`).
    file: PathBuf,
    /// Also time `analyze --all` (every boot) against analyzing one sandbox, in the same
    /// run, and skip the shell baselines.
    #[arg(long)]
    all: bool,
    /// Sandbox to extract (default: the generator's first sandbox).
    #[arg(long, default_value = bootprof::synth::gen::TEMPLATE_SANDBOX)]
    sandbox: String,
    /// Rounds: each side runs once per round, in rotated order (median, best and worst are
    /// reported, and the ratio of the runs of each round).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Machine-readable output (JSON on stdout).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.cmd {
        Cmd::Analyze(a) => analyze(a),
        Cmd::Trace(a) => trace(a),
        Cmd::Estimate(a) => estimate_cmd(a),
        Cmd::Validate(a) => validate_cmd(a),
        Cmd::Calibrate(a) => calibrate(a),
        Cmd::GenJournal(a) => gen(a),
        Cmd::Bench(a) => bench(a),
    }
}

/// The inputs, each read once: a file given twice — the same file (same device and inode:
/// the same path again, a link to it) or another file with the same bytes (a copy) — would
/// have its lines counted twice (memory blocks, CDI tries, pin calls). Repeats are dropped,
/// each with a note. Files are compared byte by byte only when their sizes are equal; stdin,
/// pipes and files that cannot be read are kept as given (reading them says what is wrong).
fn distinct_inputs(files: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<String>)> {
    use std::os::unix::fs::MetadataExt;
    let mut kept: Vec<(PathBuf, Option<FileId>)> = Vec::new();
    let mut notes = Vec::new();
    for f in files {
        let id = std::fs::metadata(f)
            .ok()
            .filter(|m| f.as_os_str() != "-" && m.is_file())
            .map(|m| (m.dev(), m.ino(), m.len()));
        let mut dup = None;
        if let Some((dev, ino, len)) = id {
            for (g, gid) in &kept {
                let Some((gdev, gino, glen)) = *gid else {
                    continue;
                };
                if (gdev, gino) == (dev, ino) {
                    dup = Some((g, "is the same file as"));
                    break;
                }
                if glen == len && same_bytes(g, f)? {
                    dup = Some((g, "holds the same bytes as"));
                    break;
                }
            }
        }
        match dup {
            Some((g, how)) => {
                notes.push(format!("{} {how} {}: read once", f.display(), g.display()))
            }
            None => kept.push((f.clone(), id)),
        }
    }
    Ok((kept.into_iter().map(|(f, _)| f).collect(), notes))
}

/// A regular file's device, inode and size.
type FileId = (u64, u64, u64);

/// Whether two files of the same size hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    use std::io::Read;
    let open = |p: &Path| {
        File::open(p)
            .map(|f| BufReader::with_capacity(1 << 20, f))
            .with_context(|| format!("reading {}", p.display()))
    };
    let (mut x, mut y) = (open(a)?, open(b)?);
    let (mut bx, mut by) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = x
            .read(&mut bx)
            .with_context(|| format!("reading {}", a.display()))?;
        if n == 0 {
            // the sizes are equal: b ends here too unless it grew meanwhile
            let m = y
                .read(&mut by[..1])
                .with_context(|| format!("reading {}", b.display()))?;
            return Ok(m == 0);
        }
        let want = bx.get(..n).unwrap_or_default();
        let got = by.get_mut(..n).unwrap_or_default();
        if y.read_exact(got).is_err() || want != &*got {
            return Ok(false);
        }
    }
}

fn read_inputs(files: &[PathBuf], opts: Options) -> Result<bootprof::Ingest> {
    let mut ing = Ingester::new(opts);
    for f in files {
        let name = f.display().to_string();
        if name == "-" {
            // streamed: memory stays bounded by the buffer and the longest line
            let stdin = BufReader::with_capacity(1 << 20, std::io::stdin().lock());
            let text = bootprof::parse::ingest::text_of(stdin).context("reading stdin")?;
            ing.read("<stdin>", text).context("reading stdin")?;
        } else {
            // regular files are memory-mapped and scanned on all CPUs; pipes are streamed
            ing.read_path(&name, f)
                .with_context(|| format!("reading {name}"))?;
        }
    }
    Ok(ing.finish())
}

fn clock_options(a: &AnalyzeArgs) -> Result<bootprof::analyze::clocks::ClockOptions> {
    let tz = match &a.tz {
        Some(s) => Some(bootprof::parse::time::parse_utc_offset(s).with_context(|| {
            format!("invalid --tz {s:?}: give a UTC offset such as +08:00, -04:00 or UTC")
        })?),
        None => None,
    };
    if let Some(y) = a.year {
        if !bootprof::parse::time::YEARS.contains(&y) {
            bail!("--year {y} is outside 1970..=2200");
        }
    }
    Ok(bootprof::analyze::clocks::ClockOptions {
        year: a.year,
        tz,
        trace_shift_h: None,
    })
}

/// One boot's report: `sandbox`'s, or (without it) the busiest boot's.
fn one_boot(
    files: &[PathBuf],
    sandbox: Option<&str>,
    clocks: bootprof::analyze::clocks::ClockOptions,
) -> Result<bootprof::Report> {
    let (files, repeats) = distinct_inputs(files)?;
    let files = files.as_slice();
    // Without --sandbox, a byte-level census of the files picks the sandbox with the most
    // guest console lines, so that only its lines are parsed (stdin cannot be read twice).
    let census = if sandbox.is_none() && files.iter().all(|f| f.as_os_str() != "-") {
        let mut c = bootprof::parse::ingest::Census::default();
        for f in files {
            c.add_path(f)
                .with_context(|| format!("reading {}", f.display()))?;
        }
        c.busiest().is_some().then_some(c)
    } else {
        None
    };
    let filter = sandbox.map(str::to_string).or_else(|| {
        census
            .as_ref()
            .and_then(|c| c.busiest())
            .map(str::to_string)
    });
    let ing = read_inputs(files, Options { sandbox: filter })?;
    let mut r = bootprof::analyze::build_with(
        &ing,
        &bootprof::analyze::AnalyzeOptions {
            sandbox: sandbox.map(str::to_string),
            clocks,
        },
    )?;
    if let Some(c) = &census {
        bootprof::analyze::other_sandboxes_from(&mut r, c);
    }
    r.clocks.notes.extend(repeats);
    Ok(r)
}

/// Every boot of the inputs, read in one pass.
fn all_boots(files: &[PathBuf], opts: &fleet::FleetOptions) -> Result<fleet::Fleet> {
    let (files, repeats) = distinct_inputs(files)?;
    let ing = read_inputs(&files, Options::default())?;
    if ing.events.is_empty() {
        bail!(
            "no boot events found ({} lines read, {} bad{})",
            ing.stats.lines,
            ing.stats.bad.total(),
            ing.stats.why_no_events()
        );
    }
    let mut f = fleet::analyze(&ing, opts);
    f.notes.extend(repeats);
    Ok(f)
}

/// Replace `path` with `text` atomically, as node_exporter's textfile collector needs: a
/// temporary file in the same directory (a name not ending in `.prom`, so the collector
/// never reads it half-written), synced, then renamed over `path`.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // the rename is durable once the directory is synced (best effort)
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("writing {}: {e}", path.display())
    })
}

fn analyze_all(a: AnalyzeArgs) -> Result<ExitCode> {
    let opts = fleet::FleetOptions {
        clocks: clock_options(&a)?,
        threads: None,
        top: a.top,
    };
    let f = all_boots(&a.files, &opts)?;
    if let Some(h) = &a.html {
        std::fs::write(h, render::fleet::html(&f))
            .with_context(|| format!("writing {}", h.display()))?;
    }
    if let Some(p) = &a.prometheus {
        write_atomic(p, &render::fleet::prometheus(&f))?;
        if p.extension().is_none_or(|e| e != "prom") {
            eprintln!(
                "note: node_exporter's textfile collector reads only files named *.prom; {} is not",
                p.display()
            );
        }
    }
    if f.rows.is_empty() {
        eprintln!("note: no boot could be told from these inputs (no phase, no failure); see the input summary");
    }
    if a.json {
        print!("{}", render::fleet::json_lines(&f)?);
    } else {
        print!("{}", render::fleet::text(&f));
        if let Some(h) = &a.html {
            println!("HTML written to {}", h.display());
        }
        if let Some(p) = &a.prometheus {
            println!("Metrics written to {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn analyze(a: AnalyzeArgs) -> Result<ExitCode> {
    if a.all {
        return analyze_all(a);
    }
    let r = one_boot(&a.files, a.sandbox.as_deref(), clock_options(&a)?)?;
    if let Some(h) = &a.html {
        std::fs::write(h, render::boot::html(&r))
            .with_context(|| format!("writing {}", h.display()))?;
    }
    if r.phases.is_empty() && r.state.failure.is_none() && r.total_from != "kubectl" {
        eprintln!("note: no boot phase could be built from these inputs; see the notes and the input summary");
    }
    if a.json {
        print_json(&r)?;
    } else {
        print!("{}", render::boot::text(&r));
        if let Some(h) = &a.html {
            println!("HTML written to {}", h.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file())
}

fn trace(a: TraceArgs) -> Result<ExitCode> {
    let all = bootprof::trace::scripts();
    let pick: Vec<(&str, &str)> = match a.script.as_str() {
        "all" => all.to_vec(),
        "pin-pages" => vec![all[0]],
        "map-ioctls" => vec![all[1]],
        "ftrace" => vec![all[2]],
        s => bail!("unknown script {s:?} (pin-pages, map-ioctls, ftrace, all)"),
    };
    if let Some(secs) = a.run {
        let [(name, text)] = pick.as_slice() else {
            bail!("--run needs one bpftrace script: --script pin-pages or --script map-ioctls");
        };
        if !name.ends_with(".bt") {
            bail!("--run runs bpftrace scripts; run the ftrace recipe as a shell script");
        }
        let Some(bt) = which("bpftrace") else {
            bail!("bpftrace is not installed; print the script with `vmtune boot trace --script {}` and run it elsewhere", a.script);
        };
        let status = Command::new("timeout")
            .args(["--signal=INT", &secs.to_string()])
            .arg(bt)
            .args(["-e", text])
            .status()
            .context("running bpftrace")?;
        // timeout exits 124 when it stopped bpftrace, which is the normal end
        return Ok(if status.success() || status.code() == Some(124) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if a.json {
        let m: serde_json::Map<String, serde_json::Value> = pick
            .iter()
            .map(|(n, t)| (n.to_string(), serde_json::Value::String(t.to_string())))
            .collect();
        print_json(&m)?;
    } else {
        for (n, t) in pick {
            println!("# ===== {n} =====");
            println!("{t}");
        }
        if which("bpftrace").is_none() {
            eprintln!("note: bpftrace is not installed here; run the .bt scripts with `bpftrace FILE > out.txt` on the host");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_kernel(s: &str) -> Result<(u32, u32)> {
    let mut it = s.trim().trim_start_matches('v').split(['.', '-']);
    let major = it.next().and_then(|v| v.parse().ok());
    let minor = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    match major {
        Some(m) => Ok((m, minor)),
        None => bail!("invalid --kernel {s:?} (example: 6.8)"),
    }
}

fn estimate_cmd(a: EstimateArgs) -> Result<ExitCode> {
    let page_size = PageSize::parse(&a.page_size)
        .with_context(|| format!("invalid --page-size {:?} (4K, 2M, 1G)", a.page_size))?;
    let backend = match a.backend.to_ascii_lowercase().as_str() {
        "type1" | "vfio" | "legacy" => Backend::Type1,
        "iommufd" => Backend::Iommufd,
        b => bail!("invalid --backend {b:?} (type1, iommufd)"),
    };
    let mut c = constants(a.calibration.as_deref())?;
    if let Some(s) = a.sandbox_setup {
        if !s.is_finite() || !(0.0..=3600.0).contains(&s) {
            bail!("--sandbox-setup {s} must be between 0 and 3600 seconds");
        }
        c.sandbox_setup_s = s;
    }
    let inp = Input {
        memory: a.memory,
        boot_memory: a.boot_memory.unwrap_or(10 << 30).min(a.memory),
        gpus: a.gpus,
        bar_size: a.bar_size,
        page_size,
        backend,
        prealloc: a.prealloc,
        prealloc_threads: a.prealloc_threads,
        kernel: parse_kernel(&a.kernel)?,
        memory_block: a.memory_block,
    };
    inp.check()?;
    let e = estimate::estimate(&inp, &c);
    if a.json {
        print_json(&e)?;
    } else {
        print!("{}", render::boot::estimate_text(&e));
    }
    Ok(ExitCode::SUCCESS)
}

/// The model's constants, with the 4K/2M prealloc ratio from a calibration file if given.
fn constants(calibration: Option<&Path>) -> Result<Constants> {
    let mut c = Constants::default();
    if let Some(f) = calibration {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", f.display()))?;
        let r = v
            .get("prealloc_ratio_4k_2m")
            .and_then(serde_json::Value::as_f64)
            .filter(|r| r.is_finite() && *r > 0.0)
            .with_context(|| format!("{}: no prealloc_ratio_4k_2m", f.display()))?;
        c.prealloc_ratio_4k_2m = r;
    }
    Ok(c)
}

#[derive(Serialize)]
struct ValidateOut {
    sandbox_setup_s: f64,
    fitted_on_all_s: f64,
    checks: Vec<estimate::Check>,
    max_error_pct: f64,
    max_held_out_error_pct: f64,
    /// Published figures that vary GPU count, BAR size and RAM size.
    published: Vec<estimate::PublishedCheck>,
}

fn validate_cmd(a: ValidateArgs) -> Result<ExitCode> {
    let c = constants(a.calibration.as_deref())?;
    let boots = estimate::seed_boots();
    let checks = estimate::validate(&boots, &c);
    let o = ValidateOut {
        sandbox_setup_s: c.sandbox_setup_s,
        fitted_on_all_s: estimate::fit_sandbox_setup(&boots, &c),
        max_error_pct: checks.iter().map(|k| k.error_pct.abs()).fold(0.0, f64::max),
        max_held_out_error_pct: checks
            .iter()
            .map(|k| k.held_out_error_pct.abs())
            .fold(0.0, f64::max),
        checks,
        published: estimate::published_checks(&c),
    };
    if a.json {
        print_json(&o)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Estimator vs the Kata GPU boot study's measured boots (7×H100, 110 GiB, kernel 6.8). One constant is fitted:
sandbox_setup_s = {:.1} s (pod accepted → guest boot, not in the Kata GPU boot study's logs).
",
        o.sandbox_setup_s
    );
    println!(
        "{:<26} {:>9} {:>10} {:>7}   {:>14} {:>10} {:>7}",
        "BOOT", "MEASURED", "PREDICTED", "ERROR", "HELD-OUT SETUP", "PREDICTED", "ERROR"
    );
    for k in &o.checks {
        println!(
            "{:<26} {:>8.0}s {:>9.1}s {:>+6.1}%   {:>13.1}s {:>9.1}s {:>+6.1}%",
            k.label,
            k.measured_s,
            k.predicted_s,
            k.error_pct,
            k.held_out_sandbox_setup_s,
            k.held_out_predicted_s,
            k.held_out_error_pct
        );
    }
    println!(
        "
Largest error {:.1}% in-sample, {:.1}% held out (sandbox_setup_s fitted on the other two boots).",
        o.max_error_pct, o.max_held_out_error_pct
    );
    for k in &o.checks {
        println!("  {}: {}", k.label, k.source);
    }
    println!(
        "
Against other published figures, varying GPU count, BAR size and RAM size (\"fitted\": the
constant compared was derived from that figure, so agreement is by construction):
"
    );
    println!(
        "{:<46} {:<9} {:>10} {:>10} {:>7}",
        "POINT", "VARIES", "MEASURED", "PREDICTED", "ERROR"
    );
    for p in &o.published {
        println!(
            "{:<46} {:<9} {:>9.2}s {:>9.2}s {:>+6.1}%  {}",
            p.label,
            p.varies,
            p.measured_s,
            p.predicted_s,
            p.error_pct,
            if p.in_sample { "fitted" } else { "" }
        );
    }
    for p in &o.published {
        println!("  {}: \"{}\" — {}", p.label, p.published, p.source);
    }
    Ok(ExitCode::SUCCESS)
}

fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    if a.memory < (64 << 20) || a.memory > (64 << 30) {
        bail!("--memory must be between 64M and 64G");
    }
    let c = bootprof::estimate::calibrate::calibrate(&a.qemu, a.memory, a.runs)?;
    if a.json {
        print_json(&c)?;
    } else {
        println!(
            "QEMU prealloc calibration, {} MiB guest, {} runs each (median):",
            a.memory >> 20,
            a.runs
        );
        println!(
            "{:<14} {:>10} {:>10} {:>10} {:>12}",
            "BACKEND", "START s", "VmPTE kB", "VmRSS kB", "Hugetlb kB"
        );
        for r in &c.runs {
            println!(
                "{:<14} {:>10.3} {:>10} {:>10} {:>12}",
                r.backend, r.startup_s, r.vm_pte_kb, r.vm_rss_kb, r.hugetlb_kb
            );
        }
        if let Some(r) = c.prealloc_ratio_4k_2m {
            println!("prealloc time ratio 4K/2M (baseline subtracted): {r:.2}x");
        }
        if let Some(r) = c.pte_ratio_4k_2m {
            println!("page-table memory ratio 4K/2M: {r:.1}x");
        }
        for n in &c.notes {
            println!("note: {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct GenOut {
    path: String,
    bytes: u64,
    boots: u64,
    sandbox: &'static str,
}

fn gen(a: GenArgs) -> Result<ExitCode> {
    // the journal holds whole boots, at least one: 0 bytes would hold none, and no sandbox
    // to analyze (checked before the file is created)
    if a.size == 0 {
        bail!("--size 0 writes no boot: give the journal's size, e.g. --size 64M (it holds whole boots of ~1.2 MB each, at least one)");
    }
    let f = File::create(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let (bytes, boots) = bootprof::synth::gen::generate(a.size, a.noise, a.seed, &mut w)?;
    w.flush()?;
    let o = GenOut {
        path: a.out.display().to_string(),
        bytes,
        boots,
        sandbox: bootprof::synth::gen::TEMPLATE_SANDBOX,
    };
    if a.json {
        print_json(&o)?;
    } else {
        println!(
            "wrote {} ({bytes} bytes, {boots} boot{}, each with its own sandbox ids and times); `vmtune boot analyze {}` reports the first, sandbox {}",
            o.path,
            if boots == 1 { "" } else { "s" },
            o.path,
            o.sandbox
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct BenchOut {
    file: String,
    bytes: u64,
    runs: usize,
    /// Best wall seconds of each side (the runs of the three sides are interleaved).
    ours_s: f64,
    pipeline_s: f64,
    /// pipeline_s / ours_s: how many times faster the parser is (best runs).
    speedup: f64,
    /// `wc -l FILE`, best of the runs: reading and counting the lines, nothing more.
    wc_s: f64,
    /// wc_s / ours_s: the parser's speed as a multiple of `wc -l`'s (≥ 1: as fast or faster).
    vs_wc: f64,
    ours_mb_s: f64,
    pipeline_mb_s: f64,
    wc_mb_s: f64,
    /// Median and spread of each side's wall seconds over the runs.
    ours: Spread,
    wc: Spread,
    pipeline: Spread,
    /// wc ÷ parser of the runs taken in the same round: median and spread (the figure that
    /// the machine's load moves least).
    vs_wc_paired: Spread,
    speedup_paired: Spread,
    /// Process CPU seconds (all threads) of the parser's runs.
    ours_cpu: Spread,
    /// Load averages (1, 5, 15 min) before and after the runs.
    load_before: Option<[f64; 3]>,
    load_after: Option<[f64; 3]>,
    events: u64,
    pipeline_lines: u64,
    wc_lines: u64,
}

/// Wall time of one run of `script` (through `sh -c`, `$1` = `file`), and its stdout.
fn time_sh(script: &str, file: &Path) -> Result<(f64, String)> {
    let t = Instant::now();
    let o = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("running {script}"))?;
    let wall = t.elapsed().as_secs_f64();
    Ok((wall, String::from_utf8_lossy(&o.stdout).into_owned()))
}

#[derive(Serialize)]
struct BenchAllOut {
    file: String,
    bytes: u64,
    runs: usize,
    /// `analyze --all`: every line read, every boot analyzed (best of the runs, wall).
    all_s: f64,
    boots: usize,
    nodes: usize,
    /// `analyze --sandbox ID`: one sandbox's lines parsed, its boot analyzed.
    one_s: f64,
    /// `analyze` without --sandbox: the census picks the busiest sandbox, its boot analyzed.
    default_s: f64,
    /// all_s / one_s: what every boot costs, in analyses of one sandbox (best runs).
    all_vs_one: f64,
    /// all_s / default_s.
    all_vs_default: f64,
    /// Process CPU seconds (all threads) of the best run of each.
    all_cpu_s: f64,
    one_cpu_s: f64,
    default_cpu_s: f64,
    /// all_cpu_s / one_cpu_s.
    all_vs_one_cpu: f64,
    /// Median and spread of each side's wall seconds over the runs.
    all: Spread,
    one: Spread,
    default: Spread,
    /// all ÷ one of the runs taken in the same round: median and spread.
    all_vs_one_paired: Spread,
    all_vs_default_paired: Spread,
    /// The same for CPU seconds.
    all_vs_one_cpu_paired: Spread,
    /// Load averages (1, 5, 15 min) before and after the runs.
    load_before: Option<[f64; 3]>,
    load_after: Option<[f64; 3]>,
}

/// `analyze --all` against one sandbox's analysis, the runs interleaved (and their order
/// rotated from round to round) so that the load of the machine falls on all sides alike.
fn bench_all(a: BenchArgs) -> Result<ExitCode> {
    let bytes = std::fs::metadata(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?
        .len();
    let files = std::slice::from_ref(&a.file);
    let opts = fleet::FleetOptions::default();
    let clocks = bootprof::analyze::clocks::ClockOptions::default();
    let runs = a.runs.max(1);
    // (wall, cpu) per run, per side: one sandbox, the busiest, every boot
    let mut w: [Vec<f64>; 3] = Default::default();
    let mut c: [Vec<f64>; 3] = Default::default();
    let (mut boots, mut nodes) = (0, 0);
    let load_before = loadavg();
    for r in 0..runs {
        for k in 0..3 {
            let side = (k + r) % 3;
            let (wall, cpu) = match side {
                0 => {
                    let (wall, cpu, rep) = timed(|| one_boot(files, Some(&a.sandbox), clocks))?;
                    std::hint::black_box(rep);
                    (wall, cpu)
                }
                1 => {
                    let (wall, cpu, rep) = timed(|| one_boot(files, None, clocks))?;
                    std::hint::black_box(rep);
                    (wall, cpu)
                }
                _ => {
                    let (wall, cpu, f) = timed(|| all_boots(files, &opts))?;
                    (boots, nodes) = (f.rows.len(), f.nodes.len());
                    drop(f);
                    (wall, cpu)
                }
            };
            if let (Some(wv), Some(cv)) = (w.get_mut(side), c.get_mut(side)) {
                wv.push(wall);
                cv.push(cpu);
            }
        }
    }
    let load_after = loadavg();
    let [one_w, default_w, all_w] = &w;
    let [one_c, default_c, all_c] = &c;
    let (one, default, all) = (Spread::of(one_w), Spread::of(default_w), Spread::of(all_w));
    // the CPU of the best wall run of each side
    let cpu_of_best = |wv: &[f64], cv: &[f64]| {
        wv.iter()
            .zip(cv)
            .min_by(|x, y| x.0.total_cmp(y.0))
            .map_or(0.0, |(_, c)| *c)
    };
    let (one_cpu, default_cpu, all_cpu) = (
        cpu_of_best(one_w, one_c),
        cpu_of_best(default_w, default_c),
        cpu_of_best(all_w, all_c),
    );
    let o = BenchAllOut {
        file: a.file.display().to_string(),
        bytes,
        runs,
        all_s: all.best,
        boots,
        nodes,
        one_s: one.best,
        default_s: default.best,
        all_vs_one: all.best / one.best,
        all_vs_default: all.best / default.best,
        all_cpu_s: all_cpu,
        one_cpu_s: one_cpu,
        default_cpu_s: default_cpu,
        all_vs_one_cpu: all_cpu / one_cpu.max(1e-9),
        all,
        one,
        default,
        all_vs_one_paired: Spread::of(&paired(all_w, one_w)),
        all_vs_default_paired: Spread::of(&paired(all_w, default_w)),
        all_vs_one_cpu_paired: Spread::of(&paired(all_c, one_c)),
        load_before,
        load_after,
    };
    if a.json {
        print_json(&o)?;
    } else {
        let mb = bytes as f64 / 1e6;
        println!(
            "{}: {:.0} MB, {} rounds (each side once per round, order rotated), load average {} before, {} after
  wall s, median [best–worst]; CPU s of the best run
  analyze --all ({} boots, {} node{}): {} ({:.0} MB/s at the median), {:.2} s CPU
  analyze --sandbox ID (one boot):   {}, {:.2} s CPU
  analyze (the busiest boot):        {}, {:.2} s CPU
  ratio, same round: every boot costs {}x one sandbox's analysis (CPU {}x), {}x the busiest boot's",
            o.file,
            mb,
            o.runs,
            show_load(o.load_before),
            show_load(o.load_after),
            o.boots,
            o.nodes,
            if o.nodes == 1 { "" } else { "s" },
            o.all.show(3),
            mb / o.all.median,
            o.all_cpu_s,
            o.one.show(3),
            o.one_cpu_s,
            o.default.show(3),
            o.default_cpu_s,
            o.all_vs_one_paired.show(2),
            o.all_vs_one_cpu_paired.show(2),
            o.all_vs_default_paired.show(2),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn bench(a: BenchArgs) -> Result<ExitCode> {
    if a.all {
        return bench_all(a);
    }
    let bytes = std::fs::metadata(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?
        .len();
    if which("jq").is_none() {
        bail!("jq is not installed (apt-get install jq); the baseline is the Kata GPU boot study's grep | awk | jq pipeline");
    }
    let runs = a.runs.max(1);
    let pipeline = format!(
        "grep 'sandbox={}' \"$1\" | awk -F'vmconsole=' '{{ print $2 }}' | jq -r . 2>/dev/null | wc -l",
        a.sandbox
    );
    // wall seconds per run, per side: the parser, wc -l, the pipeline; parser CPU
    let (mut ours, mut wc, mut pipe, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut events, mut lines, mut wc_lines) = (0, 0, 0);
    let load_before = loadavg();
    for r in 0..runs {
        for k in 0..3 {
            match (k + r) % 3 {
                0 => {
                    let (wall, c, (ev, rep)) = timed(|| {
                        let ing = read_inputs(
                            std::slice::from_ref(&a.file),
                            Options {
                                sandbox: Some(a.sandbox.clone()),
                            },
                        )?;
                        let rep = bootprof::analyze::build(&ing, Some(&a.sandbox))?;
                        anyhow::Ok((ing.stats.events, rep))
                    })?;
                    std::hint::black_box(rep);
                    events = ev;
                    ours.push(wall);
                    cpu.push(c);
                }
                1 => {
                    let (wall, out) = time_sh("wc -l < \"$1\"", &a.file)?;
                    wc_lines = out.trim().parse().unwrap_or(0);
                    wc.push(wall);
                }
                _ => {
                    let (wall, out) = time_sh(&pipeline, &a.file)?;
                    lines = out.trim().parse().unwrap_or(0);
                    pipe.push(wall);
                }
            }
        }
    }
    let load_after = loadavg();
    let (o_s, w_s, p_s) = (Spread::of(&ours), Spread::of(&wc), Spread::of(&pipe));
    let mb = bytes as f64 / 1e6;
    let o = BenchOut {
        file: a.file.display().to_string(),
        bytes,
        runs,
        ours_s: o_s.best,
        pipeline_s: p_s.best,
        speedup: p_s.best / o_s.best,
        wc_s: w_s.best,
        vs_wc: w_s.best / o_s.best,
        ours_mb_s: mb / o_s.best,
        pipeline_mb_s: mb / p_s.best,
        wc_mb_s: mb / w_s.best,
        ours: o_s,
        wc: w_s,
        pipeline: p_s,
        vs_wc_paired: Spread::of(&paired(&wc, &ours)),
        speedup_paired: Spread::of(&paired(&pipe, &ours)),
        ours_cpu: Spread::of(&cpu),
        load_before,
        load_after,
        events,
        pipeline_lines: lines,
        wc_lines,
    };
    if a.json {
        print_json(&o)?;
    } else {
        println!(
            "{}: {:.0} MB, {} lines, {} rounds (each side once per round, order rotated), load average {} before, {} after
  wall s, median [best–worst]
  vmtune boot analyze parser: {} ({:.0} MB/s at the median, {} events, timeline built), CPU {} s
  wc -l:                      {} ({:.0} MB/s)
  grep | awk | jq pipeline:   {} ({:.0} MB/s, {} lines, no timeline)
  ratio, same round: the parser is {}x the speed of wc -l, {}x the pipeline's",
            o.file,
            mb,
            o.wc_lines,
            o.runs,
            show_load(o.load_before),
            show_load(o.load_after),
            o.ours.show(3),
            mb / o.ours.median,
            o.events,
            o.ours_cpu.show(3),
            o.wc.show(3),
            mb / o.wc.median,
            o.pipeline.show(3),
            mb / o.pipeline.median,
            o.pipeline_lines,
            o.vs_wc_paired.show(2),
            o.speedup_paired.show(2),
        );
    }
    Ok(ExitCode::SUCCESS)
}

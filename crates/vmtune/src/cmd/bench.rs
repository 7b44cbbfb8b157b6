//! `vmtune bench`: measure what tuning buys — timer read cost per clocksource, STREAM memory
//! bandwidth pinned or not, timer wakeup latency, frame-time percentile lows — and compare
//! runs of different configurations. Thin shell over the `bench` crate.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bench::{frametimes, latency, membw, report, timer, BenchError, FrameLogResult, RunFile};
use topo::CpuSet;

use super::common::{parse_size, print_json};

/// Micro-benchmarks: timer read cost, memory bandwidth, wakeup latency, frame-time lows, and
/// side-by-side comparison of runs under different configurations.
///
/// Each benchmark prints a table (or JSON with --json) and can save its result with
/// --save FILE; `compare` and `report` read those files. Every result holds N repeats of
/// every metric, so `compare` can tell a change from run-to-run noise. The same commands
/// work inside a guest. Ctrl-C stops a run cleanly (exit 130) and restores anything it
/// changed (the clocksource).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

impl Args {
    /// Whether the command changes host state it must put back (`timer` and `suite` switch
    /// the clocksource).
    pub fn changes_host(&self) -> bool {
        matches!(self.cmd, Sub::Timer(_) | Sub::Suite(_) | Sub::Matrix(_))
    }
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Cost of reading the time under each clocksource (vDSO and syscall), and of rdtsc.
    ///
    /// As root, switches /sys/devices/system/clocksource/clocksource0/current_clocksource to
    /// each available clocksource and always restores the original (also on error, Ctrl-C or
    /// SIGTERM; after a kill -9 the next run restores it). Slow emulated clocksources
    /// (acpi_pm, hpet) are what the Windows 7 timer note measured at 3,605 ns per read vs 12.52 ns for TSC.
    Timer(TimerArgs),
    /// STREAM copy/scale/add/triad bandwidth with threads unpinned or pinned per a CPU list.
    ///
    /// Compare `--cpus` lists (one node's CPUs, CPUs across nodes) against an unpinned run
    /// with the same thread count to see what pinning and NUMA locality buy.
    Membw(MembwArgs),
    /// Wakeup latency of a timer-driven thread per CPU (cyclictest-like), optional load.
    Latency(LatencyArgs),
    /// The host agent's reaction time: a thread waiting behind a busy CPU, raised to
    /// SCHED_FIFO by an agent woken through an eventfd, against the same wait without it.
    ///
    /// The stand-in for an interrupt accepted for a preempted vCPU (`vmtune sim`'s
    /// `[host] boost_reaction_p50_us`/`p99_us` are this figure). Needs root and two CPUs;
    /// changes nothing outside its own threads.
    Boost(BoostArgs),
    /// Frame-time captures → average FPS and 1/2/5% lows, per application.
    ///
    /// Reads PresentMon (1.x, 2.0-2.3, 2.4+), OCAT, CapFrameX (CSV and JSON), FrameView,
    /// MangoHud and MSI Afterburner logs, or one ms value per line. Captures holding several
    /// processes and swap chains are split: the application with the most frames is reported
    /// and the others listed (--app, --all-apps). Logs whose rows are samples taken every
    /// interval (MangoHud with log_interval, Afterburner) are reported as samples, with the
    /// interval and duration from their time column and approximate (~) lows. Several files
    /// are repeats of one configuration.
    Frametimes(FrametimesArgs),
    /// Runs saved with --save side by side: median [min–max], change vs the first run, and
    /// whether it is beyond run-to-run noise.
    Compare(CompareArgs),
    /// Run timer + membw + latency and save CONFIG.json with the host model and plan.
    ///
    /// Run it once per configuration (e.g. the r/VFIO pinning benchmark's matrix: default, pinned, pinned+numa,
    /// pinned+numa+smt), inside the guest or on the host, then `bench compare *.json` and
    /// `bench report *.json -o report.html`.
    Suite(SuiteArgs),
    /// One self-contained HTML report (inline SVG charts) from saved runs.
    Report(ReportArgs),
    /// The r/VFIO pinning benchmark on this host: one libvirt domain in four layouts —
    /// default, pin, pin-numa, pin-numa-smt — each booted and measured inside, compared.
    ///
    /// The planner builds the layouts from the domain's vCPUs, memory and devices
    /// (`plan::layouts`: pin = one vCPU per physical core on the fewest nodes; pin-numa = one
    /// per core spread over host nodes, a guest NUMA cell per node; pin-numa-smt = the same
    /// vCPUs on whole cores, both threads, the guest told threads=2). Each run defines a
    /// scratch copy of the domain (vmtune-matrix-NAME-LAYOUT-RUN: no disks, networks or
    /// NVRAM of yours; hostdevs kept) booting vmtune's measuring initramfs, waits for it to
    /// power off, and undefines it. Runs are interleaved (round r starts at layout r). The
    /// answer: per metric, median [min–max] per layout, the change vs the first layout and
    /// whether it is beyond run-to-run noise; the planner's choice marked, and said plainly
    /// where the measurement disagrees with it. Every scratch domain is journaled before it
    /// is defined: after a crash, `vmtune restore --journal /run/vmtune/bench-matrix.journal`
    /// removes what is left. Your domain is never changed.
    Matrix(super::bench_matrix::MatrixArgs),
    /// A results tree you already have — the r/VFIO pinning study's `results/<gpu>/<config>/`,
    /// or `DIR/<config>/` — read into the comparison, JSON and HTML report `matrix` makes.
    ///
    /// Each config directory is a layout (named as the directory; `baseline` or `default`
    /// first, the baseline of every change); each file in it is read by its content: STREAM
    /// (per-node runs told by a `numactl --cpunodebind/--membind` line or a name like
    /// `stream_node0_mem1.txt`), sysbench, nccl-tests, nvbandwidth, bandwidthTest, PyTorch
    /// matmul and host↔device lines, a `size ns # label` latency curve, `name value unit`
    /// lines; `numactl --hardware`, `lscpu` and `/proc/meminfo` give each config's guest view
    /// (CPUs, nodes, hugepages). Figures a file prints several times (five bandwidthTest runs)
    /// count as that config's repeats. Files no reader knows are listed, not fatal; a config
    /// with no benchmark output is a failed run (the reports are written, exit status 2).
    /// Reads only; writes nothing but --out and --html.
    Import(super::bench_import::ImportArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// Print the result as JSON (the same document --save writes); hides progress bars.
    #[arg(long)]
    json: bool,
    /// Save the result (JSON) to this file, for `compare` and `report`.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Configuration label for this run, shown as the column head by `compare` (without it,
    /// `compare` and `report` show the name of the file the run was saved to).
    #[arg(long, value_name = "NAME")]
    config: Option<String>,
    /// The applied plan (`vmtune plan --json` output) to record with the result.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct TimerArgs {
    #[command(flatten)]
    common: Common,
    /// Measure only these clocksources (repeatable; default: all available).
    #[arg(long = "clocksource", value_name = "NAME")]
    clocksources: Vec<String>,
    /// Do not switch clocksources: measure the current one only.
    #[arg(long)]
    no_switch: bool,
    /// Repeats per probe (median and spread are reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Milliseconds each repeat reads the clock for.
    #[arg(long, default_value_t = 50.0, value_name = "MS")]
    ms_per_repeat: f64,
}

#[derive(clap::Args, Debug)]
struct MembwArgs {
    #[command(flatten)]
    common: Common,
    /// Pin one thread per CPU of this list (e.g. `0-7`, `0,2,4,6`); default: unpinned.
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Threads when unpinned (default: the CPUs this process may use).
    #[arg(long)]
    threads: Option<usize>,
    /// Size of each of the three arrays (default: 64M or 4× the host's total L3).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    size: Option<u64>,
    /// Passes of the four kernels; the first is a warm-up and not counted.
    #[arg(long, default_value_t = 6)]
    repeats: usize,
}

#[derive(clap::Args, Debug)]
struct LatencyArgs {
    #[command(flatten)]
    common: Common,
    /// CPUs to measure (one pinned thread each); default: all this process may use.
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Timer interval in microseconds.
    #[arg(long, default_value_t = 1000, value_name = "US")]
    interval_us: u64,
    /// Seconds to run.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    seconds: f64,
    /// Run the measuring threads SCHED_FIFO at this priority (1–99), like cyclictest -p.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    fifo: Option<i32>,
    /// Keep the other CPUs (those not measured) busy with burner threads.
    #[arg(long)]
    load: bool,
    /// Keep these CPUs busy instead (may overlap the measured ones).
    #[arg(long, value_name = "LIST")]
    load_cpus: Option<String>,
    /// Histogram range in µs (1 µs buckets; later wakeups are counted as overflow).
    #[arg(long, default_value_t = 1000)]
    hist_max_us: u32,
    /// Windows the run is cut into for the repeat statistics used by `compare`.
    #[arg(long, default_value_t = 5)]
    windows: usize,
}

#[derive(clap::Args, Debug)]
struct BoostArgs {
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// The CPU the burner and the waiting thread share.
    #[arg(long, default_value_t = 1)]
    busy_cpu: u32,
    /// The agent's CPU.
    #[arg(long, default_value_t = 0)]
    agent_cpu: u32,
    /// Triggers per side (with and without the agent, interleaved).
    #[arg(long, default_value_t = 2000)]
    samples: usize,
    /// Milliseconds between triggers.
    #[arg(long, default_value_t = 2.0)]
    gap_ms: f64,
}

#[derive(clap::Args, Debug)]
struct FrametimesArgs {
    #[command(flatten)]
    common: Common,
    /// Frame-time logs; several files are repeats of the same configuration.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Column of frame times in ms to read (default: MsBetweenPresents, FrameTime, ...,
    /// frametime; e.g. MsBetweenDisplayChange, MsBetweenAppStart).
    #[arg(long, value_name = "NAME")]
    column: Option<String>,
    /// Report this application (name, .exe optional), process id or swap chain address
    /// instead of the one with the most frames.
    #[arg(long, value_name = "NAME|PID", conflicts_with = "all_apps")]
    app: Option<String>,
    /// Report every application and swap chain of each capture.
    #[arg(long)]
    all_apps: bool,
    /// Read the rows as samples (one frame time per polling interval, not every frame),
    /// whatever the log looks like.
    #[arg(long)]
    as_samples: bool,
    /// Lows to report, in percent.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5")]
    lows: Vec<f64>,
    /// Percentile interpolation: linear (numpy's default) or nearest-rank.
    #[arg(long, default_value = "linear")]
    percentile: bench::stats::PercentileMethod,
    /// Also write an HTML report with the frame-time plot and percentile bars.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// Saved runs (`--save` output); the first is the baseline.
    #[arg(required = true, num_args = 2.., value_name = "RUN.json")]
    files: Vec<PathBuf>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Also write an HTML report of these runs.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct ReportArgs {
    /// Saved runs to include.
    #[arg(required = true, value_name = "RUN.json")]
    files: Vec<PathBuf>,
    /// Output HTML file.
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = "vmtune-bench-report.html"
    )]
    output: PathBuf,
    /// Report title.
    #[arg(long, default_value = "vmtune benchmark report")]
    title: String,
    /// Print {"output": FILE, "runs": N} as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct SuiteArgs {
    /// Configuration name; the result is saved as NAME.json in --out.
    #[arg(long, value_name = "NAME")]
    config: String,
    /// The applied plan (`vmtune plan --json` output) to record.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
    /// Directory for NAME.json.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// CPU list for pinned membw and for latency (default: membw unpinned, latency on all).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Benchmarks to skip (comma separated: timer,membw,latency).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Size of each membw array (default 64M or 4× L3).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    size: Option<u64>,
    /// Latency seconds.
    #[arg(long, default_value_t = 2.0)]
    latency_seconds: f64,
    /// Do not switch clocksources in the timer benchmark.
    #[arg(long)]
    no_switch: bool,
    /// Print the saved document as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    guest: GuestArgs,
}

/// Run the suite inside a QEMU guest instead of here (see docs/bench.md).
#[derive(clap::Args, Debug)]
struct GuestArgs {
    /// Boot a throw-away QEMU guest with this kernel and run the suite inside it.
    #[arg(long)]
    guest: bool,
    /// Guest kernel (default: the newest /boot/vmlinuz-*).
    #[arg(long, value_name = "FILE", requires = "guest")]
    kernel: Option<PathBuf>,
    /// Guest vCPUs.
    #[arg(long, default_value_t = 2, requires = "guest")]
    guest_cpus: u32,
    /// Guest memory.
    #[arg(long, default_value = "1G", value_parser = parse_size, requires = "guest")]
    guest_memory: u64,
    /// Extra QEMU arguments (repeatable), e.g. `--qemu-arg=-numa --qemu-arg=node,...`.
    #[arg(
        long = "qemu-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "guest"
    )]
    qemu_args: Vec<String>,
    /// QEMU accelerator: kvm or tcg (default: kvm when /dev/kvm works, else tcg).
    #[arg(long, requires = "guest")]
    accel: Option<String>,
    /// Give up on the guest after this many seconds.
    #[arg(long, default_value_t = 300, requires = "guest")]
    guest_timeout: u64,
}

fn run_boost(a: BoostArgs) -> Result<ExitCode> {
    if !(a.gap_ms.is_finite() && a.gap_ms >= 0.0 && a.gap_ms <= 10_000.0) || a.samples == 0 {
        anyhow::bail!("--gap-ms must be 0..=10000 and --samples at least 1");
    }
    let r = bench::boost::run(&bench::boost::BoostOptions {
        busy_cpu: a.busy_cpu,
        agent_cpu: a.agent_cpu,
        samples: a.samples,
        gap: std::time::Duration::from_secs_f64(a.gap_ms / 1000.0),
    })?;
    if a.json {
        print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "a runnable thread sharing busy CPU {} by turns sees an event after (µs; {} triggers each; \
         \"off CPU\": those that found it waiting, over {} µs):",
        r.busy_cpu,
        r.boosted.samples,
        bench::boost::ON_CPU_US
    );
    let agent = format!("raised by an agent on CPU {}", r.agent_cpu);
    for (what, w) in [
        (agent.as_str(), &r.boosted),
        ("  off CPU", &r.boosted_waiting),
        ("waiting its fair turn", &r.unboosted),
        ("  off CPU", &r.unboosted_waiting),
    ] {
        println!(
            "  {what:<30} n {:>5}  p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  max {:>8.1}",
            w.samples, w.p50_us, w.p90_us, w.p99_us, w.max_us
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> Result<ExitCode> {
    bench::signals::install()?;
    let res = match args.cmd {
        Sub::Timer(a) => run_timer(a),
        Sub::Membw(a) => run_membw(a),
        Sub::Latency(a) => run_latency(a),
        Sub::Boost(a) => run_boost(a),
        Sub::Frametimes(a) => run_frametimes(a),
        Sub::Compare(a) => run_compare(a),
        Sub::Matrix(a) => super::bench_matrix::run(a),
        Sub::Import(a) => super::bench_import::run(a),
        Sub::Suite(a) => run_suite(a),
        Sub::Report(a) => run_report(a),
    };
    match res {
        Err(e)
            if matches!(
                e.downcast_ref::<BenchError>(),
                Some(BenchError::Interrupted)
            ) =>
        {
            eprintln!("vmtune: interrupted; everything changed was restored");
            Ok(ExitCode::from(130))
        }
        other => other,
    }
}

fn parse_cpus(s: &str) -> Result<CpuSet> {
    let set = CpuSet::parse_list(s).map_err(|e| anyhow::anyhow!("--cpus {s:?}: {e}"))?;
    if set.is_empty() {
        bail!("--cpus {s:?}: empty CPU list");
    }
    Ok(set)
}

/// A fresh run document with environment, live host model and the plan; `config` is
/// `--config` (else `default`, and `compare` labels the run by its file name).
fn new_run(config: Option<&str>, default: &str, plan: Option<&Path>) -> Result<RunFile> {
    let mut r = RunFile::new(config.unwrap_or(default));
    r.config_given = config.is_some();
    match topo::load(None) {
        Ok(h) => r.host = Some(h),
        Err(e) => r.host_error = Some(e.to_string()),
    }
    if let Some(p) = plan {
        r.plan = Some(read_plan(p)?);
    }
    Ok(r)
}

fn read_plan(p: &Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("reading plan {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", p.display()))
}

/// Print (text or JSON) and save.
fn finish(mut r: RunFile, c: &Common) -> Result<ExitCode> {
    r.refresh_metrics();
    if let Some(p) = &c.save {
        r.save(p)?;
    }
    if c.json {
        print_json(&r)?;
    } else {
        print!("{}", report::text_run(&r));
        if let Some(p) = &c.save {
            println!("saved {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn timer_opts(
    no_switch: bool,
    only: &[String],
    repeats: usize,
    ms: f64,
) -> Result<timer::TimerOptions> {
    if !(0.1..=60_000.0).contains(&ms) {
        bail!("--ms-per-repeat must be 0.1 … 60000");
    }
    Ok(timer::TimerOptions {
        sweep: !no_switch,
        only: (!only.is_empty()).then(|| only.to_vec()),
        repeats: repeats.clamp(1, 1000),
        seconds_per_repeat: ms / 1000.0,
        ..Default::default()
    })
}

fn run_timer(a: TimerArgs) -> Result<ExitCode> {
    let mut r = new_run(
        a.common.config.as_deref(),
        "timer",
        a.common.plan.as_deref(),
    )?;
    let opts = timer_opts(a.no_switch, &a.clocksources, a.repeats, a.ms_per_repeat)?;
    let bar = bench::progress::bar("timer", !a.common.json);
    r.timer = Some(timer::run(&opts, &bar)?);
    bar.finish_and_clear();
    r.environment.clocksource = timer::current(Path::new(timer::CLOCKSOURCE_DIR)).ok();
    finish(r, &a.common)
}

fn total_l3(host: Option<&topo::Host>) -> Option<u64> {
    let sum: u64 = host?.caches_at(3).filter_map(|c| c.size_bytes).sum();
    (sum > 0).then_some(sum)
}

fn membw_opts(
    cpus: Option<&str>,
    threads: Option<usize>,
    size: Option<u64>,
    repeats: usize,
    host: Option<&topo::Host>,
) -> Result<membw::MembwOptions> {
    let cpus = cpus.map(parse_cpus).transpose()?;
    let threads = match threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(t) => t,
        None => bench::sys::allowed_cpus()
            .map(|s| s.len())
            .unwrap_or(1)
            .max(1),
    };
    Ok(membw::MembwOptions {
        array_bytes: size.unwrap_or_else(|| membw::default_array_bytes(total_l3(host))),
        cpus,
        threads,
        repeats,
    })
}

fn run_membw(a: MembwArgs) -> Result<ExitCode> {
    let mut r = new_run(
        a.common.config.as_deref(),
        "membw",
        a.common.plan.as_deref(),
    )?;
    let opts = membw_opts(
        a.cpus.as_deref(),
        a.threads,
        a.size,
        a.repeats,
        r.host.as_ref(),
    )?;
    let bar = bench::progress::bar("membw", !a.common.json);
    r.membw = Some(membw::run(&opts, &bar)?);
    bar.finish_and_clear();
    finish(r, &a.common)
}

#[allow(clippy::too_many_arguments)]
fn latency_opts(
    cpus: Option<&str>,
    interval_us: u64,
    seconds: f64,
    fifo: Option<i32>,
    load: bool,
    load_cpus: Option<&str>,
    hist_max_us: u32,
    windows: usize,
) -> Result<latency::LatencyOptions> {
    let allowed = bench::sys::allowed_cpus()?;
    let cpus = match cpus {
        Some(s) => parse_cpus(s)?,
        None => allowed.clone(),
    };
    let load_cpus = match (load, load_cpus) {
        (_, Some(s)) => Some(parse_cpus(s)?),
        (true, None) => {
            let other = allowed.difference(&cpus);
            if other.is_empty() {
                bail!("--load: every CPU is measured, none left to load; choose --cpus or --load-cpus");
            }
            Some(other)
        }
        (false, None) => None,
    };
    if !(0.01..=86_400.0).contains(&seconds) {
        bail!("--seconds must be 0.01 … 86400");
    }
    if hist_max_us == 0 || hist_max_us > 10_000_000 {
        bail!("--hist-max-us must be 1 … 10000000");
    }
    Ok(latency::LatencyOptions {
        cpus,
        interval_us,
        duration: Duration::from_secs_f64(seconds),
        fifo_priority: fifo,
        load_cpus,
        hist_max_us,
        windows: windows.clamp(1, 1000),
    })
}

fn run_latency(a: LatencyArgs) -> Result<ExitCode> {
    let mut r = new_run(
        a.common.config.as_deref(),
        "latency",
        a.common.plan.as_deref(),
    )?;
    let opts = latency_opts(
        a.cpus.as_deref(),
        a.interval_us,
        a.seconds,
        a.fifo,
        a.load,
        a.load_cpus.as_deref(),
        a.hist_max_us,
        a.windows,
    )?;
    let bar = bench::progress::bar("latency", !a.common.json);
    r.latency = Some(latency::run(&opts, &bar)?);
    bar.finish_and_clear();
    finish(r, &a.common)
}

fn run_frametimes(a: FrametimesArgs) -> Result<ExitCode> {
    let mut r = RunFile::new(a.common.config.as_deref().unwrap_or("frametimes"));
    r.config_given = a.common.config.is_some();
    // The captures were taken where the game ran (a Windows guest's PresentMon, a Steam
    // Deck's MangoHud), not necessarily here: this machine's hostname, kernel, CPU,
    // clocksource and host model would be recorded as theirs. They are left unknown.
    let e = &mut r.environment;
    (e.hostname, e.kernel, e.cpu_model, e.clocksource) = (None, None, None, None);
    (e.cpus, e.allowed_cpus, e.in_guest) = (None, None, None);
    if let Some(p) = &a.common.plan {
        r.plan = Some(read_plan(p)?);
    }
    for l in &a.lows {
        if !(*l > 0.0 && *l < 100.0) {
            bail!("--lows: {l} is not a percentage in (0, 100)");
        }
    }
    let opts = frametimes::Options {
        column: a.column.as_deref(),
        as_samples: a.as_samples,
    };
    let pick = match (&a.app, a.all_apps) {
        (Some(q), _) => frametimes::Pick::App(q),
        (None, true) => frametimes::Pick::All,
        (None, false) => frametimes::Pick::Busiest,
    };
    // A glob over a MangoHud/FrameView/OCAT folder also names the summaries written beside
    // each log: among captures they are passed over, said on stderr; alone they are an error.
    let summaries: Vec<(&PathBuf, &'static str)> = a
        .files
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(f).ok()?;
            frametimes::summary_of(f, &frametimes::decode(&bytes)).map(|w| (f, w))
        })
        .collect();
    let all_summaries = summaries.len() == a.files.len();
    for f in &a.files {
        if !all_summaries {
            if let Some((_, what)) = summaries.iter().find(|(p, _)| *p == f) {
                eprintln!(
                    "vmtune: note: {}: {what}, not a capture: passed over",
                    f.display()
                );
                continue;
            }
        }
        let capture = frametimes::load(f, &opts)?;
        let sel = frametimes::select(capture, pick)?;
        for log in sel.logs {
            let res = FrameLogResult::new(log, sel.others.clone(), &a.lows, a.percentile)
                .with_context(|| format!("{}: no frame times", f.display()))?;
            r.frametimes.push(res);
        }
    }
    r.refresh_metrics();
    if let Some(h) = &a.html {
        write_html(h, std::slice::from_ref(&r), "Frame times")?;
    }
    finish(r, &a.common)
}

/// Saved runs, each labelled by its `--config` or, without one, its file name.
fn load_runs(files: &[PathBuf]) -> Result<Vec<RunFile>> {
    let mut runs = files
        .iter()
        .map(|f| Ok(RunFile::load(f)?))
        .collect::<Result<Vec<_>>>()?;
    let labels = bench::compare::labels(&runs, files);
    for (r, label) in runs.iter_mut().zip(labels) {
        r.config = label;
    }
    Ok(runs)
}

fn write_html(path: &Path, runs: &[RunFile], title: &str) -> Result<()> {
    std::fs::write(path, report::html(runs, title))
        .with_context(|| format!("writing {}", path.display()))
}

fn run_compare(a: CompareArgs) -> Result<ExitCode> {
    let runs = load_runs(&a.files)?;
    let c = bench::compare::compare(&runs);
    if let Some(h) = &a.html {
        write_html(h, &runs, "vmtune benchmark comparison")?;
    }
    if a.json {
        print_json(&c)?;
    } else {
        print!("{}", report::text_comparison(&c));
        if let Some(h) = &a.html {
            println!("wrote {}", h.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_report(a: ReportArgs) -> Result<ExitCode> {
    let runs = load_runs(&a.files)?;
    write_html(&a.output, &runs, &a.title)?;
    if a.json {
        print_json(&serde_json::json!({"output": a.output, "runs": runs.len()}))?;
    } else {
        println!("wrote {} ({} runs)", a.output.display(), runs.len());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_suite(a: SuiteArgs) -> Result<ExitCode> {
    let name_ok = !a.config.is_empty()
        && a.config
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
        && !a.config.starts_with('.');
    if !name_ok {
        bail!(
            "--config {:?}: use letters, digits, - _ . + (it names the file)",
            a.config
        );
    }
    for s in &a.skip {
        if !["timer", "membw", "latency"].contains(&s.as_str()) {
            bail!("--skip {s:?}: expected timer, membw or latency");
        }
    }
    let out = a.out.join(format!("{}.json", a.config));
    if a.guest.guest {
        return run_suite_in_guest(&a, &out);
    }
    let mut r = new_run(Some(&a.config), "suite", a.plan.as_deref())?;
    let json = a.json;
    if !a.skip.iter().any(|s| s == "timer") {
        let bar = bench::progress::bar("timer", !json);
        r.timer = Some(timer::run(&timer_opts(a.no_switch, &[], 5, 50.0)?, &bar)?);
        bar.finish_and_clear();
    }
    if !a.skip.iter().any(|s| s == "membw") {
        let bar = bench::progress::bar("membw", !json);
        let opts = membw_opts(a.cpus.as_deref(), None, a.size, 6, r.host.as_ref())?;
        r.membw = Some(membw::run(&opts, &bar)?);
        bar.finish_and_clear();
    }
    if !a.skip.iter().any(|s| s == "latency") {
        let bar = bench::progress::bar("latency", !json);
        let opts = latency_opts(
            a.cpus.as_deref(),
            1000,
            a.latency_seconds,
            None,
            false,
            None,
            1000,
            5,
        )?;
        r.latency = Some(latency::run(&opts, &bar)?);
        bar.finish_and_clear();
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let common = Common {
        json,
        save: Some(out),
        config: None,
        plan: None,
    };
    finish(r, &common)
}

fn run_suite_in_guest(a: &SuiteArgs, out: &Path) -> Result<ExitCode> {
    let g = &a.guest;
    let kernel = match &g.kernel {
        Some(k) => k.clone(),
        None => bench::guest::find_kernel(Path::new("/boot"))
            .context("no /boot/vmlinuz-* found; give the guest kernel with --kernel")?,
    };
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .context("busybox not found (apt-get install busybox-static)")?;
    let accel = g.accel.clone().unwrap_or_else(|| {
        if Path::new("/dev/kvm").exists() {
            "kvm:tcg".into()
        } else {
            "tcg".into()
        }
    });
    let mut suite = vec!["--config".to_string(), a.config.clone()];
    if let Some(c) = &a.cpus {
        suite.extend(["--cpus".into(), c.clone()]);
    }
    if !a.skip.is_empty() {
        suite.extend(["--skip".into(), a.skip.join(",")]);
    }
    if let Some(s) = a.size {
        suite.extend(["--size".into(), format!("{s}B")]);
    }
    suite.extend(["--latency-seconds".into(), a.latency_seconds.to_string()]);
    if a.no_switch {
        suite.push("--no-switch".into());
    }
    let opts = bench::guest::GuestOptions {
        qemu: PathBuf::from("qemu-system-x86_64"),
        kernel,
        busybox,
        vmtune: std::env::current_exe().context("locating the vmtune binary")?,
        cpus: g.guest_cpus,
        memory_bytes: g.guest_memory,
        accel,
        extra_args: g.qemu_args.clone(),
        suite_args: suite,
        runs: Vec::new(),
        files: Vec::new(),
        timeout: Duration::from_secs(g.guest_timeout.max(1)),
        workdir: std::env::temp_dir().join(format!("vmtune-guest-{}", std::process::id())),
    };
    let bar = bench::progress::bar("guest", !a.json);
    let got = bench::guest::run(&opts, &bar)?;
    bar.finish_and_clear();
    let mut r = got.run;
    r.config = a.config.clone();
    r.config_given = true;
    if let Some(p) = &a.plan {
        r.plan = new_run(Some(&a.config), "suite", Some(p))?.plan;
    }
    r.runner = Some(bench::Runner {
        kind: "qemu-guest".into(),
        command: got.command,
        seconds: got.seconds,
    });
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let common = Common {
        json: a.json,
        save: Some(out.to_path_buf()),
        config: None,
        plan: None,
    };
    if !a.json {
        println!("guest run finished in {:.1} s", got.seconds);
    }
    finish(r, &common)
}

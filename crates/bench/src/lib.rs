//! vmtune micro-benchmarks and comparison reports.
//!
//! - [`timer`]: cost of reading the time under each clocksource (Windows 7 timer note's acpi_pm vs TSC)
//! - [`membw`]: STREAM copy/scale/add/triad with threads pinned per a CPU list (r/VFIO pinning benchmark)
//! - [`latency`]: cyclictest-like timer wakeup latency per CPU, with optional load
//! - [`frametimes`]: frame-time logs → average FPS and 1/2/5% lows (VFIO gaming-host write-up)
//! - [`compare`]: runs of different configurations side by side, with a noise rule
//! - [`report`]: terminal tables and a self-contained HTML report with inline SVG charts
//! - [`readers`]: other benchmarks' output (STREAM, sysbench, nccl-tests, nvbandwidth,
//!   bandwidthTest, PyTorch matmul and copy tests, pointer-chase curves, `name value unit`
//!   lines) read into measures, and the guest's own view (`numactl`, `lscpu`, meminfo)
//! - [`harness`]: a wall-clock benchmark's runs: their spread, paired ratios, load, CPU time
//! - [`import`]: a results tree already on disk (`results/<gpu>/<config>/`) into the
//!   matrix's comparison and report
//!
//! Every benchmark returns its detailed result plus a list of [`Metric`]s (one sample per
//! repeat), which is what `compare` lines up across configurations.

pub mod boost;
pub mod compare;
pub mod error;
pub mod frametimes;
pub mod guest;
pub mod harness;
pub mod import;
pub mod latency;
pub mod matrix;
pub mod membw;
pub mod progress;
pub mod readers;
pub mod report;
pub mod signals;
pub mod stats;
pub mod svg;
pub mod sys;
pub mod timer;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use error::{BenchError, Result};

/// `schema` of every saved result file.
pub const SCHEMA: &str = "vmtune-bench/1";

/// One measured quantity with one sample per repeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// Dotted name, stable across runs: `timer.tsc.vdso`, `membw.triad`, `latency.cpu0.p99`,
    /// `frametimes.low_1pct`.
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub samples: Vec<f64>,
    /// Figures estimated from samples (frame times polled every interval, not every frame):
    /// shown with `~`, as `bench frametimes` shows them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
}

impl Metric {
    pub fn new(
        name: impl Into<String>,
        unit: &str,
        higher_is_better: bool,
        samples: Vec<f64>,
    ) -> Self {
        Metric {
            name: name.into(),
            unit: unit.to_string(),
            higher_is_better,
            samples,
            approximate: false,
        }
    }
}

/// Where a run happened: enough to tell runs apart in `compare`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: Option<String>,
    /// CPUs this process may run on.
    pub allowed_cpus: Option<String>,
    /// `hypervisor` CPUID flag present: this is a guest.
    pub in_guest: Option<bool>,
    pub clocksource: Option<String>,
    /// Whether vmtune was built with optimizations (numbers from a debug build are not
    /// meaningful for membw).
    pub optimized: bool,
    pub vmtune_version: String,
}

impl Environment {
    /// Read the live environment (missing pieces are `None`).
    pub fn detect() -> Environment {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string());
        let in_guest = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .map(|l| l.split_whitespace().any(|f| f == "hypervisor"));
        Environment {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model,
            cpus: read("/sys/devices/system/cpu/online"),
            allowed_cpus: sys::allowed_cpus().ok().map(|s| s.to_list_string()),
            in_guest,
            clocksource: timer::current(Path::new(timer::CLOCKSOURCE_DIR)).ok(),
            optimized: !cfg!(debug_assertions),
            vmtune_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// One frame-time series' numbers: one application (or the whole log) of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameLogResult {
    pub source: String,
    pub format: String,
    pub column: Option<String>,
    /// Rows without a value (`NA`, `N/A`, empty, and `zero_rows`).
    pub skipped_rows: usize,
    pub stats: frametimes::FrameStats,
    /// The frame times (ms), for plots.
    pub frame_times_ms: Vec<f64>,
    /// `frames` (one row per present) or `samples` (one row per polling interval).
    #[serde(default)]
    pub kind: frametimes::RowKind,
    /// Samples: the lows are estimates from sampled frame times.
    #[serde(default)]
    pub lows_approximate: bool,
    /// The application / process / swap chain (/ CapFrameX run) reported.
    #[serde(default)]
    pub app: frametimes::AppKey,
    /// Rows of the series.
    #[serde(default)]
    pub presents: usize,
    /// Of the skipped rows, those at 0.
    #[serde(default)]
    pub zero_rows: usize,
    #[serde(default)]
    pub displayed: Option<frametimes::Displayed>,
    #[serde(default)]
    pub present_modes: Vec<frametimes::ModeCount>,
    #[serde(default)]
    pub allows_tearing: Option<usize>,
    #[serde(default)]
    pub sampling: Option<frametimes::Sampling>,
    /// The other applications / swap chains of the same file, not reported.
    #[serde(default)]
    pub others: Vec<frametimes::SeriesSummary>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl FrameLogResult {
    /// The result of one series: its statistics (`None` when it has no frame times).
    pub fn new(
        log: frametimes::FrameLog,
        others: Vec<frametimes::SeriesSummary>,
        lows: &[f64],
        method: stats::PercentileMethod,
    ) -> Option<FrameLogResult> {
        let stats = frametimes::stats(&log.frame_times_ms, lows, method)?;
        Some(FrameLogResult {
            source: log.source,
            format: log.format,
            column: log.column,
            skipped_rows: log.skipped_rows,
            stats,
            frame_times_ms: log.frame_times_ms,
            kind: log.kind,
            lows_approximate: log.kind == frametimes::RowKind::Samples,
            app: log.app,
            presents: log.presents,
            zero_rows: log.zero_rows,
            displayed: log.displayed,
            present_modes: log.present_modes,
            allows_tearing: log.allows_tearing,
            sampling: log.sampling,
            others,
            notes: log.notes,
        })
    }

    /// `file.csv`, or `file.csv: Game.exe (pid 1, swap chain 0x1)`.
    pub fn label(&self) -> String {
        let app = self.app.label();
        if app.is_empty() {
            self.source.clone()
        } else {
            format!("{}: {app}", self.source)
        }
    }
}

/// A saved run: what `bench ... --json` prints, `--save` writes, and `compare`/`report` read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    pub schema: String,
    /// Configuration label (`--config NAME`, else the benchmark's name), what `compare`
    /// shows as the column head.
    pub config: String,
    /// Whether `config` was given (`--config`); when not, `compare` and `report` label the
    /// run by its file name. Files written before this field are taken as given.
    #[serde(default = "given")]
    pub config_given: bool,
    /// Seconds since the Unix epoch.
    pub created_unix_s: u64,
    pub environment: Environment,
    /// The host model (`topo`), where it could be read.
    pub host: Option<topo::Host>,
    /// Why `host` is missing.
    pub host_error: Option<String>,
    /// The applied plan (`--plan PLAN.json`), as given.
    pub plan: Option<serde_json::Value>,
    pub timer: Option<timer::TimerResult>,
    pub membw: Option<membw::MembwResult>,
    pub latency: Option<latency::LatencyResult>,
    #[serde(default)]
    pub frametimes: Vec<FrameLogResult>,
    #[serde(default)]
    pub metrics: Vec<Metric>,
    /// How the run was made when not in this process (the `--guest` runner's QEMU command).
    #[serde(default)]
    pub runner: Option<Runner>,
}

/// How a run was collected from elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runner {
    /// `qemu-guest`.
    pub kind: String,
    pub command: Vec<String>,
    /// Wall time from QEMU start to the result, seconds.
    pub seconds: f64,
}

impl RunFile {
    pub fn new(config: impl Into<String>) -> RunFile {
        RunFile {
            schema: SCHEMA.to_string(),
            config: config.into(),
            config_given: true,
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            environment: Environment::detect(),
            host: None,
            host_error: None,
            plan: None,
            timer: None,
            membw: None,
            latency: None,
            frametimes: Vec::new(),
            metrics: Vec::new(),
            runner: None,
        }
    }

    /// Recompute `metrics` from the sections present.
    pub fn refresh_metrics(&mut self) {
        let mut m = Vec::new();
        if let Some(t) = &self.timer {
            m.extend(t.metrics());
        }
        if let Some(b) = &self.membw {
            m.extend(b.metrics());
        }
        if let Some(l) = &self.latency {
            m.extend(l.metrics());
        }
        m.extend(frame_metrics(&self.frametimes));
        self.metrics = m;
    }

    /// Read a saved run.
    pub fn load(path: &Path) -> Result<RunFile> {
        let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<RunFile> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| BenchError::format(path, format!("not JSON: {e}")))?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(BenchError::format(
                    path,
                    format!("schema {other:?} is not {SCHEMA:?}"),
                ))
            }
            None => {
                return Err(BenchError::format(
                    path,
                    "not a vmtune bench result (no \"schema\"); make one with `vmtune bench ... --save FILE`",
                ))
            }
        }
        serde_json::from_value(v)
            .map_err(|e| BenchError::format(path, format!("bad bench result: {e}")))
    }

    /// Write the run; it must read back as it is (`compare` and `report` read every result
    /// `--save` writes): a value JSON cannot hold (an infinity becomes `null`) is refused here,
    /// naming where it is, rather than found later by `compare`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = self.to_json()?;
        std::fs::write(path, text + "\n").map_err(|e| BenchError::io(path, e))
    }

    /// The saved document, checked to read back equal.
    pub fn to_json(&self) -> Result<String> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| BenchError::Invalid(format!("serializing result: {e}")))?;
        // serde_json writes a non-finite f64 as `null`, which does not load back as f64
        serde_json::from_str::<RunFile>(&text).map_err(|e| {
            BenchError::Invalid(format!(
                "the result would not read back ({e} of the document): it holds a number JSON \
                 cannot represent (infinite or NaN)"
            ))
        })?;
        Ok(text)
    }
}

fn given() -> bool {
    true
}

/// Metrics of frame-time logs: each log is one repeat of the same configuration. When one
/// file gave several applications (`--all-apps`), each application gets its own metrics,
/// `frametimes[APP].avg_fps`, ...; otherwise `frametimes.avg_fps`, ...
pub fn frame_metrics(logs: &[FrameLogResult]) -> Vec<Metric> {
    if logs.is_empty() {
        return Vec::new();
    }
    let app_of = |l: &FrameLogResult| l.app.application.clone().unwrap_or_default();
    let per_app = logs.iter().any(|a| {
        logs.iter()
            .any(|b| a.source == b.source && app_of(a) != app_of(b))
    });
    if !per_app {
        return frame_metrics_named(logs, "frametimes");
    }
    let mut apps: Vec<String> = Vec::new();
    for l in logs {
        if !apps.contains(&app_of(l)) {
            apps.push(app_of(l));
        }
    }
    // Repeats of an application are its series in different files (or CapFrameX runs); its
    // other swap chains and processes in one file (dwm.exe on two monitors) are not: per
    // file and run, its series with the most frames stands for it.
    apps.iter()
        .flat_map(|a| {
            let mut mine: Vec<&FrameLogResult> = Vec::new();
            for l in logs.iter().filter(|l| &app_of(l) == a) {
                let same = |m: &&FrameLogResult| m.source == l.source && m.app.run == l.app.run;
                match mine.iter_mut().find(|m| same(m)) {
                    Some(m) if l.stats.frames > m.stats.frames => *m = l,
                    Some(_) => {}
                    None => mine.push(l),
                }
            }
            let mine: Vec<FrameLogResult> = mine.into_iter().cloned().collect();
            frame_metrics_named(&mine, &format!("frametimes[{a}]"))
        })
        .collect()
}

fn frame_metrics_named(logs: &[FrameLogResult], prefix: &str) -> Vec<Metric> {
    let col = |f: &dyn Fn(&frametimes::FrameStats) -> Option<f64>| -> Vec<f64> {
        logs.iter().filter_map(|l| f(&l.stats)).collect()
    };
    let mut m = vec![Metric::new(
        format!("{prefix}.avg_fps"),
        "FPS",
        true,
        col(&|s| Some(s.avg_fps)),
    )];
    let percents: Vec<f64> = logs
        .first()
        .map(|l| l.stats.lows.iter().map(|x| x.percent).collect())
        .unwrap_or_default();
    for p in percents {
        let find =
            move |s: &frametimes::FrameStats| s.lows.iter().find(|l| l.percent == p).cloned();
        m.push(Metric::new(
            format!("{prefix}.low_{p}pct"),
            "FPS",
            true,
            col(&|s| find(s).map(|l| l.fps)),
        ));
        m.push(Metric::new(
            format!("{prefix}.avg_slowest_{p}pct"),
            "FPS",
            true,
            col(&|s| find(s).map(|l| l.avg_slowest_fps)),
        ));
    }
    let approximate = logs.iter().any(|l| l.lows_approximate);
    for x in &mut m {
        x.approximate = approximate;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_result(ft: &[f64]) -> FrameLogResult {
        let text: String = ft.iter().map(|x| format!("{x}\n")).collect();
        let c = frametimes::parse(&text, Path::new("ft.txt"), &Default::default()).unwrap();
        let log = c.series.into_iter().next().unwrap();
        FrameLogResult::new(
            log,
            vec![],
            frametimes::DEFAULT_LOWS,
            stats::PercentileMethod::Linear,
        )
        .unwrap()
    }

    #[test]
    fn saved_runs_read_back_or_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r.json");
        let mut r = RunFile::new("a");
        r.config_given = false;
        r.frametimes.push(frame_result(&[16.6, 17.0, 33.3]));
        r.refresh_metrics();
        r.save(&path).unwrap();
        assert_eq!(RunFile::load(&path).unwrap(), r);
        // an infinity would be written as null: refused, nothing written
        let mut bad = r.clone();
        if let Some(l) = bad.frametimes.first_mut() {
            l.stats.avg_fps = f64::INFINITY;
        }
        let p2 = d.path().join("bad.json");
        let e = bad.save(&p2).unwrap_err().to_string();
        assert!(
            e.contains("would not read back") && e.contains("infinite"),
            "{e}"
        );
        assert!(!p2.exists());
    }

    #[test]
    fn per_application_metrics_only_when_a_file_gave_several() {
        let mut a = frame_result(&[10.0, 10.0]);
        a.app.application = Some("Game.exe".into());
        let mut b = frame_result(&[16.0, 17.0]);
        b.app.application = Some("dwm.exe".into());
        let names = |logs: &[FrameLogResult]| -> Vec<String> {
            frame_metrics(logs).into_iter().map(|m| m.name).collect()
        };
        // one application per file: repeats
        let mut b2 = b.clone();
        b2.source = "other.txt".into();
        assert!(names(&[a.clone(), b2])
            .iter()
            .all(|n| n.starts_with("frametimes.")));
        let n = names(&[a, b]);
        assert!(
            n.contains(&"frametimes[Game.exe].avg_fps".to_string()),
            "{n:?}"
        );
        assert!(
            n.contains(&"frametimes[dwm.exe].low_1pct".to_string()),
            "{n:?}"
        );
    }

    #[test]
    fn one_applications_swap_chains_in_one_file_are_not_repeats() {
        // --all-apps on a capture with the game and dwm.exe on two monitors (two swap
        // chains), and the same capture taken again: dwm has 2 repeats, not 4
        let game = |src: &str| {
            let mut r = frame_result(&[11.0, 12.0, 11.0]);
            r.app.application = Some("Game.exe".into());
            r.source = src.into();
            r
        };
        let dwm = |src: &str, swap: &str, ft: f64, n: usize| {
            let mut r = frame_result(&vec![ft; n]);
            r.app.application = Some("dwm.exe".into());
            r.app.swap_chain = Some(swap.into());
            r.source = src.into();
            r
        };
        let logs = [
            game("a.csv"),
            dwm("a.csv", "0x1", 6.9, 40),
            dwm("a.csv", "0x2", 16.7, 20),
            game("b.csv"),
            dwm("b.csv", "0x7", 6.9, 41),
            dwm("b.csv", "0x8", 16.7, 19),
        ];
        let m = frame_metrics(&logs);
        let dwm_fps = m
            .iter()
            .find(|m| m.name == "frametimes[dwm.exe].avg_fps")
            .expect("dwm metric");
        // per file, the swap chain with the most frames (the 144 Hz monitor)
        assert_eq!(dwm_fps.samples.len(), 2, "{:?}", dwm_fps.samples);
        assert!(dwm_fps
            .samples
            .iter()
            .all(|f| (f - 1000.0 / 6.9).abs() < 1e-6));
        let game_fps = m
            .iter()
            .find(|m| m.name == "frametimes[Game.exe].avg_fps")
            .expect("game metric");
        assert_eq!(game_fps.samples.len(), 2);
    }
}

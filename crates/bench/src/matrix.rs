//! `vmtune bench matrix`: the r/VFIO pinning benchmark's comparison on this host — the same
//! VM in several layouts, each booted as a scratch libvirt domain, measured inside, and
//! compared run by run.
//!
//! ```text
//! layouts (plan::layouts, patched into the user's domain by emit)
//!   └─ order          runs interleaved: round r starts at layout r (mod n), so drift of the
//!                     host (thermal, other load) falls on every layout alike
//!   └─ run            per (layout, run): scratch XML → define (journaled by the caller) →
//!                     start → wait for `shut off` → remove → read the guest's serial file
//!   └─ summarize      per layout, one value per run and metric (the median of the run's
//!                     repeats; a `--run` command's numbers through `readers`), compared
//!                     with `compare` (median [min–max], change vs the first layout, beyond
//!                     noise when the ranges do not overlap), and the verdict on the
//!                     planner's choice
//! ```
//!
//! What touches libvirt is the [`Domains`] trait, so the order, the bookkeeping of failed
//! runs and the summary are tested without a daemon; the CLI implements it with `virsh` and
//! a journal step per scratch domain.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::compare::{compare, Comparison};
use crate::error::{BenchError, Result};
use crate::guest::{self, RunOutput, UserRun};
use crate::stats::{beyond_noise, Summary};
use crate::{readers, report, signals, svg, Metric, RunFile};

pub mod remote;
pub mod view;

pub use remote::{SshTarget, Transport};

/// One layout to measure: the domain XML it runs (before the scratch changes) and what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutSpec {
    /// `default`, `pin`, `pin-numa`, `pin-numa-smt`.
    pub name: String,
    pub describe: String,
    pub domain_xml: String,
    pub vcpus: u32,
    /// `vN→cpu` pins, `none` for an unpinned layout.
    pub pins: String,
    /// Guest topology and cells, one line.
    pub guest: String,
    /// What had to be assumed or shared on this host.
    pub notes: Vec<String>,
    /// The plan behind it (JSON), recorded with its runs.
    pub plan: Option<serde_json::Value>,
    /// What the guest must see for a run of this layout to count (`None`: not checked).
    #[serde(default)]
    pub expect: Option<view::Expect>,
}

/// The files a scratch domain boots from and writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchFiles {
    pub name: String,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub cmdline: String,
    pub console: PathBuf,
    pub result: PathBuf,
}

/// What the matrix asks of libvirt.
pub trait Domains {
    /// The scratch copy of `layout` booting `files` (domain XML).
    fn scratch_xml(&self, layout: &LayoutSpec, files: &ScratchFiles) -> Result<String>;
    /// Define the domain from `xml_path` (the caller journals it first).
    fn define(&mut self, name: &str, xml_path: &Path) -> Result<()>;
    fn start(&mut self, name: &str) -> Result<()>;
    /// `virsh domstate`, `None` when there is no such domain.
    fn state(&mut self, name: &str) -> Result<Option<String>>;
    /// Destroy and undefine (the caller records it undone), and whatever the caller made
    /// for it (overlays, the NVRAM copy).
    fn remove(&mut self, name: &str) -> Result<()>;
    /// The scratch copy of `layout` named `name` that boots the domain's own OS, its disks
    /// behind overlays the caller makes (and journals) here.
    fn guest_xml(&mut self, layout: &LayoutSpec, name: &str) -> Result<String> {
        let _ = (layout, name);
        Err(BenchError::Invalid(
            "this libvirt connection boots no guest OS".into(),
        ))
    }
    /// One qemu-guest-agent request (JSON) to domain `name`; the agent's reply (JSON).
    fn agent(&mut self, name: &str, request: &str, timeout: Duration) -> Result<String> {
        let _ = (name, request, timeout);
        Err(BenchError::Invalid(
            "this libvirt connection speaks to no guest agent".into(),
        ))
    }
}

#[derive(Debug, Clone)]
pub struct MatrixOptions {
    pub runs: usize,
    /// Scratch domains are named `PREFIX-LAYOUT-RUN`.
    pub prefix: String,
    pub workdir: PathBuf,
    pub kernel: PathBuf,
    pub busybox: PathBuf,
    pub vmtune: PathBuf,
    pub suite_args: Vec<String>,
    pub user_runs: Vec<UserRun>,
    pub files: Vec<PathBuf>,
    /// Per run, from start to `shut off` (initramfs); per boot and per command (agent, SSH).
    pub timeout: Duration,
    /// How commands reach the guest.
    pub transport: Transport,
}

/// The kernel command line of every scratch boot (see `guest::qemu_command`).
pub const CMDLINE: &str = "console=ttyS0 panic=-1 quiet rdinit=/init no_timer_check";

/// The order of the runs: round `r` takes every layout once, starting at layout `r mod n`.
pub fn order(layouts: usize, runs: usize) -> Vec<(usize, usize)> {
    (0..runs)
        .flat_map(|r| (0..layouts).map(move |i| ((i + r) % layouts, r)))
        .collect()
}

/// One run's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub layout: String,
    /// 1-based.
    pub run: usize,
    /// Position in the order, 1-based.
    pub position: usize,
    pub seconds: f64,
    /// The suite's result in the guest; `None` when the run failed.
    pub suite: Option<RunFile>,
    /// What each `--run` command printed, read.
    #[serde(default)]
    pub user: Vec<UserResult>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Why the run's guest did not match its layout (the guest-view check): such a run is
    /// shown, named invalid, and kept out of the comparison and the verdict like a failed one.
    #[serde(default)]
    pub invalid: Option<String>,
    /// What the guest saw, one line (`view::describe`).
    #[serde(default)]
    pub view: Option<String>,
    /// The guest's `lscpu`, `numactl --hardware` and meminfo huge lines (agent, SSH).
    #[serde(default)]
    pub view_text: Option<String>,
}

impl RunRecord {
    /// Run `run` of `layout` at `position` in the order, `seconds` long, nothing read yet.
    pub fn new(layout: &str, run: usize, position: usize, seconds: f64) -> RunRecord {
        RunRecord {
            layout: layout.to_string(),
            run,
            position,
            seconds,
            suite: None,
            user: Vec::new(),
            error: None,
            invalid: None,
            view: None,
            view_text: None,
        }
    }

    /// Whether the run's figures count: it neither failed nor was found invalid.
    pub fn counts(&self) -> bool {
        self.error.is_none() && self.invalid.is_none()
    }
}

/// A `--run` command's output in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserResult {
    pub name: String,
    pub rc: Option<i32>,
    /// The reader that read it (`stream`, `sysbench`, …).
    pub tool: Option<String>,
    pub measures: Vec<readers::Measure>,
    /// Why nothing was read.
    pub error: Option<String>,
    /// What the output said about how it ran (`readers::facts`: `NCCL_*` settings, ranks,
    /// GPUs, repeats).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub facts: std::collections::BTreeMap<String, String>,
}

impl UserResult {
    /// A command's output `text` (exit 0) read: the tool, its measures and facts, or why not.
    pub fn from_text(name: &str, text: &str) -> UserResult {
        UserResult::read(&RunOutput {
            name: name.to_string(),
            rc: Some(0),
            output: text.to_string(),
        })
    }

    pub(crate) fn read(o: &RunOutput) -> UserResult {
        let mut r = UserResult {
            name: o.name.clone(),
            rc: o.rc,
            tool: None,
            measures: Vec::new(),
            error: None,
            facts: Default::default(),
        };
        match o.rc {
            None => r.error = Some("the guest stopped before the command finished".into()),
            Some(rc) if rc != 0 => {
                r.error = Some(format!(
                    "exit {rc}: {}",
                    o.output
                        .lines()
                        .rfind(|l| !l.trim().is_empty())
                        .unwrap_or("no output")
                ))
            }
            Some(_) => match readers::read_any(&o.output) {
                Ok((tool, m)) => {
                    r.tool = Some(tool.id().to_string());
                    r.facts = readers::facts(tool, &o.output, &m);
                    r.measures = m;
                }
                Err(e) => r.error = Some(e.to_string()),
            },
        }
        r
    }
}

/// Build the initramfs once, then run every (layout, run) in [`order`]. A failed run is
/// recorded and the next one goes on; Ctrl-C / SIGTERM removes the running scratch domain
/// and stops with what was measured.
pub fn run(
    layouts: &[LayoutSpec],
    opts: &MatrixOptions,
    dom: &mut dyn Domains,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<RunRecord>> {
    if opts.runs == 0 || layouts.is_empty() {
        return Err(BenchError::Invalid(
            "nothing to run: no layout or --runs 0".into(),
        ));
    }
    fs::create_dir_all(&opts.workdir).map_err(|e| BenchError::io(&opts.workdir, e))?;
    if opts.transport != Transport::Initramfs {
        return run_guests(layouts, opts, dom, bar);
    }
    let initrd = opts.workdir.join("initramfs.cpio");
    let kernel = opts.workdir.join("vmlinuz");
    bar.set_message("building the guest's initramfs");
    let g = guest::GuestOptions {
        qemu: PathBuf::new(),
        kernel: opts.kernel.clone(),
        busybox: opts.busybox.clone(),
        vmtune: opts.vmtune.clone(),
        cpus: 1,
        memory_bytes: 0,
        accel: String::new(),
        extra_args: Vec::new(),
        suite_args: opts.suite_args.clone(),
        runs: opts.user_runs.clone(),
        files: opts.files.clone(),
        timeout: opts.timeout,
        workdir: opts.workdir.clone(),
    };
    let image = guest::initramfs(&g)?;
    fs::write(&initrd, image).map_err(|e| BenchError::io(&initrd, e))?;
    // a copy: libvirt relabels what a domain boots from while it runs
    fs::copy(&opts.kernel, &kernel).map_err(|e| BenchError::io(&opts.kernel, e))?;
    let plan = order(layouts.len(), opts.runs);
    bar.set_length(plan.len() as u64);
    let mut records = Vec::new();
    for (pos, &(li, r)) in plan.iter().enumerate() {
        if signals::interrupted() {
            return Err(BenchError::Interrupted);
        }
        let l = &layouts[li];
        bar.set_message(format!("{} run {}/{}", l.name, r + 1, opts.runs));
        let files = ScratchFiles {
            name: format!("{}-{}-{}", opts.prefix, l.name, r + 1),
            kernel: kernel.clone(),
            initrd: initrd.clone(),
            cmdline: CMDLINE.into(),
            console: opts.workdir.join(format!("{}-{}.console", l.name, r + 1)),
            result: opts.workdir.join(format!("{}-{}.result", l.name, r + 1)),
        };
        let t0 = Instant::now();
        let got = one(l, &files, opts.timeout, dom);
        let mut rec = RunRecord::new(&l.name, r + 1, pos + 1, t0.elapsed().as_secs_f64());
        match got {
            Ok((suite, user)) => {
                let why = suite
                    .host_error
                    .clone()
                    .unwrap_or_else(|| "the guest's suite read no topology".into());
                judge(&mut rec, l, suite.host.as_ref().ok_or(why));
                rec.suite = Some(suite);
                rec.user = user;
            }
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => rec.error = Some(e.to_string()),
        }
        records.push(rec);
        bar.inc(1);
    }
    Ok(records)
}

/// Every (layout, run) in [`order`], each booting the user's own OS ([`remote::one`]).
fn run_guests(
    layouts: &[LayoutSpec],
    opts: &MatrixOptions,
    dom: &mut dyn Domains,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<RunRecord>> {
    let plan = order(layouts.len(), opts.runs);
    bar.set_length(plan.len() as u64);
    let mut records = Vec::new();
    for (pos, &(li, r)) in plan.iter().enumerate() {
        if signals::interrupted() {
            return Err(BenchError::Interrupted);
        }
        let l = &layouts[li];
        bar.set_message(format!(
            "{} run {}/{} ({})",
            l.name,
            r + 1,
            opts.runs,
            opts.transport.name()
        ));
        let name = format!("{}-{}-{}", opts.prefix, l.name, r + 1);
        let t0 = Instant::now();
        let got = remote::one(l, &name, opts, dom);
        let mut rec = RunRecord::new(&l.name, r + 1, pos + 1, t0.elapsed().as_secs_f64());
        match got {
            Ok(g) => {
                judge(&mut rec, l, g.view.as_ref().map_err(Clone::clone));
                rec.view_text = Some(g.view_text);
                rec.suite = Some(g.suite);
                rec.user = g.user;
            }
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => rec.error = Some(e.to_string()),
        }
        records.push(rec);
        bar.inc(1);
    }
    Ok(records)
}

/// Compare the guest's view with the layout: a run whose guest differs is invalid, and so is
/// one whose view could not be read (nothing says it ran the layout).
fn judge(rec: &mut RunRecord, l: &LayoutSpec, view: std::result::Result<&topo::Host, String>) {
    match view {
        Ok(v) => {
            rec.view = Some(view::describe(v));
            if let Some(e) = &l.expect {
                let bad = view::check(e, v);
                if !bad.is_empty() {
                    rec.invalid = Some(bad.join("; "));
                }
            }
        }
        Err(why) => {
            if l.expect.is_some() {
                rec.invalid = Some(format!("the guest's view could not be read: {why}"));
            }
        }
    }
}

/// One scratch boot: define, start, wait, remove (always, once defined), read.
fn one(
    l: &LayoutSpec,
    f: &ScratchFiles,
    timeout: Duration,
    dom: &mut dyn Domains,
) -> Result<(RunFile, Vec<UserResult>)> {
    for p in [&f.console, &f.result] {
        fs::write(p, "").map_err(|e| BenchError::io(p, e))?;
    }
    let xml = dom.scratch_xml(l, f)?;
    let xml_path = f.result.with_extension("xml");
    fs::write(&xml_path, &xml).map_err(|e| BenchError::io(&xml_path, e))?;
    dom.define(&f.name, &xml_path)?;
    let waited = dom
        .start(&f.name)
        .and_then(|()| wait_shut_off(dom, &f.name, timeout, &f.console));
    let removed = dom.remove(&f.name);
    waited?;
    removed?;
    let text = fs::read_to_string(&f.result).map_err(|e| BenchError::io(&f.result, e))?;
    if text.trim().is_empty() {
        let console = fs::read_to_string(&f.console).unwrap_or_default();
        let last = console
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("no console output");
        return Err(BenchError::Invalid(format!(
            "the guest wrote no result (last console line: {last}; console: {})",
            f.console.display()
        )));
    }
    let (_, suite) = guest::parse_result(&text, &f.result)?;
    let user = guest::parse_runs(&text)
        .iter()
        .map(UserResult::read)
        .collect();
    Ok((suite, user))
}

fn wait_shut_off(
    dom: &mut dyn Domains,
    name: &str,
    timeout: Duration,
    console: &Path,
) -> Result<()> {
    let t0 = Instant::now();
    loop {
        match dom.state(name)?.as_deref() {
            Some("shut off") => return Ok(()),
            None => {
                return Err(BenchError::Invalid(format!(
                    "scratch domain {name} disappeared while it ran"
                )))
            }
            _ => {}
        }
        if signals::interrupted() {
            return Err(BenchError::Interrupted);
        }
        if t0.elapsed() > timeout {
            return Err(BenchError::Invalid(format!(
                "{name} did not finish in {} s (console: {})",
                timeout.as_secs(),
                console.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whether a unit measures time (lower is better) rather than a rate (in `stats`, where the
/// readers and the report ask too).
pub use crate::stats::is_time_unit;

/// The matrix's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixReport {
    pub layouts: Vec<LayoutSpec>,
    pub runs_per_layout: usize,
    /// Per layout, the successful runs' values: one sample per run and metric.
    pub per_layout: Vec<RunFile>,
    pub comparison: Comparison,
    /// The layout the planner chooses for this host, if it makes a plan.
    pub chosen: Option<String>,
    pub chosen_note: String,
    /// Sentences on the planner's choice against the measurement.
    pub verdict: Vec<String>,
    pub records: Vec<RunRecord>,
    /// Some runs failed or were never made: the figures are from fewer runs.
    pub partial: bool,
    /// The passed-through devices whose PCIe link runs below what it can do, one line each
    /// (every layout measures through that link alike).
    #[serde(default)]
    pub links: Vec<String>,
    /// How the runs were made: the transport, the memory backing every layout ran.
    #[serde(default)]
    pub setup: Vec<String>,
    /// What the outputs said that bears on the figures: repeats and how they were made one,
    /// settings that differ between layouts; for an import, which files held repeats.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Per layout, what its guest saw of itself (`numactl --hardware`, `lscpu`,
    /// `/proc/meminfo`), where that was read.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub views: std::collections::BTreeMap<String, readers::view::GuestView>,
}

/// A line for each link of the layouts' passed-through devices (their plans' `devices`) that
/// `topo::Host::downgraded_links` finds, the link named once.
fn link_notes(host: Option<&topo::Host>, layouts: &[LayoutSpec]) -> Vec<String> {
    let Some(host) = host else {
        return Vec::new();
    };
    let mut devices: Vec<&str> = layouts
        .iter()
        .filter_map(|l| l.plan.as_ref()?.get("devices")?.as_array())
        .flatten()
        .filter_map(|d| d.get("bdf")?.as_str())
        .collect();
    devices.sort_unstable();
    devices.dedup();
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for bdf in devices {
        for at in host.downgraded_links(bdf) {
            let Some(l) = at.link.as_ref().filter(|_| !seen.contains(&at.slot())) else {
                continue;
            };
            seen.push(at.slot());
            let whose = if at.bdf == bdf {
                String::new()
            } else {
                format!(" (the link of {} above it)", at.bdf)
            };
            let bw = l.bandwidths().map(|b| format!(", {b}")).unwrap_or_default();
            out.push(format!(
                "PCIe: {bdf}'s link{whose} runs at {}{bw} (downgraded): every layout's host↔device figures go through it alike; see `vmtune plan`'s warning",
                l.figures()
            ));
        }
    }
    out
}

/// One sample per metric for one run: the median of its repeats, and each `--run` number
/// (a figure the command printed more than once made one by its tool's rule,
/// `readers::collapse`: five `bandwidthTest` runs in one output are one run's figure).
fn run_metrics(rec: &RunRecord) -> Vec<Metric> {
    let mut out = Vec::new();
    if let Some(s) = &rec.suite {
        for m in &s.metrics {
            if let Some(sum) = Summary::of(&m.samples) {
                let mut one = m.clone();
                one.samples = vec![sum.median];
                out.push(one);
            }
        }
    }
    for u in &rec.user {
        for m in run_measures(u) {
            out.push(Metric::new(
                format!("{}.{}", u.name, m.key()),
                &m.unit,
                !is_time_unit(&m.unit),
                vec![m.value],
            ));
        }
    }
    out
}

/// A `--run` command's measures, one per key: repeats made one by the tool's rule.
pub fn run_measures(u: &UserResult) -> Vec<readers::Measure> {
    let rule = u
        .tool
        .as_deref()
        .and_then(readers::Tool::from_id)
        .map_or(readers::RepeatRule::Median, readers::Tool::repeat_rule);
    readers::collapse(&u.measures, rule)
}

/// What the report says of the `--run` outputs: a command that printed its figures more than
/// once (how they were made one), and settings (`NCCL_*`, ranks, GPUs) that differ between
/// layouts — a difference the comparison would otherwise credit to the layout.
fn output_notes(layouts: &[LayoutSpec], records: &[RunRecord]) -> Vec<String> {
    let mut out = Vec::new();
    let mut said: Vec<String> = Vec::new();
    let mut facts: std::collections::BTreeMap<(String, String), Vec<(String, String)>> =
        Default::default();
    for rec in records.iter().filter(|r| r.counts()) {
        for u in &rec.user {
            if let (Some(n), Some(tool)) = (
                u.facts.get("repeats"),
                u.tool.as_deref().and_then(readers::Tool::from_id),
            ) {
                let line = format!(
                    "--run {} ({}) printed its figures {n} times in one output: repeats of one run, made one figure per run by the {} (the tool's own rule)",
                    u.name,
                    tool.name(),
                    tool.repeat_rule().name()
                );
                if !said.contains(&line) {
                    said.push(line);
                }
            }
            for (k, v) in u.facts.iter().filter(|(k, _)| k.as_str() != "repeats") {
                facts
                    .entry((u.name.clone(), k.clone()))
                    .or_default()
                    .push((rec.layout.clone(), v.clone()));
            }
        }
    }
    out.extend(said);
    for ((name, key), seen) in facts {
        let mut values: Vec<&str> = seen.iter().map(|(_, v)| v.as_str()).collect();
        values.sort_unstable();
        values.dedup();
        let everywhere = layouts
            .iter()
            .all(|l| seen.iter().any(|(layout, _)| *layout == l.name));
        if values.len() == 1 && everywhere {
            out.push(format!("{name}: {key} = {} in every layout", values[0]));
            continue;
        }
        let each: Vec<String> = layouts
            .iter()
            .map(|l| {
                let mine: Vec<&str> = seen
                    .iter()
                    .filter(|(layout, _)| *layout == l.name)
                    .map(|(_, v)| v.as_str())
                    .collect();
                match mine.first() {
                    Some(v) => format!("{} {v}", l.name),
                    None => format!("{} unset", l.name),
                }
            })
            .collect();
        out.push(format!(
            "{name}: {key} differs between layouts ({}): their figures differ by it too",
            each.join(", ")
        ));
    }
    out
}

/// Gather the records into per-layout runs, compare them, and judge the planner's choice.
/// Failed and invalid runs are listed, never compared.
pub fn summarize(
    layouts: Vec<LayoutSpec>,
    runs_per_layout: usize,
    records: Vec<RunRecord>,
    chosen: Option<String>,
    chosen_note: String,
    host: Option<topo::Host>,
) -> MatrixReport {
    let per_layout: Vec<RunFile> = layouts
        .iter()
        .map(|l| {
            let mut rf = RunFile::new(l.name.clone());
            let mine: Vec<&RunRecord> = records.iter().filter(|r| r.layout == l.name).collect();
            if let Some(s) = mine.iter().find_map(|r| r.suite.as_ref()) {
                rf.environment = s.environment.clone();
            }
            rf.host = host.clone();
            rf.plan = l.plan.clone();
            for rec in mine.iter().filter(|r| r.counts()) {
                for m in run_metrics(rec) {
                    match rf.metrics.iter_mut().find(|x| x.name == m.name) {
                        Some(x) => x.samples.extend(m.samples),
                        None => rf.metrics.push(m),
                    }
                }
            }
            rf
        })
        .collect();
    let mut comparison = compare(&per_layout);
    // the plans differ by design; the layouts' table says how, one line each
    comparison.differences.retain(|d| !d.contains(": plan."));
    let expected = layouts.len() * runs_per_layout;
    let partial = records.len() < expected || records.iter().any(|r| !r.counts());
    let verdict = verdict(&comparison, chosen.as_deref(), &chosen_note);
    let links = link_notes(host.as_ref(), &layouts);
    let notes = output_notes(&layouts, &records);
    MatrixReport {
        layouts,
        runs_per_layout,
        per_layout,
        comparison,
        chosen,
        chosen_note,
        verdict,
        records,
        partial,
        links,
        setup: Vec::new(),
        notes,
        views: Default::default(),
    }
}

/// The planner's choice against the measurement: every metric where another layout beat it
/// beyond noise is named; silence is never taken for agreement when runs are too few.
fn verdict(c: &Comparison, chosen: Option<&str>, note: &str) -> Vec<String> {
    let Some(chosen) = chosen else {
        return vec![format!("{note}: no choice to check.")];
    };
    let Some(ci) = c.configs.iter().position(|n| n == chosen) else {
        return vec![format!(
            "the planner's choice, {chosen}, was not among the layouts measured."
        )];
    };
    let mut beaten = Vec::new();
    let mut compared = 0;
    let mut undecided = 0;
    for row in &c.rows {
        let Some(mine) = row.runs.get(ci).cloned().flatten() else {
            continue;
        };
        compared += 1;
        for (i, other) in row.runs.iter().enumerate() {
            let (Some(o), true) = (other, i != ci) else {
                continue;
            };
            let better = if row.higher_is_better {
                o.median > mine.median
            } else {
                o.median < mine.median
            };
            match beyond_noise(&mine, o) {
                Some(true) if better => beaten.push(format!(
                    "{} beat it on {} ({} vs {} {})",
                    c.configs[i],
                    row.metric,
                    svg::num(o.median),
                    svg::num(mine.median),
                    row.unit
                )),
                None => undecided += 1,
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    if compared == 0 {
        out.push(format!(
            "the planner's choice, {chosen}, has no successful run: nothing to check."
        ));
    } else if beaten.is_empty() {
        out.push(format!(
            "the measurement agrees with the planner's choice, {chosen}: no layout beat it beyond run-to-run noise on any of {compared} metrics."
        ));
    } else {
        out.push(format!(
            "the measurement disagrees with the planner's choice, {chosen}, on this host: {}.",
            beaten.join("; ")
        ));
    }
    if undecided > 0 {
        out.push(format!(
            "{undecided} comparisons had fewer than two runs a side: run more (--runs) to tell them from noise."
        ));
    }
    out
}

/// The layouts as a table (the planner's choice marked `*`) and their notes.
pub fn layouts_text(layouts: &[LayoutSpec], chosen: Option<&str>, chosen_note: &str) -> String {
    let rows: Vec<Vec<String>> = layouts
        .iter()
        .map(|l| {
            let mark = if chosen == Some(l.name.as_str()) {
                " *"
            } else {
                ""
            };
            vec![
                format!("{}{mark}", l.name),
                l.describe.clone(),
                l.vcpus.to_string(),
                l.pins.clone(),
                l.guest.clone(),
            ]
        })
        .collect();
    let mut out = report::table(
        &["layout", "what", "vCPUs", "pins (vCPU→host CPU)", "guest"],
        &rows,
    );
    if chosen.is_some() {
        let _ = writeln!(out, "* the planner's choice: {chosen_note}");
    } else {
        let _ = writeln!(out, "no planner's choice: {chosen_note}");
    }
    for l in layouts {
        for n in &l.notes {
            let _ = writeln!(out, "note ({}): {n}", l.name);
        }
    }
    out
}

/// The `PARTIAL: …` line, when some runs failed, were invalid or never started.
fn partial_line(r: &MatrixReport) -> Option<String> {
    if !r.partial {
        return None;
    }
    let failed = r.records.iter().filter(|x| x.error.is_some()).count();
    let invalid = r
        .records
        .iter()
        .filter(|x| x.error.is_none() && x.invalid.is_some())
        .count();
    let expected = r.layouts.len() * r.runs_per_layout;
    Some(format!(
        "PARTIAL: {} of {expected} runs measured ({failed} failed{}{}).",
        r.records.iter().filter(|x| x.counts()).count(),
        if invalid > 0 {
            format!(", {invalid} invalid: the guest did not match its layout")
        } else {
            String::new()
        },
        if r.records.len() < expected {
            ", the rest never started"
        } else {
            ""
        }
    ))
}

/// The runs that are listed but not compared: `FAILED: …` and `INVALID: …` lines.
fn excluded_lines(r: &MatrixReport) -> Vec<String> {
    let mut out = Vec::new();
    for rec in &r.records {
        if let Some(e) = &rec.error {
            out.push(format!("FAILED: {} run {}: {e}", rec.layout, rec.run));
        } else if let Some(why) = &rec.invalid {
            out.push(format!(
                "INVALID: {} run {}: {why} (not compared)",
                rec.layout, rec.run
            ));
        }
    }
    out
}

/// The terminal answer: the layouts, the table, the verdict, failed and invalid runs.
pub fn text(r: &MatrixReport) -> String {
    let mut out = String::new();
    if let Some(p) = partial_line(r) {
        let _ = writeln!(out, "{p}");
    }
    out.push_str(&layouts_text(
        &r.layouts,
        r.chosen.as_deref(),
        &r.chosen_note,
    ));
    for (layout, v) in &r.views {
        let _ = writeln!(out, "guest ({layout}): {}", v.summary());
    }
    for l in &r.links {
        let _ = writeln!(out, "note (host): {l}");
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out.push('\n');
    out.push_str(&report::text_comparison(&r.comparison));
    out.push('\n');
    for v in &r.verdict {
        let _ = writeln!(out, "{v}");
    }
    for line in excluded_lines(r) {
        let _ = writeln!(out, "{line}");
    }
    for rec in &r.records {
        for u in rec.user.iter().filter(|u| u.error.is_some()) {
            let _ = writeln!(
                out,
                "not read: {} run {} --run {}: {}",
                rec.layout,
                rec.run,
                u.name,
                u.error.as_deref().unwrap_or("")
            );
        }
    }
    out
}

/// Per layout (in order), the `--run` figures of its counted runs: (command, measure), one
/// per key and run.
fn layout_measures(r: &MatrixReport) -> Vec<(String, Vec<(String, readers::Measure)>)> {
    r.layouts
        .iter()
        .map(|l| {
            let ms = r
                .records
                .iter()
                .filter(|x| x.layout == l.name && x.counts())
                .flat_map(|x| &x.user)
                .flat_map(|u| run_measures(u).into_iter().map(|m| (u.name.clone(), m)))
                .collect();
            (l.name.clone(), ms)
        })
        .collect()
}

/// The HTML report: `report::html` of the per-layout runs, with the layouts, the planner's
/// choice, the guests' views and the verdict first, and a chart per family of `--run`
/// figures after the comparison.
pub fn html(r: &MatrixReport, title: &str) -> String {
    // the plans differ by design: the layouts' table says how (in matrix.json they are kept)
    let runs: Vec<RunFile> = r
        .per_layout
        .iter()
        .cloned()
        .map(|mut rf| {
            rf.plan = None;
            rf
        })
        .collect();
    let page = report::html(&runs, title);
    let mut s = String::from("<h2>Layouts</h2>");
    if let Some(p) = partial_line(r) {
        let _ = write!(
            s,
            "<p><strong>{}</strong> Their figures are missing, not zero (see the list below).</p>",
            svg::esc(&p)
        );
    }
    s.push_str("<table><tr><th>layout</th><th>what</th><th>vCPUs</th><th>pins</th><th>guest</th><th>notes</th></tr>");
    for l in &r.layouts {
        let chosen = r.chosen.as_deref() == Some(l.name.as_str());
        let invalid = r
            .records
            .iter()
            .any(|x| x.layout == l.name && x.error.is_none() && x.invalid.is_some());
        let _ = write!(
            s,
            "<tr><td>{}{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            svg::esc(&l.name),
            if chosen {
                " <strong>(planner's choice)</strong>"
            } else {
                ""
            },
            if invalid {
                " <strong>(invalid runs)</strong>"
            } else {
                ""
            },
            svg::esc(&l.describe),
            l.vcpus,
            svg::esc(&l.pins),
            svg::esc(&l.guest),
            svg::esc(&l.notes.join("; "))
        );
    }
    s.push_str("</table>");
    let _ = write!(s, "<p>{}</p>", svg::esc(&r.chosen_note));
    if !r.views.is_empty() {
        s.push_str("<h2>What each guest saw</h2><ul>");
        for (layout, v) in &r.views {
            let _ = write!(
                s,
                "<li>{}: {}</li>",
                svg::esc(layout),
                svg::esc(&v.summary())
            );
        }
        s.push_str("</ul>");
    }
    for l in &r.links {
        let _ = write!(s, "<p><strong>{}</strong></p>", svg::esc(l));
    }
    if !r.notes.is_empty() {
        s.push_str("<ul class=\"note\">");
        for n in &r.notes {
            let _ = write!(s, "<li>{}</li>", svg::esc(n));
        }
        s.push_str("</ul>");
    }
    s.push_str("<h2>Verdict</h2><ul>");
    for v in &r.verdict {
        let _ = write!(s, "<li>{}</li>", svg::esc(v));
    }
    for line in excluded_lines(r) {
        let _ = write!(s, "<li>{}</li>", svg::esc(&line));
    }
    s.push_str("</ul>");
    let page = match page.find("</h1>") {
        Some(i) => format!("{}{s}{}", &page[..i + 5], &page[i + 5..]),
        None => page,
    };
    let charts = report::reader_charts(&layout_measures(r));
    match (
        charts.is_empty(),
        page.rfind("<p class=\"note\">Generated by"),
    ) {
        (false, Some(i)) => format!("{}{charts}{}", &page[..i], &page[i..]),
        _ => page,
    }
}

#[cfg(test)]
mod tests;

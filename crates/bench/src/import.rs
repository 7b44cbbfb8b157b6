//! `vmtune bench import DIR`: a results tree someone already has — the r/VFIO pinning
//! study's `results/<gpu>/<config>/` (or `DIR/<config>/` without the GPU level) — read into
//! the comparison, JSON and HTML report `bench matrix` makes.
//!
//! ```text
//! DIR/                          a GPU level (rtx4090/, a100/, …) or the configs themselves
//!   <config>/                   a layout: its name as the directory is named (A, B, baseline)
//!     sysbench.txt stream.txt   each file read by its content (`readers::read_any`), its
//!     stream_node0_mem1.txt     name the figure's prefix; a STREAM file's name may give the
//!     latency.txt matmul.txt …  numactl binding (`stream::Binding::from_name`)
//!     numactl.txt lscpu.txt     guest-view files (`readers::view`): the layout's guest line
//!     meminfo.txt               and `views` in the JSON
//! ```
//!
//! Every config is a layout of the report; `baseline` or `default` comes first (the baseline
//! of every change), the others in name order. A figure a file printed more than once (five
//! `bandwidthTest` runs) gives one sample per repeat — the repeats inside one file count as
//! the layout's repeats, said in the notes; a figure printed once is one sample. Files no
//! reader knows are listed as not read; a config with no readable file is a failed run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::matrix::{self, LayoutSpec, MatrixReport, RunRecord, UserResult};
use crate::readers::{self, stream::Binding, view};

/// Files larger than this are not outputs of these tools (and are not read).
const MAX_FILE: u64 = 64 << 20;

/// What `import` was asked to do.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub dir: PathBuf,
    /// Write `matrix.json` and `matrix.html` here (in `OUT/<gpu>/` per GPU tree).
    pub out: Option<PathBuf>,
    /// Write the HTML report here (one GPU tree only).
    pub html: Option<PathBuf>,
}

/// One file of a config directory and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRead {
    pub config: String,
    /// The file's name in the config directory.
    pub file: String,
    /// The reader that read it: a tool id (`stream`, `nccl-tests`, …) or a guest-view file
    /// (`numactl-hardware`, `lscpu`, `meminfo`).
    pub read_as: Option<String>,
    /// How many figures it gave.
    pub measures: usize,
    /// Why it was not read.
    pub error: Option<String>,
}

/// One GPU tree (or the configs themselves) as a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportSet {
    /// The GPU level's directory name, `None` for `DIR/<config>/`.
    pub gpu: Option<String>,
    pub dir: PathBuf,
    pub files: Vec<FileRead>,
    pub report: MatrixReport,
}

/// What `import` read and wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    pub sets: Vec<ImportSet>,
    /// The files written (`--out`, `--html`).
    pub written: Vec<PathBuf>,
}

/// Reads the tree at `opts.dir` and writes the reports asked for.
pub fn run(opts: &ImportOptions) -> Result<Imported> {
    let sets = read_tree(&opts.dir)?;
    if opts.html.is_some() && sets.len() > 1 {
        let names: Vec<&str> = sets.iter().filter_map(|s| s.gpu.as_deref()).collect();
        return Err(BenchError::Invalid(format!(
            "{} holds {} GPU trees ({}): --html writes one report; use --out DIR for one each",
            opts.dir.display(),
            sets.len(),
            names.join(", ")
        )));
    }
    let mut written = Vec::new();
    if let Some(out) = &opts.out {
        for s in &sets {
            let dir = match &s.gpu {
                Some(g) => out.join(g),
                None => out.clone(),
            };
            fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
            let json = dir.join("matrix.json");
            let text = serde_json::to_string_pretty(&s.report)
                .map_err(|e| BenchError::Invalid(format!("serializing the report: {e}")))?;
            fs::write(&json, text + "\n").map_err(|e| BenchError::io(&json, e))?;
            let html = dir.join("matrix.html");
            fs::write(&html, html_of(s)).map_err(|e| BenchError::io(&html, e))?;
            written.extend([json, html]);
        }
    }
    if let (Some(path), Some(s)) = (&opts.html, sets.first()) {
        fs::write(path, html_of(s)).map_err(|e| BenchError::io(path, e))?;
        written.push(path.clone());
    }
    Ok(Imported { sets, written })
}

fn html_of(s: &ImportSet) -> String {
    let title = match &s.gpu {
        Some(g) => format!("vmtune bench import: {} ({g})", s.dir.display()),
        None => format!("vmtune bench import: {}", s.dir.display()),
    };
    matrix::html(&s.report, &title)
}

/// The terminal answer: per set, the matrix's text and the files not read.
pub fn text(imported: &Imported) -> String {
    let mut out = String::new();
    for s in &imported.sets {
        if let Some(g) = &s.gpu {
            let _ = writeln!(out, "== {g} ({}) ==", s.dir.display());
        }
        out.push_str(&matrix::text(&s.report));
        for f in s.files.iter().filter(|f| f.error.is_some()) {
            let _ = writeln!(
                out,
                "not read: {}/{}: {}",
                f.config,
                f.file,
                f.error.as_deref().unwrap_or("")
            );
        }
        out.push('\n');
    }
    for w in &imported.written {
        let _ = writeln!(out, "wrote {}", w.display());
    }
    out
}

/// The subdirectories of `dir`, by name, hidden ones left out.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| BenchError::io(dir, e))? {
        let e = e.map_err(|e| BenchError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if e.path().is_dir() {
            out.push((name, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The regular files of `dir`, by name, hidden ones left out.
fn files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| BenchError::io(dir, e))? {
        let e = e.map_err(|e| BenchError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && e.path().is_file() {
            out.push((name, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Finds the configs of the tree: `DIR/<config>/files` (one set) and `DIR/<gpu>/<config>/files`
/// (a set per GPU directory). A directory holding files is a config; one holding only
/// directories is a GPU level.
pub fn read_tree(dir: &Path) -> Result<Vec<ImportSet>> {
    if !dir.is_dir() {
        return Err(BenchError::Invalid(format!(
            "{}: not a directory (expected results/<gpu>/<config>/ or DIR/<config>/)",
            dir.display()
        )));
    }
    let mut configs: Vec<(String, PathBuf)> = Vec::new();
    let mut gpus: Vec<(String, Vec<(String, PathBuf)>)> = Vec::new();
    for (name, path) in subdirs(dir)? {
        if !files(&path)?.is_empty() {
            configs.push((name, path));
        } else {
            let inner: Vec<(String, PathBuf)> = subdirs(&path)?
                .into_iter()
                .filter(|(_, p)| files(p).is_ok_and(|f| !f.is_empty()))
                .collect();
            if !inner.is_empty() {
                gpus.push((name, inner));
            }
        }
    }
    let mut sets = Vec::new();
    if !configs.is_empty() {
        sets.push(read_set(None, dir, configs)?);
    }
    for (gpu, inner) in gpus {
        sets.push(read_set(Some(gpu.clone()), &dir.join(&gpu), inner)?);
    }
    if sets.is_empty() {
        return Err(BenchError::Invalid(format!(
            "{}: no config directories with files (expected results/<gpu>/<config>/FILE or DIR/<config>/FILE)",
            dir.display()
        )));
    }
    Ok(sets)
}

/// `baseline` or `default` first, the rest in name order.
fn config_order(configs: &mut [(String, PathBuf)]) {
    configs.sort_by_key(|(n, _)| {
        let base = matches!(n.to_ascii_lowercase().as_str(), "baseline" | "default");
        (!base, n.clone())
    });
}

/// What one config directory gave.
struct Config {
    user: Vec<UserResult>,
    view: Option<view::GuestView>,
    files: Vec<FileRead>,
}

/// Reads every file of one config directory.
fn read_config(config: &str, dir: &Path) -> Result<Config> {
    let mut c = Config {
        user: Vec::new(),
        view: None,
        files: Vec::new(),
    };
    for (name, path) in files(dir)? {
        let mut f = FileRead {
            config: config.to_string(),
            file: name.clone(),
            read_as: None,
            measures: 0,
            error: None,
        };
        let size = fs::metadata(&path)
            .map_err(|e| BenchError::io(&path, e))?
            .len();
        let text = if size > MAX_FILE {
            f.error = Some(format!("{size} bytes: larger than any output read here"));
            None
        } else {
            let bytes = fs::read(&path).map_err(|e| BenchError::io(&path, e))?;
            match String::from_utf8(bytes) {
                Ok(t) => Some(t),
                Err(_) => {
                    f.error = Some("not text (not UTF-8)".into());
                    None
                }
            }
        };
        if let Some(text) = text {
            read_file(&name, &text, &mut c, &mut f);
        }
        c.files.push(f);
    }
    Ok(c)
}

/// One file's text: a guest-view file, or a benchmark output read by its content.
fn read_file(name: &str, text: &str, c: &mut Config, f: &mut FileRead) {
    if let Some(got) = view::read_any(text) {
        match got {
            Ok((source, v)) => {
                f.read_as = Some(
                    match source {
                        view::ViewSource::NumactlHardware => "numactl-hardware",
                        view::ViewSource::Lscpu => "lscpu",
                        view::ViewSource::Meminfo => "meminfo",
                    }
                    .to_string(),
                );
                c.view = Some(match c.view.take() {
                    Some(old) => old.merge(v),
                    None => v,
                });
            }
            Err(e) => f.error = Some(e.to_string()),
        }
        return;
    }
    let stem = name.split('.').next().unwrap_or(name);
    let mut u = UserResult::from_text(stem, text);
    if u.tool.as_deref() == Some(readers::Tool::Stream.id()) {
        if let Some(b) = Binding::from_name(name) {
            for m in u
                .measures
                .iter_mut()
                .filter(|m| !m.params.contains_key("membind"))
            {
                b.apply(m);
            }
            readers::mark_repeats(&mut u.measures);
        }
    }
    f.read_as = u.tool.clone();
    f.measures = u.measures.len();
    f.error = u.error.clone();
    if u.error.is_none() {
        c.user.push(u);
    }
}

/// The configs of one set read and summarized: each a layout, its records one per repeat.
fn read_set(
    gpu: Option<String>,
    dir: &Path,
    mut configs: Vec<(String, PathBuf)>,
) -> Result<ImportSet> {
    config_order(&mut configs);
    let mut layouts = Vec::new();
    let mut records = Vec::new();
    let mut all_files = Vec::new();
    let mut views = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, path) in &configs {
        let c = read_config(name, path)?;
        let rel = path.strip_prefix(dir).unwrap_or(path);
        layouts.push(LayoutSpec {
            name: name.clone(),
            describe: format!("imported from {}", rel.display()),
            domain_xml: String::new(),
            vcpus: c.view.as_ref().and_then(|v| v.cpus).unwrap_or(0),
            pins: "not recorded".into(),
            guest: c
                .view
                .as_ref()
                .map_or("not recorded".into(), view::GuestView::summary),
            notes: Vec::new(),
            plan: None,
            // a results tree says what its guest saw, not what it was told
            expect: None,
        });
        for u in &c.user {
            if let Some(n) = u.facts.get("repeats") {
                notes.push(format!(
                    "{name}/{}: {n} repeats of its figures in one output count as {name}'s repeats (n = {n})",
                    u.name
                ));
            }
        }
        records.extend(records_of(name, &c.user, records.len()));
        if c.user.is_empty() {
            let mut failed = RunRecord::new(name, 1, records.len() + 1, 0.0);
            failed.error = Some(format!(
                "{}: no benchmark output among its files{}",
                path.display(),
                if c.view.is_some() {
                    " (guest-view files only)"
                } else {
                    ""
                }
            ));
            records.push(failed);
        }
        if let Some(v) = c.view {
            views.insert(name.clone(), v);
        }
        all_files.extend(c.files);
    }
    let runs = records.iter().map(|r| r.run).max().unwrap_or(1);
    let mut report = matrix::summarize(
        layouts,
        runs,
        records,
        None,
        "imported results".into(),
        None,
    );
    report.partial = report.records.iter().any(|r| !r.counts());
    report.views = views;
    notes.append(&mut report.notes);
    report.notes = notes;
    Ok(ImportSet {
        gpu,
        dir: dir.to_path_buf(),
        files: all_files,
        report,
    })
}

/// A config's records: record k holds the k-th repeat of every repeated figure, and record 1
/// also the figures printed once.
fn records_of(config: &str, user: &[UserResult], before: usize) -> Vec<RunRecord> {
    let repeats = user
        .iter()
        .flat_map(|u| &u.measures)
        .filter_map(|m| m.repeat)
        .max()
        .unwrap_or(1);
    (1..=repeats as usize)
        .filter(|_| !user.is_empty())
        .map(|k| {
            let user = user
                .iter()
                .map(|u| {
                    let mut one = u.clone();
                    one.measures = u
                        .measures
                        .iter()
                        .filter(|m| m.repeat.unwrap_or(1) as usize == k)
                        .cloned()
                        .map(|mut m| {
                            m.repeat = None;
                            m
                        })
                        .collect();
                    one.facts.remove("repeats");
                    one
                })
                .collect();
            let mut rec = RunRecord::new(config, k, before + k, 0.0);
            rec.user = user;
            rec
        })
        .collect()
}

//! Runs of the same benchmarks under different configurations, side by side.
//!
//! Each run file holds every metric's repeat samples. For each metric, each run gets its
//! median and spread (min–max); the change is the median's relative difference from the first
//! (baseline) run; a change counts as **beyond noise** when both runs have at least two
//! repeats and their min–max ranges do not overlap. That rule is conservative (any overlap is
//! "within noise") and needs no distribution assumptions.
//!
//! `differences` lists what differed between the runs: configuration names, the environment
//! (kernel, clocksource, host), the host model and the applied plan (JSON paths whose values
//! differ), so a reader knows what the change is attributed to.

use serde::{Deserialize, Serialize};

use crate::stats::{beyond_noise, Summary};
use crate::RunFile;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// (median − baseline median) / baseline median, percent.
    pub pct: f64,
    /// `None` when a side has fewer than two repeats.
    pub beyond_noise: Option<bool>,
    /// Whether the change goes the good way for this metric.
    pub better: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    /// One per run (`None` where the run lacks the metric).
    pub runs: Vec<Option<Summary>>,
    /// One per run; the baseline's is `None`.
    pub changes: Vec<Option<Change>>,
    /// One per run: its figures are estimates from samples (shown with `~`).
    #[serde(default)]
    pub approximate: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub configs: Vec<String>,
    pub differences: Vec<String>,
    pub rows: Vec<Row>,
}

pub fn compare(runs: &[RunFile]) -> Comparison {
    let mut names: Vec<(String, String, bool)> = Vec::new();
    for r in runs {
        for m in &r.metrics {
            if !names.iter().any(|(n, _, _)| n == &m.name) {
                names.push((m.name.clone(), m.unit.clone(), m.higher_is_better));
            }
        }
    }
    let rows = names
        .into_iter()
        .map(|(metric, unit, hib)| {
            let sums: Vec<Option<Summary>> = runs
                .iter()
                .map(|r| {
                    r.metrics
                        .iter()
                        .find(|m| m.name == metric)
                        .and_then(|m| Summary::of(&m.samples))
                })
                .collect();
            let base = sums.first().cloned().flatten();
            let changes = sums
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (b, s) = (base.as_ref()?, s.as_ref()?);
                    if i == 0 || b.median == 0.0 {
                        return None;
                    }
                    let pct = (s.median - b.median) / b.median.abs() * 100.0;
                    Some(Change {
                        pct,
                        beyond_noise: beyond_noise(b, s),
                        better: if hib { pct > 0.0 } else { pct < 0.0 },
                    })
                })
                .collect();
            let approximate = runs
                .iter()
                .map(|r| r.metrics.iter().any(|m| m.name == metric && m.approximate))
                .collect();
            Row {
                metric,
                unit,
                higher_is_better: hib,
                runs: sums,
                changes,
                approximate,
            }
        })
        .collect();
    Comparison {
        configs: runs.iter().map(|r| r.config.clone()).collect(),
        differences: differences(runs),
        rows,
    }
}

/// Column heads for runs read from `files` (same order): the configuration given with
/// `--config`, else the file's name without `.json`; where two would read the same, the file
/// name (or, if that is shared too, the path) is added.
pub fn labels(runs: &[RunFile], files: &[std::path::PathBuf]) -> Vec<String> {
    let file_name = |f: &std::path::Path| {
        f.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.display().to_string())
    };
    let base: Vec<String> = runs
        .iter()
        .zip(files)
        .map(|(r, f)| {
            if r.config_given {
                r.config.clone()
            } else {
                f.file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| r.config.clone())
            }
        })
        .collect();
    let count = |v: &[String], x: &String| v.iter().filter(|y| *y == x).count();
    let with = |how: &dyn Fn(&std::path::Path) -> String| -> Vec<String> {
        base.iter()
            .zip(files)
            .map(|(l, f)| {
                if count(&base, l) > 1 {
                    format!("{l} ({})", how(f))
                } else {
                    l.clone()
                }
            })
            .collect()
    };
    let by_name = with(&file_name);
    if by_name.iter().all(|l| count(&by_name, l) == 1) {
        by_name
    } else {
        with(&|f: &std::path::Path| f.display().to_string())
    }
}

/// Flatten JSON into `path = value` leaves.
fn flatten(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(x, p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(x, format!("{path}[{i}]"), out);
            }
        }
        other => out.push((path, other.to_string())),
    }
}

/// Paths whose values differ between `a` and `b` (at most `limit`, then a count).
pub fn json_diff(a: &serde_json::Value, b: &serde_json::Value, limit: usize) -> Vec<String> {
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    flatten(a, String::new(), &mut fa);
    flatten(b, String::new(), &mut fb);
    let ma: std::collections::BTreeMap<_, _> = fa.into_iter().collect();
    let mb: std::collections::BTreeMap<_, _> = fb.into_iter().collect();
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(absent)".into());
            format!("{k}: {} → {}", show(ma.get(k)), show(mb.get(k)))
        })
        .collect();
    let n = diffs.len();
    let mut out: Vec<String> = diffs.into_iter().take(limit).collect();
    if n > limit {
        out.push(format!("… and {} more", n - limit));
    }
    out
}

/// The host model without what changes from second to second (interrupt counts, free
/// memory and free hugepages), so two runs on one machine compare equal.
pub fn host_shape(h: &topo::Host) -> serde_json::Value {
    let mut v = serde_json::to_value(h).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("interrupts");
    }
    if let Some(nodes) = v.get_mut("numa_nodes").and_then(|n| n.as_array_mut()) {
        for n in nodes {
            if let Some(o) = n.as_object_mut() {
                o.remove("free_bytes");
            }
            if let Some(hp) = n.get_mut("hugepages").and_then(|h| h.as_array_mut()) {
                for p in hp {
                    if let Some(o) = p.as_object_mut() {
                        o.remove("free");
                    }
                }
            }
        }
    }
    v
}

fn differences(runs: &[RunFile]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(base) = runs.first() else {
        return out;
    };
    for r in runs.iter().skip(1) {
        let who = format!("{} vs {}", r.config, base.config);
        let e0 = serde_json::to_value(&base.environment).unwrap_or_default();
        let e1 = serde_json::to_value(&r.environment).unwrap_or_default();
        for d in json_diff(&e0, &e1, 8) {
            out.push(format!("{who}: environment.{d}"));
        }
        match (&base.host, &r.host) {
            (Some(h0), Some(h1)) => {
                for d in json_diff(&host_shape(h0), &host_shape(h1), 8) {
                    out.push(format!("{who}: host.{d}"));
                }
            }
            (Some(_), None) | (None, Some(_)) => {
                out.push(format!("{who}: host model recorded in only one run"))
            }
            _ => {}
        }
        match (&base.plan, &r.plan) {
            (None, None) => {}
            (p0, p1) => {
                let null = serde_json::Value::Null;
                let d = json_diff(
                    p0.as_ref().unwrap_or(&null),
                    p1.as_ref().unwrap_or(&null),
                    12,
                );
                for x in d {
                    out.push(format!("{who}: plan.{x}"));
                }
            }
        }
        // benchmark settings, for the benchmarks both runs have
        let mut s0 = serde_json::Map::new();
        let mut s1 = serde_json::Map::new();
        if let (Some(m0), Some(m1)) = (&base.membw, &r.membw) {
            let f = |m: &crate::membw::MembwResult| serde_json::json!({"threads": m.threads, "cpus": m.cpus, "array_bytes": m.array_bytes});
            s0.insert("membw".into(), f(m0));
            s1.insert("membw".into(), f(m1));
        }
        if let (Some(l0), Some(l1)) = (&base.latency, &r.latency) {
            let f = |l: &crate::latency::LatencyResult| serde_json::json!({"policy": l.policy, "load_cpus": l.load_cpus, "interval_us": l.interval_us});
            s0.insert("latency".into(), f(l0));
            s1.insert("latency".into(), f(l1));
        }
        if !base.frametimes.is_empty() && !r.frametimes.is_empty() {
            // frames vs samples, and which applications the figures are of
            let f = |logs: &[crate::FrameLogResult]| {
                let mut kinds: Vec<&str> = logs.iter().map(|l| l.kind.noun()).collect();
                kinds.dedup();
                let mut apps: Vec<String> = logs
                    .iter()
                    .filter_map(|l| l.app.application.clone())
                    .collect();
                apps.sort();
                apps.dedup();
                let apps = if apps.is_empty() {
                    "(none named in the log)".to_string()
                } else {
                    apps.join(",")
                };
                serde_json::json!({"rows": kinds.join("+"), "applications": apps})
            };
            s0.insert("frametimes".into(), f(&base.frametimes));
            s1.insert("frametimes".into(), f(&r.frametimes));
        }
        for d in json_diff(&s0.into(), &s1.into(), 8) {
            out.push(format!("{who}: {d}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metric;

    fn run(config: &str, samples: Vec<f64>) -> RunFile {
        let mut r = RunFile::new(config);
        r.metrics = vec![Metric::new("membw.triad", "GB/s", true, samples)];
        r
    }

    #[test]
    fn medians_changes_and_noise() {
        let a = run("default", vec![10.0, 10.5, 9.8]);
        let b = run("pinned", vec![20.0, 21.0, 19.0]);
        let c = run("smt", vec![10.2, 10.3, 10.1]);
        let mut d = run("one-shot", vec![30.0]);
        d.plan = Some(serde_json::json!({"vcpus": [{"vcpu": 0, "cpu": 2}]}));
        let cmp = compare(&[a, b, c, d]);
        assert_eq!(cmp.configs, ["default", "pinned", "smt", "one-shot"]);
        let row = &cmp.rows[0];
        assert_eq!(row.runs[0].as_ref().unwrap().median, 10.0);
        let ch = row.changes[1].as_ref().unwrap();
        assert!((ch.pct - 100.0).abs() < 1e-9);
        assert_eq!(ch.beyond_noise, Some(true));
        assert!(ch.better);
        assert_eq!(row.changes[2].as_ref().unwrap().beyond_noise, Some(false));
        assert_eq!(row.changes[3].as_ref().unwrap().beyond_noise, None);
        assert!(row.changes[0].is_none());
        assert!(
            cmp.differences
                .iter()
                .any(|d| d.contains("one-shot vs default: plan.vcpus[0].cpu: (absent) → 2")),
            "{:?}",
            cmp.differences
        );
    }

    #[test]
    fn lower_is_better_and_missing() {
        let mut a = RunFile::new("a");
        a.metrics = vec![Metric::new(
            "latency.cpu0.p99",
            "µs",
            false,
            vec![50.0, 60.0],
        )];
        let b = RunFile::new("b");
        let mut c = RunFile::new("c");
        c.metrics = vec![Metric::new(
            "latency.cpu0.p99",
            "µs",
            false,
            vec![20.0, 25.0],
        )];
        let cmp = compare(&[a, b, c]);
        let row = &cmp.rows[0];
        assert!(row.runs[1].is_none() && row.changes[1].is_none());
        let ch = row.changes[2].as_ref().unwrap();
        assert!(ch.better && ch.pct < 0.0 && ch.beyond_noise == Some(true));
    }

    #[test]
    fn host_differences_ignore_volatile_counters() {
        let h0 = topo::builtin::default_host();
        let mut h1 = h0.clone();
        h1.interrupts = None;
        for n in &mut h1.numa_nodes {
            n.free_bytes = Some(12345);
        }
        let mut a = run("a", vec![1.0]);
        a.host = Some(h0.clone());
        let mut b = run("b", vec![1.0]);
        b.host = Some(h1.clone());
        assert!(compare(&[a.clone(), b.clone()]).differences.is_empty());
        h1.pus.pop();
        b.host = Some(h1);
        let d = compare(&[a, b]).differences;
        assert!(
            d.iter().any(|x| x.starts_with("b vs a: host.pus[")),
            "{d:?}"
        );
    }

    #[test]
    fn labels_use_file_names_when_no_config_was_given() {
        use std::path::PathBuf;
        let mut a = run("membw", vec![1.0]);
        a.config_given = false;
        let mut b = run("membw", vec![2.0]);
        b.config_given = false;
        let files = [
            PathBuf::from("/t/unpinned.json"),
            PathBuf::from("/t/pinned.json"),
        ];
        assert_eq!(
            labels(&[a.clone(), b.clone()], &files),
            ["unpinned", "pinned"]
        );
        // given names are kept; a clash gets the file name
        let c = run("pinned", vec![3.0]);
        let files3 = [
            files[0].clone(),
            files[1].clone(),
            PathBuf::from("/u/x.json"),
        ];
        assert_eq!(
            labels(&[a.clone(), b.clone(), c], &files3),
            ["unpinned", "pinned (pinned.json)", "pinned (x.json)"]
        );
        // same file name in two directories: the paths
        let files = [PathBuf::from("/a/run.json"), PathBuf::from("/b/run.json")];
        assert_eq!(
            labels(&[a, b], &files),
            ["run (/a/run.json)", "run (/b/run.json)"]
        );
    }

    #[test]
    fn json_diff_limits() {
        let a = serde_json::json!({"x": [1, 2, 3], "y": {"z": "a"}});
        let b = serde_json::json!({"x": [1, 5, 6], "y": {"z": "b"}});
        let d = json_diff(&a, &b, 2);
        assert_eq!(d, ["x[1]: 2 → 5", "x[2]: 3 → 6", "… and 1 more"]);
    }
}

//! nccl-tests (`all_reduce_perf`, `all_gather_perf`, …): the result table and the average
//! bus bandwidth.
//!
//! ```text
//! #                                                              out-of-place                       in-place
//! #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//! #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
//!      1048576        262144     float     sum      -1    28.15   37.25   65.19      0    27.52   38.10   66.67      0
//! # Avg bus bandwidth    : 65.9300
//! ```
//!
//! The table is read by its header, so every layout the tests have printed is read: since
//! 2022 (`size count type redop root`, `#wrong` a count or `N/A`), 2019–2022 (each test its
//! own leading columns: `redop` without `root`, neither for all_gather, `error` instead of
//! `#wrong`), 2017 (`bytes N type op`, time in ms, `res`), the copy-overlap `copybw` column,
//! per-iteration columns (`-I 1`), timestamps (`-S 1`), and rows with only the in-place
//! half (trace replay).

use std::collections::BTreeMap;

use super::{number, whole, Measure, ReadError, Tool};

const TOOL: Tool = Tool::NcclTests;
/// The benchmark name of every measure.
pub const BENCHMARK: &str = "nccl-tests";

/// The columns of a table, from its header.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    /// Leading columns: size, count, type, then any of redop/op and root.
    lead: Vec<String>,
    /// One half's columns: time, algbw, busbw, …, `#wrong`, … (printed once per half).
    half: Vec<String>,
    /// Unit of the time columns: `ms` for the 2017 layout, `us` since.
    time_unit: &'static str,
}

/// Whether `line` (trimmed) is a table header: `# size count … algbw busbw …`.
pub fn is_header(line: &str) -> bool {
    layout(line).is_some()
}

/// The table layout a header line gives, if it is one.
fn layout(line: &str) -> Option<Layout> {
    let cols: Vec<&str> = line.strip_prefix('#')?.split_whitespace().collect();
    let first = *cols.first()?;
    if !matches!(first, "size" | "bytes") || !cols.contains(&"algbw") || !cols.contains(&"busbw") {
        return None;
    }
    let start = cols.iter().position(|c| matches!(*c, "time" | "cputime"))?;
    let lead: Vec<String> = cols[..start].iter().map(|c| c.to_string()).collect();
    if lead.len() < 2 {
        return None;
    }
    let mut rest: Vec<&str> = cols[start..].to_vec();
    if rest.last() == Some(&"timestamp") {
        rest.pop();
    }
    let half_len = rest[1..]
        .iter()
        .position(|c| *c == rest[0])
        .map_or(rest.len(), |p| p + 1);
    Some(Layout {
        lead,
        half: rest[..half_len].iter().map(|c| c.to_string()).collect(),
        time_unit: if first == "bytes" { "ms" } else { "us" },
    })
}

/// The metric and unit a half's column gives, `None` for columns not read (`#wrong`).
fn column_metric(column: &str, time_unit: &'static str) -> Option<(&'static str, &'static str)> {
    Some(match column {
        "time" => ("time", time_unit),
        "cputime" => ("cputime", time_unit),
        "algbw" => ("algbw", "GB/s"),
        "busbw" => ("busbw", "GB/s"),
        "copybw" => ("copybw", "GB/s"),
        "i_min" => ("iter_min", "us"),
        "i_max" => ("iter_max", "us"),
        "i_p99" => ("iter_p99", "us"),
        "i_cv%" => ("iter_cv", "%"),
        _ => return None,
    })
}

/// The value of an `Avg bus bandwidth : X` line (with or without the leading `#`).
pub fn avg_busbw(line: &str) -> Option<f64> {
    let t = line.trim_start_matches('#').trim_start();
    let rest = t.strip_prefix("Avg bus bandwidth")?.trim_start();
    let rest = rest.strip_prefix(':')?;
    number(rest.split_whitespace().next()?)
}

/// Reads every table row of `text`: per size (`size_bytes`) and half (`placement`
/// `out-of-place` or `in-place`), metrics `time` (us; ms in 2017's layout), `algbw` and
/// `busbw` (GB/s) and whatever else the header names (`copybw`, `cputime`, `iter_min`, …);
/// parameters `count`, `type`, `redop` (not when `none`), `root` (not when `-1`) and
/// `collective` (from `# Collective test starting:`, when printed). The `Avg bus bandwidth`
/// line is metric `avg_busbw` (GB/s).
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = Vec::new();
    let mut current: Option<Layout> = None;
    let mut collective: Option<String> = None;
    let mut rows = 0;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        let first = out.len();
        if t.starts_with('#') {
            if let Some(l) = layout(t) {
                current = Some(l);
            } else if let Some(v) = avg_busbw(t) {
                out.push(Measure::new(BENCHMARK, "avg_busbw", v, "GB/s"));
            } else if let Some(name) = t
                .trim_start_matches('#')
                .trim_start()
                .strip_prefix("Collective test starting:")
            {
                let name = name.trim().rsplit('/').next().unwrap_or_default();
                collective = Some(name.to_string()).filter(|n| !n.is_empty());
            }
        } else if let Some(v) = avg_busbw(t) {
            out.push(Measure::new(BENCHMARK, "avg_busbw", v, "GB/s"));
        } else if let Some(layout) = &current {
            if read_row(layout, i, line, &mut out)? {
                rows += 1;
            }
        }
        // The collective named last (the one running when this line was printed).
        if let Some(name) = &collective {
            for m in &mut out[first..] {
                m.params.insert("collective".to_string(), name.clone());
            }
        }
    }
    if current.is_none() {
        return Err(ReadError::missing(
            TOOL,
            "`size count type … time algbw busbw` header",
        ));
    }
    if rows == 0 {
        return Err(ReadError::missing(TOOL, "result rows under the header"));
    }
    Ok(out)
}

/// Reads one line under a header into `out`: `false` if it is not a result row (it does
/// not start with a size and a count), an error if it does but does not fit the layout.
fn read_row(
    layout: &Layout,
    i: usize,
    line: &str,
    out: &mut Vec<Measure>,
) -> Result<bool, ReadError> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let (Some(size), Some(count)) = (
        tokens.first().and_then(|t| whole(t)),
        tokens.get(1).and_then(|t| whole(t)),
    ) else {
        return Ok(false);
    };
    let bad = |why: &str| ReadError::bad_line(TOOL, i, line, why);
    let n_lead = layout.lead.len();
    let n_half = layout.half.len();
    let values = tokens.get(n_lead..).unwrap_or_default();
    let placements: &[&str] = if values.len() >= 2 * n_half {
        &["out-of-place", "in-place"]
    } else if values.len() >= n_half {
        &["in-place"]
    } else {
        return Err(bad(&format!(
            "expected {} columns, found {}",
            n_lead + 2 * n_half,
            tokens.len()
        )));
    };
    let mut base = Measure::new(BENCHMARK, "", 0.0, "").with_size(size);
    base.params.insert("count".to_string(), count.to_string());
    for (column, token) in layout.lead.iter().zip(&tokens).skip(2) {
        let key = match (column.as_str(), *token) {
            ("redop" | "op", "none") | ("root", "-1") => continue,
            ("op", _) => "redop",
            (name, _) => name,
        };
        base.params.insert(key.to_string(), token.to_string());
    }
    for (h, placement) in placements.iter().enumerate() {
        let half = &values[h * n_half..(h + 1) * n_half];
        for (column, token) in layout.half.iter().zip(half) {
            let Some((metric, unit)) = column_metric(column, layout.time_unit) else {
                continue;
            };
            let value =
                number(token).ok_or_else(|| bad(&format!("{column} `{token}` is not a number")))?;
            let mut m = base.clone().with_param("placement", placement);
            m.metric = metric.to_string();
            m.value = value;
            m.unit = unit.to_string();
            out.push(m);
        }
    }
    Ok(true)
}

/// How the test ran, from its preamble: `NCCL_*` settings it printed (`NCCL_P2P_DISABLE=1`
/// echoed by a runner or `env`, or NCCL's own `NCCL INFO NCCL_P2P_DISABLE set by
/// environment to 1`), `ranks` (the `#  Rank  N Group …` lines), `gpus` (`nGpus` × `nThread`
/// per process from `# nThread 1 nGpus 2 …`, or the ranks when that line is missing) and
/// `nthread`. A later setting of one variable wins.
pub fn facts(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut ranks = 0u32;
    let (mut nthread, mut ngpus) = (None, None);
    for line in text.lines() {
        let t = line.trim().trim_start_matches('#').trim();
        if let Some((name, value)) = nccl_setting(t) {
            out.insert(name, value);
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        if words.first() == Some(&"Rank") && words.get(1).and_then(|w| whole(w)).is_some() {
            ranks += 1;
        }
        for pair in words.windows(2) {
            match pair[0] {
                "nThread" => nthread = whole(pair[1]).or(nthread),
                "nGpus" => ngpus = whole(pair[1]).or(ngpus),
                _ => {}
            }
        }
    }
    if ranks > 0 {
        out.insert("ranks".to_string(), ranks.to_string());
    }
    if let Some(t) = nthread {
        out.insert("nthread".to_string(), t.to_string());
    }
    match (nthread, ngpus) {
        // every rank is one GPU: ranks counted across processes win over one process's line
        _ if ranks > 0 => {
            out.insert("gpus".to_string(), ranks.to_string());
        }
        (t, Some(g)) => {
            out.insert("gpus".to_string(), (t.unwrap_or(1) * g).to_string());
        }
        _ => {}
    }
    out
}

/// `NCCL_X=value` (alone or after `export`), or NCCL's `… NCCL INFO NCCL_X set by
/// environment to value.`
fn nccl_setting(line: &str) -> Option<(String, String)> {
    let valid = |n: &str| {
        n.len() > 5
            && n.starts_with("NCCL_")
            && n.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    if let Some(i) = line.find(" set by environment to ") {
        let name = line[..i].split_whitespace().last()?;
        let value = line[i + " set by environment to ".len()..]
            .trim()
            .trim_end_matches('.');
        return valid(name).then(|| (name.to_string(), value.to_string()));
    }
    let t = line.strip_prefix("export ").unwrap_or(line);
    let (name, value) = t.split_once('=')?;
    let value = value.trim().trim_matches(['"', '\'']);
    (valid(name.trim()) && !value.contains(char::is_whitespace) && !value.is_empty())
        .then(|| (name.trim().to_string(), value.to_string()))
}

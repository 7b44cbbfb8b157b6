//! sysbench 1.0.x `cpu` and `memory` reports.
//!
//! ```text
//! CPU speed:
//!     events per second:  4388.62
//! Total operations: 66231521 (6622337.81 per second)      (memory; 1.0.0: Operations performed: N (X ops/sec))
//! 64679.22 MiB transferred (6467.13 MiB/sec)              (memory)
//! General statistics:                                     (later builds: Throughput: / events/s (eps): / time elapsed:)
//!     total time:                          10.0009s
//!     total number of events:              43897
//! Latency (ms):
//!          min:                                    0.88
//!          95th percentile:                        0.95
//! Threads fairness:
//!     events (avg/stddev):           10974.2500/21.14
//!     execution time (avg/stddev):   9.9973/0.00
//! ```

use super::{number, whole, Measure, ReadError, Tool};

/// The benchmark name of `sysbench cpu` measures.
pub const CPU: &str = "sysbench-cpu";
/// The benchmark name of `sysbench memory` measures.
pub const MEMORY: &str = "sysbench-memory";

/// Reads a `sysbench cpu` report: `events_per_second` (events/s) and the statistics every
/// sysbench test prints (see [`read_report`]).
pub fn read_cpu(text: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = read_report(text, Tool::SysbenchCpu, CPU)?;
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.trim().strip_prefix("events per second:") {
            let value = single(rest).ok_or_else(|| {
                ReadError::bad_line(
                    Tool::SysbenchCpu,
                    i,
                    line,
                    "events per second is not a number",
                )
            })?;
            out.push(Measure::new(CPU, "events_per_second", value, "events/s"));
        }
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            Tool::SysbenchCpu,
            "`events per second:` or general statistics",
        ));
    }
    Ok(out)
}

/// Reads a `sysbench memory` report: `total_operations`, `operations_per_second` (ops/s),
/// `transferred` and `transfer_rate` (in the unit printed, MiB and MiB/s), and the
/// statistics every sysbench test prints (see [`read_report`]).
pub fn read_memory(text: &str) -> Result<Vec<Measure>, ReadError> {
    const TOOL: Tool = Tool::SysbenchMemory;
    let mut out = read_report(text, TOOL, MEMORY)?;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        let bad = |why: &str| ReadError::bad_line(TOOL, i, line, why);
        if let Some(rest) = t
            .strip_prefix("Total operations:")
            .or_else(|| t.strip_prefix("Operations performed:"))
        {
            let (count, rate) =
                count_and_rate(rest).ok_or_else(|| bad("expected `N (X per second)`"))?;
            out.push(Measure::new(
                MEMORY,
                "total_operations",
                count,
                "operations",
            ));
            out.push(Measure::new(MEMORY, "operations_per_second", rate, "ops/s"));
        } else if let Some((amount, rest)) = t.split_once(" transferred (") {
            let (value, unit) =
                amount_and_unit(amount).ok_or_else(|| bad("expected `X MiB transferred`"))?;
            let (rate, rate_unit) = rest
                .strip_suffix(')')
                .and_then(amount_and_unit)
                .ok_or_else(|| bad("expected `(X MiB/sec)`"))?;
            out.push(Measure::new(MEMORY, "transferred", value, unit));
            let rate_unit = match rate_unit.strip_suffix("/sec") {
                Some(per) => format!("{per}/s"),
                None => rate_unit.to_string(),
            };
            out.push(Measure::new(MEMORY, "transfer_rate", rate, &rate_unit));
        }
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            TOOL,
            "`Total operations:`, `MiB transferred` or general statistics",
        ));
    }
    Ok(out)
}

/// Which part of the report a line is in.
#[derive(Clone, Copy, PartialEq)]
enum Section {
    Other,
    Latency,
}

/// Reads the statistics every sysbench 1.0.x test prints, named for `benchmark`:
/// `total_time` (s), `total_events`, `throughput_events_per_second` (the `Throughput:`
/// wording only),
/// `latency_min`, `latency_avg`, `latency_max`, `latency_p95` (any percentile), `latency_sum`
/// (ms), `fairness_events_avg`/`_stddev` (events) and `fairness_time_avg`/`_stddev` (s).
pub fn read_report(text: &str, tool: Tool, benchmark: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = Vec::new();
    let mut section = Section::Other;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            section = Section::Other;
            continue;
        }
        if t.starts_with("Latency (ms):") {
            section = Section::Latency;
            continue;
        }
        let Some((label, value)) = t.split_once(':') else {
            continue;
        };
        let bad = |why: &str| ReadError::bad_line(tool, i, line, why);
        let label = label.trim();
        let found: Vec<Measure> = if section == Section::Latency {
            latency(label, value, benchmark)
                .map_err(|why| bad(&why))?
                .into_iter()
                .collect()
        } else {
            statistic(label, value, benchmark).map_err(|why| bad(&why))?
        };
        out.extend(found);
    }
    Ok(out)
}

/// A line of the `Latency (ms):` section.
fn latency(label: &str, value: &str, benchmark: &str) -> Result<Option<Measure>, String> {
    let metric = match label {
        "min" | "avg" | "max" | "sum" => format!("latency_{label}"),
        "percentile stats" => return Ok(None),
        _ => match label.strip_suffix("th percentile") {
            Some(p) if whole(p.trim()).is_some() => format!("latency_p{}", p.trim()),
            _ => return Ok(None),
        },
    };
    let v = single(value).ok_or_else(|| format!("{label} is not a number"))?;
    Ok(Some(Measure::new(benchmark, &metric, v, "ms")))
}

/// A line of the general statistics, `Throughput:` or threads fairness.
fn statistic(label: &str, value: &str, benchmark: &str) -> Result<Vec<Measure>, String> {
    let not_number = || format!("{label} is not a number");
    let one = |metric: &str, unit: &str, v: Option<f64>| {
        v.map(|v| vec![Measure::new(benchmark, metric, v, unit)])
            .ok_or_else(not_number)
    };
    match label {
        "total time" | "time elapsed" => {
            let v = value.trim().strip_suffix('s').and_then(single);
            one("total_time", "s", v)
        }
        "total number of events" => one("total_events", "events", single(value)),
        "events/s (eps)" => one("throughput_events_per_second", "events/s", single(value)),
        "events (avg/stddev)" | "execution time (avg/stddev)" => {
            let (avg, stddev) = value
                .trim()
                .split_once('/')
                .and_then(|(a, s)| Some((single(a)?, single(s)?)))
                .ok_or_else(|| format!("{label}: expected `avg/stddev`"))?;
            let (name, unit) = if label.starts_with("events") {
                ("fairness_events", "events")
            } else {
                ("fairness_time", "s")
            };
            Ok(vec![
                Measure::new(benchmark, &format!("{name}_avg"), avg, unit),
                Measure::new(benchmark, &format!("{name}_stddev"), stddev, unit),
            ])
        }
        _ => Ok(Vec::new()),
    }
}

/// The text as one number, spaces around allowed.
fn single(text: &str) -> Option<f64> {
    let mut tokens = text.split_whitespace();
    let v = number(tokens.next()?)?;
    tokens.next().is_none().then_some(v)
}

/// `N (X per second)` or `N (X ops/sec)`.
fn count_and_rate(text: &str) -> Option<(f64, f64)> {
    let (count, rest) = text.trim().split_once('(')?;
    let rest = rest.trim().strip_suffix(')')?;
    let rate = rest
        .strip_suffix("per second")
        .or_else(|| rest.strip_suffix("ops/sec"))?;
    Some((single(count)?, single(rate)?))
}

/// `64679.22 MiB` → (64679.22, `MiB`).
fn amount_and_unit(text: &str) -> Option<(f64, &str)> {
    let mut tokens = text.split_whitespace();
    let value = number(tokens.next()?)?;
    let unit = tokens.next()?;
    tokens.next().is_none().then_some((value, unit))
}

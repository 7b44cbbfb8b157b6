//! ftrace `function_graph` output (`/sys/kernel/tracing/trace`): CPU column, optional
//! `abstime` and `funcgraph-proc` columns, delay markers (`+ ! # * @ $`), durations in us.

/// One function_graph line.
#[derive(Debug, Clone, PartialEq)]
pub enum FtraceLine {
    /// A leaf call with its duration: `223) $ 3389981 us  |  vfio_pin_pages_remote [m]();`
    Leaf(FtraceCall),
    /// Entry of a nested call: `223)               |  vfio_pin_pages_remote() {`
    Enter {
        abstime: Option<f64>,
        cpu: u32,
        func: String,
    },
    /// Exit of a nested call: `223) $ 3389981 us  |  } /* vfio_pin_pages_remote */`
    Exit(FtraceCall),
    /// Header comments, CPU-switch markers, blank lines.
    Meta,
}

/// A timed call (leaf or exit).
#[derive(Debug, Clone, PartialEq)]
pub struct FtraceCall {
    /// abstime column: seconds on the host trace clock.
    pub abstime: Option<f64>,
    pub cpu: u32,
    pub duration_us: f64,
    /// Delay marker as printed (`$` > 1 s, `@` > 100 ms, `*` > 10 ms, `#` > 1 ms, `!` > 100 us,
    /// `+` > 10 us), if any.
    pub marker: Option<char>,
    /// Function name (leaf), or the `/* name */` comment of an exit (funcgraph-tail), if any.
    pub func: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FtraceError {
    #[error("bad duration {0:?}")]
    BadDuration(String),
}

/// Cheap check: does this line look like function_graph output?
pub fn looks_like(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("# tracer")
        || (l.contains(")")
            && l.contains('|')
            && (l.contains("();") || l.contains('{') || l.contains('}')))
}

/// Parse one line. `Ok(None)`: not function_graph output.
pub fn parse_line(line: &str) -> Result<Option<FtraceLine>, FtraceError> {
    let l = line.trim_end();
    let t = l.trim_start();
    if t.is_empty() || t.starts_with('#') || t.starts_with("------") {
        return Ok(Some(FtraceLine::Meta));
    }
    let mut segs: Vec<&str> = l.split('|').collect();
    if segs.len() < 2 {
        return Ok(None);
    }
    // optional abstime column: `  1234.567890 |`
    let mut abstime = None;
    if let Some(first) = segs.first() {
        let f = first.trim();
        if !f.contains(')') {
            if let Ok(v) = f.parse::<f64>() {
                abstime = Some(v);
                segs.remove(0);
            } else {
                return Ok(None);
            }
        }
    }
    let Some(func_seg) = segs.pop() else {
        return Ok(None);
    };
    // remaining: "223) $ 3389981 us  " or "223)  qemu-1234  " + " $ 3389981 us  "
    let head = segs.join("|");
    let Some((cpu_s, after_cpu)) = head.split_once(')') else {
        return Ok(None);
    };
    let Ok(cpu) = cpu_s.trim().parse::<u32>() else {
        return Ok(None);
    };
    if after_cpu.contains("=>") {
        return Ok(Some(FtraceLine::Meta));
    }
    let func = func_seg.trim();
    let dur = parse_duration(&head)?;
    if let Some(name) = func.strip_suffix("();") {
        let Some((marker, duration_us)) = dur else {
            return Err(FtraceError::BadDuration(head.trim().to_string()));
        };
        return Ok(Some(FtraceLine::Leaf(FtraceCall {
            abstime,
            cpu,
            duration_us,
            marker,
            func: Some(base_name(name)),
        })));
    }
    if let Some(name) = func.strip_suffix('{') {
        return Ok(Some(FtraceLine::Enter {
            abstime,
            cpu,
            func: base_name(name.trim().trim_end_matches("()")),
        }));
    }
    if let Some(rest) = func.strip_prefix('}') {
        let Some((marker, duration_us)) = dur else {
            return Err(FtraceError::BadDuration(head.trim().to_string()));
        };
        let name = rest
            .trim()
            .strip_prefix("/*")
            .and_then(|r| r.strip_suffix("*/"))
            .map(|n| base_name(n.trim()));
        return Ok(Some(FtraceLine::Exit(FtraceCall {
            abstime,
            cpu,
            duration_us,
            marker,
            func: name,
        })));
    }
    Ok(None)
}

/// `vfio_pin_pages_remote [vfio_iommu_type1]` → `vfio_pin_pages_remote`.
fn base_name(s: &str) -> String {
    s.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches("()")
        .to_string()
}

/// Find `[marker] NUMBER us` in the head columns.
fn parse_duration(head: &str) -> Result<Option<(Option<char>, f64)>, FtraceError> {
    let words: Vec<&str> = head.split_whitespace().collect();
    let Some(pos) = words.iter().position(|w| *w == "us") else {
        return Ok(None);
    };
    let num = pos
        .checked_sub(1)
        .and_then(|i| words.get(i))
        .ok_or_else(|| FtraceError::BadDuration(head.trim().to_string()))?;
    let v: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| FtraceError::BadDuration(head.trim().to_string()))?;
    let marker = pos.checked_sub(2).and_then(|i| words.get(i)).and_then(|m| {
        let mut c = m.chars();
        match (c.next(), c.next()) {
            (Some(ch @ ('+' | '!' | '#' | '*' | '@' | '$')), None) => Some(ch),
            _ => None,
        }
    });
    Ok(Some((marker, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines() {
        let l = parse_line("223) $ 3389981 us  |  vfio_pin_pages_remote [vfio_iommu_type1]();")
            .unwrap()
            .unwrap();
        assert_eq!(
            l,
            FtraceLine::Leaf(FtraceCall {
                abstime: None,
                cpu: 223,
                duration_us: 3_389_981.0,
                marker: Some('$'),
                func: Some("vfio_pin_pages_remote".into())
            })
        );
        let l = parse_line("108) ! 852.023 us  |  vfio_pin_pages_remote [vfio_iommu_type1]();")
            .unwrap()
            .unwrap();
        assert!(matches!(
            l,
            FtraceLine::Leaf(FtraceCall {
                cpu: 108,
                marker: Some('!'),
                ..
            })
        ));
    }

    #[test]
    fn abstime_nested_proc() {
        let l = parse_line(
            " 5123.456789 |   12)   qemu-sy-3454228  |               |  vfio_pin_pages_remote() {",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            l,
            FtraceLine::Enter {
                abstime: Some(5123.456789),
                cpu: 12,
                func: "vfio_pin_pages_remote".into()
            }
        );
        let l = parse_line(" 5126.846770 |   12)   qemu-sy-3454228  | $ 3389981 us  |  } /* vfio_pin_pages_remote */").unwrap().unwrap();
        assert!(
            matches!(l, FtraceLine::Exit(FtraceCall { abstime: Some(_), duration_us, .. }) if duration_us == 3_389_981.0)
        );
        let l = parse_line("  12)   0.512 us    |    page_to_pfn();")
            .unwrap()
            .unwrap();
        assert!(matches!(
            l,
            FtraceLine::Leaf(FtraceCall { marker: None, .. })
        ));
        assert_eq!(
            parse_line("# tracer: function_graph").unwrap(),
            Some(FtraceLine::Meta)
        );
        assert_eq!(
            parse_line(" 223) ===> 108)  |").unwrap(),
            Some(FtraceLine::Meta)
        );
        assert!(parse_line("223) $ nan us  |  f();").is_err());
        assert_eq!(parse_line("plain text").unwrap(), None);
    }
}

//! Output of the host-side bpftrace scripts (`vmtune boot trace`, and the Kata GPU boot study's
//! `vfio_pin_pages_remote` kprobe/kretprobe script): per-call lines and the `@hist` block.

use crate::parse::time::{parse_rfc3339, Nanos};

/// One line of bpftrace output.
#[derive(Debug, Clone, PartialEq)]
pub enum BpfLine {
    /// `TS: vfio_pin_pages_remote(): vaddr=0x… npage=N size=NB limit=L pid=P`
    PinCall {
        ts: Option<Nanos>,
        vaddr: u64,
        npage: u64,
        size: u64,
        pid: Option<u32>,
    },
    /// `TS: vfio_pin_pages_remote took N ms`
    PinTook { ts: Option<Nanos>, ms: f64 },
    /// `TS: VFIO_IOMMU_MAP_DMA pid=P iova=0x… size=NB took N us` (and `IOMMU_IOAS_MAP`).
    MapIoctl {
        ts: Option<Nanos>,
        ioctl: String,
        pid: Option<u32>,
        size: u64,
        us: f64,
    },
    /// `@hist:` — start of a histogram map print.
    HistHeader(String),
    /// `[lo, hi)  count |@@@|` or `[n]  count |…|`.
    HistBucket { lo: u64, hi: u64, count: u64 },
    /// `Attaching N probes...` and other bpftrace chatter.
    Banner,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BpfError {
    #[error("bad timestamp {0:?}")]
    BadTs(String),
    #[error("bad field {0:?}")]
    BadField(String),
}

/// Could this line be bpftrace output of ours (cheap check)?
pub fn looks_like(line: &str) -> bool {
    line.contains("vfio_pin_pages_remote")
        || line.contains("_MAP_DMA ")
        || line.contains("IOMMU_IOAS_MAP ")
        || line.starts_with('@')
        || line.starts_with("Attaching ")
        || hist_bucket(line.trim()).is_some()
}

/// Parse one line. `Ok(None)`: not bpftrace output.
pub fn parse_line(line: &str) -> Result<Option<BpfLine>, BpfError> {
    let l = line.trim();
    if l.starts_with("Attaching ") && l.ends_with("probes...") {
        return Ok(Some(BpfLine::Banner));
    }
    if let Some(name) = l.strip_prefix('@').and_then(|r| r.strip_suffix(':')) {
        return Ok(Some(BpfLine::HistHeader(name.to_string())));
    }
    if let Some(b) = hist_bucket(l) {
        return Ok(Some(b));
    }
    // optional `TS: ` prefix
    let (ts, body) = match l.split_once(": ") {
        Some((head, body))
            if head.len() >= 19 && head.as_bytes().first().is_some_and(u8::is_ascii_digit) =>
        {
            let ts = parse_rfc3339(head).ok_or_else(|| BpfError::BadTs(head.to_string()))?;
            (Some(ts), body)
        }
        _ => (None, l),
    };
    if let Some(args) = body.strip_prefix("vfio_pin_pages_remote(): ") {
        let mut vaddr = None;
        let mut npage = None;
        let mut size = None;
        let mut pid = None;
        for kv in args.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let bad = || BpfError::BadField(kv.to_string());
            match k {
                "vaddr" => {
                    vaddr = Some(
                        u64::from_str_radix(v.trim_start_matches("0x"), 16).map_err(|_| bad())?,
                    )
                }
                "npage" => npage = Some(v.parse::<u64>().map_err(|_| bad())?),
                "size" => size = Some(v.trim_end_matches('B').parse::<u64>().map_err(|_| bad())?),
                "pid" => pid = Some(v.parse::<u32>().map_err(|_| bad())?),
                _ => {}
            }
        }
        let npage = npage.ok_or_else(|| BpfError::BadField("npage missing".into()))?;
        return Ok(Some(BpfLine::PinCall {
            ts,
            vaddr: vaddr.unwrap_or(0),
            npage,
            size: size.unwrap_or(npage.saturating_mul(4096)),
            pid,
        }));
    }
    if let Some(rest) = body.strip_prefix("vfio_pin_pages_remote took ") {
        let ms = rest
            .trim()
            .strip_suffix("ms")
            .and_then(|m| m.trim().parse::<f64>().ok())
            .filter(|m| m.is_finite() && (0.0..=1e9).contains(m))
            .ok_or_else(|| BpfError::BadField(rest.to_string()))?;
        return Ok(Some(BpfLine::PinTook { ts, ms }));
    }
    let mut words = body.split_whitespace();
    if let Some(ioctl @ ("VFIO_IOMMU_MAP_DMA" | "IOMMU_IOAS_MAP")) = words.next() {
        let mut pid = None;
        let mut size = None;
        let mut us = None;
        let rest: Vec<&str> = words.collect();
        for (i, kv) in rest.iter().enumerate() {
            if let Some((k, v)) = kv.split_once('=') {
                match k {
                    "pid" => pid = v.parse().ok(),
                    "size" => size = v.trim_end_matches('B').parse().ok(),
                    _ => {}
                }
            } else if *kv == "took" {
                us = rest.get(i + 1).and_then(|u| u.parse::<f64>().ok());
            }
        }
        let (Some(size), Some(us)) = (
            size,
            us.filter(|u| u.is_finite() && (0.0..=1e12).contains(u)),
        ) else {
            return Err(BpfError::BadField(body.to_string()));
        };
        return Ok(Some(BpfLine::MapIoctl {
            ts,
            ioctl: ioctl.to_string(),
            pid,
            size,
            us,
        }));
    }
    Ok(None)
}

fn hist_value(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (s.get(..s.len() - 1)?, 1u64 << 10),
        b'M' => (s.get(..s.len() - 1)?, 1 << 20),
        b'G' => (s.get(..s.len() - 1)?, 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

fn hist_bucket(l: &str) -> Option<BpfLine> {
    let r = l.strip_prefix('[')?;
    let (range, tail) = if let Some(close) = r.find(']') {
        let v = hist_value(r.get(..close)?)?;
        ((v, v.saturating_add(1)), r.get(close + 1..)?)
    } else {
        let close = r.find(')')?;
        let (a, b) = r.get(..close)?.split_once(',')?;
        ((hist_value(a)?, hist_value(b)?), r.get(close + 1..)?)
    };
    let (count, bar) = tail.trim().split_once(' ')?;
    if !bar.trim().starts_with('|') {
        return None;
    }
    Some(BpfLine::HistBucket {
        lo: range.0,
        hi: range.1,
        count: count.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines() {
        let p = parse_line("2025-11-20T17:56:21.688170596Z: vfio_pin_pages_remote(): vaddr=0x786c40000000 npage=33554432 size=137438953472B limit=2048 pid=3454228").unwrap().unwrap();
        assert!(matches!(
            p,
            BpfLine::PinCall {
                npage: 33_554_432,
                size: 137_438_953_472,
                pid: Some(3_454_228),
                ts: Some(_),
                ..
            }
        ));
        let p = parse_line("2025-11-20T17:56:25.955145443Z: vfio_pin_pages_remote took 3266 ms")
            .unwrap()
            .unwrap();
        assert!(matches!(p, BpfLine::PinTook { ms, .. } if ms == 3266.0));
        let p = parse_line("vfio_pin_pages_remote took 3274 ms   ")
            .unwrap()
            .unwrap();
        assert!(matches!(p, BpfLine::PinTook { ts: None, .. }));
        assert_eq!(
            parse_line("@hist:  ").unwrap(),
            Some(BpfLine::HistHeader("hist".into()))
        );
        assert_eq!(
            parse_line(
                "[2K, 4K)               7 |@@@@                                                |"
            )
            .unwrap(),
            Some(BpfLine::HistBucket {
                lo: 2048,
                hi: 4096,
                count: 7
            })
        );
        assert_eq!(
            parse_line("[0]                   89 |@@@@@@@@@@@@@|").unwrap(),
            Some(BpfLine::HistBucket {
                lo: 0,
                hi: 1,
                count: 89
            })
        );
        // the seed's clipped line: year "025"
        assert!(parse_line("025-11-20T17:58:12.678281961Z: vfio_pin_pages_remote(): vaddr=0x784ac0000000 npage=1048576 size=4294967296B limit=2048 pid=3454228").is_err());
        let p = parse_line("2025-11-20T17:56:21.000000000Z: IOMMU_IOAS_MAP pid=12 iova=0x0 size=4096B took 12.5 us").unwrap().unwrap();
        assert!(matches!(p, BpfLine::MapIoctl { size: 4096, .. }));
        assert_eq!(parse_line("hello").unwrap(), None);
    }
}

//! PCIe link health: a function's current link against what the link can do.
//!
//! Both ends of a PCIe link report it: the function's `current_link_speed`/`_width` (its
//! Link Status register) and the port above, a root port or a switch's downstream port, whose
//! own files describe the same link. What the link can do is the lower of the two ends'
//! maxima (`max_link_speed`/`_width`, their Link Capabilities): a Gen 4 NIC behind a Gen 1
//! switch port trains at 2.5 GT/s and that is all that link can do, where `lspci` prints
//! "(downgraded)" against the NIC's own capability.
//!
//! [`settle`] pairs each port with the function below it that reports the same current
//! speed and width, gives both ends the other's maximum, and leaves the verdict
//! (`downgraded`) to the function's entry: the port says `same_link_as` instead, so one
//! slow link is one finding, not one per end. A switch's upstream port reports its own link
//! (to the port above it), which is not the link of the downstream ports below it.

pub use crate::model::PciLink;
use crate::model::{DeviceKind, PciDevice};

/// Widths a PCIe link can have (x1 … x32); anything else in a width file is unknown.
const MAX_WIDTH: u32 = 32;
/// No PCIe generation signals above this (Gen 7 is 128 GT/s); a larger figure is garbage.
const MAX_GTS: f32 = 1024.0;

/// A link speed file: `16.0 GT/s PCIe` (Linux 5.0 on), `8 GT/s` and `2.5 GT/s` (before),
/// `8.0 GT/s`; `Unknown`, `Unknown speed`, an empty file or anything else is unknown.
pub fn parse_speed(s: &str) -> Option<f32> {
    let t = s.trim();
    let i = t.find("GT/s")?;
    let num = t[..i].trim_end();
    // the figure is a plain decimal: no sign, exponent, "inf" or "NaN"
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f32 = num.parse().ok()?;
    (v.is_finite() && v > 0.0 && v <= MAX_GTS).then_some(v)
}

/// A link width file: `16` (`x16` read too); 0 (no link) or a width no PCIe link has is unknown.
pub fn parse_width(s: &str) -> Option<u32> {
    let t = s.trim();
    let t = t.strip_prefix('x').unwrap_or(t);
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let w: u32 = t.parse().ok()?;
    (1..=MAX_WIDTH).contains(&w).then_some(w)
}

/// Link bandwidth in GB/s as hwloc computes it: GT/s × lanes × encoding / 8, with 8b/10b
/// encoding up to 5 GT/s (PCIe 1/2) and 128b/130b above.
pub fn bandwidth_gbps(gts: f32, lanes: u32) -> Option<f32> {
    if !gts.is_finite() || gts <= 0.0 || lanes == 0 {
        return None;
    }
    let enc = if gts <= 5.0 {
        8.0 / 10.0
    } else {
        128.0 / 130.0
    };
    Some(gts * enc * lanes as f32 / 8.0)
}

/// `2.5`, `16`, `8`: a speed as people write it.
fn gts(v: f32) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn lower<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

impl PciLink {
    /// A link from the four sysfs files' contents; `None` when none of them says anything.
    pub fn from_sysfs(
        speed: Option<&str>,
        width: Option<&str>,
        max_speed: Option<&str>,
        max_width: Option<&str>,
    ) -> Option<PciLink> {
        let l = PciLink {
            speed_gts: speed.and_then(parse_speed),
            width: width.and_then(parse_width),
            max_speed_gts: max_speed.and_then(parse_speed),
            max_width: max_width.and_then(parse_width),
            ..PciLink::default()
        };
        let known = l.speed_gts.is_some()
            || l.width.is_some()
            || l.max_speed_gts.is_some()
            || l.max_width.is_some();
        known.then_some(l)
    }

    /// Take the port above as the other end of this link when it reports the same current
    /// speed and width (both ends of a link do); `false`, and nothing taken, otherwise.
    pub fn pair_with_port(&mut self, port: &PciLink) -> bool {
        let same = self.speed_gts.is_some()
            && self.width.is_some()
            && (self.speed_gts, self.width) == (port.speed_gts, port.width);
        if same {
            self.peer_max_speed_gts = port.max_speed_gts;
            self.peer_max_width = port.max_width;
        }
        same
    }

    /// What the link can train to: the lower of the two ends' maximum speeds.
    pub fn capable_speed_gts(&self) -> Option<f32> {
        lower(self.max_speed_gts, self.peer_max_speed_gts)
    }

    pub fn capable_width(&self) -> Option<u32> {
        lower(self.max_width, self.peer_max_width)
    }

    /// Runs at a lower speed than the link can do.
    pub fn speed_below(&self) -> bool {
        matches!((self.speed_gts, self.capable_speed_gts()), (Some(c), Some(m)) if c < m)
    }

    /// Runs on fewer lanes than the link has.
    pub fn width_below(&self) -> bool {
        matches!((self.width, self.capable_width()), (Some(c), Some(m)) if c < m)
    }

    /// Current bandwidth in GB/s, where speed and width are known.
    pub fn gbps(&self) -> Option<f32> {
        bandwidth_gbps(self.speed_gts?, self.width?)
    }

    /// The bandwidth the link can do, in GB/s.
    pub fn capable_gbps(&self) -> Option<f32> {
        bandwidth_gbps(self.capable_speed_gts()?, self.capable_width()?)
    }

    /// `2.5 GT/s x16 of 16 GT/s x16`, `? GT/s` where a figure is unknown.
    pub fn figures(&self) -> String {
        let one = |s: Option<f32>, w: Option<u32>| {
            let s = s.map_or("?".to_string(), gts);
            let w = w.map_or("?".to_string(), |w| w.to_string());
            format!("{s} GT/s x{w}")
        };
        format!(
            "{} of {}",
            one(self.speed_gts, self.width),
            one(self.capable_speed_gts(), self.capable_width())
        )
    }

    /// `4.0 of 31.5 GB/s`, where both are known.
    pub fn bandwidths(&self) -> Option<String> {
        Some(format!(
            "{:.1} of {:.1} GB/s",
            self.gbps()?,
            self.capable_gbps()?
        ))
    }
}

/// Pair every port with the function below it that reports the same link, share their
/// maxima, and set each entry's verdict (see the module's doc). An endpoint whose port is
/// not in `devs` may have been paired by its loader ([`PciLink::pair_with_port`]); a function
/// whose other end is unknown is judged against its own maximum.
pub fn settle(devs: &mut [PciDevice]) {
    let index = |bdf: &str, devs: &[PciDevice]| devs.iter().position(|d| d.bdf == bdf);
    let current = |d: &PciDevice| d.link.as_ref().map(|l| (l.speed_gts, l.width));
    // (port, function) pairs; a port takes the first function in BDF order
    let mut order: Vec<usize> = (0..devs.len()).collect();
    order.sort_by(|&a, &b| devs[a].bdf.cmp(&devs[b].bdf));
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for &i in &order {
        let Some(p) = devs[i].parent.as_deref().and_then(|p| index(p, devs)) else {
            continue;
        };
        if devs[p].kind != DeviceKind::Bridge || pairs.iter().any(|&(q, _)| q == p) {
            continue;
        }
        let Some((Some(s), Some(w))) = current(&devs[i]) else {
            continue;
        };
        if current(&devs[p]) != Some((Some(s), Some(w))) {
            continue;
        }
        // below a switch's upstream port sit downstream ports, each with a link of its own
        let bridges_below = devs
            .iter()
            .filter(|d| d.parent.as_deref() == Some(devs[p].bdf.as_str()))
            .filter(|d| d.kind == DeviceKind::Bridge)
            .count();
        if devs[i].kind == DeviceKind::Bridge && bridges_below > 1 {
            continue;
        }
        pairs.push((p, i));
    }
    for &(p, i) in &pairs {
        let (Some(port), Some(function)) = (devs[p].link.clone(), devs[i].link.clone()) else {
            continue;
        };
        if let Some(l) = devs[i].link.as_mut() {
            l.pair_with_port(&port);
        }
        let below = devs[i].bdf.clone();
        if let Some(l) = devs[p].link.as_mut() {
            l.peer_max_speed_gts = function.max_speed_gts;
            l.peer_max_width = function.max_width;
            l.same_link_as = Some(below);
        }
    }
    for d in devs.iter_mut() {
        if let Some(l) = d.link.as_mut() {
            l.downgraded = l.same_link_as.is_none() && (l.speed_below() || l.width_below());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_as_kernels_write_them() {
        for (s, v) in [
            ("16.0 GT/s PCIe\n", 16.0),
            ("2.5 GT/s PCIe", 2.5),
            ("5.0 GT/s PCIe", 5.0),
            ("64.0 GT/s PCIe", 64.0),
            ("8 GT/s\n", 8.0),
            ("2.5 GT/s", 2.5),
            ("8.0 GT/s", 8.0),
            ("32GT/s", 32.0),
        ] {
            assert_eq!(parse_speed(s), Some(v), "{s:?}");
        }
        for s in [
            "Unknown",
            "Unknown speed",
            "",
            "\n",
            "garbage GT/s",
            "GT/s",
            "0 GT/s",
            "-8 GT/s",
            "inf GT/s",
            "NaN GT/s",
            "1e3 GT/s",
            "8.0.1 GT/s",
            "99999 GT/s",
            "33 MHz PCI",
        ] {
            assert_eq!(parse_speed(s), None, "{s:?}");
        }
    }

    #[test]
    fn widths() {
        assert_eq!(parse_width("16\n"), Some(16));
        assert_eq!(parse_width("x4"), Some(4));
        assert_eq!(parse_width(" 1 "), Some(1));
        for s in ["0", "", "255", "-4", "16 lanes", "x", "4294967296"] {
            assert_eq!(parse_width(s), None, "{s:?}");
        }
    }

    #[test]
    fn figures_and_bandwidth() {
        let l = PciLink::from_sysfs(
            Some("2.5 GT/s PCIe"),
            Some("16"),
            Some("16.0 GT/s PCIe"),
            Some("16"),
        )
        .unwrap();
        assert!(l.speed_below() && !l.width_below());
        assert_eq!(l.figures(), "2.5 GT/s x16 of 16 GT/s x16");
        assert_eq!(l.bandwidths().as_deref(), Some("4.0 of 31.5 GB/s"));
        let g = bandwidth_gbps(8.0, 16).unwrap();
        assert!((g - 15.753846).abs() < 1e-4, "{g}");
        assert_eq!(
            PciLink::from_sysfs(Some("Unknown"), Some("0"), None, None),
            None
        );
        let half = PciLink::from_sysfs(Some("garbage GT/s"), Some("4"), None, Some("16")).unwrap();
        assert_eq!(half.speed_gts, None);
        assert!(half.width_below() && !half.speed_below());
        assert_eq!(half.figures(), "? GT/s x4 of ? GT/s x16");
        assert_eq!(half.bandwidths(), None);
    }
}

//! Guest kernel lines (`dmesg`, also as `vmconsole` values): `[    3.201931] pci 0000:02:00.0:
//! …`, optionally with a `<6>` level prefix; `initcall_debug` lines included.

/// What a kernel line means for the boot timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelKind {
    /// `pci BDF: [vvvv:dddd] type 00 class 0xCCCCCC …` — a device found on the bus.
    PciFound {
        bdf: String,
        vendor: u16,
        device: u16,
        class: u32,
    },
    /// `pci BDF: BAR N [mem 0xA-0xB …]` (sized, or `: assigned`).
    Bar {
        bdf: String,
        index: u8,
        size: u64,
        assigned: bool,
    },
    /// `<driver> BDF: enabling device (…)` — a driver's probe enabling the device.
    DriverEnable {
        driver: String,
        bdf: String,
    },
    /// `NVRM: …` — NVIDIA resource manager messages.
    Nvrm(String),
    /// A PCI resource the kernel could not assign: `BAR 1: no space for [mem size 0x… 64bit
    /// pref]` / `BAR 1: failed to assign […]` (before 6.8), `BAR 1 [mem size 0x… 64bit
    /// pref]: can't assign; no space` / `…: failed to assign` (6.8, and 6.1.167+ / 6.6.y
    /// with the backport), for a `BAR n`, `VF BAR n`, `ROM` or `bridge window`.
    BarFailed {
        bdf: String,
        /// `BAR 1`, `VF BAR 0`, `ROM`, `bridge window` (old kernels: a bridge's `BAR 13`–`15`).
        name: String,
        /// Bytes, when the line gives the size (`[mem size 0x…]`, `[mem 0xA-0xB …]`).
        size: Option<u64>,
        /// A 64-bit prefetchable memory resource.
        pref64: bool,
    },
    /// `pci_bus …: Some PCI device resources are unassigned, try booting with pci=realloc`.
    PciRealloc,
    /// `<driver>: probe of BDF failed with error N` (`nvidia: probe of 0000:0a:00.0 failed
    /// with error -1`).
    ProbeFailed {
        driver: String,
        bdf: String,
        error: i64,
    },
    /// initcall_debug: `calling  fn+0x0/0x… @ 1`.
    InitcallStart {
        func: String,
    },
    /// initcall_debug: `initcall fn… returned 0 after N usecs`, or a PCI fixup `… took N usecs`.
    InitcallDone {
        func: String,
        usecs: u64,
        bdf: Option<String>,
    },
    /// `Run /init as init process` — user space starts.
    RunInit,
    /// Guest memory hotplug (`… memory… online` / `init_memory_mapping` after boot).
    Memory,
    Other,
}

/// One parsed kernel line.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelLine {
    /// Seconds since guest boot.
    pub t: f64,
    pub kind: KernelKind,
}

/// Is `s` a PCI address as the kernel prints it, `dddd:bb:dd.f`? The domain has four hex
/// digits or more (`%04x`: Intel VMD's domains start at 0x10000, `10000:e1:00.0`).
pub fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    let d = b.len().wrapping_sub(8); // domain digits
    (4..=8).contains(&d)
        && b.get(d) == Some(&b':')
        && b.get(d + 3) == Some(&b':')
        && b.get(d + 6) == Some(&b'.')
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == d || i == d + 3 || i == d + 6 || c.is_ascii_hexdigit())
}

/// Does this line start like a kernel line (`[ 1.23]`, `<6>[ 1.23]`, `kern  :info  : [ 1.23]`)?
pub fn looks_like(line: &str) -> bool {
    split_stamp(line).is_some()
}

/// util-linux `dmesg -x` (`--decode`) writes the facility and level before the stamp,
/// each padded to six: `kern  :info  : [    3.201931] …`.
fn strip_decode(s: &str) -> Option<&str> {
    let (facility, rest) = s.split_once(':')?;
    let (level, rest) = rest.split_once(':')?;
    let word = |w: &str| {
        let w = w.trim_end_matches(' ');
        !w.is_empty() && w.len() <= 8 && w.bytes().all(|c| c.is_ascii_alphanumeric())
    };
    (word(facility) && LEVELS.contains(&level.trim_end_matches(' ')))
        .then(|| rest.strip_prefix(' '))
        .flatten()
}

/// The syslog level names `dmesg -x` prints.
const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug",
];

fn split_stamp(line: &str) -> Option<(f64, &str)> {
    let mut s = line.trim_start();
    if let Some(r) = strip_decode(s) {
        s = r;
    }
    if let Some(r) = s.strip_prefix('<') {
        let close = r.find('>')?;
        if close > 3 || !r.get(..close)?.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s = r.get(close + 1..)?;
    }
    let r = s.strip_prefix('[')?;
    let close = r.find(']')?;
    let inside = r.get(..close)?;
    // `dmesg -d` (`--show-delta`): `[    3.201931 <    0.000471>]`
    let stamp = match inside.split_once('<') {
        Some((stamp, delta)) => {
            let delta = delta.strip_suffix('>')?.trim();
            delta.parse::<f64>().ok()?;
            stamp.trim()
        }
        None => inside.trim(),
    };
    let (a, b) = stamp.split_once('.')?;
    if a.is_empty()
        || b.is_empty()
        || !a.bytes().all(|c| c.is_ascii_digit())
        || !b.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let t: f64 = stamp.parse().ok()?;
    // up to ~3 years of uptime; beyond that the stamp is garbage
    if !(0.0..=1e8).contains(&t) {
        return None;
    }
    let body = r.get(close + 1..)?.trim_start();
    Some((t, strip_journal_kernel(body)))
}

/// `journalctl -k -o short-monotonic` writes the host and the `kernel:` identifier after
/// the stamp: `[    3.201931] guest kernel: pci …`.
fn strip_journal_kernel(body: &str) -> &str {
    match body.split_once(' ') {
        Some((host, rest))
            if !host.is_empty()
                && !host.ends_with(':')
                && host.bytes().all(|c| c.is_ascii_graphic()) =>
        {
            rest.strip_prefix("kernel: ").unwrap_or(body)
        }
        _ => body,
    }
}

/// The shapes of kernel log whose stamps are wall-clock times, not seconds since boot
/// (util-linux `dmesg -T`/`--ctime`, `--time-format iso`, `-e`/`--reltime`): what the
/// line's shape is, for a note that names it. The boot timeline needs the seconds since
/// boot that plain `dmesg` prints; these lines are counted, not guessed onto a boot.
pub fn wall_clock_shape(line: &str) -> Option<&'static str> {
    let s = line.trim_start();
    let s = strip_decode(s).unwrap_or(s);
    if let Some(r) = s.strip_prefix('[') {
        let inside = r.get(..r.find(']')?)?;
        let stamp = inside.split_once(" <").map_or(inside, |(a, _)| a);
        // `[Thu Nov 20 17:56:11 2025]`
        let w: Vec<&str> = stamp.split_whitespace().collect();
        if let [day, month, date, clock, year] = w.as_slice() {
            if day.len() == 3
                && month.len() == 3
                && date.parse::<u8>().is_ok()
                && clock.len() == 8
                && clock.as_bytes().get(2) == Some(&b':')
                && year.len() == 4
                && year.parse::<u16>().is_ok()
            {
                return Some("dmesg -T (--ctime)");
            }
        }
        // `[Nov20 17:56]` on a new minute, `[  +0.000471]` between
        let t = stamp.trim();
        if t.len() > 1
            && (t.starts_with('+') || t.starts_with('-'))
            && t.get(1..).is_some_and(|n| n.parse::<f64>().is_ok())
        {
            return Some("dmesg -e (--reltime)");
        }
        return None;
    }
    // `2025-11-20T17:56:11,201931+00:00 pci …`
    let stamp = s.split(' ').next()?;
    let b = stamp.as_bytes();
    (b.len() >= 26
        && b.get(4) == Some(&b'-')
        && b.get(10) == Some(&b'T')
        && b.get(19) == Some(&b',')
        && b.get(..4).is_some_and(|y| y.iter().all(u8::is_ascii_digit)))
    .then_some("dmesg --time-format iso")
}

/// Parse one kernel line; `None` if it has no `[seconds]` stamp.
pub fn parse_line(line: &str) -> Option<KernelLine> {
    let (t, body) = split_stamp(line)?;
    Some(KernelLine {
        t,
        kind: classify(body),
    })
}

fn hex_u64(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn classify(body: &str) -> KernelKind {
    if let Some(rest) = body.strip_prefix("NVRM: ") {
        return KernelKind::Nvrm(rest.to_string());
    }
    if body.starts_with("pci_bus ") && body.contains("try booting with pci=realloc") {
        return KernelKind::PciRealloc;
    }
    if let Some(k) = probe_failed(body) {
        return k;
    }
    if body.starts_with("Run /") && body.ends_with("as init process") {
        return KernelKind::RunInit;
    }
    if let Some(rest) = body.strip_prefix("calling ") {
        let func = rest.split_whitespace().next().unwrap_or("");
        return KernelKind::InitcallStart {
            func: strip_offset(func),
        };
    }
    if let Some(rest) = body.strip_prefix("initcall ") {
        if let Some((f, tail)) = rest.split_once(" returned ") {
            if let Some(us) = tail
                .split(" after ")
                .nth(1)
                .and_then(|u| u.split_whitespace().next())
            {
                if let Ok(usecs) = us.parse() {
                    return KernelKind::InitcallDone {
                        func: strip_offset(f.split_whitespace().next().unwrap_or(f)),
                        usecs,
                        bdf: None,
                    };
                }
            }
        }
        return KernelKind::Other;
    }
    if body.contains("memory") && (body.contains("online") || body.contains("hotplug")) {
        return KernelKind::Memory;
    }
    // `<driver> <BDF>: <rest>`
    let mut it = body.splitn(3, ' ');
    let (Some(driver), Some(dev), rest) = (it.next(), it.next(), it.next()) else {
        return KernelKind::Other;
    };
    let Some(bdf) = dev.strip_suffix(':').filter(|d| is_bdf(d)) else {
        return KernelKind::Other;
    };
    let rest = rest.unwrap_or("");
    let bdf = bdf.to_string();
    if matches!(driver, "pci" | "pcieport") {
        if let Some((name, size, pref64)) = bar_failed(rest) {
            return KernelKind::BarFailed {
                bdf,
                name,
                size,
                pref64,
            };
        }
    }
    if rest.starts_with("enabling device") {
        return KernelKind::DriverEnable {
            driver: driver.to_string(),
            bdf,
        };
    }
    if driver != "pci" {
        return KernelKind::Other;
    }
    if let Some(r) = rest.strip_prefix('[') {
        // [10de:2330] type 00 class 0x030200
        let Some((ids, tail)) = r.split_once(']') else {
            return KernelKind::Other;
        };
        let Some((v, d)) = ids.split_once(':') else {
            return KernelKind::Other;
        };
        let class = tail
            .split_once("class ")
            .and_then(|(_, c)| c.split_whitespace().next())
            .and_then(|c| u32::from_str_radix(c.trim_start_matches("0x"), 16).ok());
        if let (Ok(vendor), Ok(device), Some(class)) = (
            u16::from_str_radix(v, 16),
            u16::from_str_radix(d, 16),
            class,
        ) {
            return KernelKind::PciFound {
                bdf,
                vendor,
                device,
                class,
            };
        }
        return KernelKind::Other;
    }
    if let Some(bar) = bar_line(rest) {
        let (index, size, assigned) = bar;
        return KernelKind::Bar {
            bdf,
            index,
            size,
            assigned,
        };
    }
    if rest.starts_with("BAR ") || rest.starts_with("reg 0x") {
        return KernelKind::Other;
    }
    // initcall_debug fixup: `pci BDF: quirk+0x0/0x20 took 803659 usecs`
    if let Some((f, tail)) = rest.split_once(" took ") {
        if let Some(us) = tail
            .strip_suffix(" usecs")
            .and_then(|u| u.trim().parse().ok())
        {
            return KernelKind::InitcallDone {
                func: strip_offset(f),
                usecs: us,
                bdf: Some(bdf),
            };
        }
    }
    KernelKind::Other
}

/// A resource the kernel could not assign, in either wording: its name (`BAR 1`, `VF BAR 0`,
/// `ROM`, `bridge window`), its size when given, and whether it is 64-bit prefetchable.
fn bar_failed(rest: &str) -> Option<(String, Option<u64>, bool)> {
    let failed = rest.contains("no space")
        || rest.contains("failed to assign")
        || rest.contains("can't assign");
    if !failed || rest.contains("failed to expand") {
        return None;
    }
    // `BAR 1: no space for [mem …]` (old) or `BAR 1 [mem …]: can't assign; no space` (6.8)
    let name = rest.split([':', '[']).next()?.trim();
    let known = name.starts_with("BAR ")
        || name.starts_with("VF BAR ")
        || name == "ROM"
        || name == "bridge window";
    if !known {
        return None;
    }
    let res = rest.get(rest.find('[')? + 1..)?;
    let res = res.get(..res.find(']')?)?;
    let size = if let Some(sz) = res
        .strip_prefix("mem size ")
        .or(res.strip_prefix("io  size "))
    {
        hex_u64(sz.split(' ').next()?)
    } else {
        res.split_whitespace()
            .nth(1)
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| Some(hex_u64(b)?.checked_sub(hex_u64(a)?)?.saturating_add(1)))
    };
    Some((name.to_string(), size, res.contains("64bit pref")))
}

/// `nvidia: probe of 0000:0a:00.0 failed with error -1`.
fn probe_failed(body: &str) -> Option<KernelKind> {
    let (driver, rest) = body.split_once(": probe of ")?;
    let (bdf, error) = rest.split_once(" failed with error ")?;
    (is_bdf(bdf) && !driver.contains(' ')).then(|| KernelKind::ProbeFailed {
        driver: driver.to_string(),
        bdf: bdf.to_string(),
        error: error.trim().parse().unwrap_or(0),
    })
}

/// The second line of a kernel message printed on two lines, which has no stamp of its own:
/// the NVIDIA driver's `               NVRM: BAR1 is 0M @ 0x0 (PCI:0000:0a:00.0)` after `NVRM:
/// This PCI I/O region assigned to your NVIDIA device is invalid:` — indented, `NVRM: `.
pub fn continuation(line: &str) -> Option<KernelKind> {
    let t = line.trim_start();
    (t.len() < line.len())
        .then(|| t.strip_prefix("NVRM: "))
        .flatten()
        .map(|rest| KernelKind::Nvrm(rest.trim_end().to_string()))
}

/// A memory BAR line in any kernel's wording: `BAR 2 [mem 0x0-0x1fffffffff 64bit pref]`
/// (sizing, 6.x), `BAR 2 [mem …]: assigned` (6.x), `BAR 2: assigned [mem …]` (older),
/// `reg 0x18: [mem …]` (older sizing; register 0x10 + 4 × index). The expansion ROM
/// (`reg 0x30`), I/O BARs and failed assignments are not BARs of the device's memory.
fn bar_line(rest: &str) -> Option<(u8, u64, bool)> {
    let index = if let Some(r) = rest.strip_prefix("BAR ") {
        let n: String = r.chars().take_while(char::is_ascii_digit).collect();
        n.parse::<u8>().ok()?
    } else if let Some(r) = rest.strip_prefix("reg 0x") {
        let reg = u8::from_str_radix(r.split(':').next()?, 16).ok()?;
        if !(0x10..=0x24).contains(&reg) || reg % 4 != 0 {
            return None;
        }
        (reg - 0x10) / 4
    } else {
        return None;
    };
    if index > 5 || rest.contains("no space") || rest.contains("failed to assign") {
        return None;
    }
    let at = rest.find("[mem ")? + "[mem ".len();
    let range = rest.get(at..)?.split([' ', ']']).next()?;
    let (a, b) = range.split_once('-')?;
    let (a, b) = (hex_u64(a)?, hex_u64(b)?);
    if b < a {
        return None;
    }
    Some((index, (b - a).saturating_add(1), rest.contains("assigned")))
}

fn strip_offset(f: &str) -> String {
    f.split('+').next().unwrap_or(f).to_string()
}

/// Is this a display/3D controller class (0x03xxxx)?
pub fn is_gpu_class(class: u32) -> bool {
    class >> 16 == 0x03
}

/// Vendors of display devices that a hypervisor emulates (QEMU/Bochs `1234:1111` std VGA,
/// Red Hat QXL and virtio-gpu, VMware SVGA, Cirrus, Hyper-V): not passed-through GPUs.
pub const EMULATED_DISPLAY_VENDORS: [u16; 6] = [0x1234, 0x1b36, 0x1af4, 0x15ad, 0x1013, 0x1414];

/// A passed-through GPU: a display/3D controller that no hypervisor emulates.
pub fn is_passthrough_gpu(vendor: u16, class: u32) -> bool {
    is_gpu_class(class) && !EMULATED_DISPLAY_VENDORS.contains(&vendor)
}

/// Guest drivers whose `enabling device` line marks a GPU.
pub const GPU_DRIVERS: [&str; 6] = ["nvidia", "nouveau", "amdgpu", "radeon", "i915", "xe"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines() {
        let l = parse_line(
            "[    3.201931] pci 0000:02:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint",
        )
        .unwrap();
        assert!((l.t - 3.201931).abs() < 1e-9);
        assert_eq!(
            l.kind,
            KernelKind::PciFound {
                bdf: "0000:02:00.0".into(),
                vendor: 0x10de,
                device: 0x2330,
                class: 0x030200
            }
        );
        let l = parse_line(
            "[    3.202551] pci 0000:02:00.0: BAR 2 [mem 0x00000000-0x1fffffffff 64bit pref]",
        )
        .unwrap();
        assert_eq!(
            l.kind,
            KernelKind::Bar {
                bdf: "0000:02:00.0".into(),
                index: 2,
                size: 128 << 30,
                assigned: false
            }
        );
        let l = parse_line("[    5.681204] pci 0000:02:00.0: BAR 2 [mem 0x3a4000000000-0x3a5fffffffff 64bit pref]: assigned").unwrap();
        assert!(
            matches!(l.kind, KernelKind::Bar { assigned: true, size, .. } if size == 128 << 30)
        );
        let l = parse_line("[   32.130338] nvidia 0000:07:00.0: enabling device (0140 -> 0142)")
            .unwrap();
        assert_eq!(
            l.kind,
            KernelKind::DriverEnable {
                driver: "nvidia".into(),
                bdf: "0000:07:00.0".into()
            }
        );
        let l = parse_line(
            "[    6.505076] pci 0000:02:00.0: nv_msi_ht_cap_quirk_leaf+0x0/0x20 took 803659 usecs",
        )
        .unwrap();
        assert_eq!(
            l.kind,
            KernelKind::InitcallDone {
                func: "nv_msi_ht_cap_quirk_leaf".into(),
                usecs: 803_659,
                bdf: Some("0000:02:00.0".into())
            }
        );
        let l = parse_line("[   35.757629] NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.").unwrap();
        assert!(matches!(l.kind, KernelKind::Nvrm(_)));
        let l = parse_line("<6>[    0.437005] brd: module loaded").unwrap();
        assert_eq!(l.kind, KernelKind::Other);
    }

    #[test]
    fn initcall_debug() {
        let l = parse_line("[    1.000100] calling  nvidia_init_module+0x0/0x1000 [nvidia] @ 1")
            .unwrap();
        assert_eq!(
            l.kind,
            KernelKind::InitcallStart {
                func: "nvidia_init_module".into()
            }
        );
        let l = parse_line("[    1.500100] initcall nvidia_init_module+0x0/0x1000 [nvidia] returned 0 after 500000 usecs").unwrap();
        assert!(matches!(
            l.kind,
            KernelKind::InitcallDone { usecs: 500_000, .. }
        ));
    }

    #[test]
    fn not_kernel() {
        assert!(parse_line("[0]                   89 |@@@|").is_none());
        assert!(parse_line("[2, 4)                 8 |@@@@ |").is_none());
        assert!(parse_line("[...]").is_none());
        assert!(parse_line("[ .5] x").is_none());
        assert!(!is_bdf("0000:02:00.g"));
        assert!(is_bdf("0000:0a:1f.7"));
        assert!(is_bdf("10000:e1:00.0"));
        // a device behind Intel VMD, as the host kernel prints it
        let l = parse_line(
            "[    5.118210] pci 10000:e1:00.0: [144d:a80a] type 00 class 0x010802 PCIe Endpoint",
        )
        .unwrap();
        assert!(
            matches!(&l.kind, KernelKind::PciFound { bdf, .. } if bdf == "10000:e1:00.0"),
            "{:?}",
            l.kind
        );
        assert!(is_bdf("ffffffff:e1:00.0"));
        assert!(!is_bdf("000:0a:1f.7"));
        assert!(!is_bdf("100000000:e1:00.0"));
        assert!(!is_bdf("10000:e1:00:0"));
        assert!(!is_bdf(""));
    }

    /// BAR lines of older kernels (the shape of the WSL2 boot log in microsoft/WSL#5289 and
    /// 5.x dmesg), written here for an H100.
    #[test]
    fn old_bar_formats() {
        let l = parse_line(
            "[    3.202551] pci 0000:02:00.0: reg 0x18: [mem 0x00000000-0x1fffffffff 64bit pref]",
        )
        .unwrap();
        assert_eq!(
            l.kind,
            KernelKind::Bar {
                bdf: "0000:02:00.0".into(),
                index: 2,
                size: 128 << 30,
                assigned: false
            }
        );
        let l = parse_line(
            "[    5.681204] pci 0000:02:00.0: BAR 2: assigned [mem 0x3a4000000000-0x3a5fffffffff 64bit pref]",
        )
        .unwrap();
        assert!(
            matches!(l.kind, KernelKind::Bar { index: 2, assigned: true, size, .. } if size == 128 << 30)
        );
        for other in [
            "[    3.2] pci 0000:02:00.0: reg 0x30: [mem 0xfff80000-0xffffffff pref]",
            "[    3.2] pci 0000:02:00.0: reg 0x10: [io  0x1000-0x10ff]",
        ] {
            assert_eq!(
                parse_line(other).unwrap().kind,
                KernelKind::Other,
                "{other}"
            );
        }
        // a failed assignment is not a BAR of the device's memory: it is its own kind
        for (line, name, size, pref64) in [
            ("[    3.2] pci 0000:02:00.0: BAR 2: no space for [mem size 0x2000000000 64bit pref]", "BAR 2", Some(128u64 << 30), true),
            ("[    3.2] pci 0000:02:00.0: BAR 2: failed to assign [mem size 0x2000000000 64bit pref]", "BAR 2", Some(128 << 30), true),
            ("[    7.592937] pci 0000:01:02.0: BAR 0: no space for [mem size 0x01000000]", "BAR 0", Some(16 << 20), false),
            ("[   10.03] pci 0006:03:00.2: BAR 0 [mem size 0x00800000 64bit pref]: can't assign; no space", "BAR 0", Some(8 << 20), true),
            ("[    4.18] pci 0000:08:00.0: VF BAR 0 [mem size 0x00400000 64bit pref]: failed to assign", "VF BAR 0", Some(4 << 20), true),
            ("[    4.19] pci 0000:10:01.0: bridge window [mem size 0x00200000 64bit pref]: can't assign; no space", "bridge window", Some(2 << 20), true),
            ("[    1.0] pcieport 0000:7b:02.0: BAR 15: no space for [mem size 0x00200000 64bit pref]", "BAR 15", Some(2 << 20), true),
        ] {
            let KernelKind::BarFailed { name: n, size: z, pref64: p, .. } = parse_line(line).unwrap().kind else {
                panic!("{line}")
            };
            assert_eq!((n.as_str(), z, p), (name, size, pref64), "{line}");
        }
        assert_eq!(
            parse_line("[    4.190030] pci_bus 0000:00: Some PCI device resources are unassigned, try booting with pci=realloc").unwrap().kind,
            KernelKind::PciRealloc
        );
        assert_eq!(
            parse_line("[83260.063557] nvidia: probe of 0000:14:00.0 failed with error -1")
                .unwrap()
                .kind,
            KernelKind::ProbeFailed {
                driver: "nvidia".into(),
                bdf: "0000:14:00.0".into(),
                error: -1
            }
        );
        assert_eq!(
            continuation("               NVRM: BAR1 is 0M @ 0x0 (PCI:0000:0a:00.0)"),
            Some(KernelKind::Nvrm(
                "BAR1 is 0M @ 0x0 (PCI:0000:0a:00.0)".into()
            ))
        );
        assert_eq!(continuation("NVRM: not indented"), None);
        assert!(!is_passthrough_gpu(0x1234, 0x030000));
        assert!(is_passthrough_gpu(0x10de, 0x030200));
    }

    proptest::proptest! {
        /// Any stamp and message read in plain `dmesg`'s shape read the same through `-r`,
        /// `-x`, `-d`, `-x -d` and `journalctl -k -o short-monotonic`; the wall-clock shapes
        /// never parse as a stamp and are named instead.
        #[test]
        fn shapes_with_seconds_since_boot_read_as_plain(
            s in 0u64..10_000_000,
            us in 0u64..1_000_000,
            delta in 0.0f64..1000.0,
            level in proptest::sample::select(LEVELS.to_vec()),
            facility in proptest::sample::select(vec!["kern", "user", "daemon", "local7"]),
            msg in proptest::sample::select(vec![
                "pci 0000:02:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint",
                "pci 0000:02:00.0: BAR 2 [mem 0x3a4000000000-0x3a5fffffffff 64bit pref]: assigned",
                "nvidia 0000:02:00.0: enabling device (0000 -> 0002)",
                "Run /init as init process",
                "NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
                "brd: module loaded",
            ]),
        ) {
            let plain = parse_line(&format!("[{s:5}.{us:06}] {msg}")).unwrap();
            let shapes = [
                format!("<6>[{s:5}.{us:06}] {msg}"),
                format!("{facility:<6}:{level:<6}: [{s:5}.{us:06}] {msg}"),
                format!("[{s:5}.{us:06} <{delta:12.6}>] {msg}"),
                format!("{facility:<6}:{level:<6}: [{s:5}.{us:06} <{delta:12.6}>] {msg}"),
                format!("[{s:5}.{us:06}] gpu-vm kernel: {msg}"),
            ];
            for line in &shapes {
                proptest::prop_assert_eq!(parse_line(line), Some(plain.clone()), "{}", line);
                proptest::prop_assert_eq!(wall_clock_shape(line), None);
            }
            let (h, m, sec) = (s / 3600 % 24, s / 60 % 60, s % 60);
            for (line, shape) in [
                (format!("[Thu Nov 20 {h:02}:{m:02}:{sec:02} 2025] {msg}"), "dmesg -T (--ctime)"),
                (format!("[Thu Nov 20 {h:02}:{m:02}:{sec:02} 2025 <{delta:12.6}>] {msg}"), "dmesg -T (--ctime)"),
                (format!("2025-11-20T{h:02}:{m:02}:{sec:02},{us:06}+00:00 {msg}"), "dmesg --time-format iso"),
                (format!("[  {delta:+8.6}] {msg}"), "dmesg -e (--reltime)"),
            ] {
                proptest::prop_assert_eq!(parse_line(&line), None, "{}", line);
                proptest::prop_assert_eq!(wall_clock_shape(&line), Some(shape), "{}", line);
            }
        }
    }
}

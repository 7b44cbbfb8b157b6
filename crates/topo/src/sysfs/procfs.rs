//! What the loader takes from `/proc`: `cpuinfo` (CPU model per package, vendor and family
//! for quirks, TSC flags), the hostname, and the interrupt table with affinities.

use crate::error::TopoError;
use crate::interrupts::{fill_affinities, parse_proc_interrupts};
use crate::model::InterruptTable;

use super::fs::Fs;

/// One `processor : N` block of `/proc/cpuinfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfoProc {
    pub processor: u32,
    /// `model name` (x86, ARM) or `cpu` (POWER).
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub family: Option<u32>,
    /// `flags` (x86) or `Features` (ARM), split on whitespace.
    pub flags: Option<Vec<String>>,
}

/// Parse `/proc/cpuinfo`. Blocks without a numeric `processor` line are skipped (the
/// trailing machine block of POWER, the header of old ARM kernels).
pub fn parse_cpuinfo(text: &str) -> Vec<CpuInfoProc> {
    let mut out = Vec::new();
    let mut cur: Option<CpuInfoProc> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        if key == "processor" {
            if let Some(p) = cur.take() {
                out.push(p);
            }
            cur = value.parse::<u32>().ok().map(|n| CpuInfoProc {
                processor: n,
                ..Default::default()
            });
            continue;
        }
        let Some(p) = cur.as_mut() else { continue };
        match key {
            "model name" | "cpu"
                if !value.is_empty() && (p.model.is_none() || key == "model name") =>
            {
                p.model = Some(value.to_string());
            }
            "vendor_id" => p.vendor = Some(value.to_string()),
            "cpu family" => p.family = value.parse().ok(),
            "flags" | "Features" => {
                p.flags = Some(value.split_whitespace().map(str::to_string).collect())
            }
            _ => {}
        }
    }
    if let Some(p) = cur {
        out.push(p);
    }
    out
}

/// AMD families whose compute units pair two cores under one `thread_siblings` (Bulldozer
/// 15h, Jaguar 16h); hwloc then makes one core per thread.
pub fn is_amd_with_compute_units(procs: &[CpuInfoProc]) -> bool {
    procs.first().is_some_and(|p| {
        p.vendor.as_deref() == Some("AuthenticAMD") && matches!(p.family, Some(0x15 | 0x16))
    })
}

/// AMD before Zen 5 (family 1Ah) has a single CPU kind; hwloc skips kind detection there
/// because per-core boost frequencies would make a uniform part look hybrid.
pub fn is_amd_pre_zen5(procs: &[CpuInfoProc]) -> bool {
    procs.first().is_some_and(|p| {
        p.vendor.as_deref() == Some("AuthenticAMD") && p.family.is_some_and(|f| f < 0x1a)
    })
}

/// Whether the TSC is a stable clocksource: x86 `constant_tsc` and `nonstop_tsc` on every
/// CPU, and `tsc` among the available clocksources. Each known part must agree; `None` when
/// neither is known (no x86 flags and no clocksource file).
pub fn tsc_stable(procs: &[CpuInfoProc], available_clocksource: Option<&str>) -> Option<bool> {
    let with_flags: Vec<&Vec<String>> = procs.iter().filter_map(|p| p.flags.as_ref()).collect();
    let x86 = procs.iter().any(|p| p.vendor.is_some());
    let flags_ok =
        if x86 && !with_flags.is_empty() {
            Some(with_flags.iter().all(|f| {
                f.iter().any(|x| x == "constant_tsc") && f.iter().any(|x| x == "nonstop_tsc")
            }))
        } else {
            None
        };
    let cs_ok = available_clocksource.map(|s| s.split_whitespace().any(|c| c == "tsc"));
    match (flags_ok, cs_ok) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(true) && b.unwrap_or(true)),
    }
}

/// Hostname: `/proc/sys/kernel/hostname`, else the `HostName:` line hwloc's snapshot tool
/// records in `proc/hwloc-nofile-info`.
pub fn hostname(fs: &Fs) -> Option<String> {
    if let Some(h) = fs.read("proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() {
            return Some(h.to_string());
        }
    }
    let info = fs.read("proc/hwloc-nofile-info")?;
    info.lines()
        .find_map(|l| l.strip_prefix("HostName:"))
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// The machine architecture: `/proc/sys/kernel/arch` (uname's machine), else the
/// `Architecture:` line hwloc's snapshot tool records in `proc/hwloc-nofile-info`.
pub fn arch(fs: &Fs) -> Option<String> {
    if let Some(a) = fs.read("proc/sys/kernel/arch") {
        let a = a.trim();
        if !a.is_empty() {
            return Some(a.to_string());
        }
    }
    let info = fs.read("proc/hwloc-nofile-info")?;
    info.lines()
        .find_map(|l| l.strip_prefix("Architecture:"))
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
}

/// `/proc/interrupts` with `/proc/irq/N/{smp,effective}_affinity_list`. Missing file → `None`;
/// an empty one too: container runtimes mask it with an empty file in unprivileged
/// containers (Kubernetes' and containerd's default masked paths), and the kernel never writes
/// it empty (it always has the CPU header). A file that does not parse → an error naming it
/// and the line.
pub fn interrupts(fs: &Fs) -> Result<Option<InterruptTable>, TopoError> {
    let Some(text) = fs.read("proc/interrupts") else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut table = parse_proc_interrupts(&text).map_err(|e| fs.error("proc/interrupts", e))?;
    fill_affinities(&mut table, |p| fs.read(&format!("proc/irq/{p}")));
    Ok(Some(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model name\t: Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz\n\
flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";

    const POWER: &str =
        "processor\t: 0\ncpu\t\t: POWER9, altivec supported\nclock\t\t: 3450.000000MHz\n\n\
processor\t: 1\ncpu\t\t: POWER9, altivec supported\n\ntimebase\t: 512000000\nplatform\t: PowerNV\n";

    #[test]
    fn a_masked_proc_interrupts_is_unknown() {
        let dir = std::env::temp_dir().join(format!("vmtune-masked-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc")).unwrap();
        std::fs::write(dir.join("proc/interrupts"), "").unwrap();
        let fs = Fs::dir(&dir);
        assert!(matches!(interrupts(&fs), Ok(None)));
        std::fs::write(dir.join("proc/interrupts"), "garbage\n").unwrap();
        assert!(
            interrupts(&fs).is_err(),
            "a file with text that does not parse is still an error"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpuinfo_blocks() {
        let p = parse_cpuinfo(X86);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].processor, 1);
        assert_eq!(
            p[0].model.as_deref(),
            Some("Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz")
        );
        assert_eq!(p[0].family, Some(6));
        assert!(!is_amd_with_compute_units(&p));
        let p = parse_cpuinfo(POWER);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].model.as_deref(), Some("POWER9, altivec supported"));
        assert_eq!(p[1].vendor, None);
        assert!(parse_cpuinfo("garbage\n:::\nprocessor: x\n").is_empty());
    }

    #[test]
    fn tsc() {
        let p = parse_cpuinfo(X86);
        assert_eq!(tsc_stable(&p, Some("tsc hpet acpi_pm \n")), Some(true));
        assert_eq!(tsc_stable(&p, Some("hpet acpi_pm")), Some(false));
        assert_eq!(tsc_stable(&p, None), Some(true));
        let no_nonstop = X86.replace(" nonstop_tsc", "");
        assert_eq!(tsc_stable(&parse_cpuinfo(&no_nonstop), None), Some(false));
        assert_eq!(tsc_stable(&parse_cpuinfo(POWER), None), None);
        assert_eq!(
            tsc_stable(&parse_cpuinfo(POWER), Some("timebase")),
            Some(false)
        );
    }

    #[test]
    fn amd_quirks() {
        let bd = "processor : 0\nvendor_id : AuthenticAMD\ncpu family : 21\n";
        assert!(is_amd_with_compute_units(&parse_cpuinfo(bd)));
        assert!(is_amd_pre_zen5(&parse_cpuinfo(bd)));
        let zen5 = "processor : 0\nvendor_id : AuthenticAMD\ncpu family : 26\n";
        assert!(!is_amd_pre_zen5(&parse_cpuinfo(zen5)));
    }
}

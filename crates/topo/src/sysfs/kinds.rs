//! CPU kinds (hybrid parts), found the way hwloc's Linux backend finds them:
//!
//! 1. Intel PMU sets: `/sys/devices/cpu_core/cpus`, `cpu_atom/cpus`, `cpu_lowpower/cpus`
//!    (hwloc info `CoreType` = `IntelCore` / `IntelAtom` / `IntelLowPower`);
//! 2. `cpuN/cpu_capacity` (ARM big.LITTLE, and newer x86 kernels);
//! 3. `cpuN/cpufreq/cpuinfo_max_freq` with `base_frequency` (or `acpi_cppc/nominal_freq`):
//!    where PUs of one base frequency have max frequencies less than 10% apart (Turbo Boost
//!    Max 3.0 favoured cores), they are made equal first, so a uniform part is not split.
//!
//! PUs are partitioned by all of these at once (hwloc intersects the kinds each source
//! registers). Fewer than two resulting sets means a single-kind part: no kinds. hwloc does
//! not look for kinds on AMD before Zen 5, neither do we.

use std::collections::BTreeMap;

use crate::cpuset::CpuSet;
use crate::model::CpuKind;

/// What sysfs says about one PU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PuFreq {
    pub cpu: u32,
    pub max_khz: Option<u64>,
    pub base_khz: Option<u64>,
    pub capacity: Option<u64>,
}

/// Intel PMU core types, slowest first (the order is their rank).
pub const CORE_TYPES: [(&str, &str); 3] = [
    ("cpu_lowpower", "IntelLowPower"),
    ("cpu_atom", "IntelAtom"),
    ("cpu_core", "IntelCore"),
];

/// hwloc's default tolerance for max-frequency differences within one base frequency.
const ADJUST_MAX_PERCENT: u64 = 10;

/// Partition PUs into kinds. `core_types[i]` is the cpuset of `CORE_TYPES[i]` where sysfs has
/// it.
pub fn derive_kinds(
    pus: &[PuFreq],
    core_types: &[Option<CpuSet>; 3],
    amd_pre_zen5: bool,
) -> Vec<CpuKind> {
    if amd_pre_zen5 || pus.is_empty() {
        return Vec::new();
    }
    let mut pus = pus.to_vec();
    adjust_max_freqs(&mut pus);

    type Key = (Option<usize>, Option<u64>, Option<u64>, Option<u64>);
    let mut groups: BTreeMap<Key, CpuSet> = BTreeMap::new();
    for p in &pus {
        let ct = core_types
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.contains(p.cpu)));
        let key: Key = (ct, p.capacity, p.max_khz, p.base_khz);
        if key == (None, None, None, None) {
            continue;
        }
        groups.entry(key).or_default().insert(p.cpu);
    }
    if groups.len() < 2 {
        return Vec::new();
    }
    // BTreeMap order is (core type rank, capacity, max, base) ascending: slowest first.
    groups
        .into_iter()
        .enumerate()
        .map(|(rank, ((ct, _cap, max, _base), cpus))| CpuKind {
            label: String::new(),
            efficiency: Some(rank as i32),
            name: ct.map(|i| CORE_TYPES[i].1.to_string()),
            max_freq_mhz: max.map(|k| (k / 1000) as u32),
            cpus,
        })
        .collect()
}

/// hwloc `hwloc_linux_cpukinds_adjust_maxfreqs`: only when every PU with a max frequency
/// also has a base frequency.
fn adjust_max_freqs(pus: &mut [PuFreq]) {
    if pus
        .iter()
        .any(|p| p.max_khz.is_some() && p.base_khz.is_none())
    {
        return;
    }
    let bases: Vec<Option<u64>> = {
        let mut b: Vec<Option<u64>> = pus.iter().map(|p| p.base_khz).collect();
        b.sort();
        b.dedup();
        b
    };
    for base in bases {
        let same = || pus.iter().filter(|p| p.base_khz == base);
        let (Some(lo), Some(hi)) = (
            same().filter_map(|p| p.max_khz).min(),
            same().filter_map(|p| p.max_khz).max(),
        ) else {
            continue;
        };
        let min_cap = same().filter_map(|p| p.capacity).min();
        if lo > 0 && hi != lo && (hi - lo) * 100 / lo < ADJUST_MAX_PERCENT {
            for p in pus.iter_mut().filter(|p| p.base_khz == base) {
                p.max_khz = Some(lo);
                if min_cap.is_some() {
                    p.capacity = min_cap;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(cpu: u32, max: u64, base: u64) -> PuFreq {
        PuFreq {
            cpu,
            max_khz: Some(max),
            base_khz: Some(base),
            capacity: None,
        }
    }

    #[test]
    fn hybrid_by_frequency() {
        // i7-1370P: 12 P-threads at 5.0/1.9 GHz, 8 E-cores at 3.9/1.4 GHz
        let pus: Vec<PuFreq> = (0..20)
            .map(|c| {
                if c < 12 {
                    pu(c, 5_000_000, 1_900_000)
                } else {
                    pu(c, 3_900_000, 1_400_000)
                }
            })
            .collect();
        let k = derive_kinds(&pus, &[None, None, None], false);
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].cpus.to_list_string(), "12-19");
        assert_eq!(k[0].max_freq_mhz, Some(3900));
        assert_eq!(k[1].cpus.to_list_string(), "0-11");
        assert!(k[1].efficiency > k[0].efficiency);
    }

    #[test]
    fn turbo_boost_max_favoured_cores_are_not_a_kind() {
        // two favoured cores boost 100 MHz higher: same kind (within 10%)
        let pus: Vec<PuFreq> = (0..8)
            .map(|c| pu(c, if c < 2 { 4_100_000 } else { 4_000_000 }, 2_000_000))
            .collect();
        assert!(derive_kinds(&pus, &[None, None, None], false).is_empty());
        // without base frequencies hwloc does not adjust
        let pus: Vec<PuFreq> = pus
            .into_iter()
            .map(|p| PuFreq {
                base_khz: None,
                ..p
            })
            .collect();
        assert_eq!(derive_kinds(&pus, &[None, None, None], false).len(), 2);
        assert!(derive_kinds(&pus, &[None, None, None], true).is_empty());
    }

    #[test]
    fn intel_pmu_sets_and_capacity() {
        let pus: Vec<PuFreq> = (0..4)
            .map(|c| PuFreq {
                cpu: c,
                capacity: Some(1024),
                ..Default::default()
            })
            .collect();
        assert!(derive_kinds(&pus, &[None, None, None], false).is_empty());
        let core = CpuSet::parse_list("0-1").ok();
        let atom = CpuSet::parse_list("2-3").ok();
        let k = derive_kinds(&pus, &[None, atom, core], false);
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].name.as_deref(), Some("IntelAtom"));
        assert_eq!(k[1].name.as_deref(), Some("IntelCore"));
        let big_little: Vec<PuFreq> = (0..4)
            .map(|c| PuFreq {
                cpu: c,
                capacity: Some(if c < 2 { 1024 } else { 446 }),
                ..Default::default()
            })
            .collect();
        let k = derive_kinds(&big_little, &[None, None, None], false);
        assert_eq!(k[0].cpus.to_list_string(), "2-3");
    }
}

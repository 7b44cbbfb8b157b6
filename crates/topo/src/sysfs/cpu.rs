//! CPUs from `/sys/devices/system/cpu`: which PUs exist (online ones only), cores and SMT
//! siblings, packages, dies, caches and CPU kinds.
//!
//! A CPU whose `topology/` has no SMT sibling list (`core_cpus`, `thread_siblings`) but says
//! where it sits (`physical_package_id`, `core_id`, `core_siblings`, `package_cpus`) is read
//! as hwloc reads it: its own core, or one core with the CPUs that share its package and
//! `core_id`; a package known only by `physical_package_id` holds the CPUs with that id.

use std::collections::BTreeMap;

use crate::cpuset::CpuSet;
use crate::error::TopoError;
use crate::model::{CacheType, CpuKind, RawCache, RawGroup};

use super::fs::Fs;
use super::kinds::{derive_kinds, PuFreq, CORE_TYPES};
use super::procfs::{is_amd_pre_zen5, is_amd_with_compute_units, CpuInfoProc};

pub const CPU_DIR: &str = "sys/devices/system/cpu";

/// What `/sys/devices/system/cpu` says.
#[derive(Debug, Default)]
pub struct CpuTopo {
    pub pus: CpuSet,
    pub cores: Vec<RawGroup>,
    pub packages: Vec<(RawGroup, Option<String>)>,
    pub dies: Vec<RawGroup>,
    pub caches: Vec<RawCache>,
    pub kinds: Vec<CpuKind>,
    /// Cores read without an SMT sibling list, in words, for [`crate::model::Host::notes`].
    pub notes: Vec<String>,
}

/// Read a CPU mask file (`0000000f`) or, failing that, its list twin (`0-3`). The mask is
/// the kernel's primary form and what hwloc reads; some snapshots carry list files that
/// disagree with it (hwloc's 64amd64 snapshot lists single CPUs for shared L2s). `Ok(None)`
/// when neither exists; a file that exists but does not parse is an error naming it.
pub fn read_set(fs: &Fs, list: &str, mask: &str) -> Result<Option<CpuSet>, TopoError> {
    if let Some(s) = fs.read(mask) {
        return CpuSet::parse_mask(&s)
            .map(Some)
            .map_err(|e| fs.error(mask, e));
    }
    if let Some(s) = fs.read(list) {
        return CpuSet::parse_list(&s)
            .map(Some)
            .map_err(|e| fs.error(list, e));
    }
    Ok(None)
}

/// A small decimal file; `None` when missing, negative (`-1` = unknown) or not a number.
pub fn read_u64(fs: &Fs, rel: &str) -> Option<u64> {
    fs.read(rel)?.trim().parse::<u64>().ok()
}

fn read_u32(fs: &Fs, rel: &str) -> Option<u32> {
    fs.read(rel)?.trim().parse::<u32>().ok()
}

/// Cache sizes as sysfs writes them: `32K`, `1024K`, `8M`, or plain bytes.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// The online PUs: `online`, else every `cpuN` directory whose `cpuN/online` is not `0`.
fn online_cpus(fs: &Fs) -> Result<CpuSet, TopoError> {
    let names = fs.list(CPU_DIR).ok_or_else(|| {
        fs.error(
            CPU_DIR,
            "missing (not a Linux sysfs tree: no CPU directory)",
        )
    })?;
    let online_file = format!("{CPU_DIR}/online");
    if let Some(s) = fs.read(&online_file) {
        return CpuSet::parse_list(&s).map_err(|e| fs.error(&online_file, e));
    }
    let mut set = CpuSet::new();
    for n in names {
        let Some(cpu) = n.strip_prefix("cpu").and_then(|d| d.parse::<u32>().ok()) else {
            continue;
        };
        if cpu > crate::cpuset::MAX_CPU {
            continue;
        }
        let offline = fs
            .read(&format!("{CPU_DIR}/{n}/online"))
            .is_some_and(|s| s.trim() == "0");
        if !offline {
            set.insert(cpu);
        }
    }
    Ok(set)
}

pub fn read_cpus(fs: &Fs, cpuinfo: &[CpuInfoProc]) -> Result<CpuTopo, TopoError> {
    let pus = online_cpus(fs)?;
    if pus.is_empty() {
        return Err(fs.error(CPU_DIR, "no online CPUs"));
    }
    let amd_cu = is_amd_with_compute_units(cpuinfo);
    let mut out = CpuTopo {
        pus: pus.clone(),
        ..Default::default()
    };
    let mut package_sets: Vec<CpuSet> = Vec::new();
    let mut die_candidates: Vec<RawGroup> = Vec::new();
    let mut freqs: Vec<PuFreq> = Vec::new();
    let mut coreless: Vec<Coreless> = Vec::new();
    // CPUs with a physical_package_id but no package set, by that id
    let mut package_ids: BTreeMap<u32, CpuSet> = BTreeMap::new();

    for cpu in pus.iter() {
        let t = format!("{CPU_DIR}/cpu{cpu}/topology");
        let core_id = read_u32(fs, &format!("{t}/core_id"));
        let package_id = read_u32(fs, &format!("{t}/physical_package_id"));
        let pkg = package_set(fs, &t, &pus)?;
        let core = match core_set(fs, &t, cpu, &pus, amd_cu, core_id)? {
            Some(core) => {
                if core.first() == Some(cpu) {
                    out.cores.push(RawGroup {
                        os_index: core_id,
                        cpus: core.clone(),
                    });
                }
                core
            }
            None => {
                // no SMT sibling list: placed by what else the directory says, or refused
                if !PLACE_FILES.iter().any(|f| fs.exists(&format!("{t}/{f}"))) {
                    return Err(fs.error(
                        &format!("{t}/core_cpus"),
                        format!(
                            "missing (and no thread_siblings, core_id, physical_package_id or core_siblings) for online CPU {cpu}"
                        ),
                    ));
                }
                coreless.push(Coreless {
                    cpu,
                    core_id,
                    package: match (package_id, pkg.as_ref().and_then(|p| p.first())) {
                        (Some(id), _) => Some(PackageKey::Id(id)),
                        (None, Some(first)) => Some(PackageKey::FirstCpu(first)),
                        (None, None) => None,
                    },
                });
                std::iter::once(cpu).collect()
            }
        };

        match pkg {
            Some(pkg) => {
                if pkg.first() == Some(cpu) {
                    package_sets.push(pkg.clone());
                    out.packages.push((
                        RawGroup {
                            os_index: package_id,
                            cpus: pkg,
                        },
                        None,
                    ));
                }
            }
            None => {
                if let Some(id) = package_id {
                    package_ids.entry(id).or_default().insert(cpu);
                }
            }
        }

        if let Some(die) = read_set(fs, &format!("{t}/die_cpus_list"), &format!("{t}/die_cpus"))? {
            let die = die.intersection(&pus);
            if die.len() > 1 && die.first() == Some(cpu) {
                die_candidates.push(RawGroup {
                    os_index: read_u32(fs, &format!("{t}/die_id")),
                    cpus: die,
                });
            }
        }

        read_caches(fs, cpu, &core, &pus, &mut out.caches)?;
        freqs.push(read_freq(fs, cpu));
    }

    // packages known only by physical_package_id, for the CPUs no package set holds
    let in_sets = package_sets
        .iter()
        .fold(CpuSet::new(), |acc, s| acc.union(s));
    for (id, cpus) in package_ids {
        let cpus = cpus.difference(&in_sets);
        if !cpus.is_empty() {
            package_sets.push(cpus.clone());
            out.packages.push((
                RawGroup {
                    os_index: Some(id),
                    cpus,
                },
                None,
            ));
        }
    }
    out.notes = cores_without_siblings(&mut out.cores, coreless);

    // Dies identical to their package add nothing (hwloc drops them too).
    out.dies = die_candidates
        .into_iter()
        .filter(|d| !package_sets.contains(&d.cpus))
        .collect();

    for (g, model) in &mut out.packages {
        *model = g.cpus.iter().find_map(|c| {
            cpuinfo
                .iter()
                .find(|p| p.processor == c)
                .and_then(|p| p.model.clone())
        });
    }

    let mut core_types: [Option<CpuSet>; 3] = [None, None, None];
    for (slot, (dir, _)) in core_types.iter_mut().zip(CORE_TYPES.iter()) {
        let f = format!("sys/devices/{dir}/cpus");
        if let Some(s) = fs.read(&f) {
            *slot = Some(CpuSet::parse_list(&s).map_err(|e| fs.error(&f, e))?);
        }
    }
    out.kinds = derive_kinds(&freqs, &core_types, is_amd_pre_zen5(cpuinfo));
    Ok(out)
}

/// A CPU's package set: `package_cpus` (new name), else `core_siblings`, list or mask, of
/// the online CPUs.
fn package_set(fs: &Fs, t: &str, pus: &CpuSet) -> Result<Option<CpuSet>, TopoError> {
    let set = match read_set(
        fs,
        &format!("{t}/package_cpus_list"),
        &format!("{t}/package_cpus"),
    )? {
        Some(s) => Some(s),
        None => read_set(
            fs,
            &format!("{t}/core_siblings_list"),
            &format!("{t}/core_siblings"),
        )?,
    };
    Ok(set.map(|p| p.intersection(pus)))
}

/// A CPU's core (itself and its SMT siblings): `core_cpus` (new name), else
/// `thread_siblings`, list or mask; `None` when the directory has neither.
fn core_set(
    fs: &Fs,
    t: &str,
    cpu: u32,
    pus: &CpuSet,
    amd_cu: bool,
    core_id: Option<u32>,
) -> Result<Option<CpuSet>, TopoError> {
    let set = match read_set(
        fs,
        &format!("{t}/core_cpus_list"),
        &format!("{t}/core_cpus"),
    )? {
        Some(s) => s,
        None => match read_set(
            fs,
            &format!("{t}/thread_siblings_list"),
            &format!("{t}/thread_siblings"),
        )? {
            Some(s) => s,
            None => return Ok(None),
        },
    };
    let mut core = set.intersection(pus);
    core.insert(cpu);
    if amd_cu && core.len() > 1 {
        // Bulldozer compute unit: siblings with their own core_id are cores
        let split = core
            .iter()
            .filter(|&c| c != cpu)
            .any(|c| read_u32(fs, &format!("{CPU_DIR}/cpu{c}/topology/core_id")) != core_id);
        if split {
            core = std::iter::once(cpu).collect();
        }
    }
    Ok(Some(core))
}

/// Files of `cpuN/topology/` that place a CPU even without a core set: with any of them, a
/// CPU lacking `core_cpus`/`thread_siblings` is read as hwloc reads it, not refused.
const PLACE_FILES: [&str; 6] = [
    "core_id",
    "physical_package_id",
    "core_siblings",
    "core_siblings_list",
    "package_cpus",
    "package_cpus_list",
];

/// A package as a CPU without a core set knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum PackageKey {
    /// `physical_package_id`.
    Id(u32),
    /// The first CPU of its package set (`core_siblings` without an id).
    FirstCpu(u32),
}

/// A CPU whose `topology/` has no core set (`core_cpus`, `thread_siblings`, their lists).
struct Coreless {
    cpu: u32,
    core_id: Option<u32>,
    package: Option<PackageKey>,
}

/// Cores of the CPUs without a core set, not already in another CPU's core: the CPUs sharing
/// a known package and a `core_id` are one core's threads (`core_id` is unique within a
/// package); every other one is its own core, as hwloc reads them. Returns the notes.
fn cores_without_siblings(cores: &mut Vec<RawGroup>, coreless: Vec<Coreless>) -> Vec<String> {
    let covered = cores
        .iter()
        .fold(CpuSet::new(), |acc, c| acc.union(&c.cpus));
    let mut by_id: BTreeMap<(PackageKey, u32), CpuSet> = BTreeMap::new();
    let (mut grouped, mut single) = (CpuSet::new(), CpuSet::new());
    for c in coreless.into_iter().filter(|c| !covered.contains(c.cpu)) {
        match (c.package, c.core_id) {
            (Some(p), Some(id)) => {
                by_id.entry((p, id)).or_default().insert(c.cpu);
                grouped.insert(c.cpu);
            }
            _ => {
                cores.push(RawGroup {
                    os_index: c.core_id,
                    cpus: std::iter::once(c.cpu).collect(),
                });
                single.insert(c.cpu);
            }
        }
    }
    for ((_, id), cpus) in by_id {
        cores.push(RawGroup {
            os_index: Some(id),
            cpus,
        });
    }
    let mut notes = Vec::new();
    if !grouped.is_empty() {
        notes.push(format!(
            "CPUs {grouped} have no SMT sibling list (topology/thread_siblings, core_cpus): cores read from (physical_package_id, core_id)"
        ));
    }
    if !single.is_empty() {
        notes.push(format!(
            "CPUs {single} have no SMT sibling list (topology/thread_siblings, core_cpus) and no core_id in a known package: each read as its own core, as hwloc does"
        ));
    }
    notes
}

/// Frequencies and capacity of one CPU, for telling CPU kinds apart.
fn read_freq(fs: &Fs, cpu: u32) -> PuFreq {
    let c = format!("{CPU_DIR}/cpu{cpu}");
    PuFreq {
        cpu,
        max_khz: read_u64(fs, &format!("{c}/cpufreq/cpuinfo_max_freq")).filter(|&f| f > 0),
        base_khz: read_u64(fs, &format!("{c}/cpufreq/base_frequency"))
            .filter(|&f| f > 0)
            .or_else(|| {
                read_u64(fs, &format!("{c}/acpi_cppc/nominal_freq"))
                    .filter(|&f| f > 0)
                    .map(|mhz| mhz * 1000)
            }),
        capacity: read_u64(fs, &format!("{c}/cpu_capacity")),
    }
}

fn read_caches(
    fs: &Fs,
    cpu: u32,
    core: &CpuSet,
    pus: &CpuSet,
    out: &mut Vec<RawCache>,
) -> Result<(), TopoError> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
    let Some(names) = fs.list(&dir) else {
        return Ok(());
    };
    for idx in names.iter().filter(|n| {
        n.strip_prefix("index")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    }) {
        let d = format!("{dir}/{idx}");
        let Some(shared) = read_set(
            fs,
            &format!("{d}/shared_cpu_list"),
            &format!("{d}/shared_cpu_map"),
        )?
        else {
            continue;
        };
        let mut cpus = shared.intersection(pus);
        if cpus.is_empty() {
            // ia64 reports empty sets for some caches; hwloc uses the core then
            cpus = core.clone();
        }
        if cpus.first() != Some(cpu) {
            continue; // read once, by its first PU
        }
        let Some(level) = read_u32(fs, &format!("{d}/level")).and_then(|l| u8::try_from(l).ok())
        else {
            continue;
        };
        let cache_type = match fs.read(&format!("{d}/type")).as_deref().map(str::trim) {
            Some("Data") => CacheType::Data,
            Some("Instruction") => CacheType::Instruction,
            _ => CacheType::Unified,
        };
        let size_bytes = fs
            .read(&format!("{d}/size"))
            .and_then(|s| parse_cache_size(&s));
        let line_bytes = read_u32(fs, &format!("{d}/coherency_line_size")).filter(|&l| l > 0);
        let sets = read_u64(fs, &format!("{d}/number_of_sets")).filter(|&s| s > 0);
        let partition = read_u64(fs, &format!("{d}/physical_line_partition"))
            .filter(|&p| p > 0)
            .unwrap_or(1);
        // like hwloc: ways from size / (sets * line * partition); ways_of_associativity is
        // 0 or garbage for fully-associative caches on some architectures
        let ways = match (size_bytes, line_bytes, sets) {
            (Some(size), Some(line), Some(sets)) => {
                let per_way = sets.saturating_mul(line as u64).saturating_mul(partition);
                u32::try_from(size / per_way.max(1)).ok().filter(|&w| w > 0)
            }
            _ => read_u32(fs, &format!("{d}/ways_of_associativity")).filter(|&w| w > 0),
        };
        out.push(RawCache {
            level,
            cache_type,
            size_bytes,
            line_bytes,
            ways,
            cpus,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("99999999999999999999G"), None);
    }
}

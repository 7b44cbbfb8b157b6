//! The host model every other crate reads.
//!
//! Loaders never build a [`Host`] directly: they fill a [`RawTopology`] (groups of PUs as
//! cpusets, as each source spells them) and call [`RawTopology::assemble`], which validates the
//! groups and numbers cores, caches, dies and packages the same way for every source, so a
//! sysfs snapshot and an hwloc XML of one machine produce equal ids: hwloc's logical indexes
//! (`Core L#n` in `lstopo`), depth-first through the tree of packages, dies, groups, NUMA
//! nodes and caches, siblings by first PU.
//!
//! Everything a source does not say is `None` (JSON `null`), never a made-up value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::error::TopoError;

/// One logical CPU (hwloc "PU", Linux "cpuN").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pu {
    /// Linux CPU number.
    pub os_index: u32,
    /// Machine-unique core id (index into [`Host::cores`], hwloc's `Core L#`); equal `core`
    /// = SMT siblings.
    pub core: u32,
    /// Package (socket) id, index into [`Host::packages`].
    pub package: Option<u32>,
    /// Die id, index into [`Host::dies`]; `None` where the source has no dies.
    pub die: Option<u32>,
    /// Linux NUMA node id of the node whose CPUs include this PU.
    pub numa: Option<u32>,
    /// Machine-unique ids of the caches of each level that this PU uses (index among the
    /// caches of that level in [`Host::caches`]).
    pub l1d: Option<u32>,
    pub l2: Option<u32>,
    pub l3: Option<u32>,
    /// CPU kind label on hybrid parts (`"performance"`, `"efficiency"`, or `"kindN"` when
    /// there are more than two kinds); `None` on parts with a single kind.
    pub kind: Option<String>,
}

/// A physical core and its SMT siblings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// hwloc's logical index (`Core L#` in lstopo), which is also the position in
    /// [`Host::cores`].
    pub id: u32,
    /// The OS's own core number (`topology/core_id`, hwloc Core os_index); not unique across
    /// packages.
    pub os_index: Option<u32>,
    pub package: Option<u32>,
    pub die: Option<u32>,
    pub pus: CpuSet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheType {
    Data,
    Instruction,
    Unified,
}

/// One cache instance and the PUs that share it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// Index among caches of the same level and type in hwloc's logical order (`L3 L#`).
    pub id: u32,
    pub level: u8,
    #[serde(rename = "type")]
    pub cache_type: CacheType,
    pub size_bytes: Option<u64>,
    pub line_bytes: Option<u32>,
    pub ways: Option<u32>,
    pub cpus: CpuSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub id: u32,
    /// `physical_package_id` / hwloc Package os_index.
    pub os_index: Option<u32>,
    pub cpus: CpuSet,
    /// CPU model name where known (`/proc/cpuinfo` "model name", hwloc CPUModel info).
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Die {
    pub id: u32,
    pub os_index: Option<u32>,
    pub package: Option<u32>,
    pub cpus: CpuSet,
}

/// A CPU kind on a hybrid part (P/E cores, Zen5/Zen5c).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuKind {
    /// Label used in [`Pu::kind`].
    pub label: String,
    /// hwloc efficiency rank: higher = faster. `None` where the source does not rank them.
    pub efficiency: Option<i32>,
    /// Source-specific name, e.g. hwloc `CoreType` (`IntelCore`, `IntelAtom`) or
    /// `AMDPerformance`.
    pub name: Option<String>,
    pub max_freq_mhz: Option<u32>,
    pub cpus: CpuSet,
}

/// Hugepages of one size on one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePages {
    pub size_kb: u64,
    pub total: Option<u64>,
    pub free: Option<u64>,
}

/// What kind of memory a NUMA node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// Ordinary DRAM (the default when nothing says otherwise and the node has CPUs).
    Dram,
    /// High-bandwidth memory (Xeon Max HBM, KNL MCDRAM).
    Hbm,
    /// Memory of a GPU exposed as a NUMA node (POWER9+V100, Grace Hopper).
    Gpu,
    /// Persistent or CXL-attached memory.
    Nvm,
    /// CPU-less node whose nature the source does not tell.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// Linux node id.
    pub os_index: u32,
    /// PUs of this node; empty for CPU-less / memory-only nodes.
    pub cpus: CpuSet,
    pub memory_bytes: Option<u64>,
    pub hugepages: Vec<HugePages>,
    pub memory_kind: MemoryKind,
    /// Free memory in bytes where the source says (live sysfs `MemFree`).
    pub free_bytes: Option<u64>,
}

impl NumaNode {
    pub fn is_cpuless(&self) -> bool {
        self.cpus.is_empty()
    }
}

/// The NUMA distance matrix (ACPI SLIT, or hwloc `NUMALatency`), keyed by node os_index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Distances {
    /// Node os_indexes, in the order of the matrix rows and columns.
    pub nodes: Vec<u32>,
    /// `matrix[i][j]` = distance from `nodes[i]` to `nodes[j]` (10 = local by convention).
    pub matrix: Vec<Vec<u32>>,
}

impl Distances {
    pub fn get(&self, from: u32, to: u32) -> Option<u32> {
        let i = self.nodes.iter().position(|&n| n == from)?;
        let j = self.nodes.iter().position(|&n| n == to)?;
        self.matrix.get(i)?.get(j).copied()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Gpu,
    Nic,
    Storage,
    Accelerator,
    Bridge,
    Other,
}

impl DeviceKind {
    /// Classify by the PCI base class and subclass (`class >> 8`, `class & 0xff`) and vendor
    /// (`None` where unknown).
    pub fn from_class(class: u16, vendor_id: Option<u16>) -> DeviceKind {
        DeviceKind::from_ids(class, vendor_id, None)
    }

    /// As [`DeviceKind::from_class`], knowing the device id too: the onboard server VGA
    /// chips of vendors that also make GPUs (ATI/AMD ES1000 on HP ProLiant and Dell/IBM
    /// boards of the 2000s, `1002:515e` and `1002:5969`) are display controllers, never a
    /// passthrough GPU.
    pub fn from_ids(class: u16, vendor_id: Option<u16>, device_id: Option<u16>) -> DeviceKind {
        if class >> 8 == 0x03
            && vendor_id == Some(0x1002)
            && matches!(device_id, Some(0x515e | 0x5969))
        {
            return DeviceKind::Other;
        }
        let base = (class >> 8) as u8;
        let sub = (class & 0xff) as u8;
        match base {
            // Server BMC / onboard VGA (ASPEED, Matrox G200) is a display controller but never
            // a passthrough GPU: keep the planner from offering it.
            0x03 if matches!(vendor_id, Some(0x1a03 | 0x102b)) => DeviceKind::Other,
            0x03 => DeviceKind::Gpu,
            0x02 => DeviceKind::Nic,
            // InfiniBand controllers are network controllers too
            0x0c if sub == 0x06 => DeviceKind::Nic,
            0x01 => DeviceKind::Storage,
            0x06 => DeviceKind::Bridge,
            // processing accelerators, co-processors
            0x12 | 0x0b => DeviceKind::Accelerator,
            // Some accelerators report class "unassigned" (0xff): classify by vendor.
            0xff if matches!(vendor_id, Some(0x10de | 0x1002)) => DeviceKind::Accelerator,
            _ => DeviceKind::Other,
        }
    }
}

/// A PCI BAR (memory region) with its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar {
    pub index: u8,
    pub size_bytes: u64,
    pub prefetchable: Option<bool>,
    pub bits64: Option<bool>,
}

/// PCI ids are written as hex strings in JSON (`"0x10de"`), as lspci and sysfs spell them.
mod hex16 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:04x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
        let s = String::deserialize(d)?;
        let t = s.trim_start_matches("0x");
        u16::from_str_radix(t, 16).map_err(serde::de::Error::custom)
    }

    pub mod opt {
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(v: &Option<u16>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => super::serialize(v, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
            let s: Option<String> = Option::deserialize(d)?;
            s.map(|s| u16::from_str_radix(s.trim_start_matches("0x"), 16))
                .transpose()
                .map_err(serde::de::Error::custom)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciDevice {
    /// `dddd:bb:dd.f`, lower-case hex.
    pub bdf: String,
    /// PCI vendor id; `None` (JSON `null`) where the source does not give it: no `vendor`
    /// file and no readable config space, or the `0000` hwloc writes for an unknown id
    /// (PCI-SIG assigns neither 0x0000 nor 0xffff). Build it with [`PciDevice::ids`].
    #[serde(with = "hex16::opt", default)]
    pub vendor_id: Option<u16>,
    /// PCI device id; `None` where unknown, and always where the vendor is.
    #[serde(with = "hex16::opt", default)]
    pub device_id: Option<u16>,
    #[serde(with = "hex16::opt", default)]
    pub subsystem_vendor_id: Option<u16>,
    #[serde(with = "hex16::opt", default)]
    pub subsystem_device_id: Option<u16>,
    /// Base class and subclass, `0x0300` for a VGA controller.
    #[serde(with = "hex16")]
    pub class: u16,
    /// Programming interface byte where known.
    pub prog_if: Option<u8>,
    pub kind: DeviceKind,
    /// Device or vendor name where the source has it (hwloc `PCIDevice` info).
    pub name: Option<String>,
    /// Linux NUMA node ids local to the device; `None` = unknown (sysfs `numa_node = -1`, or
    /// an XML without locality).
    pub numa: Option<Vec<u32>>,
    /// PUs local to the device; `None` = unknown.
    pub local_cpus: Option<CpuSet>,
    pub iommu_group: Option<u32>,
    /// Bound kernel driver (`vfio-pci`, `nvidia`, ...).
    pub driver: Option<String>,
    /// BARs with non-zero size; empty where unknown.
    pub bars: Vec<Bar>,
    /// MSI/MSI-X IRQ numbers (`msi_irqs/`); `None` where unknown.
    pub msi_irqs: Option<Vec<u32>>,
    /// Legacy INTx IRQ line where known.
    pub irq: Option<u32>,
    /// BDF of the upstream bridge, if known.
    pub parent: Option<String>,
    /// OS devices the source names for this function (`card0`, `cuda0`, `eth0`, `nvme0`).
    pub os_devices: Vec<String>,
    /// PCIe link speed in GB/s where known.
    pub link_gbps: Option<f32>,
    /// The PCIe link's current and maximum speed and width, and whether it runs below them
    /// (`crate::pcie`); `None` where the source does not say (hwloc XML keeps only the
    /// current bandwidth, `link_gbps`; conventional PCI has no link).
    #[serde(default)]
    pub link: Option<PciLink>,
    /// The VFIO device cdev (`vfio-dev/vfioN`, opened as `/dev/vfio/devices/vfioN` with
    /// IOMMUFD) while a VFIO driver owns the function; `None` where the function has none or
    /// the source does not say (hwloc XML, kernels before 6.6 or without
    /// `CONFIG_VFIO_DEVICE_CDEV`).
    #[serde(default)]
    pub vfio_cdev: Option<VfioCdev>,
}

/// A character device's numbers, as sysfs `dev` files spell them (`511:0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DevNumber {
    pub major: u32,
    pub minor: u32,
}

impl DevNumber {
    /// Parse a sysfs `dev` file: `MAJOR:MINOR` and a newline.
    pub fn parse(s: &str) -> Option<DevNumber> {
        let (major, minor) = s.trim().split_once(':')?;
        let num = |t: &str| -> Option<u32> {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        Some(DevNumber {
            major: num(major)?,
            minor: num(minor)?,
        })
    }
}

impl std::fmt::Display for DevNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The VFIO device cdev of one PCI function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfioCdev {
    /// `vfioN`: the node is `/dev/vfio/devices/vfioN`.
    pub name: String,
    /// From `vfio-dev/vfioN/dev`; `None` where the file is missing.
    pub dev: Option<DevNumber>,
}

impl VfioCdev {
    /// The node's path on the host.
    pub fn path(&self) -> String {
        format!("/dev/vfio/devices/{}", self.name)
    }
}

/// A VFIO group device (`/sys/class/vfio/N`, the node `/dev/vfio/N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfioGroup {
    /// The IOMMU group number.
    pub id: u32,
    /// The node's name under `/dev/vfio/`: the number, or `noiommu-N` for a group made by
    /// `enable_unsafe_noiommu_mode` (no DMA isolation).
    pub node: String,
    pub noiommu: bool,
    /// From the group device's `dev` file; `None` where it is missing.
    pub dev: Option<DevNumber>,
}

impl VfioGroup {
    pub fn path(&self) -> String {
        format!("/dev/vfio/{}", self.node)
    }
}

/// The host's VFIO device nodes as sysfs lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfioNodes {
    /// `/dev/vfio/vfio`, the legacy container (misc device `vfio`, 10:196); `None` when the
    /// host has none (vfio not loaded, or a kernel without a VFIO container).
    pub container: Option<DevNumber>,
    /// `/dev/iommu` (misc device `iommu`, dynamic minor); `None` when iommufd is not loaded.
    pub iommufd: Option<DevNumber>,
    /// Every VFIO group device, sorted by IOMMU group.
    pub groups: Vec<VfioGroup>,
}

impl VfioNodes {
    pub fn group(&self, id: u32) -> Option<&VfioGroup> {
        self.groups.iter().find(|g| g.id == id)
    }
}

impl PciDevice {
    /// Vendor and device ids as a source spells them, `0x0000`/`0xffff` for "none": an
    /// unassigned vendor makes both unknown (the device id means nothing without it).
    pub fn ids(vendor: Option<u16>, device: Option<u16>) -> (Option<u16>, Option<u16>) {
        match vendor {
            Some(v) if v != 0 && v != 0xffff => (Some(v), device),
            _ => (None, None),
        }
    }

    /// `vvvv:dddd` as `lspci -n` writes it; `None` unless both ids are known.
    pub fn pci_id(&self) -> Option<String> {
        Some(format!("{:04x}:{:04x}", self.vendor_id?, self.device_id?))
    }

    /// Bound to a VFIO PCI driver: `vfio-pci`, or one of its variant drivers, which register
    /// the same VFIO group and cdev (`mlx5_vfio_pci`, `nvgrace_gpu_vfio_pci`,
    /// `hisi_acc_vfio_pci`, ...: module names ending in `vfio_pci`).
    pub fn vfio_bound(&self) -> bool {
        self.driver.as_deref().is_some_and(is_vfio_pci_driver)
    }

    /// `dddd:bb:dd` — functions sharing this are parts of one multi-function device.
    pub fn slot(&self) -> &str {
        self.bdf
            .rsplit_once('.')
            .map(|(s, _)| s)
            .unwrap_or(&self.bdf)
    }
}

/// One row of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    /// The row label: a number (`"24"`) or a name (`"NMI"`, `"LOC"`).
    pub id: String,
    /// The IRQ number for numbered rows.
    pub number: Option<u32>,
    /// Count per CPU, in the order of [`InterruptTable::cpus`].
    pub counts: Vec<u64>,
    /// Interrupt chip (`IR-PCI-MSIX-0000:01:00.0`, `IO-APIC`, `PCI-MSI`).
    pub chip: Option<String>,
    /// Hardware IRQ and trigger (`2-edge`, `524288-edge`).
    pub hwirq: Option<String>,
    /// Action names (`vfio-msix[0](0000:01:00.0)`, `virtio0-input.0`, `timer`).
    pub actions: String,
    /// `/proc/irq/N/smp_affinity_list` where readable.
    pub affinity: Option<CpuSet>,
    /// `/proc/irq/N/effective_affinity_list` where readable.
    pub effective_affinity: Option<CpuSet>,
}

impl Irq {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// A VFIO-owned vector (`vfio-msi`, `vfio-msix`, `vfio-intx`).
    pub fn is_vfio(&self) -> bool {
        self.actions.contains("vfio-")
    }
}

/// `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptTable {
    /// CPU numbers of the count columns (the `CPUn` header).
    pub cpus: Vec<u32>,
    pub irqs: Vec<Irq>,
}

/// The whole host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Where the model came from (`live:/`, `hwloc-xml:FILE`, `sysfs:DIR`, `builtin:NAME`).
    pub source: String,
    /// Hostname or machine description where known.
    pub name: Option<String>,
    /// PUs, sorted by `os_index`.
    pub pus: Vec<Pu>,
    pub cores: Vec<Core>,
    pub caches: Vec<Cache>,
    pub dies: Vec<Die>,
    pub packages: Vec<Package>,
    pub cpu_kinds: Vec<CpuKind>,
    /// NUMA nodes, sorted by `os_index`, each PU in at most one; empty where the source says
    /// nothing about NUMA (an hwloc XML without NUMANode). The sysfs loader always gives at
    /// least one: a kernel without NUMA gets one inferred node ([`Host::numa_inferred`]).
    pub numa_nodes: Vec<NumaNode>,
    pub distances: Option<Distances>,
    pub pci_devices: Vec<PciDevice>,
    /// `/proc/interrupts`; `None` where the source has no interrupt table (hwloc XML).
    pub interrupts: Option<InterruptTable>,
    /// Whether the TSC is usable as a stable clocksource (`constant_tsc` + `nonstop_tsc`, or
    /// `tsc` in available_clocksource); `None` where unknown.
    pub tsc_stable: Option<bool>,
    /// VFIO device nodes (`/dev/vfio/vfio`, `/dev/iommu`, `/dev/vfio/GROUP`) from
    /// `/sys/class`; `None` where the source does not say (hwloc XML, snapshots without
    /// `/sys/class/misc`).
    #[serde(default)]
    pub vfio: Option<VfioNodes>,
    /// The machine architecture as `uname -m` spells it (`x86_64`, `aarch64`, `ppc64le`,
    /// `s390x` …): hwloc's `Architecture` info, `/proc/sys/kernel/arch` or the `Architecture:`
    /// line of hwloc's snapshot info, the running binary's own for the live host; `None`
    /// where the source does not say (hwloc XML made from CPUID dumps, hand-made snapshots).
    #[serde(default)]
    pub arch: Option<String>,
    /// Whether the NUMA nodes were inferred rather than read: a kernel without NUMA support
    /// (no `/sys/devices/system/node`) gets one node 0 holding every PU and `/proc/meminfo`'s
    /// memory, as hwloc makes it. Such a kernel has no NUMA memory policy to bind memory
    /// with (no `set_mempolicy`/`mbind` without CONFIG_NUMA), so a plan should not bind it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub numa_inferred: bool,
    /// What the loader inferred, repaired or dropped, one sentence each (an inferred NUMA
    /// node, NUMA nodes listing the same CPUs, cores read without SMT sibling lists); empty
    /// when the source said everything itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Whether an architecture name (`uname -m`, hwloc's `Architecture`, Rust's or a
/// distribution's spelling) is x86: `x86_64`, `amd64`, `i386`…`i686`, `x86`.
pub fn arch_is_x86(arch: &str) -> bool {
    let a = arch.trim().to_ascii_lowercase();
    matches!(
        a.as_str(),
        "x86_64" | "amd64" | "x64" | "x86" | "ia32" | "em64t"
    ) || (a.len() == 4 && a.starts_with('i') && a.ends_with("86"))
}

impl Host {
    /// Whether the host is x86 (`Some(true)`), another architecture (`Some(false)`), or
    /// unknown (`None`): see [`Host::arch`].
    pub fn is_x86(&self) -> Option<bool> {
        self.arch.as_deref().map(arch_is_x86)
    }

    pub fn pu(&self, os_index: u32) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&os_index, |p| p.os_index)
            .ok()
            .map(|i| &self.pus[i])
    }

    pub fn all_cpus(&self) -> CpuSet {
        self.pus.iter().map(|p| p.os_index).collect()
    }

    pub fn numa_node(&self, os_index: u32) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.os_index == os_index)
    }

    pub fn pci(&self, bdf: &str) -> Option<&PciDevice> {
        let want = normalize_bdf(bdf)?;
        self.pci_devices.iter().find(|d| d.bdf == want)
    }

    /// The links between `bdf` and the root complex that run below what they can do
    /// ([`PciLink::downgraded`]): the device's own first, then those of the bridges above it,
    /// nearest first. A port that reports the same link as the function below it is not
    /// among them (the function's entry carries that link's verdict).
    pub fn downgraded_links(&self, bdf: &str) -> Vec<&PciDevice> {
        let mut out = Vec::new();
        let mut cur = self.pci(bdf);
        // a parent chain is a handful of hops; the bound keeps a looped source finite
        for _ in 0..64 {
            let Some(d) = cur else { break };
            if d.link.as_ref().is_some_and(|l| l.downgraded) {
                out.push(d);
            }
            cur = d.parent.as_deref().and_then(|p| self.pci(p));
        }
        out
    }

    pub fn gpus(&self) -> impl Iterator<Item = &PciDevice> {
        self.pci_devices
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
    }

    /// Caches of one level (unified or data), in id order.
    pub fn caches_at(&self, level: u8) -> impl Iterator<Item = &Cache> {
        self.caches
            .iter()
            .filter(move |c| c.level == level && c.cache_type != CacheType::Instruction)
    }

    /// How many L3 caches (groups of cores sharing one) the host has: `None` where the source
    /// says nothing about caches at all (no cache of any level), so a host whose caches are
    /// unknown is not said to have no L3; `Some(0)` where it lists caches but no L3.
    pub fn l3_count(&self) -> Option<usize> {
        let n = self.caches_at(3).count();
        (n > 0 || !self.caches.is_empty()).then_some(n)
    }

    /// [`Host::l3_count`] in words: `"8 L3 groups"`, `"1 L3 group"`, `"no L3"`, `"L3 unknown"`.
    pub fn l3_summary(&self) -> String {
        match self.l3_count() {
            None => "L3 unknown".into(),
            Some(0) => "no L3".into(),
            Some(1) => "1 L3 group".into(),
            Some(n) => format!("{n} L3 groups"),
        }
    }

    /// NUMA distance between two nodes, where known.
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        self.distances.as_ref()?.get(from, to)
    }
}

/// A VFIO PCI driver name: `vfio-pci` or a variant driver's module name (`mlx5_vfio_pci`).
pub fn is_vfio_pci_driver(name: &str) -> bool {
    name == "vfio-pci"
        || name == "vfio_pci"
        || name.ends_with("_vfio_pci")
        || name.ends_with("-vfio-pci")
}

/// Normalize `1:00.0`, `01:00.0`, `0000:01:00.0` (any case) to `0000:01:00.0`. The domain
/// is 32 bits, written with at least four hex digits as sysfs does (`%04x`): Intel VMD's
/// domains start at 0x10000, so its devices are `10000:e1:00.0`.
pub fn normalize_bdf(s: &str) -> Option<String> {
    let s = s.trim().to_ascii_lowercase();
    let (rest, func) = s.rsplit_once('.')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let (dom, bus, dev) = match parts.as_slice() {
        [bus, dev] => ("0", *bus, *dev),
        [dom, bus, dev] => (*dom, *bus, *dev),
        _ => return None,
    };
    if dom.len() > 8 {
        return None;
    }
    let dom = u32::from_str_radix(dom, 16).ok()?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    if dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// One function's PCIe link, as its sysfs files give it (read and judged in [`crate::pcie`]). Every figure is `None` (JSON `null`)
/// where the file is missing or unreadable ("Unknown", garbage), never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PciLink {
    /// `current_link_speed`, GT/s per lane.
    #[serde(default)]
    pub speed_gts: Option<f32>,
    /// `current_link_width`, lanes.
    #[serde(default)]
    pub width: Option<u32>,
    /// `max_link_speed`: this function's own capability.
    #[serde(default)]
    pub max_speed_gts: Option<f32>,
    /// `max_link_width`.
    #[serde(default)]
    pub max_width: Option<u32>,
    /// The other end's maximum where it is known (the port above a function, the function
    /// below a port): the link can do no more than the lower of the two.
    #[serde(default)]
    pub peer_max_speed_gts: Option<f32>,
    #[serde(default)]
    pub peer_max_width: Option<u32>,
    /// The link runs below what both its ends can do: a lower speed or fewer lanes. Only a
    /// function's entry says so; a port whose link is a function's says `same_link_as`.
    #[serde(default)]
    pub downgraded: bool,
    /// On a port: the function below it that reports this same link and carries the verdict.
    #[serde(default)]
    pub same_link_as: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Raw topology: what loaders produce.
// ---------------------------------------------------------------------------------------------

/// A group of PUs with the source's own number for it (if any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawGroup {
    pub os_index: Option<u32>,
    pub cpus: CpuSet,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCache {
    pub level: u8,
    pub cache_type: CacheType,
    pub size_bytes: Option<u64>,
    pub line_bytes: Option<u32>,
    pub ways: Option<u32>,
    pub cpus: CpuSet,
}

/// Topology as a loader reads it: groups of PUs, before ids are assigned.
#[derive(Debug, Clone, Default)]
pub struct RawTopology {
    pub source: String,
    pub name: Option<String>,
    /// Every PU's os_index.
    pub pus: CpuSet,
    pub cores: Vec<RawGroup>,
    /// Packages with an optional CPU model name.
    pub packages: Vec<(RawGroup, Option<String>)>,
    pub dies: Vec<RawGroup>,
    /// Cache instances; duplicates (same level, type and cpus) are merged.
    pub caches: Vec<RawCache>,
    /// Other groups of PUs in the source's tree (hwloc `Group` objects: SNC/NPS halves,
    /// clusters, distance groups). They hold nothing the model keeps; they only place cores,
    /// caches, dies and packages in hwloc's logical order.
    pub groups: Vec<CpuSet>,
    /// CPU kinds; only kept when there are two or more.
    pub cpu_kinds: Vec<CpuKind>,
    pub numa_nodes: Vec<NumaNode>,
    pub distances: Option<Distances>,
    pub pci_devices: Vec<PciDevice>,
    pub interrupts: Option<InterruptTable>,
    pub tsc_stable: Option<bool>,
    pub vfio: Option<VfioNodes>,
    /// See [`Host::arch`]; empty or blank names are dropped.
    pub arch: Option<String>,
    /// See [`Host::numa_inferred`].
    pub numa_inferred: bool,
    /// See [`Host::notes`].
    pub notes: Vec<String>,
}

impl RawTopology {
    /// Validate and number everything. Errors name the inconsistency (a PU in two cores, a
    /// core naming PUs that do not exist, ...).
    pub fn assemble(mut self) -> Result<Host, TopoError> {
        let source = self.source.clone();
        let invalid = |msg: String| TopoError::Invalid {
            source_name: source.clone(),
            msg,
        };
        if self.pus.is_empty() {
            return Err(invalid("no CPUs (PUs) found".into()));
        }
        let all = self.pus.clone();
        let cores = whole_cores(std::mem::take(&mut self.cores), &all).map_err(&invalid)?;
        let packages = number_groups(std::mem::take(&mut self.packages), &all)
            .map_err(|m| invalid(format!("package: {m}")))?;
        let dies = number_groups(
            std::mem::take(&mut self.dies)
                .into_iter()
                .map(|g| (g, ()))
                .collect(),
            &all,
        )
        .map_err(|m| invalid(format!("die: {m}")))?;
        let caches = distinct_caches(std::mem::take(&mut self.caches), &all);
        for n in &mut self.numa_nodes {
            n.cpus = n.cpus.intersection(&all);
        }

        // Number every level as hwloc does (its logical index, `L#` in lstopo): depth-first
        // through the tree these sets form, siblings by first PU. Sorting by first PU alone
        // differs where Linux numbers CPUs across packages (package 0 the even CPUs) or
        // nodes (SNC): lstopo's Core L#1 is then CPU 4, not CPU 1.
        let tree = {
            let mut sets: Vec<&CpuSet> = Vec::new();
            sets.extend(packages.iter().map(|(g, _, _)| &g.cpus));
            sets.extend(dies.iter().map(|(g, _, _)| &g.cpus));
            sets.extend(self.numa_nodes.iter().map(|n| &n.cpus));
            sets.extend(
                caches
                    .iter()
                    .filter(|c| c.cache_type != CacheType::Instruction)
                    .map(|c| &c.cpus),
            );
            let groups: Vec<CpuSet> = self.groups.iter().map(|g| g.intersection(&all)).collect();
            sets.extend(groups.iter());
            SetTree::new(sets, &all)
        };
        let mut keyed: Vec<(Vec<u32>, RawGroup)> =
            cores.into_iter().map(|c| (tree.key(&c.cpus), c)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let cores: Vec<RawGroup> = keyed.into_iter().map(|(_, c)| c).collect();
        let packages = tree.renumber(packages);
        let dies = tree.renumber(dies);
        let caches = number_caches(&tree, caches);

        sort_numa_nodes(&mut self.numa_nodes).map_err(&invalid)?;
        let kinds = ranked_kinds(std::mem::take(&mut self.cpu_kinds));

        let holders = Holders::new(&all, &cores, &packages, &dies, &caches, &self.numa_nodes);
        let pus: Vec<Pu> = all.iter().map(|cpu| holders.pu(cpu, &kinds)).collect();
        let core_list: Vec<Core> = cores
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let first = c.cpus.first().unwrap_or(0);
                Core {
                    id: i as u32,
                    os_index: c.os_index,
                    package: find(&holders.package, first),
                    die: find(&holders.die, first),
                    pus: c.cpus,
                }
            })
            .collect();
        let package_list = packages
            .into_iter()
            .map(|(g, model, id)| Package {
                id,
                os_index: g.os_index,
                cpus: g.cpus,
                model,
            })
            .collect();
        let die_list = dies
            .into_iter()
            .map(|(g, _, id)| Die {
                id,
                os_index: g.os_index,
                package: g.cpus.first().and_then(|c| find(&holders.package, c)),
                cpus: g.cpus,
            })
            .collect();
        Ok(self.into_host(pus, core_list, caches, die_list, package_list, kinds))
    }

    /// The host of the numbered parts and what the loader read as it is.
    fn into_host(
        self,
        pus: Vec<Pu>,
        cores: Vec<Core>,
        caches: Vec<Cache>,
        dies: Vec<Die>,
        packages: Vec<Package>,
        cpu_kinds: Vec<CpuKind>,
    ) -> Host {
        let mut pci = self.pci_devices;
        pci.sort_by(|a, b| a.bdf.cmp(&b.bdf));
        Host {
            source: self.source,
            name: self.name,
            pus,
            cores,
            caches,
            dies,
            packages,
            cpu_kinds,
            numa_nodes: self.numa_nodes,
            distances: self.distances,
            pci_devices: pci,
            interrupts: self.interrupts,
            tsc_stable: self.tsc_stable,
            vfio: self.vfio.map(|mut v| {
                v.groups
                    .sort_by(|a, b| (a.id, &a.node).cmp(&(b.id, &b.node)));
                v
            }),
            arch: self
                .arch
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty()),
            numa_inferred: self.numa_inferred,
            notes: self.notes,
        }
    }
}

/// Cores: every PU in exactly one core. PUs that no source put in a core become single-PU
/// cores (hwloc does the same for PUs without Core parents).
fn whole_cores(raw: Vec<RawGroup>, all: &CpuSet) -> Result<Vec<RawGroup>, String> {
    let mut cores: Vec<RawGroup> = Vec::new();
    let mut seen = CpuSet::new();
    for c in raw {
        if c.cpus.is_empty() {
            continue;
        }
        if !c.cpus.is_subset(all) {
            return Err(format!(
                "core lists CPUs {} that are not PUs of this host",
                c.cpus.difference(all)
            ));
        }
        if c.cpus.intersects(&seen) {
            // identical duplicates are fine (same core read twice)
            if cores.iter().any(|k| k.cpus == c.cpus) {
                continue;
            }
            return Err(format!(
                "CPUs {} belong to two different cores",
                c.cpus.intersection(&seen)
            ));
        }
        for cpu in c.cpus.iter() {
            seen.insert(cpu);
        }
        cores.push(c);
    }
    for cpu in all.difference(&seen).iter() {
        cores.push(RawGroup {
            os_index: None,
            cpus: std::iter::once(cpu).collect(),
        });
    }
    Ok(cores)
}

/// Caches: duplicates merged, empty ones and ones naming other CPUs dropped.
fn distinct_caches(raw: Vec<RawCache>, all: &CpuSet) -> Vec<RawCache> {
    let mut caches: Vec<RawCache> = Vec::new();
    let mut cache_keys: std::collections::HashSet<(u8, CacheType, CpuSet)> =
        std::collections::HashSet::new();
    for c in raw {
        if c.cpus.is_empty() || !c.cpus.is_subset(all) {
            continue;
        }
        if !cache_keys.insert((c.level, c.cache_type, c.cpus.clone())) {
            continue;
        }
        caches.push(c);
    }
    caches
}

/// Caches in the tree's order, numbered per (level, type).
fn number_caches(tree: &SetTree, caches: Vec<RawCache>) -> Vec<Cache> {
    let mut caches: Vec<(Vec<u32>, RawCache)> =
        caches.into_iter().map(|c| (tree.key(&c.cpus), c)).collect();
    caches
        .sort_by(|(ka, a), (kb, b)| (a.level, a.cache_type, ka).cmp(&(b.level, b.cache_type, kb)));
    let mut next_id: BTreeMap<(u8, CacheType), u32> = BTreeMap::new();
    caches
        .into_iter()
        .map(|(_, c)| {
            let id = next_id.entry((c.level, c.cache_type)).or_insert(0);
            let out = Cache {
                id: *id,
                level: c.level,
                cache_type: c.cache_type,
                size_bytes: c.size_bytes,
                line_bytes: c.line_bytes,
                ways: c.ways,
                cpus: c.cpus,
            };
            *id += 1;
            out
        })
        .collect()
}

/// NUMA nodes: sorted, unique os_index; each node's hugepage sizes sorted.
fn sort_numa_nodes(nodes: &mut [NumaNode]) -> Result<(), String> {
    nodes.sort_by_key(|n| n.os_index);
    for w in nodes.windows(2) {
        if w[0].os_index == w[1].os_index {
            return Err(format!("NUMA node {} appears twice", w[0].os_index));
        }
    }
    for n in nodes.iter_mut() {
        n.hugepages.sort_by_key(|h| h.size_kb);
    }
    Ok(())
}

/// CPU kinds: only meaningful with two or more; labelled by efficiency rank.
fn ranked_kinds(raw: Vec<CpuKind>) -> Vec<CpuKind> {
    let mut kinds: Vec<CpuKind> = raw.into_iter().filter(|k| !k.cpus.is_empty()).collect();
    if kinds.len() < 2 {
        kinds.clear();
    }
    // rank: explicit efficiency, else max frequency; higher = faster
    kinds.sort_by_key(|k| {
        (
            std::cmp::Reverse(k.efficiency.unwrap_or(i32::MIN)),
            std::cmp::Reverse(k.max_freq_mhz.unwrap_or(0)),
            k.cpus.first(),
        )
    });
    let nk = kinds.len();
    for (i, k) in kinds.iter_mut().enumerate() {
        k.label = match (nk, i) {
            (2, 0) => "performance".into(),
            (2, 1) => "efficiency".into(),
            _ => format!("kind{i}"),
        };
    }
    kinds
}

/// For each level, CPU → id of the first set holding it.
struct Holders {
    core: Vec<Option<u32>>,
    package: Vec<Option<u32>>,
    die: Vec<Option<u32>>,
    numa: Vec<Option<u32>>,
    l1: Vec<Option<u32>>,
    l2: Vec<Option<u32>>,
    l3: Vec<Option<u32>>,
}

impl Holders {
    fn new<P, D>(
        all: &CpuSet,
        cores: &[RawGroup],
        packages: &[(RawGroup, P, u32)],
        dies: &[(RawGroup, D, u32)],
        caches: &[Cache],
        numa_nodes: &[NumaNode],
    ) -> Holders {
        let width = all.last().map_or(0, |l| l as usize + 1);
        let cache = |level: u8| {
            let sets = caches
                .iter()
                .filter(|c| c.level == level && c.cache_type != CacheType::Instruction)
                .map(|c| (&c.cpus, c.id));
            holder_table(width, sets)
        };
        Holders {
            core: holder_table(
                width,
                cores.iter().enumerate().map(|(i, c)| (&c.cpus, i as u32)),
            ),
            package: holder_table(width, packages.iter().map(|(g, _, id)| (&g.cpus, *id))),
            die: holder_table(width, dies.iter().map(|(g, _, id)| (&g.cpus, *id))),
            numa: holder_table(width, numa_nodes.iter().map(|n| (&n.cpus, n.os_index))),
            l1: cache(1),
            l2: cache(2),
            l3: cache(3),
        }
    }

    fn pu(&self, cpu: u32, kinds: &[CpuKind]) -> Pu {
        Pu {
            os_index: cpu,
            core: find(&self.core, cpu).unwrap_or(0),
            package: find(&self.package, cpu),
            die: find(&self.die, cpu),
            numa: find(&self.numa, cpu),
            l1d: find(&self.l1, cpu),
            l2: find(&self.l2, cpu),
            l3: find(&self.l3, cpu),
            kind: kinds
                .iter()
                .find(|k| k.cpus.contains(cpu))
                .map(|k| k.label.clone()),
        }
    }
}

/// cpu -> id of the first set holding it, built in one pass over the sets (a scan of every
/// set for every CPU is quadratic on hosts with thousands of CPUs).
fn holder_table<'a>(
    width: usize,
    sets: impl Iterator<Item = (&'a CpuSet, u32)>,
) -> Vec<Option<u32>> {
    let mut t = vec![None; width];
    for (s, id) in sets {
        for cpu in s.iter() {
            if let Some(slot) = t.get_mut(cpu as usize) {
                if slot.is_none() {
                    *slot = Some(id);
                }
            }
        }
    }
    t
}

fn find(t: &[Option<u32>], cpu: u32) -> Option<u32> {
    t.get(cpu as usize).copied().flatten()
}

/// The PU sets of a host's tree (packages, dies, NUMA nodes, caches, groups), for numbering
/// objects in hwloc's logical order.
struct SetTree {
    /// Sets of one kind that do not overlap, each with a table from CPU to the set holding it.
    layers: Vec<(Vec<CpuSet>, Vec<Option<u32>>)>,
}

impl SetTree {
    fn new(mut sets: Vec<&CpuSet>, all: &CpuSet) -> SetTree {
        // largest first, so a set's layer holds no set inside it
        let mut seen = std::collections::HashSet::new();
        sets.retain(|s| !s.is_empty() && seen.insert(*s));
        sets.sort_by_key(|s| (std::cmp::Reverse(s.len()), s.first()));
        let width = all.last().map_or(0, |l| l as usize + 1);
        let mut layers: Vec<(Vec<CpuSet>, Vec<Option<u32>>, CpuSet)> = Vec::new();
        for s in sets {
            let layer = match layers
                .iter_mut()
                .position(|(_, _, used)| !used.intersects(s))
            {
                Some(i) => &mut layers[i],
                None => {
                    layers.push((Vec::new(), vec![None; width], CpuSet::new()));
                    layers.last_mut().expect("just pushed")
                }
            };
            let id = layer.0.len() as u32;
            for cpu in s.iter() {
                if let Some(slot) = layer.1.get_mut(cpu as usize) {
                    *slot = Some(id);
                }
                layer.2.insert(cpu);
            }
            layer.0.push(s.clone());
        }
        SetTree {
            layers: layers.into_iter().map(|(s, t, _)| (s, t)).collect(),
        }
    }

    /// Groups numbered by [`number_groups`], renumbered in this tree's order.
    fn renumber<T>(&self, groups: Vec<(RawGroup, T, u32)>) -> Vec<(RawGroup, T, u32)> {
        let mut keyed: Vec<_> = groups
            .into_iter()
            .map(|(g, extra, _)| (self.key(&g.cpus), g, extra))
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed
            .into_iter()
            .enumerate()
            .map(|(i, (_, g, extra))| (g, extra, i as u32))
            .collect()
    }

    /// The sort key of an object covering `cpus`: the first PU of each set that contains it,
    /// largest first, then its own. Siblings differ first at their own sets, which are
    /// disjoint, so keys order them by first PU within their parent, as hwloc orders children.
    fn key(&self, cpus: &CpuSet) -> Vec<u32> {
        let Some(first) = cpus.first() else {
            return Vec::new();
        };
        let mut above: Vec<&CpuSet> = self
            .layers
            .iter()
            .filter_map(|(sets, table)| {
                let id = (*table.get(first as usize)?)?;
                let s = &sets[id as usize];
                cpus.is_subset(s).then_some(s)
            })
            .collect();
        above.sort_by_key(|s| (std::cmp::Reverse(s.len()), s.first()));
        above.dedup();
        above
            .iter()
            .filter_map(|s| s.first())
            .chain(std::iter::once(first))
            .collect()
    }
}

/// Sort disjoint groups by first CPU and give them ids 0..n; merge exact duplicates; reject
/// overlapping groups.
fn number_groups<T>(
    groups: Vec<(RawGroup, T)>,
    all: &CpuSet,
) -> Result<Vec<(RawGroup, T, u32)>, String> {
    let mut out: Vec<(RawGroup, T)> = Vec::new();
    let mut seen = CpuSet::new();
    for (mut g, extra) in groups {
        g.cpus = g.cpus.intersection(all);
        if g.cpus.is_empty() {
            continue;
        }
        // only scan the groups kept so far when there is an overlap to explain
        let overlap = g.cpus.intersects(&seen);
        if let Some(dup) = out
            .iter()
            .filter(|_| overlap)
            .find(|(k, _)| k.cpus.intersects(&g.cpus))
        {
            if dup.0.cpus == g.cpus {
                continue;
            }
            return Err(format!(
                "CPUs {} are in two groups",
                dup.0.cpus.intersection(&g.cpus)
            ));
        }
        for cpu in g.cpus.iter() {
            seen.insert(cpu);
        }
        out.push((g, extra));
    }
    out.sort_by_key(|(g, _)| g.cpus.first());
    Ok(out
        .into_iter()
        .enumerate()
        .map(|(i, (g, e))| (g, e, i as u32))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    proptest::proptest! {
        /// Any address, spelled as people and tools write it (lspci drops a zero domain,
        /// sysfs pads to four digits, upper or lower case, unpadded bus/device), normalizes
        /// to sysfs's name: at least four domain digits (five for VMD's 0x10000 and up).
        #[test]
        fn any_spelling_normalizes_to_the_sysfs_name(
            dom in proptest::prop_oneof![0u32..4, 0x10000u32..0x10010, proptest::num::u32::ANY],
            bus in 0u8..=255, dev in 0u8..32, func in 0u8..8,
            upper in proptest::bool::ANY, pad in proptest::bool::ANY,
        ) {
            let canonical = format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}");
            let mut spellings = vec![
                canonical.clone(),
                format!("{dom:08x}:{bus:02x}:{dev:02x}.{func:x}"),
                if pad { format!(" {dom:x}:{bus:x}:{dev:x}.{func} ") } else { format!("{dom:x}:{bus:x}:{dev:x}.{func}") },
            ];
            if dom == 0 {
                spellings.push(format!("{bus:02x}:{dev:02x}.{func}"));
            }
            for s in spellings {
                let s = if upper { s.to_ascii_uppercase() } else { s };
                proptest::prop_assert_eq!(normalize_bdf(&s), Some(canonical.clone()), "{}", s);
            }
            // a device or function out of range, a domain of nine digits: not an address
            let bad_dev = format!("{dom:x}:{bus:02x}:{:02x}.{func}", dev + 32);
            proptest::prop_assert_eq!(normalize_bdf(&bad_dev), None);
            let bad_func = format!("{dom:x}:{bus:02x}:{dev:02x}.{}", func + 8);
            proptest::prop_assert_eq!(normalize_bdf(&bad_func), None);
            let long = format!("1{dom:08x}:{bus:02x}:{dev:02x}.{func}");
            proptest::prop_assert_eq!(normalize_bdf(&long), None);
        }
    }

    #[test]
    fn x86_names() {
        for x in [
            "x86_64",
            "amd64",
            "AMD64",
            "i386",
            "i686",
            " x86_64\n",
            "x86",
        ] {
            assert!(arch_is_x86(x), "{x}");
        }
        for other in [
            "aarch64", "arm64", "ppc64le", "ppc64", "s390x", "riscv64", "armv7l", "ia64", "",
        ] {
            assert!(!arch_is_x86(other), "{other}");
        }
    }

    #[test]
    fn bdf_normalization() {
        assert_eq!(normalize_bdf("01:00.0").as_deref(), Some("0000:01:00.0"));
        assert_eq!(
            normalize_bdf("0000:5D:00.1").as_deref(),
            Some("0000:5d:00.1")
        );
        assert_eq!(normalize_bdf("1:0.0").as_deref(), Some("0000:01:00.0"));
        assert_eq!(normalize_bdf("garbage"), None);
        // Intel VMD domains start at 0x10000: five hex digits, as sysfs and lspci name them
        assert_eq!(
            normalize_bdf("10000:E1:00.0").as_deref(),
            Some("10000:e1:00.0")
        );
        assert_eq!(
            normalize_bdf("ffffffff:00:1f.7").as_deref(),
            Some("ffffffff:00:1f.7")
        );
        assert_eq!(normalize_bdf("100000000:00:00.0"), None);
        assert_eq!(
            normalize_bdf("010000:e1:00.0").as_deref(),
            Some("10000:e1:00.0")
        );
        assert_eq!(normalize_bdf("00:20.0"), None);
        assert_eq!(normalize_bdf("00:1f.8"), None);
    }

    #[test]
    fn assemble_numbers_groups_by_first_cpu() {
        let raw = RawTopology {
            source: "test".into(),
            pus: set("0-3"),
            cores: vec![
                RawGroup {
                    os_index: Some(1),
                    cpus: set("1,3"),
                },
                RawGroup {
                    os_index: Some(0),
                    cpus: set("0,2"),
                },
            ],
            packages: vec![(
                RawGroup {
                    os_index: Some(0),
                    cpus: set("0-3"),
                },
                None,
            )],
            caches: vec![RawCache {
                level: 3,
                cache_type: CacheType::Unified,
                size_bytes: Some(1 << 20),
                line_bytes: None,
                ways: None,
                cpus: set("0-3"),
            }],
            ..Default::default()
        };
        let host = raw.assemble().unwrap();
        assert_eq!(host.cores[0].pus, set("0,2"));
        assert_eq!(host.pu(2).unwrap().core, 0);
        assert_eq!(host.pu(3).unwrap().core, 1);
        assert_eq!(host.pu(3).unwrap().l3, Some(0));
        assert_eq!(host.pu(3).unwrap().l2, None);
        assert_eq!(host.pu(0).unwrap().numa, None);
        assert_eq!(host.pu(0).unwrap().kind, None);
    }

    #[test]
    fn l3_count_is_unknown_without_cache_information() {
        let raw = |caches: Vec<RawCache>| RawTopology {
            source: "test".into(),
            pus: set("0-3"),
            caches,
            ..Default::default()
        };
        let cache = |level, cpus| RawCache {
            level,
            cache_type: CacheType::Unified,
            size_bytes: None,
            line_bytes: None,
            ways: None,
            cpus: set(cpus),
        };
        let none = raw(vec![]).assemble().unwrap();
        assert_eq!(
            (none.l3_count(), none.l3_summary().as_str()),
            (None, "L3 unknown")
        );
        let l2_only = raw(vec![cache(2, "0-1"), cache(2, "2-3")])
            .assemble()
            .unwrap();
        assert_eq!(
            (l2_only.l3_count(), l2_only.l3_summary().as_str()),
            (Some(0), "no L3")
        );
        let two = raw(vec![cache(3, "0-1"), cache(3, "2-3")])
            .assemble()
            .unwrap();
        assert_eq!(
            (two.l3_count(), two.l3_summary().as_str()),
            (Some(2), "2 L3 groups")
        );
        let one = raw(vec![cache(3, "0-3")]).assemble().unwrap();
        assert_eq!(one.l3_summary(), "1 L3 group");
    }

    #[test]
    fn assemble_rejects_overlapping_cores() {
        let raw = RawTopology {
            source: "test".into(),
            pus: set("0-3"),
            cores: vec![
                RawGroup {
                    os_index: None,
                    cpus: set("0-1"),
                },
                RawGroup {
                    os_index: None,
                    cpus: set("1-2"),
                },
            ],
            ..Default::default()
        };
        let e = raw.assemble().unwrap_err().to_string();
        assert!(e.contains("two different cores"), "{e}");
    }

    #[test]
    fn unknown_pci_ids_are_none_not_zero() {
        assert_eq!(PciDevice::ids(Some(0), Some(0)), (None, None));
        assert_eq!(PciDevice::ids(Some(0xffff), Some(0x1234)), (None, None));
        assert_eq!(PciDevice::ids(None, Some(0x1234)), (None, None));
        assert_eq!(PciDevice::ids(Some(0x10de), None), (Some(0x10de), None));
        // device 0 of a real vendor is a real id
        assert_eq!(
            PciDevice::ids(Some(0x10de), Some(0)),
            (Some(0x10de), Some(0))
        );
        let mut d = crate::builtin::default_host().pci_devices[0].clone();
        assert!(d.pci_id().is_some());
        (d.vendor_id, d.device_id) = PciDevice::ids(Some(0), Some(0));
        assert_eq!((d.vendor_id, d.device_id, d.pci_id()), (None, None, None));
        let v = serde_json::to_value(&d).unwrap();
        assert!(v["vendor_id"].is_null() && v["device_id"].is_null(), "{v}");
        let back: PciDevice = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
        d.vendor_id = Some(0x10de);
        assert_eq!(serde_json::to_value(&d).unwrap()["vendor_id"], "0x10de");
        assert_eq!(d.pci_id(), None, "a vendor without a device is no PCI id");
    }

    #[test]
    fn device_kinds() {
        let k = |class, vendor| DeviceKind::from_class(class, Some(vendor));
        assert_eq!(k(0x0300, 0x10de), DeviceKind::Gpu);
        assert_eq!(k(0x0302, 0x10de), DeviceKind::Gpu);
        assert_eq!(k(0x0200, 0x8086), DeviceKind::Nic);
        assert_eq!(k(0x0207, 0x15b3), DeviceKind::Nic);
        assert_eq!(k(0x0108, 0x144d), DeviceKind::Storage);
        assert_eq!(k(0x0604, 0x10b5), DeviceKind::Bridge);
        assert_eq!(k(0x1200, 0x1002), DeviceKind::Accelerator);
        assert_eq!(k(0x0b40, 0x1bcf), DeviceKind::Accelerator);
        assert_eq!(k(0x0403, 0x10de), DeviceKind::Other);
        assert_eq!(k(0x0300, 0x1a03), DeviceKind::Other);
        assert_eq!(k(0x0300, 0x102b), DeviceKind::Other);
        // a VGA controller of unknown vendor is still a display controller
        assert_eq!(DeviceKind::from_class(0x0300, None), DeviceKind::Gpu);
        // the ES1000 onboard VGA of HP ProLiant SL390s (hwloc's 24em64t-2n6c2t-pci.xml)
        let ids = |d| DeviceKind::from_ids(0x0300, Some(0x1002), Some(d));
        assert_eq!(ids(0x515e), DeviceKind::Other);
        assert_eq!(ids(0x5969), DeviceKind::Other);
        assert_eq!(ids(0x67a0), DeviceKind::Gpu);
        assert_eq!(DeviceKind::from_class(0xff00, None), DeviceKind::Other);
    }
}

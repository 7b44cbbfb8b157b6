//! The built-in example host, so every command runs anywhere without hardware or files.
//!
//! It is the desktop of the VFIO gaming-host write-up (see docs/sources.md): Intel Core i9-9900K, 8 cores / 16
//! threads (SMT siblings N and N+8, as Linux numbers them on that part, which is why the write-up
//! pins the guest to `2-7,10-15` and keeps `0-1,8-9` for the host), per-core 32 KiB L1d and
//! 256 KiB L2, one shared 16 MiB L3, one NUMA node; a GTX 1080 Ti at 01:00.0 with its HDMI
//! audio function at 01:00.1 (both bound to vfio-pci, IOMMU group 1 with the CPU's PCIe root
//! port 00:01.0, as on that platform; VFIO cdevs vfio0 and vfio1), the UHD 630 iGPU, the
//! Z390 chipset's SATA (two Samsung 860 EVO), USB and I219-V NIC. The interrupt table is an
//! illustrative one of that machine with the guest running: the first rows are the write-up's own
//! excerpt, the rest show the vfio vectors of the GPU and the chipset devices.

use crate::cpuset::CpuSet;
use crate::interrupts::parse_proc_interrupts;
use crate::model::*;

/// Name accepted by `--topology builtin:NAME`.
pub const DEFAULT_NAME: &str = "vfio-desktop-i9-9900k";

const INTERRUPTS: &str = "            CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       CPU8       CPU9       CPU10      CPU11      CPU12      CPU13      CPU14      CPU15
   0:         20          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0  IR-IO-APIC    2-edge      timer
   1:          0          0          0         33          0          0          0          0          0          0          0          0          0          0          0          0  IR-IO-APIC    1-edge      i8042
   8:          1          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0  IR-IO-APIC    8-edge      rtc0
   9:          0    9612805          0          0          0          0          0          0          0          0          0          0          0          0          0          0  IR-IO-APIC    9-fasteoi   acpi
 120:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0  DMAR-MSI    0-edge      dmar0
 122:     148211          0      20581          0          0          0          0          0      39816          0          0          0          0          0          0          0  IR-PCI-MSI 327680-edge      xhci_hcd
 123:     511304          0          0          0          0     188114          0          0          0      73012          0          0          0          0          0          0  IR-PCI-MSI 376832-edge      ahci[0000:00:17.0]
 124:    2031155          0          0          0          0          0          0          0          0          0     982113          0          0          0          0          0  IR-PCI-MSI 520192-edge      eno1
 125:          0          0          0        412          0          0          0          0          0          0          0          0          0          0          0          0  IR-PCI-MSI 32768-edge      i915
 126:          0          0          0          0          0          0    2410981          0          0          0          0          0          0          0          0          0  IR-PCI-MSI 524288-edge      vfio-msi[0](0000:01:00.0)
 127:          0          0          0          0          0          0          0          0          0          0          0      41230          0          0          0          0  IR-PCI-MSI 526336-edge      vfio-msi[0](0000:01:00.1)
 NMI:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Non-maskable interrupts
 LOC:   98456012   71234511   64120983   63398122   62811309   62177241   61945028   61322980   52011873   41230981   60120391   59330112   58231009   57881233   57109882   56334102   Local timer interrupts
";

fn group(os_index: u32, cpus: &str) -> RawGroup {
    RawGroup {
        os_index: Some(os_index),
        cpus: list(cpus),
    }
}

fn list(s: &str) -> CpuSet {
    // constant inputs above; an error here is a bug in this file, caught by the unit test
    CpuSet::parse_list(s).unwrap_or_default()
}

#[allow(clippy::too_many_arguments)]
fn dev(
    bdf: &str,
    vendor: u16,
    device: u16,
    class: u16,
    name: &str,
    driver: &str,
    iommu_group: u32,
    bars: &[(u8, u64)],
    msi: &[u32],
    parent: Option<&str>,
) -> PciDevice {
    PciDevice {
        bdf: bdf.into(),
        vendor_id: Some(vendor),
        device_id: Some(device),
        subsystem_vendor_id: None,
        subsystem_device_id: None,
        class,
        prog_if: None,
        kind: DeviceKind::from_ids(class, Some(vendor), Some(device)),
        name: Some(name.into()),
        numa: Some(vec![0]),
        local_cpus: Some(list("0-15")),
        iommu_group: Some(iommu_group),
        driver: Some(driver.into()),
        bars: bars
            .iter()
            .map(|&(index, size_bytes)| Bar {
                index,
                size_bytes,
                prefetchable: None,
                bits64: None,
            })
            .collect(),
        msi_irqs: Some(msi.to_vec()),
        irq: None,
        parent: parent.map(str::to_string),
        os_devices: vec![],
        link_gbps: None,
        link: None,
        vfio_cdev: None,
    }
}

/// The VFIO cdev numbers a 6.6+ kernel gives the GPU's two functions when vfio-pci binds
/// them (the vfio-dev class has a dynamic major; minors count up in bind order).
const VFIO_CDEV_MAJOR: u32 = 511;
/// The dynamic major of the `vfio` group class on that boot.
const VFIO_GROUP_MAJOR: u32 = 243;

fn with_cdev(mut d: PciDevice, minor: u32) -> PciDevice {
    d.vfio_cdev = Some(VfioCdev {
        name: format!("vfio{minor}"),
        dev: Some(DevNumber {
            major: VFIO_CDEV_MAJOR,
            minor,
        }),
    });
    d
}

/// The raw topology of the built-in host.
const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// The i9-9900K's caches: L1d, L1i and L2 per core, one L3.
fn default_caches() -> Vec<RawCache> {
    let mut caches = Vec::new();
    for core in 0..8u32 {
        let cpus = list(&format!("{core},{}", core + 8));
        for (level, cache_type, size) in [
            (1, CacheType::Data, 32 * KIB),
            (1, CacheType::Instruction, 32 * KIB),
            (2, CacheType::Unified, 256 * KIB),
        ] {
            caches.push(RawCache {
                level,
                cache_type,
                size_bytes: Some(size),
                line_bytes: Some(64),
                ways: Some(if level == 2 { 4 } else { 8 }),
                cpus: cpus.clone(),
            });
        }
    }
    caches.push(RawCache {
        level: 3,
        cache_type: CacheType::Unified,
        size_bytes: Some(16 * MIB),
        line_bytes: Some(64),
        ways: Some(16),
        cpus: list("0-15"),
    });
    caches
}

/// The desktop's interrupts, routed as the VFIO gaming-host write-up masks them.
fn default_interrupts() -> Option<InterruptTable> {
    parse_proc_interrupts(INTERRUPTS).ok().map(|mut t| {
        for irq in &mut t.irqs {
            // what /proc/irq/N/smp_affinity_list would say after the VFIO gaming-host write-up's masking
            if irq.number.is_some() {
                let aff = if irq.is_vfio() {
                    "2-7,10-15"
                } else {
                    "0-1,8-9"
                };
                irq.affinity = Some(list(aff));
            }
        }
        t
    })
}

/// Its one NUMA node: 32 GiB, 8192 free 2 MiB pages.
fn default_node() -> NumaNode {
    NumaNode {
        os_index: 0,
        cpus: list("0-15"),
        memory_bytes: Some(32 * GIB),
        hugepages: vec![
            HugePages {
                size_kb: 2048,
                total: Some(8192),
                free: Some(8192),
            },
            HugePages {
                size_kb: 1048576,
                total: Some(0),
                free: Some(0),
            },
        ],
        memory_kind: MemoryKind::Dram,
        free_bytes: None,
    }
}

/// Its PCI functions: the host bridge, the iGPU, USB, SATA, the NIC, and the GTX 1080 Ti with
/// its audio function bound to vfio-pci.
fn default_pci_devices() -> Vec<PciDevice> {
    vec![
        dev(
            "0000:00:00.0",
            0x8086,
            0x3e30,
            0x0600,
            "8th Gen Core 8-core Desktop Processor Host Bridge",
            "skl_uncore",
            0,
            &[],
            &[],
            None,
        ),
        dev(
            "0000:00:01.0",
            0x8086,
            0x1901,
            0x0604,
            "6th-10th Gen Core Processor PCIe Controller (x16)",
            "pcieport",
            1,
            &[],
            &[],
            None,
        ),
        dev(
            "0000:00:02.0",
            0x8086,
            0x3e98,
            0x0300,
            "CoffeeLake-S GT2 [UHD Graphics 630]",
            "i915",
            2,
            &[(0, 16 * MIB), (2, 256 * MIB)],
            &[125],
            None,
        ),
        dev(
            "0000:00:14.0",
            0x8086,
            0xa36d,
            0x0c03,
            "Cannon Lake PCH USB 3.1 xHCI Host Controller",
            "xhci_hcd",
            3,
            &[(0, 64 * KIB)],
            &[122],
            None,
        ),
        dev(
            "0000:00:17.0",
            0x8086,
            0xa352,
            0x0106,
            "Cannon Lake PCH SATA AHCI Controller",
            "ahci",
            4,
            &[(0, 8 * KIB), (5, 2 * KIB)],
            &[123],
            None,
        ),
        dev(
            "0000:00:1f.6",
            0x8086,
            0x15bc,
            0x0200,
            "Ethernet Connection (7) I219-V",
            "e1000e",
            5,
            &[(0, 128 * KIB)],
            &[124],
            None,
        ),
        with_cdev(
            dev(
                "0000:01:00.0",
                0x10de,
                0x1b06,
                0x0300,
                "GP102 [GeForce GTX 1080 Ti]",
                "vfio-pci",
                1,
                &[(0, 16 * MIB), (1, 256 * MIB), (3, 32 * MIB)],
                &[126],
                Some("0000:00:01.0"),
            ),
            0,
        ),
        with_cdev(
            dev(
                "0000:01:00.1",
                0x10de,
                0x10ef,
                0x0403,
                "GP102 HDMI Audio Controller",
                "vfio-pci",
                1,
                &[(0, 16 * KIB)],
                &[127],
                Some("0000:00:01.0"),
            ),
            1,
        ),
    ]
}

/// Its VFIO device nodes: the container, iommufd and the GPU's group.
fn default_vfio() -> VfioNodes {
    VfioNodes {
        // the legacy container is VFIO_MINOR (196) on the misc major (10)
        container: Some(DevNumber {
            major: 10,
            minor: 196,
        }),
        // iommufd registers with a dynamic misc minor
        iommufd: Some(DevNumber {
            major: 10,
            minor: 124,
        }),
        groups: vec![VfioGroup {
            id: 1,
            node: "1".into(),
            noiommu: false,
            dev: Some(DevNumber {
                major: VFIO_GROUP_MAJOR,
                minor: 0,
            }),
        }],
    }
}

pub fn raw_default() -> RawTopology {
    let caches = default_caches();
    let interrupts = default_interrupts();
    RawTopology {
        source: format!("builtin:{DEFAULT_NAME}"),
        name: Some("VFIO gaming desktop (VFIO gaming-host write-up): i9-9900K, GTX 1080 Ti".into()),
        pus: list("0-15"),
        cores: (0..8)
            .map(|c| group(c, &format!("{c},{}", c + 8)))
            .collect(),
        packages: vec![(
            group(0, "0-15"),
            Some("Intel(R) Core(TM) i9-9900K CPU @ 3.60GHz".into()),
        )],
        dies: vec![],
        caches,
        groups: vec![],
        cpu_kinds: vec![],
        numa_nodes: vec![default_node()],
        distances: Some(Distances {
            nodes: vec![0],
            matrix: vec![vec![10]],
        }),
        pci_devices: default_pci_devices(),
        interrupts,
        tsc_stable: Some(true),
        // the i9-9900K desktop
        arch: Some("x86_64".into()),
        numa_inferred: false,
        notes: Vec::new(),
        vfio: Some(default_vfio()),
    }
}

/// The built-in host model.
pub fn default_host() -> Host {
    // The constant data above assembles; the unit test below proves it.
    raw_default()
        .assemble()
        .expect("built-in topology is consistent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_host_is_the_seed_000_desktop() {
        let h = default_host();
        assert_eq!(h.pus.len(), 16);
        assert_eq!(h.cores.len(), 8);
        assert_eq!(h.caches_at(3).count(), 1);
        assert_eq!(h.caches_at(2).count(), 8);
        assert_eq!(h.pu(2).unwrap().core, h.pu(10).unwrap().core);
        let gpu = h.pci("01:00.0").unwrap();
        assert_eq!(gpu.kind, DeviceKind::Gpu);
        assert_eq!(gpu.numa, Some(vec![0]));
        assert_eq!(h.pci("01:00.1").unwrap().slot(), gpu.slot());
        // both GPU functions are VFIO-owned with a cdev each; the group node exists
        assert!(gpu.vfio_bound());
        assert_eq!(
            gpu.vfio_cdev.as_ref().unwrap().path(),
            "/dev/vfio/devices/vfio0"
        );
        let audio = h.pci("01:00.1").unwrap();
        assert_eq!(audio.vfio_cdev.as_ref().unwrap().name, "vfio1");
        let vfio = h.vfio.as_ref().unwrap();
        assert_eq!(vfio.group(1).unwrap().path(), "/dev/vfio/1");
        assert!(h
            .pci_devices
            .iter()
            .filter(|d| d.vfio_cdev.is_some())
            .all(|d| d.vfio_bound()));
        let t = h.interrupts.as_ref().unwrap();
        assert_eq!(t.cpus.len(), 16);
        assert_eq!(t.irqs.iter().filter(|i| i.is_vfio()).count(), 2);
        assert_eq!(
            t.irqs.iter().find(|i| i.id == "9").unwrap().counts[1],
            9612805
        );
    }
}

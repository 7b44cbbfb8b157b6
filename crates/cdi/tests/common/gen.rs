//! A generator of sysfs snapshots with VFIO devices, with the truth it encodes: which
//! functions are on which driver, in which IOMMU group, with which cdev, which group devices
//! and misc nodes exist. Written as a tar archive in memory, in the kernel's shapes (see
//! testdata/vfio/README.md), and read back through `topo::sysfs::load_archive_bytes`.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

pub const CDEV_MAJOR: u32 = 509;
pub const GROUP_MAJOR: u32 = 241;

#[derive(Debug, Clone)]
pub struct GenDevice {
    pub bdf: String,
    /// The 24-bit class file value.
    pub class: u32,
    pub driver: Option<&'static str>,
    pub group: Option<u32>,
    /// The cdev minor (`vfio-dev/vfioN`), for VFIO-owned functions on a cdev kernel.
    pub cdev: Option<u32>,
    /// Whether `vfio-dev/vfioN/dev` is there (a trimmed snapshot may lack it).
    pub cdev_dev_file: bool,
}

#[derive(Debug, Clone)]
pub struct GenHost {
    pub devices: Vec<GenDevice>,
    /// `/sys/class` (with its misc devices) present at all.
    pub class_tree: bool,
    pub container: Option<(u32, u32)>,
    pub iommufd: Option<(u32, u32)>,
    /// Groups created by no-IOMMU mode (their class device is `noiommu-N`).
    pub noiommu: BTreeSet<u32>,
}

pub const VFIO_DRIVERS: [&str; 2] = ["vfio-pci", "mlx5_vfio_pci"];

pub fn is_vfio(d: &GenDevice) -> bool {
    d.driver.is_some_and(|n| VFIO_DRIVERS.contains(&n))
}

impl GenHost {
    /// The VFIO group class devices the kernel would have made: one per group holding a
    /// VFIO-owned function, minors in group order.
    pub fn groups(&self) -> BTreeMap<u32, (String, u32)> {
        let ids: BTreeSet<u32> = self
            .devices
            .iter()
            .filter(|d| is_vfio(d))
            .filter_map(|d| d.group)
            .collect();
        ids.into_iter()
            .enumerate()
            .map(|(minor, g)| {
                let name = if self.noiommu.contains(&g) {
                    format!("noiommu-{g}")
                } else {
                    g.to_string()
                };
                (g, (name, minor as u32))
            })
            .collect()
    }

    pub fn to_tar(&self) -> Vec<u8> {
        let mut t = TarTree::default();
        let r = "snap";
        t.file(
            &format!("{r}/sys/devices/system/cpu/cpu0/topology/core_cpus_list"),
            "0\n",
        );
        t.file(&format!("{r}/sys/devices/system/cpu/online"), "0\n");
        for d in &self.devices {
            let dev = format!("sys/devices/pci0000:00/{}", d.bdf);
            let dir = format!("{r}/{dev}");
            t.file(&format!("{dir}/vendor"), "0x10de\n");
            t.file(&format!("{dir}/device"), "0x2330\n");
            t.file(&format!("{dir}/class"), &format!("0x{:06x}\n", d.class));
            // /sys/bus/pci/devices/BDF -> ../../../devices/pci0000:00/BDF
            t.link(
                &format!("{r}/sys/bus/pci/devices/{}", d.bdf),
                &format!("../../../devices/pci0000:00/{}", d.bdf),
            );
            if let Some(drv) = d.driver {
                t.link(
                    &format!("{dir}/driver"),
                    &format!("../../../bus/pci/drivers/{drv}"),
                );
            }
            if let Some(g) = d.group {
                t.link(
                    &format!("{dir}/iommu_group"),
                    &format!("../../../kernel/iommu_groups/{g}"),
                );
                t.link(
                    &format!("{r}/sys/kernel/iommu_groups/{g}/devices/{}", d.bdf),
                    &format!("../../../../devices/pci0000:00/{}", d.bdf),
                );
            }
            if let (true, Some(m)) = (is_vfio(d), d.cdev) {
                let c = format!("{dir}/vfio-dev/vfio{m}");
                t.dir(&c);
                if d.cdev_dev_file {
                    t.file(&format!("{c}/dev"), &format!("{CDEV_MAJOR}:{m}\n"));
                }
                if self.class_tree {
                    t.link(
                        &format!("{r}/sys/class/vfio-dev/vfio{m}"),
                        &format!("../../devices/pci0000:00/{}/vfio-dev/vfio{m}", d.bdf),
                    );
                }
            }
        }
        if self.class_tree {
            // a live host always has misc devices besides VFIO's
            t.file(
                &format!("{r}/sys/devices/virtual/misc/cpu_dma_latency/dev"),
                "10:62\n",
            );
            t.link(
                &format!("{r}/sys/class/misc/cpu_dma_latency"),
                "../../devices/virtual/misc/cpu_dma_latency",
            );
            for (name, num) in [("vfio", self.container), ("iommu", self.iommufd)] {
                if let Some((maj, min)) = num {
                    t.file(
                        &format!("{r}/sys/devices/virtual/misc/{name}/dev"),
                        &format!("{maj}:{min}\n"),
                    );
                    t.link(
                        &format!("{r}/sys/class/misc/{name}"),
                        &format!("../../devices/virtual/misc/{name}"),
                    );
                }
            }
            for (name, minor) in self.groups().values() {
                t.file(
                    &format!("{r}/sys/devices/virtual/vfio/{name}/dev"),
                    &format!("{GROUP_MAJOR}:{minor}\n"),
                );
                t.link(
                    &format!("{r}/sys/class/vfio/{name}"),
                    &format!("../../devices/virtual/vfio/{name}"),
                );
            }
        }
        t.finish()
    }
}

#[derive(Default)]
struct TarTree {
    b: Option<tar::Builder<Vec<u8>>>,
}

impl TarTree {
    fn builder(&mut self) -> &mut tar::Builder<Vec<u8>> {
        self.b.get_or_insert_with(|| tar::Builder::new(Vec::new()))
    }

    fn file(&mut self, path: &str, text: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o444);
        h.set_entry_type(tar::EntryType::Regular);
        self.builder()
            .append_data(&mut h, path, text.as_bytes())
            .expect("tar file");
    }

    fn dir(&mut self, path: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o755);
        h.set_entry_type(tar::EntryType::Directory);
        self.builder()
            .append_data(&mut h, path, std::io::empty())
            .expect("tar dir");
    }

    fn link(&mut self, path: &str, target: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o777);
        h.set_entry_type(tar::EntryType::Symlink);
        self.builder()
            .append_link(&mut h, path, target)
            .expect("tar link");
    }

    fn finish(mut self) -> Vec<u8> {
        self.builder();
        self.b
            .take()
            .map(|b| b.into_inner().expect("tar"))
            .unwrap_or_default()
    }
}

/// Classes the generator draws: GPU, 3D controller, HDMI audio, NIC, NVMe, PCI bridge,
/// NVSwitch ("other bridge", a normal header), host bridge.
const CLASSES: [u32; 8] = [
    0x030000, 0x030200, 0x040300, 0x020000, 0x010802, 0x060400, 0x068000, 0x060000,
];
const DRIVERS: [Option<&str>; 7] = [
    Some("vfio-pci"),
    Some("vfio-pci"),
    Some("mlx5_vfio_pci"),
    Some("nvidia"),
    Some("pcieport"),
    Some("pci-stub"),
    None,
];

/// Hosts of up to 12 functions (two per slot, so multi-function devices share slots and
/// often groups), over 6 IOMMU groups, with random cdevs, missing files and node sets.
pub fn host_strategy() -> impl Strategy<Value = GenHost> {
    let dev = (
        0..CLASSES.len(),
        0..DRIVERS.len(),
        prop::option::weighted(0.9, 0u32..6),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.9),
    );
    (
        prop::collection::vec(dev, 0..12),
        prop::bool::weighted(0.9),
        prop::option::weighted(0.9, Just((10u32, 196u32))),
        prop::option::weighted(0.8, 120u32..130),
        prop::collection::btree_set(0u32..6, 0..2),
        any::<u64>(),
    )
        .prop_map(|(devs, class_tree, container, iommufd, noiommu, seed)| {
            let n = devs.len();
            // cdev minors in a bind order that is not the BDF order
            let mut minors: Vec<u32> = (0..n as u32).collect();
            let mut s = seed;
            for i in (1..minors.len()).rev() {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                minors.swap(i, (s >> 33) as usize % (i + 1));
            }
            let devices = devs
                .into_iter()
                .enumerate()
                .map(|(i, (c, d, group, has_cdev, dev_file))| GenDevice {
                    bdf: format!("0000:{:02x}:00.{}", 0x10 + i / 2, i % 2),
                    class: CLASSES[c],
                    driver: DRIVERS[d],
                    group: group.map(|g| g + 20),
                    cdev: has_cdev.then_some(minors[i]),
                    cdev_dev_file: dev_file,
                })
                .collect();
            GenHost {
                devices,
                class_tree,
                container,
                iommufd: iommufd.map(|m| (10, m)),
                noiommu: noiommu.into_iter().map(|g| g + 20).collect(),
            }
        })
}

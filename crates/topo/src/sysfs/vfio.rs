//! The host's VFIO device nodes from `/sys/class` (the per-function cdev is read in pci.rs).
//!
//! ```text
//! sys/class/misc/vfio/dev     10:196   /dev/vfio/vfio   the legacy container (VFIO_MINOR)
//! sys/class/misc/iommu/dev    10:N     /dev/iommu       iommufd (dynamic minor)
//! sys/class/vfio/N/dev        M:m      /dev/vfio/N      one per IOMMU group with a VFIO driver
//! sys/class/vfio/noiommu-N    M:m      /dev/vfio/noiommu-N  (enable_unsafe_noiommu_mode)
//! ```
//!
//! The names are the kernel's: drivers/vfio/group.c names each group device `"%s%d"` with
//! `noiommu-` for no-IOMMU groups, in the class `vfio`, whose nodes live under `/dev/vfio/`;
//! the container and iommufd are misc devices named `vfio` and `iommu`. `/sys/class/*` are
//! links into `/sys/devices/virtual/*`; a snapshot that kept only the latter is read there.

use crate::model::{DevNumber, VfioGroup, VfioNodes};

use super::fs::Fs;

/// `None` when the source has no `/sys/class/misc`: then nothing is known about the nodes.
/// A live host always has it (cpu_dma_latency, rfkill, ... are misc devices); snapshots often
/// keep only parts of `/sys/class` (hwloc's keep `dmi`, `net`, `ve`), so `/sys/class` alone
/// says nothing about VFIO. Otherwise what is there; a missing entry is a node the host lacks.
pub fn read_nodes(fs: &Fs) -> Option<VfioNodes> {
    if !fs.is_dir("sys/class/misc") && !fs.is_dir("sys/devices/virtual/misc") {
        return None;
    }
    let misc = |name: &str| -> Option<DevNumber> {
        ["sys/class/misc", "sys/devices/virtual/misc"]
            .iter()
            .find_map(|d| fs.read(&format!("{d}/{name}/dev")))
            .and_then(|s| DevNumber::parse(&s))
    };
    let class_dir = ["sys/class/vfio", "sys/devices/virtual/vfio"]
        .into_iter()
        .find(|d| fs.is_dir(d));
    let mut groups = Vec::new();
    if let Some(dir) = class_dir {
        for name in fs.list(dir).unwrap_or_default() {
            let (noiommu, num) = match name.strip_prefix("noiommu-") {
                Some(n) => (true, n),
                None => (false, name.as_str()),
            };
            // the class holds only group devices; anything else (a stray `vfio` entry in a
            // hand-made tree) is not a group
            if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(id) = num.parse::<u32>() else { continue };
            let dev = fs
                .read(&format!("{dir}/{name}/dev"))
                .and_then(|s| DevNumber::parse(&s));
            groups.push(VfioGroup {
                id,
                node: name,
                noiommu,
                dev,
            });
        }
    }
    Some(VfioNodes {
        container: misc("vfio"),
        iommufd: misc("iommu"),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fs::{MemTree, Node};
    use std::path::Path;

    fn file(t: &mut MemTree, p: &str, s: &str) {
        t.insert(p, Node::File(s.as_bytes().to_vec())).unwrap();
    }

    #[test]
    fn nodes_from_class_links() {
        let mut t = MemTree::new();
        file(&mut t, "sys/devices/virtual/misc/vfio/dev", "10:196\n");
        file(&mut t, "sys/devices/virtual/misc/iommu/dev", "10:124\n");
        file(&mut t, "sys/devices/virtual/vfio/7/dev", "243:1\n");
        file(&mut t, "sys/devices/virtual/vfio/noiommu-0/dev", "243:0\n");
        file(&mut t, "sys/devices/virtual/vfio/12/uevent", "MAJOR=243\n");
        t.insert(
            "sys/class/misc/vfio",
            Node::Symlink("../../devices/virtual/misc/vfio".into()),
        )
        .unwrap();
        t.insert(
            "sys/class/misc/iommu",
            Node::Symlink("../../devices/virtual/misc/iommu".into()),
        )
        .unwrap();
        for g in ["7", "noiommu-0", "12"] {
            t.insert(
                &format!("sys/class/vfio/{g}"),
                Node::Symlink(format!("../../devices/virtual/vfio/{g}")),
            )
            .unwrap();
        }
        let fs = Fs::mem(t, String::new(), Path::new("t.tar"));
        let v = read_nodes(&fs).unwrap();
        let d = |major, minor| Some(DevNumber { major, minor });
        assert_eq!(v.container, d(10, 196));
        assert_eq!(v.iommufd, d(10, 124));
        let mut g: Vec<_> = v
            .groups
            .iter()
            .map(|g| (g.id, g.node.as_str(), g.noiommu, g.dev))
            .collect();
        g.sort();
        assert_eq!(
            g,
            vec![
                (0, "noiommu-0", true, d(243, 0)),
                (7, "7", false, d(243, 1)),
                // a group device without a `dev` file: the node exists, its numbers unknown
                (12, "12", false, None),
            ]
        );
    }

    #[test]
    fn without_misc_devices_nothing_is_known() {
        let mut t = MemTree::new();
        file(&mut t, "sys/devices/system/cpu/online", "0\n");
        let fs = Fs::mem(t.clone(), String::new(), Path::new("t.tar"));
        assert_eq!(read_nodes(&fs), None);
        // a snapshot that kept only some classes (hwloc's keep dmi, net, ve)
        t.insert("sys/class/net/eth0", Node::Dir).unwrap();
        t.insert("sys/devices/virtual/dmi/id", Node::Dir).unwrap();
        let fs = Fs::mem(t.clone(), String::new(), Path::new("t.tar"));
        assert_eq!(read_nodes(&fs), None);
        // misc devices but none of VFIO's: the host has no VFIO nodes
        file(&mut t, "sys/class/misc/cpu_dma_latency/dev", "10:62\n");
        let fs = Fs::mem(t, String::new(), Path::new("t.tar"));
        assert_eq!(read_nodes(&fs), Some(VfioNodes::default()));
    }

    #[test]
    fn dev_numbers() {
        assert_eq!(
            DevNumber::parse("511:0\n"),
            Some(DevNumber {
                major: 511,
                minor: 0
            })
        );
        for bad in [
            "",
            "511",
            ":0",
            "511:",
            "a:b",
            "-1:0",
            "1:2:3",
            "99999999999:0",
        ] {
            assert_eq!(DevNumber::parse(bad), None, "{bad:?}");
        }
    }
}

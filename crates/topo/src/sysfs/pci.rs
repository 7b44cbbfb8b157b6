//! PCI devices from `/sys/bus/pci/devices/*`.

use crate::cpuset::CpuSet;
use crate::model::{
    normalize_bdf, Bar, DevNumber, DeviceKind, NumaNode, PciDevice, PciLink, VfioCdev,
};
use crate::pcie;

use super::cpu::read_set;
use super::fs::Fs;

pub const PCI_DIR: &str = "sys/bus/pci/devices";

/// `IORESOURCE_*` flags of the `resource` file (include/linux/ioport.h).
const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;
/// Lines 0-5 of `resource` are the standard BARs (6 is the ROM, then bridge windows).
const STANDARD_BARS: usize = 6;

/// Every device; a device directory without readable ids is skipped only if it has no
/// class either (not a PCI function at all).
pub fn read_devices(fs: &Fs, pus: &CpuSet, nodes: &[NumaNode]) -> Vec<PciDevice> {
    let Some(names) = fs.list(PCI_DIR) else {
        return Vec::new();
    };
    let mut devs: Vec<PciDevice> = names
        .iter()
        .filter_map(|name| read_device(fs, name, pus, nodes))
        .collect();
    pcie::settle(&mut devs);
    devs
}

fn hex_u32(s: &str) -> Option<u32> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

fn hex_u16(fs: &Fs, rel: &str) -> Option<u16> {
    hex_u32(&fs.read(rel)?).and_then(|v| u16::try_from(v).ok())
}

/// Vendor and device from the first four bytes of `config` (little-endian), when the
/// `vendor`/`device` files are missing.
fn ids_from_config(fs: &Fs, dir: &str) -> Option<(u16, u16)> {
    let b = fs.read_raw(&format!("{dir}/config"))?;
    if b.len() < 4 {
        return None;
    }
    let v = u16::from_le_bytes([b[0], b[1]]);
    let d = u16::from_le_bytes([b[2], b[3]]);
    (v != 0xffff && v != 0).then_some((v, d))
}

fn read_device(fs: &Fs, name: &str, pus: &CpuSet, nodes: &[NumaNode]) -> Option<PciDevice> {
    let bdf = normalize_bdf(name)?;
    let dir = format!("{PCI_DIR}/{name}");
    let class_full = fs.read(&format!("{dir}/class")).and_then(|s| hex_u32(&s));
    let ids = match (
        hex_u16(fs, &format!("{dir}/vendor")),
        hex_u16(fs, &format!("{dir}/device")),
    ) {
        (Some(v), Some(d)) => Some((v, d)),
        _ => ids_from_config(fs, &dir),
    };
    // Neither ids nor class: nothing to describe. With a class but no ids (hwloc's POWER
    // snapshots keep only `class` and `local_cpus`; hwloc shows them as "id=0000:0000") the
    // ids are unknown: `None`, never a made-up 0x0000.
    if ids.is_none() && class_full.is_none() {
        return None;
    }
    let (vendor_id, device_id) = match ids {
        Some((v, d)) => PciDevice::ids(Some(v), Some(d)),
        None => (None, None),
    };
    let prog_if = class_full.map(|c| (c & 0xff) as u8);
    let class = ((class_full.unwrap_or(0) >> 8) & 0xffff) as u16;

    let local_cpus = read_set(
        fs,
        &format!("{dir}/local_cpulist"),
        &format!("{dir}/local_cpus"),
    )
    .ok()
    .flatten()
    .map(|s| s.intersection(pus))
    .filter(|s| !s.is_empty());
    let numa = match fs
        .read(&format!("{dir}/numa_node"))
        .map(|s| s.trim().parse::<i64>())
    {
        Some(Ok(n)) if n >= 0 => u32::try_from(n).ok().map(|n| vec![n]),
        Some(_) => None, // -1: the firmware does not say
        // no numa_node file (old kernels, trimmed snapshots): the nodes whose CPUs the device
        // is local to, when that is not simply every CPU
        None => local_cpus.as_ref().filter(|l| **l != *pus).and_then(|l| {
            let v: Vec<u32> = nodes
                .iter()
                .filter(|n| !n.cpus.is_empty() && n.cpus.is_subset(l))
                .map(|n| n.os_index)
                .collect();
            (!v.is_empty()).then_some(v)
        }),
    };

    let msi_irqs = fs.list(&format!("{dir}/msi_irqs")).map(|names| {
        let mut v: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
        v.sort_unstable();
        v
    });
    let irq = fs
        .read(&format!("{dir}/irq"))
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&i| i > 0);

    let real = fs.resolve(&dir);
    let parent = real.as_deref().and_then(|real| {
        let mut comps = real.rsplit('/');
        comps.next(); // the device itself
        match comps.next()? {
            // a root bus (`pci0000:00`, or `pci10000:e0` of an Intel VMD domain): the device
            // above it, if any, is the parent (the VMD endpoint; a host bridge is none)
            bus if bus.starts_with("pci") => comps.next().and_then(normalize_bdf),
            up => normalize_bdf(up),
        }
    });

    let kind = DeviceKind::from_ids(class, vendor_id, device_id);
    let mut link = read_link(fs, &dir);
    // an endpoint's link is the one its port reports (also a port hwloc's snapshots leave
    // out of bus/pci/devices); bridges are paired in `pcie::settle`
    let port = real
        .as_deref()
        .and_then(|r| r.rsplit_once('/'))
        .map(|(up, _)| up)
        .filter(|up| up.rsplit('/').next().and_then(normalize_bdf).is_some());
    if let (Some(l), Some(up), false) = (link.as_mut(), port, kind == DeviceKind::Bridge) {
        if let Some(p) = read_link(fs, up) {
            l.pair_with_port(&p);
        }
    }

    Some(PciDevice {
        bdf,
        vendor_id,
        device_id,
        subsystem_vendor_id: hex_u16(fs, &format!("{dir}/subsystem_vendor")),
        subsystem_device_id: hex_u16(fs, &format!("{dir}/subsystem_device")),
        class,
        prog_if,
        kind,
        name: None,
        numa,
        local_cpus,
        iommu_group: fs
            .link_name(&format!("{dir}/iommu_group"))
            .and_then(|g| g.parse().ok()),
        driver: fs.link_name(&format!("{dir}/driver")),
        bars: fs
            .read(&format!("{dir}/resource"))
            .map(|s| parse_resource(&s))
            .unwrap_or_default(),
        msi_irqs,
        irq,
        parent,
        os_devices: os_devices(fs, &dir),
        link_gbps: link.as_ref().and_then(PciLink::gbps),
        link,
        vfio_cdev: vfio_cdev(fs, &dir),
    })
}

/// The link files of the function in `dir`.
fn read_link(fs: &Fs, dir: &str) -> Option<PciLink> {
    let file = |name: &str| fs.read(&format!("{dir}/{name}"));
    PciLink::from_sysfs(
        file("current_link_speed").as_deref(),
        file("current_link_width").as_deref(),
        file("max_link_speed").as_deref(),
        file("max_link_width").as_deref(),
    )
}

/// The VFIO device cdev a VFIO driver registers below the function:
/// `vfio-dev/vfioN/dev` holds `MAJOR:MINOR` of `/dev/vfio/devices/vfioN` (Linux 6.6+,
/// `CONFIG_VFIO_DEVICE_CDEV`; Documentation/driver-api/vfio.rst, "Device cdev Example").
fn vfio_cdev(fs: &Fs, dir: &str) -> Option<VfioCdev> {
    let names = fs.list(&format!("{dir}/vfio-dev"))?;
    let name = names.into_iter().find(|n| {
        n.strip_prefix("vfio")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    })?;
    let dev = fs
        .read(&format!("{dir}/vfio-dev/{name}/dev"))
        .and_then(|s| DevNumber::parse(&s));
    Some(VfioCdev { name, dev })
}

/// BARs 0-5 of a `resource` file: `start end flags` per line, in hex.
pub fn parse_resource(text: &str) -> Vec<Bar> {
    let mut bars = Vec::new();
    for (i, line) in text.lines().take(STANDARD_BARS).enumerate() {
        let f: Vec<u64> = line.split_whitespace().filter_map(hex_u64).collect();
        let [start, end, flags] = f[..] else { continue };
        if end <= start && !(end == start && start != 0) {
            continue;
        }
        let size = end - start + 1;
        let (prefetchable, bits64) = if flags & IORESOURCE_MEM != 0 {
            (
                Some(flags & IORESOURCE_PREFETCH != 0),
                Some(flags & IORESOURCE_MEM_64 != 0),
            )
        } else if flags & IORESOURCE_IO != 0 {
            (Some(false), Some(false))
        } else {
            (None, None)
        };
        bars.push(Bar {
            index: i as u8,
            size_bytes: size,
            prefetchable,
            bits64,
        });
    }
    bars
}

fn hex_u64(t: &str) -> Option<u64> {
    let t = t.strip_prefix("0x").unwrap_or(t);
    u64::from_str_radix(t, 16).ok()
}

/// Kernel devices of a function: network interfaces, DRM cards, NVMe controllers, block
/// devices, InfiniBand ports (also behind a virtio device).
fn os_devices(fs: &Fs, dir: &str) -> Vec<String> {
    const CLASSES: [&str; 6] = ["net", "drm", "nvme", "block", "infiniband", "ve"];
    let mut out = Vec::new();
    let mut scan = |d: &str| {
        for class in CLASSES {
            for n in fs.list(&format!("{d}/{class}")).unwrap_or_default() {
                if class == "drm" && !(n.starts_with("card") || n.starts_with("renderD")) {
                    continue;
                }
                out.push(n);
            }
        }
    };
    scan(dir);
    for sub in fs.list(dir).unwrap_or_default() {
        if sub.starts_with("virtio") && sub[6..].bytes().all(|b| b.is_ascii_digit()) {
            scan(&format!("{dir}/{sub}"));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_bars() {
        let r = "0x000039f000000000 0x000039f001ffffff 0x000000000014220c\n\
0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
0x000000000000e000 0x000000000000e07f 0x0000000000040101\n\
0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
0x00000000fb000000 0x00000000fb003fff 0x0000000000040200\n\
0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
0x00000000a8200000 0x00000000a82fffff 0x000000000004e200\n";
        let b = parse_resource(r);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].index, 0);
        assert_eq!(b[0].size_bytes, 32 << 20);
        assert_eq!(b[0].prefetchable, Some(true));
        assert_eq!(b[0].bits64, Some(true));
        assert_eq!(b[1].index, 2);
        assert_eq!(b[1].size_bytes, 128);
        assert_eq!(b[2].index, 4);
        assert_eq!(b[2].prefetchable, Some(false));
        assert_eq!(b[2].bits64, Some(false));
        assert!(parse_resource("junk\n1 2\n").is_empty());
    }

    #[test]
    fn link_speed() {
        let gbps = |s: &str, w: Option<&str>| PciLink::from_sysfs(Some(s), w, None, None)?.gbps();
        let g = gbps("8 GT/s\n", Some("16\n")).unwrap();
        assert!((g - 15.753846).abs() < 1e-4, "{g}");
        let g = gbps("2.5 GT/s PCIe", Some("1")).unwrap();
        assert!((g - 0.25).abs() < 1e-6);
        assert_eq!(gbps("Unknown", Some("0")), None);
        assert_eq!(gbps("8 GT/s", None), None);
    }
}

//! VFIO in the sysfs loader, on the hand-made snapshots in testdata/vfio (see its README):
//! each function's driver, IOMMU group and cdev (`vfio-dev/vfioN/dev`), and the host's VFIO
//! nodes from /sys/class.

use std::path::{Path, PathBuf};

use topo::{DevNumber, DeviceKind, Host};

fn archive(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"))
}

fn load(name: &str) -> Host {
    topo::load_path(&archive(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn dn(major: u32, minor: u32) -> Option<DevNumber> {
    Some(DevNumber { major, minor })
}

#[test]
fn hgx_h100_cdevs_groups_and_nodes() {
    let h = load("hgx-h100-vfio");
    assert_eq!(h.name.as_deref(), Some("hgx-h100-07"));
    // (BDF, group, cdev minor) as the snapshot's script wrote them: cdevs in bind order
    let gpus = [
        ("18:00.0", 16, 3),
        ("2a:00.0", 46, 0),
        ("3a:00.0", 57, 1),
        ("5d:00.0", 66, 2),
        ("9a:00.0", 86, 4),
        ("ab:00.0", 112, 6),
        ("ba:00.0", 132, 5),
    ];
    for (bdf, group, minor) in gpus {
        let d = h.pci(bdf).unwrap();
        assert_eq!(d.kind, DeviceKind::Gpu);
        assert_eq!(d.driver.as_deref(), Some("vfio-pci"));
        assert!(d.vfio_bound());
        assert_eq!(d.iommu_group, Some(group), "{bdf}");
        let c = d.vfio_cdev.as_ref().unwrap();
        assert_eq!(c.name, format!("vfio{minor}"));
        assert_eq!(c.dev, dn(511, minor));
        assert_eq!(c.path(), format!("/dev/vfio/devices/vfio{minor}"));
        // behind a Broadcom switch: downstream port → upstream port → root port
        let down = h.pci(d.parent.as_deref().unwrap()).unwrap();
        assert_eq!(
            (down.vendor_id, down.kind),
            (Some(0x1000), DeviceKind::Bridge)
        );
    }
    let nv = h.pci("db:00.0").unwrap();
    assert_eq!(nv.driver.as_deref(), Some("nvidia"));
    assert!(!nv.vfio_bound());
    assert_eq!(nv.vfio_cdev, None);
    // NVSwitches: class 0x0680 ("other bridge"), on vfio-pci with cdevs 7-10
    for (i, bus) in ["05", "06", "07", "08"].iter().enumerate() {
        let s = h.pci(&format!("{bus}:00.0")).unwrap();
        assert_eq!((s.class, s.kind), (0x0680, DeviceKind::Bridge));
        assert_eq!(s.vfio_cdev.as_ref().unwrap().dev, dn(511, 7 + i as u32));
    }
    // the ConnectX pair shares group 40; only port 1 has a cdev
    let (p0, p1) = (h.pci("4b:00.0").unwrap(), h.pci("4b:00.1").unwrap());
    assert_eq!((p0.iommu_group, p1.iommu_group), (Some(40), Some(40)));
    assert_eq!(p0.vfio_cdev, None);
    assert_eq!(p1.vfio_cdev.as_ref().unwrap().name, "vfio11");
    // only VFIO-owned functions have cdevs
    assert!(h
        .pci_devices
        .iter()
        .all(|d| d.vfio_cdev.is_none() || d.vfio_bound()));

    let v = h.vfio.as_ref().unwrap();
    assert_eq!(v.container, dn(10, 196));
    assert_eq!(v.iommufd, dn(10, 124));
    let groups: Vec<(u32, &str, Option<DevNumber>)> = v
        .groups
        .iter()
        .map(|g| (g.id, g.node.as_str(), g.dev))
        .collect();
    assert_eq!(
        groups,
        [
            (5, "5", dn(243, 0)),
            (6, "6", dn(243, 1)),
            (7, "7", dn(243, 2)),
            (8, "8", dn(243, 3)),
            (16, "16", dn(243, 4)),
            (40, "40", dn(243, 5)),
            (46, "46", dn(243, 6)),
            (57, "57", dn(243, 7)),
            (66, "66", dn(243, 8)),
            (86, "86", dn(243, 9)),
            (112, "112", dn(243, 10)),
            (132, "132", dn(243, 11)),
        ]
    );
    assert!(v.groups.iter().all(|g| !g.noiommu));
}

#[test]
fn linux_5_15_desktop_has_groups_but_no_cdevs_or_iommufd() {
    let h = load("desktop-5.15-legacy");
    assert!(h.pci_devices.iter().all(|d| d.vfio_cdev.is_none()));
    let gpu = h.pci("01:00.0").unwrap();
    assert_eq!(
        (gpu.iommu_group, gpu.driver.as_deref()),
        (Some(1), Some("vfio-pci"))
    );
    let audio = h.pci("01:00.1").unwrap();
    assert_eq!(audio.driver.as_deref(), Some("snd_hda_intel"));
    // numa_node -1: unknown locality, not node 0
    assert_eq!(gpu.numa, None);
    let v = h.vfio.as_ref().unwrap();
    assert_eq!(v.container, dn(10, 196));
    assert_eq!(v.iommufd, None);
    assert_eq!(v.groups.iter().map(|g| g.id).collect::<Vec<_>>(), [1, 13]);
}

#[test]
fn hwloc_snapshots_without_sys_class_say_nothing_about_vfio() {
    // hwloc's own sysfs snapshots keep no /sys/class: unknown, not "no VFIO"
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/sysfs/32intel64-2p8co2t+8ve.tar.bz2");
    let h = topo::load_path(&p).unwrap();
    assert_eq!(h.vfio, None);
    assert!(h.pci_devices.iter().all(|d| d.vfio_cdev.is_none()));
}

#[test]
fn variant_drivers_are_vfio() {
    for d in [
        "vfio-pci",
        "mlx5_vfio_pci",
        "nvgrace_gpu_vfio_pci",
        "hisi_acc_vfio_pci",
    ] {
        assert!(topo::is_vfio_pci_driver(d), "{d}");
    }
    for d in [
        "nvidia",
        "vfio",
        "vfio_iommu_type1",
        "pci-stub",
        "vfio-pcie",
    ] {
        assert!(!topo::is_vfio_pci_driver(d), "{d}");
    }
}

/// Intel VMD: the endpoint's PCI domain is 0x10000, so its devices are named with five hex
/// digits (`10000:e1:00.0`), as sysfs names them. They are loaded under that name, found by
/// it in any spelling, below the VMD endpoint, with no IOMMU group (VFIO cannot take them).
#[test]
fn vmd_domain_devices_keep_their_five_digit_names() {
    let h = load("server-vmd");
    let ep = h.pci("0000:64:00.5").unwrap();
    assert_eq!((ep.vendor_id, ep.device_id), (Some(0x8086), Some(0x28c0)));
    assert_eq!(ep.driver.as_deref(), Some("vmd"));
    for (bdf, port) in [
        ("10000:e1:00.0", "10000:e0:02.0"),
        ("10000:e2:00.0", "10000:e0:03.0"),
    ] {
        let d = h.pci(bdf).unwrap_or_else(|| panic!("{bdf} not loaded"));
        assert_eq!(d.bdf, bdf);
        assert_eq!(d.kind, DeviceKind::Storage, "{bdf}");
        assert_eq!(d.driver.as_deref(), Some("nvme"));
        assert_eq!(d.iommu_group, None, "{bdf}");
        assert_eq!(d.numa, Some(vec![0]));
        assert_eq!(d.parent.as_deref(), Some(port));
        // the root port of the VMD domain hangs below the VMD endpoint
        let rp = h.pci(port).unwrap();
        assert_eq!(rp.kind, DeviceKind::Bridge);
        assert_eq!(rp.parent.as_deref(), Some("0000:64:00.5"), "{port}");
    }
    // any spelling of the name
    assert!(h.pci("10000:E1:00.0").is_some());
    assert_eq!(h.pci("10000:e1:00.0"), h.pci(" 10000:e1:0.0 "));
    // and the GPU outside it as before
    let g = h.pci("18:00.0").unwrap();
    assert_eq!(g.iommu_group, Some(13));
    assert_eq!(g.vfio_cdev.as_ref().unwrap().name, "vfio0");
}

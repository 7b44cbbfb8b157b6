//! PCIe link health (issue 42, item 6): each function's current link against what the link
//! can do, on the hand-made desktop snapshots in testdata/vfio (`desktop-pcie-downgraded`:
//! an RTX 5090 at 2.5 of 16 GT/s and an RTX 4090 at x4 of x16; `desktop-pcie-healthy`: both
//! at 16 GT/s x16), on hwloc's real snapshot of a host with a NIC behind a Gen 1 switch port,
//! and on trees written here in the shapes of other kernels.

use std::path::{Path, PathBuf};

use topo::pcie::{parse_speed, parse_width, PciLink};
use topo::Host;

fn archive(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"))
}

fn load(name: &str) -> Host {
    topo::load_path(&archive(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn link<'a>(h: &'a Host, bdf: &str) -> &'a PciLink {
    h.pci(bdf)
        .unwrap_or_else(|| panic!("{bdf} not loaded"))
        .link
        .as_ref()
        .unwrap_or_else(|| panic!("{bdf}: no link"))
}

fn downgraded(h: &Host) -> Vec<&str> {
    h.pci_devices
        .iter()
        .filter(|d| d.link.as_ref().is_some_and(|l| l.downgraded))
        .map(|d| d.bdf.as_str())
        .collect()
}

#[test]
fn a_gpu_at_2_5_of_16_gts_and_one_at_x4_of_x16_are_downgraded() {
    let h = load("desktop-pcie-downgraded");
    // the 5090: 2.5 GT/s on a Gen 4 port; the card's own maximum (Gen 5) is kept as read
    let l = link(&h, "01:00.0");
    assert_eq!((l.speed_gts, l.width), (Some(2.5), Some(16)));
    assert_eq!((l.max_speed_gts, l.max_width), (Some(32.0), Some(16)));
    assert_eq!(
        (l.peer_max_speed_gts, l.peer_max_width),
        (Some(16.0), Some(16))
    );
    assert!(l.downgraded && l.speed_below() && !l.width_below());
    assert_eq!(l.figures(), "2.5 GT/s x16 of 16 GT/s x16");
    assert_eq!(l.bandwidths().as_deref(), Some("4.0 of 31.5 GB/s"));
    // the 4090: full speed on four lanes of sixteen
    let l = link(&h, "02:00.0");
    assert!(l.downgraded && l.width_below() && !l.speed_below());
    assert_eq!(l.figures(), "16 GT/s x4 of 16 GT/s x16");
    // both functions of each card, and nothing else: the root ports report the same links
    // and say whose they are; the chipset's healthy chain and the NVMe are not flagged
    assert_eq!(
        downgraded(&h),
        [
            "0000:01:00.0",
            "0000:01:00.1",
            "0000:02:00.0",
            "0000:02:00.1"
        ]
    );
    let rp = link(&h, "00:01.1");
    assert_eq!(rp.same_link_as.as_deref(), Some("0000:01:00.0"));
    assert_eq!((rp.speed_gts, rp.max_speed_gts), (Some(2.5), Some(16.0)));
    assert!(!rp.downgraded);
    assert_eq!(
        link(&h, "00:01.2").same_link_as.as_deref(),
        Some("0000:02:00.0")
    );
    // link_gbps is the current bandwidth, as before
    let g = h.pci("01:00.0").unwrap().link_gbps.unwrap();
    assert!((g - 4.0).abs() < 1e-4, "{g}");
    // the path from each GPU up: its own link, once
    let path = |b: &str| -> Vec<String> {
        h.downgraded_links(b)
            .iter()
            .map(|d| d.bdf.clone())
            .collect()
    };
    assert_eq!(path("01:00.0"), ["0000:01:00.0"]);
    assert_eq!(path("02:00.1"), ["0000:02:00.1"]);
    assert!(path("05:00.0").is_empty());
}

#[test]
fn the_same_desktop_with_healthy_links_flags_nothing() {
    let h = load("desktop-pcie-healthy");
    assert!(downgraded(&h).is_empty(), "{:?}", downgraded(&h));
    // a Gen 5 card in a Gen 4 slot runs at all the slot can do: not a downgrade
    let l = link(&h, "01:00.0");
    assert_eq!((l.speed_gts, l.max_speed_gts), (Some(16.0), Some(32.0)));
    assert_eq!(l.capable_speed_gts(), Some(16.0));
    assert!(!l.downgraded);
    for b in ["01:00.0", "02:00.0", "05:00.0"] {
        assert!(h.downgraded_links(b).is_empty(), "{b}");
    }
    // a switch: the root port's link is the upstream port's, the downstream port's the NVMe's
    assert_eq!(
        link(&h, "00:02.1").same_link_as.as_deref(),
        Some("0000:03:00.0")
    );
    assert_eq!(
        link(&h, "03:00.0").same_link_as.as_deref(),
        Some("0000:04:08.0")
    );
    assert_eq!(
        link(&h, "04:08.0").same_link_as.as_deref(),
        Some("0000:05:00.0")
    );
}

/// hwloc's real snapshot of a 2-socket Xeon with 8 NEC Vector Engines: an Intel NIC
/// (0000:60:00.0, Gen 3 x1 capable) sits behind a switch port that can only do 2.5 GT/s, and
/// trains at 2.5 GT/s — all that link can do (`lspci` would print "(downgraded)" against
/// the NIC's own capability). Every other link runs at 8 GT/s x16 of 8 x16.
#[test]
fn a_nic_behind_a_gen1_switch_port_is_not_downgraded() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/sysfs/32intel64-2p8co2t+8ve.tar.bz2");
    let h = topo::load_path(&p).unwrap();
    assert!(downgraded(&h).is_empty(), "{:?}", downgraded(&h));
    let nic = link(&h, "60:00.0");
    assert_eq!((nic.speed_gts, nic.max_speed_gts), (Some(2.5), Some(8.0)));
    assert_eq!(nic.peer_max_speed_gts, Some(2.5));
    // the port (5f:03.0) is in the snapshot's sys/devices but not in bus/pci/devices: its
    // figures are read from the NIC's sysfs path
    assert!(h.pci("5f:03.0").is_none());
    assert_eq!(nic.figures(), "2.5 GT/s x1 of 2.5 GT/s x1");
    // the VEs: 8 GT/s x16 of 8 GT/s x16, judged with their switch ports
    let ves: Vec<_> = h.pci_devices.iter().filter(|d| d.class == 0x0b40).collect();
    assert_eq!(ves.len(), 8);
    for d in ves {
        let l = d.link.as_ref().unwrap();
        assert_eq!(l.figures(), "8 GT/s x16 of 8 GT/s x16", "{}", d.bdf);
        assert!(l.peer_max_speed_gts.is_some(), "{}", d.bdf);
    }
    // the switch's upstream port reports its own uplink, not a downstream port's
    assert_eq!(
        link(&h, "18:00.0").same_link_as,
        None,
        "18:00.0 has six downstream ports below it"
    );
    assert_eq!(
        link(&h, "17:00.0").same_link_as.as_deref(),
        Some("0000:18:00.0")
    );
}

/// A tree in a temporary directory, written as the sysfs_shapes tests write theirs.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        let t = Tree(tempfile::tempdir().unwrap());
        t.put("sys/devices/system/cpu/online", "0-1\n");
        for c in 0..2 {
            t.put(
                &format!("sys/devices/system/cpu/cpu{c}/topology/core_cpus_list"),
                &format!("{c}\n"),
            );
        }
        t
    }

    fn put(&self, rel: &str, text: &str) -> &Tree {
        let p = self.0.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    /// A function at `sys/devices/<path>` linked from sys/bus/pci/devices, with its link
    /// files (`None`: the file is not there).
    fn function(&self, path: &str, class: &str, files: [Option<&str>; 4]) -> &Tree {
        let d = format!("sys/devices/{path}");
        self.put(&format!("{d}/class"), &format!("{class}\n"));
        self.put(&format!("{d}/vendor"), "0x10de\n");
        self.put(&format!("{d}/device"), "0x2b85\n");
        let names = [
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
        ];
        for (name, text) in names.iter().zip(files) {
            if let Some(t) = text {
                self.put(&format!("{d}/{name}"), &format!("{t}\n"));
            }
        }
        let bdf = path.rsplit('/').next().unwrap();
        let link = self.0.path().join(format!("sys/bus/pci/devices/{bdf}"));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let target = Path::new("../../../devices").join(path);
        std::os::unix::fs::symlink(target, link).unwrap();
        self
    }

    fn load(&self) -> Host {
        topo::sysfs::load_root(self.0.path()).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Linux before 5.0 wrote `8 GT/s` without the `PCIe` suffix and `Unknown speed`; a link
/// that is down reads `Unknown` and width 0; a file can be garbage. Each unknown figure is
/// `null`, never 0, and judges nothing.
#[test]
fn old_spellings_unknown_and_garbage_figures() {
    let gpu = "0x030000";
    let h = Tree::new()
        .function(
            "pci0000:00/0000:00:01.0/0000:01:00.0",
            gpu,
            [Some("2.5 GT/s"), Some("16"), Some("8 GT/s"), Some("16")],
        )
        .function(
            "pci0000:00/0000:00:02.0/0000:02:00.0",
            gpu,
            [
                Some("Unknown"),
                Some("0"),
                Some("16.0 GT/s PCIe"),
                Some("16"),
            ],
        )
        .function(
            "pci0000:00/0000:00:03.0/0000:03:00.0",
            gpu,
            [
                Some("garbage GT/s"),
                Some("sixteen"),
                Some("Unknown speed"),
                Some("255"),
            ],
        )
        .function(
            "pci0000:00/0000:00:04.0/0000:04:00.0",
            gpu,
            [None, Some("4"), None, Some("16")],
        )
        .load();
    let l = link(&h, "01:00.0");
    assert_eq!((l.speed_gts, l.max_speed_gts), (Some(2.5), Some(8.0)));
    assert!(l.downgraded);
    let l = link(&h, "02:00.0");
    assert_eq!((l.speed_gts, l.width), (None, None));
    assert!(!l.downgraded, "a link that is down is not judged");
    assert_eq!(h.pci("02:00.0").unwrap().link_gbps, None);
    // nothing readable at all: no link, not a link of zeros
    assert_eq!(h.pci("03:00.0").unwrap().link, None);
    // width alone is enough to tell x4 of x16
    let l = link(&h, "04:00.0");
    assert_eq!(
        (l.speed_gts, l.width, l.max_width),
        (None, Some(4), Some(16))
    );
    assert!(l.downgraded);
    assert_eq!(l.figures(), "? GT/s x4 of ? GT/s x16");
}

/// Old JSON (before links were read) still reads: `link` missing is `None`; a link with only
/// some of its fields reads with the rest unknown.
#[test]
fn json_without_links_still_reads() {
    let h = load("desktop-pcie-downgraded");
    let mut v = serde_json::to_value(&h).unwrap();
    let json_link = &v["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:01:00.0")
        .unwrap()["link"];
    assert_eq!(json_link["downgraded"], true);
    assert_eq!(json_link["speed_gts"], 2.5);
    assert_eq!(json_link["max_speed_gts"], 32.0);
    assert_eq!(json_link["width"], 16);
    for d in v["pci_devices"].as_array_mut().unwrap() {
        d.as_object_mut().unwrap().remove("link");
    }
    let old: Host = serde_json::from_value(v).unwrap();
    assert!(old.pci_devices.iter().all(|d| d.link.is_none()));
    let partial: PciLink = serde_json::from_str(r#"{"speed_gts": 8.0}"#).unwrap();
    assert_eq!(partial.speed_gts, Some(8.0));
    assert_eq!((partial.max_speed_gts, partial.downgraded), (None, false));
}

/// The speeds Linux writes (`pci_speed_string`: "%s GT/s PCIe" since 5.0; `PCIE_SPEED2STR`'s
/// "%s GT/s" before), for every generation.
const SPEEDS: [(&str, &str, f32); 6] = [
    ("2.5", "2.5", 2.5),
    ("5.0", "5", 5.0),
    ("8.0", "8", 8.0),
    ("16.0", "16", 16.0),
    ("32.0", "32", 32.0),
    ("64.0", "64", 64.0),
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, .. Default::default() })]

    /// Every speed and width as a kernel writes it reads back as written; a link is
    /// downgraded exactly when its speed or width is below the lower of both ends' maxima.
    #[test]
    fn kernel_spellings_read_back_and_judge(
        cur in 0usize..6, max in 0usize..6, peer in proptest::option::of(0usize..6),
        old in proptest::bool::ANY, w in 0usize..6, mw in 0usize..6,
    ) {
        const WIDTHS: [u32; 6] = [1, 2, 4, 8, 16, 32];
        let spell = |i: usize| {
            let (new, old_s, _) = SPEEDS[i];
            if old { format!("{old_s} GT/s\n") } else { format!("{new} GT/s PCIe\n") }
        };
        let mut l = PciLink::from_sysfs(
            Some(&spell(cur)), Some(&format!("{}\n", WIDTHS[w])),
            Some(&spell(max)), Some(&format!("{}\n", WIDTHS[mw])),
        ).unwrap();
        proptest::prop_assert_eq!(l.speed_gts, Some(SPEEDS[cur].2));
        proptest::prop_assert_eq!(l.max_speed_gts, Some(SPEEDS[max].2));
        proptest::prop_assert_eq!(l.width, Some(WIDTHS[w]));
        l.peer_max_speed_gts = peer.map(|p| SPEEDS[p].2);
        let cap = peer.map_or(max, |p| p.min(max));
        proptest::prop_assert_eq!(l.speed_below(), cur < cap);
        proptest::prop_assert_eq!(l.width_below(), w < mw);
        proptest::prop_assert!(l.gbps().is_some_and(|g| g > 0.0 && g.is_finite()));
    }

    /// Any text at all: no panic, and a figure read is a real one (positive, finite), never 0.
    #[test]
    fn any_text_is_a_real_figure_or_unknown(s in "\\PC{0,24}", t in "[0-9a-zA-Z./ x-]{0,12}") {
        for text in [s.as_str(), t.as_str(), &format!("{t} GT/s"), &format!("{s} GT/s PCIe")] {
            if let Some(v) = parse_speed(text) {
                proptest::prop_assert!(v.is_finite() && v > 0.0, "{text:?} -> {v}");
            }
            if let Some(w) = parse_width(text) {
                proptest::prop_assert!((1..=32).contains(&w), "{text:?} -> {w}");
            }
            let l = PciLink::from_sysfs(Some(text), Some(text), Some(text), Some(text));
            if let Some(l) = l {
                proptest::prop_assert!(l.figures().contains(" of "));
                proptest::prop_assert!(l.gbps().is_none_or(|g| g > 0.0));
            }
        }
    }
}

//! The specs of the VFIO snapshots in testdata/vfio, in both modes: valid by the CDI rules
//! and schema, and naming each device's nodes as the snapshot's own files say — read here
//! with plain `std::fs` from the extracted archive (the OS resolves the links), not through
//! topo.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cdi::{CdiError, Mode};
use common::{char_node, NodeSpelling};
use topo::Host;

fn archive(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"))
}

/// The archive extracted into a temporary directory; returns it and the snapshot root.
fn extract(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = std::fs::File::open(archive(name)).expect("archive");
    tar::Archive::new(flate2::read::GzDecoder::new(f))
        .unpack(dir.path())
        .expect("unpack");
    let root = dir.path().join(name);
    (dir, root)
}

/// What the snapshot's files say, read directly.
struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    fn link_name(&self, rel: &str) -> Option<String> {
        let t = std::fs::read_link(self.root.join(rel)).ok()?;
        Some(t.file_name()?.to_string_lossy().into_owned())
    }

    fn dev(&self, rel: &str) -> Option<(u32, u32)> {
        let s = std::fs::read_to_string(self.root.join(rel)).ok()?;
        let (a, b) = s.trim().split_once(':')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }

    fn functions(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.root.join("sys/bus/pci/devices"))
            .expect("devices")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn driver(&self, bdf: &str) -> Option<String> {
        self.link_name(&format!("sys/bus/pci/devices/{bdf}/driver"))
    }

    fn group(&self, bdf: &str) -> u32 {
        self.link_name(&format!("sys/bus/pci/devices/{bdf}/iommu_group"))
            .and_then(|g| g.parse().ok())
            .expect("group")
    }

    fn cdev(&self, bdf: &str) -> Option<(String, Option<(u32, u32)>)> {
        let d = self
            .root
            .join(format!("sys/bus/pci/devices/{bdf}/vfio-dev"));
        let name = std::fs::read_dir(d)
            .ok()?
            .next()?
            .ok()?
            .file_name()
            .to_string_lossy()
            .into_owned();
        let dev = self.dev(&format!("sys/bus/pci/devices/{bdf}/vfio-dev/{name}/dev"));
        Some((name, dev))
    }

    /// The nodes a VMM opens for `bdf`, by the mode.
    fn nodes(&self, bdf: &str, mode: Mode) -> Vec<NodeSpelling> {
        match mode {
            Mode::Legacy => {
                let g = self.group(bdf);
                vec![
                    char_node("/dev/vfio/vfio", self.dev("sys/class/misc/vfio/dev")),
                    char_node(
                        &format!("/dev/vfio/{g}"),
                        self.dev(&format!("sys/class/vfio/{g}/dev")),
                    ),
                ]
            }
            Mode::Iommufd => {
                let (name, dev) = self.cdev(bdf).expect("cdev");
                vec![
                    char_node("/dev/iommu", self.dev("sys/class/misc/iommu/dev")),
                    char_node(&format!("/dev/vfio/devices/{name}"), dev),
                ]
            }
        }
    }
}

fn load_both(name: &str) -> (Host, Sysfs, tempfile::TempDir) {
    let from_archive = topo::load_path(&archive(name)).expect("archive loads");
    let (tmp, root) = extract(name);
    let mut from_dir = topo::load_path(&root).expect("directory loads");
    // the directory and the archive backends read the same model
    from_dir.source = from_archive.source.clone();
    assert_eq!(from_dir, from_archive);
    (from_archive, Sysfs { root }, tmp)
}

/// The spec for `mode` holds every function on vfio-pci except `left_out`, under its index
/// (BDF order), its BDF and (IOMMUFD) its cdev name, each with the nodes sysfs gives.
fn check(host: &Host, sys: &Sysfs, mode: Mode, left_out: &[&str]) -> cdi::Generated {
    let gen = cdi::generate(
        host,
        &cdi::Options {
            mode,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    common::assert_valid(&gen.spec);
    assert_eq!(gen.spec.cdi_version, "0.5.0");
    let vfio: Vec<String> = sys
        .functions()
        .into_iter()
        .filter(|b| sys.driver(b).as_deref() == Some("vfio-pci"))
        .filter(|b| !left_out.contains(&b.as_str()))
        .collect();
    assert!(!vfio.is_empty());
    let mut want: BTreeMap<String, Vec<NodeSpelling>> = BTreeMap::new();
    for (i, bdf) in vfio.iter().enumerate() {
        let nodes = sys.nodes(bdf, mode);
        // every node has its numbers: both snapshots carry every dev file
        assert!(nodes.iter().all(|n| n.2.is_some() && n.3.is_some()));
        want.insert(i.to_string(), nodes.clone());
        want.insert(bdf.clone(), nodes.clone());
        if mode == Mode::Iommufd {
            want.insert(sys.cdev(bdf).expect("cdev").0, nodes);
        }
    }
    assert_eq!(common::nodes_by_name(&gen.spec), want, "{mode:?}");
    let refused: BTreeSet<&str> = gen.refused.iter().map(|r| r.bdf.as_str()).collect();
    assert_eq!(refused, left_out.iter().copied().collect());
    gen
}

#[test]
fn hgx_h100_both_modes() {
    let (h, sys, _tmp) = load_both("hgx-h100-vfio");
    for mode in [Mode::Legacy, Mode::Iommufd] {
        let gen = check(&h, &sys, mode, &["0000:4b:00.1"]);
        assert_eq!(gen.entries.len(), 11, "7 GPUs and 4 NVSwitches");
        let r = &gen.refused[0].reason;
        assert!(
            r.contains("IOMMU group 40 is not viable")
                && r.contains("0000:4b:00.0")
                && r.contains("mlx5_core"),
            "{r}"
        );
        // the GPU still on nvidia is said, not put in
        assert_eq!(gen.not_vfio.len(), 1);
        assert_eq!(gen.not_vfio[0].bdf, "0000:db:00.0");
        assert!(gen.not_vfio[0].reason.contains("nvidia"));
        assert!(gen.notes.is_empty(), "{:?}", gen.notes);
    }
    // cdev numbers follow bind order, index names follow BDF order
    let gen = cdi::generate(
        &h,
        &cdi::Options {
            mode: Mode::Iommufd,
            classes: vec![topo::DeviceKind::Gpu],
            ..Default::default()
        },
    )
    .expect("gpus");
    let first = gen.spec.device("0").expect("index 0");
    assert_eq!(
        first.container_edits.device_nodes[1].path,
        "/dev/vfio/devices/vfio3"
    );
    let by_cdev = gen.spec.device("vfio3").expect("cdev name");
    assert_eq!(by_cdev.container_edits, first.container_edits);
    assert_eq!(gen.entries.len(), 7);
    // the study's seven groups
    let groups: BTreeSet<u32> = gen.entries.iter().map(|e| e.iommu_group).collect();
    assert_eq!(groups, BTreeSet::from([16, 46, 57, 66, 86, 112, 132]));
}

#[test]
fn legacy_desktop_refuses_the_gpu_whose_audio_function_is_on_snd_hda_intel() {
    let (h, sys, _tmp) = load_both("desktop-5.15-legacy");
    let gen = check(&h, &sys, Mode::Legacy, &["0000:01:00.0"]);
    assert!(
        gen.refused[0]
            .reason
            .contains("0000:01:00.1 in the same group is bound to snd_hda_intel"),
        "{}",
        gen.refused[0].reason
    );
    // the root port (pcieport) in the GPU's group does not count against it, and the NVMe is in
    assert_eq!(gen.entries.len(), 1);
    assert_eq!(gen.entries[0].bdf, "0000:03:00.0");
    // Linux 5.15: no /dev/iommu, so no IOMMUFD spec, and the reasons are said
    match cdi::generate(
        &h,
        &cdi::Options {
            mode: Mode::Iommufd,
            ..Default::default()
        },
    ) {
        Err(CdiError::NoDevices(m)) => {
            assert!(m.contains("0000:03:00.0 no VFIO cdev"), "{m}");
            assert!(m.contains("not viable"), "{m}");
            assert!(m.contains("0000:00:02.0 (bound to i915)"), "{m}");
            assert!(m.ends_with("nothing written"), "{m}");
        }
        other => panic!("{:?}", other.map(|g| g.spec.to_json())),
    }
    // asked for by address, the GPU is refused with the reason, and nothing is made
    match cdi::generate(
        &h,
        &cdi::Options {
            devices: vec!["01:00.0".into(), "03:00.0".into()],
            ..Default::default()
        },
    ) {
        Err(e @ CdiError::Refused(_)) => {
            let m = e.to_string();
            assert!(
                m.starts_with("refused: 0000:01:00.0 IOMMU group 1 is not viable"),
                "{m}"
            );
            assert!(!m.contains("03:00.0"), "{m}");
        }
        other => panic!("{:?}", other.map(|g| g.spec.to_json())),
    }
    let e = cdi::generate(
        &h,
        &cdi::Options {
            devices: vec!["00:02.0".into()],
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "refused: 0000:00:02.0 bound to i915, not vfio-pci");
}

#[test]
fn builtin_host_both_modes() {
    let h = topo::builtin::default_host();
    for (mode, nodes) in [
        (
            Mode::Legacy,
            [("/dev/vfio/vfio", (10, 196)), ("/dev/vfio/1", (243, 0))],
        ),
        (
            Mode::Iommufd,
            [
                ("/dev/iommu", (10, 124)),
                ("/dev/vfio/devices/vfio0", (511, 0)),
            ],
        ),
    ] {
        let gen = cdi::generate(
            &h,
            &cdi::Options {
                mode,
                ..Default::default()
            },
        )
        .expect("builtin");
        common::assert_valid(&gen.spec);
        let names: Vec<&str> = gen.spec.devices.iter().map(|d| d.name.as_str()).collect();
        let mut want = vec!["0", "0000:01:00.0", "1", "0000:01:00.1"];
        if mode == Mode::Iommufd {
            want = vec!["0", "0000:01:00.0", "vfio0", "1", "0000:01:00.1", "vfio1"];
        }
        assert_eq!(names, want);
        let got = &common::nodes_by_name(&gen.spec)["0000:01:00.0"];
        let want: Vec<NodeSpelling> = nodes.iter().map(|(p, d)| char_node(p, Some(*d))).collect();
        assert_eq!(got, &want);
        // the root port shares group 1 and does not block it; the iGPU is said
        assert!(gen.refused.is_empty());
        assert_eq!(gen.not_vfio.len(), 1);
    }
}

#[test]
fn hwloc_xml_has_no_drivers_and_says_so() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc/g4dnmetal.xml");
    let h = topo::load_path(&p).expect("hwloc");
    let e = cdi::generate(&h, &cdi::Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not say which drivers"), "{e}");
}

#[test]
fn annotations_and_versions() {
    let h = topo::builtin::default_host();
    let gen = cdi::generate(
        &h,
        &cdi::Options {
            mode: Mode::Iommufd,
            annotate: true,
            ..Default::default()
        },
    )
    .expect("builtin");
    common::assert_valid(&gen.spec);
    assert_eq!(gen.spec.cdi_version, "0.6.0");
    let a = &gen.spec.device("0000:01:00.1").expect("audio").annotations;
    assert_eq!(a["vmtune.io/bdf"], "0000:01:00.1");
    assert_eq!(a["vmtune.io/pci-id"], "10de:10ef");
    assert_eq!(a["vmtune.io/iommu-group"], "1");
    assert_eq!(a["vmtune.io/vfio-cdev"], "vfio1");
    assert_eq!(a["vmtune.io/numa-node"], "0");
    // a function whose ids the host does not give has no pci-id annotation (not 0000:0000)
    let mut unknown = h.clone();
    let d = unknown
        .pci_devices
        .iter_mut()
        .find(|d| d.bdf == "0000:01:00.1")
        .expect("audio");
    (d.vendor_id, d.device_id) = topo::PciDevice::ids(Some(0), Some(0));
    let gen = cdi::generate(
        &unknown,
        &cdi::Options {
            mode: Mode::Iommufd,
            annotate: true,
            ..Default::default()
        },
    )
    .expect("unknown ids");
    common::assert_valid(&gen.spec);
    let a = &gen.spec.device("0000:01:00.1").expect("audio").annotations;
    assert!(!a.contains_key("vmtune.io/pci-id"), "{a:?}");
    assert_eq!(a["vmtune.io/bdf"], "0000:01:00.1");
    let e = gen
        .entries
        .iter()
        .find(|e| e.bdf == "0000:01:00.1")
        .unwrap();
    assert_eq!((e.vendor_id, e.device_id), (None, None));
    // an explicit version: the current one is fine, an older one than needed is not
    let v = |s: &str| {
        cdi::generate(
            &h,
            &cdi::Options {
                annotate: true,
                version: Some(s.into()),
                ..Default::default()
            },
        )
    };
    assert_eq!(v("1.1.0").expect("current").spec.cdi_version, "1.1.0");
    assert!(v("0.5.0").unwrap_err().to_string().contains("needs 0.6.0"));
    assert!(v("0.9.0")
        .unwrap_err()
        .to_string()
        .contains("not a released"));
    // kinds: a dot in the class needs 0.6.0; a bad kind is refused before anything else
    let k = |kind: &str| {
        cdi::generate(
            &h,
            &cdi::Options {
                kind: kind.into(),
                ..Default::default()
            },
        )
    };
    assert_eq!(
        k("nvidia.com/pgpu").expect("pgpu").spec.cdi_version,
        "0.5.0"
    );
    assert_eq!(
        k("example.com/gpu.v2").expect("dot").spec.cdi_version,
        "0.6.0"
    );
    assert!(matches!(k("nvidia.com"), Err(CdiError::Kind(_))));
    assert!(matches!(k("nvidia.com/pgpu/x"), Err(CdiError::Kind(_))));
}

#[test]
fn request_annotations_follow_the_cdi_key_rules() {
    let (k, v) = cdi::request_annotation("vmtune.io/vfio", "0").expect("key");
    assert_eq!(k, "cdi.k8s.io/vmtune.io.vfio_0");
    assert_eq!(v, "vmtune.io/vfio=0");
    assert!(cdi::names::validate_annotation_key(&k).is_ok());
    // a BDF has ':' which a key cannot hold; a long kind makes the key too long
    assert_eq!(
        cdi::request_annotation("vmtune.io/vfio", "0000:01:00.0"),
        None
    );
    assert_eq!(
        cdi::request_annotation(&format!("vmtune.io/{}", "a".repeat(60)), "0"),
        None
    );
}

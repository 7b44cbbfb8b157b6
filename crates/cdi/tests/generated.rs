//! Random hosts with VFIO devices, written as sysfs snapshots: the loader recovers every
//! driver, group, cdev and node the generator wrote, and the spec names exactly the devices
//! that can be assigned, each with exactly the nodes sysfs gives, in both modes.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use cdi::{CdiError, Mode};
use common::gen::{self, GenDevice, GenHost, CDEV_MAJOR, GROUP_MAJOR};
use common::{char_node, NodeSpelling};
use proptest::prelude::*;
use topo::{DevNumber, Host};

fn load(g: &GenHost) -> Host {
    topo::sysfs::load_archive_bytes(&g.to_tar(), Path::new("gen.tar"))
        .unwrap_or_else(|e| panic!("generated snapshot does not load: {e}"))
}

/// May share an IOMMU group with a VFIO device (the test's own statement of the rule):
/// no driver, pci-stub, pcieport, a VFIO driver, or a bridge with a type 1/2 header.
fn compatible(d: &GenDevice) -> bool {
    let bridge_header = matches!(d.class >> 8, 0x0604 | 0x0607 | 0x0609);
    match d.driver {
        None | Some("pci-stub") | Some("pcieport") => true,
        Some(_) => gen::is_vfio(d) || bridge_header,
    }
}

/// What the spec must hold: BDF → nodes, for every device that can go in; or the error.
enum Truth {
    Spec(Vec<(String, Option<String>, Vec<NodeSpelling>)>),
    NoDevices,
    MissingSharedNode,
}

fn truth(g: &GenHost, mode: Mode) -> Truth {
    let groups = g.groups();
    let mut accepted: Vec<&GenDevice> = g
        .devices
        .iter()
        .filter(|d| gen::is_vfio(d))
        .filter(|d| {
            let Some(grp) = d.group else { return false };
            let viable = g
                .devices
                .iter()
                .filter(|o| o.bdf != d.bdf && o.group == Some(grp))
                .all(compatible);
            let noiommu = g.class_tree && g.noiommu.contains(&grp);
            let cdev_ok = mode == Mode::Legacy || d.cdev.is_some();
            viable && !noiommu && cdev_ok
        })
        .collect();
    accepted.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    if accepted.is_empty() {
        return Truth::NoDevices;
    }
    let shared = match mode {
        Mode::Legacy => g.container,
        Mode::Iommufd => g.iommufd,
    };
    if g.class_tree && shared.is_none() {
        return Truth::MissingSharedNode;
    }
    let numbers = |n: Option<(u32, u32)>| if g.class_tree { n } else { None };
    Truth::Spec(
        accepted
            .into_iter()
            .map(|d| {
                let nodes = match mode {
                    Mode::Legacy => {
                        let grp = d.group.unwrap_or_default();
                        let (mut name, minor) = groups[&grp].clone();
                        if !g.class_tree {
                            // without /sys/class nothing says the group is a no-IOMMU one
                            name = grp.to_string();
                        }
                        vec![
                            char_node("/dev/vfio/vfio", numbers(g.container)),
                            char_node(
                                &format!("/dev/vfio/{name}"),
                                numbers(Some((GROUP_MAJOR, minor))),
                            ),
                        ]
                    }
                    Mode::Iommufd => {
                        let m = d.cdev.unwrap_or_default();
                        vec![
                            char_node("/dev/iommu", numbers(g.iommufd)),
                            char_node(
                                &format!("/dev/vfio/devices/vfio{m}"),
                                d.cdev_dev_file.then_some((CDEV_MAJOR, m)),
                            ),
                        ]
                    }
                };
                let cdev = (mode == Mode::Iommufd)
                    .then(|| d.cdev.map(|m| format!("vfio{m}")))
                    .flatten();
                (d.bdf.clone(), cdev, nodes)
            })
            .collect(),
    )
}

fn check_loader(g: &GenHost, h: &Host) {
    assert_eq!(h.pci_devices.len(), g.devices.len());
    for d in &g.devices {
        let p = h.pci(&d.bdf).expect("every function is read");
        assert_eq!(p.driver.as_deref(), d.driver, "{}", d.bdf);
        assert_eq!(p.iommu_group, d.group, "{}", d.bdf);
        let want = if gen::is_vfio(d) { d.cdev } else { None };
        assert_eq!(
            p.vfio_cdev.as_ref().map(|c| c.name.clone()),
            want.map(|m| format!("vfio{m}")),
            "{}",
            d.bdf
        );
        let dev = p.vfio_cdev.as_ref().and_then(|c| c.dev);
        let want_dev = want.filter(|_| d.cdev_dev_file).map(|m| DevNumber {
            major: CDEV_MAJOR,
            minor: m,
        });
        assert_eq!(dev, want_dev, "{}", d.bdf);
        assert_eq!(p.vfio_bound(), gen::is_vfio(d));
    }
    match (&h.vfio, g.class_tree) {
        (None, false) => {}
        (Some(v), true) => {
            let dn = |x: Option<(u32, u32)>| x.map(|(major, minor)| DevNumber { major, minor });
            assert_eq!(v.container, dn(g.container));
            assert_eq!(v.iommufd, dn(g.iommufd));
            let got: BTreeMap<u32, (String, bool, Option<DevNumber>)> = v
                .groups
                .iter()
                .map(|x| (x.id, (x.node.clone(), x.noiommu, x.dev)))
                .collect();
            let want: BTreeMap<u32, (String, bool, Option<DevNumber>)> = g
                .groups()
                .into_iter()
                .map(|(id, (name, minor))| {
                    let noiommu = name.starts_with("noiommu-");
                    (id, (name, noiommu, dn(Some((GROUP_MAJOR, minor)))))
                })
                .collect();
            assert_eq!(got, want);
        }
        (v, t) => panic!("vfio nodes {v:?} with class tree {t}"),
    }
}

fn check_spec(g: &GenHost, h: &Host, mode: Mode, annotate: bool) {
    let opts = cdi::Options {
        mode,
        annotate,
        ..Default::default()
    };
    let got = cdi::generate(h, &opts);
    match (truth(g, mode), got) {
        (Truth::NoDevices, Err(CdiError::NoDevices(_))) => {}
        (Truth::MissingSharedNode, Err(CdiError::Host(_))) => {}
        (Truth::Spec(want), Ok(gen)) => {
            common::assert_valid(&gen.spec);
            let want_version = if annotate { "0.6.0" } else { "0.5.0" };
            assert_eq!(gen.spec.cdi_version, want_version);
            // exactly these names, each with exactly these nodes
            let mut expect: BTreeMap<String, Vec<NodeSpelling>> = BTreeMap::new();
            for (i, (bdf, cdev, nodes)) in want.iter().enumerate() {
                expect.insert(i.to_string(), nodes.clone());
                expect.insert(bdf.clone(), nodes.clone());
                if let Some(c) = cdev {
                    expect.insert(c.clone(), nodes.clone());
                }
            }
            assert_eq!(common::nodes_by_name(&gen.spec), expect);
            // missing numbers are said
            if !g.class_tree {
                assert!(
                    gen.notes.iter().any(|n| n.contains("no /sys/class/misc")),
                    "{:?}",
                    gen.notes
                );
            }
            // every VFIO function not in the spec is reported with a reason
            let vfio = g.devices.iter().filter(|d| gen::is_vfio(d)).count();
            assert_eq!(gen.entries.len() + gen.refused.len(), vfio);
            if annotate {
                for d in &gen.spec.devices {
                    let bdf = &d.annotations["vmtune.io/bdf"];
                    assert!(want.iter().any(|(b, _, _)| b == bdf));
                }
            }
        }
        (_, got) => panic!(
            "mode {mode:?}: expected {}, got {:?}",
            match truth(g, mode) {
                Truth::Spec(w) => format!("a spec of {} devices", w.len()),
                Truth::NoDevices => "no devices".into(),
                Truth::MissingSharedNode => "a missing shared node".into(),
            },
            got.map(|g| g.spec.to_json())
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn spec_names_exactly_the_assignable_devices_and_their_sysfs_nodes(
        g in gen::host_strategy(),
        annotate in any::<bool>(),
    ) {
        let h = load(&g);
        check_loader(&g, &h);
        check_spec(&g, &h, Mode::Legacy, annotate);
        check_spec(&g, &h, Mode::Iommufd, annotate);
    }
}

/// The generator is not degenerate: over a fixed sample it produces specs in both modes,
/// refusals of every kind, and each error.
#[test]
fn generator_covers_every_outcome() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = gen::host_strategy();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..400 {
        let g = strat.new_tree(&mut runner).expect("tree").current();
        let h = load(&g);
        for mode in [Mode::Legacy, Mode::Iommufd] {
            let key = match cdi::generate(
                &h,
                &cdi::Options {
                    mode,
                    ..Default::default()
                },
            ) {
                Ok(r) => {
                    for f in &r.refused {
                        let k = if f.reason.contains("not viable") {
                            "refused: group not viable"
                        } else if f.reason.contains("no-IOMMU") {
                            "refused: noiommu"
                        } else if f.reason.contains("no VFIO cdev") {
                            "refused: no cdev"
                        } else if f.reason.contains("iommu_group") {
                            "refused: no group"
                        } else {
                            "refused: other"
                        };
                        *seen.entry(k).or_default() += 1;
                    }
                    if mode == Mode::Legacy {
                        "spec legacy"
                    } else {
                        "spec iommufd"
                    }
                }
                Err(CdiError::NoDevices(_)) => "no devices",
                Err(CdiError::Host(_)) => "missing shared node",
                Err(_) => "other error",
            };
            *seen.entry(key).or_default() += 1;
        }
    }
    for k in [
        "spec legacy",
        "spec iommufd",
        "no devices",
        "missing shared node",
        "refused: group not viable",
        "refused: noiommu",
        "refused: no cdev",
        "refused: no group",
    ] {
        assert!(seen.get(k).copied().unwrap_or(0) >= 3, "{k}: {seen:?}");
    }
    assert_eq!(seen.get("other error"), None, "{seen:?}");
    assert_eq!(seen.get("refused: other"), None, "{seen:?}");
}

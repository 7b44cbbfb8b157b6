//! The slices of every shared topology (testdata/topologies: hwloc XML and sysfs snapshots;
//! testdata/vfio: sysfs snapshots with devices on vfio-pci) against the host model they were
//! made from: every GPU's and CPU group's NUMA node is the model's, a group offers whole cores
//! only and never a housekeeping CPU or one taken outside DRA, nothing offerable is lost, and
//! the objects keep the API's limits. The API server's own check of the same objects is in
//! tests/scheduler.rs (`kubectl apply --dry-run=server`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use dra::objects::{Attribute, ResourceSlice};
use dra::{CpuGroups, GpuSelect, Options, Republisher, CPUS, CPU_DRIVER, GPU_DRIVER, NUMA_NODE};
use proptest::prelude::*;
use topo::{CpuSet, Host};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every shared topology: (file name, host).
fn shared_topologies() -> Vec<(String, Host)> {
    let mut out = Vec::new();
    for dir in ["topologies/hwloc", "topologies/sysfs", "vfio"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(testdata().join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".xml") || n.ends_with(".tar.gz") || n.ends_with(".tar.bz2")
            })
            .collect();
        paths.sort();
        for p in paths {
            let host = topo::load_path(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((p.file_name().unwrap().to_string_lossy().into_owned(), host));
        }
    }
    assert!(out.len() >= 25, "the shared topologies are there");
    out
}

fn topology(rel: &str) -> Host {
    topo::load_path(&testdata().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn devices<'a>(
    slices: &'a [ResourceSlice],
    driver: &'a str,
) -> impl Iterator<Item = &'a dra::objects::Device> + 'a {
    slices
        .iter()
        .filter(move |s| s.spec.driver == driver)
        .flat_map(|s| s.spec.devices.iter())
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The host's one NUMA node for a set of CPUs (`None` if they span several or none is known).
fn numa_of(host: &Host, cpus: &CpuSet) -> Option<u32> {
    let nodes: BTreeSet<Option<u32>> = cpus
        .iter()
        .map(|c| host.pu(c).and_then(|p| p.numa))
        .collect();
    match nodes.into_iter().collect::<Vec<_>>()[..] {
        [n] => n,
        _ => None,
    }
}

/// Every claim the checks make of one host's slices.
fn check(name: &str, host: &Host, opts: &Options) {
    let published = dra::slices(host, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    let inv = &published.inventory;
    let slices = &published.slices;
    // the objects: names, pool, limits
    let mut slice_names = BTreeSet::new();
    for s in slices {
        assert!(
            slice_names.insert(s.metadata.name.clone()),
            "{name}: slice names unique"
        );
        assert_eq!(s.spec.node_name.as_deref(), Some(opts.node_name.as_str()));
        assert_eq!(s.spec.pool.name, opts.node_name);
        assert!(s.spec.devices.len() <= 64 && !s.spec.devices.is_empty());
        let mut names = BTreeSet::new();
        for d in &s.spec.devices {
            assert!(is_dns_label(&d.name), "{name}: device name {:?}", d.name);
            assert!(names.insert(&d.name), "{name}: {} twice", d.name);
            assert!(d.attributes.len() + d.capacity.len() <= 32);
            for v in d.attributes.values() {
                if let Attribute::String(s) = v {
                    assert!(s.len() <= 64, "{name}: attribute {s:?} too long");
                }
            }
        }
    }
    check_gpus(name, host, opts, slices);
    check_cpus(name, host, inv, slices);
}

fn check_gpus(name: &str, host: &Host, opts: &Options, slices: &[ResourceSlice]) {
    let gpus: Vec<_> = devices(slices, GPU_DRIVER).collect();
    let cpu_nodes: Vec<u32> = host
        .numa_nodes
        .iter()
        .filter(|n| !n.is_cpuless())
        .map(|n| n.os_index)
        .collect();
    // which GPUs: all of the model's, or exactly the GPUs of `vmtune cdi`'s spec
    let want: BTreeSet<String> = match opts.gpus {
        GpuSelect::All => host.gpus().map(|g| g.bdf.clone()).collect(),
        GpuSelect::Vfio => cdi::generate(
            host,
            &cdi::Options {
                classes: vec![topo::DeviceKind::Gpu],
                ..Default::default()
            },
        )
        .map(|g| g.entries.into_iter().map(|e| e.bdf).collect())
        .unwrap_or_default(),
    };
    let got: BTreeSet<String> = gpus
        .iter()
        .map(|d| d.string(dra::PCI_BUS_ID).expect("pciBusID").to_string())
        .collect();
    assert_eq!(got, want, "{name}: the GPUs published");
    for d in gpus {
        let bdf = d.string(dra::PCI_BUS_ID).unwrap();
        let g = host.pci(bdf).expect("a GPU of the host");
        let model = match g.numa.as_deref() {
            Some([n]) => Some(i64::from(*n)),
            None | Some([]) if cpu_nodes.len() == 1 => Some(i64::from(cpu_nodes[0])),
            _ => None,
        };
        assert_eq!(d.int(NUMA_NODE), model, "{name}: {bdf}'s NUMA node");
        assert_eq!(
            d.int("iommuGroup"),
            g.iommu_group.map(i64::from),
            "{name}: {bdf}"
        );
        assert_eq!(
            d.string("vendorID").map(str::to_string),
            g.vendor_id.map(|v| format!("0x{v:04x}"))
        );
        if let Some(root) = d.string(dra::PCIE_ROOT) {
            let domain = &bdf[..bdf.find(':').unwrap()];
            assert!(
                root.starts_with(&format!("pci{domain}:")),
                "{name}: {bdf} under {root}"
            );
        }
        match &g.link {
            Some(_) => assert_eq!(
                d.bool("linkHealthy"),
                Some(host.downgraded_links(bdf).is_empty()),
                "{name}: {bdf}'s link health"
            ),
            None => assert_eq!(d.bool("linkHealthy"), None),
        }
    }
}

fn check_cpus(name: &str, host: &Host, inv: &dra::Inventory, slices: &[ResourceSlice]) {
    let held = inv.housekeeping.union(&inv.taken.cpus);
    let mut offered_all = CpuSet::new();
    for g in &inv.cpu_groups {
        let d = devices(slices, CPU_DRIVER)
            .find(|d| d.name == g.name)
            .unwrap_or_else(|| panic!("{name}: device {}", g.name));
        // its NUMA node is the model's node of every CPU in it
        assert_eq!(
            d.int(NUMA_NODE),
            numa_of(host, &g.cpus).map(i64::from),
            "{name}: {}'s NUMA node",
            g.name
        );
        assert!(
            g.numa.is_some() || host.numa_nodes.len() <= 1,
            "{name}: {}",
            g.name
        );
        assert!(
            !g.offered.intersects(&held),
            "{name}: {} offers held CPUs",
            g.name
        );
        assert!(g.offered.is_subset(&g.cpus));
        assert!(
            !offered_all.intersects(&g.offered),
            "{name}: groups overlap"
        );
        offered_all = offered_all.union(&g.offered);
        let cap = &d.capacity[CPUS];
        assert_eq!(cap.value, g.offered.len().to_string());
        assert_eq!(d.allow_multiple_allocations, Some(true));
        // whole cores: the granule is the widest core's threads
        let tpc = host
            .cores
            .iter()
            .filter(|c| c.pus.is_subset(&g.offered))
            .map(|c| c.pus.len())
            .max()
            .unwrap();
        let range = cap
            .request_policy
            .as_ref()
            .unwrap()
            .valid_range
            .as_ref()
            .unwrap();
        assert_eq!(range.min, tpc.to_string(), "{name}: {}", g.name);
        // a step only where one fits above the minimum (the API server's rule)
        let step = (g.offered.len() >= 2 * tpc).then(|| tpc.to_string());
        assert_eq!(range.step, step, "{name}: {}", g.name);
        assert!(g.offered.len() >= tpc);
    }
    // nothing offerable lost: every core off housekeeping and taken CPUs is offered whole,
    // and every other core not at all
    for c in &host.cores {
        let whole = !c.pus.intersects(&held);
        assert_eq!(
            c.pus.is_subset(&offered_all),
            whole,
            "{name}: core of CPUs {} offered: {whole}",
            c.pus
        );
        if !whole {
            assert!(!c.pus.intersects(&offered_all));
        }
    }
}

#[test]
fn every_shared_topology_publishes_the_models_numa_nodes() {
    let mut gpus_seen = 0;
    let mut vfio_seen = 0;
    for (name, host) in shared_topologies() {
        for gpus in [GpuSelect::Vfio, GpuSelect::All] {
            let mut opts = Options::new("node-1.example.com");
            opts.gpus = gpus;
            check(&name, &host, &opts);
            let n = dra::slices(&host, &opts).unwrap().inventory.gpus.len();
            match gpus {
                GpuSelect::All => gpus_seen += n,
                GpuSelect::Vfio => vfio_seen += n,
            }
            if host.l3_count().unwrap_or(0) > 0 {
                opts.cpu_groups = CpuGroups::L3;
                check(&name, &host, &opts);
            }
        }
    }
    // the check saw GPUs of both kinds of source
    assert!(gpus_seen > 50, "{gpus_seen} GPUs");
    assert!(vfio_seen >= 8, "{vfio_seen} VFIO GPUs");
}

#[test]
fn vfio_gpus_are_the_cdi_specs() {
    // 7 GPUs on vfio-pci, one (0000:db:00.0) still on nvidia
    let host = topology("vfio/hgx-h100-vfio.tar.gz");
    let p = dra::slices(&host, &Options::new("hgx")).unwrap();
    let names: Vec<&str> = p.inventory.gpus.iter().map(|g| g.bdf.as_str()).collect();
    assert_eq!(names.len(), 7, "{names:?}");
    assert!(!names.contains(&"0000:db:00.0"));
    assert!(
        p.inventory.notes.iter().any(|n| n.contains("0000:db:00.0")),
        "{:?}",
        p.inventory.notes
    );
    for g in &p.inventory.gpus {
        assert!(g.iommu_group.is_some() && g.pcie_root.is_some(), "{g:?}");
        assert_eq!(g.driver.as_deref(), Some("vfio-pci"));
    }
}

#[test]
fn a_downgraded_link_is_published_unhealthy() {
    let bad = dra::slices(
        &topology("vfio/desktop-pcie-downgraded.tar.gz"),
        &Options::new("desk"),
    )
    .unwrap();
    let good = dra::slices(
        &topology("vfio/desktop-pcie-healthy.tar.gz"),
        &Options::new("desk"),
    )
    .unwrap();
    let health = |p: &dra::Published| -> Vec<Option<bool>> {
        p.inventory.gpus.iter().map(|g| g.link_healthy).collect()
    };
    assert_eq!(health(&good), vec![Some(true), Some(true)]);
    assert_eq!(health(&bad), vec![Some(false), Some(false)]);
}

#[test]
fn bad_node_names_are_refused() {
    let host = topo::builtin::default_host();
    for bad in ["", "Node-A", "a_b", "-a", &"x".repeat(240)] {
        let e = dra::slices(&host, &Options::new(bad)).unwrap_err();
        assert!(e.to_string().contains("DNS-1123"), "{bad:?}: {e}");
    }
    // reserved CPUs the host lacks
    let mut o = Options::new("a");
    o.reserved_cpus = Some(CpuSet::parse_list("4000").unwrap());
    assert!(dra::slices(&host, &o).is_err());
}

#[test]
fn classes_select_their_drivers() {
    let c = dra::classes();
    let names: Vec<&str> = c.iter().map(|c| c.metadata.name.as_str()).collect();
    assert_eq!(names, [GPU_DRIVER, CPU_DRIVER]);
    for class in &c {
        assert_eq!(
            class.spec.selectors[0].cel.expression,
            format!("device.driver == \"{}\"", class.metadata.name)
        );
    }
    // the YAML stream and the JSON list read back as the same objects
    let yaml = dra::to_yaml(&c);
    let back: Vec<dra::DeviceClass> = yaml
        .split("---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(back, c);
    let json: serde_json::Value = serde_json::from_str(&dra::to_json(&c)).unwrap();
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"][1]["metadata"]["name"], CPU_DRIVER);
}

/// The NRI half's hook, against the real agent: an exclusive container without a claim
/// lowers its group's capacity by its whole cores; its removal puts them back; a change that
/// moves nothing a group offers writes nothing.
#[test]
fn republishes_when_the_agent_places_an_exclusive_container() {
    let host = topology("topologies/hwloc/cts1-pascal.xml");
    let mut agent = nri::Agent::new(
        host.clone(),
        nri::Settings::default(),
        nri::devices::CdiRegistry::default(),
    )
    .unwrap();
    let mut rep = Republisher::new(host.clone(), Options::new("node-a")).unwrap();
    let capacity = |s: &[ResourceSlice]| -> Vec<(String, String)> {
        devices(s, CPU_DRIVER)
            .map(|d| (d.name.clone(), d.capacity[CPUS].value.clone()))
            .collect()
    };
    let before = capacity(rep.current());
    let g0 = rep.generation();

    let status = |agent: &nri::Agent| nri::report::Status::of(agent, true);
    assert_eq!(
        rep.taken_changed(&dra::taken_outside_dra(&status(&agent))),
        None
    );

    let (pod, c) = nri::replay::generated(0, &nri::replay::PodShape::guaranteed(8));
    let out = agent.create(&pod, &c);
    let cpus = out.adjust.expect("placed").cpus;
    assert_eq!(cpus.len(), 8);
    let taken = dra::taken_outside_dra(&status(&agent));
    assert_eq!(taken.cpus, cpus);
    assert!(taken.devices.is_empty());
    let slices = rep.taken_changed(&taken).expect("republished").to_vec();
    assert_eq!(rep.generation(), g0 + 1);
    assert!(slices.iter().all(|s| s.spec.pool.generation == g0 + 1));
    let after = capacity(&slices);
    let node = numa_of(&host, &cpus).expect("one node") as usize;
    for (i, ((n0, c0), (n1, c1))) in before.iter().zip(&after).enumerate() {
        assert_eq!(n0, n1);
        let (c0, c1): (usize, usize) = (c0.parse().unwrap(), c1.parse().unwrap());
        if i == node {
            assert_eq!(c1, c0 - 8, "{n0}");
        } else {
            assert_eq!(c1, c0, "{n0}");
        }
    }
    // the same set again: nothing to write
    assert_eq!(rep.taken_changed(&taken), None);
    // a housekeeping CPU held in addition changes no group's offer
    let hk = rep.current().to_vec();
    let mut more = taken.clone();
    more.cpus.insert(agent.housekeeping().first().unwrap());
    assert_eq!(rep.taken_changed(&more), None);
    assert_eq!(rep.current(), &hk[..]);
    // the container goes: the capacity comes back, one generation on
    agent.release(&c, "remove", true);
    let back = rep
        .taken_changed(&dra::taken_outside_dra(&status(&agent)))
        .expect("republished")
        .to_vec();
    assert_eq!(capacity(&back), before);
    assert_eq!(rep.generation(), g0 + 2);
}

#[test]
fn status_file_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("status.json");
    assert_eq!(
        dra::taken_from_status_file(&path).unwrap(),
        dra::Taken::default()
    );
    std::fs::write(&path, "{\"not\": \"a status\"}").unwrap();
    let e = dra::taken_from_status_file(&path).unwrap_err().to_string();
    assert!(
        e.contains("status.json") && e.contains("not the NRI agent's"),
        "{e}"
    );
}

proptest! {
    /// However many CPUs are taken outside DRA, no group offers one, every offer is whole
    /// cores, and taking more never offers more.
    #[test]
    fn taken_cpus_are_never_offered(picks in proptest::collection::vec(0u32..96, 0..40)) {
        let host = topology("topologies/hwloc/topo.jwb0004.xml");
        let mut opts = Options::new("n");
        let mut prev: Option<usize> = None;
        let mut taken = CpuSet::new();
        for p in picks {
            taken.insert(p);
            opts.taken.cpus = taken.clone();
            let inv = dra::inventory(&host, &opts).unwrap();
            let offered: usize = inv.cpu_groups.iter().map(|g| g.offered.len()).sum();
            for g in &inv.cpu_groups {
                prop_assert!(!g.offered.intersects(&taken));
            }
            for c in &host.cores {
                let inside = c.pus.intersection(
                    &inv.cpu_groups.iter().fold(CpuSet::new(), |a, g| a.union(&g.offered)),
                );
                prop_assert!(inside.is_empty() || inside == c.pus);
            }
            if let Some(p) = prev {
                prop_assert!(offered <= p);
            }
            prev = Some(offered);
        }
    }
}

/// YAML output is what kubectl reads: attributes as plain maps (`int: 0`), never YAML tags,
/// and it reads back as the same slices; an attribute with two members is refused.
#[test]
fn yaml_attributes_are_plain_maps() {
    let p = dra::slices(
        &topology("vfio/desktop-pcie-healthy.tar.gz"),
        &Options::new("desk"),
    )
    .unwrap();
    let yaml = dra::to_yaml(&p.slices);
    assert!(!yaml.contains('!'), "{yaml}");
    assert!(
        yaml.contains("resource.kubernetes.io/numaNode:\n        int: 0"),
        "{yaml}"
    );
    let back: Vec<ResourceSlice> = yaml
        .split("---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(back, p.slices);
    let two: Result<Attribute, _> = serde_json::from_str(r#"{"int": 1, "string": "x"}"#);
    assert!(two.unwrap_err().to_string().contains("exactly one"));
}

/// A GPU a container holds outside DRA is not offered; the others are.
#[test]
fn a_gpu_taken_outside_dra_is_not_offered() {
    let host = topology("vfio/hgx-h100-vfio.tar.gz");
    let mut opts = Options::new("hgx");
    let all = dra::slices(&host, &opts).unwrap().inventory.gpus;
    let held = all[2].bdf.clone();
    opts.taken.devices.insert(held.clone());
    let p = dra::slices(&host, &opts).unwrap();
    let now: Vec<&str> = p.inventory.gpus.iter().map(|g| g.bdf.as_str()).collect();
    assert_eq!(now.len(), all.len() - 1);
    assert!(!now.contains(&held.as_str()));
    assert!(p
        .inventory
        .notes
        .iter()
        .any(|n| n.contains(&held) && n.contains("outside DRA")));
}

//! Domains whose several guest NUMA cells the plan folds into one (the built-in one-node
//! desktop), issue 37 items 5-9: a second cell with `memAccess='shared'` and `discard='yes'`
//! (virtiofs), `<hugepages>` with a `<page>` per cell and size, DIMM / virtio-mem devices on a
//! cell the plan removes, HMAT `<cache>`s with `<interconnects>` naming them, `host-model`
//! with a `<numatune>` of `preferred`/`restrictive` modes and `<memnode>`s. Written for these
//! tests in the shapes libvirt's formatdomain documents (`fixtures/fold/`); each fixture
//! validates and is defined by libvirt's test driver before and after the patch (the test
//! driver refuses a memory device on a missing cell and interconnects naming one, as the
//! QEMU driver does), and each change the fold makes is a warning.

mod common;

use emit::libvirt::{domain_choices, patch, Patched};
use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};

fn one_node_plan(hugepages: HugepagePolicy) -> Plan {
    let host = topo::builtin::default_host();
    let req = Request {
        name: Some("fold".into()),
        vcpus: 8,
        memory_bytes: 16 << 30,
        devices: vec!["01:00.0".into()],
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let p = plan::plan(&req, &host, &[]).expect("plan");
    assert!(
        p.guest_numa.len() <= 1,
        "a one-node host: {:?}",
        p.guest_numa
    );
    p
}

/// The fixture checked, patched, and the patched domain checked and defined.
fn fold(name: &str, hugepages: HugepagePolicy) -> (String, Patched, String) {
    let base = common::read(&format!("fold/{name}"));
    common::validate(&base, name);
    common::virsh_define(&base).unwrap_or_else(|e| panic!("{name}: {e}"));
    let r = patch(&base, &one_node_plan(hugepages)).expect("patch");
    common::validate(&r.xml, &format!("{name} patched"));
    let dumped = common::virsh_define(&r.xml)
        .unwrap_or_else(|e| panic!("libvirt refuses patched {name}: {e}\n{}", r.xml));
    (base, r, dumped)
}

fn warning<'a>(r: &'a Patched, words: &[&str]) -> &'a str {
    r.plan
        .warnings
        .iter()
        .find(|w| words.iter().all(|x| w.contains(x)))
        .unwrap_or_else(|| panic!("no warning with {words:?}: {:#?}", r.plan.warnings))
}

fn cells(xml: &str) -> Vec<(Option<String>, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    doc.descendants()
        .filter(|n| n.tag_name().name() == "cell")
        .map(|c| {
            (
                c.attribute("memAccess").map(str::to_string),
                c.attribute("discard").map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn a_second_cells_shared_memory_survives_the_fold() {
    let (_, r, dumped) = fold("virtiofs_shared_second_cell.xml", HugepagePolicy::None);
    // one cell, with the second cell's shared memory and discard: virtiofs still starts
    let want = vec![(Some("shared".to_string()), Some("yes".to_string()))];
    assert_eq!(cells(&r.xml), want, "{}", r.xml);
    assert_eq!(cells(&dumped), want, "libvirt lost them:\n{dumped}");
    let w = warning(
        &r,
        &["memAccess='shared' of cell 1", "vhost-user and virtiofs"],
    );
    assert!(w.contains("discard='yes' of cell 1"), "{w}");
    // the second cell's <distances> name a cell the guest no longer has: dropped, said
    assert!(!r.xml.contains("<distances>"), "{}", r.xml);
    warning(&r, &["<distances>", "dropped"]);
    // and the cell count, as before
    warning(&r, &["has 2 guest NUMA cells"]);
}

#[test]
fn every_page_size_of_the_domain_is_weighed() {
    // the plan's one page size backs everything; the 2 MiB pages of cell 0 and the 1 GiB
    // pages of cell 1 are each said where the plan uses another size
    for (policy, gone) in [
        (HugepagePolicy::Size2M, "1 GiB pages"),
        (HugepagePolicy::Size1G, "2 MiB pages"),
    ] {
        let (_, r, _) = fold("hugepages_per_cell_sizes.xml", policy);
        let w = warning(&r, &[gone, "<hugepages>"]);
        assert!(w.contains("nodeset="), "names the cells: {w}");
        let choices = domain_choices(&r.xml).expect("choices");
        assert_eq!(choices.hugepages.len(), 1, "{}", r.xml);
        assert_eq!(choices.hugepages[0].nodeset, None, "{}", r.xml);
    }
    // reading them: every <page>, in order, with its nodeset
    let base = common::read("fold/hugepages_per_cell_sizes.xml");
    let c = domain_choices(&base).expect("choices");
    let sizes: Vec<(u64, Option<&str>)> = c
        .hugepages
        .iter()
        .map(|p| (p.size_kb, p.nodeset.as_deref()))
        .collect();
    assert_eq!(sizes, vec![(2048, Some("0")), (1 << 20, Some("1"))]);
}

#[test]
fn memory_devices_on_a_removed_cell_move_to_the_kept_one() {
    let (base, r, dumped) = fold("memory_devices_on_cell_one.xml", HugepagePolicy::None);
    let nodes = |xml: &str| -> Vec<u32> {
        domain_choices(xml)
            .expect("choices")
            .memory_devices
            .iter()
            .map(|d| d.node)
            .collect()
    };
    assert_eq!(nodes(&base), vec![1, 1, 0]);
    assert_eq!(nodes(&r.xml), vec![0, 0, 0], "{}", r.xml);
    assert_eq!(nodes(&dumped), vec![0, 0, 0], "{dumped}");
    warning(&r, &["<memory model='dimm'> targets guest NUMA cell 1"]);
    warning(
        &r,
        &["<memory model='virtio-mem'> targets guest NUMA cell 1"],
    );
    // the device already on cell 0 is not named
    assert_eq!(
        r.plan
            .warnings
            .iter()
            .filter(|w| w.contains("targets guest NUMA cell"))
            .count(),
        2,
        "{:#?}",
        r.plan.warnings
    );
    // only the node numbers changed inside <devices>
    let devices = |xml: &str| {
        let a = xml.find("<devices>").expect("devices");
        let b = xml.find("</devices>").expect("devices");
        xml[a..b].replace("<node>1</node>", "<node>0</node>")
    };
    assert_eq!(devices(&base), devices(&r.xml));
}

#[test]
fn an_hmat_description_goes_with_the_cells_it_describes() {
    let (_, r, dumped) = fold("hmat_cache_interconnects.xml", HugepagePolicy::None);
    for gone in ["<interconnects", "<cache", "<latency", "<bandwidth"] {
        assert!(!r.xml.contains(gone), "{gone} kept:\n{}", r.xml);
        assert!(!dumped.contains(gone), "{gone}:\n{dumped}");
    }
    warning(
        &r,
        &["2 HMAT <cache> elements", "<interconnects>", "dropped"],
    );
}

#[test]
fn an_hmat_description_of_the_same_cells_stays() {
    // a two-node plan over the same two cells keeps caches and interconnects byte for byte
    let base = common::read("fold/hmat_cache_interconnects.xml");
    let p = common::plan("plan_membw_2node_1g.json");
    assert_eq!(plan::guest_cell_ids(&p), vec![0, 1]);
    let r = patch(&base, &p).expect("patch");
    for kept in [
        "<latency initiator='0' target='1' cache='1' type='access' value='10'/>",
        "<cache level='1' associativity='direct' policy='writeback'>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    assert!(
        !r.plan.warnings.iter().any(|w| w.contains("HMAT")),
        "{:#?}",
        r.plan.warnings
    );
}

#[test]
fn host_model_and_a_preferred_numatune_are_said_on_stderr() {
    let (_, r, dumped) = fold("host_model_numatune_preferred.xml", HugepagePolicy::None);
    warning(&r, &["CPU mode 'host-model'", "host-passthrough"]);
    warning(
        &r,
        &[
            "<numatune><memory mode='preferred' nodeset='0'>",
            "mode='strict'",
        ],
    );
    let w = warning(&r, &["<memnode> entries"]);
    assert!(
        w.contains("cell 0 mode='restrictive'") && w.contains("cell 1 mode='preferred'"),
        "{w}"
    );
    assert!(dumped.contains("<memory mode='strict'"), "{dumped}");
    assert!(!dumped.contains("<memnode"), "{dumped}");
}

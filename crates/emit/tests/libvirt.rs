//! libvirt: patched domains validate against libvirt's schema, keep every byte they do not
//! own, read back as the tenant the plan describes; tenants from hand-written domains.

mod common;

use common::{validate, without_owned};
use emit::libvirt::{domain_fragment, patch_domain, tenant_from_domain_xml};
use topo::CpuSet;

#[test]
fn patched_domains_validate() {
    for d in common::DOMAINS {
        let base = common::read(d);
        validate(&base, d);
        for (name, p) in common::plans() {
            let out = patch_domain(&base, &p).expect("patch");
            validate(&out, &format!("{d} patched with {name}"));
        }
    }
}

#[test]
fn fragments_validate_inside_a_domain() {
    for (name, p) in common::plans() {
        let frag = domain_fragment(&p);
        let xml = format!(
            "<domain type='kvm'>\n<name>x</name>\n{frag}<os><type arch='x86_64' machine='q35'>hvm</type></os>\n</domain>\n"
        );
        validate(&xml, &format!("fragment of {name}"));
    }
}

#[test]
fn everything_outside_owned_elements_is_byte_identical() {
    for d in common::DOMAINS {
        let base = common::read(d);
        for (name, p) in common::plans() {
            let out = patch_domain(&base, &p).expect("patch");
            assert_eq!(
                without_owned(&base),
                without_owned(&out),
                "{d} with {name}: bytes outside the owned elements changed"
            );
        }
    }
}

#[test]
fn merged_elements_keep_the_users_children_verbatim() {
    let base = common::read("domain_win10.xml");
    let p = common::plan("plan_seed000_win10_gaming.json");
    let out = patch_domain(&base, &p).expect("patch");
    for kept in [
        "<vcpusched vcpus='0-7' scheduler='fifo' priority='1'/>",
        "<!-- AMD hosts want this; harmless elsewhere -->\n    <feature policy='require' name='topoext'/>",
        "<hint-dedicated state='on'/>",
        "<vmport state='off'/>",
        "<clock offset='localtime'>",
        "<timer name='tsc' present='yes' mode='native'/>",
    ] {
        assert!(out.contains(kept), "lost {kept:?}:\n{out}");
    }
    for gone in [
        "vcpu='0' cpuset='4'/>",
        "host-model",
        "check='partial'",
        "present='yes'/>\n    <timer name='tsc'",
    ] {
        assert!(!out.contains(gone), "still has {gone:?}:\n{out}");
    }
    assert_eq!(out.matches("<vcpupin ").count(), 12);
    assert_eq!(out.matches("name='hpet'").count(), 1);
    assert!(out.contains("<timer name='hpet' present='no'/>"));
}

#[test]
fn vcpusched_is_clipped_when_the_vcpu_count_shrinks() {
    let base = common::read("domain_win10.xml");
    let p = common::plan("plan_seed004_win7.json");
    let out = patch_domain(&base, &p).expect("patch");
    assert!(
        out.contains("<vcpusched vcpus='0-3' scheduler='fifo' priority='1'/>"),
        "{out}"
    );
    // hypervisor bit hidden: the user's Hyper-V settings stay as written (inactive), and the
    // plan adds none
    let base_hv = &base[base.find("<hyperv").unwrap()..base.find("</hyperv>").unwrap()];
    assert!(out.contains(base_hv), "{out}");
    assert!(out.contains("<feature policy='disable' name='hypervisor'/>"));
}

#[test]
fn patch_is_idempotent() {
    for d in common::DOMAINS {
        let base = common::read(d);
        for (name, p) in common::plans() {
            let once = patch_domain(&base, &p).expect("patch");
            let twice = patch_domain(&once, &p).expect("patch again");
            assert_eq!(once, twice, "{d} with {name}");
        }
    }
}

#[test]
fn crlf_and_tabs_are_kept() {
    let base = common::read("domain_crlf_tabs.xml");
    let p = common::plan("plan_compute_4k.json");
    let out = patch_domain(&base, &p).expect("patch");
    assert!(
        !out.replace("\r\n", "").contains('\n'),
        "a bare LF slipped in:\n{out}"
    );
    assert!(
        out.contains("\r\n\t<cputune>\r\n\t\t<vcpupin vcpu=\"0\" cpuset=\"20\"/>"),
        "{out:?}"
    );
    // the domain's two iothreads (its disk uses iothread 2) are kept and pinned to the
    // emulator CPUs, since the plan has no iothread CPUs
    assert!(out.contains("<iothreads>2</iothreads>"));
    assert!(out.contains("<iothreadpin iothread=\"1\" cpuset=\"16\"/>"));
    assert!(out.contains("<iothreadpin iothread=\"2\" cpuset=\"16\"/>"));
}

#[test]
fn one_line_domain_stays_one_line() {
    let base = "<domain type='kvm'><name>a</name><memory>1024</memory><os><type>hvm</type></os><devices/></domain>";
    let p = common::plan("plan_seed004_win7.json");
    let out = patch_domain(base, &p).expect("patch");
    assert!(!out.contains('\n'), "{out}");
    validate(&out, "one-line domain");
}

#[test]
fn patched_domain_reads_back_as_the_plans_tenant() {
    for d in common::DOMAINS {
        let base = common::read(d);
        for (name, p) in common::plans() {
            let out = patch_domain(&base, &p).expect("patch");
            let t = tenant_from_domain_xml(&out).expect("tenant");
            // iothreads are pinned only where the domain has some (none is ever added)
            let mut want = p.guest_cpus().union(&p.emulator_cpus);
            if out.contains("<iothreadpin") {
                want = want.union(if p.iothread_cpus.is_empty() {
                    &p.emulator_cpus
                } else {
                    &p.iothread_cpus
                });
            }
            assert_eq!(t.cpus, want, "{d} with {name}");
            // emulator/iothread CPUs apart from the vCPUs': shareable with the housekeeping
            let mut emulator = p.emulator_cpus.clone();
            if out.contains("<iothreadpin") {
                emulator = emulator.union(&p.iothread_cpus);
            }
            let emulator = emulator.difference(&p.guest_cpus());
            assert_eq!(t.emulator_cpus, emulator, "{d} with {name}");
            let pages: u64 = t.hugepages.iter().map(|h| h.pages).sum();
            assert_eq!(pages, p.memory.pages, "{d} with {name}: {:?}", t.hugepages);
            if p.memory.pages > 0 {
                for h in &t.hugepages {
                    assert_eq!(h.size_kb, p.memory.hugepage_size_kb);
                    let i = p
                        .memory
                        .host_nodes
                        .iter()
                        .position(|&n| Some(n) == h.node)
                        .expect("a node of the plan");
                    assert_eq!(h.pages, p.memory.pages_per_node[i], "{d} with {name}");
                }
            }
        }
    }
}

#[test]
fn tenant_from_a_hand_written_domain() {
    let xml = r#"<domain type="kvm">
  <name> db-vm </name>
  <memory unit="G">8</memory>
  <memoryBacking>
    <hugepages>
      <page size="1" unit="G" nodeset="0"/>
      <page size="2048"/>
    </hugepages>
  </memoryBacking>
  <vcpu placement="static" cpuset="1-4,^3,6">6</vcpu>
  <cputune>
    <vcpupin vcpu="0" cpuset="20"/>
    <vcpupin vcpu="1" cpuset="21-23,^22"/>
    <emulatorpin cpuset="30"/>
    <iothreadpin iothread="1" cpuset="31"/>
  </cputune>
  <numatune>
    <memory mode="strict" nodeset="0-1"/>
    <memnode cellid="0" mode="strict" nodeset="1"/>
  </numatune>
  <cpu mode="host-passthrough">
    <numa>
      <cell id="0" cpus="0-2" memory="4" unit="GiB"/>
      <cell id="1" cpus="3-5" memory="4194304"/>
    </numa>
  </cpu>
  <devices>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source><address domain="0x0000" bus="0x41" slot="0x00" function="0x0"/></source>
    </hostdev>
    <hostdev mode="subsystem" type="pci">
      <source><address bus="0x81" slot="0x1f" function="0x7"/></source>
    </hostdev>
    <hostdev mode="subsystem" type="usb">
      <source><vendor id="0x1234"/><product id="0xbeef"/></source>
    </hostdev>
    <interface type="hostdev" managed="yes">
      <source><address type="pci" domain="0" bus="5" slot="16" function="1"/></source>
    </interface>
  </devices>
</domain>"#;
    let t = tenant_from_domain_xml(xml).expect("tenant");
    assert_eq!(t.name, "db-vm");
    assert_eq!(
        t.cpus,
        CpuSet::parse_list("1-2,4,6,20-21,23,30-31").unwrap()
    );
    assert_eq!(
        t.devices,
        vec!["0000:41:00.0", "0000:81:1f.7", "0000:05:10.1"]
    );
    // cell 0: 4 GiB of 1 GiB pages on host node 1 (memnode); cell 1: 4 GiB of 2 MiB pages
    // bound to host nodes 0-1: counted half on each, and the tenant's notes say so
    assert_eq!(
        t.hugepages,
        vec![
            plan::TenantHugepages {
                node: Some(1),
                size_kb: 1 << 20,
                pages: 4
            },
            plan::TenantHugepages {
                node: Some(0),
                size_kb: 2048,
                pages: 1024
            },
            plan::TenantHugepages {
                node: Some(1),
                size_kb: 2048,
                pages: 1024
            },
        ]
    );
    assert_eq!(t.notes.len(), 1, "{:?}", t.notes);
    assert!(t.notes[0].contains("nodes 0,1") && t.notes[0].contains("evenly"));
}

#[test]
fn tenant_without_pinning_or_hugepages() {
    let t = tenant_from_domain_xml(&common::read("domain_minimal.xml")).expect("tenant");
    assert_eq!(t.name, "linux-guest");
    assert!(t.cpus.is_empty());
    assert_eq!(t.devices, vec!["0000:41:00.0"]);
    assert!(t.hugepages.is_empty());
}

#[test]
fn tenant_errors_are_one_line() {
    let cases = [
        ("not xml at all", "malformed domain XML"),
        ("<domain><name>x</name>", "malformed domain XML"),
        ("<network><name>x</name></network>", "not <domain>"),
        ("<domain type='kvm'><memory>1</memory></domain>", "no <name>"),
        ("<domain><name>x</name><cputune><vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>", "goes backwards"),
        ("<domain><name>x</name><cputune><emulatorpin cpuset='x'/></cputune></domain>", "emulatorpin"),
        ("<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'><source><address bus='0x1' slot='0x40' function='0'/></source></hostdev></devices></domain>", "out of range"),
        ("<domain><name>x</name><devices><hostdev mode='subsystem' type='pci'><source><address bus='zz' slot='0' function='0'/></source></hostdev></devices></domain>", "not a number"),
        ("<domain><name>x</name><memoryBacking><hugepages/></memoryBacking></domain>", "no <memory>"),
        ("<domain><name>x</name><memory unit='parsec'>1</memory><memoryBacking><hugepages/></memoryBacking></domain>", "unknown unit"),
        ("<!DOCTYPE domain [<!ENTITY a 'b'>]><domain><name>&a;</name></domain>", "malformed domain XML"),
    ];
    for (xml, want) in cases {
        let e = tenant_from_domain_xml(xml).expect_err(xml).to_string();
        assert!(e.contains(want), "{xml}: {e}");
        assert!(!e.contains('\n'), "{xml}: multi-line error {e:?}");
    }
}

#[test]
fn patch_rejects_what_is_not_a_domain() {
    let p = common::plan("plan_compute_4k.json");
    assert!(patch_domain("<domain>", &p).is_err());
    assert!(patch_domain("<pool/>", &p).is_err());
    let mut empty = p.clone();
    empty.vcpus.clear();
    empty.request.vcpus = 0;
    assert!(patch_domain(&common::read("domain_minimal.xml"), &empty).is_err());
}

#[test]
fn unknown_names_are_said_in_fragments_and_never_pile_up_in_patches() {
    let mut p = common::plan("plan_seed000_win10_gaming.json");
    p.cpu_features.hyperv.push("warp_drive".into());
    p.cpu_features.timers.push(plan::Timer {
        name: "sundial".into(),
        present: true,
        tickpolicy: None,
    });
    let frag = domain_fragment(&p);
    assert!(
        frag.contains("unknown Hyper-V enlightenment \"warp_drive\""),
        "{frag}"
    );
    assert!(frag.contains("unknown timer \"sundial\""), "{frag}");
    for d in common::DOMAINS {
        let once = patch_domain(&common::read(d), &p).expect("patch");
        assert!(
            !once.contains("warp_drive") && !once.contains("sundial"),
            "{once}"
        );
        assert_eq!(patch_domain(&once, &p).expect("again"), once, "{d}");
    }
}

//! Public GPU-passthrough domains, fourth collection (issue 26): eleven domains in the shapes
//! of VFIO users' repositories and of live `virsh dumpxml`s pasted in issue threads (a
//! Threadripper guide, an i440fx VM with `-cpu host,kvm=off`, a laptop dGPU with offline
//! vCPUs and Looking Glass, an RDNA card with `clusters` and the hypervisor bit hidden, a
//! memfd/virtiofs VM, hugepages without a size next to `<locked/>`, a custom EPYC model with
//! its timers off, a virsh dump with blocks pasted from a guide with tabs, an OpenStack Nova
//! instance, a KubeVirt VMI with hugepages per node, an anti-detection setup). Written for
//! these tests (no upstream file copied; `fixtures/public4/README.md` names each source and
//! what the fixture follows), patched with plans the real planner makes on the built-in
//! desktop, the path `vmtune plan --domain FILE --emit libvirt` takes.
//!
//! Checked for every domain × plan: bytes outside the elements vmtune owns unchanged (the
//! final newline too), every `<hostdev>` byte-identical, the pins, emulator and iothread pins
//! are the plan's (in the file and as libvirt's test driver reads them back), a domain that
//! validated still validates and one libvirt defined still defines, patching twice changes
//! nothing, and the lines added are indented as the file is. Then, per domain, the user's
//! explicit choices: kept, or overridden with a warning (or, where earlier rounds decided a
//! sentence of the rationale says it, that sentence) naming them.

mod common;

use emit::libvirt::{domain_choices, patch, Patched};
use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};

const DOMAINS: &[&str] = &[
    "public4/tr_numa_cell_iothreads.xml",
    "public4/i440fx_host_model_cmdline_kvm_off.xml",
    "public4/laptop_offline_vcpus_lookingglass.xml",
    "public4/clusters_avic_hidden_hypervisor.xml",
    "public4/memfd_virtiofs_partial_hyperv.xml",
    "public4/hugepages_nosize_locked_i440fx.xml",
    "public4/epyc_model_timers_off.xml",
    "public4/virsh_with_tab_pasted_blocks.xml",
    "public4/nova_live_gpu_instance.xml",
    "public4/kubevirt_hugepages_per_node.xml",
    "public4/anti_detection_memfd_identity_pins.xml",
];

fn plan_for(vcpus: u32, os: GuestOs) -> Plan {
    let host = topo::builtin::default_host();
    let req = Request {
        name: Some("public4".into()),
        vcpus,
        memory_bytes: 16 << 30,
        devices: vec!["01:00.0".into()],
        profile: Profile::Gaming,
        os,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    plan::plan(&req, &host, &[]).expect("plan")
}

fn plans() -> Vec<(String, Plan)> {
    [
        (12, GuestOs::Windows),
        (8, GuestOs::Windows),
        (4, GuestOs::Linux),
    ]
    .into_iter()
    .map(|(n, os)| (format!("{n} vCPUs {os:?}"), plan_for(n, os)))
    .collect()
}

fn patched(file: &str) -> Patched {
    patch(&common::read(file), &plan_for(12, GuestOs::Windows)).expect("patch")
}

/// Lines of `after` that `before` does not have (a multiset difference, in order).
fn added_lines<'a>(before: &str, after: &'a str) -> Vec<&'a str> {
    let mut pool: Vec<&str> = before.lines().collect();
    let mut out = Vec::new();
    for l in after.lines() {
        match pool.iter().position(|p| *p == l) {
            Some(i) => {
                pool.swap_remove(i);
            }
            None => out.push(l),
        }
    }
    out
}

/// The text of every element named `name` (any depth), in document order.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    doc.descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == name)
        .map(|n| xml[n.range()].to_string())
        .collect()
}

/// (vcpu, cpuset) of every `<vcpupin>`, the `<emulatorpin>` cpuset and the `<iothreadpin>`
/// (iothread, cpuset)s of a domain.
type Pins = (Vec<(u32, String)>, Option<String>, Vec<(u32, String)>);

fn pins(xml: &str) -> Pins {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    let Some(ct) = doc.descendants().find(|n| n.has_tag_name("cputune")) else {
        return (vec![], None, vec![]);
    };
    let attr = |n: &roxmltree::Node, k: &str| n.attribute(k).unwrap_or("").to_string();
    let num = |n: &roxmltree::Node, k: &str| n.attribute(k).and_then(|v| v.parse().ok());
    let mut v = Vec::new();
    let mut io = Vec::new();
    let mut emu = None;
    for c in ct.children().filter(|c| c.is_element()) {
        match c.tag_name().name() {
            "vcpupin" => v.push((num(&c, "vcpu").expect("vcpu"), attr(&c, "cpuset"))),
            "emulatorpin" => emu = Some(attr(&c, "cpuset")),
            "iothreadpin" => io.push((num(&c, "iothread").expect("iothread"), attr(&c, "cpuset"))),
            _ => {}
        }
    }
    (v, emu, io)
}

/// The pins the plan makes for a domain with iothreads `ids`.
fn plan_pins(p: &Plan, ids: &[u32]) -> Pins {
    let mut v: Vec<(u32, String)> = p
        .vcpus
        .iter()
        .map(|x| (x.vcpu, x.cpu.to_string()))
        .collect();
    v.sort();
    let emu = (!p.emulator_cpus.is_empty()).then(|| p.emulator_cpus.to_list_string());
    let io_set = if p.iothread_cpus.is_empty() {
        &p.emulator_cpus
    } else {
        &p.iothread_cpus
    };
    let io = ids
        .iter()
        .map(|id| (*id, io_set.to_list_string()))
        .collect();
    (v, emu, io)
}

fn iothread_count(xml: &str) -> u32 {
    elements(xml, "iothreads")
        .first()
        .and_then(|e| {
            e.trim_start_matches("<iothreads>")
                .trim_end_matches("</iothreads>")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn validates(xml: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("d.xml");
    std::fs::write(&path, xml).expect("write");
    std::process::Command::new("virt-xml-validate")
        .arg(&path)
        .arg("domain")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn every_public_domain_is_patched_right_with_every_plan() {
    let have_validator = testkit::which("virt-xml-validate").is_some();
    let have_virsh = testkit::which("virsh").is_some();
    let mut checked = 0;
    for d in DOMAINS {
        let base = common::read(d);
        domain_choices(&base).unwrap_or_else(|e| panic!("{d}: {e}"));
        let base_valid = have_validator && validates(&base);
        let base_defines = have_virsh && common::virsh_define(&base).is_ok();
        let ids: Vec<u32> = (1..=iothread_count(&base)).collect();
        for (pname, p) in plans() {
            let what = format!("{d} with {pname}");
            let r = patch(&base, &p).unwrap_or_else(|e| panic!("{what}: {e}"));
            let out = &r.xml;

            // bytes outside what vmtune owns, the final newline, the hostdevs
            assert_eq!(
                common::without_owned(&base),
                common::without_owned(out),
                "{what}: bytes outside the owned elements changed"
            );
            assert_eq!(base.ends_with('\n'), out.ends_with('\n'), "{what}");
            assert_eq!(
                elements(&base, "hostdev"),
                elements(out, "hostdev"),
                "{what}"
            );
            assert_eq!(patch(out, &p).expect("again").xml, *out, "{what}: twice");

            // the plan's pins, and the domain's iothreads (ids 1..=N) all pinned
            assert_eq!(pins(out), plan_pins(&p, &ids), "{what}:\n{out}");
            assert_eq!(iothread_count(out), iothread_count(&base), "{what}");

            // indented as the file is: no tab where the file has none, and in a file without
            // tabs every added line at a multiple of its unit (two spaces in all of these)
            let tabs = base.contains('\t');
            for l in added_lines(&base, out) {
                let ind = &l[..l.len() - l.trim_start().len()];
                if !tabs {
                    assert!(
                        !ind.contains('\t') && ind.len() % 2 == 0 && !ind.is_empty(),
                        "{what}: {l:?}"
                    );
                }
                assert!(
                    !(ind.contains('\t') && ind.contains(' ')),
                    "{what}: tabs and spaces in one indentation: {l:?}\n{out}"
                );
            }

            // libvirt: the schema, and the test driver's reading of the pins
            if base_valid {
                common::validate(out, &what);
            }
            if base_defines {
                let dumped = common::virsh_define(out)
                    .unwrap_or_else(|e| panic!("{what}: libvirt refuses it: {e}\n{out}"));
                let (v, emu, _) = pins(&dumped);
                let (pv, pemu, _) = plan_pins(&p, &ids);
                assert_eq!((v, emu), (pv, pemu), "{what}:\n{dumped}");
                let after = domain_choices(&dumped).expect("dumped");
                assert_eq!(after.vcpus, Some(p.vcpus.len() as u32), "{what}");
                assert!(after.vcpus_offline.is_empty(), "{what}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, DOMAINS.len() * 3);
}

fn warned(r: &Patched, words: &str) -> bool {
    r.plan.warnings.iter().any(|w| w.contains(words))
}

fn said(r: &Patched, words: &str) -> bool {
    r.plan.rationale.iter().any(|w| w.contains(words))
}

#[test]
fn threadripper_guide_timers_are_said_and_its_cell_and_cache_stay() {
    let r = patched("public4/tr_numa_cell_iothreads.xml");
    // the user's rtc delay / pit catchup / hpet on: each override is a warning
    for t in ["timer rtc:", "timer pit:", "timer hpet:"] {
        assert!(warned(&r, t), "{t}: {:?}", r.plan.warnings);
    }
    for kept in [
        "<vendor_id state='on' value='none'/>",
        "<cache level='3' mode='emulate'/>",
        "<feature policy='require' name='topoext'/>",
        "<hidden state='on'/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    // its one guest cell stays, holding the plan's vCPUs and memory
    assert!(r
        .xml
        .contains("<cell id='0' cpus='0-11' memory='16777216' unit='KiB'/>"));
    assert_eq!(r.xml.matches("<iothreadpin ").count(), 3);
}

#[test]
fn kvm_off_on_the_qemu_command_line_is_said_and_host_model_in_the_rationale() {
    let base = common::read("public4/i440fx_host_model_cmdline_kvm_off.xml");
    let r = patched("public4/i440fx_host_model_cmdline_kvm_off.xml");
    assert!(warned(&r, "-cpu host,kvm=off"), "{:?}", r.plan.warnings);
    assert!(said(&r, "CPU mode 'host-model'"), "{:?}", r.plan.rationale);
    assert_eq!(
        elements(&base, "commandline"),
        elements(&r.xml, "commandline")
    );
    assert!(r
        .xml
        .contains("<vendor_id state='on' value='0f1e2d3c4b5a'/>"));
    assert!(r.xml.contains("<vmport state='off'/>"));
    assert!(!r.xml.contains("<model fallback='allow'/>"));
}

#[test]
fn laptop_offline_vcpus_are_said_and_its_amd_features_stay() {
    let r = patched("public4/laptop_offline_vcpus_lookingglass.xml");
    assert!(
        warned(&r, "starts 12 of its 16 vCPUs"),
        "{:?}",
        r.plan.warnings
    );
    for kept in [
        "<feature policy='disable' name='amd-stibp'/>",
        "<feature policy='require' name='topoext'/>",
        "<cache mode='passthrough'/>",
        "<vendor_id state='on' value='1A2B3C4D'/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    let block = &elements(&r.xml, "vcpus")[0];
    assert!(!block.contains("enabled='no'"), "{block}");
    assert!(!r.xml.contains(" current="), "{}", r.xml);
}

#[test]
fn hidden_hypervisor_bit_stays_hidden_with_its_avic_and_invtsc() {
    for f in [
        "public4/clusters_avic_hidden_hypervisor.xml",
        "public4/hugepages_nosize_locked_i440fx.xml",
        "public4/anti_detection_memfd_identity_pins.xml",
    ] {
        let r = patched(f);
        let after = domain_choices(&r.xml).expect("choices");
        assert_eq!(after.hypervisor_policy.as_deref(), Some("disable"), "{f}");
        assert_eq!(after.invtsc_policy.as_deref(), Some("require"), "{f}");
        assert!(warned(&r, "anti-cheat"), "{f}: {:?}", r.plan.warnings);
    }
    let r = patched("public4/clusters_avic_hidden_hypervisor.xml");
    assert!(r.xml.contains("<avic state='on'/>"));
    assert!(r.xml.contains("<vendor_id state='on' value='r4nd0mv3nd'/>"));
    // the anti-detection setup's enlightenments turned off, its Hyper-V clock off and its
    // PMU off, as it wrote them
    let r = patched("public4/anti_detection_memfd_identity_pins.xml");
    for kept in [
        "<relaxed state=\"off\"/>",
        "<timer name=\"hypervclock\" present=\"no\"/>",
        "<pmu state=\"off\"/>",
        "<source type=\"memfd\"/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
}

#[test]
fn memfd_and_shared_access_stay_next_to_the_plans_hugepages() {
    let r = patched("public4/memfd_virtiofs_partial_hyperv.xml");
    assert!(r.xml.contains(
        "<memoryBacking>\n    <source type='memfd'/>\n    <access mode='shared'/>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n    </hugepages>\n  </memoryBacking>"
    ), "{}", r.xml);
    // its three enlightenments verbatim, the plan's after them; migratable='on' said
    assert!(r.xml.contains(
        "<relaxed state='on'/>\n      <vapic state='on'/>\n      <spinlocks state='on' retries='8191'/>\n      <vpindex state='on'/>"
    ));
    assert!(said(&r, "migratable='on'"), "{:?}", r.plan.rationale);
}

#[test]
fn hugepages_without_a_size_keep_locked_and_the_users_timers() {
    let r = patched("public4/hugepages_nosize_locked_i440fx.xml");
    assert!(r.xml.contains(
        "<memoryBacking>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n    </hugepages>\n    <locked/>\n  </memoryBacking>"
    ), "{}", r.xml);
    // the host's default page is 2 MiB: no warning about a page size
    assert!(!warned(&r, "pages (<hugepages>)"), "{:?}", r.plan.warnings);
    assert!(warned(&r, "timer pit:"), "{:?}", r.plan.warnings);
    for kept in [
        "<timer name='rtc' tickpolicy='catchup' track='guest'/>",
        "<timer name='tsc' present='yes' mode='native'/>",
        "<timer name='kvmclock' present='no'/>",
        "<apic eoi='on'/>",
        "<ioapic driver='kvm'/>",
        "<feature policy='disable' name='monitor'/>",
        "<cache level='3' mode='emulate'/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    assert_eq!(r.xml.matches("<iothreadpin ").count(), 2);
}

#[test]
fn custom_epyc_model_and_timers_turned_off_are_warned() {
    let r = patched("public4/epyc_model_timers_off.xml");
    assert!(warned(&r, "CPU mode 'custom'"), "{:?}", r.plan.warnings);
    assert!(warned(&r, "timer rtc:") && warned(&r, "timer pit:"));
    assert!(!r.xml.contains("EPYC-Rome"));
    for kept in [
        "<hint-dedicated state=\"on\"/>",
        "<evmcs state=\"off\"/>",
        "<reenlightenment state=\"off\"/>",
        "<timer name=\"kvmclock\" present=\"no\"/>",
        "<timer name=\"tsc\" present=\"yes\" mode=\"native\"/>",
        "<feature policy=\"require\" name=\"topoext\"/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
}

#[test]
fn blocks_pasted_with_tabs_get_tabbed_lines() {
    // a virsh dumpxml (two spaces) whose <vcpus>, <cputune>, <cpu>, and the insides of
    // <memoryBacking> and <features>, were pasted from a guide written with tabs
    let base = common::read("public4/virsh_with_tab_pasted_blocks.xml");
    let r = patched("public4/virsh_with_tab_pasted_blocks.xml");
    for want in [
        // inside the tab-indented children of a space-indented element: tabs
        "\t<access mode=\"shared\"/>\n\t<hugepages>\n\t\t<page size=\"2048\" unit=\"KiB\"/>\n\t</hugepages>\n  </memoryBacking>",
        "\t<apic/>\n\t<hyperv mode=\"custom\">\n\t\t<relaxed state=\"on\"/>",
        "\t</hyperv>\n\t<kvm>\n\t\t<hidden state=\"on\"/>\n\t</kvm>\n\t<smm state=\"on\"/>\n  </features>",
        // the <vcpus> block rewritten whole: where it was, as it was indented
        "\t<vcpus>\n\t\t<vcpu id=\"0\" enabled=\"yes\" hotpluggable=\"no\"/>",
        "\t\t<vcpu id=\"11\" enabled=\"yes\" hotpluggable=\"yes\"/>\n\t</vcpus>\n\t<cputune>",
        // the tab-indented blocks themselves
        "\t<cputune>\n\t\t<vcpupin vcpu=\"0\" cpuset=",
        "\t\t<feature policy='require' name='invtsc'/>\n\t</cpu>  \n",
    ] {
        assert!(r.xml.contains(want), "{want:?}\n{}", r.xml);
    }
    // the comments of the pasted <cpu> block stay where they were
    for c in [
        "<!-- Set the cpu mode to passthrough -->",
        "<!-- 6c/12t, of which 2c/4t are disabled to keep the L3 groups -->",
        "<!-- Required for the AMD CPUs -->",
    ] {
        assert!(r.xml.contains(c), "{c}\n{}", r.xml);
    }
    // no line vmtune adds mixes tabs and spaces; new top-level elements (<numatune>, here)
    // follow the file's two spaces
    for l in added_lines(&base, &r.xml) {
        let ind = &l[..l.len() - l.trim_start().len()];
        assert!(
            !ind.contains(' ') || (!ind.contains('\t') && ind.len() % 2 == 0),
            "{l:?}\n{}",
            r.xml
        );
    }
    assert!(r
        .xml
        .contains("  <numatune>\n    <memory mode=\"strict\" nodeset=\"0\"/>\n  </numatune>"));
    assert!(
        warned(&r, "starts 8 of its 12 vCPUs"),
        "{:?}",
        r.plan.warnings
    );
}

#[test]
fn live_nova_and_kubevirt_dumps_keep_what_their_managers_wrote() {
    let r = patched("public4/nova_live_gpu_instance.xml");
    assert!(r.xml.starts_with("<domain type='kvm' id='317'>"));
    for kept in [
        "<shares>8192</shares>",
        "<entry name='product'>OpenStack Nova</entry>",
        "<seclabel type='dynamic' model='apparmor' relabel='yes'>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    let r = patched("public4/kubevirt_hugepages_per_node.xml");
    for kept in [
        "<source type='memfd'/>",
        "<allocation mode='immediate'/>",
        "<hostdev mode='subsystem' type='pci' managed='no'>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
}

#[test]
fn a_guest_numa_layout_the_plan_folds_is_warned() {
    // KubeVirt wrote two guest cells (one per host node of its VMI): the built-in desktop's
    // plan shows the guest one, and the user must hear that the layout changed
    let r = patched("public4/kubevirt_hugepages_per_node.xml");
    assert_eq!(r.xml.matches("<cell ").count(), 1, "{}", r.xml);
    assert!(
        warned(&r, "2 guest NUMA cells"),
        "the guest's two cells became one without a word: {:?}",
        r.plan.warnings
    );
    // one cell kept as one: nothing to say
    let r = patched("public4/tr_numa_cell_iothreads.xml");
    assert!(!warned(&r, "guest NUMA cell"), "{:?}", r.plan.warnings);
}

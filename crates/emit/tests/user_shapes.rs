//! More shapes of domains users publish, each a defect the patch once had: a comment at
//! column 0 before indented elements with most attributes single-quoted, virtiofs with its
//! shared memory on a NUMA cell, memory hotplug (`<maxMemory>` + DIMMs), timers with
//! `track`/`<catchup>`, anonymous memory (TDX/SEV guides), `<qemu:commandline>` that passes its
//! own `-cpu`. Written for these tests in the shapes of published VFIO domains (no upstream
//! file is copied), patched with plans the real planner makes, and checked with libvirt's own
//! schema and test driver.

mod common;

use std::process::Command;

use emit::libvirt::{domain_choices, patch};
use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};

fn windows_plan(vcpus: u32) -> Plan {
    plan_for(vcpus, GuestOs::Windows, HugepagePolicy::Auto)
}

fn plan_for(vcpus: u32, os: GuestOs, hugepages: HugepagePolicy) -> Plan {
    let host = topo::builtin::default_host();
    let req = Request {
        name: Some("shape".into()),
        vcpus,
        memory_bytes: 16 << 30,
        devices: vec!["01:00.0".into()],
        profile: Profile::Gaming,
        os,
        hugepages,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    plan::plan(&req, &host, &[]).expect("plan")
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

/// `virsh -c test:///default define` + `dumpxml`: what libvirt keeps of the domain.
fn virsh_define(xml: &str, what: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("domain.xml");
    std::fs::write(&path, xml).expect("write");
    let name = domain_choices(xml)
        .expect("choices")
        .source
        .trim_start_matches("domain ")
        .trim_matches('"')
        .to_string();
    let out = Command::new("virsh")
        .args([
            "-q",
            "-c",
            "test:///default",
            &format!("define {}; dumpxml {name}", path.display()),
        ])
        .output()
        .expect("virsh must be installed (Debian: libvirt-clients)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: libvirt refuses it: {}{stdout}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn spliced_elements_follow_the_files_own_quotes_and_indentation() {
    // `<domain xmlns:qemu="..." type="kvm">` and a column-0 comment first, then 4-space
    // indentation and single quotes everywhere else (a hand-edited virsh dumpxml)
    let base = common::read("vfio/col0_comment_mostly_single.xml");
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let out = patch(&base, &windows_plan(12)).expect("patch").xml;
    let added = added_lines(&base, &out);
    assert!(!added.is_empty());
    for l in &added {
        assert!(
            !l.contains('"'),
            "double quotes in a single-quoted file: {l:?}\n{out}"
        );
        let indent = l.len() - l.trim_start().len();
        assert!(
            indent >= 4 && indent % 4 == 0 && l.starts_with(&" ".repeat(indent)),
            "not indented like the file (4 spaces per level): {l:?}\n{out}"
        );
    }
    // elements the plan would write the same stay byte for byte
    for kept in [
        "        <timer name='rtc' tickpolicy='catchup'/>",
        "        <timer name='hpet' present='no'/>",
        "            <vendor_id state='on' value='AuthenticAMD'/>",
    ] {
        assert!(out.contains(kept), "{kept}\n{out}");
    }
    common::validate(&out, "the patched fixture");
    virsh_define(&out, "the patched fixture");
}

#[test]
fn timers_keep_what_the_plan_does_not_set() {
    // rtc with `track='guest'` and a `<catchup>` policy, pit turned off, tsc in native mode
    let base = common::read("vfio/ryzen_memfd_virtiofs_timers.xml");
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let r = patch(&base, &windows_plan(12)).expect("patch");
    let dumped = virsh_define(&r.xml, "the patched fixture");
    for kept in [
        "<timer name='rtc' tickpolicy='catchup' track='guest'>",
        "<catchup threshold='123' slew='120' limit='10000'/>",
        "<timer name='tsc' present='yes' mode='native'/>",
        "<timer name='hpet' present='no'/>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
        assert!(dumped.contains(kept), "libvirt lost {kept}\n{dumped}");
    }
    // the plan's pit, with the user's `present='no'` turned on and said in a warning
    let after = domain_choices(&dumped).expect("dumped");
    let pit = after.timers.iter().find(|t| t.name == "pit").expect("pit");
    assert_eq!(pit.present, Some(true), "{dumped}");
    assert_eq!(pit.tickpolicy.as_deref(), Some("delay"), "{dumped}");
    assert!(
        r.plan.warnings.iter().any(|w| w.starts_with("timer pit:")),
        "{:?}",
        r.plan.warnings
    );
    common::validate(&r.xml, "the patched fixture");
    // 16 G is the plan's 16 GiB: the user's unit stays
    assert!(
        r.xml
            .contains("<memory unit='G'>16</memory>\n  <currentMemory unit='G'>16</currentMemory>"),
        "{}",
        r.xml
    );
    let mut p = windows_plan(12);
    p.request.memory_bytes = 8 << 30;
    let r = patch(&base, &p).expect("patch");
    assert!(
        r.xml.contains("<memory unit='KiB'>8388608</memory>"),
        "{}",
        r.xml
    );
}

/// Whether every byte of guest RAM is shared memory (what virtiofs and vhost-user need):
/// `<memoryBacking><access mode='shared'/>`, or every NUMA cell `memAccess='shared'`.
fn shared_memory(xml: &str) -> bool {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    let root = doc.root_element();
    fn el<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
        n.children()
            .find(|c| c.is_element() && c.tag_name().name() == name)
    }
    let backing = el(root, "memoryBacking")
        .and_then(|m| el(m, "access"))
        .and_then(|a| a.attribute("mode"))
        == Some("shared");
    let cells: Vec<_> = el(root, "cpu")
        .and_then(|c| el(c, "numa"))
        .map(|n| {
            n.children()
                .filter(|c| c.tag_name().name() == "cell")
                .collect()
        })
        .unwrap_or_default();
    backing
        || (!cells.is_empty()
            && cells
                .iter()
                .all(|c| c.attribute("memAccess") == Some("shared")))
}

#[test]
fn virtiofs_keeps_its_shared_memory_on_the_numa_cells() {
    // libvirt's virtiofs recipe with hugepages: memAccess='shared' on the one NUMA cell
    let base = common::read("vfio/virtiofs_hugepages_cell.xml");
    assert!(base.contains("type=\"virtiofs\"") && shared_memory(&base));
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let mut plans = vec![
        ("12 vCPUs, one cell".to_string(), windows_plan(12)),
        ("4 vCPUs, one cell".to_string(), windows_plan(4)),
    ];
    // and a plan that shows the guest two cells
    plans.push(("two cells".into(), common::plan("plan_membw_2node_1g.json")));
    for (what, p) in plans {
        let out = patch(&base, &p).expect("patch").xml;
        // libvirt's QEMU driver refuses to define virtiofs without it ("'virtiofs' requires
        // shared memory")
        assert!(shared_memory(&out), "{what}: shared memory lost\n{out}");
        let cells = out.matches("<cell ").count();
        assert_eq!(cells, p.guest_numa.len().max(1), "{what}\n{out}");
        common::validate(&out, &what);
        let dumped = virsh_define(&out, &what);
        assert!(
            shared_memory(&dumped),
            "{what}: libvirt dropped it\n{dumped}"
        );
        assert_eq!(
            patch(&out, &p).expect("again").xml,
            out,
            "{what}: not idempotent"
        );
    }
    // the rationale says why migratable='on' turned off
    let r = patch(&base, &windows_plan(12)).expect("patch");
    assert!(
        r.plan
            .rationale
            .iter()
            .any(|l| l.starts_with("CPU migratable='on'")),
        "{:?}",
        r.plan.rationale
    );
}

#[test]
fn two_shared_cells_become_the_plans_cells_and_keep_their_distances_only_when_the_same() {
    let base = "<domain type='kvm'>\n  <name>big</name>\n  <memory unit='GiB'>64</memory>\n  <vcpu placement='static'>16</vcpu>\n  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n  <cpu mode='host-passthrough'>\n    <numa>\n      <cell id='0' cpus='0-7' memory='32' unit='GiB' memAccess='shared' discard='yes'>\n        <distances>\n          <sibling id='0' value='10'/>\n          <sibling id='1' value='21'/>\n        </distances>\n      </cell>\n      <cell id='1' cpus='8-15' memory='32' unit='GiB' memAccess='shared' discard='yes'>\n        <distances>\n          <sibling id='0' value='21'/>\n          <sibling id='1' value='10'/>\n        </distances>\n      </cell>\n    </numa>\n  </cpu>\n  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n  </devices>\n</domain>\n";
    virsh_define(base, "the two-cell domain");
    // the same two cells: attributes and distances stay
    let two = common::plan("plan_membw_2node_1g.json");
    let out = patch(base, &two).expect("patch").xml;
    assert!(out.contains("<cell id='1' cpus='8-15' memory='33554432' unit='KiB' memAccess='shared' discard='yes'>\n        <distances>"), "{out}");
    assert_eq!(out.matches("<sibling ").count(), 4, "{out}");
    virsh_define(&out, "two cells");
    // one cell: its attributes stay, distances to a cell that is gone do not
    let out = patch(base, &plan_for(4, GuestOs::Linux, HugepagePolicy::Auto))
        .expect("patch")
        .xml;
    assert!(out.contains("<cell id='0' cpus='0-3' memory='16777216' unit='KiB' memAccess='shared' discard='yes'/>"), "{out}");
    assert!(
        !out.contains("<sibling") && !out.contains("id='1'"),
        "{out}"
    );
    virsh_define(&out, "one cell");
}

#[test]
fn memory_hotplug_keeps_a_numa_cell_and_counts_its_dimms() {
    // <maxMemory slots='16'> and a 4 GiB DIMM on cell 0, 8 of 16 vCPUs online
    let base = common::read("vfio/memory_hotplug_dimm.xml");
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let p = plan_for(8, GuestOs::Linux, HugepagePolicy::Auto);
    let r = patch(&base, &p).expect("patch");
    // libvirt's test driver refused the cell-less patch: "can't add memory backend as guest
    // has no NUMA nodes configured"
    let dumped = virsh_define(&r.xml, "the patched fixture");
    assert!(dumped.contains("<cell id='0' cpus='0-7'"), "{dumped}");
    assert!(dumped.contains("<memory model='dimm'>"), "{dumped}");
    // libvirt's QEMU driver adds the DIMM to <memory> (16 GiB of cells + 4 GiB); the
    // warning says so
    assert!(
        r.plan
            .warnings
            .iter()
            .any(|w| w.contains("4 GiB of <memory> devices") && w.contains("20 GiB")),
        "{:?}",
        r.plan.warnings
    );
    common::validate(&r.xml, "the patched fixture");
    // a plan that does not fit under <maxMemory> with the DIMM is refused, not written
    let small = base.replace(
        "<maxMemory slots='16' unit='KiB'>67108864</maxMemory>",
        "<maxMemory slots='16' unit='KiB'>18874368</maxMemory>",
    );
    let e = patch(&small, &p).unwrap_err().to_string();
    assert!(e.contains("<maxMemory>") && e.contains("raise"), "{e}");
}

#[test]
fn anonymous_memory_gets_no_hugepages_and_own_cpu_flags_are_said() {
    // an Intel TDX guide's domain with an H100: anonymous private memory, its own -cpu
    let base = common::read("vfio/tdx_anonymous_gpu.xml");
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let e = patch(&base, &plan_for(8, GuestOs::Linux, HugepagePolicy::Auto))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("<source type='anonymous'/>") && e.contains("--hugepages none"),
        "{e}"
    );
    let r = patch(&base, &plan_for(8, GuestOs::Linux, HugepagePolicy::None)).expect("4K");
    assert!(!r.xml.contains("<hugepages"), "{}", r.xml);
    assert!(r
        .xml
        .contains("<source type='anonymous'/>\n    <access mode='private'/>"));
    common::validate(&r.xml, "the patched fixture");
    virsh_define(&r.xml, "the patched fixture");
    assert!(
        r.plan
            .warnings
            .iter()
            .any(|w| w.contains("`-cpu host,-kvm-steal-time,pmu=off`")
                && w.contains("replaces the <cpu>")),
        "{:?}",
        r.plan.warnings
    );
    // the column-0 fixture's old-guide `-cpu host,hv_time,kvm=off,...` too
    let r = patch(
        &common::read("vfio/col0_comment_mostly_single.xml"),
        &windows_plan(12),
    )
    .expect("patch");
    assert!(
        r.plan
            .warnings
            .iter()
            .any(|w| w.contains("`-cpu host,hv_time,kvm=off,hv_vendor_id=null,-hypervisor`")),
        "{:?}",
        r.plan.warnings
    );
}

#[test]
fn a_live_dumpxml_with_its_own_page_size_and_cpu_model() {
    // `virsh dumpxml` of a running VM: id, aliases, seclabel; placement='auto' vCPUs and
    // memory, a custom Skylake model, 1 GiB pages, FIFO vCPU scheduling
    let base = common::read("vfio/live_dumpxml_custom_cpu_1g.xml");
    common::validate(&base, "the fixture");
    virsh_define(&base, "the fixture");
    let r = patch(&base, &windows_plan(8)).expect("patch");
    let w = r.plan.warnings.join("\n");
    assert!(w.contains("CPU mode 'custom'"), "{w}");
    // the builtin host has no free 1 GiB pages: the plan's 2 MiB, said
    assert!(
        w.contains("backs its memory with 1 GiB pages (<hugepages>); the plan uses 2 MiB")
            && w.contains("--hugepages 1G"),
        "{w}"
    );
    for kept in [
        "<description>Gaming VM &amp; streaming (Sunshine)</description>",
        "<nosharepages/>\n    <locked/>",
        "<vcpusched vcpus='0-7' scheduler='fifo' priority='1'/>",
        "<emulatorsched scheduler='fifo' priority='2'/>",
        "<vendor_id state='on' value='KVM Hv'/>",
        "<stimer state='on'>\n        <direct state='on'/>\n      </stimer>",
        "<seclabel type='dynamic' model='dac' relabel='yes'>",
    ] {
        assert!(r.xml.contains(kept), "{kept}\n{}", r.xml);
    }
    assert!(!r.xml.contains("placement='auto'"), "{}", r.xml);
    common::validate(&r.xml, "the patched fixture");
    virsh_define(&r.xml, "the patched fixture");
    // no warning when the page sizes agree
    let p = plan_for(8, GuestOs::Windows, HugepagePolicy::Size2M);
    let two_m = base.replace("size='1048576' unit='KiB'", "size='2' unit='M'");
    let r = patch(&two_m, &p).expect("patch");
    assert!(
        !r.plan
            .warnings
            .iter()
            .any(|w| w.contains("backs its memory")),
        "{:?}",
        r.plan.warnings
    );
}

#[test]
fn a_patch_that_tips_the_quote_style_is_still_idempotent() {
    // double quotes everywhere but 16 <vcpupin>s pasted from a guide in single quotes: the
    // first patch writes single quotes and removes 14 pins, so the patched file is mostly
    // double-quoted; patching it again must change nothing
    let base = common::read("vfio/double_quoted_with_pasted_pins.xml");
    virsh_define(&base, "the fixture");
    for p in [
        plan_for(2, GuestOs::Linux, HugepagePolicy::Auto),
        windows_plan(12),
    ] {
        let once = patch(&base, &p).expect("patch").xml;
        let twice = patch(&once, &p).expect("again").xml;
        assert_eq!(once, twice);
        common::validate(&once, "patched");
        virsh_define(&once, "patched");
    }
}

#[test]
fn a_disabled_invtsc_stays_disabled_and_the_plan_says_so() {
    // a user who disables invtsc (a migratable TSC, or one they distrust) keeps that choice:
    // before, the patch replaced the line with policy='require' without a word
    let base = common::read("vfio/migratable_invtsc_disabled.xml");
    common::validate(&base, "the fixture");
    let p = plan_for(4, GuestOs::Linux, HugepagePolicy::None);
    assert!(p.cpu_features.invtsc, "the built-in host's TSC is stable");
    let r = patch(&base, &p).expect("patch");
    assert!(
        r.xml.contains("<feature policy='disable' name='invtsc'/>"),
        "{}",
        r.xml
    );
    assert!(
        !r.xml.contains("policy='require' name='invtsc'"),
        "{}",
        r.xml
    );
    // the user's other features stay
    assert!(r.xml.contains("<feature policy='require' name='topoext'/>"));
    assert!(!r.plan.cpu_features.invtsc && r.plan.cpu_features.invtsc_disabled);
    let said = r.plan.rationale.join("\n");
    assert!(said.contains("invtsc stays disabled as"), "{said}");
    assert!(!said.contains("invtsc exposed"), "{said}");
    assert!(said.contains("CPU migratable='on'"), "{said}");
    common::validate(&r.xml, "the patched fixture");
    virsh_define(&r.xml, "the patched fixture");
    assert_eq!(
        patch(&r.xml, &p).expect("again").xml,
        r.xml,
        "not idempotent"
    );
    // the other emitters of the adopted plan say the same
    assert!(emit::qemu::command_line(&r.plan).contains(",-invtsc"));
}

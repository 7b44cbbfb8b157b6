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
}

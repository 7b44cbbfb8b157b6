//! Domains in the shapes VFIO users publish (Windows gaming VMs with hostdevs,
//! `<qemu:commandline>`, comment headers, 2/4/1-space indents, single and double quotes, no
//! final newline, `<vcpu current=…>` with a `<vcpus>` block, vendor_id variants, `<hyperv
//! mode='passthrough'>`, the hypervisor bit disabled), written for these tests, patched with
//! plans the real planner makes on the VFIO gaming-host write-up's desktop, then defined and
//! dumped by libvirt's own test driver (`virsh -c test:///default`).
//!
//! Checked for every domain × plan: the plan's vCPU count is what libvirt starts; the user's
//! Hyper-V settings, hidden KVM signature and hypervisor-bit policy read back unchanged; a
//! warning exists wherever the plan overrides the user (vCPUs kept offline, timers); bytes
//! outside the owned elements, and the final newline, are unchanged; a domain that validated
//! still validates; no `<iothreads>` appears where there was none; patching twice changes
//! nothing.

mod common;

use std::process::Command;

use emit::libvirt::{domain_choices, patch};
use plan::{DomainChoices, GuestOs, HugepagePolicy, Plan, Profile, Request};

const DOMAINS: &[&str] = &[
    "vfio/gaming_nvidia_qemu_commandline.xml",
    "vfio/ryzen_vcpus_current.xml",
    "vfio/anticheat_hidden_hypervisor.xml",
    "vfio/passthrough_one_space.xml",
    "vfio/mixed_quotes_no_vendor.xml",
];

fn plans() -> Vec<(String, Plan)> {
    let host = topo::builtin::default_host();
    let mut out = Vec::new();
    for (vcpus, os) in [
        (12, GuestOs::Windows),
        (10, GuestOs::Windows),
        (8, GuestOs::Windows),
        (4, GuestOs::Windows7),
        (4, GuestOs::Linux),
    ] {
        let req = Request {
            name: Some("vfio".into()),
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
        let p = plan::plan(&req, &host, &[]).expect("plan");
        out.push((format!("{vcpus} vCPUs {os:?}"), p));
    }
    out
}

/// `virsh -c test:///default`: define the domain, dump it, count its vCPUs, in one session
/// (the test driver forgets everything between connections). Returns (dumpxml, maximum,
/// current).
fn virsh_round_trip(xml: &str, what: &str) -> (String, u32, u32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("domain.xml");
    std::fs::write(&path, xml).expect("write");
    let name = domain_choices(xml)
        .expect("choices")
        .source
        .trim_start_matches("domain ")
        .trim_matches('"')
        .to_string();
    let script = format!(
        "define {}; dumpxml {name}; vcpucount {name}",
        path.display()
    );
    let out = Command::new("virsh")
        .args(["-q", "-c", "test:///default", &script])
        .output()
        .expect("virsh must be installed (Debian: libvirt-clients)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: virsh failed: {}{stdout}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = stdout.find("<domain").expect("dumpxml output");
    let end = stdout.find("</domain>").expect("dumpxml end") + "</domain>".len();
    let count = |label: &str| -> u32 {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{what}: no '{label}' in vcpucount:\n{stdout}"))
    };
    (
        stdout[start..end].to_string(),
        count("maximum"),
        count("current"),
    )
}

fn validates(xml: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("d.xml");
    std::fs::write(&path, xml).expect("write");
    Command::new("virt-xml-validate")
        .arg(&path)
        .arg("domain")
        .output()
        .expect("virt-xml-validate must be installed (Debian: libvirt-clients)")
        .status
        .success()
}

fn timer_of<'a>(c: &'a DomainChoices, name: &str) -> Option<&'a plan::DomainTimer> {
    c.timers.iter().find(|t| t.name == name)
}

#[test]
fn users_domains_round_trip_through_libvirt() {
    let mut checked = 0;
    for d in DOMAINS {
        let base = common::read(d);
        let before = domain_choices(&base).expect("choices");
        let base_valid = validates(&base);
        // the input itself defines (else the test would prove nothing)
        virsh_round_trip(&base, d);
        for (pname, p) in plans() {
            let what = format!("{d} with {pname}");
            let patched = patch(&base, &p).expect("patch");
            let out = &patched.xml;
            let n = p.vcpus.len() as u32;

            // bytes, newline, schema, iothreads, idempotence
            assert_eq!(
                common::without_owned(&base),
                common::without_owned(out),
                "{what}: bytes outside the owned elements changed"
            );
            assert_eq!(base.ends_with('\n'), out.ends_with('\n'), "{what}");
            if base_valid {
                assert!(validates(out), "{what} no longer validates:\n{out}");
            }
            assert_eq!(
                base.contains("<iothreads>"),
                out.contains("<iothreads>"),
                "{what}"
            );
            assert_eq!(
                patch(out, &p).expect("again").xml,
                *out,
                "{what}: not idempotent"
            );

            // libvirt starts the plan's vCPUs, all of them
            let (dumped, max, current) = virsh_round_trip(out, &what);
            assert_eq!((max, current), (n, n), "{what}:\n{dumped}");
            let after = domain_choices(&dumped).expect("dumped choices");
            assert!(after.vcpus_offline.is_empty(), "{what}: {after:?}");

            // the user's Hyper-V settings, KVM signature and hypervisor bit, as libvirt keeps
            // them
            if before.hyperv_mode.is_some() {
                assert_eq!(after.hyperv_mode, before.hyperv_mode, "{what}");
            }
            for e in &before.hyperv {
                assert!(
                    after.hyperv.contains(e),
                    "{what}: lost {e:?}; now {:?}",
                    after.hyperv
                );
            }
            if before.kvm_hidden.is_some() {
                assert_eq!(after.kvm_hidden, before.kvm_hidden, "{what}");
            }
            if matches!(before.hypervisor_policy.as_deref(), Some("disable")) {
                assert_eq!(
                    after.hypervisor_policy.as_deref(),
                    Some("disable"),
                    "{what}"
                );
            }
            // the NVIDIA consumer GPU gets a vendor_id where the user set none
            let user_vendor = before.hyperv.iter().any(|e| e.name == "vendor_id");
            let bit_hidden = p.request.os == GuestOs::Windows7
                || before.hypervisor_policy.as_deref() == Some("disable");
            if p.request.os == GuestOs::Windows
                && !user_vendor
                && !bit_hidden
                && before.hyperv_mode.as_deref() != Some("passthrough")
            {
                let v = after.hyperv.iter().find(|e| e.name == "vendor_id");
                assert_eq!(
                    v.and_then(|e| e.value.as_deref()),
                    Some(plan::VENDOR_ID),
                    "{what}"
                );
                assert!(
                    patched
                        .plan
                        .rationale
                        .iter()
                        .any(|r| r.contains("vendor_id")),
                    "{what}"
                );
            }

            // a warning wherever the plan overrides the user
            let warnings = patched.plan.warnings.join("\n");
            let offline = before.vcpus_current.is_some_and(|c| Some(c) < before.vcpus)
                || !before.vcpus_offline.is_empty();
            if offline {
                assert!(warnings.contains("vCPUs ("), "{what}: {warnings}");
            }
            for t in &before.timers {
                let now = timer_of(&after, &t.name);
                let changed = match now {
                    Some(u) => {
                        (t.present.is_some() && u.present.is_some() && t.present != u.present)
                            || (t.tickpolicy.is_some()
                                && u.tickpolicy.is_some()
                                && t.tickpolicy != u.tickpolicy)
                    }
                    None => false,
                };
                if changed {
                    assert!(
                        warnings.contains(&format!("timer {}", t.name)),
                        "{what}: timer {} changed without a warning: {warnings}",
                        t.name
                    );
                }
            }
            if before.hypervisor_policy.as_deref() == Some("disable")
                && p.request.os == GuestOs::Windows
            {
                assert!(warnings.contains("anti-cheat"), "{what}: {warnings}");
                assert!(
                    !patched
                        .plan
                        .rationale
                        .iter()
                        .any(|r| r.contains("stays visible")),
                    "{what}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, DOMAINS.len() * 5);
}

#[test]
fn current_and_vcpus_block_give_way_to_the_plans_count() {
    let base = common::read("vfio/ryzen_vcpus_current.xml");
    for (pname, p) in plans() {
        let out = patch(&base, &p).expect("patch").xml;
        let n = p.vcpus.len();
        assert!(!out.contains("current="), "{pname}");
        assert!(!out.contains("enabled='no'"), "{pname}");
        assert_eq!(out.matches("<vcpu id=").count(), n, "{pname}:\n{out}");
        // the user's hotpluggable flags stay for the ids that remain
        assert!(out.contains("<vcpu id='0' enabled='yes' hotpluggable='no'/>"));
        assert!(out.contains("<vcpu id='1' enabled='yes' hotpluggable='yes'/>"));
        // 4-space indentation carries into the rewritten block
        assert!(out.contains("\n    <vcpus>\n        <vcpu id='0'"), "{out}");
    }
}

#[test]
fn passthrough_and_user_enlightenments_stay_byte_identical() {
    let base = common::read("vfio/passthrough_one_space.xml");
    let (_, p) = plans().remove(0);
    let out = patch(&base, &p).expect("patch").xml;
    let hv = |s: &str| s[s.find(" <hyperv").unwrap()..s.find("</hyperv>").unwrap()].to_string();
    assert_eq!(hv(&base), hv(&out));
    let base = common::read("vfio/gaming_nvidia_qemu_commandline.xml");
    let out = patch(&base, &p).expect("patch").xml;
    assert_eq!(hv(&base), hv(&out));
    assert!(out.contains("<qemu:commandline>") && out.contains("grab_all=on"));
    assert!(out.starts_with("<!--\nWARNING: THIS IS AN AUTO-GENERATED FILE."));
}

#[test]
fn plan_fills_in_around_the_users_enlightenments() {
    let base = common::read("vfio/mixed_quotes_no_vendor.xml");
    let (_, p) = plans().remove(0);
    let r = patch(&base, &p).expect("patch");
    // the user's three, verbatim, with their odd quoting and retries
    assert!(r.xml.contains(
        "<relaxed state='on'/>\n      <vapic state=\"on\"/>\n      <spinlocks state='on' retries='4096'/>"
    ));
    // then the plan's, in the quote most of the document uses (27 double, 25 single)
    for add in [
        "<vpindex state=\"on\"/>",
        "<vendor_id state=\"on\" value=\"vmtune\"/>",
    ] {
        assert!(r.xml.contains(add), "{add}:\n{}", r.xml);
    }
    assert!(r
        .plan
        .cpu_features
        .hyperv
        .contains(&"spinlocks=4096".to_string()));
    // its two iothreads, used by its disks, are pinned; none added
    assert!(r.xml.contains("<iothreads>2</iothreads>"));
    assert_eq!(r.xml.matches("<iothreadpin ").count(), 2);
}

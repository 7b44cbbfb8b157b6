//! The host's architecture: the x86-only guest features (invtsc, Hyper-V enlightenments,
//! kvmclock and the RTC/PIT/HPET tick policies, the hidden hypervisor CPUID bit and KVM
//! signature) are planned on x86 hosts and on hosts whose architecture is unknown, never on
//! another architecture: the POWER9 sysfs snapshot (hwloc's nvidiagpunumanodes, ppc64le) and
//! an aarch64 twin of a real x86 lstopo export.

mod common;

use plan::{CpuFeatures, GuestOs, HugepagePolicy, Plan, Profile, Request};
use topo::Host;

fn req(os: GuestOs) -> Request {
    Request {
        name: Some("vm".into()),
        vcpus: 4,
        memory_bytes: 4 * common::GIB,
        devices: vec![],
        profile: Profile::Compute,
        os,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    }
}

fn power9() -> Host {
    let p = common::topology_dir().join("../sysfs/nvidiagpunumanodes.tar.bz2");
    topo::load_path(&p).expect("POWER9 snapshot")
}

/// cts1-pascal.xml (lstopo 2.2 export of an x86_64 Xeon host) and the same file saying
/// `Architecture` aarch64.
fn x86_and_arm_twin() -> (Host, Host) {
    let p = common::topology_dir().join("cts1-pascal.xml");
    let x86 = topo::load_path(&p).expect("cts1-pascal.xml");
    let text = std::fs::read_to_string(&p).unwrap();
    let said = r#"<info name="Architecture" value="x86_64"/>"#;
    assert!(text.contains(said));
    let arm = topo::hwloc::parse_str(
        &text.replace(said, r#"<info name="Architecture" value="aarch64"/>"#),
        &p,
    )
    .expect("aarch64 twin");
    (x86, arm)
}

fn plan_on(host: &Host, os: GuestOs) -> Plan {
    plan::plan(&req(os), host, &[]).expect("plan")
}

#[test]
fn no_x86_features_on_power9() {
    let host = power9();
    assert_eq!(host.arch.as_deref(), Some("ppc64le"));
    for os in [GuestOs::Linux, GuestOs::Windows, GuestOs::Windows7] {
        let p = plan_on(&host, os);
        assert_eq!(p.cpu_features, CpuFeatures::default(), "{os:?}");
        assert!(
            p.rationale
                .iter()
                .any(|r| r.starts_with("no x86 CPU features") && r.contains("ppc64le")),
            "{os:?}: {:?}",
            p.rationale
        );
        assert!(
            !p.rationale.iter().any(|r| r.contains("invtsc not exposed")
                || r.contains("kvmclock, no Hyper-V")
                || r.starts_with("Windows")),
            "{os:?}: {:?}",
            p.rationale
        );
        // a Windows guest is told what it does not get
        let warned = p
            .warnings
            .iter()
            .any(|w| w.contains("none of the plan's Windows settings"));
        assert_eq!(warned, os != GuestOs::Linux, "{os:?}: {:?}", p.warnings);
    }
}

#[test]
fn the_same_host_says_aarch64_and_loses_only_the_x86_features() {
    let (x86, arm) = x86_and_arm_twin();
    assert_eq!(arm.arch.as_deref(), Some("aarch64"));
    let on_x86 = plan_on(&x86, GuestOs::Windows);
    let on_arm = plan_on(&arm, GuestOs::Windows);
    assert!(!on_x86.cpu_features.hyperv.is_empty());
    assert!(!on_x86.cpu_features.timers.is_empty());
    assert_eq!(on_arm.cpu_features, CpuFeatures::default());
    // placement is the architecture's business of no one: the same pins and memory
    assert_eq!(on_x86.vcpus, on_arm.vcpus);
    assert_eq!(on_x86.memory, on_arm.memory);
    assert_eq!(on_x86.guest_numa, on_arm.guest_numa);
}

#[test]
fn an_unknown_architecture_is_planned_as_before() {
    let (mut host, _) = x86_and_arm_twin();
    let with = plan_on(&host, GuestOs::Windows);
    host.arch = None;
    let without = plan_on(&host, GuestOs::Windows);
    assert_eq!(with.cpu_features, without.cpu_features);
    assert!(!without.cpu_features.hyperv.is_empty());
}

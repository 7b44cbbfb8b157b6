#![no_main]
//! libvirt domain XML: `tenant_from_domain_xml`, `domain_choices` and `patch` on arbitrary
//! input must return a value or an error, never panic; a patched domain must parse again,
//! keep every Hyper-V setting the input had, and patching it a second time must change
//! nothing; merging the domain's choices into a plan twice changes nothing more.
use libfuzzer_sys::fuzz_target;
use plan::{
    CpuFeatures, GuestNumaCell, GuestOs, GuestTopology, HugepagePolicy, IrqPlan, MemoryPlan, Plan,
    PlannedDevice, Profile, Request, Timer, VcpuPin,
};
use topo::CpuSet;

fn plan(windows: bool) -> Plan {
    let g = 1u64 << 30;
    Plan {
        request: Request {
            name: Some("fuzz".into()),
            vcpus: 4,
            memory_bytes: 4 * g,
            devices: vec!["0000:01:00.0".into()],
            profile: Profile::Gaming,
            os: if windows { GuestOs::Windows } else { GuestOs::Linux },
            hugepages: HugepagePolicy::Size2M,
            host_cpus: None,
            move_host_cpus: false,
            threads: plan::ThreadPolicy::Auto,
        },
        host_source: "fuzz".into(),
        vcpus: (0..4).map(|i| VcpuPin { vcpu: i, cpu: i + 2 }).collect(),
        threads: plan::Threads::Pack,
        idle_cpus: CpuSet::new(),
        emulator_cpus: CpuSet::parse_list("0").unwrap_or_default(),
        iothread_cpus: CpuSet::parse_list("1").unwrap_or_default(),
        host_cpus: CpuSet::parse_list("0-1").unwrap_or_default(),
        guest_topology: GuestTopology { sockets: 1, dies: 1, cores: 2, threads: 2 },
        guest_numa: vec![
            GuestNumaCell { cell: 0, vcpus: CpuSet::range(0, 2), memory_bytes: 2 * g, host_nodes: vec![0] },
            GuestNumaCell { cell: 1, vcpus: CpuSet::range(2, 4), memory_bytes: 2 * g, host_nodes: vec![1] },
        ],
        memory: MemoryPlan { host_nodes: vec![0, 1], hugepage_size_kb: 2048, pages: 2048, pages_per_node: vec![1024, 1024] },
        devices: vec![PlannedDevice { bdf: "0000:01:00.0".into(), kind: topo::DeviceKind::Gpu, numa: Some(vec![1]), iommu_group: None, guest_cell: Some(1) }],
        irq: IrqPlan { vfio_cpus: CpuSet::range(2, 6), host_cpus: CpuSet::range(0, 2) },
        cpu_features: CpuFeatures {
            hyperv: if windows { vec!["relaxed".into(), "spinlocks".into(), "synic".into(), "stimer".into(), "bogus".into()] } else { vec![] },
            hyperv_off: vec![],
            hyperv_passthrough: false,
            invtsc: true,
            invtsc_disabled: false,
            hide_hypervisor: false,
            kvm_hidden: windows,
            timers: vec![Timer { name: "hpet".into(), present: false, tickpolicy: None }],
        },
        vcpu_sched: None,
        rationale: vec![],
        warnings: vec![],
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = emit::libvirt::tenant_from_domain_xml(text);
    let p = plan(data.first().is_some_and(|b| b & 1 == 1));
    if let Ok(choices) = emit::libvirt::domain_choices(text) {
        let mut once = p.clone();
        plan::adopt_domain(&mut once, &choices);
        let mut twice = once.clone();
        plan::adopt_domain(&mut twice, &choices);
        assert_eq!(once, twice, "adopt_domain is not idempotent");
    }
    if let Ok(out) = emit::libvirt::patch(text, &p) {
        let again = emit::libvirt::patch_domain(&out.xml, &p);
        assert!(again.is_ok(), "patched output does not parse: {again:?}");
        assert_eq!(again.ok().as_deref(), Some(out.xml.as_str()), "patch is not idempotent");
        let _ = emit::libvirt::tenant_from_domain_xml(&out.xml);
        if let (Ok(before), Ok(after)) = (
            emit::libvirt::domain_choices(text),
            emit::libvirt::domain_choices(&out.xml),
        ) {
            for e in &before.hyperv {
                assert!(after.hyperv.contains(e), "lost {e:?}");
            }
        }
    }
});

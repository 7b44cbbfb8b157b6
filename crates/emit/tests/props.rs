//! Property tests: for any plan, patching a domain keeps every byte outside the owned
//! elements, is idempotent, and reads back as the plan's tenant.

mod common;

use plan::{GuestNumaCell, GuestTopology, MemoryPlan, Plan, VcpuPin};
use proptest::prelude::*;
use topo::CpuSet;

fn arb_plan() -> impl Strategy<Value = Plan> {
    let base = common::plan("plan_seed000_win10_gaming.json");
    (
        1u32..40,                                         // vCPUs
        proptest::collection::vec(0u32..256, 1..40),      // host CPUs for vCPUs
        proptest::collection::btree_set(0u32..256, 0..4), // emulator
        proptest::collection::btree_set(0u32..256, 0..3), // iothreads
        prop_oneof![Just(4u64), Just(2048u64), Just(1 << 20)],
        1u64..64,  // GiB
        0usize..4, // guest NUMA cells
        0usize..3, // os
        any::<(bool, bool, bool)>(),
    )
        .prop_map(
            move |(n, cpus, emu, io, page_kb, gib, cells, os, (invtsc, hide, kvm))| {
                let mut p = base.clone();
                p.request.vcpus = n;
                p.request.memory_bytes = gib << 30;
                p.request.os = [
                    plan::GuestOs::Linux,
                    plan::GuestOs::Windows,
                    plan::GuestOs::Windows7,
                ][os];
                p.vcpus = (0..n)
                    .map(|v| VcpuPin {
                        vcpu: v,
                        cpu: cpus[v as usize % cpus.len()],
                    })
                    .collect();
                p.emulator_cpus = emu.into_iter().collect();
                p.iothread_cpus = io.into_iter().collect();
                p.guest_topology = GuestTopology {
                    sockets: 1,
                    dies: 1,
                    cores: n,
                    threads: 1,
                };
                let cells = cells.min(n as usize);
                let per = (gib << 30) / cells.max(1) as u64;
                p.guest_numa = (0..cells)
                    .map(|c| GuestNumaCell {
                        cell: c as u32,
                        vcpus: (0..n)
                            .filter(|v| *v as usize % cells == c)
                            .collect::<CpuSet>(),
                        memory_bytes: per,
                        host_nodes: vec![c as u32],
                    })
                    .collect();
                if cells > 1 {
                    p.request.memory_bytes = per * cells as u64;
                }
                let nodes: Vec<u32> = (0..cells.max(1) as u32).collect();
                let (pages, per_node) = if page_kb == 4 {
                    (0, vec![0; nodes.len()])
                } else {
                    let size = page_kb * 1024;
                    let per_node: Vec<u64> = if cells > 1 {
                        p.guest_numa
                            .iter()
                            .map(|c| c.memory_bytes.div_ceil(size))
                            .collect()
                    } else {
                        vec![p.request.memory_bytes.div_ceil(size)]
                    };
                    (per_node.iter().sum(), per_node)
                };
                p.memory = MemoryPlan {
                    host_nodes: nodes,
                    hugepage_size_kb: page_kb,
                    pages,
                    pages_per_node: per_node,
                };
                p.cpu_features.invtsc = invtsc;
                p.cpu_features.hide_hypervisor = hide;
                p.cpu_features.kvm_hidden = kvm;
                p
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn patch_keeps_foreign_bytes_and_round_trips(p in arb_plan()) {
        for d in common::DOMAINS {
            let base = common::read(d);
            let out = emit::libvirt::patch_domain(&base, &p).expect("patch");
            prop_assert_eq!(common::without_owned(&base), common::without_owned(&out));
            let again = emit::libvirt::patch_domain(&out, &p).expect("patch again");
            prop_assert_eq!(&again, &out);
            let t = emit::libvirt::tenant_from_domain_xml(&out).expect("tenant");
            // iothreads are pinned only where the domain has some (none is ever added)
            let mut want = p.guest_cpus().union(&p.emulator_cpus);
            if out.contains("<iothreadpin") {
                want = want.union(if p.iothread_cpus.is_empty() {
                    &p.emulator_cpus
                } else {
                    &p.iothread_cpus
                });
            }
            prop_assert_eq!(t.cpus, want);
            let pages: u64 = t.hugepages.iter().map(|h| h.pages).sum();
            prop_assert_eq!(pages, p.memory.pages);
            prop_assert_eq!(out.matches("<vcpupin ").count(), p.vcpus.len());
        }
    }

    #[test]
    fn emitters_never_panic(p in arb_plan()) {
        let _ = emit::libvirt::domain_fragment(&p);
        let a = emit::qemu::args(&p);
        prop_assert!(a.len().is_multiple_of(2));
        let _ = emit::kata::config_toml(&p);
        let _ = emit::kata::pod_spec_yaml(&p);
        let _ = emit::kubevirt::vmi_fragment_yaml(&p);
    }
}

/// The fixtures, every one of the users' shapes, with lines removed or doubled: odd but often
/// well-formed domains (two `<hyperv>`s, a child twice, a lone start tag …).
fn arb_mangled_domain() -> impl Strategy<Value = String> {
    let mut all: Vec<String> = common::DOMAINS.iter().map(|d| common::read(d)).collect();
    for d in [
        "vfio/gaming_nvidia_qemu_commandline.xml",
        "vfio/ryzen_vcpus_current.xml",
        "vfio/anticheat_hidden_hypervisor.xml",
        "vfio/passthrough_one_space.xml",
        "vfio/mixed_quotes_no_vendor.xml",
    ] {
        all.push(common::read(d));
    }
    (
        0..all.len(),
        proptest::collection::vec((any::<bool>(), any::<prop::sample::Index>()), 0..4),
    )
        .prop_map(move |(i, edits)| {
            let mut lines: Vec<String> = all[i].split_inclusive('\n').map(str::to_string).collect();
            for (double, at) in edits {
                if lines.is_empty() {
                    break;
                }
                let k = at.index(lines.len());
                if double {
                    let l = lines[k].clone();
                    lines.insert(k, l);
                } else {
                    lines.remove(k);
                }
            }
            lines.concat()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// What the libvirt_domain fuzz target asserts, on mangled real shapes: no panic; a
    /// patched domain parses, keeps the user's Hyper-V settings and patches to itself; merging
    /// a domain's choices twice changes nothing more.
    #[test]
    fn mangled_domains_never_break_the_patch(xml in arb_mangled_domain(), windows in any::<bool>()) {
        let mut p = common::plan("plan_seed000_win10_gaming.json");
        if !windows {
            p.request.os = plan::GuestOs::Linux;
            p.cpu_features.hyperv.clear();
        }
        let _ = emit::libvirt::tenant_from_domain_xml(&xml);
        if let Ok(choices) = emit::libvirt::domain_choices(&xml) {
            let mut once = p.clone();
            plan::adopt_domain(&mut once, &choices);
            let mut twice = once.clone();
            plan::adopt_domain(&mut twice, &choices);
            prop_assert_eq!(&once, &twice);
        }
        if let Ok(out) = emit::libvirt::patch(&xml, &p) {
            let again = emit::libvirt::patch_domain(&out.xml, &p).expect("patched output parses");
            prop_assert_eq!(&again, &out.xml);
            let before = emit::libvirt::domain_choices(&xml).expect("choices");
            let after = emit::libvirt::domain_choices(&out.xml).expect("choices after");
            for e in &before.hyperv {
                prop_assert!(after.hyperv.contains(e), "lost {:?}", e);
            }
        }
    }
}

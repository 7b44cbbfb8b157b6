//! The loader on the machine running the tests (root `/`), checked against the same files
//! read independently here. CI runs on a KVM guest with virtio devices.

use std::collections::BTreeSet;
use std::path::Path;

/// `0-3,8` → numbers, without the crate's CpuSet.
fn parse_list(s: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => {
                out.insert(part.parse::<u32>().unwrap());
            }
        }
    }
    out
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// `/proc/irq/N/smp_affinity_list` of every IRQ directory.
fn irq_affinities() -> Vec<(u32, Option<BTreeSet<u32>>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        if let Ok(n) = e.file_name().to_string_lossy().parse::<u32>() {
            let aff = std::fs::read_to_string(format!("/proc/irq/{n}/smp_affinity_list"))
                .ok()
                .map(|s| parse_list(&s));
            out.push((n, aff));
        }
    }
    out.sort();
    out
}

#[test]
fn live_host_loads_and_matches_sysfs() {
    // Tests that move IRQs hold the host lock; so does this one while it compares. Other
    // software (irqbalance) may still move IRQs: compare affinities only where the
    // independent reads before and after loading agree.
    let _host = testkit::host_lock();
    let before = irq_affinities();
    let h = topo::load(None).expect("live host");
    let after = irq_affinities();
    let stable: Vec<(u32, BTreeSet<u32>)> = before
        .iter()
        .filter(|b| after.contains(b))
        .filter_map(|(n, a)| Some((*n, a.clone()?)))
        .collect();
    assert_eq!(h.source, "live:/");

    let online = parse_list(&read("/sys/devices/system/cpu/online"));
    let pus: BTreeSet<u32> = h.pus.iter().map(|p| p.os_index).collect();
    assert_eq!(pus, online, "PUs = online CPUs");
    assert!(h.cores.iter().all(|c| !c.pus.is_empty()));
    assert!(h.pus.iter().all(|p| p.l1d.is_some()), "every PU has an L1d");

    let hostname = read("/proc/sys/kernel/hostname");
    assert_eq!(h.name.as_deref(), Some(hostname.trim()));

    // the architecture is uname's machine
    let uname = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .unwrap();
    let machine = String::from_utf8_lossy(&uname.stdout).trim().to_string();
    assert_eq!(h.arch.as_deref(), Some(machine.as_str()));

    // NUMA: node0 exists whenever the kernel has NUMA support, with its memory
    if Path::new("/sys/devices/system/node/node0").exists() {
        let n0 = h.numa_node(0).expect("node0");
        assert!(n0.memory_bytes.unwrap() > 0);
        assert!(n0.hugepages.iter().any(|hp| hp.size_kb == 2048));
    }

    // PCI: the same functions and ids as a direct listing
    let mut listed = BTreeSet::new();
    for e in std::fs::read_dir("/sys/bus/pci/devices").unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let vendor = read(&format!("/sys/bus/pci/devices/{name}/vendor"));
        let device = read(&format!("/sys/bus/pci/devices/{name}/device"));
        let v = u16::from_str_radix(vendor.trim().trim_start_matches("0x"), 16).unwrap();
        let d = u16::from_str_radix(device.trim().trim_start_matches("0x"), 16).unwrap();
        listed.insert((name, Some(v), Some(d)));
    }
    let model: BTreeSet<(String, Option<u16>, Option<u16>)> = h
        .pci_devices
        .iter()
        .map(|d| (d.bdf.clone(), d.vendor_id, d.device_id))
        .collect();
    assert_eq!(model, listed);

    let cpuinfo = read("/proc/cpuinfo");
    let is_kvm_guest = cpuinfo.contains(" hypervisor")
        && std::fs::read_dir("/sys/bus/virtio/devices").is_ok_and(|mut d| d.next().is_some());
    let virtio: Vec<_> = h
        .pci_devices
        .iter()
        .filter(|d| d.vendor_id == Some(0x1af4))
        .collect();
    if is_kvm_guest {
        assert!(!virtio.is_empty(), "virtio PCI devices on a KVM guest");
        assert!(virtio
            .iter()
            .all(|d| d.driver.as_deref() == Some("virtio-pci")));
        assert!(virtio
            .iter()
            .any(|d| d.msi_irqs.as_ref().is_some_and(|m| !m.is_empty())));
    }

    // interrupts: one count column per online CPU, virtio MSI-X rows with readable affinity
    let t = h.interrupts.as_ref().expect("/proc/interrupts");
    assert_eq!(t.cpus.iter().copied().collect::<BTreeSet<u32>>(), online);
    let loc = t.irqs.iter().find(|i| i.id == "LOC").expect("LOC row");
    assert_eq!(loc.counts.len(), t.cpus.len());
    assert!(loc.total() > 0);
    if is_kvm_guest {
        let vio: Vec<_> = t
            .irqs
            .iter()
            .filter(|i| i.number.is_some() && i.actions.contains("virtio"))
            .collect();
        assert!(!vio.is_empty(), "virtio IRQs in /proc/interrupts");
        let with_aff: Vec<_> = vio.iter().filter(|i| i.affinity.is_some()).collect();
        assert!(
            !with_aff.is_empty(),
            "a virtio IRQ with a readable affinity"
        );
        let mut compared = 0;
        for i in with_aff {
            let n = i.number.unwrap();
            if let Some((_, want)) = stable.iter().find(|(m, _)| *m == n) {
                let got: BTreeSet<u32> = i.affinity.as_ref().unwrap().iter().collect();
                assert_eq!(&got, want, "IRQ {n} affinity");
                compared += 1;
            }
        }
        assert!(
            compared > 0,
            "no virtio IRQ affinity was stable long enough to compare"
        );
        // the MSI vectors of each virtio function appear in the interrupt table
        for d in &virtio {
            for v in d.msi_irqs.iter().flatten() {
                assert!(
                    t.irqs.iter().any(|i| i.number == Some(*v)),
                    "MSI {v} of {}",
                    d.bdf
                );
            }
        }
    }

    // x86: TSC stability is known from cpuinfo flags
    if cpuinfo.contains("vendor_id") {
        let flags_ok = cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc");
        let cs = read("/sys/devices/system/clocksource/clocksource0/available_clocksource");
        let tsc_listed = cs.split_whitespace().any(|c| c == "tsc");
        assert_eq!(h.tsc_stable, Some(flags_ok && tsc_listed));
    }

    // the JSON form reads back to the same model
    let json = serde_json::to_string(&h).unwrap();
    let back: topo::Host = serde_json::from_str(&json).unwrap();
    assert_eq!(back, h);
}

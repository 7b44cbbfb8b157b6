//! `irq wait`'s program on this kernel: it loads and attaches to its tracepoints, and the
//! interrupts a real KVM VM of this process is sent (KVM_SIGNAL_MSI into the in-kernel local
//! APIC) come back as accepts for the right VM, vCPU and vector. The vCPUs never run (these
//! machines' /dev/kvm cannot enter a guest), so every accept is still waiting at the end; the
//! pairing with guest entries is tested on recorded sequences (tests/data/irqwait-*.jsonl and
//! the unit tests).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use irqbal::wait::tracer::WaitTracer;
use irqbal::wait::{vms, Attribution, VcpuState, WaitBook, WaitEvent};

#[test]
fn accepts_of_a_real_vm_come_back_for_its_vcpus() {
    let name = testkit::current_test();
    let tracer = WaitTracer::open();
    let mut tracer = match tracer {
        Ok(t) => t,
        Err(e) => {
            testkit::skip(&name, format!("the program does not load here: {e}"));
            return;
        }
    };
    let vm = match testkit::kvm::Vm::new(2) {
        Ok(v) => v,
        Err(e) => {
            testkit::skip(&name, format!("no KVM VM can be created here: {e}"));
            return;
        }
    };
    let me = std::process::id();
    // the scan finds this process by its kvm-vm file
    let found: Vec<_> = vms::scan("/proc".as_ref(), "/sys".as_ref())
        .into_iter()
        .filter(|v| v.pid == me)
        .collect();
    assert_eq!(found.len(), 1, "this process holds a kvm-vm file");
    tracer.set_vms(&found, &BTreeMap::new()).unwrap();
    let sent = [(0u32, 0x31u8, 40usize), (1, 0x32, 25)];
    for &(dest, vec, n) in &sent {
        for _ in 0..n {
            vm.msi(dest, vec).unwrap();
        }
    }
    let mut mine = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while mine.len() < 65 && Instant::now() < deadline {
        tracer.poll(Duration::from_millis(50), |e| {
            if matches!(e, WaitEvent::Accept { vm, .. } if vm == me) {
                mine.push(e);
            }
        });
    }
    assert_eq!(mine.len(), 65, "every MSI sent is one accept");
    for &(dest, vec, n) in &sent {
        let got = mine
            .iter()
            .filter(|e| {
                matches!(**e, WaitEvent::Accept { vcpu, vector, dm: 0, by: Attribution::Thread,
                    state: VcpuState::Unknown, .. } if vcpu == dest && vector == vec)
            })
            .count();
        assert_eq!(got, n, "vCPU {dest}, vector {vec:#x}");
    }
    let c = tracer.counters();
    assert!(c.accepts >= 65, "{c:?}");
    let mut book = WaitBook::new();
    for e in &mine {
        book.push(e);
    }
    let r = book.report(None, &found);
    let vm_r = r.vms.iter().find(|v| v.pid == me).unwrap();
    let still: Vec<u64> = vm_r
        .vcpus
        .iter()
        .map(|v| v.still_waiting.as_ref().map_or(0, |w| w.count))
        .collect();
    assert_eq!(still, vec![40, 25], "no vCPU ever entered the guest");
    assert!(vm_r.total.is_empty(), "nothing paired: {:?}", vm_r.total);
}

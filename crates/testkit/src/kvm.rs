//! A real KVM VM for tests: an in-kernel irqchip and vCPUs that never run, to which MSIs can
//! be sent (KVM_SIGNAL_MSI), so that the host's KVM tracepoints fire for a VM of the test's
//! own process. It needs only /dev/kvm, not a guest that boots.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const KVM_CREATE_VM: libc::c_ulong = 0xae01;
const KVM_CREATE_IRQCHIP: libc::c_ulong = 0xae60;
const KVM_CREATE_VCPU: libc::c_ulong = 0xae41;
const KVM_SIGNAL_MSI: libc::c_ulong = 0x4020_aea5;
const KVM_GET_LAPIC: libc::c_ulong = 0x8400_ae8e;
const KVM_SET_LAPIC: libc::c_ulong = 0x4400_ae8f;
/// APIC_SPIV, the spurious-interrupt vector register: bit 8 enables the APIC in software.
const APIC_SPIV: usize = 0xf0;

#[repr(C)]
#[derive(Default)]
struct KvmMsi {
    address_lo: u32,
    address_hi: u32,
    data: u32,
    flags: u32,
    devid: u32,
    pad: [u8; 12],
}

/// A VM with an in-kernel irqchip and `n` vCPUs that never run.
pub struct Vm {
    vm: OwnedFd,
    _vcpus: Vec<OwnedFd>,
    _kvm: OwnedFd,
}

fn ioctl_fd(fd: libc::c_int, req: libc::c_ulong, arg: libc::c_ulong) -> std::io::Result<OwnedFd> {
    // SAFETY: these KVM ioctls take an integer argument and return a new descriptor.
    let r = unsafe { libc::ioctl(fd, req, arg) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: r is a descriptor the kernel just created for us.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

impl Vm {
    pub fn new(n: u32) -> std::io::Result<Vm> {
        let kvm = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")?;
        let kvm: OwnedFd = kvm.into();
        let vm = ioctl_fd(kvm.as_raw_fd(), KVM_CREATE_VM, 0)?;
        // SAFETY: KVM_CREATE_IRQCHIP takes no argument.
        if unsafe { libc::ioctl(vm.as_raw_fd(), KVM_CREATE_IRQCHIP, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let vcpus = (0..n)
            .map(|i| ioctl_fd(vm.as_raw_fd(), KVM_CREATE_VCPU, i as libc::c_ulong))
            .collect::<std::io::Result<Vec<_>>>()?;
        // enable each local APIC in software, as a guest does at boot: KVM routes an MSI only
        // to an enabled APIC (the BSP aside)
        for v in &vcpus {
            let mut regs = [0u8; 1024];
            // SAFETY: KVM_GET_LAPIC / KVM_SET_LAPIC read and write one struct
            // kvm_lapic_state, 1024 bytes of register page.
            unsafe {
                if libc::ioctl(v.as_raw_fd(), KVM_GET_LAPIC, regs.as_mut_ptr()) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                regs[APIC_SPIV + 1] |= 1;
                if libc::ioctl(v.as_raw_fd(), KVM_SET_LAPIC, regs.as_ptr()) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(Vm {
            vm,
            _vcpus: vcpus,
            _kvm: kvm,
        })
    }

    /// A fixed, edge, physical-destination MSI to the vCPU with APIC id `dest`.
    pub fn msi(&self, dest: u32, vector: u8) -> std::io::Result<()> {
        let m = KvmMsi {
            address_lo: 0xfee0_0000 | (dest << 12),
            data: vector as u32,
            ..KvmMsi::default()
        };
        // SAFETY: KVM_SIGNAL_MSI reads one struct kvm_msi.
        let r = unsafe { libc::ioctl(self.vm.as_raw_fd(), KVM_SIGNAL_MSI, &m) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

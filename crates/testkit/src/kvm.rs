//! A real KVM VM for tests: an in-kernel irqchip and vCPUs that never run, to which MSIs can
//! be sent (KVM_SIGNAL_MSI), so that the host's KVM tracepoints fire for a VM of the test's
//! own process. It needs only /dev/kvm, not a guest that boots.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const KVM_CREATE_VM: libc::c_ulong = 0xae01;
const KVM_CREATE_IRQCHIP: libc::c_ulong = 0xae60;
const KVM_CREATE_VCPU: libc::c_ulong = 0xae41;
const KVM_RUN: libc::c_ulong = 0xae80;
const KVM_SET_USER_MEMORY_REGION: libc::c_ulong = 0x4020_ae46;

#[repr(C)]
struct MemoryRegion {
    slot: u32,
    flags: u32,
    guest_phys_addr: u64,
    memory_size: u64,
    userspace_addr: u64,
}

/// 64 KiB of `hlt` under the reset vector (0xFFFF_FFF0), so a vCPU that runs halts at once.
const ROM_BASE: u64 = 0xffff_0000;
const ROM_SIZE: usize = 0x1_0000;
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
    vcpus: Vec<OwnedFd>,
    rom: *mut libc::c_void,
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
        // SAFETY: a fresh anonymous mapping, page-aligned as KVM requires; unmapped on drop.
        let rom = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ROM_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if rom == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `rom` is ROM_SIZE writable bytes.
        unsafe { std::ptr::write_bytes(rom.cast::<u8>(), 0xf4, ROM_SIZE) };
        let region = MemoryRegion {
            slot: 0,
            flags: 0,
            guest_phys_addr: ROM_BASE,
            memory_size: ROM_SIZE as u64,
            userspace_addr: rom as u64,
        };
        // SAFETY: the region points at `rom`, which lives as long as the Vm.
        if unsafe { libc::ioctl(vm.as_raw_fd(), KVM_SET_USER_MEMORY_REGION, &region) } < 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: unmapping what was mapped above.
            unsafe { libc::munmap(rom, ROM_SIZE) };
            return Err(e);
        }
        Ok(Vm {
            vm,
            vcpus,
            rom,
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

    /// Run vCPU `i` in a thread named `CPU i/KVM` (as QEMU names its vCPU threads), which
    /// calls KVM_RUN (the guest halts at its first instruction, and the thread sleeps in the
    /// kernel as a halted vCPU's does) and, should KVM_RUN fail, sleeps on; the thread lives
    /// until the process ends. Returns its thread id.
    pub fn run_vcpu(&self, i: usize) -> std::io::Result<u32> {
        let fd = self
            .vcpus
            .get(i)
            .ok_or_else(|| std::io::Error::other(format!("no vCPU {i}")))?
            .try_clone()?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("CPU {i}/KVM"))
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() } as u32);
                // SAFETY: KVM_RUN takes no argument; the vCPU descriptor is owned here.
                while unsafe { libc::ioctl(fd.as_raw_fd(), KVM_RUN, 0) } >= 0 {}
                loop {
                    std::thread::park();
                }
            })?;
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| std::io::Error::other(format!("vCPU thread: {e}")))
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(); a vCPU thread still in KVM_RUN keeps the VM (and
        // its memory slot) alive through its own descriptor, but never touches this memory
        // again from user space.
        unsafe { libc::munmap(self.rom, ROM_SIZE) };
    }
}

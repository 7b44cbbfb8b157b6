//! The KVM VMs running on this host: every process holding a `kvm-vm` file descriptor, its name
//! (QEMU's `-name`, else the command), and the VFIO devices it holds (legacy group files
//! `/dev/vfio/N` and iommufd device files `/dev/vfio/devices/vfioX`), so that each VFIO vector
//! of `/proc/interrupts` can be tied to its VM.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// One VM process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmProc {
    pub pid: u32,
    pub name: String,
    /// PCI addresses of the VFIO devices it holds.
    pub vfio: Vec<String>,
}

/// The VM's name from its command line: QEMU's `-name guest=NAME,...` or `-name NAME`,
/// cloud-hypervisor's and Firecracker's `--id NAME`; `None` for anything else.
pub fn name_from_cmdline(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let val = match a.as_str() {
            "-name" | "--name" | "--id" => it.next(),
            _ => None,
        };
        if let Some(v) = val {
            let first = v.split(',').next().unwrap_or(v);
            let name = first.strip_prefix("guest=").unwrap_or(first);
            if !name.is_empty() {
                return Some(name.to_string());
            }
        }
    }
    None
}

/// Scan `proc_root` (normally `/proc`) for VM processes; `sys_root` (normally `/sys`) resolves
/// VFIO groups and device files to PCI addresses. Processes that vanish or cannot be read are
/// skipped.
pub fn scan(proc_root: &Path, sys_root: &Path) -> Vec<VmProc> {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ent in dir.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(ent.path().join("fd")) else {
            continue;
        };
        let mut is_vm = false;
        let mut vfio = Vec::new();
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            if t == "anon_inode:kvm-vm" {
                is_vm = true;
            } else if let Some(dev) = t.strip_prefix("/dev/vfio/devices/") {
                let link = sys_root.join("class/vfio-dev").join(dev).join("device");
                if let Some(bdf) = std::fs::read_link(link)
                    .ok()
                    .and_then(|l| l.file_name().map(|f| f.to_string_lossy().into_owned()))
                {
                    vfio.push(bdf);
                }
            } else if let Some(group) = t.strip_prefix("/dev/vfio/") {
                if group.parse::<u32>().is_ok() {
                    let devs = sys_root
                        .join("kernel/iommu_groups")
                        .join(group)
                        .join("devices");
                    if let Ok(d) = std::fs::read_dir(devs) {
                        vfio.extend(d.flatten().map(|e| e.file_name().to_string_lossy().into()));
                    }
                }
            }
        }
        if !is_vm {
            continue;
        }
        vfio.sort();
        vfio.dedup();
        let args: Vec<String> = std::fs::read(ent.path().join("cmdline"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let name = name_from_cmdline(&args).unwrap_or_else(|| {
            std::fs::read_to_string(ent.path().join("comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| format!("pid {pid}"))
        });
        out.push(VmProc { pid, name, vfio });
    }
    out.sort_by_key(|v| v.pid);
    out
}

/// Host IRQ → VM process, for the VFIO vectors of `table` whose device a VM holds.
pub fn irq_owners(table: &topo::InterruptTable, vms: &[VmProc]) -> BTreeMap<u32, u32> {
    crate::host::vfio_irqs(table)
        .into_iter()
        .filter_map(|v| {
            vms.iter()
                .find(|vm| vm.vfio.iter().any(|b| b == &v.bdf))
                .map(|vm| (v.irq, vm.pid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn names_come_from_the_command_line() {
        assert_eq!(
            name_from_cmdline(&args(
                "/usr/bin/qemu-system-x86_64 -name guest=win11,debug-threads=on -S"
            )),
            Some("win11".into())
        );
        assert_eq!(
            name_from_cmdline(&args("qemu-system-x86_64 -name kata-sb -m 2G")),
            Some("kata-sb".into())
        );
        assert_eq!(
            name_from_cmdline(&args("firecracker --id vm7 --api-sock /x")),
            Some("vm7".into())
        );
        assert_eq!(name_from_cmdline(&args("qemu -name")), None);
        assert_eq!(name_from_cmdline(&args("qemu -m 1G")), None);
    }

    #[test]
    fn a_process_holding_kvm_vm_and_a_vfio_group_is_found() {
        let d = tempfile::tempdir().unwrap();
        let proc_ = d.path().join("proc");
        let sys = d.path().join("sys");
        let p = proc_.join("4242");
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::fs::write(p.join("cmdline"), b"qemu\0-name\0guest=gpu,x=y\0").unwrap();
        std::os::unix::fs::symlink("anon_inode:kvm-vm", p.join("fd/5")).unwrap();
        std::os::unix::fs::symlink("/dev/vfio/12", p.join("fd/9")).unwrap();
        let g = sys.join("kernel/iommu_groups/12/devices");
        std::fs::create_dir_all(g.join("0000:01:00.0")).unwrap();
        std::fs::create_dir_all(g.join("0000:01:00.1")).unwrap();
        // a process without kvm-vm is not a VM
        let q = proc_.join("77");
        std::fs::create_dir_all(q.join("fd")).unwrap();
        std::os::unix::fs::symlink("/dev/null", q.join("fd/0")).unwrap();
        let vms = scan(&proc_, &sys);
        assert_eq!(
            vms,
            vec![VmProc {
                pid: 4242,
                name: "gpu".into(),
                vfio: vec!["0000:01:00.0".into(), "0000:01:00.1".into()],
            }]
        );
        let table = topo::interrupts::parse_proc_interrupts(
            "           CPU0       CPU1\n \
             120:         10          0  IR-PCI-MSIX-0000:01:00.0    0-edge      vfio-msix[0](0000:01:00.0)\n \
             121:          0          3  IR-PCI-MSIX-0000:02:00.0    0-edge      vfio-msix[0](0000:02:00.0)\n",
        )
        .unwrap();
        assert_eq!(irq_owners(&table, &vms), BTreeMap::from([(120, 4242)]));
    }
}

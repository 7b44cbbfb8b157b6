//! A throw-away copy of a domain for one measurement (`vmtune bench matrix`): the same CPU,
//! memory, NUMA, features and passed-through devices, under another name, booting vmtune's
//! measuring initramfs directly instead of the domain's disks, its results on a serial port
//! written to a file.
//!
//! What changes, and why:
//! - `<name>` is the scratch name; `<uuid>` goes (libvirt makes one), so the user's domain
//!   and its scratch copies never collide;
//! - `<os>` boots `<kernel>`/`<initrd>`/`<cmdline>` (the `<type>` kept: arch and machine);
//!   firmware, `<loader>` and `<nvram>` go — the copy never writes the user's NVRAM;
//! - `<acpi/>` and `<apic/>` are added where missing: without ACPI the guest kernel finds
//!   one CPU and no NUMA, and cannot power off;
//! - `<disk>`, `<filesystem>`, `<interface>`, `<serial>`, `<console>`, `<channel>`, `<tpm>`,
//!   `<redirdev>`, `<smartcard>` go: the initramfs reads none of them, and the user's images,
//!   networks and sockets stay untouched; two `<serial type='file'>` are added (console,
//!   results);
//! - `<on_poweroff>`, `<on_reboot>`, `<on_crash>` are `destroy`: the run ends when the guest
//!   stops, whichever way.
//!
//! Everything else — `<hostdev>`s, `<cputune>`, `<numatune>`, `<cpu>`, `<memoryBacking>`,
//! `<qemu:commandline>` — keeps its bytes.

use crate::xml::{merge, El, Style};
use crate::EmitError;

use super::read::{child, parse_doc};
use super::DOMAIN_ORDER;
use crate::values::scaled;

/// How the scratch copy boots and where it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scratch {
    pub name: String,
    pub kernel: String,
    pub initrd: String,
    pub cmdline: String,
    /// The guest's console (first serial port).
    pub console_file: String,
    /// The second serial port, where the measuring init writes its results.
    pub result_file: String,
}

/// Devices the scratch copy leaves out.
const DROPPED_DEVICES: &[&str] = &[
    "disk",
    "filesystem",
    "interface",
    "serial",
    "console",
    "channel",
    "tpm",
    "redirdev",
    "smartcard",
];

/// The scratch copy of `xml` described by `s`.
pub fn scratch_domain(xml: &str, s: &Scratch) -> Result<String, EmitError> {
    if s.name.trim().is_empty() || s.name.contains('/') {
        return Err(EmitError::Invalid(format!(
            "scratch domain name {:?} is not a libvirt domain name",
            s.name
        )));
    }
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let os_type = root
        .children()
        .find(|n| n.has_tag_name("os"))
        .and_then(|os| os.children().find(|n| n.has_tag_name("type")));
    let mut ty = El::new("type").text(
        os_type
            .and_then(|t| t.text())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or("hvm"),
    );
    if let Some(t) = os_type {
        for a in t.attributes() {
            ty = ty.attr(a.name(), a.value());
        }
    }
    let os = El::new("os")
        .kid(ty)
        .kid(El::new("kernel").text(&s.kernel))
        .kid(El::new("initrd").text(&s.initrd))
        .kid(El::new("cmdline").text(&s.cmdline));
    let features = El::new("features")
        .merged()
        .keep_start()
        .kid(El::new("acpi").soft())
        .kid(El::new("apic").soft());
    let serial = |port: u32, path: &str| {
        El::new("serial")
            .attr("type", "file")
            .kid(El::new("source").attr("path", path))
            .kid(El::new("target").attr("port", port))
    };
    let mut devices = El::new("devices")
        .merged()
        .keep_start()
        .kid(serial(0, &s.console_file))
        .kid(serial(1, &s.result_file));
    devices.drops = DROPPED_DEVICES.iter().map(|d| d.to_string()).collect();

    let mut dom = El::new("domain").merged().keep_start();
    dom.order = DOMAIN_ORDER;
    dom.drops.push("uuid".into());
    dom.push(El::new("name").text(&s.name));
    dom.push(os);
    dom.push(features);
    for ev in ["on_poweroff", "on_reboot", "on_crash"] {
        dom.push(El::new(ev).text("destroy"));
    }
    dom.push(devices);
    let st = Style::detect(xml, &root);
    let body = merge(xml, &root, &dom, &st, 0);
    let r = root.range();
    let mut out = String::with_capacity(xml.len() + 512);
    out.push_str(xml.get(..r.start).unwrap_or(""));
    out.push_str(&body);
    out.push_str(xml.get(r.end..).unwrap_or(""));
    Ok(out)
}

/// What a measurement matrix needs to know of a domain: the planner's request comes from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainShape {
    pub name: String,
    pub vcpus: u32,
    pub memory_bytes: u64,
    /// Passed-through PCI devices (normalized BDFs).
    pub devices: Vec<String>,
    /// Host CPUs the domain already pins something to (empty: libvirt's default).
    pub pinned: topo::CpuSet,
}

/// The domain's `<name>`, `<vcpu>` count, `<memory>`, hostdevs and pins.
pub fn domain_shape(xml: &str) -> Result<DomainShape, EmitError> {
    // the tenant reader has the name, the hostdevs and the pins
    let tenant = super::tenant_from_domain_xml(xml)?;
    let name = tenant.name;
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let memory = child(root, "memory")
        .ok_or_else(|| EmitError::Invalid(format!("domain {name} has no <memory>")))?;
    let memory_bytes = scaled(
        memory.text().unwrap_or(""),
        memory.attribute("unit"),
        1024,
        "<memory>",
    )?;
    let choices = super::domain_choices(xml)?;
    let vcpus = choices
        .vcpus
        .filter(|&v| v > 0)
        .ok_or_else(|| EmitError::Invalid(format!("domain {name} has no <vcpu> count")))?;
    Ok(DomainShape {
        name,
        vcpus,
        memory_bytes,
        devices: tenant.devices,
        pinned: tenant.cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Scratch {
        Scratch {
            name: "vmtune-matrix-win-pin-1".into(),
            kernel: "/run/k".into(),
            initrd: "/run/i".into(),
            cmdline: "console=ttyS0".into(),
            console_file: "/run/c.log".into(),
            result_file: "/run/r.txt".into(),
        }
    }

    const DOM: &str = "<domain type='kvm'>
  <name>win</name>
  <uuid>1b4e28ba-2fa1-11d2-883f-0016d3cca427</uuid>
  <memory unit='KiB'>4194304</memory>
  <vcpu placement='static'>4</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='2'/>
  </cputune>
  <os firmware='efi'>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE.fd</loader>
    <nvram>/var/lib/libvirt/qemu/nvram/win_VARS.fd</nvram>
    <boot dev='hd'/>
  </os>
  <features>
    <hyperv mode='custom'>
      <relaxed state='on'/>
    </hyperv>
  </features>
  <on_reboot>restart</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <source file='/var/lib/libvirt/images/win.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'>
      <source network='default'/>
    </interface>
    <serial type='pty'>
      <target port='0'/>
    </serial>
    <console type='pty'/>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
  </devices>
</domain>
";

    #[test]
    fn boots_the_initramfs_and_keeps_cpu_and_devices() {
        let out = scratch_domain(DOM, &s()).unwrap();
        let doc = roxmltree::Document::parse(&out).unwrap();
        let root = doc.root_element();
        let kid = |n: &str| root.children().find(|c| c.has_tag_name(n));
        assert_eq!(kid("name").unwrap().text(), Some("vmtune-matrix-win-pin-1"));
        assert!(kid("uuid").is_none());
        let os = kid("os").unwrap();
        let names: Vec<&str> = os
            .children()
            .filter(|c| c.is_element())
            .map(|c| c.tag_name().name())
            .collect();
        assert_eq!(names, ["type", "kernel", "initrd", "cmdline"]);
        assert_eq!(
            os.children()
                .find(|c| c.has_tag_name("type"))
                .unwrap()
                .attribute("machine"),
            Some("pc-q35-7.2")
        );
        assert!(os.attribute("firmware").is_none());
        for ev in ["on_poweroff", "on_reboot", "on_crash"] {
            assert_eq!(kid(ev).unwrap().text(), Some("destroy"), "{ev}");
        }
        let feats = kid("features").unwrap();
        assert!(feats.children().any(|c| c.has_tag_name("acpi")));
        assert!(feats.children().any(|c| c.has_tag_name("hyperv")));
        let devices = kid("devices").unwrap();
        for gone in ["disk", "interface", "console"] {
            assert!(!devices.children().any(|c| c.has_tag_name(gone)), "{gone}");
        }
        let serials: Vec<_> = devices
            .children()
            .filter(|c| c.has_tag_name("serial"))
            .collect();
        assert_eq!(serials.len(), 2);
        assert_eq!(serials[0].attribute("type"), Some("file"));
        assert!(out.contains("<source path='/run/r.txt'/>"), "{out}");
        assert!(devices.children().any(|c| c.has_tag_name("hostdev")));
        // the user's pins keep their bytes
        assert!(out.contains("    <vcpupin vcpu='0' cpuset='2'/>\n"));
        assert!(!out.contains("win.qcow2") && !out.contains("win_VARS"));
    }

    #[test]
    fn names_and_bad_input() {
        let shape = domain_shape(DOM).unwrap();
        assert_eq!(shape.name, "win");
        assert_eq!((shape.vcpus, shape.memory_bytes), (4, 4 << 30));
        assert_eq!(shape.devices, ["0000:01:00.0"]);
        assert_eq!(shape.pinned.to_list_string(), "2");
        assert!(domain_shape("<domain/>").is_err());
        assert!(domain_shape("<domain><name>x</name><vcpu>2</vcpu></domain>").is_err());
        assert!(scratch_domain("<notdomain/>", &s()).is_err());
        let mut bad = s();
        bad.name = "a/b".into();
        assert!(scratch_domain(DOM, &bad).is_err());
    }
}

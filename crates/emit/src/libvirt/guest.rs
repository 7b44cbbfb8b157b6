//! A throw-away copy of a domain that boots its own OS (`vmtune bench matrix --transport
//! agent|ssh`): the same disks seen through copy-on-write overlays, its NVRAM a copy, its
//! networks as they are, and the guest agent's channel where the domain has none. Also what
//! the matrix compares a guest's view with ([`guest_shape`]) and the one `<memoryBacking>`
//! every layout runs ([`with_memory_backing`]).
//!
//! What changes (byte-range edits: every other byte stays as the domain has it):
//! - `<name>` is the scratch name and `<uuid>` goes, so the user's domain and its copies
//!   never collide;
//! - every writable disk (`<disk device='disk'>` of type `file` or `block`, not `<readonly/>`
//!   nor `<shareable/>`) reads `<source file=OVERLAY>` with `<driver type='qcow2'>`: a qcow2
//!   overlay the caller made on the user's image, which is then only ever read;
//!   CD-ROMs, floppies and read-only disks keep their sources (nothing writes them);
//!   network and pool volumes are refused — no overlay can be made for them here;
//! - `<nvram>` names the caller's copy; a UEFI domain without one gets one in the caller's
//!   directory (libvirt fills it from the firmware's template), so the user's
//!   `/var/lib/libvirt/qemu/nvram/NAME_VARS.fd` is never written;
//! - a `<channel type='unix'>` for `org.qemu.guest_agent.0` is added where the domain has no
//!   guest agent channel (the agent transport talks to it through libvirt).

use topo::CpuSet;

use super::read::{child, children, parse_doc};
use crate::values::{parse_libvirt_cpuset, scaled};
use crate::xml::{apply_edits, escape, line_indent, Edit};
use crate::EmitError;

/// The guest agent's virtio-serial port name (qemu-guest-agent's default).
pub const AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";

/// How one `<disk>` is backed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSource {
    /// `<target dev>`, e.g. `vda`.
    pub target: String,
    /// `<disk device>`: `disk`, `cdrom`, `floppy`, `lun`.
    pub device: String,
    /// `<disk type>`: `file`, `block`, `network`, `volume`, `dir`, `nvme`.
    pub kind: String,
    /// The image file or block device, where the disk has one.
    pub path: Option<String>,
    /// `<driver type>`: `raw`, `qcow2`, … (`None`: libvirt probes nothing; raw is assumed).
    pub format: Option<String>,
    /// `<readonly/>` or `<shareable/>`, or a CD-ROM/floppy: nothing the guest writes.
    pub readonly: bool,
}

impl DiskSource {
    /// Whether the guest can write it: the disks a scratch copy must see through an overlay.
    pub fn writable(&self) -> bool {
        !self.readonly && (self.device == "disk" || self.device == "lun")
    }
}

/// The domain's disks, and its `<nvram>` path where it names one.
pub fn domain_disks(xml: &str) -> Result<(Vec<DiskSource>, Option<String>), EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let mut out = Vec::new();
    if let Some(devices) = child(root, "devices") {
        for d in children(devices, "disk") {
            let device = d.attribute("device").unwrap_or("disk").to_string();
            let kind = d.attribute("type").unwrap_or("file").to_string();
            let source = child(d, "source");
            let path = source
                .and_then(|s| s.attribute("file").or_else(|| s.attribute("dev")))
                .map(str::to_string);
            let readonly = child(d, "readonly").is_some()
                || child(d, "shareable").is_some()
                || device == "cdrom"
                || device == "floppy";
            out.push(DiskSource {
                target: child(d, "target")
                    .and_then(|t| t.attribute("dev"))
                    .unwrap_or("?")
                    .to_string(),
                device,
                kind,
                path,
                format: child(d, "driver")
                    .and_then(|dr| dr.attribute("type"))
                    .map(str::to_string),
                readonly,
            });
        }
    }
    let nvram = child(root, "os")
        .and_then(|os| child(os, "nvram"))
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Ok((out, nvram))
}

/// What the scratch copy of a domain that boots its own OS is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuestScratch {
    pub name: String,
    /// `(target dev, overlay path)` for every writable disk ([`DiskSource::writable`]).
    pub overlays: Vec<(String, String)>,
    /// The NVRAM copy (or, for a UEFI domain without `<nvram>`, where libvirt makes one).
    pub nvram: Option<String>,
    /// Add the guest agent's channel where the domain has none.
    pub agent_channel: bool,
}

/// `name='value'`, the value escaped for single quotes.
fn attr(name: &str, value: &str) -> String {
    format!("{name}='{}'", escape(value))
}

/// An element's whole line (its indentation and newline included) where it stands alone
/// on one; else the element itself.
fn line_of(xml: &str, n: roxmltree::Node) -> std::ops::Range<usize> {
    let r = n.range();
    let start = xml[..r.start].rfind('\n').map_or(0, |i| i + 1);
    let end = xml[r.end..].find('\n').map_or(xml.len(), |i| r.end + i + 1);
    let alone = xml[start..r.start].trim().is_empty() && xml[r.end..end].trim().is_empty();
    if alone {
        start..end
    } else {
        r
    }
}

/// Insert `el` as the last child of `parent`, on its own line, indented as `indent`.
fn append_child(xml: &str, parent: roxmltree::Node, el: &str, indent: &str) -> Edit {
    let end = parent.range().end;
    let close = xml[..end].rfind("</").unwrap_or(end);
    let line_start = xml[..close].rfind('\n').map_or(0, |i| i + 1);
    if xml[line_start..close].trim().is_empty() {
        Edit {
            at: line_start..line_start,
            text: format!("{indent}{el}\n"),
        }
    } else {
        Edit {
            at: close..close,
            text: el.to_string(),
        }
    }
}

/// The scratch copy of `xml` that boots the domain's own OS through overlays (module docs).
pub fn scratch_guest(xml: &str, s: &GuestScratch) -> Result<String, EmitError> {
    if s.name.trim().is_empty() || s.name.contains('/') {
        return Err(EmitError::Invalid(format!(
            "scratch domain name {:?} is not a libvirt domain name",
            s.name
        )));
    }
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let mut edits = Vec::new();
    let name =
        child(root, "name").ok_or_else(|| EmitError::Invalid("the domain has no <name>".into()))?;
    edits.push(Edit {
        at: name.range(),
        text: format!("<name>{}</name>", escape(&s.name)),
    });
    if let Some(u) = child(root, "uuid") {
        edits.push(Edit {
            at: line_of(xml, u),
            text: String::new(),
        });
    }
    edits.extend(nvram_edits(xml, root, s.nvram.as_deref())?);
    let devices = child(root, "devices");
    let (disks, _) = domain_disks(xml)?;
    if let Some(devices) = devices {
        for (d, info) in children(devices, "disk").zip(&disks) {
            if !info.writable() {
                continue;
            }
            let Some((_, overlay)) = s.overlays.iter().find(|(t, _)| *t == info.target) else {
                return Err(EmitError::Invalid(format!(
                    "disk {} is writable and has no overlay: the scratch copy would write the user's image",
                    info.target
                )));
            };
            edits.extend(disk_edits(xml, d, info, overlay)?);
        }
        if s.agent_channel && !has_agent_channel(devices) {
            let indent = children(devices, "disk")
                .next()
                .or_else(|| devices.children().find(|c| c.is_element()))
                .and_then(|c| line_indent(xml, c.range().start))
                .unwrap_or_else(|| "    ".into());
            let el = format!(
                "<channel type='unix'><target type='virtio' name='{AGENT_CHANNEL}'/></channel>"
            );
            edits.push(append_child(xml, devices, &el, &indent));
        }
    } else if s.agent_channel {
        return Err(EmitError::Invalid(
            "the domain has no <devices>: nothing to boot".into(),
        ));
    }
    Ok(apply_edits(xml, edits))
}

fn has_agent_channel(devices: roxmltree::Node) -> bool {
    children(devices, "channel").any(|c| {
        child(c, "target").is_some_and(|t| {
            t.attribute("type") == Some("virtio") && t.attribute("name") == Some(AGENT_CHANNEL)
        })
    })
}

/// `<nvram>` pointed at the copy; one added to a UEFI `<os>` that has none.
fn nvram_edits(
    xml: &str,
    root: roxmltree::Node,
    nvram: Option<&str>,
) -> Result<Vec<Edit>, EmitError> {
    let Some(os) = child(root, "os") else {
        return Ok(Vec::new());
    };
    let efi = os.attribute("firmware") == Some("efi")
        || child(os, "loader").is_some_and(|l| l.attribute("type") == Some("pflash"));
    match (child(os, "nvram"), nvram) {
        (Some(n), Some(copy)) => {
            let attrs: String = n
                .attributes()
                .map(|a| format!(" {}", attr(a.name(), a.value())))
                .collect();
            Ok(vec![Edit {
                at: n.range(),
                text: format!("<nvram{attrs}>{}</nvram>", escape(copy)),
            }])
        }
        (Some(_), None) => Err(EmitError::Invalid(
            "the domain has an <nvram> and no copy of it was given: the scratch copy would write the user's NVRAM".into(),
        )),
        (None, Some(copy)) if efi => {
            let indent = child(os, "type")
                .and_then(|t| line_indent(xml, t.range().start))
                .unwrap_or_else(|| "    ".into());
            let el = format!("<nvram>{}</nvram>", escape(copy));
            Ok(vec![append_child(xml, os, &el, &indent)])
        }
        (None, None) if efi => Err(EmitError::Invalid(
            "the domain boots UEFI without an <nvram>: libvirt would make one under its own name; give the scratch copy one".into(),
        )),
        _ => Ok(Vec::new()),
    }
}

/// One writable disk read through `overlay` (qcow2).
fn disk_edits(
    xml: &str,
    d: roxmltree::Node,
    info: &DiskSource,
    overlay: &str,
) -> Result<Vec<Edit>, EmitError> {
    let mut edits = Vec::new();
    match info.kind.as_str() {
        "file" => {}
        "block" => {
            let ty = d
                .attributes()
                .find(|a| a.name() == "type")
                .map(|a| a.range());
            if let Some(r) = ty {
                edits.push(Edit {
                    at: r,
                    text: attr("type", "file"),
                });
            }
        }
        other => {
            return Err(EmitError::Invalid(format!(
            "disk {} is a {other} disk: vmtune bench matrix can overlay only file and block disks",
            info.target
        )))
        }
    }
    let source = child(d, "source")
        .ok_or_else(|| EmitError::Invalid(format!("disk {} has no <source>", info.target)))?;
    match source
        .attributes()
        .find(|a| a.name() == "file" || a.name() == "dev")
    {
        Some(a) => edits.push(Edit {
            at: a.range(),
            text: attr("file", overlay),
        }),
        None => {
            return Err(EmitError::Invalid(format!(
                "disk {}'s <source> names no file or device",
                info.target
            )))
        }
    }
    match child(d, "driver") {
        Some(dr) => match dr.attributes().find(|a| a.name() == "type") {
            Some(a) => edits.push(Edit {
                at: a.range(),
                text: attr("type", "qcow2"),
            }),
            None => {
                let at = dr.range().start + "<driver".len();
                edits.push(Edit {
                    at: at..at,
                    text: format!(" {}", attr("type", "qcow2")),
                });
            }
        },
        None => {
            let indent = line_indent(xml, source.range().start).unwrap_or_default();
            let at = source.range().start;
            let sep = if indent.is_empty() {
                String::new()
            } else {
                format!("\n{indent}")
            };
            edits.push(Edit {
                at: at..at,
                text: format!("<driver name='qemu' type='qcow2'/>{sep}"),
            });
        }
    }
    Ok(edits)
}

/// What a domain tells its guest: what the guest's own view is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuestShape {
    /// `<vcpu>`: the vCPUs the guest has at boot (`current` where it is given).
    pub vcpus: u32,
    /// `<cpu><topology>`: sockets, dies, cores, threads.
    pub topology: Option<[u32; 4]>,
    /// `<cpu><numa><cell>`s: the vCPUs and memory of each guest node, by cell id.
    pub cells: Vec<(u32, CpuSet, u64)>,
    /// `<memory>` in bytes.
    pub memory_bytes: u64,
}

/// The guest shape `xml` asks for.
pub fn guest_shape(xml: &str) -> Result<GuestShape, EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let bad = |what: &str, v: &str| EmitError::Invalid(format!("{what}: {v:?} is not a number"));
    let vcpu = child(root, "vcpu").ok_or_else(|| EmitError::Invalid("no <vcpu>".into()))?;
    let count = vcpu
        .attribute("current")
        .or(vcpu.text())
        .unwrap_or("")
        .trim();
    let vcpus: u32 = count.parse().map_err(|_| bad("<vcpu>", count))?;
    let memory_bytes = match child(root, "memory") {
        Some(m) => scaled(
            m.text().unwrap_or(""),
            m.attribute("unit"),
            1024,
            "<memory>",
        )?,
        None => 0,
    };
    let cpu = child(root, "cpu");
    let topology = match cpu.and_then(|c| child(c, "topology")) {
        Some(t) => {
            let mut v = [1u32; 4];
            for (i, k) in ["sockets", "dies", "cores", "threads"].iter().enumerate() {
                if let Some(s) = t.attribute(*k) {
                    v[i] = s
                        .trim()
                        .parse()
                        .map_err(|_| bad(&format!("<topology {k}>"), s))?;
                }
            }
            Some(v)
        }
        None => None,
    };
    let mut cells = Vec::new();
    if let Some(numa) = cpu.and_then(|c| child(c, "numa")) {
        for (i, c) in children(numa, "cell").enumerate() {
            let id = match c.attribute("id") {
                Some(s) => s.trim().parse().map_err(|_| bad("<cell id>", s))?,
                None => i as u32,
            };
            let cpus = parse_libvirt_cpuset(c.attribute("cpus").unwrap_or(""))?;
            let mem = scaled(
                c.attribute("memory").unwrap_or(""),
                c.attribute("unit"),
                1024,
                "<cell memory>",
            )?;
            cells.push((id, cpus, mem));
        }
    }
    Ok(GuestShape {
        vcpus,
        topology,
        cells,
        memory_bytes,
    })
}

/// The domain's `<memoryBacking>` element as written, if it has one.
pub fn memory_backing(xml: &str) -> Result<Option<String>, EmitError> {
    let doc = parse_doc(xml)?;
    Ok(child(doc.root_element(), "memoryBacking").map(|m| xml[m.range()].to_string()))
}

/// A `<memoryBacking>` of pages of `size_kb` KiB: `existing` (the domain's) with its
/// `<hugepages>` replaced, or a new element.
pub fn hugepage_backing(existing: Option<&str>, size_kb: u64) -> Result<String, EmitError> {
    let pages = format!("<hugepages><page size='{size_kb}' unit='KiB'/></hugepages>");
    let Some(el) = existing else {
        return Ok(format!("<memoryBacking>{pages}</memoryBacking>"));
    };
    let wrapped = format!("<domain>{el}</domain>");
    let doc = parse_doc(&wrapped)?;
    let mb = child(doc.root_element(), "memoryBacking")
        .ok_or_else(|| EmitError::Invalid("not a <memoryBacking> element".into()))?;
    let edits = match child(mb, "hugepages") {
        Some(h) => vec![Edit {
            at: h.range(),
            text: pages,
        }],
        None if wrapped[mb.range()].ends_with("/>") => {
            return Ok(format!("<memoryBacking>{pages}</memoryBacking>"))
        }
        None => {
            let close = mb.range().end - "</memoryBacking>".len();
            vec![Edit {
                at: close..close,
                text: pages,
            }]
        }
    };
    let out = apply_edits(&wrapped, edits);
    Ok(out["<domain>".len()..out.len() - "</domain>".len()].to_string())
}

/// `xml` with `backing` as its `<memoryBacking>` (none where `backing` is `None`). A page's
/// `nodeset` naming a guest cell the layout does not have is dropped (the pages then back
/// every cell), and said.
pub fn with_memory_backing(
    xml: &str,
    backing: Option<&str>,
) -> Result<(String, Vec<String>), EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let shape = guest_shape(xml)?;
    let cells = shape.cells.len().max(1) as u32;
    let mut notes = Vec::new();
    let text = match backing {
        Some(b) => Some(fit_nodesets(b, cells, &mut notes)?),
        None => None,
    };
    let mut edits = Vec::new();
    match (child(root, "memoryBacking"), text) {
        (Some(m), Some(t)) => edits.push(Edit {
            at: m.range(),
            text: t,
        }),
        (Some(m), None) => edits.push(Edit {
            at: line_of(xml, m),
            text: String::new(),
        }),
        (None, Some(t)) => {
            // after <currentMemory>/<memory>, where libvirt writes it
            let after = child(root, "currentMemory")
                .or_else(|| child(root, "memory"))
                .ok_or_else(|| EmitError::Invalid("the domain has no <memory>".into()))?;
            let indent = line_indent(xml, after.range().start).unwrap_or_default();
            let at = after.range().end;
            edits.push(Edit {
                at: at..at,
                text: format!("\n{indent}{t}"),
            });
        }
        (None, None) => {}
    }
    Ok((apply_edits(xml, edits), notes))
}

/// `backing` with each `<page nodeset>` that names a cell at or past `cells` removed.
fn fit_nodesets(backing: &str, cells: u32, notes: &mut Vec<String>) -> Result<String, EmitError> {
    let wrapped = format!("<domain>{backing}</domain>");
    let doc = parse_doc(&wrapped)?;
    let mb = child(doc.root_element(), "memoryBacking")
        .ok_or_else(|| EmitError::Invalid("not a <memoryBacking> element".into()))?;
    let mut edits = Vec::new();
    if let Some(h) = child(mb, "hugepages") {
        for p in children(h, "page") {
            let Some(a) = p.attributes().find(|a| a.name() == "nodeset") else {
                continue;
            };
            let set = parse_libvirt_cpuset(a.value())?;
            if set.iter().any(|c| c >= cells) {
                notes.push(format!(
                    "the domain's <page nodeset='{}'> names guest cells this layout does not have ({cells} cell(s)): its pages back every cell here",
                    a.value()
                ));
                let r = a.range();
                let start = wrapped[..r.start].trim_end().len();
                edits.push(Edit {
                    at: start..r.end,
                    text: String::new(),
                });
            }
        }
    }
    let out = apply_edits(&wrapped, edits);
    Ok(out["<domain>".len()..out.len() - "</domain>".len()].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOM: &str = "<domain type='kvm'>
  <name>deb</name>
  <uuid>1b4e28ba-2fa1-11d2-883f-0016d3cca427</uuid>
  <memory unit='GiB'>4</memory>
  <memoryBacking>
    <hugepages>
      <page size='1' unit='G' nodeset='0-1'/>
    </hugepages>
    <locked/>
  </memoryBacking>
  <vcpu placement='static' current='3'>4</vcpu>
  <os firmware='efi'>
    <type arch='x86_64' machine='q35'>hvm</type>
    <nvram template='/usr/share/OVMF/OVMF_VARS.fd'>/var/lib/libvirt/qemu/nvram/deb_VARS.fd</nvram>
  </os>
  <cpu mode='host-passthrough'>
    <topology sockets='2' dies='1' cores='1' threads='2'/>
    <numa>
      <cell id='0' cpus='0-1' memory='2' unit='GiB'/>
      <cell id='1' cpus='2-3' memory='2' unit='GiB'/>
    </numa>
  </cpu>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='none'/>
      <source file='/var/lib/libvirt/images/deb.img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='block' device='disk'>
      <source dev='/dev/vg/data'/>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'>
      <source file='/iso/debian.iso'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
    <interface type='network'>
      <source network='default'/>
    </interface>
  </devices>
</domain>
";

    fn s() -> GuestScratch {
        GuestScratch {
            name: "vmtune-matrix-deb-pin-1".into(),
            overlays: vec![
                ("vda".into(), "/run/m/vda.qcow2".into()),
                ("vdb".into(), "/run/m/vdb.qcow2".into()),
            ],
            nvram: Some("/run/m/VARS.fd".into()),
            agent_channel: true,
        }
    }

    #[test]
    fn lists_disks_and_nvram() {
        let (disks, nvram) = domain_disks(DOM).unwrap();
        assert_eq!(
            nvram.as_deref(),
            Some("/var/lib/libvirt/qemu/nvram/deb_VARS.fd")
        );
        let w: Vec<&str> = disks
            .iter()
            .filter(|d| d.writable())
            .map(|d| d.target.as_str())
            .collect();
        assert_eq!(w, ["vda", "vdb"]);
        assert_eq!(disks[0].format.as_deref(), Some("raw"));
        assert_eq!(disks[1].path.as_deref(), Some("/dev/vg/data"));
        assert!(disks[2].readonly);
    }

    #[test]
    fn overlays_every_writable_disk_and_copies_nvram() {
        let out = scratch_guest(DOM, &s()).unwrap();
        let doc = roxmltree::Document::parse(&out).unwrap();
        let root = doc.root_element();
        assert_eq!(
            child(root, "name").unwrap().text(),
            Some("vmtune-matrix-deb-pin-1")
        );
        assert!(child(root, "uuid").is_none());
        assert!(!out.contains("deb.img") && !out.contains("/dev/vg/data"));
        assert!(!out.contains("deb_VARS.fd"));
        assert!(
            out.contains("<nvram template='/usr/share/OVMF/OVMF_VARS.fd'>/run/m/VARS.fd</nvram>")
        );
        assert!(
            out.contains("<driver name='qemu' type='qcow2' cache='none'/>"),
            "{out}"
        );
        assert!(out.contains("<disk type='file' device='disk'>\n      <driver name='qemu' type='qcow2'/>\n      <source file='/run/m/vdb.qcow2'/>"), "{out}");
        assert!(out.contains("<source file='/iso/debian.iso'/>"));
        assert!(out.contains(AGENT_CHANNEL));
        // idempotent on the channel: a second pass adds none
        let again = scratch_guest(&out, &s()).unwrap();
        assert_eq!(again.matches(AGENT_CHANNEL).count(), 1);
        // the rest keeps its bytes
        assert!(out.contains(
            "    <interface type='network'>\n      <source network='default'/>\n    </interface>\n"
        ));
    }

    #[test]
    fn refuses_what_would_write_the_users_files() {
        let mut no_overlay = s();
        no_overlay.overlays.pop();
        assert!(scratch_guest(DOM, &no_overlay)
            .unwrap_err()
            .to_string()
            .contains("vdb"));
        let mut no_nvram = s();
        no_nvram.nvram = None;
        assert!(scratch_guest(DOM, &no_nvram).is_err());
        let net = DOM.replace(
            "<disk type='block' device='disk'>\n      <source dev='/dev/vg/data'/>",
            "<disk type='network' device='disk'>\n      <source protocol='rbd' name='pool/img'/>",
        );
        assert!(scratch_guest(&net, &s())
            .unwrap_err()
            .to_string()
            .contains("network"));
        let mut bad = s();
        bad.name = "a/b".into();
        assert!(scratch_guest(DOM, &bad).is_err());
    }

    #[test]
    fn shape_is_what_the_guest_is_told() {
        let g = guest_shape(DOM).unwrap();
        assert_eq!(g.vcpus, 3);
        assert_eq!(g.topology, Some([2, 1, 1, 2]));
        assert_eq!(g.cells.len(), 2);
        assert_eq!(g.cells[1].1.to_list_string(), "2-3");
        assert_eq!(g.cells[1].2, 2 << 30);
        assert_eq!(g.memory_bytes, 4 << 30);
    }

    #[test]
    fn one_memory_backing_for_every_layout() {
        let mb = memory_backing(DOM).unwrap().unwrap();
        assert!(mb.starts_with("<memoryBacking>") && mb.contains("<locked/>"));
        // a layout without cells: the nodeset naming cell 1 goes, and is said
        let flat = DOM.replace(
            "    <numa>\n      <cell id='0' cpus='0-1' memory='2' unit='GiB'/>\n      <cell id='1' cpus='2-3' memory='2' unit='GiB'/>\n    </numa>\n",
            "",
        );
        let stripped = flat.replace(&mb, "");
        let (out, notes) = with_memory_backing(&stripped, Some(&mb)).unwrap();
        assert!(out.contains("<page size='1' unit='G'/>"), "{out}");
        assert_eq!(notes.len(), 1);
        let (kept, notes) = with_memory_backing(DOM, Some(&mb)).unwrap();
        assert_eq!(kept, DOM);
        assert!(notes.is_empty());
        let (none, _) = with_memory_backing(DOM, None).unwrap();
        assert!(!none.contains("memoryBacking"));
        assert!(none.contains("  <memory unit='GiB'>4</memory>\n  <vcpu"));
        let two_m = hugepage_backing(Some(&mb), 2048).unwrap();
        assert!(two_m.contains("<page size='2048' unit='KiB'/>") && two_m.contains("<locked/>"));
        assert!(!two_m.contains("unit='G'"));
        assert_eq!(
            hugepage_backing(None, 2048).unwrap(),
            "<memoryBacking><hugepages><page size='2048' unit='KiB'/></hugepages></memoryBacking>"
        );
        let (added, _) = with_memory_backing(&none, Some(&two_m)).unwrap();
        assert!(
            added.contains("<memory unit='GiB'>4</memory>\n  <memoryBacking>"),
            "{added}"
        );
    }
}

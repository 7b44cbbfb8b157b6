//! Reading libvirt domain XML: the user's choices the plan must keep ([`domain_choices`]),
//! what the patch depends on ([`DomainInfo`]), and a domain as a tenant
//! ([`tenant_from_domain_xml`]).

use plan::{
    DomainCell, DomainChoices, DomainEnlightenment, DomainMemoryDevice, DomainNumatune, DomainPage,
    DomainTimer, GuestOs, Tenant, TenantHugepages,
};
use topo::CpuSet;

use crate::values::{parse_libvirt_cpuset, scaled};
use crate::EmitError;

pub(crate) fn parse_doc(xml: &str) -> Result<roxmltree::Document<'_>, EmitError> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts)
        .map_err(|e| EmitError::Xml(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "domain" || root.tag_name().namespace().is_some() {
        return Err(EmitError::Xml(format!(
            "root element is <{}>, not <domain>",
            root.tag_name().name()
        )));
    }
    Ok(doc)
}

/// First child element named `name` (libvirt's own elements carry no namespace).
pub(crate) fn child<'a, 'i>(
    n: roxmltree::Node<'a, 'i>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace().is_none()
    })
}

pub(crate) fn children<'a, 'i: 'a>(
    n: roxmltree::Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> + 'a {
    n.children().filter(move |c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace().is_none()
    })
}

fn attr_cpuset(n: roxmltree::Node, attr: &str) -> Result<Option<CpuSet>, EmitError> {
    n.attribute(attr)
        .map(|v| {
            parse_libvirt_cpuset(v)
                .map_err(|e| EmitError::Invalid(format!("<{} {attr}>: {e}", n.tag_name().name())))
        })
        .transpose()
}

fn number(n: roxmltree::Node, text: Option<&str>, what: &str) -> Result<u32, EmitError> {
    let t = text.unwrap_or("").trim();
    t.parse::<u32>().map_err(|_| {
        EmitError::Invalid(format!(
            "<{}{what}>: {t:?} is not a number",
            n.tag_name().name()
        ))
    })
}

/// libvirt's yes/no and on/off.
fn yes(v: &str) -> Option<bool> {
    match v.trim() {
        "yes" | "on" => Some(true),
        "no" | "off" => Some(false),
        _ => None,
    }
}

/// What the plan's elements depend on in an existing domain.
#[derive(Debug, Default)]
pub(crate) struct DomainInfo {
    /// Ids of the domain's iothreads (`<iothreadids>` or `1..=<iothreads>`).
    pub iothread_ids: Vec<u32>,
    /// `<vcpus>`: (id, enabled, hotpluggable as written), when present.
    pub vcpus: Option<Vec<(u32, bool, Option<String>)>>,
    /// The cells of `<cpu><numa>`, when the domain has one.
    pub numa_cells: Option<Vec<DomainCell>>,
    /// `<maxMemory>`: memory hotplug, which needs guest NUMA cells.
    pub max_memory: bool,
    /// `<memoryBacking><source type=…>`.
    pub memory_source: Option<String>,
    /// `<memory>` and `<currentMemory>` as written: (bytes, unit attribute, text).
    pub memory: Option<(u64, Option<String>, String)>,
    pub current_memory: Option<(u64, Option<String>, String)>,
    /// `<domain type='qemu'>`: QEMU's TCG emulator, no KVM — no host CPU to pass through.
    pub emulated: bool,
}

/// Cell attributes the plan writes; every other one is the user's.
const CELL_OWNED: &[&str] = &["id", "cpus", "memory", "unit"];

impl DomainInfo {
    pub fn read(root: roxmltree::Node) -> DomainInfo {
        let mut info = DomainInfo::default();
        if let Some(ids) = child(root, "iothreadids") {
            for t in children(ids, "iothread") {
                if let Some(id) = t.attribute("id").and_then(|v| v.trim().parse::<u32>().ok()) {
                    info.iothread_ids.push(id);
                }
            }
        }
        if info.iothread_ids.is_empty() {
            if let Some(n) = child(root, "iothreads")
                .and_then(|t| t.text())
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                // a hostile count must not make us write millions of pins
                info.iothread_ids = (1..=n.min(1024)).collect();
            }
        }
        info.numa_cells = child(root, "cpu")
            .and_then(|c| child(c, "numa"))
            .map(domain_cells);
        let written = |name: &str| {
            let m = child(root, name)?;
            let text = m.text().unwrap_or("").trim().to_string();
            let bytes = scaled(&text, m.attribute("unit"), 1024, name).ok()?;
            Some((bytes, m.attribute("unit").map(str::to_string), text))
        };
        info.memory = written("memory");
        info.current_memory = written("currentMemory");
        info.max_memory = child(root, "maxMemory").is_some();
        info.emulated = root.attribute("type") == Some("qemu");
        info.memory_source = memory_source(root);
        info.vcpus = child(root, "vcpus").map(|v| {
            children(v, "vcpu")
                .enumerate()
                .map(|(i, c)| {
                    let id = c
                        .attribute("id")
                        .and_then(|v| v.trim().parse::<u32>().ok())
                        .unwrap_or(i as u32);
                    let enabled = c.attribute("enabled").and_then(yes).unwrap_or(true);
                    (id, enabled, c.attribute("hotpluggable").map(str::to_string))
                })
                .collect()
        });
        info
    }
}

fn memory_source(root: roxmltree::Node) -> Option<String> {
    child(root, "memoryBacking")
        .and_then(|m| child(m, "source"))
        .map(|s| {
            s.attribute("type")
                .unwrap_or("anonymous")
                .trim()
                .to_string()
        })
}

/// libvirt's QEMU namespace (`xmlns:qemu=…`) for `<qemu:commandline>`.
const QEMU_NS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";

/// QEMU options in `<qemu:commandline>` that replace what libvirt writes from the plan's
/// elements, with their values (`-cpu` `host,kvm=off`; also spelled `--cpu`, `-cpu=…`).
fn qemu_overrides(root: roxmltree::Node) -> Vec<(String, String)> {
    const OPTS: &[&str] = &["cpu", "smp", "m", "numa"];
    let args: Vec<&str> = root
        .children()
        .filter(|c| {
            c.tag_name().name() == "commandline" && c.tag_name().namespace() == Some(QEMU_NS)
        })
        .flat_map(|c| c.children())
        .filter(|a| a.tag_name().name() == "arg" && a.tag_name().namespace() == Some(QEMU_NS))
        .filter_map(|a| a.attribute("value"))
        .collect();
    let mut out = Vec::new();
    let mut it = args.iter().map(|a| a.trim()).peekable();
    while let Some(a) = it.next() {
        let Some(bare) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        let (name, inline) = match bare.split_once(['=', ' ']) {
            Some((n, v)) => (n, Some(v.trim().to_string())),
            None => (bare, None),
        };
        if !OPTS.contains(&name) {
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match it.peek() {
                Some(v) if !v.starts_with('-') => it.next().unwrap_or_default().to_string(),
                _ => String::new(),
            },
        };
        out.push((format!("-{name}"), value));
    }
    out
}

/// Bytes of the domain's `<devices><memory>` (DIMM, NVDIMM, virtio-mem …: `<target><size>`).
fn memory_devices_bytes(root: roxmltree::Node) -> Result<u64, EmitError> {
    let Some(devs) = child(root, "devices") else {
        return Ok(0);
    };
    let mut total = 0u64;
    for m in children(devs, "memory") {
        if let Some(size) = child(m, "target").and_then(|t| child(t, "size")) {
            let b = scaled(
                size.text().unwrap_or(""),
                size.attribute("unit"),
                1024,
                "<memory><target><size>",
            )?;
            total = total.saturating_add(b);
        }
    }
    Ok(total)
}

/// The cells of `<cpu><numa>` with their own attributes (an id-less cell numbered by its
/// place, as libvirt does), their `<cache>`s and `<distances>`.
pub(crate) fn domain_cells(numa: roxmltree::Node) -> Vec<DomainCell> {
    children(numa, "cell")
        .enumerate()
        .map(|(i, c)| DomainCell {
            id: c
                .attribute("id")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .unwrap_or(i as u32),
            attrs: c
                .attributes()
                .filter(|a| a.namespace().is_none() && !CELL_OWNED.contains(&a.name()))
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect(),
            caches: u32::try_from(children(c, "cache").count()).unwrap_or(u32::MAX),
            distances: child(c, "distances").is_some(),
        })
        .collect()
}

/// `<devices><memory>` elements bound to a guest cell: (model, `<target><node>`).
fn memory_device_nodes(root: roxmltree::Node) -> Vec<DomainMemoryDevice> {
    let Some(devs) = child(root, "devices") else {
        return Vec::new();
    };
    children(devs, "memory")
        .filter_map(|m| {
            let node = child(m, "target")
                .and_then(|t| child(t, "node"))
                .and_then(|n| n.text())
                .and_then(|t| t.trim().parse::<u32>().ok())?;
            Some(DomainMemoryDevice {
                model: m.attribute("model").unwrap_or("dimm").trim().to_string(),
                node,
            })
        })
        .collect()
}

/// `<numatune>`: its `<memory>` mode, nodeset and placement, and its `<memnode>`s.
fn numatune(nt: roxmltree::Node) -> DomainNumatune {
    let attr = |n: roxmltree::Node, k: &str| n.attribute(k).map(|v| v.trim().to_string());
    let memory = child(nt, "memory");
    DomainNumatune {
        mode: memory.map(|m| attr(m, "mode").unwrap_or_else(|| "strict".into())),
        nodeset: memory.and_then(|m| attr(m, "nodeset")),
        placement: memory.and_then(|m| attr(m, "placement")),
        memnodes: children(nt, "memnode")
            .filter_map(|m| {
                Some((
                    m.attribute("cellid")?.trim().parse::<u32>().ok()?,
                    attr(m, "mode").unwrap_or_else(|| "strict".into()),
                    attr(m, "nodeset").unwrap_or_default(),
                ))
            })
            .collect(),
    }
}

/// The guest-CPU choices an existing domain makes, for [`plan::adopt_domain`]: its Hyper-V
/// settings (mode, each enlightenment on/off with its value, `<stimer><direct>` …), the
/// hypervisor CPUID bit's policy, the hidden KVM signature, its timers, its CPU mode and
/// its vCPU count with the ones it keeps offline.
pub fn domain_choices(xml: &str) -> Result<DomainChoices, EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let mut c = DomainChoices {
        source: match child(root, "name").and_then(|n| n.text()).map(str::trim) {
            Some(n) if !n.is_empty() => format!("domain {n:?}"),
            _ => "the domain".into(),
        },
        ..Default::default()
    };
    if let Some(f) = child(root, "features") {
        if let Some(h) = child(f, "hyperv") {
            c.hyperv_mode = Some(h.attribute("mode").unwrap_or("custom").trim().to_string());
            for e in h.children().filter(|e| e.is_element()) {
                let name = e.tag_name().name().to_string();
                let on = e.attribute("state").and_then(yes).unwrap_or(true);
                let value = match name.as_str() {
                    "spinlocks" => e.attribute("retries"),
                    "vendor_id" => e.attribute("value"),
                    _ => None,
                }
                .map(str::to_string);
                c.hyperv.push(DomainEnlightenment {
                    name: name.clone(),
                    on,
                    value,
                });
                for sub in e.children().filter(|s| s.is_element()) {
                    c.hyperv.push(DomainEnlightenment {
                        name: format!("{name}_{}", sub.tag_name().name()),
                        on: on && sub.attribute("state").and_then(yes).unwrap_or(true),
                        value: None,
                    });
                }
            }
        }
        if let Some(h) = child(f, "kvm").and_then(|k| child(k, "hidden")) {
            c.kvm_hidden = h.attribute("state").and_then(yes);
        }
    }
    c.memory_source = memory_source(root);
    if let Some(hp) = child(root, "memoryBacking").and_then(|m| child(m, "hugepages")) {
        let pages: Vec<roxmltree::Node> = children(hp, "page").collect();
        for p in &pages {
            c.hugepages.push(DomainPage {
                size_kb: scaled(
                    p.attribute("size").unwrap_or(""),
                    p.attribute("unit"),
                    1024,
                    "<page size>",
                )? / 1024,
                nodeset: p.attribute("nodeset").map(|n| n.trim().to_string()),
            });
        }
        let page = pages
            .iter()
            .find(|p| p.attribute("nodeset").is_none())
            .or(pages.first());
        c.hugepage_size_kb = Some(match page {
            Some(p) => {
                scaled(
                    p.attribute("size").unwrap_or(""),
                    p.attribute("unit"),
                    1024,
                    "<page size>",
                )? / 1024
            }
            None => 2048,
        });
    }
    if let Some(m) = child(root, "maxMemory") {
        c.max_memory_bytes = Some(scaled(
            m.text().unwrap_or(""),
            m.attribute("unit"),
            1024,
            "<maxMemory>",
        )?);
    }
    c.memory_devices_bytes = memory_devices_bytes(root)?;
    c.memory_devices = memory_device_nodes(root);
    c.numatune = child(root, "numatune").map(numatune);
    c.qemu_overrides = qemu_overrides(root);
    if let Some(cpu) = child(root, "cpu") {
        let mode = cpu.attribute("mode").unwrap_or("custom").trim();
        c.cpu_mode = Some(mode.to_string());
        c.cpu_migratable = cpu.attribute("migratable").map(|m| m.trim().to_string());
        let policy = |name: &str| {
            children(cpu, "feature")
                .find(|f| f.attribute("name").map(str::trim) == Some(name))
                .map(|f| {
                    f.attribute("policy")
                        .unwrap_or("require")
                        .trim()
                        .to_string()
                })
        };
        c.guest_cells = child(cpu, "numa")
            .map(|n| u32::try_from(children(n, "cell").count()).unwrap_or(u32::MAX));
        if let Some(n) = child(cpu, "numa") {
            c.cells = domain_cells(n);
            c.interconnects = child(n, "interconnects").is_some();
        }
        c.hypervisor_policy = policy("hypervisor");
        c.invtsc_policy = policy("invtsc");
    }
    if let Some(clock) = child(root, "clock") {
        for t in children(clock, "timer") {
            let Some(name) = t.attribute("name") else {
                continue;
            };
            c.timers.push(DomainTimer {
                name: name.trim().to_string(),
                present: t.attribute("present").and_then(yes),
                tickpolicy: t.attribute("tickpolicy").map(|s| s.trim().to_string()),
            });
        }
    }
    if let Some(v) = child(root, "vcpu") {
        c.vcpus = Some(number(v, v.text(), "")?);
        if let Some(cur) = v.attribute("current") {
            c.vcpus_current = Some(number(v, Some(cur), " current")?);
        }
    }
    if let Some(vs) = child(root, "vcpus") {
        for (i, v) in children(vs, "vcpu").enumerate() {
            if v.attribute("enabled").and_then(yes) == Some(false) {
                let id = match v.attribute("id") {
                    Some(id) => number(v, Some(id), " id")?,
                    None => i as u32,
                };
                if id <= topo::cpuset::MAX_CPU {
                    c.vcpus_offline.insert(id);
                }
            }
        }
    }
    Ok(c)
}

/// libosinfo's namespace in a domain's `<metadata>` (virt-manager and virt-install write the
/// OS the user picked there: `<libosinfo:os id="http://microsoft.com/win/11"/>`).
const LIBOSINFO_NS: &str = "http://libosinfo.org/xmlns/libvirt/domain/1.0";

/// The guest OS a domain shows, and what shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainOs {
    pub os: GuestOs,
    /// What in the domain says so, for messages ("its libosinfo id
    /// `http://microsoft.com/win/11`").
    pub evidence: String,
}

/// The guest OS an existing domain is for, from the first of these that it has:
/// - the libosinfo id virt-manager/virt-install keep in `<metadata>`: Microsoft's
///   `…/win/7` and `…/win/2k8r2` (Windows 7's kernel) are Windows 7, every other
///   `http://microsoft.com/win/…` is Windows, any other id (a Linux distribution, a BSD) is
///   planned as Linux;
/// - `<os>`: a direct kernel boot (`<kernel>`) or `<type>linux</type>` (Xen PV) is Linux;
/// - Hyper-V enlightenments turned on (`<features><hyperv>`) or the Hyper-V clock
///   (`<timer name='hypervclock' present='yes'/>`): Windows;
/// - `<clock offset='localtime'>`: Windows keeps the RTC in local time, Linux in UTC.
///
/// `None` where the domain shows none of these: the firmware (`<os firmware='efi'>`, a
/// Secure Boot `<loader>`) boots either. Windows 7 is only told by its libosinfo id.
pub fn domain_guest_os(xml: &str) -> Result<Option<DomainOs>, EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let found = |os: GuestOs, evidence: String| Ok(Some(DomainOs { os, evidence }));
    let osinfo = child(root, "metadata").and_then(|m| {
        m.descendants()
            .find(|n| {
                n.is_element()
                    && n.tag_name().name() == "os"
                    && n.tag_name().namespace() == Some(LIBOSINFO_NS)
            })
            .and_then(|n| n.attribute("id"))
            .map(str::trim)
            .filter(|id| !id.is_empty())
    });
    if let Some(id) = osinfo {
        let evidence = format!("its libosinfo id {id}");
        return match id.strip_prefix("http://microsoft.com/win/") {
            Some("7" | "2k8r2") => found(GuestOs::Windows7, evidence),
            Some(_) => found(GuestOs::Windows, evidence),
            None => found(GuestOs::Linux, evidence),
        };
    }
    if let Some(os) = child(root, "os") {
        if child(os, "kernel").is_some() {
            return found(
                GuestOs::Linux,
                "its direct kernel boot (<os><kernel>)".into(),
            );
        }
        if child(os, "type").and_then(|t| t.text()).map(str::trim) == Some("linux") {
            return found(GuestOs::Linux, "its <os><type>linux</type>".into());
        }
    }
    if let Some(h) = child(root, "features").and_then(|f| child(f, "hyperv")) {
        let passthrough = h.attribute("mode").map(str::trim) == Some("passthrough");
        let on: Vec<&str> = h
            .children()
            .filter(|e| e.is_element())
            .filter(|e| e.attribute("state").and_then(yes).unwrap_or(true))
            .map(|e| e.tag_name().name())
            .collect();
        if passthrough {
            return found(
                GuestOs::Windows,
                "its Hyper-V enlightenments (<hyperv mode='passthrough'>)".into(),
            );
        }
        if !on.is_empty() {
            return found(
                GuestOs::Windows,
                format!("its Hyper-V enlightenments ({})", on.join(", ")),
            );
        }
    }
    if let Some(clock) = child(root, "clock") {
        let hv_clock = children(clock, "timer").any(|t| {
            t.attribute("name").map(str::trim) == Some("hypervclock")
                && t.attribute("present").and_then(yes) != Some(false)
        });
        if hv_clock {
            return found(
                GuestOs::Windows,
                "its Hyper-V clock (<timer name='hypervclock'>)".into(),
            );
        }
        if clock.attribute("offset").map(str::trim) == Some("localtime") {
            return found(
                GuestOs::Windows,
                "its RTC in local time (<clock offset='localtime'>), as Windows keeps it".into(),
            );
        }
    }
    Ok(None)
}

pub(crate) fn pci_part(n: roxmltree::Node, attr: &str) -> Result<u32, EmitError> {
    let v = n
        .attribute(attr)
        .ok_or_else(|| EmitError::Invalid(format!("hostdev PCI address lacks {attr}")))?
        .trim();
    let r = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => v.parse::<u32>(),
    };
    r.map_err(|_| EmitError::Invalid(format!("hostdev PCI address {attr}={v:?} is not a number")))
}

pub(crate) fn pci_bdf(addr: roxmltree::Node) -> Result<String, EmitError> {
    let (d, b, s, f) = (
        // no domain attribute: domain 0; one that is not a number is an error
        if addr.has_attribute("domain") {
            pci_part(addr, "domain")?
        } else {
            0
        },
        pci_part(addr, "bus")?,
        pci_part(addr, "slot")?,
        pci_part(addr, "function")?,
    );
    // the domain is a uint32 in libvirt's schema (`pciDomain`): Intel VMD's start at 0x10000
    if b > 0xff || s > 0x1f || f > 7 {
        return Err(EmitError::Invalid(format!(
            "hostdev PCI address {d:x}:{b:x}:{s:x}.{f:x} is out of range"
        )));
    }
    Ok(format!("{d:04x}:{b:02x}:{s:02x}.{f:x}"))
}

/// Read a libvirt domain as a tenant: its name, the host CPUs it pins (`<vcpupin>`,
/// `<emulatorpin>`, `<iothreadpin>`, `<vcpu cpuset>`), its PCI hostdevs (also
/// `<interface type='hostdev'>` VFs), and the hugepages it holds per host node
/// (`<numatune>`: `<memnode>` per guest cell, else `<memory nodeset>`; a nodeset of several
/// nodes is counted evenly split, and the tenant's notes say so; no nodeset leaves the node
/// to the planner).
pub fn tenant_from_domain_xml(xml: &str) -> Result<Tenant, EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let name = child(root, "name")
        .and_then(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| EmitError::Invalid("domain has no <name>".into()))?;

    let mut cpus = CpuSet::new();
    let mut emulator_cpus = CpuSet::new();
    if let Some(v) = child(root, "vcpu") {
        if let Some(s) = attr_cpuset(v, "cpuset")? {
            cpus = cpus.union(&s);
        }
    }
    if let Some(ct) = child(root, "cputune") {
        for c in ct.children().filter(|c| c.is_element()) {
            let name = c.tag_name().name();
            if matches!(name, "vcpupin" | "emulatorpin" | "iothreadpin") {
                if let Some(s) = attr_cpuset(c, "cpuset")? {
                    if name == "vcpupin" {
                        cpus = cpus.union(&s);
                    } else {
                        emulator_cpus = emulator_cpus.union(&s);
                    }
                }
            }
        }
    }
    // emulator/iothread CPUs the vCPUs do not use may be the host's (shared, not taken)
    let emulator_cpus = emulator_cpus.difference(&cpus);
    let cpus = cpus.union(&emulator_cpus);

    let mut devices = Vec::new();
    if let Some(devs) = child(root, "devices") {
        for d in devs.children().filter(|c| c.is_element()) {
            let pci = match d.tag_name().name() {
                "hostdev" => {
                    d.attribute("mode").unwrap_or("subsystem") == "subsystem"
                        && d.attribute("type") == Some("pci")
                }
                "interface" => d.attribute("type") == Some("hostdev"),
                _ => false,
            };
            if !pci {
                continue;
            }
            let Some(addr) = child(d, "source").and_then(|s| child(s, "address")) else {
                continue;
            };
            if d.tag_name().name() == "interface"
                && addr.attribute("type").unwrap_or("pci") != "pci"
            {
                continue;
            }
            let bdf = pci_bdf(addr)?;
            if !devices.contains(&bdf) {
                devices.push(bdf);
            }
        }
    }

    let mut notes = Vec::new();
    let hugepages = tenant_hugepages(root, &mut notes)?;
    Ok(Tenant {
        name,
        cpus,
        emulator_cpus,
        host_cpus: None,
        devices,
        hugepages,
        notes,
    })
}

fn tenant_hugepages(
    root: roxmltree::Node,
    notes: &mut Vec<String>,
) -> Result<Vec<TenantHugepages>, EmitError> {
    let Some(hp) = child(root, "memoryBacking").and_then(|m| child(m, "hugepages")) else {
        return Ok(Vec::new());
    };
    let memory = match child(root, "memory") {
        Some(m) => scaled(
            m.text().unwrap_or(""),
            m.attribute("unit"),
            1024,
            "<memory>",
        )?,
        None => {
            return Err(EmitError::Invalid(
                "domain with hugepages has no <memory>".into(),
            ))
        }
    };
    // Guest NUMA cells: id -> bytes.
    let mut cells: Vec<(u32, u64)> = Vec::new();
    if let Some(numa) = child(root, "cpu").and_then(|c| child(c, "numa")) {
        for (i, c) in children(numa, "cell").enumerate() {
            let id = match c.attribute("id") {
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| EmitError::Invalid(format!("<cell id={v:?}> is not a number")))?,
                None => i as u32,
            };
            let bytes = scaled(
                c.attribute("memory").unwrap_or(""),
                c.attribute("unit"),
                1024,
                "<cell memory>",
            )?;
            cells.push((id, bytes));
        }
    }
    // Host nodes of the whole guest and of each cell (numatune).
    let numatune = child(root, "numatune");
    let whole: Vec<u32> = match numatune.and_then(|n| child(n, "memory")) {
        Some(m) => attr_cpuset(m, "nodeset")?
            .map(|s| s.to_vec())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut cell_nodes: Vec<(u32, Vec<u32>)> = Vec::new();
    if let Some(nt) = numatune {
        for mn in children(nt, "memnode") {
            let Some(id) = mn
                .attribute("cellid")
                .and_then(|v| v.trim().parse::<u32>().ok())
            else {
                continue;
            };
            let nodes = attr_cpuset(mn, "nodeset")?
                .map(|s| s.to_vec())
                .unwrap_or_default();
            cell_nodes.push((id, nodes));
        }
    }
    let nodes_of_cell = |id: u32| -> (Vec<u32>, String) {
        match cell_nodes.iter().find(|(c, _)| *c == id) {
            Some((_, n)) if !n.is_empty() => (n.clone(), format!("<memnode cellid='{id}'>")),
            _ => (whole.clone(), "<numatune><memory>".into()),
        }
    };

    // Page sizes: each <page> covers the guest cells in its nodeset; one without a nodeset
    // covers the rest. No <page> at all: the host's default hugepage size (2 MiB on x86).
    let mut pages: Vec<(u64, Option<CpuSet>)> = Vec::new();
    for p in children(hp, "page") {
        let size = scaled(
            p.attribute("size").unwrap_or(""),
            p.attribute("unit"),
            1024,
            "<page size>",
        )?;
        if size < 4096 {
            return Err(EmitError::Invalid(format!(
                "<page size> of {size} bytes is too small"
            )));
        }
        pages.push((size, attr_cpuset(p, "nodeset")?));
    }
    if pages.is_empty() {
        pages.push((2 << 20, None));
    }
    let default_size = pages.iter().find(|(_, ns)| ns.is_none()).map(|(s, _)| *s);

    let mut out: Vec<TenantHugepages> = Vec::new();
    let mut add = |node: Option<u32>, size_kb: u64, n: u64| {
        if n == 0 {
            return;
        }
        match out
            .iter_mut()
            .find(|h| h.node == node && h.size_kb == size_kb)
        {
            Some(h) => h.pages = h.pages.saturating_add(n),
            None => out.push(TenantHugepages {
                node,
                size_kb,
                pages: n,
            }),
        }
    };
    let mut place = |nodes: &[u32], what: &str, size: u64, bytes: u64| {
        let size_kb = size / 1024;
        let n = bytes.div_ceil(size);
        match nodes {
            [] => add(None, size_kb, n),
            [one] => add(Some(*one), size_kb, n),
            many => {
                // the kernel takes them from any node of the set: count an even split
                let k = many.len() as u64;
                for (i, node) in many.iter().enumerate() {
                    add(Some(*node), size_kb, n / k + u64::from((i as u64) < n % k));
                }
                let list: Vec<String> = many.iter().map(u32::to_string).collect();
                notes.push(format!(
                    "{n} hugepages of {size_kb} KiB bound to nodes {} ({what}) are counted evenly split over them",
                    list.join(",")
                ));
            }
        }
    };
    if cells.is_empty() {
        if let Some(size) = default_size.or_else(|| pages.first().map(|(s, _)| *s)) {
            place(&whole, "<numatune><memory>", size, memory);
        }
    } else {
        for (id, bytes) in &cells {
            let size = pages
                .iter()
                .find(|(_, ns)| ns.as_ref().is_some_and(|s| s.contains(*id)))
                .map(|(s, _)| *s)
                .or(default_size);
            if let Some(size) = size {
                let (nodes, what) = nodes_of_cell(*id);
                place(&nodes, &what, size, *bytes);
            }
        }
    }
    Ok(out)
}

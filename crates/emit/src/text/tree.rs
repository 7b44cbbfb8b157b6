//! The host as the indented tree `vmtune topo` prints, like `lstopo`: packages, dies, NUMA
//! nodes, caches and cores nested by the CPUs they cover, devices under their node.

use std::fmt::Write as _;

use topo::{CpuSet, DeviceKind, Host, MemoryKind};

use super::human_bytes;

/// A node of the rendered tree: an object covering `cpus`, ranked for ties.
struct Obj {
    rank: u8,
    label: String,
    cpus: CpuSet,
    /// NUMA node os_index, for attaching devices.
    numa: Option<u32>,
}

/// The host as an indented tree, as `vmtune topo` prints it: a two-line summary, the
/// packages, dies, NUMA nodes, caches and cores nested by the CPUs they cover (devices under
/// their node), memory-only nodes, devices of unknown locality, NUMA distances, VFIO nodes
/// and interrupts.
pub fn host_tree(host: &Host) -> String {
    let mut out = String::new();
    summary(host, &mut out);
    let objs = objects(host);
    let (roots, children) = nest(&objs);
    let mut shown_devs = Vec::new();
    for r in roots {
        render_obj(host, &objs, &children, r, 1, &mut out, &mut shown_devs);
    }
    for node in host.numa_nodes.iter().filter(|n| n.is_cpuless()) {
        let _ = writeln!(out, "  {}", numa_label(host, node.os_index));
        render_devices(host, node.os_index, 2, &mut out, &mut shown_devs);
    }
    let rest: Vec<_> = host
        .pci_devices
        .iter()
        .filter(|d| show_device(d) && !shown_devs.contains(&d.bdf))
        .collect();
    if !rest.is_empty() {
        let _ = writeln!(out, "  PCI devices with unknown NUMA locality:");
        for d in rest {
            let _ = writeln!(out, "    {}", device_line(host, d));
        }
    }
    if let Some(d) = &host.distances {
        distances(d, &mut out);
    }
    if let Some(v) = &host.vfio {
        let _ = writeln!(out, "  VFIO nodes: {}", vfio_nodes_line(v));
    }
    if let Some(t) = &host.interrupts {
        let vfio = t.irqs.iter().filter(|i| i.is_vfio()).count();
        let _ = writeln!(
            out,
            "  Interrupts: {} rows over {} CPUs, {} VFIO vectors",
            t.irqs.len(),
            t.cpus.len(),
            vfio
        );
    }
    out
}

/// The first two lines: the host's name, source and architecture; its counts and memory.
fn summary(host: &Host, out: &mut String) {
    let mem: u64 = host.numa_nodes.iter().filter_map(|n| n.memory_bytes).sum();
    let _ = writeln!(
        out,
        "Host {} — {}, {}",
        host.name.as_deref().unwrap_or("(no host name in source)"),
        host.source,
        host.arch.as_deref().unwrap_or("architecture unknown")
    );
    let _ = writeln!(
        out,
        "  {} PUs, {} cores, {}, {}, {} NUMA node(s){}{}",
        host.pus.len(),
        host.cores.len(),
        match host.l3_count() {
            Some(0) => "no L3".to_string(),
            Some(n) => format!("{n} L3"),
            None => "L3 unknown".to_string(),
        },
        match host.packages.len() {
            0 => "packages unknown".to_string(),
            n => format!("{n} package(s)"),
        },
        host.numa_nodes.len(),
        if host.numa_nodes.iter().any(|n| n.memory_bytes.is_none()) {
            // a sum over the nodes whose size is known would pass for the host's
            ", memory unknown".to_string()
        } else {
            format!(", {} memory", human_bytes(mem))
        },
        match host.tsc_stable {
            Some(true) => ", stable TSC",
            Some(false) => ", TSC not stable",
            None => "",
        }
    );
}

/// The tree's objects: packages, dies, NUMA nodes with CPUs, data and unified caches, cores.
fn objects(host: &Host) -> Vec<Obj> {
    let mut objs: Vec<Obj> = Vec::new();
    for p in &host.packages {
        let model = p
            .model
            .as_deref()
            .map(|m| format!(" \"{m}\""))
            .unwrap_or_default();
        objs.push(Obj {
            rank: 0,
            label: format!("Package P#{}{model}", os(p.os_index, p.id)),
            cpus: p.cpus.clone(),
            numa: None,
        });
    }
    for d in &host.dies {
        objs.push(Obj {
            rank: 1,
            label: format!("Die #{}", d.id),
            cpus: d.cpus.clone(),
            numa: None,
        });
    }
    for n in host.numa_nodes.iter().filter(|n| !n.is_cpuless()) {
        objs.push(Obj {
            rank: 2,
            label: numa_label(host, n.os_index),
            cpus: n.cpus.clone(),
            numa: Some(n.os_index),
        });
    }
    for c in &host.caches {
        if c.cache_type == topo::CacheType::Instruction {
            continue;
        }
        let size = c
            .size_bytes
            .map(|s| format!(" ({})", human_bytes(s)))
            .unwrap_or_default();
        let kind = if c.cache_type == topo::CacheType::Data {
            "d"
        } else {
            ""
        };
        objs.push(Obj {
            rank: 6 - c.level.min(3),
            label: format!("L{}{kind} #{}{size}", c.level, c.id),
            cpus: c.cpus.clone(),
            numa: None,
        });
    }
    for c in &host.cores {
        let kind = c
            .pus
            .first()
            .and_then(|p| host.pu(p))
            .and_then(|p| p.kind.clone())
            .map(|k| format!(" [{k}]"))
            .unwrap_or_default();
        objs.push(Obj {
            rank: 7,
            label: format!("Core #{}{kind}: PU {}", c.id, c.pus),
            cpus: c.pus.clone(),
            numa: None,
        });
    }
    objs
}

/// The objects nested: the roots and each object's children, by first CPU and rank. An
/// object's parent is the smallest object strictly larger, or with equal CPUs and a lower rank.
fn nest(objs: &[Obj]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let contains = |a: &Obj, b: &Obj| -> bool {
        b.cpus.is_subset(&a.cpus) && (a.cpus.len() > b.cpus.len() || a.rank < b.rank)
    };
    let n = objs.len();
    let parent: Vec<Option<usize>> = (0..n)
        .map(|i| {
            let mut best: Option<usize> = None;
            for (j, cand) in objs.iter().enumerate() {
                if i != j && contains(cand, &objs[i]) {
                    best = match best {
                        Some(b) if !contains(&objs[b], cand) => Some(b),
                        _ => Some(j),
                    };
                }
            }
            best
        })
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (i, p) in parent.iter().enumerate() {
        match p {
            Some(p) => children[*p].push(i),
            None => roots.push(i),
        }
    }
    let key = |i: &usize| (objs[*i].cpus.first(), objs[*i].rank);
    roots.sort_by_key(key);
    for c in &mut children {
        c.sort_by_key(key);
    }
    (roots, children)
}

/// The NUMA distance matrix, up to 16 nodes; past that, its size.
fn distances(d: &topo::Distances, out: &mut String) {
    if d.nodes.len() > 1 && d.nodes.len() <= 16 {
        let _ = writeln!(out, "  NUMA distances:");
        let _ = writeln!(
            out,
            "    {:>5}{}",
            "",
            d.nodes
                .iter()
                .map(|n| format!("{n:>5}"))
                .collect::<String>()
        );
        for (i, row) in d.matrix.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {:>5}{}",
                d.nodes[i],
                row.iter().map(|v| format!("{v:>5}")).collect::<String>()
            );
        }
    } else if d.nodes.len() > 16 {
        let _ = writeln!(
            out,
            "  NUMA distances: {}x{} matrix (see --json)",
            d.nodes.len(),
            d.nodes.len()
        );
    }
}

/// `/dev/vfio/vfio (10:196), /dev/iommu (10:124), groups /dev/vfio/1 (243:0)`, naming what
/// the host lacks.
fn vfio_nodes_line(v: &topo::VfioNodes) -> String {
    let node = |path: &str, dev: Option<topo::DevNumber>| match dev {
        Some(n) => format!("{path} ({n})"),
        None => format!("no {path}"),
    };
    let groups = if v.groups.is_empty() {
        "no VFIO groups".to_string()
    } else {
        let list: Vec<String> = v
            .groups
            .iter()
            .map(|g| match g.dev {
                Some(n) => format!("{} ({n})", g.path()),
                None => g.path(),
            })
            .collect();
        format!("groups {}", list.join(", "))
    };
    format!(
        "{}, {}, {groups}",
        node("/dev/vfio/vfio", v.container),
        node("/dev/iommu", v.iommufd)
    )
}

fn os(os_index: Option<u32>, id: u32) -> u32 {
    os_index.unwrap_or(id)
}

fn numa_label(host: &Host, node: u32) -> String {
    let Some(n) = host.numa_node(node) else {
        return format!("NUMANode N#{node}");
    };
    let mut s = format!("NUMANode N#{}", n.os_index);
    let mut attrs = Vec::new();
    if let Some(m) = n.memory_bytes {
        attrs.push(human_bytes(m));
    }
    match n.memory_kind {
        MemoryKind::Dram => {}
        MemoryKind::Hbm => attrs.push("HBM".into()),
        MemoryKind::Gpu => attrs.push("GPU memory".into()),
        MemoryKind::Nvm => attrs.push("NVM".into()),
        MemoryKind::Unknown => attrs.push("memory only".into()),
    }
    if n.is_cpuless() && n.memory_kind != MemoryKind::Unknown {
        attrs.push("no CPUs".into());
    }
    if n.is_cpuless() {
        // where a memory-only node (HBM, CXL, GPU memory) is closest to, by the SLIT
        let with_cpus: Vec<(u32, u32)> = host
            .numa_nodes
            .iter()
            .filter(|o| !o.is_cpuless())
            .filter_map(|o| Some((host.distance(n.os_index, o.os_index)?, o.os_index)))
            .collect();
        if let Some(d) = with_cpus.iter().map(|(d, _)| *d).min() {
            let ties: Vec<String> = with_cpus
                .iter()
                .filter(|(e, _)| *e == d)
                .map(|(_, o)| format!("N#{o}"))
                .collect();
            attrs.push(format!("nearest CPUs: {}, distance {d}", ties.join(" ")));
        }
    }
    // empty pools (the usual state) would only add noise to every node
    for h in n.hugepages.iter().filter(|h| h.total != Some(0)) {
        let size = if h.size_kb >= 1 << 20 {
            format!("{}G", h.size_kb >> 20)
        } else {
            format!("{}M", h.size_kb >> 10)
        };
        match (h.free, h.total) {
            (Some(f), Some(t)) => attrs.push(format!("hugepages {size} {f}/{t} free")),
            (None, Some(t)) => attrs.push(format!("hugepages {size} {t}")),
            _ => {}
        }
    }
    if !attrs.is_empty() {
        s.push_str(&format!(" ({})", attrs.join(", ")));
    }
    s
}

/// Bridges are plumbing, except one a VFIO driver owns (an NVSwitch is an "other bridge"
/// that is passed through like a GPU).
fn show_device(d: &topo::PciDevice) -> bool {
    !matches!(d.kind, DeviceKind::Bridge) || d.vfio_bound()
}

fn device_line(host: &Host, d: &topo::PciDevice) -> String {
    let kind = match d.kind {
        DeviceKind::Gpu => "GPU",
        DeviceKind::Nic => "NIC",
        DeviceKind::Storage => "Storage",
        DeviceKind::Accelerator => "Accel",
        DeviceKind::Bridge => "Bridge",
        DeviceKind::Other => "PCI",
    };
    let id = match (d.vendor_id, d.device_id) {
        (Some(v), Some(dev)) => format!("{v:04x}:{dev:04x}"),
        (Some(v), None) => format!("{v:04x}:unknown device"),
        _ => "unknown id".to_string(),
    };
    let mut s = format!("{kind} {} [{id}]", d.bdf);
    if let Some(n) = &d.name {
        s.push_str(&format!(" \"{n}\""));
    }
    if !d.os_devices.is_empty() {
        s.push_str(&format!(" ({})", d.os_devices.join(", ")));
    }
    let mut attrs = Vec::new();
    if let Some(c) = &d.local_cpus {
        attrs.push(format!("local CPUs {c}"));
    }
    if let Some(g) = d.iommu_group {
        attrs.push(format!("IOMMU group {g}"));
    }
    if let Some(drv) = &d.driver {
        attrs.push(drv.clone());
    }
    if let Some(c) = &d.vfio_cdev {
        let dev = c.dev.map(|n| format!(" ({n})")).unwrap_or_default();
        attrs.push(format!("VFIO cdev {}{dev}", c.path()));
    }
    if let Some(big) = d.bars.iter().map(|b| b.size_bytes).max() {
        attrs.push(format!("largest BAR {}", human_bytes(big)));
    }
    if let Some(m) = &d.msi_irqs {
        if !m.is_empty() {
            attrs.push(format!("{} MSI IRQs", m.len()));
        }
    }
    attrs.extend(link_attrs(host, d));
    if !attrs.is_empty() {
        s.push_str(&format!(" — {}", attrs.join(", ")));
    }
    s
}

/// The links from `d` up that run below what they can do: `PCIe 2.5 GT/s x16 of 16 GT/s x16
/// DOWNGRADED`, or `... above at 0000:00:01.0` for a bridge's. A healthy link says nothing.
fn link_attrs(host: &Host, d: &topo::PciDevice) -> Vec<String> {
    host.downgraded_links(&d.bdf)
        .into_iter()
        .filter_map(|at| {
            let l = at.link.as_ref()?;
            let whose = if at.bdf == d.bdf {
                String::new()
            } else {
                format!(" above at {}", at.bdf)
            };
            Some(format!("PCIe {}{whose} DOWNGRADED", l.figures()))
        })
        .collect()
}

fn render_devices(host: &Host, node: u32, depth: usize, out: &mut String, shown: &mut Vec<String>) {
    for d in host.pci_devices.iter().filter(|d| show_device(d)) {
        if d.numa.as_ref().is_some_and(|n| n.contains(&node)) && !shown.contains(&d.bdf) {
            let _ = writeln!(out, "{}{}", "  ".repeat(depth), device_line(host, d));
            shown.push(d.bdf.clone());
        }
    }
}

fn render_obj(
    host: &Host,
    objs: &[Obj],
    children: &[Vec<usize>],
    i: usize,
    depth: usize,
    out: &mut String,
    shown: &mut Vec<String>,
) {
    // merge chains of single children covering the same CPUs: "L2 #0 + L1d #0 + Core #0"
    let mut label = objs[i].label.clone();
    let mut cur = i;
    let mut numa = objs[i].numa;
    while children[cur].len() == 1 && objs[children[cur][0]].cpus == objs[cur].cpus {
        cur = children[cur][0];
        label.push_str(" + ");
        label.push_str(&objs[cur].label);
        numa = numa.or(objs[cur].numa);
    }
    let _ = writeln!(out, "{}{}", "  ".repeat(depth), label);
    if let Some(node) = numa {
        render_devices(host, node, depth + 1, out, shown);
    }
    for &c in &children[cur] {
        render_obj(host, objs, children, c, depth + 1, out, shown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that names no package or no node size says so: it printed "1 package(s)", a
    /// made-up count, and left the memory out.
    #[test]
    fn unknown_packages_and_memory_are_said() {
        let mut host = topo::builtin::default_host();
        let head = |h: &Host| host_tree(h).lines().nth(1).unwrap_or_default().to_string();
        assert!(head(&host).contains(", 1 package(s),"), "{}", head(&host));
        host.packages.clear();
        assert!(
            head(&host).contains(", packages unknown,"),
            "{}",
            head(&host)
        );
        // nor is a memory size it does not give made up, or left out without a word
        assert!(head(&host).contains(", 32 GiB memory"), "{}", head(&host));
        host.numa_nodes[0].memory_bytes = None;
        assert!(head(&host).contains(", memory unknown"), "{}", head(&host));
    }
}

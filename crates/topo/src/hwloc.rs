//! hwloc XML loader: the files `lstopo file.xml` writes, in the three formats found in the wild.
//!
//! - **v1** (hwloc 1.x, `<topology>` without `version`): NUMA nodes are ordinary levels that
//!   contain packages, caches and cores; caches are `type="Cache"` with `depth` and
//!   `cache_type`; NUMA distances are `<distances relative_depth latency_base>` with
//!   `<latency value>` children (relative values, multiplied by `latency_base`).
//! - **v2** (`version="2.0"`): NUMA nodes (and memory-side `MemCache`s) are *memory
//!   children* attached beside the normal children of the object whose CPUs they serve, so a
//!   NUMA node's `cpuset` is its attachment point's; caches are `L3Cache`/`L2Cache`/
//!   `L1Cache`/`L1iCache`; `Die` and `Group` levels; distances are `<distances2>` matrices;
//!   hybrid CPUs are `<cpukind>` elements after the root object.
//! - **v3** (`version="3.0"`, hwloc master): as v2, plus `id="objN"`, a programming-interface
//!   byte at the end of `pci_type`, `osdev_type` as a bitmask, topology-wide `<info>` after the
//!   root object (HostName moved there), `<pci_locality>` elements, and no `page_type`
//!   (hwloc PR #744 keeps only a `PageSizes` info): without `page_type` hugepages are left
//!   empty. `<pci_locality>` repeats the locality the I/O tree already gives and is ignored.
//!
//! The loader fills a [`RawTopology`] with the groups of PUs exactly as the file spells them
//! and lets [`RawTopology::assemble`] number them. What hwloc XML does not carry (IOMMU
//! groups, drivers, MSI IRQs, BARs, the interrupt table, free hugepages, TSC stability) is
//! left `None`/empty.
//!
//! Which NUMA node owns which CPUs: in v2/v3 several NUMA nodes attached at one object share
//! that object's cpuset, but Linux puts every CPU in exactly one node. The node attached
//! deepest wins its CPUs; among nodes attached at the same object, ordinary memory (no special
//! `subtype` such as `HBM`/`MCDRAM`/`GPUMemory`, no `DAXDevice`) wins over special memory,
//! then the lowest os_index. The others are CPU-less, which is what Linux reports for them
//! (Xeon Max flat-mode HBM, KNL MCDRAM, GPU memory nodes).
//!
//! A PCI device's NUMA locality is the nodeset of its nearest non-I/O ancestor (the object
//! its host bridge hangs from) and its local CPUs that ancestor's cpuset, as `lstopo` shows.

use std::path::Path;

use roxmltree::{Document, Node, ParsingOptions};

use crate::cpuset::{CpuSet, MAX_CPU};
use crate::error::TopoError;
use crate::model::*;

/// At most this many XML nodes are parsed (a 2-socket 384-PU file has ~10,000; the largest
/// machines hwloc describes have a few hundred thousand).
const MAX_XML_NODES: u32 = 8_000_000;
/// Objects nested deeper than this are refused (real files nest fewer than 40 levels).
const MAX_DEPTH: usize = 256;
/// Largest `nbobjs` accepted in a distance matrix.
const MAX_DISTANCE_OBJS: u64 = 1 << 16;

/// Load an hwloc XML file.
pub fn load_file(path: &Path) -> Result<Host, TopoError> {
    let bytes = std::fs::read(path).map_err(|e| TopoError::io(path, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        TopoError::format(
            path,
            format!(
                "not hwloc XML: not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    parse_str(text, path)
}

/// Parse hwloc XML text; `path` names the source in errors.
pub fn parse_str(text: &str, path: &Path) -> Result<Host, TopoError> {
    if text.trim().is_empty() {
        return Err(TopoError::format(path, "empty file, expected hwloc XML"));
    }
    let opts = ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_XML_NODES,
    };
    let doc = Document::parse_with_options(text, opts).map_err(|e| {
        let mut msg = one_line(&e.to_string());
        if matches!(
            e,
            roxmltree::Error::UnexpectedEndOfStream | roxmltree::Error::UnclosedRootNode
        ) {
            // these carry no position: say where the text stops
            let lines = text.lines().count();
            msg.push_str(&format!(
                " at line {lines}, the end of the file (truncated?)"
            ));
        }
        TopoError::Xml {
            path: path.to_path_buf(),
            msg,
        }
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(TopoError::format(
            path,
            format!(
                "not an hwloc topology: the root element is <{}>, expected <topology>",
                clip(root.tag_name().name())
            ),
        ));
    }
    let mut loader = Loader::new(path, &doc);
    loader.version = loader.parse_version(root)?;
    loader.load(root)?;
    loader.finish()
}

// ---------------------------------------------------------------------------------------------
// Raw records gathered while walking the tree.
// ---------------------------------------------------------------------------------------------

/// A cpuset or nodeset as written: `None` is hwloc's infinite `0xf...f` ("everything").
type Bitmap = Option<CpuSet>;

/// A cache as read: level, type, size, line size, ways, cpuset.
type CacheRec = (u8, CacheType, Option<u64>, Option<u32>, Option<u32>, Bitmap);

/// A non-I/O object that I/O objects may hang from.
struct Anchor {
    cpuset: Bitmap,
    /// `None` when the object has no `nodeset` attribute (old v1 files).
    nodeset: Option<Bitmap>,
}

struct RawNuma {
    os_index: u32,
    cpuset: Bitmap,
    /// Number of normal ancestors of the attachment point (deeper wins the CPUs).
    depth: usize,
    special: bool,
    subtype: Option<String>,
    memory: Option<u64>,
    hugepages: Vec<HugePages>,
    gp_index: Option<u64>,
}

struct RawPci {
    dev: PciDevice,
    anchor: usize,
    gpu_osdev: bool,
    coproc_osdev: bool,
}

struct RawDistances {
    name: Option<String>,
    latency: bool,
    /// Node os_indexes (already resolved from gp indexes where needed).
    nodes: Vec<u32>,
    values: Vec<u64>,
}

/// What an `<object>` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Machine,
    Package,
    Die,
    Group,
    Core,
    Pu,
    /// A CPU cache; the level from the type name where it has one (`Cache` in v1 has none).
    Cache(Option<u8>, Option<CacheType>),
    Numa,
    MemCache,
    Bridge,
    PciDev,
    OsDev,
    Misc,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        let k = match s.to_ascii_lowercase().as_str() {
            "machine" | "system" => Kind::Machine,
            "package" | "socket" => Kind::Package,
            "die" => Kind::Die,
            "group" | "tile" | "module" => Kind::Group,
            "core" => Kind::Core,
            "pu" => Kind::Pu,
            "cache" => Kind::Cache(None, None),
            "l1cache" => Kind::Cache(Some(1), None),
            "l2cache" => Kind::Cache(Some(2), None),
            "l3cache" => Kind::Cache(Some(3), None),
            "l4cache" => Kind::Cache(Some(4), None),
            "l5cache" => Kind::Cache(Some(5), None),
            "l1icache" => Kind::Cache(Some(1), Some(CacheType::Instruction)),
            "l2icache" => Kind::Cache(Some(2), Some(CacheType::Instruction)),
            "l3icache" => Kind::Cache(Some(3), Some(CacheType::Instruction)),
            "numanode" | "node" => Kind::Numa,
            "memcache" => Kind::MemCache,
            "bridge" => Kind::Bridge,
            "pcidev" => Kind::PciDev,
            "osdev" => Kind::OsDev,
            "misc" => Kind::Misc,
            _ => return None,
        };
        Some(k)
    }

    fn is_io(self) -> bool {
        matches!(self, Kind::Bridge | Kind::PciDev | Kind::OsDev)
    }

    /// Objects that PCI host bridges can hang from (hwloc's "normal" objects; in v1 NUMA
    /// nodes are normal too).
    fn is_anchor(self) -> bool {
        !self.is_io() && !matches!(self, Kind::MemCache | Kind::Misc)
    }
}

/// Where we are in the tree.
#[derive(Clone)]
struct Ctx {
    depth: usize,
    /// Number of normal (non-memory, non-I/O) ancestors.
    normal_depth: usize,
    anchor: Option<usize>,
    /// Index into `pci` of the nearest PCI function ancestor (for OS devices).
    pci: Option<usize>,
    /// Inside an I/O object (only I/O objects may appear there).
    in_io: bool,
    /// BDF of the nearest PCI-to-PCI bridge ancestor.
    upstream: Option<String>,
}

struct Loader<'a, 'input> {
    path: &'a Path,
    doc: &'a Document<'input>,
    /// 1, 2 or 3.
    version: u32,
    name: Option<String>,
    /// The root object's (v3: the topology's) `Architecture` info.
    arch: Option<String>,
    pus: CpuSet,
    cores: Vec<(Option<u32>, Bitmap)>,
    packages: Vec<(Option<u32>, Bitmap, Option<String>)>,
    dies: Vec<(Option<u32>, Bitmap)>,
    /// `Group` objects (and v1's inner `Machine`s): they only order the levels below them.
    groups: Vec<Bitmap>,
    caches: Vec<CacheRec>,
    cpu_kinds: Vec<CpuKind>,
    cpu_kind_sets: Vec<Bitmap>,
    numa: Vec<RawNuma>,
    numa_seen: CpuSet,
    anchors: Vec<Anchor>,
    pci: Vec<RawPci>,
    distances: Vec<RawDistances>,
    /// v1 distances, resolved after the walk (they name objects by logical index).
    v1_distances: Vec<Node<'a, 'input>>,
    /// Machine-wide memory of v1 files without NUMA nodes.
    root_memory: Option<u64>,
    root_hugepages: Vec<HugePages>,
    root_cpuset: Bitmap,
}

impl<'a, 'input> Loader<'a, 'input> {
    fn new(path: &'a Path, doc: &'a Document<'input>) -> Self {
        Loader {
            path,
            doc,
            version: 2,
            name: None,
            arch: None,
            pus: CpuSet::new(),
            cores: Vec::new(),
            packages: Vec::new(),
            dies: Vec::new(),
            groups: Vec::new(),
            caches: Vec::new(),
            cpu_kinds: Vec::new(),
            cpu_kind_sets: Vec::new(),
            numa: Vec::new(),
            numa_seen: CpuSet::new(),
            anchors: Vec::new(),
            pci: Vec::new(),
            distances: Vec::new(),
            v1_distances: Vec::new(),
            root_memory: None,
            root_hugepages: Vec::new(),
            root_cpuset: None,
        }
    }

    // --- errors and attribute helpers ---------------------------------------------------------

    fn line(&self, node: Node) -> u32 {
        self.doc.text_pos_at(node.range().start).row
    }

    fn err(&self, node: Node, msg: impl std::fmt::Display) -> TopoError {
        TopoError::format(self.path, format!("line {}: {}", self.line(node), msg))
    }

    fn what(node: Node) -> String {
        match node.attribute("type") {
            Some(t) => format!("<{} type=\"{}\">", node.tag_name().name(), clip(t)),
            None => format!("<{}>", node.tag_name().name()),
        }
    }

    /// A non-negative integer attribute (decimal; `0x` hex accepted). hwloc's "unknown index"
    /// (`-1` or 4294967295) reads as `None`.
    fn attr_u64(&self, node: Node, name: &str) -> Result<Option<u64>, TopoError> {
        let Some(v) = node.attribute(name) else {
            return Ok(None);
        };
        let t = v.trim();
        if t == "-1" {
            return Ok(None);
        }
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => t.parse::<u64>().ok(),
        };
        match parsed {
            Some(n) => Ok(Some(n)),
            None => Err(self.err(
                node,
                format!(
                    "{} has {name}=\"{}\", not a number",
                    Self::what(node),
                    clip(v)
                ),
            )),
        }
    }

    fn attr_u32(&self, node: Node, name: &str) -> Result<Option<u32>, TopoError> {
        match self.attr_u64(node, name)? {
            None => Ok(None),
            Some(n) if n == u64::from(u32::MAX) => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| {
                self.err(
                    node,
                    format!("{} has {name}={n}, too large", Self::what(node)),
                )
            }),
        }
    }

    fn attr_f64(&self, node: Node, name: &str) -> Result<Option<f64>, TopoError> {
        let Some(v) = node.attribute(name) else {
            return Ok(None);
        };
        match v.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Some(f)),
            _ => Err(self.err(
                node,
                format!(
                    "{} has {name}=\"{}\", not a number",
                    Self::what(node),
                    clip(v)
                ),
            )),
        }
    }

    fn bitmap(&self, node: Node, name: &str) -> Result<Option<Bitmap>, TopoError> {
        let Some(v) = node.attribute(name) else {
            return Ok(None);
        };
        CpuSet::parse_hwloc(v).map(Some).map_err(|e| {
            self.err(
                node,
                format!("{} has a bad {name}: {}", Self::what(node), e.reason),
            )
            .with_value(v)
        })
    }

    /// The `<info name value>` children of an element, in order.
    fn info<'n>(node: Node<'n, '_>, name: &str) -> Option<&'n str> {
        node.children()
            .filter(|c| c.has_tag_name("info") && c.attribute("name") == Some(name))
            .find_map(|c| c.attribute("value"))
    }

    // --- the walk -----------------------------------------------------------------------------

    fn parse_version(&self, root: Node) -> Result<u32, TopoError> {
        let Some(v) = root.attribute("version") else {
            return Ok(1);
        };
        let major = v.trim().split('.').next().unwrap_or("").parse::<u32>().ok();
        match major {
            Some(m @ 1..=3) => Ok(m),
            _ => Err(self.err(
                root,
                format!(
                    "unsupported hwloc XML version \"{}\" (supported: 1.x, 2.x, 3.x)",
                    clip(v)
                ),
            )),
        }
    }

    fn load(&mut self, root: Node<'a, 'input>) -> Result<(), TopoError> {
        let mut objects = root.children().filter(|c| c.has_tag_name("object"));
        let Some(top) = objects.next() else {
            return Err(self.err(root, "hwloc topology without a root <object>"));
        };
        let ctx = Ctx {
            depth: 0,
            normal_depth: 0,
            anchor: None,
            pci: None,
            in_io: false,
            upstream: None,
        };
        self.object(top, &ctx, true)?;
        // Everything after the root object: distances, cpukinds, topology infos (v3), ...
        for child in root.children().filter(|c| c.is_element()) {
            match child.tag_name().name() {
                "object" if child != top => {
                    return Err(self.err(child, "more than one root <object>"));
                }
                "distances2" => self.distances2(child, false)?,
                "distances2hetero" => self.distances2(child, true)?,
                "cpukind" => self.cpukind(child)?,
                "info" if child.attribute("name") == Some("HostName") && self.name.is_none() => {
                    self.name = child.attribute("value").map(str::to_string);
                }
                "info"
                    if child.attribute("name") == Some("Architecture") && self.arch.is_none() =>
                {
                    self.arch = child.attribute("value").map(str::to_string);
                }
                // <support>, <memattr>, <pci_locality> (v3: bus ranges and their cpusets,
                // the same locality the I/O tree already shows) carry nothing the model holds.
                _ => {}
            }
        }
        Ok(())
    }

    fn object(
        &mut self,
        node: Node<'a, 'input>,
        ctx: &Ctx,
        is_root: bool,
    ) -> Result<(), TopoError> {
        if ctx.depth > MAX_DEPTH {
            return Err(self.err(
                node,
                format!("objects nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        let Some(type_s) = node.attribute("type") else {
            return Err(self.err(node, "<object> without a type attribute"));
        };
        let Some(mut kind) = Kind::parse(type_s) else {
            return Err(self.err(node, format!("unknown object type \"{}\"", clip(type_s))));
        };
        if kind == Kind::Misc {
            // Misc objects (memory modules, user annotations) hold nothing we model.
            return Ok(());
        }
        if kind == Kind::Machine && !is_root {
            kind = Kind::Group;
        }
        if kind == Kind::Group && node.attribute("subtype") == Some("Die") {
            kind = Kind::Die;
        }
        if ctx.in_io && !kind.is_io() {
            return Err(self.err(node, format!("{} inside an I/O object", Self::what(node))));
        }

        let cpuset = self.bitmap(node, "cpuset")?;
        let needs_cpuset = !kind.is_io() && kind != Kind::MemCache;
        let cpuset: Bitmap = match cpuset {
            Some(c) => c,
            None if needs_cpuset && kind != Kind::Machine => {
                return Err(self.err(node, format!("{} without a cpuset", Self::what(node))));
            }
            None => None,
        };
        let os_index = self.attr_u32(node, "os_index")?;

        let mut child_ctx = Ctx {
            depth: ctx.depth + 1,
            in_io: kind.is_io(),
            ..ctx.clone()
        };
        if kind.is_anchor() {
            let nodeset = self.bitmap(node, "nodeset")?;
            self.anchors.push(Anchor {
                cpuset: cpuset.clone(),
                nodeset,
            });
            child_ctx.anchor = Some(self.anchors.len() - 1);
            if kind != Kind::Numa || self.version == 1 {
                child_ctx.normal_depth = ctx.normal_depth + 1;
            }
        }

        match kind {
            Kind::Machine => {
                self.root_cpuset = cpuset.clone();
                if let Some(h) = Self::info(node, "HostName") {
                    self.name = Some(h.to_string());
                }
                if let Some(a) = Self::info(node, "Architecture") {
                    self.arch = Some(a.to_string());
                }
                self.root_memory = self.attr_u64(node, "local_memory")?.filter(|&m| m > 0);
                self.root_hugepages = self.page_types(node)?;
            }
            Kind::Package => {
                let model = Self::info(node, "CPUModel").map(|m| m.trim().to_string());
                self.packages.push((os_index, cpuset, model));
            }
            Kind::Die => self.dies.push((os_index, cpuset)),
            Kind::Group => self.groups.push(cpuset.clone()),
            Kind::Core => self.cores.push((os_index, cpuset)),
            Kind::Pu => {
                let Some(os) = os_index else {
                    return Err(self.err(node, "PU without an os_index"));
                };
                if os > MAX_CPU {
                    return Err(self.err(node, format!("PU os_index {os} above {MAX_CPU}")));
                }
                if self.pus.contains(os) {
                    return Err(self.err(node, format!("PU P#{os} appears twice")));
                }
                self.pus.insert(os);
            }
            Kind::Cache(level, ctype) => self.cache(node, level, ctype, cpuset)?,
            Kind::Numa => self.numa_node(node, os_index, cpuset, ctx)?,
            Kind::MemCache => {}
            Kind::Bridge | Kind::PciDev => {
                if let Some(i) = self.pci_function(node, kind, ctx)? {
                    child_ctx.pci = Some(i);
                    if kind == Kind::Bridge {
                        child_ctx.upstream = Some(self.pci[i].dev.bdf.clone());
                    }
                }
            }
            Kind::OsDev => self.os_device(node, ctx)?,
            Kind::Misc => {}
        }

        for child in node.children().filter(|c| c.is_element()) {
            match child.tag_name().name() {
                "object" => self.object(child, &child_ctx, false)?,
                "distances" => self.v1_distances.push(child),
                _ => {}
            }
        }
        Ok(())
    }

    fn cache(
        &mut self,
        node: Node,
        level: Option<u8>,
        ctype: Option<CacheType>,
        cpuset: Bitmap,
    ) -> Result<(), TopoError> {
        let depth = self.attr_u32(node, "depth")?;
        let level = match (level, depth) {
            (Some(l), _) => l,
            (None, Some(d)) if (1..=255).contains(&d) => d as u8,
            (None, _) => {
                return Err(self.err(node, "Cache object without a valid depth attribute"));
            }
        };
        let ctype = match self.attr_u32(node, "cache_type")? {
            _ if ctype.is_some() => ctype.unwrap_or(CacheType::Unified),
            None | Some(0) => CacheType::Unified,
            Some(1) => CacheType::Data,
            Some(2) => CacheType::Instruction,
            Some(t) => {
                return Err(self.err(node, format!("invalid cache_type {t} (0, 1 or 2)")));
            }
        };
        let size = self.attr_u64(node, "cache_size")?.filter(|&s| s > 0);
        let line = self.attr_u32(node, "cache_linesize")?.filter(|&l| l > 0);
        // associativity: 0 unknown, -1 fully associative (no way count)
        let ways = match node.attribute("cache_associativity").map(str::trim) {
            None | Some("-1") => None,
            Some(_) => self
                .attr_u32(node, "cache_associativity")?
                .filter(|&w| w > 0),
        };
        self.caches.push((level, ctype, size, line, ways, cpuset));
        Ok(())
    }

    /// `<page_type size count>` children: hugepage sizes (the base page size is skipped).
    fn page_types(&self, node: Node) -> Result<Vec<HugePages>, TopoError> {
        let mut all = Vec::new();
        for pt in node.children().filter(|c| c.has_tag_name("page_type")) {
            let Some(size) = self.attr_u64(pt, "size")? else {
                return Err(self.err(pt, "page_type without a size"));
            };
            let count = self.attr_u64(pt, "count")?;
            if size > 0 {
                all.push((size, count));
            }
        }
        let base = all.iter().map(|(s, _)| *s).min().unwrap_or(0);
        Ok(all
            .into_iter()
            // the smallest size is the base page (4 KiB on x86, 64 KiB on POWER/ARM),
            // not a hugepage
            .filter(|(s, _)| !(*s == base && base <= 65536))
            .map(|(size, count)| HugePages {
                size_kb: size / 1024,
                total: count,
                free: None,
            })
            .collect())
    }

    fn numa_node(
        &mut self,
        node: Node,
        os_index: Option<u32>,
        cpuset: Bitmap,
        ctx: &Ctx,
    ) -> Result<(), TopoError> {
        let Some(os) = os_index else {
            return Err(self.err(node, "NUMANode without an os_index"));
        };
        if os > MAX_CPU {
            return Err(self.err(node, format!("NUMANode os_index {os} above {MAX_CPU}")));
        }
        if self.numa_seen.contains(os) {
            return Err(self.err(node, format!("NUMANode P#{os} appears twice")));
        }
        self.numa_seen.insert(os);
        let subtype = node.attribute("subtype").map(str::to_string);
        let special = subtype
            .as_deref()
            .is_some_and(|s| !s.eq_ignore_ascii_case("DRAM"))
            || Self::info(node, "DAXDevice").is_some();
        let gp_index = match self.attr_u64(node, "gp_index")? {
            Some(g) => Some(g),
            None => node
                .attribute("id")
                .and_then(|id| id.strip_prefix("obj"))
                .and_then(|n| n.parse().ok()),
        };
        self.numa.push(RawNuma {
            os_index: os,
            cpuset,
            depth: ctx.normal_depth,
            special,
            subtype,
            memory: self.attr_u64(node, "local_memory")?.filter(|&m| m > 0),
            hugepages: self.page_types(node)?,
            gp_index,
        });
        Ok(())
    }

    /// A PCI function (`PCIDev`, or a `Bridge` that has a `pci_busid`; host bridges have none).
    fn pci_function(
        &mut self,
        node: Node,
        kind: Kind,
        ctx: &Ctx,
    ) -> Result<Option<usize>, TopoError> {
        let Some(busid) = node.attribute("pci_busid") else {
            if kind == Kind::PciDev {
                return Err(self.err(node, "PCIDev without a pci_busid"));
            }
            return Ok(None);
        };
        let Some(bdf) = parse_busid(busid) else {
            return Err(self.err(
                node,
                format!("bad pci_busid \"{}\" (expected dddd:bb:dd.f)", clip(busid)),
            ));
        };
        let Some(pci_type) = node.attribute("pci_type") else {
            return Err(self.err(node, format!("PCI function {bdf} without a pci_type")));
        };
        let Some(t) = parse_pci_type(pci_type) else {
            return Err(self.err(
                node,
                format!(
                    "bad pci_type \"{}\" (expected \"CCCC [VVVV:DDDD] [SSSS:ssss] RR\")",
                    clip(pci_type)
                ),
            ));
        };
        // Two functions with one address are kept as written: hwloc accepts them (its own test
        // file 32em64t-2n8c2t-pci-normalio.xml has two 0000:04:00.0), and `Host::pci` finds
        // the first.
        let link = self
            .attr_f64(node, "pci_link_speed")?
            .filter(|&l| l > 0.0)
            .map(|l| l as f32);
        let vendor_name = Self::info(node, "PCIVendor")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let device_name = Self::info(node, "PCIDevice")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let name = match (vendor_name, device_name) {
            (Some(v), Some(d)) => Some(format!("{v} {d}")),
            (v, d) => d.or(v).map(str::to_string),
        };
        let (sub_v, sub_d) = if t.subvendor == 0 && t.subdevice == 0 {
            (None, None)
        } else {
            (Some(t.subvendor), Some(t.subdevice))
        };
        let Some(anchor) = ctx.anchor else {
            return Err(self.err(node, "PCI object outside the object tree"));
        };
        // hwloc writes `[0000:0000]` for ids it could not read (POWER sysfs without `vendor`)
        let (vendor_id, device_id) = PciDevice::ids(Some(t.vendor), Some(t.device));
        self.pci.push(RawPci {
            dev: PciDevice {
                bdf,
                vendor_id,
                device_id,
                subsystem_vendor_id: sub_v,
                subsystem_device_id: sub_d,
                class: t.class,
                prog_if: t.prog_if,
                kind: DeviceKind::from_ids(t.class, vendor_id, device_id),
                name,
                numa: None,
                local_cpus: None,
                iommu_group: None,
                driver: None,
                bars: Vec::new(),
                msi_irqs: None,
                irq: None,
                parent: ctx.upstream.clone(),
                os_devices: Vec::new(),
                link_gbps: link,
                // pci_link_speed is LnkSta's bandwidth alone: no maximum to judge it by
                link: None,
                vfio_cdev: None,
            },
            anchor,
            gpu_osdev: false,
            coproc_osdev: false,
        });
        Ok(Some(self.pci.len() - 1))
    }

    fn os_device(&mut self, node: Node, ctx: &Ctx) -> Result<(), TopoError> {
        let osdev_type = self.attr_u64(node, "osdev_type")?;
        let Some(i) = ctx.pci else {
            // block devices, DAX, ... not behind a PCI function in this file
            return Ok(());
        };
        let subtype = node.attribute("subtype").unwrap_or("");
        let gpu_subtype = ["CUDA", "NVML", "RSMI", "LevelZero"]
            .iter()
            .any(|s| subtype.eq_ignore_ascii_case(s));
        let (gpu, coproc) = match (self.version, osdev_type) {
            // v3: bitmask (STORAGE 1, MEMORY 2, GPU 4, COPROC 8, NETWORK 16, OFED 32, DMA 64)
            (3, Some(t)) => (t & 4 != 0, t & 8 != 0),
            // v1/v2: 0 Block, 1 GPU, 2 Net, 3 OpenFabrics, 4 DMA, 5 CoProc
            (_, Some(1)) => (true, false),
            (_, Some(5)) => (false, true),
            _ => (false, false),
        };
        let Some(p) = self.pci.get_mut(i) else {
            return Ok(());
        };
        if let Some(name) = node.attribute("name") {
            p.dev.os_devices.push(name.to_string());
        }
        // A DRM card (a "GPU" osdev) sits on any VGA function, BMC ones included: only a
        // compute API (CUDA, NVML, RSMI, LevelZero) or a v3 GPU+CoProc osdev says "GPU".
        p.gpu_osdev |= gpu_subtype || (gpu && coproc);
        p.coproc_osdev |= coproc || gpu_subtype;
        Ok(())
    }

    fn cpukind(&mut self, node: Node) -> Result<(), TopoError> {
        let Some(cpuset) = self.bitmap(node, "cpuset")? else {
            return Err(self.err(node, "cpukind without a cpuset"));
        };
        let forced = match node.attribute("forced_efficiency") {
            None => None,
            Some(v) => match v.trim().parse::<i32>() {
                Ok(e) if e >= 0 => Some(e),
                Ok(_) => None,
                Err(_) => {
                    return Err(self.err(
                        node,
                        format!(
                            "cpukind has forced_efficiency=\"{}\", not a number",
                            clip(v)
                        ),
                    ))
                }
            },
        };
        let core_type = Self::info(node, "CoreType").map(str::to_string);
        // Without a forced efficiency hwloc ranks kinds by CoreType (Atom/efficiency cores
        // below Core/performance cores), then by frequency; assemble() ranks by frequency.
        let efficiency = forced.or_else(|| {
            core_type.as_deref().and_then(|t| match t {
                "IntelAtom" | "AMDEfficieny" | "AMDEfficiency" => Some(0),
                "IntelCore" | "AMDPerformance" => Some(1),
                _ => None,
            })
        });
        let freq = Self::info(node, "FrequencyMaxMHz").and_then(|f| f.trim().parse::<u32>().ok());
        self.cpu_kinds.push(CpuKind {
            label: String::new(),
            efficiency,
            name: core_type,
            max_freq_mhz: freq,
            cpus: CpuSet::new(),
        });
        self.cpu_kind_sets.push(cpuset);
        Ok(())
    }

    /// `<distances2>` (one object type, `indexing="os"` or `"gp"`) and `<distances2hetero>`
    /// (`Type:gp` indexes). Only NUMA-node matrices are kept; all are checked.
    fn distances2(&mut self, node: Node, hetero: bool) -> Result<(), TopoError> {
        let tag = node.tag_name().name();
        let Some(nbobjs) = self.attr_u64(node, "nbobjs")? else {
            return Err(self.err(node, format!("<{tag}> without nbobjs")));
        };
        if nbobjs == 0 || nbobjs > MAX_DISTANCE_OBJS {
            return Err(self.err(
                node,
                format!("<{tag}> has nbobjs={nbobjs} (expected 1 to {MAX_DISTANCE_OBJS})"),
            ));
        }
        let n = nbobjs as usize;
        let kind = self.attr_u64(node, "kind")?.unwrap_or(0);
        let obj_type = node.attribute("type");
        let indexing = node
            .attribute("indexing")
            .unwrap_or(if hetero { "gp" } else { "" });
        let mut indexes: Vec<(Option<&str>, u64)> = Vec::new();
        let mut values: Vec<u64> = Vec::new();
        for child in node.children().filter(|c| c.is_element()) {
            let name = child.tag_name().name();
            let text = child.text().unwrap_or("");
            match name {
                "indexes" => {
                    for tok in text.split_whitespace() {
                        if indexes.len() >= n {
                            return Err(
                                self.err(child, format!("<{tag}> has more than {n} indexes"))
                            );
                        }
                        let (t, num) = match tok.rsplit_once(':') {
                            Some((t, num)) if hetero => (Some(t), num),
                            _ => (None, tok),
                        };
                        let Ok(v) = num.parse::<u64>() else {
                            return Err(
                                self.err(child, format!("bad index \"{}\" in <{tag}>", clip(tok)))
                            );
                        };
                        indexes.push((t, v));
                    }
                }
                "u64values" => {
                    for tok in text.split_whitespace() {
                        if values.len() >= n * n {
                            return Err(
                                self.err(child, format!("<{tag}> has more than {} values", n * n))
                            );
                        }
                        let Ok(v) = tok.parse::<u64>() else {
                            return Err(
                                self.err(child, format!("bad value \"{}\" in <{tag}>", clip(tok)))
                            );
                        };
                        values.push(v);
                    }
                }
                _ => {}
            }
        }
        if indexes.len() != n || values.len() != n * n {
            return Err(self.err(
                node,
                format!(
                    "<{tag}> has {} indexes and {} values, expected {n} and {}",
                    indexes.len(),
                    values.len(),
                    n * n
                ),
            ));
        }
        let all_numa = if hetero {
            indexes
                .iter()
                .all(|(t, _)| t.is_some_and(|t| Kind::parse(t) == Some(Kind::Numa)))
        } else {
            obj_type.and_then(Kind::parse) == Some(Kind::Numa)
        };
        if !all_numa {
            return Ok(());
        }
        let by_gp = hetero || indexing == "gp";
        let gp: std::collections::HashMap<u64, u32> = if by_gp {
            self.numa
                .iter()
                .filter_map(|x| Some((x.gp_index?, x.os_index)))
                .collect()
        } else {
            Default::default()
        };
        let mut nodes = Vec::with_capacity(n);
        for (_, idx) in &indexes {
            let os = if by_gp {
                match gp.get(idx) {
                    Some(&os) => os,
                    None => return Ok(()), // unresolvable: not usable, not an error
                }
            } else {
                match u32::try_from(*idx) {
                    Ok(os) => os,
                    Err(_) => return Ok(()),
                }
            };
            nodes.push(os);
        }
        self.distances.push(RawDistances {
            name: node.attribute("name").map(str::to_string),
            // kind bits: 4 = means latency, 8 = means bandwidth
            latency: kind & 4 != 0,
            nodes,
            values,
        });
        Ok(())
    }

    /// v1 `<distances nbobjs relative_depth latency_base>` inside an object: the matrix of
    /// the objects `relative_depth` levels below it, in document order, with values relative
    /// to `latency_base`. Kept when those objects are the NUMA nodes.
    fn v1_distance(&mut self, node: Node<'a, 'input>) -> Result<(), TopoError> {
        let Some(nbobjs) = self.attr_u64(node, "nbobjs")? else {
            return Err(self.err(node, "<distances> without nbobjs"));
        };
        if nbobjs == 0 || nbobjs > MAX_DISTANCE_OBJS {
            return Err(self.err(
                node,
                format!("<distances> has nbobjs={nbobjs} (expected 1 to {MAX_DISTANCE_OBJS})"),
            ));
        }
        let n = nbobjs as usize;
        let Some(rel) = self.attr_u32(node, "relative_depth")? else {
            return Err(self.err(node, "<distances> without relative_depth"));
        };
        let base = self
            .attr_f64(node, "latency_base")?
            .filter(|&b| b > 0.0)
            .unwrap_or(1.0);
        let mut values = Vec::new();
        for l in node.children().filter(|c| c.has_tag_name("latency")) {
            if values.len() >= n * n {
                return Err(self.err(l, format!("<distances> has more than {} latencies", n * n)));
            }
            let Some(v) = self.attr_f64(l, "value")? else {
                return Err(self.err(l, "<latency> without a value"));
            };
            if v < 0.0 {
                return Err(self.err(l, format!("negative latency {v}")));
            }
            values.push((v * base).round().min(u64::MAX as f64) as u64);
        }
        if values.len() != n * n {
            return Err(self.err(
                node,
                format!(
                    "<distances> has {} latencies, expected {}",
                    values.len(),
                    n * n
                ),
            ));
        }
        // objects `rel` levels below the holder (normal objects only; NUMA is normal in v1)
        let Some(holder) = node.parent() else {
            return Ok(());
        };
        let mut level: Vec<Node> = vec![holder];
        for _ in 0..rel {
            let mut next = Vec::new();
            for o in &level {
                for c in o.children().filter(|c| c.has_tag_name("object")) {
                    if c.attribute("type")
                        .and_then(Kind::parse)
                        .is_some_and(Kind::is_anchor)
                    {
                        next.push(c);
                    }
                }
                if next.len() > n {
                    return Ok(());
                }
            }
            level = next;
        }
        if level.len() != n
            || !level
                .iter()
                .all(|o| o.attribute("type").and_then(Kind::parse) == Some(Kind::Numa))
        {
            return Ok(());
        }
        let mut nodes = Vec::with_capacity(n);
        for o in level {
            match self.attr_u32(o, "os_index")? {
                Some(os) => nodes.push(os),
                None => return Ok(()),
            }
        }
        self.distances.push(RawDistances {
            name: Some("NUMALatency".into()),
            latency: true,
            nodes,
            values,
        });
        Ok(())
    }

    // --- assembly -----------------------------------------------------------------------------

    fn finish(mut self) -> Result<Host, TopoError> {
        for d in std::mem::take(&mut self.v1_distances) {
            self.v1_distance(d)?;
        }
        let all = self.pus.clone();
        if all.is_empty() {
            return Err(TopoError::format(
                self.path,
                "hwloc topology without any PU object",
            ));
        }
        let resolve = |b: &Bitmap| resolve(b, &all);

        let numa_nodes = self.numa_nodes(&all);
        let known_nodes: CpuSet = numa_nodes.iter().map(|n| n.os_index).collect();

        let distances = self.distances(&known_nodes);
        let pci_devices = self.pci_devices(&all, &numa_nodes, &known_nodes);
        let mut cpu_kinds = std::mem::take(&mut self.cpu_kinds);
        for (k, set) in cpu_kinds.iter_mut().zip(&self.cpu_kind_sets) {
            k.cpus = resolve(set);
        }

        let raw = RawTopology {
            source: format!("hwloc-xml:{}", self.path.display()),
            name: self.name,
            pus: all.clone(),
            cores: self
                .cores
                .iter()
                .map(|(os, c)| RawGroup {
                    os_index: *os,
                    cpus: resolve(c),
                })
                .collect(),
            packages: self
                .packages
                .iter()
                .map(|(os, c, model)| {
                    (
                        RawGroup {
                            os_index: *os,
                            cpus: resolve(c),
                        },
                        model.clone(),
                    )
                })
                .collect(),
            dies: self
                .dies
                .iter()
                .map(|(os, c)| RawGroup {
                    os_index: *os,
                    cpus: resolve(c),
                })
                .collect(),
            caches: self
                .caches
                .iter()
                .map(|(level, t, size, line, ways, c)| RawCache {
                    level: *level,
                    cache_type: *t,
                    size_bytes: *size,
                    line_bytes: *line,
                    ways: *ways,
                    cpus: resolve(c),
                })
                .collect(),
            groups: self.groups.iter().map(resolve).collect(),
            cpu_kinds,
            numa_nodes,
            distances,
            pci_devices,
            interrupts: None,
            tsc_stable: None,
            vfio: None,
            arch: self.arch,
            numa_inferred: false,
            notes: Vec::new(),
        };
        raw.assemble()
    }
    /// NUMA nodes: deepest attachment wins its CPUs, then ordinary memory, then os_index.
    fn numa_nodes(&mut self, all: &CpuSet) -> Vec<NumaNode> {
        if self.numa.is_empty() && self.version == 1 {
            // v1 machine without NUMA nodes: Linux still has node 0 with all memory
            self.numa.push(RawNuma {
                os_index: 0,
                cpuset: self.root_cpuset.clone(),
                depth: 0,
                special: false,
                subtype: None,
                memory: self.root_memory,
                hugepages: std::mem::take(&mut self.root_hugepages),
                gp_index: None,
            });
        }
        let mut order: Vec<usize> = (0..self.numa.len()).collect();
        order.sort_by_key(|&i| {
            let n = &self.numa[i];
            (std::cmp::Reverse(n.depth), n.special, n.os_index)
        });
        let mut owned = CpuSet::new();
        let mut numa_cpus: Vec<CpuSet> = vec![CpuSet::new(); self.numa.len()];
        for i in order {
            let own = resolve(&self.numa[i].cpuset, all).difference(&owned);
            if !own.is_empty() {
                owned = owned.union(&own);
                numa_cpus[i] = own;
            }
        }
        self.numa
            .iter()
            .zip(numa_cpus)
            .map(|(n, cpus)| {
                let memory_kind = match n.subtype.as_deref().map(str::to_ascii_uppercase) {
                    Some(s) if s == "HBM" || s == "MCDRAM" => MemoryKind::Hbm,
                    Some(s) if s == "GPUMEMORY" => MemoryKind::Gpu,
                    Some(s) if s == "NVM" || s.starts_with("CXL") => MemoryKind::Nvm,
                    Some(s) if s == "DRAM" => MemoryKind::Dram,
                    _ if cpus.is_empty() => MemoryKind::Unknown,
                    _ => MemoryKind::Dram,
                };
                NumaNode {
                    os_index: n.os_index,
                    cpus,
                    memory_bytes: n.memory,
                    hugepages: n.hugepages.clone(),
                    memory_kind,
                    free_bytes: None,
                }
            })
            .collect()
    }

    /// Distances: hwloc's NUMALatency matrix, else any latency matrix, over known nodes.
    fn distances(&self, known_nodes: &CpuSet) -> Option<Distances> {
        let pick = self
            .distances
            .iter()
            .position(|d| d.name.as_deref() == Some("NUMALatency"))
            .or_else(|| self.distances.iter().position(|d| d.latency));
        pick.and_then(|i| {
            let d = &self.distances[i];
            if d.nodes.len() < 2 || !d.nodes.iter().all(|&n| known_nodes.contains(n)) {
                return None;
            }
            let mut seen = CpuSet::new();
            for &n in &d.nodes {
                if seen.contains(n) {
                    return None;
                }
                seen.insert(n);
            }
            let k = d.nodes.len();
            let matrix = d
                .values
                .chunks(k)
                .map(|row| {
                    row.iter()
                        .map(|&v| u32::try_from(v).unwrap_or(u32::MAX))
                        .collect()
                })
                .collect();
            Some(Distances {
                nodes: d.nodes.clone(),
                matrix,
            })
        })
    }

    /// PCI devices: locality of the nearest non-I/O ancestor.
    fn pci_devices(
        &mut self,
        all: &CpuSet,
        numa_nodes: &[NumaNode],
        known_nodes: &CpuSet,
    ) -> Vec<PciDevice> {
        let anchor_cpus: Vec<CpuSet> = self
            .anchors
            .iter()
            .map(|a| resolve(&a.cpuset, all))
            .collect();
        let mut pci_devices = Vec::with_capacity(self.pci.len());
        for p in std::mem::take(&mut self.pci) {
            let mut dev = p.dev;
            let (Some(anchor), Some(cpus)) =
                (self.anchors.get(p.anchor), anchor_cpus.get(p.anchor))
            else {
                continue;
            };
            let nodes: Vec<u32> = match &anchor.nodeset {
                Some(None) => known_nodes.to_vec(),
                Some(Some(ns)) => ns.intersection(known_nodes).to_vec(),
                // no nodeset (old v1): the nodes whose CPUs are local
                None => numa_nodes
                    .iter()
                    .filter(|n| n.cpus.intersects(cpus))
                    .map(|n| n.os_index)
                    .collect(),
            };
            dev.numa = (!nodes.is_empty()).then_some(nodes);
            dev.local_cpus = Some(cpus.clone());
            if matches!(dev.kind, DeviceKind::Other | DeviceKind::Accelerator) && p.gpu_osdev {
                dev.kind = DeviceKind::Gpu;
            } else if dev.kind == DeviceKind::Other && p.coproc_osdev {
                dev.kind = DeviceKind::Accelerator;
            }
            pci_devices.push(dev);
        }
        pci_devices
    }
}

/// A bitmap's CPUs among the host's PUs (no bitmap: all of them).
fn resolve(b: &Bitmap, all: &CpuSet) -> CpuSet {
    match b {
        None => all.clone(),
        Some(s) => s.intersection(all),
    }
}

trait WithValue {
    fn with_value(self, v: &str) -> Self;
}

impl WithValue for TopoError {
    /// Append the offending value (clipped) to a format error.
    fn with_value(self, v: &str) -> Self {
        match self {
            TopoError::Format { path, msg } => TopoError::Format {
                path,
                msg: format!("{msg} (\"{}\")", clip(v)),
            },
            other => other,
        }
    }
}

/// `pci_type="CCCC [VVVV:DDDD] [SSSS:ssss] RR"` (+ ` PP`, the prog-if, since hwloc 3).
struct PciType {
    class: u16,
    vendor: u16,
    device: u16,
    subvendor: u16,
    subdevice: u16,
    prog_if: Option<u8>,
}

fn parse_pci_type(s: &str) -> Option<PciType> {
    let mut it = s.split_whitespace();
    let class = u16::from_str_radix(it.next()?, 16).ok()?;
    let pair = |t: &str| -> Option<(u16, u16)> {
        let inner = t.strip_prefix('[')?.strip_suffix(']')?;
        let (a, b) = inner.split_once(':')?;
        Some((
            u16::from_str_radix(a, 16).ok()?,
            u16::from_str_radix(b, 16).ok()?,
        ))
    };
    let (vendor, device) = pair(it.next()?)?;
    let (subvendor, subdevice) = pair(it.next()?)?;
    let _revision = u8::from_str_radix(it.next()?, 16).ok()?;
    let prog_if = match it.next() {
        Some(p) => Some(u8::from_str_radix(p, 16).ok()?),
        None => None,
    };
    if it.next().is_some() {
        return None;
    }
    Some(PciType {
        class,
        vendor,
        device,
        subvendor,
        subdevice,
        prog_if,
    })
}

/// `dddd:bb:dd.f` (hwloc 3 allows 32-bit domains) → canonical lower-case BDF.
fn parse_busid(s: &str) -> Option<String> {
    let (rest, func) = s.trim().rsplit_once('.')?;
    let mut parts = rest.split(':');
    let (dom, bus, dev) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || dom.is_empty() || dom.len() > 8 || bus.len() > 2 || dev.len() > 2 {
        return None;
    }
    let dom = u32::from_str_radix(dom, 16).ok()?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    if dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// Keep error messages on one line and short.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A value quoted in an error: one line, at most 60 characters.
fn clip(s: &str) -> String {
    let s = one_line(s);
    if s.chars().count() > 60 {
        let mut t: String = s.chars().take(60).collect();
        t.push('…');
        t
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(xml: &str) -> Result<Host, TopoError> {
        parse_str(xml, Path::new("test.xml"))
    }

    const V2_SMALL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" nodeset="0x00000003">
    <info name="HostName" value="box"/>
    <object type="Package" os_index="0" cpuset="0x0000000f" nodeset="0x00000003">
      <info name="CPUModel" value="Test CPU"/>
      <object type="NUMANode" os_index="0" cpuset="0x0000000f" nodeset="0x00000001" gp_index="7" local_memory="1073741824">
        <page_type size="4096" count="262144"/>
        <page_type size="2097152" count="16"/>
      </object>
      <object type="NUMANode" os_index="1" cpuset="0x0000000f" nodeset="0x00000002" gp_index="8" subtype="HBM" local_memory="536870912"/>
      <object type="L3Cache" cpuset="0x0000000f" cache_size="8388608" depth="3" cache_linesize="64" cache_associativity="16" cache_type="0">
        <object type="Core" os_index="0" cpuset="0x00000003">
          <object type="PU" os_index="0" cpuset="0x00000001"/>
          <object type="PU" os_index="1" cpuset="0x00000002"/>
        </object>
        <object type="Core" os_index="1" cpuset="0x0000000c">
          <object type="PU" os_index="2" cpuset="0x00000004"/>
          <object type="PU" os_index="3" cpuset="0x00000008"/>
        </object>
      </object>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-02]">
        <object type="Bridge" bridge_type="1-1" depth="1" bridge_pci="0000:[01-01]" pci_busid="0000:00:01.0" pci_type="0604 [8086:1901] [0000:0000] 07" pci_link_speed="15.753846">
          <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0300 [10de:1b06] [1458:3752] a1" pci_link_speed="15.753846">
            <info name="PCIVendor" value="NVIDIA Corporation"/>
            <info name="PCIDevice" value="GP102 [GeForce GTX 1080 Ti]"/>
            <object type="OSDev" name="card0" osdev_type="1"/>
            <object type="OSDev" name="cuda0" subtype="CUDA" osdev_type="5"/>
          </object>
        </object>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="gp">
    <indexes length="4">7 8 </indexes>
    <u64values length="12">10 31 31 10 </u64values>
  </distances2>
</topology>
"#;

    #[test]
    fn v2_small_file() {
        let h = parse(V2_SMALL).unwrap();
        assert_eq!(h.name.as_deref(), Some("box"));
        assert_eq!(h.pus.len(), 4);
        assert_eq!(h.cores.len(), 2);
        assert_eq!(h.cores[1].pus.to_list_string(), "2-3");
        assert_eq!(h.packages[0].model.as_deref(), Some("Test CPU"));
        assert_eq!(h.caches_at(3).count(), 1);
        let l3 = h.caches_at(3).next().unwrap();
        assert_eq!(
            (l3.size_bytes, l3.line_bytes, l3.ways),
            (Some(8 << 20), Some(64), Some(16))
        );
        // node 0 owns the CPUs, the HBM node beside it is CPU-less
        let n0 = h.numa_node(0).unwrap();
        assert_eq!(n0.cpus.to_list_string(), "0-3");
        assert_eq!(n0.memory_kind, MemoryKind::Dram);
        assert_eq!(n0.memory_bytes, Some(1 << 30));
        assert_eq!(
            n0.hugepages,
            vec![HugePages {
                size_kb: 2048,
                total: Some(16),
                free: None
            }]
        );
        let n1 = h.numa_node(1).unwrap();
        assert!(n1.is_cpuless());
        assert_eq!(n1.memory_kind, MemoryKind::Hbm);
        assert!(h.pus.iter().all(|p| p.numa == Some(0)));
        // gp-indexed distances resolve to os indexes
        assert_eq!(h.distance(0, 1), Some(31));
        let gpu = h.pci("01:00.0").unwrap();
        assert_eq!(gpu.kind, DeviceKind::Gpu);
        assert_eq!(gpu.numa.as_deref(), Some(&[0, 1][..]));
        assert_eq!(gpu.local_cpus.as_ref().unwrap().to_list_string(), "0-3");
        assert_eq!(gpu.parent.as_deref(), Some("0000:00:01.0"));
        assert_eq!(gpu.os_devices, vec!["card0", "cuda0"]);
        assert_eq!(
            gpu.name.as_deref(),
            Some("NVIDIA Corporation GP102 [GeForce GTX 1080 Ti]")
        );
        assert_eq!(gpu.subsystem_vendor_id, Some(0x1458));
        assert_eq!(gpu.prog_if, None);
        assert!((gpu.link_gbps.unwrap() - 15.75).abs() < 0.01);
        assert_eq!(gpu.iommu_group, None);
        assert!(gpu.msi_irqs.is_none() && gpu.bars.is_empty() && gpu.driver.is_none());
        let bridge = h.pci("00:01.0").unwrap();
        assert_eq!(bridge.kind, DeviceKind::Bridge);
        assert_eq!(bridge.parent, None);
        assert_eq!(bridge.subsystem_vendor_id, None);
        assert!(h.interrupts.is_none() && h.tsc_stable.is_none());
        assert!(h.source.starts_with("hwloc-xml:"));
    }

    /// hwloc writes `[0000:0000]` for the ids of a function it could not read (POWER9 sysfs
    /// without `vendor` files): unknown, not vendor 0x0000.
    #[test]
    fn zero_pci_ids_are_unknown() {
        let xml = V2_SMALL.replace("[10de:1b06] [1458:3752]", "[0000:0000] [0000:0000]");
        let h = parse(&xml).unwrap();
        let gpu = h.pci("01:00.0").unwrap();
        assert_eq!(
            (gpu.vendor_id, gpu.device_id, gpu.pci_id()),
            (None, None, None)
        );
        assert_eq!(
            gpu.kind,
            DeviceKind::Gpu,
            "still a VGA controller by its class"
        );
        assert_eq!(gpu.subsystem_vendor_id, None);
        let bridge = h.pci("00:01.0").unwrap();
        assert_eq!(bridge.pci_id().as_deref(), Some("8086:1901"));
    }

    #[test]
    fn v1_numa_parent_and_cache_depth() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x00000003" nodeset="0x00000003">
    <info name="HostName" value="old"/>
    <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
      <latency value="1.000000"/><latency value="2.100000"/>
      <latency value="2.100000"/><latency value="1.000000"/>
    </distances>
    <object type="NUMANode" os_index="0" cpuset="0x00000001" nodeset="0x00000001" local_memory="1000">
      <page_type size="4096" count="10"/>
      <page_type size="1073741824" count="2"/>
      <object type="Socket" os_index="0" cpuset="0x00000001">
        <object type="Cache" cpuset="0x00000001" cache_size="1048576" depth="2" cache_linesize="64" cache_associativity="-1" cache_type="0">
          <object type="Cache" cpuset="0x00000001" cache_size="32768" depth="1" cache_linesize="64" cache_associativity="8" cache_type="1">
            <object type="PU" os_index="0" cpuset="0x00000001"/>
          </object>
        </object>
      </object>
      <object type="Bridge" os_index="0" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">
        <object type="PCIDev" os_index="1" pci_busid="0000:00:02.0" pci_type="0302 [10de:1db1] [10de:1212] a1" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="NUMANode" os_index="1" cpuset="0x00000002" nodeset="0x00000002">
      <object type="Socket" os_index="1" cpuset="0x00000002">
        <object type="PU" os_index="1" cpuset="0x00000002"/>
      </object>
    </object>
  </object>
</topology>"#;
        let h = parse(xml).unwrap();
        assert_eq!(h.pus.len(), 2);
        assert_eq!(
            h.cores.len(),
            2,
            "PUs without a Core parent become single-PU cores"
        );
        assert_eq!(h.packages.len(), 2);
        assert_eq!(h.numa_node(1).unwrap().cpus.to_vec(), vec![1]);
        assert_eq!(h.pu(1).unwrap().numa, Some(1));
        assert_eq!(h.numa_node(0).unwrap().hugepages[0].size_kb, 1 << 20);
        assert_eq!(h.distance(0, 1), Some(21));
        assert_eq!(h.distance(1, 1), Some(10));
        let l2 = h.caches_at(2).next().unwrap();
        assert_eq!((l2.ways, l2.size_bytes), (None, Some(1 << 20)));
        assert_eq!(h.caches_at(1).next().unwrap().cache_type, CacheType::Data);
        let gpu = h.pci("0000:00:02.0").unwrap();
        assert_eq!(gpu.numa.as_deref(), Some(&[0][..]));
        assert_eq!(gpu.link_gbps, None);
    }

    #[test]
    fn v3_bitmask_osdev_prog_if_and_topology_infos() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="3.0">
  <object type="Machine" os_index="0" cpuset="0x00000001" nodeset="0x00000001" gp_index="1" id="obj1">
    <object type="NUMANode" os_index="0" cpuset="0x00000001" nodeset="0x00000001" gp_index="2" id="obj2" local_memory="4096"/>
    <object type="PU" os_index="0" cpuset="0x00000001" nodeset="0x00000001" gp_index="3" id="obj3"/>
    <object type="Bridge" gp_index="4" id="obj4" bridge_type="0-1" depth="0" bridge_pci="10000:[00-00]">
      <object type="PCIDev" gp_index="5" id="obj5" pci_busid="10000:00:00.0" pci_type="ff00 [10de:2330] [10de:16c1] a1 00" pci_link_speed="31.5">
        <object type="OSDev" gp_index="6" id="obj6" name="cuda0" subtype="CUDA" osdev_type="12"/>
      </object>
    </object>
  </object>
  <pci_locality domain="0x10000" bus_min="0x0" bus_max="0xff" cpuset="0x00000001"/>
  <info name="HostName" value="v3host"/>
  <info name="Architecture" value="aarch64"/>
</topology>"#;
        let h = parse(xml).unwrap();
        assert_eq!(h.name.as_deref(), Some("v3host"));
        // v3 keeps the Architecture among the topology's infos
        assert_eq!(h.arch.as_deref(), Some("aarch64"));
        assert_eq!(h.is_x86(), Some(false));
        let d = h
            .pci("10000:00:00.0")
            .or_else(|| h.pci_devices.first())
            .unwrap();
        assert_eq!(d.bdf, "10000:00:00.0");
        assert_eq!(d.prog_if, Some(0));
        // class ff00 is "accelerator" by class; the CUDA GPU|COPROC osdev makes it a GPU
        assert_eq!(d.kind, DeviceKind::Gpu);
        assert_eq!(d.numa.as_deref(), Some(&[0][..]));
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases: &[(&str, &str)] = &[
            ("", "empty file"),
            ("   \n", "empty file"),
            ("<topology", "malformed XML"),
            ("<html><body/></html>", "not an hwloc topology"),
            ("<topology version=\"9.0\"><object type=\"Machine\" cpuset=\"0x1\"/></topology>", "unsupported"),
            ("<topology version=\"2.0\"></topology>", "without a root <object>"),
            (
                "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" os_index=\"0\" cpuset=\"0xzz\"/></object></topology>",
                "bad cpuset",
            ),
            (
                "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" os_index=\"x\" cpuset=\"0x1\"/></object></topology>",
                "not a number",
            ),
            (
                "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"Bogus\" cpuset=\"0x1\"/></object></topology>",
                "unknown object type",
            ),
            ("<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"/></topology>", "without any PU"),
            (
                "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" os_index=\"0\" cpuset=\"0x1\"/></object><distances2 type=\"NUMANode\" nbobjs=\"1000000000\" kind=\"5\" indexing=\"os\"/></topology>",
                "nbobjs",
            ),
            (
                "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" os_index=\"0\" cpuset=\"0x1\"/></object><distances2 type=\"NUMANode\" nbobjs=\"2\" kind=\"5\" indexing=\"os\"><indexes>0 1</indexes><u64values>10 20 20</u64values></distances2></topology>",
                "expected 2 and 4",
            ),
        ];
        for (xml, want) in cases {
            let e = parse(xml).unwrap_err().to_string();
            assert!(e.contains("test.xml"), "{e}");
            assert!(e.contains(want), "{xml:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn deepest_attachment_owns_the_cpus() {
        // POWER9-like: two CPU nodes under their packages, a GPU-memory node and a node without
        // subtype attached at the machine: the machine-level nodes are CPU-less.
        let xml = r#"<topology version="2.0">
  <object type="Machine" cpuset="0x0000000f" nodeset="0x0000000f">
    <object type="NUMANode" os_index="3" cpuset="0x0000000f" nodeset="0x00000008"/>
    <object type="NUMANode" os_index="2" cpuset="0x0000000f" nodeset="0x00000004" subtype="GPUMemory"/>
    <object type="Package" os_index="0" cpuset="0x00000003" nodeset="0x00000001">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x00000001"/>
      <object type="PU" os_index="0" cpuset="0x00000001"/>
      <object type="PU" os_index="1" cpuset="0x00000002"/>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" nodeset="0x00000002">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" nodeset="0x00000002"/>
      <object type="PU" os_index="2" cpuset="0x00000004"/>
      <object type="PU" os_index="3" cpuset="0x00000008"/>
    </object>
  </object>
</topology>"#;
        let h = parse(xml).unwrap();
        let cpus: Vec<String> = h
            .numa_nodes
            .iter()
            .map(|n| n.cpus.to_list_string())
            .collect();
        assert_eq!(cpus, vec!["0-1", "2-3", "", ""]);
        let kinds: Vec<MemoryKind> = h.numa_nodes.iter().map(|n| n.memory_kind).collect();
        assert_eq!(
            kinds,
            vec![
                MemoryKind::Dram,
                MemoryKind::Dram,
                MemoryKind::Gpu,
                MemoryKind::Unknown
            ]
        );
        assert_eq!(h.pu(3).unwrap().numa, Some(1));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let mut xml =
            String::from("<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\">");
        for _ in 0..2000 {
            xml.push_str("<object type=\"Group\" cpuset=\"0x1\">");
        }
        for _ in 0..2000 {
            xml.push_str("</object>");
        }
        xml.push_str("</object></topology>");
        let e = parse(&xml).unwrap_err().to_string();
        assert!(e.contains("nested deeper"), "{e}");
    }

    #[test]
    fn pci_type_and_busid_parsing() {
        let t = parse_pci_type("0302 [10de:1db1] [10de:1212] a1").unwrap();
        assert_eq!(
            (t.class, t.vendor, t.device, t.prog_if),
            (0x0302, 0x10de, 0x1db1, None)
        );
        assert_eq!(
            parse_pci_type("0106 [8086:2922] [1af4:1100] 02 01")
                .unwrap()
                .prog_if,
            Some(1)
        );
        assert!(parse_pci_type("0302 10de:1db1").is_none());
        assert!(parse_pci_type("").is_none());
        assert_eq!(parse_busid("0000:5D:00.0").as_deref(), Some("0000:5d:00.0"));
        // Intel VMD domain (hwloc writes the 32-bit domain as %04x): the name sysfs gives
        assert_eq!(
            parse_busid("10000:e1:00.0").as_deref(),
            Some("10000:e1:00.0")
        );
        assert_eq!(
            parse_busid("10000:e1:00.0").as_deref(),
            crate::normalize_bdf("10000:e1:00.0").as_deref()
        );
        assert!(parse_busid("0000:00:20.0").is_none());
        assert!(parse_busid("00:00.0").is_none());
    }
}

//! What a guest sees of itself — CPUs, sockets/cores/threads, NUMA nodes with their CPUs and
//! memory, hugepages — from the text of `numactl --hardware`, `lscpu` and `/proc/meminfo`.
//! These are facts to check a layout against, not benchmark figures.
//!
//! Each parser fills what its file says and leaves the rest `None`; [`GuestView::merge`]
//! puts the views of several files together. Nothing here panics on any input; a text that
//! is not the file it is read as is a one-line [`ViewError`].
//!
//! ```text
//! available: 2 nodes (0-1)               numactl --hardware (numactl 2.0.x, numactl.c
//! node 0 cpus: 0 1 2 3                   hardware(); "No NUMA available on this system"
//! node 0 size: 15951 MB                  without NUMA)
//! node 0 free: 15120 MB
//! CPU(s):                4               lscpu (util-linux 2.3x, sys-utils/lscpu.c)
//! Thread(s) per core:    1
//! NUMA node0 CPU(s):     0-3
//! HugePages_Total:       8               /proc/meminfo (Linux fs/proc/meminfo.c,
//! Hugepagesize:    1048576 kB            mm/hugetlb.c hugetlb_report_meminfo)
//! ```

use serde::{Deserialize, Serialize};
use topo::CpuSet;

/// The files a view is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViewSource {
    NumactlHardware,
    Lscpu,
    Meminfo,
}

impl ViewSource {
    pub const ALL: [ViewSource; 3] = [
        ViewSource::NumactlHardware,
        ViewSource::Lscpu,
        ViewSource::Meminfo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewSource::NumactlHardware => "numactl --hardware",
            ViewSource::Lscpu => "lscpu",
            ViewSource::Meminfo => "/proc/meminfo",
        }
    }

    /// Reads `text` as this file.
    pub fn read(self, text: &str) -> Result<GuestView, ViewError> {
        match self {
            ViewSource::NumactlHardware => numactl_hardware(text),
            ViewSource::Lscpu => lscpu(text),
            ViewSource::Meminfo => meminfo(text),
        }
    }
}

/// Why a text is not the file it was read as. Always one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ViewError {
    #[error("{}: no {what} found", file.name())]
    Missing { file: ViewSource, what: String },
    #[error("{}: line {line}: {why}: `{text}`", file.name())]
    BadLine {
        file: ViewSource,
        line: usize,
        why: String,
        text: String,
    },
}

fn bad(file: ViewSource, index: usize, line: &str, why: &str) -> ViewError {
    ViewError::BadLine {
        file,
        line: index + 1,
        why: why.to_string(),
        text: super::excerpt(line),
    }
}

/// One guest NUMA node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: u32,
    pub cpus: Option<CpuSet>,
    /// MiB (numactl prints `MB`, meaning MiB).
    pub memory_mib: Option<u64>,
    pub free_mib: Option<u64>,
}

/// What a guest sees of itself; every field `None` where no file said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestView {
    /// Logical CPUs (`CPU(s):`, or the nodes' CPUs counted).
    pub cpus: Option<u32>,
    pub sockets: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    pub model: Option<String>,
    /// Sorted by id; `numactl` without NUMA gives none.
    pub nodes: Option<Vec<NodeView>>,
    /// numactl's node distances, row by row in node order.
    pub distances: Option<Vec<Vec<u32>>>,
    /// `HugePages_Total` etc.: counts of pages of the default size.
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepages_rsvd: Option<u64>,
    pub hugepages_surp: Option<u64>,
    /// `Hugepagesize`, kB.
    pub hugepage_size_kib: Option<u64>,
    /// `Hugetlb` (every size's pages), kB.
    pub hugetlb_kib: Option<u64>,
}

impl GuestView {
    /// `self` with each field it lacks taken from `other`; nodes merged by id (a node's
    /// CPUs from one file, its memory from another).
    pub fn merge(self, other: GuestView) -> GuestView {
        let nodes = match (self.nodes, other.nodes) {
            (Some(mut a), Some(b)) => {
                for n in b {
                    match a.iter_mut().find(|x| x.id == n.id) {
                        Some(x) => {
                            x.cpus = x.cpus.take().or(n.cpus);
                            x.memory_mib = x.memory_mib.or(n.memory_mib);
                            x.free_mib = x.free_mib.or(n.free_mib);
                        }
                        None => a.push(n),
                    }
                }
                a.sort_by_key(|n| n.id);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        GuestView {
            cpus: self.cpus.or(other.cpus),
            sockets: self.sockets.or(other.sockets),
            cores_per_socket: self.cores_per_socket.or(other.cores_per_socket),
            threads_per_core: self.threads_per_core.or(other.threads_per_core),
            model: self.model.or(other.model),
            nodes,
            distances: self.distances.or(other.distances),
            hugepages_total: self.hugepages_total.or(other.hugepages_total),
            hugepages_free: self.hugepages_free.or(other.hugepages_free),
            hugepages_rsvd: self.hugepages_rsvd.or(other.hugepages_rsvd),
            hugepages_surp: self.hugepages_surp.or(other.hugepages_surp),
            hugepage_size_kib: self.hugepage_size_kib.or(other.hugepage_size_kib),
            hugetlb_kib: self.hugetlb_kib.or(other.hugetlb_kib),
        }
    }

    /// One line: `4 CPUs (1 socket × 4 cores × 1 thread); 2 NUMA nodes (0: CPUs 0-1, 1024
    /// MiB; 1: CPUs 2-3, 1024 MiB); hugepages 8 × 1048576 kB, 8 free`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.cpus {
            let mut s = format!("{n} CPUs");
            if let (Some(so), Some(c), Some(t)) =
                (self.sockets, self.cores_per_socket, self.threads_per_core)
            {
                let many =
                    |n: u32, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
                s.push_str(&format!(
                    " ({} × {} × {})",
                    many(so, "socket"),
                    many(c, "core"),
                    many(t, "thread")
                ));
            }
            parts.push(s);
        }
        if let Some(nodes) = &self.nodes {
            let each: Vec<String> = nodes
                .iter()
                .map(|n| {
                    let mut s = format!("{}:", n.id);
                    if let Some(c) = &n.cpus {
                        s.push_str(&format!(" CPUs {}", c.to_list_string()));
                    }
                    if let Some(m) = n.memory_mib {
                        s.push_str(&format!(" {m} MiB"));
                    }
                    s
                })
                .collect();
            let word = if nodes.len() == 1 { "node" } else { "nodes" };
            parts.push(format!("{} NUMA {word} ({})", nodes.len(), each.join("; ")));
        }
        if let Some(t) = self.hugepages_total {
            let size = self
                .hugepage_size_kib
                .map(|k| format!(" × {k} kB"))
                .unwrap_or_default();
            let free = self
                .hugepages_free
                .map(|f| format!(", {f} free"))
                .unwrap_or_default();
            parts.push(format!("hugepages {t}{size}{free}"));
        }
        if parts.is_empty() {
            "nothing recorded".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// Which of the three files `text` is, by the lines only it has.
pub fn detect(text: &str) -> Option<ViewSource> {
    let mut found = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("available:") && t.contains("nodes")
            || t == "No NUMA available on this system."
            || t.starts_with("node distances:")
        {
            return Some(ViewSource::NumactlHardware);
        }
        if t.starts_with("MemTotal:") || t.starts_with("HugePages_Total:") {
            found = found.or(Some(ViewSource::Meminfo));
        }
        if t.starts_with("Thread(s) per core:")
            || t.starts_with("Core(s) per socket:")
            || t.starts_with("Architecture:")
        {
            found = found.or(Some(ViewSource::Lscpu));
        }
    }
    found
}

/// Reads `text` as whichever of the three files it is.
pub fn read_any(text: &str) -> Option<Result<(ViewSource, GuestView), ViewError>> {
    let source = detect(text)?;
    Some(source.read(text).map(|v| (source, v)))
}

fn node_mut(nodes: &mut Vec<NodeView>, id: u32) -> &mut NodeView {
    let at = match nodes.iter().position(|n| n.id == id) {
        Some(i) => i,
        None => {
            nodes.push(NodeView {
                id,
                ..NodeView::default()
            });
            nodes.len() - 1
        }
    };
    &mut nodes[at]
}

/// `numactl --hardware`: the nodes (CPUs, size, free) and distances; `nodes: Some([])` for
/// "No NUMA available on this system.".
pub fn numactl_hardware(text: &str) -> Result<GuestView, ViewError> {
    const SRC: ViewSource = ViewSource::NumactlHardware;
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut distances: Vec<Vec<u32>> = Vec::new();
    let (mut seen, mut in_distances) = (false, false);
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t == "No NUMA available on this system." {
            return Ok(GuestView {
                nodes: Some(Vec::new()),
                ..GuestView::default()
            });
        }
        if t.starts_with("available:") {
            seen = true;
            continue;
        }
        if t.starts_with("node distances:") {
            in_distances = true;
            continue;
        }
        if in_distances {
            // `node   0   1 ` header, then `  0:  10  20 `
            if t.starts_with("node") || t.is_empty() {
                continue;
            }
            let Some((_, row)) = t.split_once(':') else {
                return Err(bad(SRC, i, line, "expected a distance row `N: D D …`"));
            };
            let row: Option<Vec<u32>> = row.split_whitespace().map(|w| w.parse().ok()).collect();
            distances.push(row.ok_or_else(|| bad(SRC, i, line, "a distance is not a number"))?);
            continue;
        }
        let Some(rest) = t.strip_prefix("node ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(id), Some(field)) = (words.next(), words.next()) else {
            continue;
        };
        let id: u32 = id
            .parse()
            .map_err(|_| bad(SRC, i, line, "the node number is not a number"))?;
        if id > topo::cpuset::MAX_CPU {
            return Err(bad(SRC, i, line, "node number out of range"));
        }
        let values: Vec<&str> = words.collect();
        match field {
            "cpus:" => {
                let mut set = CpuSet::new();
                for v in &values {
                    let cpu: u32 = v
                        .parse()
                        .ok()
                        .filter(|c| *c <= topo::cpuset::MAX_CPU)
                        .ok_or_else(|| bad(SRC, i, line, "a CPU is not a number"))?;
                    set.insert(cpu);
                }
                node_mut(&mut nodes, id).cpus = Some(set);
            }
            "size:" | "free:" => {
                let mib = match values.as_slice() {
                    [n, "MB"] => n.parse::<u64>().ok(),
                    _ => None,
                }
                .ok_or_else(|| bad(SRC, i, line, "expected `N MB`"))?;
                let node = node_mut(&mut nodes, id);
                if field == "size:" {
                    node.memory_mib = Some(mib);
                } else {
                    node.free_mib = Some(mib);
                }
            }
            _ => {}
        }
        seen = true;
    }
    if !seen {
        return Err(ViewError::Missing {
            file: SRC,
            what: "`available: N nodes` or `node N cpus:` lines".into(),
        });
    }
    nodes.sort_by_key(|n| n.id);
    let cpus = nodes
        .iter()
        .map(|n| n.cpus.as_ref().map_or(0, |c| c.len() as u32))
        .sum::<u32>();
    Ok(GuestView {
        cpus: (cpus > 0).then_some(cpus),
        nodes: Some(nodes),
        distances: (!distances.is_empty()).then_some(distances),
        ..GuestView::default()
    })
}

/// `lscpu`: `CPU(s)`, `Socket(s)`, `Core(s) per socket`, `Thread(s) per core`, `Model
/// name`, and each `NUMA nodeN CPU(s)` (as a node without memory).
pub fn lscpu(text: &str) -> Result<GuestView, ViewError> {
    const SRC: ViewSource = ViewSource::Lscpu;
    let mut v = GuestView::default();
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut seen = false;
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let count = || -> Result<Option<u32>, ViewError> {
            value
                .parse::<u32>()
                .map(Some)
                .map_err(|_| bad(SRC, i, line, "expected a count"))
        };
        match key {
            "CPU(s)" => v.cpus = count()?,
            "Socket(s)" => v.sockets = count()?,
            "Core(s) per socket" => v.cores_per_socket = count()?,
            "Thread(s) per core" => v.threads_per_core = count()?,
            "Model name" => v.model = Some(value.to_string()).filter(|m| !m.is_empty()),
            "Architecture" => {}
            _ => {
                let Some(id) = key
                    .strip_prefix("NUMA node")
                    .and_then(|r| r.strip_suffix(" CPU(s)"))
                else {
                    continue;
                };
                let id: u32 = id
                    .parse()
                    .ok()
                    .filter(|n| *n <= topo::cpuset::MAX_CPU)
                    .ok_or_else(|| bad(SRC, i, line, "the node number is not a number"))?;
                let cpus = CpuSet::parse_list(value)
                    .map_err(|_| bad(SRC, i, line, "expected a CPU list"))?;
                node_mut(&mut nodes, id).cpus = Some(cpus);
            }
        }
        seen = true;
    }
    if !seen || (v.cpus.is_none() && v.threads_per_core.is_none() && nodes.is_empty()) {
        return Err(ViewError::Missing {
            file: SRC,
            what: "`CPU(s):` or `Thread(s) per core:` lines".into(),
        });
    }
    nodes.sort_by_key(|n| n.id);
    v.nodes = (!nodes.is_empty()).then_some(nodes);
    Ok(v)
}

/// `/proc/meminfo`'s hugepage lines: `HugePages_Total`, `_Free`, `_Rsvd`, `_Surp` (counts,
/// no unit) and `Hugepagesize`, `Hugetlb` (kB). Other lines are ignored.
pub fn meminfo(text: &str) -> Result<GuestView, ViewError> {
    const SRC: ViewSource = ViewSource::Meminfo;
    let mut v = GuestView::default();
    let mut seen = false;
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = value.split_whitespace().collect();
        let field = match key.trim() {
            "HugePages_Total" => &mut v.hugepages_total,
            "HugePages_Free" => &mut v.hugepages_free,
            "HugePages_Rsvd" => &mut v.hugepages_rsvd,
            "HugePages_Surp" => &mut v.hugepages_surp,
            "Hugepagesize" => &mut v.hugepage_size_kib,
            "Hugetlb" => &mut v.hugetlb_kib,
            "MemTotal" => {
                seen = true;
                continue;
            }
            _ => continue,
        };
        let kb = key.trim().starts_with("Huge") && !key.trim().starts_with("HugePages_");
        let n = match (words.as_slice(), kb) {
            ([n], false) => n.parse::<u64>().ok(),
            ([n, "kB"], true) => n.parse::<u64>().ok(),
            _ => None,
        }
        .ok_or_else(|| {
            bad(
                SRC,
                i,
                line,
                if kb {
                    "expected `N kB`"
                } else {
                    "expected a count"
                },
            )
        })?;
        *field = Some(n);
        seen = true;
    }
    if !seen || v.hugepages_total.is_none() {
        return Err(ViewError::Missing {
            file: SRC,
            what: "`HugePages_Total:` line".into(),
        });
    }
    Ok(v)
}

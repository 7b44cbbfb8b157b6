//! Guest memory: which host nodes, which page size, how many pages on each node.
//!
//! Free hugepages come from the host model (`NumaNode.hugepages`) minus what tenants hold on
//! that node (`crate::tenant::account` counts each tenant's pages once, on its own nodes).
//! `auto` takes 1 GiB pages where enough are free on the chosen nodes, else 2 MiB, else 4 KiB
//! with a warning quoting the Kata GPU boot study (VFIO pins every 4 KiB page at boot).
//!
//! Every node keeps [`host_reserve`] of its memory for the host (max(2 GiB, 5 %)): the guest's
//! memory goes where it leaves every node that much, and only when no set of nodes can does
//! the plan take some of it, with a warning per node. A node whose memory size the host model
//! does not give is not counted as empty or as endless: it may hold the guest, with a warning
//! that nothing was checked there. Where the model has the node's `MemFree` (sysfs), a plan
//! that needs more free memory there than that is warned about too.
//!
//! The memory's sentences in the plan's "Why" list are born here, beside the checks they
//! explain, and travel in [`MemoryDecision::rationale`] (after the split over the nodes, which
//! `crate::rationale` writes): first the host reserve every node keeps (`check_nodes`), then
//! rounding to whole pages, hugepages off, and 2 MiB rather than 1 GiB (`explain_pages`).

use std::collections::BTreeMap;

use topo::Host;

use crate::model::Holdings;
use crate::{HugepagePolicy, Request};

pub const KB_4K: u64 = 4;
pub const KB_2M: u64 = 2048;
pub const KB_1G: u64 = 1024 * 1024;

/// What the Kata GPU boot study measured about 4 KiB guest memory with VFIO.
pub const SMALL_PAGE_COST: &str = "with 4 KiB pages VFIO pins every page at boot (Kata GPU boot study: ~3.3 s per 128 GiB per GPU in vfio_pin_pages_remote; the 7-GPU Kata VM booted in 3:03 with 4 KiB pages vs 2:26 with hugepages) and the page tables cost host memory";

/// The least memory a node keeps for the host: [`HOST_RESERVE_MIN_BYTES`] or
/// [`HOST_RESERVE_PERCENT`] % of the node, whichever is more.
pub const HOST_RESERVE_MIN_BYTES: u64 = 2 << 30;
pub const HOST_RESERVE_PERCENT: u64 = 5;

/// What a node of `node_bytes` keeps for the host: max(2 GiB, 5 %).
pub fn host_reserve(node_bytes: u64) -> u64 {
    let pct = (u128::from(node_bytes) * u128::from(HOST_RESERVE_PERCENT) / 100) as u64;
    HOST_RESERVE_MIN_BYTES.max(pct)
}

#[derive(Debug, Clone, Default)]
struct NodeMem {
    /// The node's memory, `None` = unknown.
    total: Option<u64>,
    /// Bytes the node can give (memory minus tenants' hugepages), `None` = unknown.
    capacity: Option<u64>,
    /// What the node keeps for the host ([`host_reserve`]), `None` where its size is unknown.
    reserve: Option<u64>,
    /// `MemFree` where the host model has it (live sysfs).
    free_bytes: Option<u64>,
    /// size_kb → (free pages available after tenants, total pages); `None` = unknown.
    pages: BTreeMap<u64, (Option<u64>, Option<u64>)>,
}

/// Memory of every node as the planner sees it.
#[derive(Debug, Clone)]
pub struct MemoryModel {
    policy: HugepagePolicy,
    nodes: BTreeMap<u32, NodeMem>,
    numa_known: bool,
}

/// How a page size was settled for a node set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Enough free pages are known to be there.
    Free,
    /// Free counts are unknown (hwloc XML lists totals only): apply must reserve them.
    Unknown,
    /// Known to be short: apply must reserve the missing pages.
    Short,
}

/// The memory decision for a placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryDecision {
    pub size_kb: u64,
    pub host_nodes: Vec<u32>,
    /// Bytes per node of `host_nodes`.
    pub bytes_per_node: Vec<u64>,
    pub rationale: Vec<String>,
    pub warnings: Vec<String>,
}

pub fn human_bytes(b: u64) -> String {
    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;
    if b >= G && b.is_multiple_of(G) {
        format!("{} GiB", b / G)
    } else if b >= G {
        format!("{:.1} GiB", b as f64 / G as f64)
    } else if b >= M && b.is_multiple_of(M) {
        format!("{} MiB", b / M)
    } else {
        format!("{b} bytes")
    }
}

/// `memory_bytes` rounded up to whole pages of `size_kb`.
pub fn rounded(memory_bytes: u64, size_kb: u64) -> u64 {
    let page = size_kb * 1024;
    memory_bytes.div_ceil(page).saturating_mul(page)
}

/// A size without rounding: whole GiB or MiB, else KiB, else bytes.
pub fn exact_bytes(b: u64) -> String {
    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;
    if b >= G && b.is_multiple_of(G) {
        format!("{} GiB", b / G)
    } else if b.is_multiple_of(M) {
        format!("{} MiB", b / M)
    } else if b.is_multiple_of(1024) {
        format!("{} KiB", b / 1024)
    } else {
        format!("{b} bytes")
    }
}

pub fn page_name(size_kb: u64) -> String {
    match size_kb {
        KB_1G => "1 GiB".into(),
        KB_2M => "2 MiB".into(),
        KB_4K => "4 KiB".into(),
        k if k % 1024 == 0 => format!("{} MiB", k / 1024),
        k => format!("{k} KiB"),
    }
}

impl MemoryModel {
    pub fn new(
        req: &Request,
        host: &Host,
        held: &Holdings,
        numa_known: bool,
        warnings: &mut Vec<String>,
    ) -> MemoryModel {
        let mut nodes = BTreeMap::new();
        if numa_known {
            for n in &host.numa_nodes {
                let mut m = NodeMem {
                    total: n.memory_bytes,
                    capacity: n
                        .memory_bytes
                        .map(|b| b.saturating_sub(held.bytes_on(n.os_index))),
                    reserve: n.memory_bytes.map(host_reserve),
                    free_bytes: n.free_bytes,
                    pages: BTreeMap::new(),
                };
                for h in &n.hugepages {
                    let free = h
                        .free
                        .map(|f| f.saturating_sub(held.pages_on(n.os_index, h.size_kb)));
                    m.pages.insert(h.size_kb, (free, h.total));
                }
                nodes.insert(n.os_index, m);
            }
        } else {
            nodes.insert(0, NodeMem::default());
        }
        let unknown_free = nodes
            .values()
            .any(|m| m.pages.is_empty() || m.pages.values().any(|(f, _)| f.is_none()));
        if unknown_free && req.hugepages != HugepagePolicy::None {
            warnings.push(format!(
                "the host model ({}) does not say how many hugepages are free: the plan counts the pages it needs and `vmtune apply` reserves them",
                host.source
            ));
        }
        MemoryModel {
            policy: req.hugepages,
            nodes,
            numa_known,
        }
    }

    /// What a node keeps for the host, if its size is known.
    pub fn reserve(&self, node: u32) -> Option<u64> {
        self.nodes.get(&node)?.reserve
    }

    /// Bytes the nodes can give the guest and still keep every node its host reserve; `None`
    /// if any node's size is unknown.
    pub fn room_with_reserve(&self, nodes: &[u32]) -> Option<u64> {
        let mut sum = 0u64;
        for n in nodes {
            let m = self.nodes.get(n)?;
            sum = sum.saturating_add(m.capacity?.saturating_sub(m.reserve?));
        }
        Some(sum)
    }

    /// Bytes the nodes can hold; `None` if any node's size is unknown (no limit known).
    pub fn capacity(&self, nodes: &[u32]) -> Option<u64> {
        let mut sum = 0u64;
        for n in nodes {
            sum = sum.saturating_add(self.nodes.get(n)?.capacity?);
        }
        Some(sum)
    }

    /// Free pages of `size_kb` on `nodes`: (known sum, whether any node's count is unknown).
    fn free_pages(&self, nodes: &[u32], size_kb: u64) -> (u64, bool) {
        let mut sum = 0u64;
        let mut unknown = false;
        for n in nodes {
            match self.nodes.get(n).and_then(|m| m.pages.get(&size_kb)) {
                Some((Some(f), _)) => sum = sum.saturating_add(*f),
                Some((None, _)) => unknown = true,
                None => {
                    // a node without this size listed: none free if the node lists other
                    // sizes with counts, unknown if it lists nothing at all
                    if self.nodes.get(n).is_none_or(|m| m.pages.is_empty()) {
                        unknown = true;
                    }
                }
            }
        }
        (sum, unknown)
    }

    /// Pages of `size_kb` in the pools of `nodes` (total, free or not); `None` if unknown.
    fn total_pages(&self, nodes: &[u32], size_kb: u64) -> Option<u64> {
        let mut sum = 0u64;
        for n in nodes {
            let (_, total) = self.nodes.get(n)?.pages.get(&size_kb)?;
            sum = sum.saturating_add((*total)?);
        }
        Some(sum)
    }

    /// Settle the page size for `memory_bytes` on `nodes`: (size_kb, availability, rank).
    pub fn pick(&self, nodes: &[u32], memory_bytes: u64) -> (u64, Availability, u32) {
        let need = |size_kb: u64| memory_bytes.div_ceil(size_kb * 1024);
        let fixed = |size_kb: u64| {
            let (free, unknown) = self.free_pages(nodes, size_kb);
            if free >= need(size_kb) {
                (size_kb, Availability::Free, 0)
            } else if unknown {
                (size_kb, Availability::Unknown, 1)
            } else {
                (size_kb, Availability::Short, 2)
            }
        };
        match self.policy {
            HugepagePolicy::None => (KB_4K, Availability::Free, 0),
            HugepagePolicy::Size2M => fixed(KB_2M),
            HugepagePolicy::Size1G => fixed(KB_1G),
            HugepagePolicy::Auto => {
                let (f1, u1) = self.free_pages(nodes, KB_1G);
                let (f2, u2) = self.free_pages(nodes, KB_2M);
                // 1 GiB pages for whole GiB; any other size is rounded up to whole 2 MiB
                // pages rather than lose hugepage backing for a few KiB
                let g1 = memory_bytes.is_multiple_of(KB_1G * 1024);
                if g1 && f1 >= need(KB_1G) {
                    (KB_1G, Availability::Free, 0)
                } else if f2 >= need(KB_2M) {
                    (KB_2M, Availability::Free, 1)
                } else if u1 || u2 {
                    (KB_2M, Availability::Unknown, 2)
                } else {
                    (KB_4K, Availability::Short, 3)
                }
            }
        }
    }

    /// The cost terms (host reserve taken: 0/1, page rank): `None` when the memory does not
    /// fit on `nodes` at all. Nodes of unknown size count as holding it.
    pub fn terms(&self, nodes: &[u32], memory_bytes: u64) -> Option<(u32, u32)> {
        let (size_kb, _, rank) = self.pick(nodes, memory_bytes);
        let bytes = rounded(memory_bytes, size_kb);
        if let Some(cap) = self.capacity(nodes) {
            if cap < bytes {
                return None;
            }
        }
        let short = match self.room_with_reserve(nodes) {
            Some(room) if room < bytes => 1,
            _ => 0,
        };
        Some((short, rank))
    }

    /// Bytes a node can take in pages of `size_kb` (free pages, or capacity where unknown).
    fn node_room(&self, node: u32, size_kb: u64, avail: Availability) -> Option<u64> {
        let m = self.nodes.get(&node)?;
        if size_kb != KB_4K && avail == Availability::Free {
            if let Some((Some(f), _)) = m.pages.get(&size_kb) {
                return Some(f.saturating_mul(size_kb * 1024));
            }
            return Some(0);
        }
        m.capacity
    }

    /// Place `memory_bytes` on `nodes`: proportional to the guest PUs on each node
    /// (`weights`, same order), within what each node can take, overflow to the others in
    /// order.
    pub fn decide(&self, nodes: &[u32], weights: &[u64], memory_bytes: u64) -> MemoryDecision {
        let (size_kb, avail, _) = self.pick(nodes, memory_bytes);
        let page = size_kb * 1024;
        let pages = memory_bytes.div_ceil(page);
        let mut split = split_by_weight(pages, weights, nodes.len());
        self.fit_to_room(nodes, size_kb, avail, &mut split);
        let mut rationale = Vec::new();
        let mut warnings = Vec::new();
        self.check_nodes(nodes, &split, size_kb, avail, &mut rationale, &mut warnings);
        let choice = PageChoice {
            size_kb,
            avail,
            pages,
        };
        self.explain_pages(nodes, memory_bytes, choice, &mut rationale, &mut warnings);
        let bytes_per_node = split.iter().map(|p| p * page).collect();
        MemoryDecision {
            size_kb,
            host_nodes: nodes.to_vec(),
            bytes_per_node,
            rationale,
            warnings,
        }
    }

    /// Cap each node's pages by its room leaving it its host reserve, move the overflow to
    /// nodes with such room, then (only when that is not enough) into the reserves, and what
    /// still does not fit onto the first node.
    fn fit_to_room(&self, nodes: &[u32], size_kb: u64, avail: Availability, split: &mut [u64]) {
        let page = size_kb * 1024;
        let room: Vec<Option<u64>> = nodes
            .iter()
            .map(|&n| self.node_room(n, size_kb, avail).map(|b| b / page))
            .collect();
        let kept_room: Vec<Option<u64>> = nodes
            .iter()
            .zip(&room)
            .map(|(n, r)| {
                let m = self.nodes.get(n);
                match (m.and_then(|m| m.capacity), m.and_then(|m| m.reserve)) {
                    (Some(c), Some(res)) => {
                        let kept = c.saturating_sub(res) / page;
                        Some(r.map_or(kept, |r| r.min(kept)))
                    }
                    _ => *r,
                }
            })
            .collect();
        let mut overflow = 0u64;
        for (i, s) in split.iter_mut().enumerate() {
            if let Some(Some(r)) = kept_room.get(i) {
                if *s > *r {
                    overflow += *s - *r;
                    *s = *r;
                }
            }
        }
        for (i, s) in split.iter_mut().enumerate() {
            if overflow == 0 {
                break;
            }
            let spare = match kept_room.get(i) {
                Some(Some(r)) => r.saturating_sub(*s),
                _ => overflow,
            };
            let take = spare.min(overflow);
            *s += take;
            overflow -= take;
        }
        if overflow > 0 {
            overflow = into_reserves(split, &room, overflow);
        }
        if overflow > 0 {
            if let Some(s) = split.first_mut() {
                *s += overflow;
            }
        }
    }

    /// The sentences about the page size: rounding to whole pages, hugepages off, the 4 KiB
    /// fallback, free/unknown/short pools, and 2 MiB rather than 1 GiB.
    fn explain_pages(
        &self,
        nodes: &[u32],
        memory_bytes: u64,
        choice: PageChoice,
        rationale: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) {
        let PageChoice {
            size_kb,
            avail,
            pages,
        } = choice;
        let total_bytes = pages * size_kb * 1024;
        if total_bytes != memory_bytes {
            rationale.push(format!(
                "memory rounded up from {} to {} ({} pages of {}): guest memory is whole pages, so the plan and the configuration it emits use {}",
                exact_bytes(memory_bytes),
                exact_bytes(total_bytes),
                pages,
                page_name(size_kb),
                exact_bytes(total_bytes)
            ));
        }
        match (self.policy, size_kb, avail) {
            (HugepagePolicy::None, _, _) => {
                rationale.push("hugepages off as requested: 4 KiB pages".into());
                warnings.push(format!("4 KiB pages: {SMALL_PAGE_COST}"));
            }
            (_, KB_4K, _) => {
                warnings.push(format!(
                    "not enough free hugepages on node(s) {} for {}: falling back to 4 KiB pages; {SMALL_PAGE_COST}. Reserve {} 2 MiB pages (or {} 1 GiB pages) to avoid it",
                    list(nodes),
                    human_bytes(memory_bytes),
                    memory_bytes.div_ceil(KB_2M * 1024),
                    memory_bytes.div_ceil(KB_1G * 1024)
                ));
            }
            (_, _, Availability::Free) => rationale.push(format!(
                "{} pages of {}: enough are free on node(s) {} (hugepages cut VFIO pinning and page-table cost at boot, the Kata GPU boot study)",
                pages,
                page_name(size_kb),
                list(nodes)
            )),
            (_, _, Availability::Unknown) => warnings.push(self.unknown_pool(nodes, size_kb, pages)),
            (_, _, Availability::Short) => warnings.push(format!(
                "only {} free {} pages on node(s) {} but the plan needs {}: `vmtune apply` must reserve the rest (1 GiB pages may not be available after boot on fragmented memory)",
                self.free_pages(nodes, size_kb).0,
                page_name(size_kb),
                list(nodes),
                pages
            )),
        }
        if self.policy == HugepagePolicy::Auto && size_kb == KB_2M && avail == Availability::Free {
            let (f1, _) = self.free_pages(nodes, KB_1G);
            if !memory_bytes.is_multiple_of(KB_1G * 1024) {
                rationale
                    .push("2 MiB pages because the memory is not a whole number of GiB".into());
            } else {
                rationale.push(format!(
                    "2 MiB rather than 1 GiB pages: only {f1} free 1 GiB pages on node(s) {}",
                    list(nodes)
                ));
            }
        }
    }

    /// The warning for a pool whose free pages the host model does not give: what the pool
    /// holds against what the plan needs.
    fn unknown_pool(&self, nodes: &[u32], size_kb: u64, pages: u64) -> String {
        match self.total_pages(nodes, size_kb) {
            Some(total) if total >= pages => format!(
                "free {} pages on node(s) {} are unknown (the pool has {total}): the plan needs {pages}; `vmtune apply` checks and reserves them",
                page_name(size_kb),
                list(nodes),
            ),
            Some(total) => format!(
                "free {} pages on node(s) {} are unknown and the pool has only {total}: the plan needs {pages}, so `vmtune apply` must reserve at least {} more",
                page_name(size_kb),
                list(nodes),
                pages - total
            ),
            None => format!(
                "free {} pages on node(s) {} are unknown: the plan needs {pages}; `vmtune apply` reserves them",
                page_name(size_kb),
                list(nodes),
            ),
        }
    }
}

/// The page size settled for a node set, and how many pages the guest needs.
#[derive(Debug, Clone, Copy)]
struct PageChoice {
    size_kb: u64,
    avail: Availability,
    pages: u64,
}

/// `pages` split over `n` nodes in proportion to `weights` (largest remainder; with no
/// weight at all, the remainder goes round the nodes in order).
fn split_by_weight(pages: u64, weights: &[u64], n: usize) -> Vec<u64> {
    let wsum: u64 = weights.iter().sum::<u64>().max(1);
    let mut split: Vec<u64> = weights
        .iter()
        .map(|w| ((pages as u128 * *w as u128) / wsum as u128) as u64)
        .collect();
    let mut left = pages.saturating_sub(split.iter().sum());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| {
        let rem = (pages as u128 * weights.get(i).copied().unwrap_or(0) as u128) % wsum as u128;
        (std::cmp::Reverse(rem), i)
    });
    for &i in order.iter().cycle().take(n * 2) {
        if left == 0 {
            break;
        }
        if weights.get(i).copied().unwrap_or(0) > 0 || wsum == 1 {
            split[i] += 1;
            left -= 1;
        }
    }
    if left > 0 {
        if let Some(s) = split.first_mut() {
            *s += left;
        }
    }
    split
}

/// Put `overflow` pages into the nodes' host reserves, in proportion to what each node has
/// left (`room`, in pages; `None` = unknown, no limit), so no one node (the housekeeping's,
/// the first) gives all of it. Returns the pages that still did not fit.
fn into_reserves(split: &mut [u64], room: &[Option<u64>], mut overflow: u64) -> u64 {
    let spare: Vec<u64> = split
        .iter()
        .zip(room)
        .map(|(s, r)| r.map_or(overflow, |r| r.saturating_sub(*s)))
        .collect();
    let sum: u128 = spare.iter().map(|&x| u128::from(x)).sum();
    let want = u128::from(overflow).min(sum);
    if want > 0 {
        let mut give: Vec<u64> = spare
            .iter()
            .map(|&sp| (want * u128::from(sp) / sum) as u64)
            .collect();
        // the rounding remainder: a page each where there is still room
        let mut left = want as u64 - give.iter().sum::<u64>();
        for (g, &sp) in give.iter_mut().zip(&spare) {
            if left == 0 {
                break;
            }
            if *g < sp {
                *g += 1;
                left -= 1;
            }
        }
        for (s, g) in split.iter_mut().zip(give) {
            *s += g;
        }
        overflow -= want as u64 - left;
    }
    overflow
}

impl MemoryModel {
    /// What the placed pages leave each node: its host reserve (said, or warned about when
    /// the plan takes some of it), nodes of unknown size, and `MemFree` against what the plan
    /// needs from free memory there.
    fn check_nodes(
        &self,
        nodes: &[u32],
        split: &[u64],
        size_kb: u64,
        avail: Availability,
        rationale: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) {
        let page = size_kb * 1024;
        let mut kept = Vec::new();
        let mut short = Vec::new();
        let mut unknown = Vec::new();
        let mut below_free = Vec::new();
        for (&n, &pages) in nodes.iter().zip(split) {
            let Some(m) = self.nodes.get(&n) else {
                continue;
            };
            let bytes = pages.saturating_mul(page);
            match (m.total, m.capacity, m.reserve) {
                (Some(total), Some(cap), Some(reserve)) => {
                    let left = cap.saturating_sub(bytes);
                    let tenants = total - cap;
                    if left < reserve {
                        short.push(format!(
                            "node {n} keeps {} of {}{} (reserve {})",
                            human_bytes(left),
                            human_bytes(total),
                            if tenants > 0 {
                                format!(", tenants' hugepages {}", human_bytes(tenants))
                            } else {
                                String::new()
                            },
                            human_bytes(reserve)
                        ));
                    } else {
                        kept.push(format!("node {n} keeps {}", human_bytes(left)));
                    }
                }
                _ => unknown.push(n),
            }
            // what must come out of free memory: 4 KiB pages all of it; hugepages what the
            // pool's free pages do not cover (apply reserves them)
            let pool_free = m.pages.get(&size_kb).and_then(|(f, _)| *f);
            let need = if size_kb == KB_4K {
                Some(bytes)
            } else if avail == Availability::Free {
                Some(0)
            } else {
                pool_free.map(|f| pages.saturating_sub(f).saturating_mul(page))
            };
            if let (Some(free), Some(need)) = (m.free_bytes, need) {
                if free < need {
                    below_free.push(format!(
                        "node {n} has {} free, the plan needs {}",
                        human_bytes(free),
                        human_bytes(need)
                    ));
                }
            }
        }
        let total: u64 = split.iter().sum::<u64>().saturating_mul(page);
        if !kept.is_empty() && short.is_empty() {
            rationale.push(format!(
                "host reserve: every node keeps at least max(2 GiB, 5 %) of its memory for the host ({})",
                kept.join(", ")
            ));
        }
        if !short.is_empty() {
            warnings.push(format!(
                "the plan leaves the host less than its reserve (max(2 GiB, 5 %) of each node) for {} of guest memory: {}; the host may swap or reclaim there: plan less memory or free room on a node",
                human_bytes(total),
                short.join("; ")
            ));
        }
        if !below_free.is_empty() {
            warnings.push(format!(
                "MemFree is below what the plan takes from free memory ({}): {}; the kernel must reclaim page cache or move memory first, or {}",
                if size_kb == KB_4K {
                    "4 KiB guest pages".to_string()
                } else {
                    format!("{} pages `vmtune apply` reserves", page_name(size_kb))
                },
                below_free.join("; "),
                if size_kb == KB_4K {
                    "the guest's memory ends up on other nodes"
                } else {
                    "the reservation falls short"
                }
            ));
        }
        if !self.numa_known {
            warnings.push(
                "the host model does not say how much memory the host has: the plan cannot check that the guest's memory fits and leaves the host its reserve (max(2 GiB, 5 %))".into(),
            );
        } else if !unknown.is_empty() {
            warnings.push(format!(
                "the host model does not say how much memory node(s) {} have: the plan cannot check that the guest's memory fits there and leaves the host its reserve (max(2 GiB, 5 %))",
                list(&unknown)
            ));
        }
    }
}

pub fn list(nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

//! A domain's guest NUMA cells, memory and `<numatune>` against the plan's cells: what a
//! patched domain keeps when the plan shows the guest other cells than the domain did (a
//! one-node host folds a domain's several cells into one), and the warnings that say so.
//! `emit::libvirt` spells the same decisions from the same functions ([`guest_cell_ids`],
//! [`fold_target`], [`folded_cell_attrs`]), so what is said is what is written.
//!
//! libvirt (formatdomain, "NUMA topology", "Memory devices", "Memory Tuning"): a cell's
//! `memAccess='shared'` is what vhost-user and virtiofs need (their backends map the guest's
//! memory); a `<memory>` device's `<target><node>` must name a cell the guest has ("can't add
//! memory backend for guest node"); `<interconnects>` name cells as initiators and targets and
//! the `<cache>` levels of their target cells.

use serde::{Deserialize, Serialize};

use crate::memory::page_name;
use crate::Plan;

/// A guest NUMA cell of the domain: its id and the attributes of it the plan does not set
/// (`memAccess`, `discard`), in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainCell {
    pub id: u32,
    pub attrs: Vec<(String, String)>,
    /// `<cache>` elements inside the cell (HMAT memory-side caches).
    #[serde(default)]
    pub caches: u32,
    /// The cell has a `<distances>` element.
    #[serde(default)]
    pub distances: bool,
}

/// A `<devices><memory>` (DIMM, NVDIMM, virtio-mem …) bound to a guest cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainMemoryDevice {
    /// `model` as written (`dimm`, `nvdimm`, `virtio-mem`).
    pub model: String,
    /// `<target><node>`.
    pub node: u32,
}

/// A `<memoryBacking><hugepages><page>`: its size and the guest cells it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainPage {
    pub size_kb: u64,
    pub nodeset: Option<String>,
}

/// The domain's `<numatune>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainNumatune {
    /// `<memory mode=…>` (`strict` when it names none), `None` without `<memory>`.
    pub mode: Option<String>,
    pub nodeset: Option<String>,
    /// `<memory placement='auto'>`.
    pub placement: Option<String>,
    /// `<memnode cellid mode nodeset>`.
    pub memnodes: Vec<(u32, String, String)>,
}

/// The guest cells the plan shows the guest, by id: its guest NUMA cells, else cell 0.
pub fn guest_cell_ids(plan: &Plan) -> Vec<u32> {
    let ids: Vec<u32> = plan.guest_numa.iter().map(|c| c.cell).collect();
    if ids.is_empty() {
        vec![0]
    } else {
        ids
    }
}

/// Whether the plan's cells are the domain's (same count, same ids): then each keeps its own
/// attributes, `<distances>`, `<cache>`s, and the domain's `<interconnects>` stay.
pub fn same_cells(plan_ids: &[u32], cells: &[DomainCell]) -> bool {
    cells.len() == plan_ids.len() && plan_ids.iter().all(|id| cells.iter().any(|c| c.id == *id))
}

/// The plan's cell that takes what the domain bound to cell `id`: itself where the plan has
/// it, else the plan's highest cell below it, else its first.
pub fn fold_target(plan_ids: &[u32], id: u32) -> u32 {
    if plan_ids.contains(&id) {
        return id;
    }
    plan_ids
        .iter()
        .copied()
        .filter(|&p| p < id)
        .max()
        .or_else(|| plan_ids.iter().copied().min())
        .unwrap_or(0)
}

/// The attributes every plan cell takes when the plan's cells are not the domain's (the
/// guest's memory is split anew, so what one cell asked of its memory is asked of all):
/// `memAccess='shared'` if any cell has it (vhost-user and virtiofs need every page shared),
/// `discard='yes'` if any cell has it, any other attribute as the first cell that has it.
pub fn folded_cell_attrs(cells: &[DomainCell]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for c in cells {
        for (k, v) in &c.attrs {
            let wins = match k.as_str() {
                "memAccess" => v.trim() == "shared",
                "discard" => matches!(v.trim(), "yes" | "on"),
                _ => false,
            };
            match out.iter_mut().find(|(ok, _)| ok == k) {
                Some(slot) if wins => slot.1 = v.clone(),
                Some(_) => {}
                None => out.push((k.clone(), v.clone())),
            }
        }
    }
    out
}

fn cells_word(n: usize) -> String {
    if n == 1 {
        "1 cell".into()
    } else {
        format!("{n} cells")
    }
}

/// `memAccess='shared'` → the spelling the warnings use.
fn spell_attrs(attrs: &[(String, String)]) -> String {
    attrs
        .iter()
        .map(|(k, v)| format!("{k}='{v}'"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Warnings for a domain whose cells the plan replaces: the cells' attributes the plan's
/// cells take (named by the cells that had them), and the HMAT description and distances
/// that go with the old cells.
pub(crate) fn cell_warnings(plan: &Plan, cells: &[DomainCell], src: &str) -> Vec<String> {
    let ids = guest_cell_ids(plan);
    if cells.is_empty() || same_cells(&ids, cells) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let merged = folded_cell_attrs(cells);
    // each attribute not written alike on every cell is named with the cells that had it
    let mut said = Vec::new();
    for (k, v) in &merged {
        let having: Vec<&DomainCell> = cells
            .iter()
            .filter(|c| c.attrs.iter().any(|(ck, cv)| ck == k && cv == v))
            .collect();
        if having.len() == cells.len() {
            continue;
        }
        let names = having
            .iter()
            .map(|c| c.id.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let why = match (k.as_str(), v.trim()) {
            ("memAccess", "shared") => " (the shared memory vhost-user and virtiofs need)",
            ("discard", _) => " (its memory discarded when the guest stops)",
            _ => "",
        };
        said.push(format!(
            "{k}='{v}' of cell{} {names}{why}",
            if having.len() == 1 { "" } else { "s" }
        ));
    }
    if !said.is_empty() {
        out.push(format!(
            "{src}'s guest NUMA cells differ in their memory attributes and the plan's {} replace them: the plan's cells take {} ({}), every cell of the guest alike",
            cells_word(ids.len()),
            spell_attrs(&merged),
            said.join("; ")
        ));
    }
    let caches: u32 = cells.iter().map(|c| c.caches).sum();
    let distances = cells.iter().filter(|c| c.distances).count();
    let mut gone = Vec::new();
    if caches > 0 {
        gone.push(format!(
            "{caches} HMAT <cache> element{}",
            if caches == 1 { "" } else { "s" }
        ));
    }
    if distances > 0 {
        gone.push("the cells' <distances>".to_string());
    }
    if !gone.is_empty() {
        out.push(format!(
            "{src} describes its guest NUMA cells ({}); the plan's {} replace them, so that description and any <interconnects> naming those cells are dropped (libvirt refuses interconnects naming a cell or cache the guest does not have)",
            gone.join(", "),
            cells_word(ids.len())
        ));
    }
    out
}

/// Warnings for the domain's `<interconnects>` alone (no cache or distances inside cells)
/// when the cells change.
pub(crate) fn interconnect_warning(
    plan: &Plan,
    cells: &[DomainCell],
    interconnects: bool,
    src: &str,
) -> Option<String> {
    let ids = guest_cell_ids(plan);
    let described = cells.iter().any(|c| c.caches > 0 || c.distances);
    (interconnects && !described && !cells.is_empty() && !same_cells(&ids, cells)).then(|| {
        format!(
            "{src}'s <interconnects> (HMAT latencies and bandwidths between its guest NUMA cells) are dropped: the plan's {} replace those cells, and libvirt refuses interconnects naming a cell the guest does not have",
            cells_word(ids.len())
        )
    })
}

/// Memory devices bound to a cell the plan's guest does not have: each moves to the cell its
/// memory folds into ([`fold_target`]).
pub(crate) fn memory_device_warnings(
    plan: &Plan,
    devices: &[DomainMemoryDevice],
    src: &str,
) -> Vec<String> {
    let ids = guest_cell_ids(plan);
    devices
        .iter()
        .filter(|d| !ids.contains(&d.node))
        .map(|d| {
            format!(
                "{src}'s <memory model='{}'> targets guest NUMA cell {}, which the plan's guest ({}) does not have: its <target><node> becomes {} (libvirt refuses a memory device on a missing cell: \"can't add memory backend for guest node\")",
                d.model,
                d.node,
                cells_word(ids.len()),
                fold_target(&ids, d.node)
            )
        })
        .collect()
}

/// Each page size of the domain's `<hugepages>` other than the plan's, with the cells it
/// was bound to.
pub(crate) fn page_warnings(plan: &Plan, pages: &[DomainPage], src: &str) -> Vec<String> {
    let ours = plan.memory.hugepage_size_kb;
    let mut out = Vec::new();
    for p in pages.iter().filter(|p| p.size_kb != ours) {
        let whom = match &p.nodeset {
            Some(n) if pages.len() > 1 => format!("its guest cells {n} (<page nodeset='{n}'>)"),
            _ => "its memory".to_string(),
        };
        let ask = match p.size_kb {
            crate::memory::KB_1G => " (--hugepages 1G asks for theirs)",
            crate::memory::KB_2M => " (--hugepages 2M asks for theirs)",
            _ => "",
        };
        out.push(format!(
            "{src} backs {whom} with {} pages (<hugepages>); the plan uses {} for all guest memory, as the rationale says{ask}",
            page_name(p.size_kb),
            page_name(ours)
        ));
    }
    out
}

/// What the plan's `<numatune>` replaces of the domain's: a mode other than `strict`,
/// automatic placement, `<memnode>` entries the plan does not write as they were.
pub(crate) fn numatune_warnings(plan: &Plan, nt: &DomainNumatune, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let writes = !plan.memory.host_nodes.is_empty();
    let ours = plan
        .memory
        .host_nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let theirs = |mode: &str, nodeset: Option<&str>, placement: Option<&str>| {
        let mut w = vec![format!("mode='{mode}'")];
        if let Some(n) = nodeset {
            w.push(format!("nodeset='{n}'"));
        }
        if let Some(p) = placement {
            w.push(format!("placement='{p}'"));
        }
        w.join(" ")
    };
    if let Some(mode) = nt.mode.as_deref() {
        let auto = nt.placement.as_deref() == Some("auto");
        if mode != "strict" || auto {
            let becomes = if writes {
                format!("becomes mode='strict' nodeset='{ours}' (the plan's host nodes, its pages reserved there)")
            } else {
                "is removed (the plan binds no host node)".to_string()
            };
            out.push(format!(
                "{src}'s <numatune><memory {}> {becomes}",
                theirs(mode, nt.nodeset.as_deref(), nt.placement.as_deref())
            ));
        }
    }
    if !nt.memnodes.is_empty() {
        let exposed = plan.guest_numa.len() > 1;
        let plan_memnodes: Vec<(u32, String, String)> = if writes && exposed {
            plan.guest_numa
                .iter()
                .filter(|c| !c.host_nodes.is_empty())
                .map(|c| {
                    let set = c
                        .host_nodes
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",");
                    (c.cell, "strict".to_string(), set)
                })
                .collect()
        } else {
            Vec::new()
        };
        let changed: Vec<String> = nt
            .memnodes
            .iter()
            .filter(|m| !plan_memnodes.contains(m))
            .map(|(c, m, n)| format!("cell {c} mode='{m}' nodeset='{n}'"))
            .collect();
        if !changed.is_empty() {
            let with = if plan_memnodes.is_empty() {
                "the plan writes none (one guest cell, or no host node bound)".to_string()
            } else {
                format!(
                    "the plan's are {}",
                    plan_memnodes
                        .iter()
                        .map(|(c, m, n)| format!("cell {c} mode='{m}' nodeset='{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            out.push(format!(
                "{src}'s <numatune><memnode> entries ({}) are replaced: {with}",
                changed.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: u32, attrs: &[(&str, &str)]) -> DomainCell {
        DomainCell {
            id,
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn shared_and_discard_win_the_fold() {
        let cells = [
            cell(0, &[("memAccess", "private")]),
            cell(1, &[("memAccess", "shared"), ("discard", "yes")]),
            cell(2, &[("discard", "no")]),
        ];
        assert_eq!(
            folded_cell_attrs(&cells),
            vec![
                ("memAccess".to_string(), "shared".to_string()),
                ("discard".to_string(), "yes".to_string())
            ]
        );
        assert_eq!(folded_cell_attrs(&[]), vec![]);
    }

    #[test]
    fn fold_targets() {
        assert_eq!(fold_target(&[0], 3), 0);
        assert_eq!(fold_target(&[0, 1], 3), 1);
        assert_eq!(fold_target(&[2, 3], 1), 2);
        assert_eq!(fold_target(&[0, 1], 1), 1);
        assert_eq!(fold_target(&[], 5), 0);
    }

    #[test]
    fn same_cells_by_id() {
        assert!(same_cells(&[0, 1], &[cell(1, &[]), cell(0, &[])]));
        assert!(!same_cells(&[0], &[cell(0, &[]), cell(1, &[])]));
        assert!(!same_cells(&[0, 1], &[cell(0, &[]), cell(2, &[])]));
    }
}

//! Emitters: a [`plan::Plan`] as libvirt domain XML (fragment or a patched domain), QEMU
//! command-line arguments, Kata Containers configuration and pod annotations, and a KubeVirt
//! VirtualMachineInstance fragment. Also reads libvirt domain XML back into a
//! [`plan::Tenant`]. Emitters never decide placement: they spell the plan.

mod features;
pub mod kata;
pub mod kubevirt;
pub mod libvirt;
pub mod locality;
pub mod picture;
pub mod qemu;
pub mod text;
mod values;
mod xml;

use plan::Plan;

/// Errors of the emitters and the libvirt reader: one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error("malformed domain XML: {0}")]
    Xml(String),
    #[error("{0}")]
    Invalid(String),
}

/// Whether the plan shows the guest more than one NUMA node. A single cell is what every
/// guest sees anyway, so it is spelled nowhere (no `<numa>`, no `-numa` per cell, no KubeVirt
/// `guestMappingPassthrough`).
pub fn guest_numa_exposed(plan: &Plan) -> bool {
    plan.guest_numa.len() > 1
}

/// The guest's RAM as QEMU is given it: `-m` ([`GuestRam::total_bytes`]) and one memory
/// backend per guest NUMA cell ([`GuestRam::parts`]), which QEMU requires to sum exactly to
/// `-m` ("total memory for NUMA nodes should equal RAM size").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestRam {
    /// The unit every size is a whole number of: the plan's hugepage size (a hugetlbfs
    /// backend takes whole pages only), or 1 MiB with 4 KiB pages (the emitters spell sizes
    /// in MiB; QEMU rounds `-m` up to 8 KiB, so whole 4 KiB pages alone would not do).
    pub unit_bytes: u64,
    /// The guest's RAM: the plan's memory rounded up to whole units.
    pub total_bytes: u64,
    /// One part per cell of `plan.guest_numa`, in its order, each whole units; they sum to
    /// `total_bytes`.
    pub parts: Vec<u64>,
}

/// Split the plan's guest RAM over its guest NUMA cells in whole units (see [`GuestRam`]):
/// each cell gets its planned memory rounded down, and the units left over go to the cells
/// with the largest remainders (a cell that would get nothing first), so the parts sum to
/// the total exactly. A hugepage plan's cells are whole pages already and keep their size,
/// so the backends hold exactly the pages the plan reserves per node.
pub fn guest_ram(plan: &Plan) -> GuestRam {
    let page = plan.memory.hugepage_size_kb.saturating_mul(1024);
    let unit = page.max(1 << 20);
    let cells: Vec<u64> = plan.guest_numa.iter().map(|c| c.memory_bytes).collect();
    let planned: u64 = cells.iter().sum();
    // the cells hold the request rounded up to the plan's pages; the larger of the two wins
    let total_units = plan.request.memory_bytes.max(planned).div_ceil(unit).max(1);
    let parts = split_units(&cells, total_units)
        .into_iter()
        .map(|u| u.saturating_mul(unit))
        .collect();
    GuestRam {
        unit_bytes: unit,
        total_bytes: total_units.saturating_mul(unit),
        parts,
    }
}

/// `total` units split in proportion to `weights` by largest remainder: every part is the
/// floor or the ceiling of its exact share, and they sum to `total` (empty weights: none;
/// all zero: evenly).
fn split_units(weights: &[u64], total: u64) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let n = weights.len() as u128;
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let (share, wsum): (Vec<u128>, u128) = if sum == 0 {
        (vec![1; weights.len()], n)
    } else {
        (weights.iter().map(|&w| u128::from(w)).collect(), sum)
    };
    let total = u128::from(total);
    let mut parts: Vec<u128> = share.iter().map(|&w| total * w / wsum).collect();
    let mut left = total - parts.iter().sum::<u128>();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    // cells with memory that would get none first, then the largest remainders, then order
    order.sort_by_key(|&i| {
        let rem = total * share[i] % wsum;
        (
            std::cmp::Reverse(parts[i] == 0 && share[i] > 0),
            std::cmp::Reverse(rem),
            i,
        )
    });
    for &i in &order {
        if left == 0 {
            break;
        }
        // a part that is its exact share already takes no more
        if total * share[i] % wsum != 0 {
            parts[i] += 1;
            left -= 1;
        }
    }
    parts
        .into_iter()
        .map(|p| u64::try_from(p).unwrap_or(u64::MAX))
        .collect()
}

/// Kubernetes/Kata spelling of a hugepage size: `2Mi`, `1Gi` (None for 4K pages).
pub fn hugepage_quantity(size_kb: u64) -> Option<String> {
    match size_kb {
        0..=4 => None,
        kb if kb % (1024 * 1024) == 0 => Some(format!("{}Gi", kb / (1024 * 1024))),
        kb if kb % 1024 == 0 => Some(format!("{}Mi", kb / 1024)),
        kb => Some(format!("{kb}Ki")),
    }
}

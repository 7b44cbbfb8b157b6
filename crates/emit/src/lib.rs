//! Emitters: a [`plan::Plan`] as libvirt domain XML (fragment or a patched domain), QEMU
//! command-line arguments, Kata Containers configuration and pod annotations, and a KubeVirt
//! VirtualMachineInstance fragment. Also reads libvirt domain XML back into a
//! [`plan::Tenant`]. Emitters never decide placement: they spell the plan.

mod features;
pub mod kata;
pub mod kubevirt;
pub mod libvirt;
pub mod qemu;
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

/// Kubernetes/Kata spelling of a hugepage size: `2Mi`, `1Gi` (None for 4K pages).
pub fn hugepage_quantity(size_kb: u64) -> Option<String> {
    match size_kb {
        0..=4 => None,
        kb if kb % (1024 * 1024) == 0 => Some(format!("{}Gi", kb / (1024 * 1024))),
        kb if kb % 1024 == 0 => Some(format!("{}Mi", kb / 1024)),
        kb => Some(format!("{kb}Ki")),
    }
}

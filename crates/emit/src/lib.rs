//! Emitters: a [`plan::Plan`] as libvirt domain XML (fragment or a patched domain), QEMU
//! command-line arguments, Kata Containers configuration and pod annotations, and a KubeVirt
//! VirtualMachineInstance fragment. Also reads libvirt domain XML back into a
//! [`plan::Tenant`]. Emitters never decide placement: they spell the plan.

pub mod kata;
pub mod kubevirt;
pub mod libvirt;
pub mod qemu;

/// Errors of the emitters and the libvirt reader: one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error("malformed domain XML: {0}")]
    Xml(String),
    #[error("{0}")]
    Invalid(String),
}

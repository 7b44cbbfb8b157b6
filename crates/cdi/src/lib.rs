//! CDI (Container Device Interface) specs for a host's VFIO devices, so a container runtime
//! (containerd, CRI-O, Kata Containers, podman) can hand a VFIO-bound GPU or NIC to a
//! container by a name like `vmtune.io/vfio=0000:18:00.0`.
//!
//! ```text
//! topo::Host ──generate()──► Spec + what was left out and why ──rules::validate()──► write_atomic()
//!              (generate.rs)                                        (rules.rs)          (write.rs)
//! ```
//!
//! The format is the CDI specification of cncf-tags/container-device-interface (SPEC.md,
//! schema/, specs-go/). `rules` encodes what a CDI loader checks; `version` picks the
//! lowest `cdiVersion` the spec's contents need, so older runtimes read it too.

mod generate;
pub mod names;
pub mod rules;
pub mod spec;
pub mod version;
mod write;

pub use generate::{
    generate, request_annotation, Entry, Generated, Mode, Node, Options, Refusal,
    ANNOTATION_PREFIX, DEFAULT_KIND,
};
pub use spec::{ContainerEdits, Device, DeviceNode, Spec};
pub use write::{default_path, parent_dir, write_atomic, MissingDir, DEFAULT_DIR};

/// What stops a spec from being made or written: one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum CdiError {
    /// The kind is not `vendor/class` by the CDI name rules.
    #[error("{0}")]
    Kind(String),
    /// A `--device` that is not a PCI address of the host.
    #[error("{0}")]
    Device(String),
    /// Devices asked for by address that cannot go in the spec.
    #[error("refused: {}", .0.iter().map(|r| format!("{} {}", r.bdf, r.reason)).collect::<Vec<_>>().join("; "))]
    Refused(Vec<Refusal>),
    /// Nothing to put in the spec (a spec must list at least one device).
    #[error("{0}")]
    NoDevices(String),
    /// The host lacks a node the mode needs (`/dev/vfio/vfio`, `/dev/iommu`).
    #[error("{0}")]
    Host(String),
    /// An unknown or too old `cdiVersion` asked for.
    #[error("{0}")]
    Version(String),
    /// The generated spec breaks a CDI rule (a bug; never written).
    #[error("generated spec is not valid CDI: {0}")]
    Invalid(String),
    /// The directory a spec file was to go in is missing (or is not a directory), and
    /// creating it was not asked for.
    #[error("{}", no_dir_message(.0))]
    NoDir(std::path::PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn no_dir_message(dir: &std::path::Path) -> String {
    if dir.exists() {
        format!("{} is not a directory", dir.display())
    } else {
        format!("directory {} does not exist", dir.display())
    }
}

//! The containerd NRI plugin protocol, v0.12.3 (the NRI of containerd 2.4), and its transport.
//!
//! No policy lives here: the node agent (`crates/nri`) implements [`nri_ttrpc::Plugin`] and
//! asks the planner for decisions.
//!
//! ```text
//! unix socket (/var/run/nri/nri.sock)
//!   └─ mux        frames: u32 BE connection id, u32 BE length, payload
//!        ├─ conn 1  the Plugin service, served by the plugin  ─┐
//!        └─ conn 2  the Runtime service, called by the plugin  ─┴─ ttrpc messages:
//!                   u32 BE length, u32 BE stream id, u8 type, u8 flags, protobuf payload
//! ```
//!
//! * [`nri`], [`nri_ttrpc`]: generated (the names the generated services refer to) at build time by `ttrpc-codegen` from
//!   `proto/nri.proto`, our text of NRI v0.12.3's `pkg/api/api.proto` (checked against it,
//!   descriptor by descriptor, by `tests/upstream.rs`).
//! * [`mux`]: the multiplexer's frames, a decoder that never panics on any input.
//! * [`wire`]: ttrpc messages inside one multiplexed connection.
//! * [`conn`]: a plugin's connection — registration, serving the Plugin service with the
//!   generated handlers, calls to the Runtime service.

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    renamed_and_removed_lints,
    trivial_casts,
    unknown_lints,
    unsafe_code,
    unused_imports,
    unused_mut,
    unused_results
)]
pub mod nri {
    include!(concat!(env!("OUT_DIR"), "/gen/nri.rs"));
}

#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    unknown_lints,
    unused_imports,
    unused_mut,
    unused_results
)]
pub mod nri_ttrpc {
    include!(concat!(env!("OUT_DIR"), "/gen/nri_ttrpc.rs"));
}

pub mod conn;
pub mod mux;
pub mod wire;

pub use protobuf::{Message, MessageField};

/// The NRI version this crate speaks, sent in `RegisterPlugin`.
pub const NRI_VERSION: &str = "v0.12.3";
/// The Plugin service's ttrpc name.
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
/// The Runtime service's ttrpc name.
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";

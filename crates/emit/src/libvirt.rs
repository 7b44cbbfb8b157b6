//! libvirt domain XML. PLACEHOLDER: being written.

use plan::{Plan, Tenant};

use crate::EmitError;

/// The `<vcpu>`, `<cputune>`, `<numatune>`, `<memoryBacking>`, `<cpu>` and `<features>`
/// elements for the plan, as an XML fragment.
pub fn domain_fragment(_plan: &Plan) -> String {
    String::new()
}

/// Patch an existing domain XML: replace those elements, leave all else byte-identical.
pub fn patch_domain(_xml: &str, _plan: &Plan) -> Result<String, EmitError> {
    Err(EmitError::Invalid("not implemented yet".into()))
}

/// Read the pinned CPUs, hugepages and hostdevs of a libvirt domain as a tenant.
pub fn tenant_from_domain_xml(_xml: &str) -> Result<Tenant, EmitError> {
    Err(EmitError::Invalid("not implemented yet".into()))
}

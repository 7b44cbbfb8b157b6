//! KubeVirt VirtualMachineInstance spec fragment. PLACEHOLDER: being written.

use plan::Plan;

/// The `spec.domain` fragment (YAML) for the plan.
pub fn vmi_fragment_yaml(_plan: &Plan) -> String {
    String::new()
}

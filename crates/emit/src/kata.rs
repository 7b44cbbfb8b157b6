//! Kata Containers configuration and pod annotations. PLACEHOLDER: being written.

use plan::Plan;

/// `configuration.toml` [hypervisor.qemu] settings for the plan.
pub fn config_toml(_plan: &Plan) -> String {
    String::new()
}

//! QEMU command-line arguments. PLACEHOLDER: being written.

use plan::Plan;

/// QEMU arguments (`-smp`, `-object memory-backend-*`, `-numa`, `-cpu`, ...) for the plan.
pub fn args(_plan: &Plan) -> Vec<String> {
    Vec::new()
}

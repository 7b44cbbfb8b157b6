//! The crate's layout rules: no function outside tests runs past 150 lines, and no modules
//! import each other in a circle.

use std::path::Path;

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_function_runs_past_150_lines() {
    let long = testkit::layout::long_functions(src(), 150);
    assert!(long.is_empty(), "functions over 150 lines: {long:?}");
}

#[test]
fn no_module_imports_in_a_circle() {
    let cycles = testkit::layout::module_cycles(src());
    assert!(cycles.is_empty(), "import circles: {cycles:?}");
}

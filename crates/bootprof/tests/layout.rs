//! The crate's layout rules (ARCHITECTURE.md): the folders are the pipeline and import each
//! other in one direction only, and no function outside tests runs past 150 lines.

// no function outside tests past 150 lines, no import circle (`testkit::layout_tests`)
testkit::layout_tests!();

#[test]
fn the_stages_import_downstream_only() {
    // a stage's modules may import those of the stages before it, never after
    let order = ["parse", "estimate", "analyze", "fleet", "render"];
    let stage = |m: &str| {
        order
            .iter()
            .position(|s| m == *s || m.starts_with(&format!("{s}::")))
    };
    let g = testkit::layout::module_graph(src());
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(sm) = stage(m) else { continue };
        for d in deps {
            if let Some(sd) = stage(d) {
                if sd > sm {
                    wrong.push(format!("{m} → {d}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "upstream imports: {wrong:?}");
    // the top of src/ holds the crate root and a few files; everything else is in a stage
    let top: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(top.len() <= 3, "files at the top of src/: {top:?}");
}

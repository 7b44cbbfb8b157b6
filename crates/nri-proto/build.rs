//! Generates the NRI messages and ttrpc services from `proto/nri.proto` into OUT_DIR.
//!
//! rust-protobuf's generated files open with inner attributes and doc comments (`#![allow(...)]`,
//! `//!`), which `include!` cannot take (E0753); they are commented out here, and `src/lib.rs` puts the
//! same allowances on the modules that include the files.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let gen = out.join("gen");
    std::fs::create_dir_all(&gen).expect("create OUT_DIR/gen");
    println!("cargo:rerun-if-changed=proto/nri.proto");
    ttrpc_codegen::Codegen::new()
        .out_dir(&gen)
        .input("proto/nri.proto")
        .include("proto")
        .rust_protobuf()
        .customize(ttrpc_codegen::Customize {
            ..Default::default()
        })
        .run()
        .expect("generate the NRI protocol from proto/nri.proto");
    for name in ["nri.rs", "nri_ttrpc.rs"] {
        let path = gen.join(name);
        let text = std::fs::read_to_string(&path).expect("read generated file");
        let fixed: String = text
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("#![") || l.trim_start().starts_with("//!") {
                    format!("// {l}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, fixed).expect("write generated file");
    }
}

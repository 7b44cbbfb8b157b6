#![no_main]
//! CDI specs from any sysfs tree: for every host the loader accepts, `cdi::generate` in both
//! modes either makes a spec that passes the CDI rules and reads back as itself, or fails
//! with one line; never a panic. Input starting with `S` is a sysfs recipe
//! (sysfs_recipe.rs, VFIO paths included); anything else goes to the archive reader as is.

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "sysfs_recipe.rs"]
mod sysfs_recipe;
use sysfs_recipe::recipe;

fuzz_target!(|data: &[u8]| {
    let bytes = match data.split_first() {
        Some((b'S', rest)) => recipe(rest),
        _ => data.to_vec(),
    };
    let Ok(host) = topo::sysfs::load_archive_bytes(&bytes, Path::new("fuzz.tar")) else {
        return;
    };
    for mode in [cdi::Mode::Legacy, cdi::Mode::Iommufd] {
        for annotate in [false, true] {
            let opts = cdi::Options {
                mode,
                annotate,
                ..Default::default()
            };
            match cdi::generate(&host, &opts) {
                Ok(gen) => {
                    let text = gen.spec.to_json();
                    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                    assert!(cdi::rules::validate(&doc).is_ok(), "{text}");
                    let back: cdi::Spec = serde_json::from_str(&text).expect("strict read");
                    assert_eq!(back, gen.spec);
                    assert!(!gen.entries.is_empty());
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.contains('\n'), "{msg:?}");
                }
            }
        }
    }
});

#![no_main]
//! DRA objects from any host and any API server answer: for every host the sysfs loader
//! accepts (input starting with `S` is a sysfs recipe, sysfs_recipe.rs; anything else goes to
//! the archive reader as is), `dra::slices` in every mode either fails with one line or makes
//! slices that offer no housekeeping CPU and read back as themselves; and the same bytes read
//! as an API server's ResourceSliceList (what the publisher parses) never panic.

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "sysfs_recipe.rs"]
mod sysfs_recipe;
use sysfs_recipe::recipe;

fuzz_target!(|data: &[u8]| {
    if let Ok(list) = serde_json::from_slice::<dra::objects::ResourceSliceList>(data) {
        let text = serde_json::to_string(&list.items).expect("serializes");
        let back: Vec<dra::ResourceSlice> = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, list.items);
    }
    let bytes = match data.split_first() {
        Some((b'S', rest)) => recipe(rest),
        _ => data.to_vec(),
    };
    let Ok(host) = topo::sysfs::load_archive_bytes(&bytes, Path::new("fuzz.tar")) else {
        return;
    };
    for gpus in [dra::GpuSelect::Vfio, dra::GpuSelect::All] {
        for cpu_groups in [dra::CpuGroups::Numa, dra::CpuGroups::L3] {
            let mut opts = dra::Options::new("fuzz-node");
            opts.gpus = gpus;
            opts.cpu_groups = cpu_groups;
            match dra::slices(&host, &opts) {
                Ok(p) => {
                    for g in &p.inventory.cpu_groups {
                        assert!(!g.offered.intersects(&p.inventory.housekeeping));
                    }
                    let text = serde_json::to_string(&p.slices).expect("serializes");
                    let back: Vec<dra::ResourceSlice> = serde_json::from_str(&text).expect("reads");
                    assert_eq!(back, p.slices);
                }
                Err(e) => assert!(!e.to_string().contains('\n'), "one line: {e}"),
            }
        }
    }
});

//! The libvirt hook's hugepage claims, driven through `hook::run` on a fake sysfs (plain
//! files: the "kernel" here is the test, which sets the pool's free count after each write):
//! two domains prepared before either starts both get their pages, `started` and `release`
//! end a domain's claim, and a domain prepared again replaces its own claim.
//!
//! No host change: the pools are files in a temporary directory.

use std::path::Path;
use std::time::Duration;

use apply::engine::HostPaths;
use apply::hook::{self, HookConfig};

fn plan_json(pages: u64) -> String {
    testkit::cpu0_plan_json("linux").replace(
        r#""memory": {"host_nodes": [0], "hugepage_size_kb": 4, "pages": 0, "pages_per_node": []}"#,
        &format!(
            r#""memory": {{"host_nodes": [0], "hugepage_size_kb": 2048, "pages": {pages}, "pages_per_node": [{pages}]}}"#
        ),
    )
}

fn messages(cfg: &HookConfig, domain: &str, op: &str, sub: &str) -> String {
    let r = hook::run(domain, op, sub, String::new(), cfg);
    assert!(r.completed, "{r:?}");
    r.messages.join("\n")
}

fn write(p: &Path, v: u64) {
    std::fs::write(p, format!("{v}\n")).unwrap();
}

fn read(p: &Path) -> u64 {
    std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
}

#[test]
fn two_domains_prepared_before_either_starts_get_their_pages() {
    let d = tempfile::tempdir().unwrap();
    let (plans, run_dir, libvirt, sys) = (
        d.path().join("plans"),
        d.path().join("run"),
        d.path().join("libvirt"),
        d.path().join("sys"),
    );
    let pool = sys.join("devices/system/node/node0/hugepages/hugepages-2048kB");
    for p in [&plans, &run_dir, &libvirt, &pool] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::create_dir_all(sys.join("devices/system/cpu")).unwrap();
    std::fs::write(sys.join("devices/system/cpu/online"), "0-1\n").unwrap();
    let (nr, free) = (pool.join("nr_hugepages"), pool.join("free_hugepages"));
    write(&nr, 0);
    write(&free, 0);
    std::fs::write(plans.join("vm-a.json"), plan_json(6)).unwrap();
    std::fs::write(plans.join("vm-b.json"), plan_json(4)).unwrap();
    let cfg = HookConfig {
        plan_dir: plans,
        journal_dir: run_dir.clone(),
        libvirt_run_dir: libvirt,
        timeout: Duration::from_secs(10),
        watcher_exe: None,
        paths: HostPaths {
            proc_root: d.path().join("proc"),
            sys_root: sys,
        },
    };
    let claim = |dom: &str| apply::hugepages::claim_path(&run_dir, dom);

    let said = messages(&cfg, "vm-a", "prepare", "begin");
    assert_eq!(read(&nr), 6, "{said}");
    assert!(claim("vm-a").exists(), "{said}");
    write(&free, 6);
    // B before A starts: A's 6 free pages are promised, B adds its own 4
    let said = messages(&cfg, "vm-b", "prepare", "begin");
    assert_eq!(read(&nr), 10, "{said}");
    assert!(said.contains("promised to vm-a"), "{said}");
    write(&free, 10);
    // A prepared again (libvirt retrying a start): its own claim is not counted against it
    let said = messages(&cfg, "vm-a", "prepare", "begin");
    assert_eq!(read(&nr), 10, "{said}");
    // A started (its QEMU's pid file is not there: nothing else applied): claim ended
    let said = messages(&cfg, "vm-a", "started", "begin");
    assert!(said.contains("hugepage claim ended"), "{said}");
    assert!(!claim("vm-a").exists());
    assert!(claim("vm-b").exists());
    // B's start failed: release ends its claim and gives back its 4
    let said = messages(&cfg, "vm-b", "release", "end");
    assert!(said.contains("hugepage claim ended"), "{said}");
    assert!(!claim("vm-b").exists());
    assert_eq!(read(&nr), 6, "{said}");
    let said = messages(&cfg, "vm-a", "release", "end");
    assert_eq!(read(&nr), 0, "{said}");
}

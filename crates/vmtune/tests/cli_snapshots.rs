//! Byte-for-byte snapshots of what `vmtune topo` and `vmtune plan` print on every shared
//! topology (testdata/topologies: hwloc XML and sysfs snapshots; testdata/vfio: VFIO hosts):
//! the host tree, the plan report, the plan JSON, the emitted libvirt fragment and QEMU
//! arguments, a patched domain; and of `vmtune bench frametimes` on every real capture. They
//! hold the renderers to their output wherever they live. Review changes with
//! `cargo insta review` (or INSTA_UPDATE=always and `git diff`).

mod common;

use std::path::{Path, PathBuf};

/// The workspace root: the runs start there and name their inputs relative to it, so what
/// they print (a host's source is its path) is the same in every checkout.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every shared topology: a snapshot name and the path from the workspace root.
fn topologies() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for dir in ["topologies/hwloc", "topologies/sysfs", "vfio"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("testdata").join(dir))
            .expect("testdata")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".xml") || n.ends_with(".tar.bz2") || n.ends_with(".tar.gz")
            })
            .collect();
        files.sort();
        for p in files {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let stem = name
                .trim_end_matches(".xml")
                .trim_end_matches(".tar.bz2")
                .trim_end_matches(".tar.gz")
                .replace(['.', '+'], "_");
            let rel = Path::new("testdata").join(dir).join(&name);
            out.push((format!("{}_{stem}", dir.replace('/', "_")), rel));
        }
    }
    out
}

/// What a run printed: stdout, and stderr and the exit status where they say something.
fn printed(args: &[&str]) -> String {
    let o = common::vmtune()
        .args(args)
        .current_dir(root())
        .output()
        .expect("running vmtune");
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() || !o.stderr.is_empty() {
        s.push_str(&format!(
            "---- stderr (exit {:?}) ----\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    s
}

/// The first GPU of the host, where it has one.
fn first_gpu(topology: &str) -> Option<String> {
    let o = common::vmtune()
        .args(["topo", "--topology", topology, "--json"])
        .current_dir(root())
        .output()
        .expect("running vmtune");
    let host: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    host["pci_devices"]
        .as_array()?
        .iter()
        .find(|d| d["kind"] == "gpu")
        .and_then(|d| d["bdf"].as_str().map(str::to_string))
}

#[test]
fn topo_tree() {
    for (name, path) in topologies() {
        let t = path.to_str().unwrap();
        insta::assert_snapshot!(format!("topo_{name}"), printed(&["topo", "--topology", t]));
    }
}

#[test]
fn plan_report_json_and_emitters() {
    for (name, path) in topologies() {
        let t = path.to_str().unwrap();
        let gpu = first_gpu(t);
        let mut base = vec!["plan", "--topology", t, "--vcpus", "8", "--memory", "8G"];
        if let Some(g) = &gpu {
            base.extend(["--gpu", g.as_str()]);
        }
        let with = |extra: &[&str]| {
            let mut a = base.clone();
            a.extend(extra);
            printed(&a)
        };
        insta::assert_snapshot!(format!("plan_report_{name}"), with(&[]));
        insta::assert_snapshot!(format!("plan_json_{name}"), with(&["--json"]));
        insta::assert_snapshot!(
            format!("plan_libvirt_{name}"),
            with(&["--emit", "libvirt", "--os", "windows"])
        );
        insta::assert_snapshot!(format!("plan_qemu_{name}"), with(&["--emit", "qemu"]));
    }
}

/// A user's domain patched with the plan: one without devices on every host, with
/// its first GPU where it has one; the Windows 10 domain with its GPU on the built-in host.
#[test]
fn plan_patched_domain() {
    let d = "crates/vmtune/tests/data/domain_no_devices.xml";
    for (name, path) in topologies() {
        let t = path.to_str().unwrap();
        let gpu = first_gpu(t);
        let mut args = vec!["plan", "--topology", t, "--domain", d];
        if let Some(g) = &gpu {
            args.extend(["--gpu", g.as_str()]);
        }
        insta::assert_snapshot!(format!("plan_domain_{name}"), printed(&args));
    }
    let win10 = "crates/emit/tests/fixtures/domain_win10.xml";
    insta::assert_snapshot!(
        "plan_domain_builtin_win10",
        printed(&["plan", "--topology", "builtin", "--domain", win10])
    );
}

/// `bench frametimes` on every real capture of the readers' fixtures: report and JSON.
#[test]
fn frametimes_reports() {
    let dir = "crates/bench/tests/fixtures/captures4";
    let mut files: Vec<String> = std::fs::read_dir(root().join(dir))
        .expect("captures")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| [".csv", ".json", ".hml"].iter().any(|x| n.ends_with(x)))
        .collect();
    files.sort();
    for name in files {
        let path = format!("{dir}/{name}");
        let key = name.replace(['.', '+'], "_");
        insta::assert_snapshot!(
            format!("frametimes_{key}"),
            printed(&["bench", "frametimes", &path])
        );
        // the run's time and machine left out: the rest is what the capture says
        let json = printed(&["bench", "frametimes", &path, "--json"]);
        let mut v: serde_json::Value = serde_json::from_str(&json).expect(&json);
        if let Some(o) = v.as_object_mut() {
            o.remove("created_unix_s");
            o.remove("environment");
        }
        insta::assert_snapshot!(
            format!("frametimes_json_{key}"),
            serde_json::to_string_pretty(&v).unwrap()
        );
    }
}

/// `vmtune` with no arguments: the built-in host's tree and the example plan's report.
#[test]
fn demo() {
    insta::assert_snapshot!("demo", printed(&[]));
}

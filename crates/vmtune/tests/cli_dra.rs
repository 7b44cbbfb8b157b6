//! `vmtune dra` at the command line: the slices of a host model as a JSON List or a YAML
//! stream, the DeviceClasses, the settings read from the NRI agent's config file, and bad
//! input refused with one line and exit 2. (The publisher against a real API server is in
//! crates/dra/tests/scheduler.rs.)

use std::path::Path;

mod common;
use common::{ok_json, run};

fn data(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// Exit 2, one stderr line containing `want`, nothing on stdout.
fn fails(args: &[&str], want: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}");
    let line = err.trim_end();
    assert!(!line.contains('\n') && !line.contains("panicked"), "{err}");
    assert!(line.contains(want), "{args:?}: wanted {want:?} in {line}");
}

#[test]
fn slices_of_a_vfio_host() {
    let hgx = data("vfio/hgx-h100-vfio.tar.gz");
    let list = ok_json(&["dra", "slices", "--topology", &hgx, "--node-name", "gpu-7"]);
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["metadata"]["name"], "gpu-7-vfio.vmtune.io");
    assert_eq!(items[0]["spec"]["devices"].as_array().unwrap().len(), 7);
    assert_eq!(items[1]["spec"]["driver"], "cpu.vmtune.io");
    // --reserved-cpus moves the housekeeping core (to NUMA node 1), --taken-cpus takes a
    // core away, the NRI agent's config file gives the same as the flag
    let cap = |args: &[&str]| -> Vec<u64> {
        let mut a = vec!["dra", "slices", "--topology", &hgx, "--node-name", "n"];
        a.extend_from_slice(args);
        let l = ok_json(&a);
        l["items"][1]["spec"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                d["capacity"]["cpu.vmtune.io/cpus"]["value"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(
        cap(&[]),
        [2, 4],
        "2 cores of 2 threads per node, one the host's"
    );
    assert_eq!(cap(&["--reserved-cpus", "3"]), [4, 2]);
    assert_eq!(
        cap(&["--taken-cpus", "2"]),
        [2, 2],
        "CPU 2's core is taken whole"
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("nri.toml");
    std::fs::write(&cfg, "reserved_cpus = \"3\"\n").unwrap();
    assert_eq!(cap(&["--nri-config", &cfg.to_string_lossy()]), [4, 2]);
}

#[test]
fn yaml_and_classes() {
    let o = run(&["dra", "classes", "--yaml"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("kind: DeviceClass").count(), 2);
    assert!(
        text.contains("device.driver == \\\"cpu.vmtune.io\\\"")
            || text.contains("device.driver == \"cpu.vmtune.io\""),
        "{text}"
    );
    let o = run(&[
        "dra",
        "slices",
        "--topology",
        "builtin",
        "--node-name",
        "n",
        "--yaml",
    ]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("kind: ResourceSlice") && !text.contains('!'),
        "{text}"
    );
}

#[test]
fn bad_input_is_one_line() {
    fails(
        &[
            "dra",
            "slices",
            "--topology",
            "builtin",
            "--node-name",
            "Node_A",
        ],
        "DNS-1123",
    );
    fails(
        &[
            "dra",
            "slices",
            "--topology",
            "builtin",
            "--node-name",
            "a",
            "--taken-cpus",
            "x-",
        ],
        "--taken-cpus",
    );
    fails(
        &[
            "dra",
            "slices",
            "--topology",
            "/nonexistent",
            "--node-name",
            "a",
        ],
        "nonexistent",
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("nri.toml");
    std::fs::write(&cfg, "reservd_cpus = \"0\"\n").unwrap();
    fails(
        &[
            "dra",
            "slices",
            "--topology",
            "builtin",
            "--node-name",
            "a",
            "--nri-config",
            &cfg.to_string_lossy(),
        ],
        "reservd_cpus",
    );
    // the publisher outside a pod, without --server
    fails(
        &[
            "dra",
            "publish",
            "--topology",
            "builtin",
            "--node-name",
            "a",
            "--once",
        ],
        "KUBERNETES_SERVICE_HOST",
    );
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, "not a certificate").unwrap();
    fails(
        &[
            "dra",
            "publish",
            "--topology",
            "builtin",
            "--node-name",
            "a",
            "--once",
            "--server",
            "https://127.0.0.1:1",
            "--token-file",
            &cfg.to_string_lossy(),
            "--ca-file",
            &ca.to_string_lossy(),
        ],
        "no PEM certificate",
    );
    fails(
        &[
            "dra",
            "publish",
            "--topology",
            "builtin",
            "--node-name",
            "a",
            "--once",
            "--server",
            "http://127.0.0.1:1",
            "--token-file",
            &cfg.to_string_lossy(),
            "--ca-file",
            &ca.to_string_lossy(),
        ],
        "https://",
    );
}

//! `vmtune cdi` end to end: the spec on stdout for a --topology host, atomic writes to a file
//! or directory, the report, refusals, --strict, --allow-empty, the live host; and `vmtune
//! topo` showing each device's IOMMU group and VFIO cdev.

use std::path::{Path, PathBuf};

mod common;
use common::{ok_json, run};
use serde_json::Value;

fn snapshot(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"))
        .to_string_lossy()
        .into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, one stderr line containing `want`, nothing on stdout.
fn fails(args: &[&str], want: &str) -> String {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
    let line = err.trim_end();
    assert!(!line.contains('\n'), "{args:?}: not one line: {err}");
    assert!(!line.contains("panicked"), "{err}");
    assert!(line.contains(want), "{args:?}: wanted {want:?} in {line}");
    line.to_string()
}

fn valid(spec: &Value) {
    if let Err(v) = cdi::rules::validate(spec) {
        panic!("{v:?}");
    }
}

fn names(spec: &Value) -> Vec<String> {
    spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

fn device<'a>(spec: &'a Value, name: &str) -> &'a Value {
    spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no device {name}"))
}

fn node_paths(spec: &Value, name: &str) -> Vec<(String, i64, i64)> {
    device(spec, name)["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_eq!(n["type"], "c");
            (
                n["path"].as_str().unwrap().to_string(),
                n["major"].as_i64().unwrap(),
                n["minor"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn builtin_prints_a_valid_spec_in_both_modes() {
    let legacy = ok_json(&["cdi", "--topology", "builtin"]);
    valid(&legacy);
    assert_eq!(legacy["cdiVersion"], "0.5.0");
    assert_eq!(legacy["kind"], "vmtune.io/vfio");
    assert_eq!(names(&legacy), ["0", "0000:01:00.0", "1", "0000:01:00.1"]);
    assert_eq!(
        node_paths(&legacy, "0000:01:00.0"),
        [
            ("/dev/vfio/vfio".to_string(), 10, 196),
            ("/dev/vfio/1".to_string(), 243, 0)
        ]
    );
    let iommufd = ok_json(&["cdi", "--topology", "builtin", "--iommufd"]);
    valid(&iommufd);
    assert_eq!(
        names(&iommufd),
        ["0", "0000:01:00.0", "vfio0", "1", "0000:01:00.1", "vfio1"]
    );
    assert_eq!(
        node_paths(&iommufd, "1"),
        [
            ("/dev/iommu".to_string(), 10, 124),
            ("/dev/vfio/devices/vfio1".to_string(), 511, 1)
        ]
    );
    // the iGPU on i915 is said on stderr, and only that
    let o = run(&["cdi", "--topology", "builtin"]);
    assert_eq!(
        stderr(&o),
        "vmtune: note: 0000:00:02.0 bound to i915, not vfio-pci: not in the spec\n"
    );
    // --output - is stdout too, and --json changes nothing there
    let dash = ok_json(&["cdi", "--topology", "builtin", "--output", "-", "--json"]);
    assert_eq!(dash, legacy);
}

#[test]
fn snapshot_spec_is_written_atomically_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let snap = snapshot("hgx-h100-vfio");
    // a directory gets VENDOR-CLASS.json
    let o = run(&["cdi", "--topology", &snap, "--iommufd", "--output", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = dir.path().join("vmtune.io-vfio.json");
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        report.starts_with(&format!(
            "wrote {}: kind vmtune.io/vfio, cdiVersion 0.5.0",
            path.display()
        )),
        "{report}"
    );
    assert!(report.contains("0000:18:00.0  10de:2330 GPU, IOMMU group 16: /dev/iommu (10:124), /dev/vfio/devices/vfio3 (511:3)"), "{report}");
    assert!(
        report.contains("cdi.k8s.io/vmtune.io.vfio_0: \"vmtune.io/vfio=0\""),
        "{report}"
    );
    assert!(
        report.contains("Left out:\n  0000:4b:00.1 IOMMU group 40 is not viable"),
        "{report}"
    );
    let err = stderr(&o);
    assert!(
        err.contains("vmtune: warning: 0000:4b:00.1 left out"),
        "{err}"
    );
    assert!(
        err.contains("vmtune: note: 0000:db:00.0 bound to nvidia"),
        "{err}"
    );
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    valid(&spec);
    assert_eq!(
        spec["devices"].as_array().unwrap().len(),
        33,
        "11 devices x 3 names"
    );
    // only the spec is left in the directory, readable by all
    let entries: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["vmtune.io-vfio.json"]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o644
    );

    // a file named in an existing directory, legacy now, the report as JSON
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let file = dir.path().join("sub/nvidia.json");
    let rep = ok_json(&[
        "cdi",
        "--topology",
        &snap,
        "--class",
        "gpu",
        "--kind",
        "nvidia.com/pgpu",
        "--annotate",
        "-o",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(rep["path"], file.to_str().unwrap());
    assert_eq!(rep["kind"], "nvidia.com/pgpu");
    assert_eq!(rep["cdi_version"], "0.6.0");
    assert_eq!(rep["mode"], "legacy");
    let devs = rep["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 7);
    assert_eq!(devs[0]["bdf"], "0000:18:00.0");
    assert_eq!(devs[0]["class"], "gpu");
    assert_eq!(devs[0]["nodes"][1]["path"], "/dev/vfio/16");
    assert_eq!(
        devs[0]["request_annotation"]["key"],
        "cdi.k8s.io/nvidia.com.pgpu_0"
    );
    assert_eq!(rep["refused"], serde_json::json!([]));
    assert_eq!(rep["not_vfio"][0]["bdf"], "0000:db:00.0");
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    valid(&spec);
    assert_eq!(
        device(&spec, "0000:ab:00.0")["annotations"]["vmtune.io/iommu-group"],
        "112"
    );

    // a file in a directory that does not exist: refused, naming the directory, and the
    // directory is not made (a typo in -o must not leave a tree behind)
    let missing = dir.path().join("no/such");
    let target = missing.join("spec.json");
    let line = fails(
        &["cdi", "--topology", &snap, "-o", target.to_str().unwrap()],
        &format!("{} does not exist", missing.display()),
    );
    assert!(line.contains("--output"), "{line}");
    assert!(
        !dir.path().join("no").exists(),
        "created {}",
        missing.display()
    );
    // a directory that does not exist yet, written with a trailing '/'
    let new_dir = format!("{}/etc/cdi/", dir.path().display());
    let o = run(&["cdi", "--topology", &snap, "-o", &new_dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("etc/cdi/vmtune.io-vfio.json").is_file());
    // --class with --device is a usage error
    let o = run(&[
        "cdi",
        "--topology",
        &snap,
        "--class",
        "gpu",
        "--device",
        "18:00.0",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn refusals_strict_and_explicit_devices() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    let o = out.to_str().unwrap();
    let snap = snapshot("hgx-h100-vfio");
    fails(
        &["cdi", "--topology", &snap, "--strict", "-o", o],
        "--strict: left out 0000:4b:00.1 IOMMU group 40 is not viable",
    );
    fails(
        &["cdi", "--topology", &snap, "--device", "db:00.0", "-o", o],
        "refused: 0000:db:00.0 bound to nvidia, not vfio-pci",
    );
    fails(
        &["cdi", "--topology", &snap, "--device", "0e:00.0", "-o", o],
        "0000:0e:00.0: no such PCI function",
    );
    fails(
        &["cdi", "--topology", &snap, "--device", "gpu0", "-o", o],
        "\"gpu0\" is not a PCI address",
    );
    fails(
        &["cdi", "--topology", &snap, "--kind", "nvidia", "-o", o],
        "--kind: kind \"nvidia\" is not vendor/class",
    );
    fails(
        &[
            "cdi",
            "--topology",
            &snap,
            "--cdi-version",
            "0.4.0",
            "-o",
            o,
        ],
        "cdiVersion 0.4.0 is too old: this spec needs 0.5.0",
    );
    assert!(!out.exists(), "nothing written by a failed run");
    // two devices by address: only they are in the spec, indexed in BDF order
    let spec = ok_json(&[
        "cdi",
        "--topology",
        &snap,
        "--iommufd",
        "--device",
        "2a:00.0",
        "--device",
        "0000:18:00.0",
    ]);
    valid(&spec);
    assert_eq!(
        names(&spec),
        ["0", "0000:18:00.0", "vfio3", "1", "0000:2a:00.0", "vfio0"]
    );
}

#[test]
fn no_usable_device_fails_or_with_allow_empty_removes_the_old_spec() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vmtune.io-vfio.json");
    let o = out.to_str().unwrap();
    std::fs::write(&out, "{\"stale\": true}\n").unwrap();
    let snap = snapshot("desktop-5.15-legacy");
    fails(
        &["cdi", "--topology", &snap, "--iommufd", "-o", o],
        "no usable VFIO device on sysfs:",
    );
    assert!(out.exists(), "a failed run leaves the old spec alone");
    let r = run(&[
        "cdi",
        "--topology",
        &snap,
        "--iommufd",
        "--allow-empty",
        "-o",
        o,
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("removed the old spec"), "{text}");
    assert!(!out.exists());
    let rep = ok_json(&[
        "cdi",
        "--topology",
        &snap,
        "--iommufd",
        "--allow-empty",
        "-o",
        o,
        "--json",
    ]);
    assert_eq!(rep["removed"], Value::Null);
    assert_eq!(rep["devices"], serde_json::json!([]));
    // to stdout: nothing there, the note on stderr
    let r = run(&["cdi", "--topology", &snap, "--iommufd", "--allow-empty"]);
    assert!(r.status.success());
    assert!(r.stdout.is_empty());
    assert!(stderr(&r).contains("no spec written"), "{}", stderr(&r));
    // the legacy spec of the same host has the NVMe
    let spec = ok_json(&["cdi", "--topology", &snap]);
    assert_eq!(names(&spec), ["0", "0000:03:00.0"]);
}

/// A `--class` no VFIO-owned function has: the message says which classes are bound, not
/// that nothing is ("no PCI device … is bound to vfio-pci" was wrong: the GPU is).
#[test]
fn a_class_with_no_vfio_function_names_the_bound_ones() {
    let line = fails(
        &["cdi", "--topology", "builtin", "--class", "nic"],
        "no nic function on builtin:vfio-desktop-i9-9900k is bound to vfio-pci (--class nic)",
    );
    assert!(
        line.contains("bound to vfio-pci: 0000:01:00.0 (gpu), 0000:01:00.1 (other)"),
        "{line}"
    );
    let line = fails(
        &[
            "cdi",
            "--topology",
            &snapshot("hgx-h100-vfio"),
            "--class",
            "storage",
        ],
        "no storage function",
    );
    assert!(
        line.contains("(gpu)") && line.contains("(bridge)"),
        "{line}"
    );
}

fn live_vfio_functions() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/bus/pci/devices")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    std::fs::read_link(p.join("driver"))
                        .ok()
                        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .is_some_and(|n| topo::is_vfio_pci_driver(&n))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The live host: where nothing is on vfio-pci (this development VM) the command says so and
/// exits 2, writing nothing; where something is, the spec validates.
#[test]
fn live_host() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.json");
    let o = out.to_str().unwrap();
    if live_vfio_functions().is_empty() {
        let line = fails(&["cdi", "-o", o], "is bound to vfio-pci");
        assert!(line.contains("no PCI device on live:/"), "{line}");
        assert!(line.ends_with("nothing written"), "{line}");
        assert!(!out.exists());
        let r = run(&["cdi", "-o", o, "--allow-empty"]);
        assert!(r.status.success());
        assert!(String::from_utf8_lossy(&r.stdout).contains("no spec written"));
    } else {
        let r = run(&["cdi", "-o", o]);
        if r.status.success() {
            valid(&serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap());
        } else {
            eprintln!(
                "live host has VFIO devices but no usable one: {}",
                stderr(&r)
            );
        }
    }
}

#[test]
fn topo_shows_groups_and_cdevs() {
    let o = run(&["topo", "--topology", "builtin"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("GPU 0000:01:00.0 [10de:1b06] \"GP102 [GeForce GTX 1080 Ti]\" — local CPUs 0-15, IOMMU group 1, vfio-pci, VFIO cdev /dev/vfio/devices/vfio0 (511:0)"),
        "{text}"
    );
    assert!(
        text.contains(
            "VFIO nodes: /dev/vfio/vfio (10:196), /dev/iommu (10:124), groups /dev/vfio/1 (243:0)"
        ),
        "{text}"
    );
    let j = ok_json(&["topo", "--topology", "builtin", "--json"]);
    let gpu = j["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:01:00.1")
        .unwrap();
    assert_eq!(gpu["iommu_group"], 1);
    assert_eq!(gpu["vfio_cdev"]["name"], "vfio1");
    assert_eq!(gpu["vfio_cdev"]["dev"]["major"], 511);
    assert_eq!(gpu["vfio_cdev"]["dev"]["minor"], 1);
    assert_eq!(j["vfio"]["groups"][0]["node"], "1");
    assert_eq!(j["vfio"]["container"]["minor"], 196);

    // a snapshot: NVSwitches ("other bridge" class) on vfio-pci are listed, plain bridges not
    let o = run(&["topo", "--topology", &snapshot("hgx-h100-vfio")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("0000:05:00.0 [10de:22a3] — local CPUs 0-1,4-5, IOMMU group 5, vfio-pci, VFIO cdev /dev/vfio/devices/vfio7 (511:7)"), "{text}");
    assert!(!text.contains("0000:15:01.0"), "{text}");
    assert!(
        text.contains(
            "0000:db:00.0 [10de:2330] — local CPUs 2-3,6-7, IOMMU group 150, nvidia, largest"
        ),
        "{text}"
    );
    // hwloc XML says nothing of VFIO: null, not empty
    let x =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc/g4dnmetal.xml");
    let j = ok_json(&["topo", "--topology", x.to_str().unwrap(), "--json"]);
    assert_eq!(j["vfio"], Value::Null);
    assert!(j["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["vfio_cdev"].is_null()));
}

/// Intel VMD: devices in PCI domain 10000 are named with five hex digits in `topo`, asked for
/// by that name in any spelling, and refused by it (VFIO cannot take them: no IOMMU group,
/// bound to nvme); the host's VFIO GPU beside them goes into the spec as before.
#[test]
fn vmd_devices_keep_their_five_digit_names() {
    let snap = snapshot("server-vmd");
    let o = run(&["topo", "--topology", &snap, "--json"]);
    let topo: Value = serde_json::from_slice(&o.stdout).unwrap();
    let bdfs: Vec<&str> = topo["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["bdf"].as_str())
        .collect();
    for want in [
        "10000:e0:02.0",
        "10000:e1:00.0",
        "10000:e2:00.0",
        "0000:64:00.5",
    ] {
        assert!(bdfs.contains(&want), "{want} in {bdfs:?}");
    }
    for spelling in ["10000:e1:00.0", "10000:E1:0.0"] {
        fails(
            &["cdi", "--topology", &snap, "--device", spelling],
            "10000:e1:00.0 bound to nvme, not vfio-pci",
        );
    }
    let spec = ok_json(&["cdi", "--topology", &snap, "--iommufd"]);
    valid(&spec);
    assert_eq!(names(&spec), vec!["0", "0000:18:00.0", "vfio0"]);
}

/// A VFIO function whose vendor file says 0x0000 (no vendor PCI-SIG assigns): the report
/// says "unknown id", the JSON report `null`, and `--annotate` leaves `pci-id` out, never
/// 0000:0000; `vmtune topo` shows it the same way.
#[test]
fn unknown_pci_ids_are_not_written_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(snapshot("hgx-h100-vfio"))
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("tar");
    assert!(st.success());
    let root = dir.path().join("hgx-h100-vfio");
    let dev = root.join("sys/bus/pci/devices/0000:18:00.0");
    for f in ["vendor", "device"] {
        std::fs::write(dev.join(f), "0x0000\n").unwrap();
    }
    let root_s = root.to_str().unwrap();
    let spec_path = dir.path().join("spec.json");
    let spec_s = spec_path.to_str().unwrap();
    let args = ["cdi", "--topology", root_s, "--annotate", "-o", spec_s];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("0000:18:00.0")).unwrap();
    assert!(
        line.contains("unknown id") && !line.contains("0000:0000"),
        "{line}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let rep = ok_json(&json_args);
    let d = rep["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] == "0000:18:00.0")
        .unwrap();
    assert!(d["pci_id"].is_null(), "{d}");
    let other = rep["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bdf"] != "0000:18:00.0")
        .unwrap();
    assert!(
        other["pci_id"].as_str().unwrap().starts_with("10de:"),
        "{other}"
    );
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    valid(&spec);
    let a = &device(&spec, "0000:18:00.0")["annotations"];
    assert!(a.get("vmtune.io/pci-id").is_none(), "{a}");
    assert_eq!(a["vmtune.io/bdf"], "0000:18:00.0");
    let o = run(&["topo", "--topology", root_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tree = String::from_utf8(o.stdout).unwrap();
    assert!(tree.contains("0000:18:00.0 [unknown id]"), "{tree}");
}

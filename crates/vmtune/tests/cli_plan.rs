//! `vmtune plan` end to end: the report, the JSON contract of DESIGN.md, tenants from plan
//! JSON, refusals (exit 2, one line), emitted formats.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

mod common;
use common::run;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const GAMING: &[&str] = &[
    "plan",
    "--topology",
    "builtin",
    "--vcpus",
    "12",
    "--memory",
    "16G",
    "--gpu",
    "01:00.0",
    "--os",
    "windows",
    "--name",
    "win10",
];

fn list(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap_or_else(|| panic!("not a number: {x}")))
        .collect()
}

#[test]
fn report_reproduces_the_seed_000_layout() {
    let o = run(GAMING);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("Guest CPUs 2-7,10-15"), "{s}");
    assert!(s.contains("housekeeping CPUs  0,8"), "{s}");
    assert!(s.contains("emulator CPUs      1,9"), "{s}");
    assert!(
        s.contains("device (VFIO) -> CPUs 2-7,10-15; all others -> CPUs 0-1,8-9"),
        "{s}"
    );
    assert!(
        s.contains("1 socket(s) x 1 die(s) x 6 core(s) x 2 thread(s)"),
        "{s}"
    );
    assert!(s.contains("8192 pages of 2 MiB"), "{s}");
    assert!(s.contains("Hyper-V relaxed"), "{s}");
    // vCPU table: vCPU 0 on PU 2, vCPU 1 on its sibling PU 10, both core L#2
    let row = |vcpu: u32| {
        s.lines()
            .find(|l| l.split_whitespace().next() == Some(&vcpu.to_string()))
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(row(0)[..3], ["0", "2", "2"]);
    assert_eq!(row(1)[..3], ["1", "10", "2"]);
    assert!(s.contains("Why"), "{s}");
    assert!(s.contains("01:00.1"), "the audio function goes along: {s}");
}

#[test]
fn json_has_the_design_keys() {
    let mut args = GAMING.to_vec();
    args.push("--json");
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("plan JSON");
    let vcpus = v["vcpus"].as_array().expect("vcpus");
    assert_eq!(vcpus.len(), 12);
    assert_eq!(vcpus[0]["vcpu"], 0);
    assert_eq!(vcpus[0]["cpu"], 2);
    assert_eq!(vcpus[1]["cpu"], 10);
    assert_eq!(list(&v["emulator_cpus"]), vec![1, 9]);
    assert_eq!(list(&v["iothread_cpus"]), vec![1, 9]);
    assert_eq!(list(&v["host_cpus"]), vec![0, 8]);
    let t = &v["guest_topology"];
    assert_eq!(
        (
            t["sockets"].as_u64(),
            t["dies"].as_u64(),
            t["cores"].as_u64(),
            t["threads"].as_u64()
        ),
        (Some(1), Some(1), Some(6), Some(2))
    );
    let cell = &v["guest_numa"][0];
    assert_eq!(cell["cell"], 0);
    assert_eq!(list(&cell["vcpus"]).len(), 12);
    assert_eq!(cell["memory_bytes"].as_u64(), Some(16 << 30));
    assert_eq!(list(&cell["host_nodes"]), vec![0]);
    assert_eq!(list(&v["memory"]["host_nodes"]), vec![0]);
    assert_eq!(v["memory"]["hugepage_size_kb"], 2048);
    assert_eq!(v["memory"]["pages"], 8192);
    assert_eq!(
        list(&v["irq"]["vfio_cpus"]),
        vec![2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15]
    );
    assert_eq!(list(&v["irq"]["host_cpus"]), vec![0, 1, 8, 9]);
    assert!(v["rationale"]
        .as_array()
        .is_some_and(|r| r.len() > 5 && r.iter().all(|s| s.is_string())));
    assert!(v["warnings"].is_array());
    // --emit json is the same document
    let mut args = GAMING.to_vec();
    args.extend(["--emit", "json"]);
    let o2 = run(&args);
    assert_eq!(o.stdout, o2.stdout);
}

fn temp_file(name: &str, content: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join(name);
    std::fs::write(&p, content).expect("write");
    (dir, p)
}

#[test]
fn a_plan_json_is_a_tenant() {
    let first = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--name",
        "a",
        "--json",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let a: Value = serde_json::from_slice(&first.stdout).unwrap();
    let (_d, path) = temp_file("a.json", &first.stdout);
    let second = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--json",
        "--tenant",
        path.to_str().unwrap(),
    ]);
    assert!(second.status.success(), "{}", stderr(&second));
    let b: Value = serde_json::from_slice(&second.stdout).unwrap();
    let taken: Vec<u64> = a["vcpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["cpu"].as_u64().unwrap())
        .chain(list(&a["emulator_cpus"]))
        .collect();
    for v in b["vcpus"].as_array().unwrap() {
        assert!(
            !taken.contains(&v["cpu"].as_u64().unwrap()),
            "{v} is taken by tenant a"
        );
    }
}

#[test]
fn refusals_exit_2_with_one_line() {
    for (args, want) in [
        (
            vec!["--vcpus", "16", "--memory", "4G"],
            "at most 14 vCPUs fit",
        ),
        (vec!["--vcpus", "4", "--memory", "64G"], "does not fit"),
        (
            vec!["--vcpus", "4", "--memory", "4G", "--gpu", "07:00.0"],
            "no PCI device 0000:07:00.0",
        ),
        (
            vec!["--vcpus", "4", "--memory", "4G", "--gpu", "nonsense"],
            "not a PCI address",
        ),
        (vec!["--vcpus", "4", "--memory", "lots"], "invalid size"),
    ] {
        let mut full = vec!["plan", "--topology", "builtin"];
        full.extend(args);
        let o = run(&full);
        assert_eq!(o.status.code(), Some(2), "{full:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(want), "{full:?}: {e}");
        if !want.contains("invalid size") {
            assert_eq!(e.trim_end().lines().count(), 1, "{full:?}: {e}");
        }
    }
}

#[test]
fn device_taken_by_a_tenant_is_refused() {
    let first = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--gpu",
        "01:00.0",
        "--name",
        "gamer",
        "--json",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let (_d, path) = temp_file("gamer.json", &first.stdout);
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "2",
        "--memory",
        "2G",
        "--gpu",
        "01:00.1",
        "--tenant",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("already assigned to tenant \"gamer\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_tenant_file_is_named() {
    let (_d, path) = temp_file("junk.txt", b"hello");
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "2",
        "--memory",
        "2G",
        "--tenant",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("junk.txt") && e.contains("neither a plan JSON nor a libvirt domain XML"),
        "{e}"
    );
}

#[test]
fn windows7_and_hugepage_flags() {
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "8G",
        "--os",
        "windows7",
        "--hugepages",
        "none",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpu_features"]["hide_hypervisor"], true);
    assert_eq!(v["memory"]["hugepage_size_kb"], 4);
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("3:03") && warnings.contains("2:26"),
        "{warnings}"
    );
}

#[test]
fn emitted_formats_are_produced() {
    for fmt in ["libvirt", "qemu", "kata", "kubevirt"] {
        let mut args = GAMING.to_vec();
        args.extend(["--emit", fmt]);
        let o = run(&args);
        assert!(o.status.success(), "{fmt}: {}", stderr(&o));
        assert!(!stdout(&o).trim().is_empty(), "{fmt}: empty output");
    }
    let mut args = GAMING.to_vec();
    args.extend(["--emit", "libvirt"]);
    let s = stdout(&run(&args));
    assert!(s.contains("vcpupin") && s.contains("cpuset='2'"), "{s}");
}

#[test]
fn domain_is_patched_and_becomes_a_tenant() {
    let domain = "<domain type='kvm'>\n  <name>win10</name>\n  <memory unit='KiB'>1048576</memory>\n  <vcpu>2</vcpu>\n  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n</domain>\n";
    let (_d, path) = temp_file("win10.xml", domain.as_bytes());
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let patched = stdout(&o);
    assert!(
        patched.contains("<name>win10</name>") && patched.contains("vcpupin"),
        "{patched}"
    );
    // the patched domain, as a tenant, takes its CPUs: a second VM goes elsewhere or is refused
    let (_d2, tenant) = temp_file("tenant.xml", patched.as_bytes());
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "2",
        "--memory",
        "2G",
        "--json",
        "--tenant",
        tenant.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the desktop has no free core left: {}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("at most 0 vCPUs fit"), "{}", stderr(&o));
    // --domain needs the libvirt format
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap(), "--emit", "qemu"]);
    assert_eq!(run(&args).status.code(), Some(2));
}

#[test]
fn help_teaches() {
    let o = run(&["plan", "--help"]);
    assert!(o.status.success());
    let s = stdout(&o);
    for flag in [
        "--vcpus",
        "--memory",
        "--gpu",
        "--profile",
        "--os",
        "--tenant",
        "--hugepages",
        "--topology",
        "--emit",
        "--domain",
        "--json",
        "--host-cpus",
    ] {
        assert!(s.contains(flag), "{flag} missing from --help");
    }
}

#[test]
fn the_housekeeping_is_kept_and_moving_it_must_be_accepted() {
    let first = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--host-cpus",
        "3",
        "--name",
        "a",
        "--json",
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let (_d, path) = temp_file("a.json", &first.stdout);
    let tenant = path.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            "--topology",
            "builtin",
            "--vcpus",
            "2",
            "--memory",
            "2G",
            "--json",
            "--tenant",
            tenant,
        ];
        args.extend(extra);
        run(&args)
    };
    // kept without being asked
    let kept = plan(&[]);
    assert!(kept.status.success(), "{}", stderr(&kept));
    let v: Value = serde_json::from_slice(&kept.stdout).unwrap();
    assert_eq!(list(&v["host_cpus"]), vec![3, 11]);
    // another --host-cpus is refused in one line naming the flag that accepts it
    let moved = plan(&["--host-cpus", "0"]);
    assert_eq!(moved.status.code(), Some(2));
    let e = stderr(&moved);
    assert!(e.contains("--move-host-cpus") && e.contains("3,11"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    // accepted: planned, with a warning
    let accepted = plan(&["--host-cpus", "0", "--move-host-cpus"]);
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    let v: Value = serde_json::from_slice(&accepted.stdout).unwrap();
    assert_eq!(list(&v["host_cpus"]), vec![0, 8]);
    assert!(
        v["warnings"].to_string().contains("moved from 3,11"),
        "{}",
        v["warnings"]
    );
}

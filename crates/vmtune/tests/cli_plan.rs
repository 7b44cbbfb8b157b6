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
        // below MIN_MEMORY_BYTES
        (vec!["--vcpus", "1", "--memory", "1M"], "at least 64 MiB"),
        (vec!["--vcpus", "1", "--memory", "0"], "at least 64 MiB"),
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
    // with another format, --domain lends its choices to the plan and is not printed
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap(), "--emit", "qemu"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("qemu-system-x86_64"),
        "{}",
        stdout(&o)
    );
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

/// A libvirt domain holding `gib` GiB of 2 MiB hugepages, pinned to `cpus`, bound to `nodeset`
/// (no `<numatune>` when `None`).
fn hugepage_tenant(name: &str, gib_x2: u64, cpus: &str, nodeset: Option<&str>) -> String {
    let kib = gib_x2 * (1 << 19); // half-GiB steps, in KiB
    let numatune = nodeset
        .map(|n| {
            format!("  <numatune>\n    <memory mode='strict' nodeset='{n}'/>\n  </numatune>\n")
        })
        .unwrap_or_default();
    format!(
        "<domain type='kvm'>\n  <name>{name}</name>\n  <memory unit='KiB'>{kib}</memory>\n  <memoryBacking>\n    <hugepages/>\n  </memoryBacking>\n  <vcpu placement='static' cpuset='{cpus}'>4</vcpu>\n{numatune}  <os>\n    <type arch='x86_64'>hvm</type>\n  </os>\n</domain>\n"
    )
}

#[test]
fn tenant_hugepages_count_on_the_tenants_node_only() {
    let topo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/topologies/hwloc/32em64t-2n8c2t-pci-normalio.xml"
    );
    // 30.5 GiB of hugepages on node 0 of a 2 x 32 GiB host: named by <numatune>, or found
    // where the tenant's CPUs are (2-5 are node 0's; CPU 0 stays the host's)
    for (what, nodeset) in [("numatune", Some("0")), ("cpus", None)] {
        let xml = hugepage_tenant("db", 61, "2-5", nodeset);
        let (_d, path) = temp_file("db.xml", xml.as_bytes());
        let o = run(&[
            "plan",
            "--topology",
            topo,
            "--vcpus",
            "4",
            "--memory",
            "8G",
            "--tenant",
            path.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(list(&v["memory"]["host_nodes"]), vec![1], "{what}");
        let why = v["rationale"].to_string();
        assert!(why.contains("tenant \\\"db\\\" holds"), "{what}: {why}");
    }
}

#[test]
fn tenant_pinned_to_cpus_the_host_lacks_is_refused() {
    let xml = hugepage_tenant("far", 2, "0-23", None);
    let (_d, path) = temp_file("far.xml", xml.as_bytes());
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
        e.contains("pins CPUs 16-23") && e.contains("\"far\""),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}

#[test]
fn kata_prints_the_dropin_and_a_guaranteed_pod() {
    for vcpus in ["1", "4"] {
        let o = run(&[
            "plan",
            "--topology",
            "builtin",
            "--vcpus",
            vcpus,
            "--memory",
            "2G",
            "--emit",
            "kata",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let s = stdout(&o);
        let (toml_part, pod) = s.split_once("# ---- pod.yaml ----\n").expect("two parts");
        // Kata's Go loader replaces a default_memory under 256 MiB with 2048
        let mem: u64 = toml_part
            .lines()
            .find_map(|l| l.strip_prefix("default_memory = "))
            .and_then(|v| v.parse().ok())
            .expect("default_memory");
        assert!(mem >= 256, "{toml_part}");
        assert!(toml_part.contains("\"enable_iommu\", \"kernel_params\", \"kernel_verity_params\""));
        assert!(pod.contains("kind: Pod"), "{pod}");
        // Guaranteed: cpu and memory in limits and requests alike, whole CPUs
        let cpu_lines = pod.matches(&format!("cpu: \"{vcpus}\"")).count();
        assert_eq!(cpu_lines, 2, "{pod}");
        assert!(pod.contains("default_vcpus: \"0\""), "{pod}");
        // --emit kata-pod: the Pod alone
        let o = run(&[
            "plan",
            "--topology",
            "builtin",
            "--vcpus",
            vcpus,
            "--memory",
            "2G",
            "--emit",
            "kata-pod",
        ]);
        assert!(
            stdout(&o).starts_with("# vmtune: Kata sizes the VM"),
            "{}",
            stdout(&o)
        );
    }
}

/// A hugepage-backed guest's pages are asked for exactly; the container's ceiling inside the
/// guest is all of it but Kata's 256 MiB floor, or --kata-container-memory, the rest moving to
/// default_memory so the VM stays --memory either way. The flag without a Kata format is refused.
#[test]
fn kata_container_memory_is_the_ceiling_and_the_vm_stays() {
    let pod = |extra: &[&str]| {
        let mut a = vec![
            "plan",
            "--topology",
            "builtin",
            "--vcpus",
            "4",
            "--memory",
            "8G",
            "--hugepages",
            "2M",
            "--emit",
            "kata-pod",
        ];
        a.extend(extra);
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let line = |p: &str, key: &str| -> String {
        p.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} in {p}"))
            .trim_matches('"')
            .to_string()
    };
    for (extra, base, mem) in [
        (&[][..], "256", "7936Mi"),
        (&["--kata-container-memory", "3G"][..], "5120", "3Gi"),
        (&["--kata-container-memory", "64M"][..], "8128", "64Mi"),
    ] {
        let p = pod(extra);
        assert_eq!(
            line(&p, "io.katacontainers.config.hypervisor.default_memory: "),
            base,
            "{p}"
        );
        assert_eq!(line(&p, "memory: "), mem, "{p}");
        assert_eq!(line(&p, "hugepages-2Mi: "), "8Gi", "{p}");
        assert!(p.contains("= 4 vCPUs, 8192 MiB, the plan's."), "{p}");
    }
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "8G",
        "--kata-container-memory",
        "1G",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--kata-container-memory goes with --emit kata"));
}

/// --kata-container-memory below 64M is refused in one line (exit 2, nothing on stdout), for
/// every Kata format; before, 16M was raised to 64Mi without a word.
#[test]
fn kata_container_memory_below_64m_is_refused() {
    for (size, said) in [("16M", "16M"), ("65535K", "65535K"), ("0M", "0M")] {
        for emit in ["kata", "kata-config", "kata-pod"] {
            let o = run(&[
                "plan",
                "--topology",
                "builtin",
                "--vcpus",
                "2",
                "--memory",
                "4G",
                "--emit",
                emit,
                "--kata-container-memory",
                size,
            ]);
            assert_eq!(o.status.code(), Some(2), "{size} {emit}: {}", stdout(&o));
            assert!(stdout(&o).is_empty(), "{size} {emit}");
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with(&format!(
                    "vmtune: error: --kata-container-memory {said} is below 64M"
                )),
                "{err}"
            );
        }
    }
    // 64M itself is the floor, taken
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "2",
        "--memory",
        "4G",
        "--emit",
        "kata-pod",
        "--kata-container-memory",
        "64M",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn qemu_has_no_unused_iothread() {
    let mut args = GAMING.to_vec();
    args.extend(["--emit", "qemu"]);
    let s = stdout(&run(&args));
    assert!(s.starts_with("qemu-system-x86_64"), "{s}");
    assert!(!s.contains("iothread"), "{s}");
    assert!(s.ends_with("01:00.1\n"), "{s:?}");
}

#[test]
fn patched_domain_keeps_a_missing_final_newline_and_warns_on_stderr() {
    let domain = "<domain type='kvm'>\n  <name>ac</name>\n  <memory unit='KiB'>1048576</memory>\n  <vcpu placement='static' current='2'>4</vcpu>\n  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n  <features>\n    <hyperv mode='custom'>\n      <vendor_id state='on' value='banana'/>\n    </hyperv>\n  </features>\n  <cpu mode='host-passthrough'>\n    <feature policy='disable' name='hypervisor'/>\n  </cpu>\n</domain>";
    let (_d, path) = temp_file("ac.xml", domain.as_bytes());
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.ends_with("</domain>"), "{out:?}");
    assert!(
        out.contains("<vendor_id state='on' value='banana'/>"),
        "{out}"
    );
    assert!(
        out.contains("<feature policy='disable' name='hypervisor'/>"),
        "{out}"
    );
    let e = stderr(&o);
    assert!(e.contains("warning:") && e.contains("anti-cheat"), "{e}");
    assert!(e.contains("starts 2 of its 4 vCPUs"), "{e}");
    // the same choices in the plan JSON, with the rationale
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&run(&args).stdout).expect("plan JSON");
    assert_eq!(v["cpu_features"]["hide_hypervisor"], true);
    assert!(v["cpu_features"]["hyperv"]
        .as_array()
        .unwrap()
        .contains(&Value::from("vendor_id=banana")));
    assert!(v["warnings"].to_string().contains("anti-cheat"));
}

#[test]
fn anonymous_memory_domain_is_planned_with_4k_pages() {
    // the shape of TDX/SEV guides: libvirt refuses hugepages with anonymous memory
    let domain = "<domain type='kvm'>\n  <name>td</name>\n  <memory unit='GiB'>16</memory>\n  <memoryBacking>\n    <source type='anonymous'/>\n    <access mode='private'/>\n  </memoryBacking>\n  <vcpu placement='static'>4</vcpu>\n  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n</domain>\n";
    let (_d, path) = temp_file("td.xml", domain.as_bytes());
    let mut args = GAMING.to_vec();
    args.extend(["--domain", path.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("<hugepages"), "{out}");
    assert!(out.contains("<source type='anonymous'/>"), "{out}");
    assert!(
        stderr(&o).contains("<source type='anonymous'/>, with which libvirt refuses hugepages"),
        "{}",
        stderr(&o)
    );
    let mut json = args.clone();
    json.push("--json");
    let v: Value = serde_json::from_slice(&run(&json).stdout).expect("plan JSON");
    assert_eq!(v["memory"]["hugepage_size_kb"], 4);
    // asking for hugepages anyway: one line, exit 2, nothing printed
    args.extend(["--hugepages", "2M"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty());
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("--hugepages 2M") && e.contains("anonymous"),
        "{e}"
    );
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

/// A device behind Intel VMD (PCI domain 10000 and up) is planned with a warning naming the
/// VMD controller and why VFIO cannot take it; a device outside the VMD domain gets none.
#[test]
fn vmd_device_is_planned_with_a_warning() {
    let snap = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio/server-vmd.tar.gz")
        .to_string_lossy()
        .into_owned();
    let plan = |gpu: &str| {
        let o = run(&[
            "plan",
            "--topology",
            &snap,
            "--vcpus",
            "2",
            "--memory",
            "2G",
            "--gpu",
            gpu,
        ]);
        assert!(o.status.success(), "{gpu}: {}", stderr(&o));
        format!("{}{}", stdout(&o), stderr(&o))
    };
    let err = plan("10000:e1:00.0");
    assert!(
        err.contains(
            "10000:e1:00.0 is in PCI domain 10000, behind the Intel VMD controller 0000:64:00.5"
        ),
        "{err}"
    );
    assert!(err.contains("VFIO cannot take it"), "{err}");
    let err = plan("18:00.0");
    assert!(!err.contains("VMD"), "{err}");
}

/// A host whose source says nothing about caches: the report says the L3 count is unknown
/// ("0 L3 groups" before) and no reason talks of L3 groups it cannot know.
#[test]
fn host_without_cache_information_says_l3_unknown() {
    let d = tempfile::tempdir().unwrap();
    let root = common::sysfs_without_caches(d.path());
    let o = run(&[
        "plan",
        "--topology",
        root.to_str().unwrap(),
        "--vcpus",
        "1",
        "--memory",
        "64M",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let host = text.lines().find(|l| l.starts_with("Host: ")).unwrap();
    assert!(
        host.contains("2 cores, L3 unknown, 1 NUMA node(s)"),
        "{host}"
    );
    assert!(!text.contains("L3 group"), "{text}");
}

/// A POWER9 host (hwloc's nvidiagpunumanodes sysfs snapshot, ppc64le): the emitters, which
/// write x86 VMs, are refused in one line naming the architecture (exit 2, nothing on
/// stdout); the report and --emit json still plan, without x86 features. Before, `--emit
/// qemu` printed a q35 machine with Hyper-V flags for it.
#[test]
fn emitters_are_refused_on_a_power9_host() {
    let power9 = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/topologies/sysfs/nvidiagpunumanodes.tar.bz2"
    );
    let base = [
        "plan",
        "--topology",
        power9,
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--os",
        "windows",
    ];
    for emit in [
        "qemu",
        "libvirt",
        "kata",
        "kata-config",
        "kata-pod",
        "kubevirt",
    ] {
        let mut args = base.to_vec();
        args.extend(["--emit", emit]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{emit}: {}", stdout(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{emit}: {err}");
        assert!(
            err.contains(&format!("--emit {emit} is for x86 hosts")) && err.contains("ppc64le"),
            "{emit}: {err}"
        );
        assert!(stdout(&o).is_empty(), "{emit}");
    }
    // --domain alone means --emit libvirt: refused too
    let (_d, dom) = temp_file(
        "vm.xml",
        b"<domain type='kvm'><name>vm</name><memory unit='GiB'>4</memory><vcpu>4</vcpu></domain>",
    );
    let mut args = base.to_vec();
    args.extend(["--domain", dom.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--emit libvirt is for x86 hosts"),
        "{}",
        stderr(&o)
    );

    // the plan itself: no x86 features, and the report names the architecture
    let mut args = base.to_vec();
    args.extend(["--emit", "json"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["cpu_features"]["hyperv"], serde_json::json!([]));
    assert_eq!(p["cpu_features"]["timers"], serde_json::json!([]));
    let o = run(&base);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let host = text.lines().find(|l| l.starts_with("Host: ")).unwrap();
    assert!(host.contains("ppc64le"), "{host}");
    assert!(text.contains("CPU features: defaults"), "{text}");

    // an x86 host still emits
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "2",
        "--memory",
        "1G",
        "--emit",
        "qemu",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `--domain` of a Windows guest as virt-manager makes it (UEFI, Hyper-V, hypervclock, local
/// RTC, libosinfo win/11): without --os the plan is for Windows, says why, and the patched
/// domain keeps its Windows clock; before, the plan was Linux and the patch added kvmclock
/// to the Windows domain. An --os that contradicts the domain is followed, with a warning.
#[test]
fn the_guest_os_comes_from_the_domain() {
    let dom = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../emit/tests/fixtures/virt_manager_win11.xml"
    );
    let base = [
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "8G",
        "--gpu",
        "01:00.0",
        "--domain",
        dom,
    ];
    let mut args = base.to_vec();
    args.push("--json");
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["request"]["os"], "windows");
    let timers: Vec<&str> = p["cpu_features"]["timers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(timers, ["rtc", "pit", "hpet", "hypervclock"]);
    // after the line saying what of the request is the domain's own
    let first = p["rationale"][1].as_str().unwrap();
    assert!(
        first.starts_with("guest OS windows from domain")
            && first.contains("libosinfo id http://microsoft.com/win/11"),
        "{first}"
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));

    // the patched domain: still Windows' clock, no kvmclock
    let o = run(&base);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("<timer name='hypervclock' present='yes'/>"),
        "{out}"
    );
    assert!(!out.contains("kvmclock"), "{out}");

    // --os that says the same: no warning; one that contradicts: followed, with a warning
    let mut args = base.to_vec();
    args.extend(["--os", "windows", "--emit", "qemu"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("looks like"), "{}", stderr(&o));
    let mut args = base.to_vec();
    args.extend(["--os", "linux", "--json"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["request"]["os"], "linux");
    let w = p["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("--os linux but domain")
            && w.contains(
                "looks like a windows guest (its libosinfo id http://microsoft.com/win/11)"
            ),
        "{w}"
    );
    let mut args = base.to_vec();
    args.extend(["--os", "linux"]);
    let o = run(&args);
    assert_eq!(
        stderr(&o)
            .lines()
            .filter(|l| l.contains("looks like a windows guest"))
            .count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// A Windows domain with a GeForce and its audio function as PCI hostdevs.
const WIN10_WITH_GPU: &str = "<domain type='kvm'>
  <name>win10</name>
  <memory unit='KiB'>16777216</memory>
  <vcpu placement='static'>12</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-8.2'>hvm</type>
  </os>
  <features>
    <hyperv mode='custom'>
      <relaxed state='on'/>
    </hyperv>
  </features>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x01' slot='0x00' function='0x1'/>
      </source>
    </hostdev>
  </devices>
</domain>
";

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "--topology", "builtin", "--json"];
    all.extend(args);
    let o = run(&all);
    assert!(o.status.success(), "{all:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("plan JSON")
}

/// The gamer's path: `plan --domain win10.xml` with nothing else plans the domain's own 12
/// vCPUs, 16 GiB and GPU — the same plan as naming them all — with the KVM signature hidden
/// and a Hyper-V vendor_id (the Code 43 guard). Before, --vcpus and --memory were required
/// and the hostdev was ignored.
#[test]
fn the_domain_is_the_request() {
    let (_d, path) = temp_file("win10.xml", WIN10_WITH_GPU.as_bytes());
    let path = path.to_str().unwrap();
    let own = plan_json(&["--domain", path]);
    let flags = plan_json(&[
        "--domain", path, "--gpu", "01:00.0", "--vcpus", "12", "--memory", "16G",
    ]);
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("rationale");
        v
    };
    assert_eq!(strip(own.clone()), strip(flags));
    assert_eq!(own["request"]["vcpus"], 12);
    assert_eq!(own["request"]["memory_bytes"], 16u64 << 30);
    assert_eq!(own["request"]["name"], "win10");
    assert_eq!(own["devices"][0]["bdf"], "0000:01:00.0");
    assert_eq!(own["cpu_features"]["kvm_hidden"], true);
    let hyperv = own["cpu_features"]["hyperv"].to_string();
    assert!(hyperv.contains("vendor_id="), "{hyperv}");
    let why = own["rationale"][0].as_str().unwrap();
    assert!(
        why.contains("12 vCPUs, 16 GiB, its PCI hostdevs 0000:01:00.0, 0000:01:00.1"),
        "{why}"
    );
    // a shrink is a warning, on stderr when the output is a file to save
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "--domain",
        path,
        "--vcpus",
        "4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--vcpus 4 shrinks domain") && stderr(&o).contains("from its 12 vCPUs"),
        "{}",
        stderr(&o)
    );
    // without a domain, the two sizes are needed: one line, exit 2
    let o = run(&["plan", "--topology", "builtin", "--vcpus", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--memory needed"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

/// A defined domain named through libvirt (its test driver, a node file the test writes):
/// read with `virsh dumpxml --inactive`, planned as a file is.
#[test]
fn a_defined_domain_is_named_through_libvirt() {
    let test = "cli_plan::a_defined_domain_is_named_through_libvirt";
    if std::process::Command::new("virsh")
        .arg("--version")
        .output()
        .is_err()
    {
        testkit::skip(test, "virsh is not installed (Debian: libvirt-clients)");
        return;
    }
    let node = format!(
        "<node>\n{}</node>\n",
        WIN10_WITH_GPU.replace("<domain", "  <domain")
    );
    let (_d, path) = temp_file("node.xml", node.as_bytes());
    let uri = format!("test://{}", path.display());
    let own = plan_json(&["-c", &uri, "--domain", "win10"]);
    assert_eq!(own["request"]["vcpus"], 12);
    assert_eq!(own["devices"][0]["bdf"], "0000:01:00.0");
    assert!(own["rationale"][0]
        .as_str()
        .unwrap()
        .starts_with("the request is domain win10's own"));
    let o = run(&[
        "plan",
        "--topology",
        "builtin",
        "-c",
        &uri,
        "--domain",
        "nosuch",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("domain nosuch: not a file, and libvirt says"),
        "{}",
        stderr(&o)
    );
}

//! `vmtune bench matrix` end to end against a real libvirt: the test starts its own
//! `libvirtd` (private socket, QEMU driver; `virtlogd` too when none runs), defines a 4-vCPU
//! TCG domain with a two-cell guest NUMA layout, runs the four layouts × two runs of the
//! built-in suite in scratch copies, and checks
//! - every run measured, each in the layout it claims (the guest's own host model: 4 CPUs,
//!   two NUMA nodes where the layout has cells, two threads a core for pin-numa-smt);
//! - the table, matrix.json and the HTML report (headless chromium, no console error);
//! - the user's domain byte-identical (`virsh dumpxml --inactive`) and no scratch domain left
//!   (`virsh list --all`);
//! - a SIGKILL mid-run, then `vmtune restore --journal`, leaves the same.
//!
//! Needs root, libvirtd/virtlogd (Debian: libvirt-daemon-system), QEMU, busybox and a guest
//! kernel (`VMTUNE_GUEST_KERNEL`, which `.ci/run` sets); else a named skip.

mod common;
use common::libvirtd::Daemon;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn vmtune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vmtune"))
}

/// The user's domain: 4 vCPUs under TCG, a two-cell guest NUMA layout, direct kernel boot.
/// An Intel model: the guest reads SMT siblings from CPUID leaf 0xB; with QEMU's AMD-vendor
/// qemu64 it would need topoext to see two threads a core.
fn user_domain(kernel: &Path, initrd: &Path) -> String {
    format!(
        "<domain type='qemu'>
  <name>ci-guest4</name>
  <uuid>6c2f1f5e-4a57-4d0e-9a9b-2f0e7b1c8a11</uuid>
  <memory unit='MiB'>2048</memory>
  <vcpu placement='static'>4</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{}</kernel>
    <initrd>{}</initrd>
    <cmdline>console=ttyS0 quiet</cmdline>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='custom' match='exact' check='none'>
    <model fallback='allow'>Nehalem</model>
    <topology sockets='2' dies='1' cores='2' threads='1'/>
    <numa>
      <cell id='0' cpus='0-1' memory='1024' unit='MiB'/>
      <cell id='1' cpus='2-3' memory='1024' unit='MiB'/>
    </numa>
  </cpu>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='pty'>
      <target port='0'/>
    </serial>
    <console type='pty'/>
    <memballoon model='none'/>
  </devices>
</domain>
",
        kernel.display(),
        initrd.display()
    )
}

fn matrix_args<'a>(uri: &'a str, kernel: &'a str, out: &'a str, journal: &'a str) -> Vec<&'a str> {
    vec![
        "bench",
        "matrix",
        "--domain",
        "ci-guest4",
        "--connect",
        uri,
        "--kernel",
        kernel,
        "--out",
        out,
        "--journal",
        journal,
        "--skip",
        "timer",
        "--size",
        "4M",
        "--latency-seconds",
        "0.3",
        "--guest-timeout",
        "400",
        // the study's four (the own-OS test, cli_matrix_guest.rs, runs the others)
        "--layouts",
        "default,pin,pin-numa,pin-numa-smt",
    ]
}

fn guest_cpus(rec: &serde_json::Value) -> (usize, usize, usize) {
    let host = &rec["suite"]["host"];
    let pus = host["pus"].as_array().map_or(0, Vec::len);
    let nodes = host["numa_nodes"].as_array().map_or(0, Vec::len);
    let widest = host["cores"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| c["pus"].as_array().map_or(0, Vec::len))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    (pus, nodes, widest)
}

#[test]
fn four_layouts_in_scratch_domains_and_a_kill_restored() {
    let test = "four_layouts_in_scratch_domains_and_a_kill_restored";
    let Some(kernel) = common::libvirtd::prerequisites(test) else {
        return;
    };
    let _lock = testkit::host_lock();
    let d = match Daemon::start() {
        Ok(d) => d,
        Err(e) => return testkit::skip(test, e),
    };
    let work = tempfile::tempdir().unwrap();
    // what the user's domain boots: never booted here, only named
    let initrd = work.path().join("user-initrd.cpio");
    std::fs::write(&initrd, b"").unwrap();
    let xml_path = work.path().join("ci-guest4.xml");
    std::fs::write(&xml_path, user_domain(&kernel, &initrd)).unwrap();
    let o = d.virsh(&["define", xml_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = d.dumpxml("ci-guest4");
    let uri = d.uri();
    let out = work.path().join("out");
    let journal = work.path().join("run/bench-matrix.journal");
    let k = kernel.display().to_string();
    let (o_s, j_s) = (out.display().to_string(), journal.display().to_string());

    let mut args = matrix_args(&uri, &k, &o_s, &j_s);
    args.extend(["--runs", "2"]);
    let o = vmtune().args(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for l in ["default", "pin", "pin-numa", "pin-numa-smt"] {
        assert!(stdout.contains(l), "{l}: {stdout}");
    }
    assert!(stdout.contains("latency."), "{stdout}");
    // the CI machine is smaller than the VM: said, not hidden
    assert!(stdout.contains("overcommitted"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(v["partial"], false);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 8);
    for rec in recs {
        assert!(rec["error"].is_null(), "{rec}");
        // each run's guest view matched its layout
        assert!(rec["invalid"].is_null(), "{}", rec["invalid"]);
        assert!(
            rec["view"].as_str().unwrap().starts_with("4 CPU(s)"),
            "{rec}"
        );
        let (pus, nodes, widest) = guest_cpus(rec);
        let layout = rec["layout"].as_str().unwrap();
        assert_eq!(pus, 4, "{layout}: the guest's CPUs");
        let want_nodes = match layout {
            "pin" => 1,
            _ => 2, // default: the user's own two cells; the NUMA layouts: theirs
        };
        assert_eq!(nodes, want_nodes, "{layout}: the guest's NUMA nodes");
        let want_threads = if layout == "pin-numa-smt" { 2 } else { 1 };
        assert_eq!(widest, want_threads, "{layout}: the guest's threads a core");
    }
    // interleaved: the second round starts with the second layout
    let order: Vec<&str> = recs.iter().map(|r| r["layout"].as_str().unwrap()).collect();
    assert_eq!(order[0], "default");
    assert_eq!(order[4], "pin");
    let rows = v["comparison"]["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["runs"].as_array().unwrap().len(), 4, "{r}");
    }
    let html = out.join("matrix.html");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>Layouts</h2>") && page.contains("<h2>Verdict</h2>"));
    // nothing left, the user's domain untouched, the journal archived
    assert_eq!(d.names(), ["ci-guest4"]);
    assert_eq!(d.dumpxml("ci-guest4"), before);
    assert!(!journal.exists());

    if let Some(chromium) = testkit::chromium() {
        let o = testkit::headless(
            &chromium,
            work.path(),
            &["--dump-dom"],
            &format!("file://{}", html.display()),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "chromium: {stderr}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("Verdict"));
        for bad in testkit::BROWSER_PROBLEMS {
            assert!(!stderr.contains(bad), "browser reported {bad:?}: {stderr}");
        }
    }

    // SIGKILL while a scratch domain runs, then restore
    let journal2 = work.path().join("run/killed.journal");
    let j2 = journal2.display().to_string();
    let mut args = matrix_args(&uri, &k, &o_s, &j2);
    args.extend(["--runs", "1"]);
    let mut child = vmtune()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let scratch = loop {
        let running: Vec<String> = d
            .names()
            .into_iter()
            .filter(|n| n.starts_with("vmtune-matrix-"))
            .collect();
        if let Some(n) = running.first() {
            break n.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no scratch domain appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the matrix ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        d.names().contains(&scratch),
        "the kill left {scratch} behind"
    );
    let o = vmtune()
        .args(["restore", "--journal", &j2])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(d.names(), ["ci-guest4"]);
    assert_eq!(d.dumpxml("ci-guest4"), before);
    let _ = d.virsh(&["undefine", "ci-guest4"]);
    let _: PathBuf = work.path().to_path_buf();
}

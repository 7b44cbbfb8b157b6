//! `vmtune bench matrix` on the user's own guest OS, end to end under TCG: a real Debian
//! (systemd, qemu-guest-agent as a service, OpenSSH, sysbench; built by
//! `tests/guest-image/build.sh` from Debian's packages, cached by `.ci/run`, named by
//! `VMTUNE_GUEST_IMAGE`) on a qcow2 disk, defined as the user's domains in a private libvirtd.
//! The test checks
//! - every layout run once: five through the guest agent (sysbench from Debian and a STREAM the
//!   test builds, copied in with `guest-file-write`), each run's guest view matching its layout;
//! - the planner's own plan measured as `plan`, it and `pin` twice (interleaved) through SSH;
//! - a layout the guest cannot show (its kernel booted with `numa=off`) flagged invalid;
//! - the user's image, kernel, initrd and definitions unchanged (checksums, `dumpxml`), no
//!   scratch domain and no overlay left; a SIGKILL mid-run and `vmtune restore` leave the same.
//!
//! Needs root, libvirtd/virtlogd, QEMU, qemu-img, ssh and gcc; else a named skip.

mod common;
use common::libvirtd::Daemon;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn vmtune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vmtune"))
}

/// A free TCP port on the loopback (for the guest's forwarded SSH).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One of the user's domains: `vcpus` vCPUs under TCG, the Debian disk, direct kernel boot
/// with `extra` on the command line, SSH forwarded from the host's `port` (QEMU's user
/// network, passed on `<qemu:commandline>`: this libvirt's `<portForward>` needs passt).
fn domain(name: &str, dir: &Path, vcpus: u32, mib: u32, extra: &str, port: u16) -> String {
    let d = dir.display();
    format!(
        "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <memory unit='MiB'>{mib}</memory>
  <vcpu placement='static'>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{d}/vmlinuz</kernel>
    <initrd>{d}/initrd.img</initrd>
    <cmdline>root=/dev/vda rw console=ttyS0 quiet {extra}</cmdline>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='custom' match='exact' check='none'>
    <model fallback='allow'>Nehalem</model>
    <topology sockets='1' dies='1' cores='{vcpus}' threads='1'/>
  </cpu>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='{d}/debian.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='pty'>
      <target port='0'/>
    </serial>
    <console type='pty'/>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=sshnet,hostfwd=tcp:127.0.0.1:{port}-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='virtio-net-pci,netdev=sshnet,addr=0x10'/>
  </qemu:commandline>
</domain>
"
    )
}

fn sha256(p: &Path) -> String {
    let o = Command::new("sha256sum").arg(p).output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
                out.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Run the matrix; its matrix.json and stdout.
fn matrix(args: &[&str], out: &Path) -> (serde_json::Value, String, bool) {
    let o = vmtune().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let json = std::fs::read_to_string(out.join("matrix.json"))
        .unwrap_or_else(|e| panic!("no matrix.json ({e}): {stdout}\n{stderr}"));
    (
        serde_json::from_str(&json).unwrap(),
        format!("{stdout}\n{stderr}"),
        o.status.success(),
    )
}

fn records(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["records"].as_array().unwrap()
}

fn measured(rec: &serde_json::Value, name: &str) -> bool {
    rec["user"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["name"] == name && u["rc"] == 0 && !u["measures"].as_array().unwrap().is_empty())
}

#[test]
fn the_users_own_guest_in_every_layout_through_the_agent_and_ssh() {
    let test = "the_users_own_guest_in_every_layout_through_the_agent_and_ssh";
    if !testkit::is_root() {
        return testkit::skip(test, "needs root: it starts libvirtd");
    }
    for bin in [
        "libvirtd",
        "virtlogd",
        "virsh",
        "qemu-system-x86_64",
        "qemu-img",
        "ssh",
        "gcc",
    ] {
        if testkit::which(bin).is_none() {
            return testkit::skip(test, format!("{bin} is not installed"));
        }
    }
    let Some(image) = std::env::var_os("VMTUNE_GUEST_IMAGE").map(PathBuf::from) else {
        return testkit::skip(
            test,
            "VMTUNE_GUEST_IMAGE is not set (.ci/run builds the Debian guest with crates/vmtune/tests/guest-image/build.sh)",
        );
    };
    if !image.join("debian.qcow2").is_file() {
        return testkit::skip(test, format!("no debian.qcow2 in {}", image.display()));
    }
    let _lock = testkit::host_lock();
    let d = match Daemon::start() {
        Ok(d) => d,
        Err(e) => return testkit::skip(test, e),
    };
    let work = tempfile::tempdir().unwrap();
    // the user's files: a copy of the cached image, its kernel and initrd
    let user = work.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    for f in ["debian.qcow2", "vmlinuz", "initrd.img"] {
        std::fs::copy(image.join(f), user.join(f)).unwrap();
    }
    let key = work.path().join("id_ed25519");
    std::fs::copy(image.join("id_ed25519"), &key).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let sums: Vec<(PathBuf, String)> = ["debian.qcow2", "vmlinuz", "initrd.img"]
        .iter()
        .map(|f| (user.join(f), sha256(&user.join(f))))
        .collect();
    // a STREAM built here, copied into the guest by the matrix (linked against the host's
    // glibc, which the Debian guest has too: 16 KiB to copy instead of a static 750 KiB)
    let stream = work.path().join("stream");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest-image/stream.c");
    let o = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&stream)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let ssh_port = free_port();
    let domains = [
        (
            "ci-debian",
            domain("ci-debian", &user, 2, 1024, "", free_port()),
        ),
        (
            "ci-debian-one",
            domain("ci-debian-one", &user, 1, 640, "", ssh_port),
        ),
        (
            "ci-debian-nonuma",
            domain("ci-debian-nonuma", &user, 2, 1024, "numa=off", free_port()),
        ),
    ];
    let mut before = Vec::new();
    for (name, xml) in &domains {
        let p = work.path().join(format!("{name}.xml"));
        std::fs::write(&p, xml).unwrap();
        let o = d.virsh(&["define", p.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        before.push((name.to_string(), d.dumpxml(name)));
    }
    let uri = d.uri();
    let run_dir = work.path().join("run");
    let stream_s = stream.display().to_string();
    let key_s = key.display().to_string();
    let args = |domain: &'static str, out: &Path, journal: &str| -> Vec<String> {
        [
            "bench",
            "matrix",
            "--domain",
            domain,
            "--connect",
            &uri,
            "--out",
            out.to_str().unwrap(),
            "--journal",
            run_dir.join(journal).to_str().unwrap(),
            "--guest-timeout",
            "400",
            "--runs",
            "1",
            "--run",
            "cpu=sysbench cpu --time=2 run",
            "--run",
            "stream=/opt/stream 400000",
            "--guest-file",
            &stream_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let t0 = Instant::now();

    // 1. five layouts through the agent, each once (plan and pin run through SSH below): every
    // run measured and valid
    let out_a = work.path().join("a");
    let mut a = args("ci-debian", &out_a, "a.journal");
    a.extend(
        [
            "--layouts",
            "default,pin-numa,pin-numa-smt,pin-span,smt-double",
        ]
        .map(String::from),
    );
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (v, said, ok) = matrix(&a, &out_a);
    assert!(ok, "{said}");
    assert!(said.contains("transport: qemu-guest-agent"), "{said}");
    assert_eq!(v["partial"], false, "{said}");
    let recs = records(&v);
    assert_eq!(recs.len(), 5);
    for rec in recs {
        let l = rec["layout"].as_str().unwrap();
        assert!(rec["error"].is_null(), "{l}: {rec}");
        assert!(rec["invalid"].is_null(), "{l}: {}", rec["invalid"]);
        let view = rec["view"].as_str().unwrap();
        let (cpus, nodes) = match l {
            "smt-double" => (4, 2),
            "pin-numa" | "pin-numa-smt" => (2, 2),
            _ => (2, 1),
        };
        assert!(view.starts_with(&format!("{cpus} CPU(s)")), "{l}: {view}");
        assert_eq!(view.matches("node ").count(), nodes, "{l}: {view}");
        assert!(
            measured(rec, "cpu") && measured(rec, "stream"),
            "{l}: {rec}"
        );
        assert!(
            rec["view_text"].as_str().unwrap().contains("NUMA node"),
            "{l}: lscpu/numactl recorded"
        );
    }
    // the guest's own lscpu/numactl/meminfo, read back per layout
    let smt = &v["views"]["smt-double"];
    assert!(!smt.is_null(), "{}", v["views"]);
    let html = std::fs::read_to_string(out_a.join("matrix.html")).unwrap();
    assert!(html.contains("smt-double"));
    eprintln!("agent, 5 layouts: {:.0} s", t0.elapsed().as_secs_f64());

    // 2. the planner's plan and pin, twice each, interleaved, through SSH
    let t1 = Instant::now();
    let out_b = work.path().join("b");
    let mut b = args("ci-debian-one", &out_b, "b.journal");
    let dest = format!("root@127.0.0.1:{ssh_port}");
    let runs = b.iter().position(|x| x == "--runs").unwrap();
    b[runs + 1] = "2".into();
    b.extend(
        [
            "--layouts",
            "plan,pin",
            "--transport",
            "ssh",
            "--ssh",
            &dest,
            "--ssh-key",
            &key_s,
        ]
        .map(String::from),
    );
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let (v, said, ok) = matrix(&b, &out_b);
    assert!(ok, "{said}");
    assert!(said.contains("transport: SSH to root@127.0.0.1"), "{said}");
    assert_eq!(v["chosen"], "plan", "{said}");
    assert!(
        v["verdict"][0].as_str().unwrap().contains("plan"),
        "{}",
        v["verdict"]
    );
    let order: Vec<&str> = records(&v)
        .iter()
        .map(|r| r["layout"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["plan", "pin", "pin", "plan"]);
    for rec in records(&v) {
        assert!(rec["error"].is_null() && rec["invalid"].is_null(), "{rec}");
        assert!(measured(rec, "cpu") && measured(rec, "stream"), "{rec}");
    }
    eprintln!("ssh, 2 layouts × 2: {:.0} s", t1.elapsed().as_secs_f64());

    // 3. a guest that cannot show its layout: booted with numa=off, pin-numa is invalid
    let out_w = work.path().join("w");
    let mut w = args("ci-debian-nonuma", &out_w, "w.journal");
    w.extend(["--layouts", "pin-numa"].map(String::from));
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    let (v, said, _) = matrix(&w, &out_w);
    let rec = &records(&v)[0];
    assert!(rec["error"].is_null(), "{rec}");
    let why = rec["invalid"]
        .as_str()
        .unwrap_or_else(|| panic!("not flagged: {said}"));
    assert!(why.contains("NUMA node(s)"), "{why}");
    assert!(said.contains("invalid"), "{said}");

    // 4. SIGKILL while a scratch domain boots, then restore
    let out_k = work.path().join("k");
    let mut k = args("ci-debian-one", &out_k, "k.journal");
    k.extend(["--layouts", "pin"].map(String::from));
    let mut child = vmtune()
        .args(&k)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t2 = Instant::now();
    loop {
        let scratch = d.names().iter().any(|n| n.starts_with("vmtune-matrix-"));
        let overlay = files_under(&run_dir)
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "qcow2"));
        if scratch && overlay {
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(120),
            "no scratch domain appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the matrix ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap();
    child.wait().unwrap();
    let j = run_dir.join("k.journal");
    let o = vmtune()
        .args(["restore", "--journal", j.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // nothing left; the user's files and definitions as they were
    let mut names = d.names();
    names.sort();
    assert_eq!(names, ["ci-debian", "ci-debian-nonuma", "ci-debian-one"]);
    for (name, xml) in &before {
        assert_eq!(&d.dumpxml(name), xml, "{name}'s definition changed");
    }
    for (p, sum) in &sums {
        assert_eq!(&sha256(p), sum, "{} was written", p.display());
    }
    let left: Vec<PathBuf> = files_under(&run_dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !(n.ends_with(".restored") || n.ends_with(".lock") || n == "lock")
        })
        .collect();
    assert!(left.is_empty(), "left on disk: {left:?}");
    eprintln!(
        "guest matrix test: {:.0} s in all",
        t0.elapsed().as_secs_f64()
    );
}

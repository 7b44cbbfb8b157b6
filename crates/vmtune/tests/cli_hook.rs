//! `vmtune hook` called the way libvirt calls `/etc/libvirt/hooks/qemu` (its hooks
//! documentation): `qemu DOMAIN OP SUB-OP EXTRA` with the domain XML on stdin, for every
//! operation — prepare/start/started begin, stopped/release end (EXTRA the shutoff reason
//! since libvirt 10.5, `-` before), migrate/restore begin (filters: libvirt reads stdout as
//! the new domain XML), reconnect begin (libvirtd restarted; failing kills the VM), attach
//! begin. The hook must exit 0 quickly for all of them, print nothing on a filter's stdout,
//! and keep a domain's journal untouched through everything but `release`.
//!
//! Nothing here changes the host: the plans reserve no hugepages and no QEMU is given, so the
//! tests need neither root nor the host lock (the hook with a real QEMU and hugepages is in
//! `cli_apply.rs`).

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::vmtune;

/// A running domain's XML as libvirt passes it to the hook (the live definition: `id`,
/// aliases, the security label, the resource partition), written in the shape of
/// `virsh dumpxml` of a Windows guest with a passed-through GPU.
const LIVE_XML: &str = r#"<domain type='kvm' id='7'>
  <name>NAME</name>
  <uuid>8f4c3b3e-52a1-4f0c-9d8e-2b6f2c7d9a10</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://microsoft.com/win/10"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='KiB'>16777216</memory>
  <currentMemory unit='KiB'>16777216</currentMemory>
  <memoryBacking>
    <hugepages>
      <page size='2048' unit='KiB'/>
    </hugepages>
  </memoryBacking>
  <vcpu placement='static'>8</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='2'/>
    <vcpupin vcpu='1' cpuset='10'/>
    <emulatorpin cpuset='0,8'/>
  </cputune>
  <resource>
    <partition>/machine</partition>
  </resource>
  <os firmware='efi'>
    <type arch='x86_64' machine='pc-q35-8.2'>hvm</type>
    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.ms.fd</loader>
    <nvram template='/usr/share/OVMF/OVMF_VARS_4M.ms.fd'>/var/lib/libvirt/qemu/nvram/NAME_VARS.fd</nvram>
    <boot dev='hd'/>
  </os>
  <features>
    <acpi/>
    <apic/>
    <hyperv mode='custom'>
      <relaxed state='on'/>
      <vapic state='on'/>
      <spinlocks state='on' retries='8191'/>
      <vendor_id state='on' value='1234567890ab'/>
    </hyperv>
    <kvm>
      <hidden state='on'/>
    </kvm>
  </features>
  <cpu mode='host-passthrough' check='none' migratable='on'>
    <topology sockets='1' dies='1' cores='4' threads='2'/>
  </cpu>
  <clock offset='localtime'>
    <timer name='hypervclock' present='yes'/>
  </clock>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' discard='unmap'/>
      <source file='/var/lib/libvirt/images/NAME.qcow2' index='1'/>
      <backingStore/>
      <target dev='vda' bus='virtio'/>
      <alias name='virtio-disk0'/>
      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>
    </disk>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
      </source>
      <alias name='hostdev0'/>
      <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>
    </hostdev>
  </devices>
  <seclabel type='dynamic' model='dac' relabel='yes'>
    <label>+64055:+994</label>
    <imagelabel>+64055:+994</imagelabel>
  </seclabel>
</domain>
"#;

/// The domain XML an incoming migration or a restore hands the hook before QEMU exists: no
/// `id`, no aliases, no security label.
const INACTIVE_XML: &str = r#"<domain type='kvm'>
  <name>NAME</name>
  <uuid>8f4c3b3e-52a1-4f0c-9d8e-2b6f2c7d9a10</uuid>
  <memory unit='KiB'>16777216</memory>
  <vcpu placement='static'>8</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-8.2'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
"#;

/// Every call libvirt makes to the qemu hook: (operation, sub-operation, extra argument).
fn libvirt_calls() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut v = vec![
        ("prepare", "begin", "-"),
        ("start", "begin", "-"),
        ("started", "begin", "-"),
        ("stopped", "end", "-"),
        ("release", "end", "-"),
        ("migrate", "begin", "-"),
        ("restore", "begin", "-"),
        ("reconnect", "begin", "-"),
        ("attach", "begin", "-"),
    ];
    // libvirt >= 10.5: the shutoff reason on release
    for reason in [
        "unknown",
        "shutdown",
        "destroyed",
        "crashed",
        "migrated",
        "saved",
        "failed",
        "from snapshot",
        "daemon",
    ] {
        v.push(("release", "end", reason));
    }
    v
}

/// Run the hook as libvirt does: argv, the XML on stdin, stdin closed.
fn hook(dir: &Path, argv: &[&str], xml: &str, extra: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let mut child = vmtune()
        .arg("hook")
        .args(argv)
        .arg("--plan-dir")
        .arg(dir.join("plans"))
        .arg("--journal-dir")
        .arg(dir.join("run"))
        .arg("--libvirt-run-dir")
        .arg(dir.join("libvirt"))
        .args(["--timeout-s", "10", "--no-watch"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // a hook that does not read its stdin would make libvirt's write fail: write it all
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (out, t.elapsed())
}

fn dirs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for s in ["plans", "run", "libvirt"] {
        std::fs::create_dir_all(d.path().join(s)).unwrap();
    }
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn every_libvirt_call_exits_0_and_filters_print_nothing() {
    let d = dirs();
    for name in ["win10", "-win10", "win 10 (gpu)", "wïn10"] {
        for (op, sub, extra) in libvirt_calls() {
            let xml = if matches!(op, "migrate" | "restore" | "prepare") {
                INACTIVE_XML
            } else {
                LIVE_XML
            }
            .replace("NAME", name);
            for json in [false, true] {
                let flags: &[&str] = if json { &["--json"] } else { &[] };
                let (out, t) = hook(d.path(), &[name, op, sub, extra], &xml, flags);
                let what = format!("{name:?} {op} {sub} {extra:?} json={json}");
                assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
                assert!(t < Duration::from_secs(5), "{what}: took {t:?}");
                let said = stderr(&out);
                assert!(
                    said.contains(&format!("vmtune hook {name} {op} {sub}: ")),
                    "{what}: {said}"
                );
                assert!(
                    !said.contains("cannot read its arguments"),
                    "{what}: {said}"
                );
                if op == "migrate" || op == "restore" {
                    // libvirt would take anything here as the new domain XML
                    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
                } else if json {
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(v["domain"], name, "{what}");
                }
            }
        }
    }
    // no plan anywhere: no journal for any of them (only the logs of what the hook did)
    for e in std::fs::read_dir(d.path().join("run")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains(".journal"), "{name}");
    }
}

/// libvirtd restarting (`reconnect`), a migration arriving or a saved image being restored
/// (`migrate`/`restore`: filters), `attach`, `start`, `stopped` must neither apply the plan
/// again nor touch the journal `prepare` wrote; `release` (any reason) restores it.
#[test]
fn only_release_touches_the_journal() {
    for (i, reason) in ["-", "destroyed", "from snapshot", "daemon"]
        .into_iter()
        .enumerate()
    {
        let d = dirs();
        let name = if i % 2 == 0 { "gpuvm" } else { "-gpuvm" };
        std::fs::write(
            d.path().join(format!("plans/{name}.json")),
            testkit::cpu0_plan_json("windows"),
        )
        .unwrap();
        let live = LIVE_XML.replace("NAME", name);
        let (out, _) = hook(
            d.path(),
            &[name, "prepare", "begin", "-"],
            &INACTIVE_XML.replace("NAME", name),
            &[],
        );
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stderr(&out).contains("Prepare: 0 changes made"),
            "{}",
            stderr(&out)
        );
        let journal = d.path().join(format!("run/{name}.journal"));
        let written = std::fs::read(&journal).expect("prepare writes the journal");
        for (op, sub) in [
            ("start", "begin"),
            ("reconnect", "begin"),
            ("migrate", "begin"),
            ("restore", "begin"),
            ("attach", "begin"),
            ("reconnect", "begin"),
            ("stopped", "end"),
        ] {
            let (out, _) = hook(d.path(), &[name, op, sub, "-"], &live, &["--json"]);
            assert_eq!(out.status.code(), Some(0), "{op}");
            assert_eq!(
                std::fs::read(&journal).unwrap(),
                written,
                "{op} {sub} changed the journal"
            );
            if op == "reconnect" {
                let said = stderr(&out);
                assert!(said.contains("kept, nothing applied again"), "{said}");
                // no pid file: libvirt's QEMU is gone, release will follow
                assert!(said.contains("is not running"), "{said}");
            }
        }
        let (out, _) = hook(d.path(), &[name, "release", "end", reason], &live, &[]);
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stderr(&out).contains("0 steps undone, 0 failed"),
            "{}",
            stderr(&out)
        );
        assert!(!journal.exists(), "release {reason}: restored");
        let log = std::fs::read_to_string(d.path().join(format!("run/{name}.log"))).unwrap();
        assert!(log.contains("reconnect begin: journal"), "{log}");
    }
}

/// Arguments libvirt never sends (a broken wrapper script, a typo in the hook line) still exit
/// 0: failing the hook would stop the VM's start or kill it on `reconnect`.
#[test]
fn arguments_vmtune_cannot_read_never_fail_the_hook() {
    let d = dirs();
    let xml = LIVE_XML.replace("NAME", "win10");
    for argv in [
        &["win10"][..],
        &["win10", "prepare"],
        &["win10", "release", "end", "destroyed", "surplus"],
        &["win10", "prepare", "begin", "-", "--no-such-flag"],
    ] {
        let (out, t) = hook(d.path(), argv, &xml, &[]);
        assert_eq!(out.status.code(), Some(0), "{argv:?}: {}", stderr(&out));
        assert!(t < Duration::from_secs(5));
        assert!(out.stdout.is_empty(), "{argv:?}");
        let said = stderr(&out);
        assert!(
            said.starts_with("vmtune hook: cannot read its arguments ("),
            "{said}"
        );
        assert_eq!(said.lines().count(), 1, "one line: {said}");
    }
    // other commands still fail on bad arguments
    let o = vmtune().args(["plan", "--no-such-flag"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

//! Guest device locality end to end: a two-cell plan (membw, 20 vCPUs over both nodes of the
//! 2-node, 32-thread host of hwloc's tests, a GPU on each node) puts each passed-through
//! device behind a PCIe expander bus bound to its cell. The patched domain validates
//! (`virt-xml-validate`), is defined by a private libvirtd (QEMU driver), and boots under TCG
//! with stand-in PCIe devices (virtio-rng at each hostdev's guest address); the QEMU command
//! line boots the same way. Inside each guest, every stand-in's
//! `/sys/bus/pci/devices/*/numa_node` must be its cell — on q35's root bus it reads -1.
//!
//! The stand-in guests drop the plan's `<cputune>`/`<numatune>` (host CPUs 2-28 and host node
//! 1 do not exist on a 2-CPU test machine) and use a TCG CPU model: what is checked here is
//! where the devices sit, which those do not touch.
//!
//! Needs root, libvirtd/virtlogd, virsh, virt-xml-validate, QEMU, busybox and a guest kernel
//! (`VMTUNE_GUEST_KERNEL`); else a named skip.

mod common;
use common::libvirtd::Daemon;
use common::run;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TOPOLOGY: &str = "testdata/topologies/hwloc/32em64t-2n8c2t-pci-normalio.xml";

/// A q35 domain passing through 0000:03:00.0 (host node 0) and both functions of
/// 0000:84:00 (node 1); the first hostdev has a guest address on the user's root port 1.
const DOMAIN: &str = "<domain type='kvm'>
  <name>locality</name>
  <memory unit='KiB'>1048576</memory>
  <vcpu placement='static'>20</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='pci' index='1' model='pcie-root-port'>
      <model name='pcie-root-port'/>
      <target chassis='1' port='0x10'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0' multifunction='on'/>
    </controller>
    <controller type='pci' index='2' model='pcie-root-port'>
      <model name='pcie-root-port'/>
      <target chassis='2' port='0x11'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x1'/>
    </controller>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x03' slot='0x00' function='0x0'/>
      </source>
      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x84' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x84' slot='0x00' function='0x1'/>
      </source>
    </hostdev>
  </devices>
</domain>
";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn plan_args(extra: &[&str]) -> Vec<String> {
    let topo = repo().join(TOPOLOGY);
    let mut v: Vec<String> = [
        "plan",
        "--topology",
        topo.to_str().unwrap(),
        "--profile",
        "membw",
        "--threads",
        "pack",
        "--hugepages",
        "none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn vmtune(args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&refs);
    assert!(
        o.status.success(),
        "vmtune {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// The expander buses of a domain: (busNr, guest cell).
fn expanders(xml: &str) -> Vec<(u32, u32)> {
    let doc = roxmltree::Document::parse(xml).expect("patched XML parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("controller"))
        .filter(|n| n.attribute("model") == Some("pcie-expander-bus"))
        .map(|c| {
            let t = c.children().find(|n| n.has_tag_name("target")).unwrap();
            let bus: u32 = t.attribute("busNr").unwrap().parse().unwrap();
            let node = t.children().find(|n| n.has_tag_name("node")).unwrap();
            (bus, node.text().unwrap().trim().parse().unwrap())
        })
        .collect()
}

/// The patched domain: two expander buses (cells 0 and 1), each hostdev on a root port
/// below its cell's, the user's own controllers byte for byte, and a second patch the same.
#[test]
fn the_patched_domain_puts_each_device_behind_its_cells_expander_bus() {
    let dir = tempfile::tempdir().unwrap();
    let dom = dir.path().join("locality.xml");
    std::fs::write(&dom, DOMAIN).unwrap();
    let patched = vmtune(&plan_args(&["--domain", dom.to_str().unwrap()]));
    assert_eq!(expanders(&patched), vec![(128, 0), (192, 1)], "{patched}");
    for kept in [
        "<controller type='pci' index='1' model='pcie-root-port'>\n      <model name='pcie-root-port'/>\n      <target chassis='1' port='0x10'/>\n      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0' multifunction='on'/>",
        "<controller type='pci' index='2' model='pcie-root-port'>",
    ] {
        assert!(patched.contains(kept), "{patched}");
    }
    // the GPU of node 0 moved from the user's port 1 to the port on cell 0's bus (index 3)
    assert!(patched.contains("<controller type='pci' index='4' model='pcie-root-port'>\n      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/>"), "{patched}");
    assert!(patched.contains("function='0x0'/>\n      </source>\n      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>"), "{patched}");
    assert!(patched.contains("bus='0x06' slot='0x00' function='0x0' multifunction='on'/>"));
    assert!(patched.contains("bus='0x06' slot='0x00' function='0x1'/>"));
    let again = dir.path().join("again.xml");
    std::fs::write(&again, &patched).unwrap();
    assert_eq!(
        vmtune(&plan_args(&["--domain", again.to_str().unwrap()])),
        patched,
        "a second patch changes the first"
    );
    // the plan says which cell each device is in
    let json = vmtune(&plan_args(&["--domain", dom.to_str().unwrap(), "--json"]));
    let p: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cells: Vec<(String, u64)> = p["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["bdf"].as_str().unwrap().to_string(),
                d["guest_cell"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cells,
        [
            ("0000:03:00.0".to_string(), 0),
            ("0000:84:00.0".to_string(), 1),
            ("0000:84:00.1".to_string(), 1)
        ]
    );
    assert!(p["rationale"].as_array().unwrap().iter().any(|r| r
        .as_str()
        .unwrap()
        .starts_with("devices by guest cell: 0000:03:00.0 in cell 0 (host node 0)")));
    let validate = Command::new("virt-xml-validate").arg(&again).output();
    match validate {
        Ok(o) => assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => testkit::skip(
            "cli_locality::the_patched_domain_puts_each_device_behind_its_cells_expander_bus",
            "virt-xml-validate is not installed (Debian: libvirt-clients libxml2-utils)",
        ),
    }
}

/// An initramfs (busybox, an init that prints each PCI device's address, IDs and
/// `numa_node` to the serial console, then powers off), built with busybox's cpio.
fn initramfs(dir: &Path) -> PathBuf {
    let root = dir.join("initramfs");
    for d in ["bin", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .find(|p| Path::new(p).exists())
        .expect("busybox");
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    let init = "#!/bin/sh\n\
        /bin/busybox mount -t proc proc /proc\n\
        /bin/busybox mount -t sysfs sysfs /sys\n\
        for d in /sys/bus/pci/devices/*; do\n\
        echo \"PCI $(/bin/busybox basename $d) $(/bin/busybox cat $d/vendor):$(/bin/busybox cat $d/device) numa=$(/bin/busybox cat $d/numa_node)\"\n\
        done\n\
        echo \"NODES $(/bin/busybox ls /sys/devices/system/node | /bin/busybox tr '\\n' ' ')\"\n\
        /bin/busybox poweroff -f\n";
    std::fs::write(root.join("init"), init).unwrap();
    std::fs::set_permissions(
        root.join("init"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = dir.join("initramfs.cpio");
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd {} && find . | {busybox} cpio -o -H newc > {}",
            root.display(),
            out.display()
        ))
        .status()
        .unwrap()
        .success();
    assert!(ok, "busybox cpio failed");
    out
}

/// The stand-ins' lines a guest printed: (bus, numa_node) of each virtio-rng (1af4:1044).
fn stand_ins(console: &str) -> Vec<(u32, i64)> {
    console
        .lines()
        .filter_map(|l| l.trim().strip_prefix("PCI "))
        .filter(|l| l.contains("0x1af4:0x1044"))
        .map(|l| {
            let bdf = l.split_whitespace().next().unwrap();
            let bus = u32::from_str_radix(bdf.split(':').nth(1).unwrap(), 16).unwrap();
            let numa = l.rsplit("numa=").next().unwrap().trim().parse().unwrap();
            (bus, numa)
        })
        .collect()
}

/// Each stand-in's numa_node is the cell of the expander bus it sits below.
fn check_guest(console: &str, expanders: &[(u32, u32)]) {
    let seen = stand_ins(console);
    assert_eq!(seen.len(), 3, "three stand-ins: {console}");
    for (bus, numa) in &seen {
        let cell = expanders
            .iter()
            .filter(|(b, _)| b <= bus)
            .max_by_key(|(b, _)| *b)
            .map(|(_, c)| *c)
            .unwrap_or_else(|| panic!("bus {bus:x} is below no expander: {console}"));
        assert_eq!(*numa, i64::from(cell), "bus {bus:x}: {console}");
    }
    assert!(
        console.contains("node0") && console.contains("node1"),
        "{console}"
    );
}

/// The patched domain as a TCG guest with stand-ins: each `<hostdev>` becomes a virtio-rng
/// at the same guest address; direct kernel boot, the console to a file.
fn stand_in_domain(patched: &str, kernel: &Path, initrd: &Path, log: &Path) -> String {
    let doc = roxmltree::Document::parse(patched).unwrap();
    let mut out = patched.to_string();
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    for n in doc.descendants() {
        let name = n.tag_name().name();
        if name == "hostdev" {
            let addr = n
                .children()
                .find(|c| c.has_tag_name("address"))
                .expect("a guest address");
            edits.push((
                n.range(),
                format!(
                    "<rng model='virtio'><backend model='random'>/dev/urandom</backend>{}</rng>",
                    &patched[addr.range()]
                ),
            ));
        } else if matches!(name, "cputune" | "numatune") {
            edits.push((n.range(), String::new()));
        } else if name == "cpu" {
            let numa = n.children().find(|c| c.has_tag_name("numa")).unwrap();
            edits.push((
                n.range(),
                format!(
                    "<cpu mode='custom'><model>qemu64</model>{}</cpu>",
                    &patched[numa.range()]
                ),
            ));
        } else if name == "type" && n.parent().is_some_and(|p| p.has_tag_name("os")) {
            edits.push((
                n.range(),
                format!(
                    "<type arch='x86_64' machine='q35'>hvm</type><kernel>{}</kernel><initrd>{}</initrd><cmdline>console=ttyS0 quiet</cmdline>",
                    kernel.display(),
                    initrd.display()
                ),
            ));
        } else if name == "devices" {
            let end = n.range().end - "</devices>".len();
            edits.push((
                end..end,
                format!(
                    "<serial type='file'><source path='{}'/></serial>",
                    log.display()
                ),
            ));
        }
    }
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    for (r, t) in edits {
        out.replace_range(r, &t);
    }
    out.replacen("<domain type='kvm'>", "<domain type='qemu'>", 1)
}

#[test]
fn libvirt_defines_and_boots_it_and_the_guest_reads_each_devices_cell() {
    let test = "cli_locality::libvirt_defines_and_boots_it_and_the_guest_reads_each_devices_cell";
    let Some(kernel) = common::libvirtd::prerequisites(test) else {
        return;
    };
    let _lock = testkit::host_lock();
    let t = Instant::now();
    let d = match Daemon::start() {
        Ok(d) => d,
        Err(e) => return testkit::skip(test, e),
    };
    eprintln!("libvirtd up in {:.1} s", t.elapsed().as_secs_f64());
    let dir = tempfile::tempdir().unwrap();
    let dom = dir.path().join("locality.xml");
    std::fs::write(&dom, DOMAIN).unwrap();
    let patched = vmtune(&plan_args(&["--domain", dom.to_str().unwrap()]));
    let exp = expanders(&patched);
    // libvirt's QEMU driver takes the patched domain as it is (the hostdevs are not opened
    // until it starts)
    let file = dir.path().join("patched.xml");
    std::fs::write(&file, &patched).unwrap();
    let o = d.virsh(&["define", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let defined = d.dumpxml("locality");
    assert_eq!(expanders(&defined), exp, "{defined}");
    let o = d.virsh(&["undefine", "locality"]);
    assert!(o.status.success());
    eprintln!(
        "defined and undefined at {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // and boots with stand-ins at the hostdevs' addresses
    let initrd = initramfs(dir.path());
    let log = dir.path().join("console.log");
    let boot = dir.path().join("boot.xml");
    std::fs::write(&boot, stand_in_domain(&patched, &kernel, &initrd, &log)).unwrap();
    let o = d.virsh(&["define", boot.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = d.virsh(&["start", "locality"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(180) {
        let s = d.virsh(&["domstate", "locality"]);
        if String::from_utf8_lossy(&s.stdout).contains("shut off") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let console = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!(
        "guest booted and powered off in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    check_guest(&console, &exp);
}

/// The QEMU command line of the same plan, run directly under TCG with the `vfio-pci`
/// devices replaced by stand-ins at the same bus and address.
#[test]
fn the_qemu_command_line_boots_with_each_device_on_its_cell() {
    let test = "cli_locality::the_qemu_command_line_boots_with_each_device_on_its_cell";
    if testkit::which("qemu-system-x86_64").is_none() {
        return testkit::skip(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
    }
    if !Path::new("/bin/busybox").exists() && !Path::new("/usr/bin/busybox").exists() {
        return testkit::skip(test, "busybox is not installed (Debian: busybox-static)");
    }
    let kernel = match testkit::guest_kernel() {
        Ok(k) => k,
        Err(why) => return testkit::skip(test, why),
    };
    let dir = tempfile::tempdir().unwrap();
    let dom = dir.path().join("locality.xml");
    std::fs::write(&dom, DOMAIN).unwrap();
    let line = vmtune(&plan_args(&[
        "--domain",
        dom.to_str().unwrap(),
        "--emit",
        "qemu",
    ]));
    // the command's words (no word is quoted in this plan)
    let words: Vec<String> = line
        .split_whitespace()
        .filter(|w| *w != "\\")
        .map(str::to_string)
        .collect();
    assert_eq!(words[0], "qemu-system-x86_64");
    let mut exp: Vec<(u32, u32)> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    for w in &words[1..] {
        let w = if let Some(rest) = w.strip_prefix("vfio-pci,host=") {
            // keep bus= and addr=, drop the host device
            let keep: Vec<&str> = rest.split(',').skip(1).collect();
            format!("virtio-rng-pci,{}", keep.join(","))
        } else if w.starts_with("memory-backend-ram") {
            w.split(',')
                .filter(|p| !p.starts_with("host-nodes=") && !p.starts_with("policy="))
                .collect::<Vec<_>>()
                .join(",")
        } else if w.starts_with("host,") || w == "host" {
            "max".to_string()
        } else {
            w.replace(",accel=kvm", "")
        };
        if let Some(rest) = w.strip_prefix("pxb-pcie,") {
            let get = |k: &str| -> u32 {
                rest.split(',')
                    .find_map(|p| p.strip_prefix(k))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            exp.push((get("bus_nr="), get("numa_node=")));
        }
        args.push(w);
    }
    assert_eq!(exp, vec![(128, 0), (192, 1)], "{line}");
    let initrd = initramfs(dir.path());
    let o = Command::new("timeout")
        .arg("180")
        .arg("qemu-system-x86_64")
        .args(&args)
        .args(["-kernel", kernel.to_str().unwrap()])
        .args(["-initrd", initrd.to_str().unwrap()])
        .args(["-append", "console=ttyS0 quiet", "-nographic", "-no-reboot"])
        .args([
            "-accel",
            "tcg,thread=multi",
            "-nodefaults",
            "-serial",
            "stdio",
        ])
        .output()
        .unwrap();
    check_guest(&String::from_utf8_lossy(&o.stdout), &exp);
}

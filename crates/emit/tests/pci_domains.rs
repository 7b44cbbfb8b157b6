//! PCI domains of 0x10000 and up (Intel VMD: its devices are `10000:e1:00.0`, five hex
//! digits, as sysfs and lspci name them) in everything `emit` reads or writes: a tenant
//! domain's `<hostdev>` address (libvirt's `pciDomain` is a uint32: `domain='0x10000'`), the
//! QEMU arguments (QEMU's `vfio-pci,host=` takes at most four domain digits — "Property
//! 'vfio-pci.host' doesn't take value '10000:e1:00.0'" — so such a device is named by its
//! sysfs path, `sysfsdev=`), and the KubeVirt and Kata output that mention devices.

use std::path::Path;

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};

/// The hand-made server with Intel VMD (testdata/vfio): NVMe drives at 10000:e1:00.0 and
/// 10000:e2:00.0, an L40S at 0000:18:00.0.
fn vmd_host() -> topo::Host {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vfio/server-vmd.tar.gz");
    topo::load_path(&p).expect("server-vmd snapshot")
}

fn plan_with(devices: &[&str]) -> Plan {
    let req = Request {
        name: Some("vmd".into()),
        vcpus: 2,
        memory_bytes: 2 << 30,
        devices: devices.iter().map(|d| d.to_string()).collect(),
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    plan::plan(&req, &vmd_host(), &[]).expect("plan")
}

#[test]
fn the_planner_takes_a_vmd_device_in_any_spelling() {
    for spelling in ["10000:e1:00.0", "10000:E1:00.0", "10000:e1:0.0"] {
        let p = plan_with(&[spelling]);
        let bdfs: Vec<&str> = p.devices.iter().map(|d| d.bdf.as_str()).collect();
        assert_eq!(bdfs, vec!["10000:e1:00.0"], "{spelling}");
    }
}

#[test]
fn qemu_names_a_five_digit_domain_by_its_sysfs_path() {
    let p = plan_with(&["10000:e1:00.0", "18:00.0"]);
    let args = emit::qemu::args(&p);
    let devices: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "-device" && w[1].starts_with("vfio-pci"))
        .map(|w| w[1].as_str())
        .collect();
    assert_eq!(
        devices,
        vec![
            "vfio-pci,host=0000:18:00.0",
            "vfio-pci,sysfsdev=/sys/bus/pci/devices/10000:e1:00.0"
        ]
    );
    // and a real QEMU takes that spelling (it fails later, on the missing device, not on
    // the property)
    if let Some(qemu) = testkit::which("qemu-system-x86_64") {
        for (dev, refused) in [
            ("vfio-pci,host=10000:e1:00.0", true),
            (
                "vfio-pci,sysfsdev=/sys/bus/pci/devices/10000:e1:00.0",
                false,
            ),
        ] {
            let o = std::process::Command::new(&qemu)
                .args([
                    "-M",
                    "q35",
                    "-accel",
                    "tcg",
                    "-nodefaults",
                    "-display",
                    "none",
                ])
                .args(["-S", "-device", dev])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{dev}");
            assert_eq!(err.contains("doesn't take value"), refused, "{dev}: {err}");
        }
    } else {
        testkit::skip(
            "qemu_names_a_five_digit_domain_by_its_sysfs_path",
            "qemu-system-x86_64 is not installed: the spelling was not tried on a real QEMU",
        );
    }
}

#[test]
fn a_tenant_domains_vmd_hostdev_is_read() {
    let xml = r#"<domain type='kvm'>
  <name>nvme-vm</name>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x10000' bus='0xe1' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <hostdev mode='subsystem' type='pci'>
      <source><address domain='65537' bus='226' slot='0' function='0'/></source>
    </hostdev>
  </devices>
</domain>"#;
    let t = emit::libvirt::tenant_from_domain_xml(xml).expect("tenant");
    assert_eq!(t.devices, vec!["10000:e1:00.0", "10001:e2:00.0"]);
    // libvirt's pciDomain is a uint32: a ninth hex digit is not an address
    let bad = xml.replace("0x10000", "0x100000000");
    let e = emit::libvirt::tenant_from_domain_xml(&bad).unwrap_err();
    assert!(e.to_string().contains("domain"), "{e}");
    // the tenant's device is taken on the VMD host
    let host = vmd_host();
    let req = Request {
        name: Some("second".into()),
        vcpus: 2,
        memory_bytes: 1 << 30,
        devices: vec!["10000:e1:00.0".into()],
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let tenant = emit::libvirt::tenant_from_domain_xml(xml).unwrap();
    let e = plan::plan(&req, &host, &[tenant]).unwrap_err().to_string();
    assert!(e.contains("10000:e1:00.0"), "{e}");
}

#[test]
fn kubevirt_and_kata_name_the_device_as_sysfs_does() {
    let p = plan_with(&["10000:e1:00.0"]);
    let kv = emit::kubevirt::vmi_fragment_yaml(&p);
    assert!(kv.contains("# host 10000:e1:00.0"), "{kv}");
    let pod = emit::kata::pod_spec_yaml(&p);
    assert!(!pod.contains("0000:e1"), "{pod}");
}

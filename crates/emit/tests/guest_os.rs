//! The guest OS a libvirt domain shows ([`emit::libvirt::domain_guest_os`]), which `vmtune
//! plan --domain` takes when no `--os` is given: virt-manager's libosinfo id first, then a
//! direct kernel boot, then Hyper-V settings, then a local-time RTC.

mod common;

use emit::libvirt::domain_guest_os;
use plan::GuestOs;

fn os_of(xml: &str) -> Option<GuestOs> {
    domain_guest_os(xml).expect("domain").map(|d| d.os)
}

#[test]
fn a_virt_manager_windows_11_domain_is_windows() {
    let xml = common::read("virt_manager_win11.xml");
    let d = domain_guest_os(&xml).unwrap().unwrap();
    assert_eq!(d.os, GuestOs::Windows);
    assert_eq!(d.evidence, "its libosinfo id http://microsoft.com/win/11");
    // without its metadata the Hyper-V settings still tell; without those, the clock
    let no_meta = cut(&xml, "<metadata>", "</metadata>");
    let d = domain_guest_os(&no_meta).unwrap().unwrap();
    assert_eq!(d.os, GuestOs::Windows);
    assert!(
        d.evidence
            .starts_with("its Hyper-V enlightenments (relaxed, vapic"),
        "{d:?}"
    );
    let no_hyperv = cut(&no_meta, "<hyperv", "</hyperv>");
    let d = domain_guest_os(&no_hyperv).unwrap().unwrap();
    assert!(d.evidence.contains("hypervclock"), "{d:?}");
    let no_hv_clock = no_hyperv.replace("<timer name='hypervclock' present='yes'/>", "");
    let d = domain_guest_os(&no_hv_clock).unwrap().unwrap();
    assert_eq!(d.os, GuestOs::Windows);
    assert!(d.evidence.contains("offset='localtime'"), "{d:?}");
    // the firmware alone (UEFI, Secure Boot with Microsoft's keys) says nothing
    let utc = no_hv_clock.replace("offset='localtime'", "offset='utc'");
    assert_eq!(os_of(&utc), None);
}

#[test]
fn libosinfo_ids() {
    let xml = common::read("virt_manager_win11.xml");
    let with_id = |id: &str| xml.replace("http://microsoft.com/win/11", id);
    for (id, os) in [
        ("http://microsoft.com/win/10", GuestOs::Windows),
        ("http://microsoft.com/win/2k22", GuestOs::Windows),
        ("http://microsoft.com/win/7", GuestOs::Windows7),
        ("http://microsoft.com/win/2k8r2", GuestOs::Windows7),
        // the user's declared OS wins over the Hyper-V settings left in the domain
        ("http://ubuntu.com/ubuntu/24.04", GuestOs::Linux),
        ("http://fedoraproject.org/fedora/40", GuestOs::Linux),
    ] {
        assert_eq!(os_of(&with_id(id)), Some(os), "{id}");
    }
}

#[test]
fn linux_shapes_and_silent_domains() {
    let kernel = "<domain type='kvm'><name>k</name><os><type arch='x86_64'>hvm</type><kernel>/boot/vmlinuz</kernel><cmdline>console=ttyS0</cmdline></os><clock offset='localtime'/></domain>";
    assert_eq!(os_of(kernel), Some(GuestOs::Linux));
    let xen_pv = "<domain type='xen'><name>pv</name><os><type>linux</type></os></domain>";
    assert_eq!(os_of(xen_pv), Some(GuestOs::Linux));
    // Hyper-V present but every enlightenment off: no sign of Windows
    let off = "<domain type='kvm'><name>o</name><features><hyperv mode='custom'><relaxed state='off'/></hyperv></features></domain>";
    assert_eq!(os_of(off), None);
    let passthrough = "<domain type='kvm'><name>p</name><features><hyperv mode='passthrough'/></features></domain>";
    assert_eq!(os_of(passthrough), Some(GuestOs::Windows));
    for f in ["domain_minimal.xml", "domain_crlf_tabs.xml"] {
        assert_eq!(os_of(&common::read(f)), None, "{f}");
    }
}

/// The hand-written VFIO domains: the Windows gaming ones read as Windows, the TDX, hotplug
/// and pasted-pins ones (UTC clock, no Hyper-V, no libosinfo id) as unknown.
#[test]
fn the_vfio_fixtures() {
    for (f, os) in [
        (
            "vfio/anticheat_hidden_hypervisor.xml",
            Some(GuestOs::Windows),
        ),
        (
            "vfio/col0_comment_mostly_single.xml",
            Some(GuestOs::Windows),
        ),
        (
            "vfio/gaming_nvidia_qemu_commandline.xml",
            Some(GuestOs::Windows),
        ),
        (
            "vfio/live_dumpxml_custom_cpu_1g.xml",
            Some(GuestOs::Windows),
        ),
        ("vfio/mixed_quotes_no_vendor.xml", Some(GuestOs::Windows)),
        ("vfio/passthrough_one_space.xml", Some(GuestOs::Windows)),
        (
            "vfio/ryzen_memfd_virtiofs_timers.xml",
            Some(GuestOs::Windows),
        ),
        ("vfio/ryzen_vcpus_current.xml", Some(GuestOs::Windows)),
        ("vfio/virtiofs_hugepages_cell.xml", Some(GuestOs::Windows)),
        ("domain_win10.xml", Some(GuestOs::Windows)),
        ("vfio/double_quoted_with_pasted_pins.xml", None),
        ("vfio/memory_hotplug_dimm.xml", None),
        ("vfio/tdx_anonymous_gpu.xml", None),
    ] {
        assert_eq!(os_of(&common::read(f)), os, "{f}");
    }
}

/// `text` without the first `from`…`to` span.
fn cut(text: &str, from: &str, to: &str) -> String {
    let a = text.find(from).unwrap_or_else(|| panic!("{from}"));
    let b = a + text[a..].find(to).unwrap_or_else(|| panic!("{to}")) + to.len();
    format!("{}{}", &text[..a], &text[b..])
}

//! Snapshot tests of every emitter on every fixture plan. Review changes with
//! `cargo insta review` (or INSTA_UPDATE=always and `git diff`).

mod common;

use common::plans;

#[test]
fn libvirt_fragment() {
    for (name, p) in plans() {
        insta::assert_snapshot!(
            format!("libvirt_fragment_{name}"),
            emit::libvirt::domain_fragment(&p)
        );
    }
}

#[test]
fn libvirt_patched_win10_domain() {
    let base = common::read("domain_win10.xml");
    for (name, p) in plans() {
        let out = emit::libvirt::patch_domain(&base, &p).expect("patch");
        insta::assert_snapshot!(format!("libvirt_patched_win10_{name}"), out);
    }
}

#[test]
fn libvirt_patched_minimal_domain() {
    let base = common::read("domain_minimal.xml");
    for (name, p) in plans() {
        let out = emit::libvirt::patch_domain(&base, &p).expect("patch");
        insta::assert_snapshot!(format!("libvirt_patched_minimal_{name}"), out);
    }
}

#[test]
fn qemu_command_line() {
    for (name, p) in plans() {
        insta::assert_snapshot!(format!("qemu_{name}"), emit::qemu::command_line(&p));
    }
}

#[test]
fn kata_config() {
    for (name, p) in plans() {
        insta::assert_snapshot!(format!("kata_config_{name}"), emit::kata::config_toml(&p));
    }
}

#[test]
fn kata_pod() {
    for (name, p) in plans() {
        insta::assert_snapshot!(format!("kata_pod_{name}"), emit::kata::pod_spec_yaml(&p));
    }
}

#[test]
fn kubevirt_fragment() {
    for (name, p) in plans() {
        insta::assert_snapshot!(
            format!("kubevirt_{name}"),
            emit::kubevirt::vmi_fragment_yaml(&p)
        );
    }
}

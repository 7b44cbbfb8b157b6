//! Fixture loading shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn read(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn plan(name: &str) -> plan::Plan {
    serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every fixture plan: (short name, plan).
pub const PLANS: &[(&str, &str)] = &[
    ("seed000_win10_gaming", "plan_seed000_win10_gaming.json"),
    ("seed004_win7", "plan_seed004_win7.json"),
    ("membw_2node_1g", "plan_membw_2node_1g.json"),
    ("compute_4k", "plan_compute_4k.json"),
];

pub const DOMAINS: &[&str] = &[
    "domain_win10.xml",
    "domain_minimal.xml",
    "domain_crlf_tabs.xml",
];

pub fn plans() -> Vec<(&'static str, plan::Plan)> {
    PLANS.iter().map(|(n, f)| (*n, plan(f))).collect()
}

/// Top-level `<domain>` children the patch owns.
pub const OWNED: &[&str] = &[
    "memory",
    "currentMemory",
    "memoryBacking",
    "vcpu",
    "vcpus",
    "iothreads",
    "cputune",
    "numatune",
    "features",
    "cpu",
    "clock",
];

/// The document with every owned top-level element (and the whitespace before it) cut out.
pub fn without_owned(xml: &str) -> String {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    let root = doc.root_element();
    let mut cuts = Vec::new();
    let mut prev_end = None;
    for c in root.children().filter(|c| !c.is_text()) {
        let r = c.range();
        if c.is_element() && OWNED.contains(&c.tag_name().name()) {
            let start = prev_end
                .filter(|&p: &usize| xml[p..r.start].trim().is_empty())
                .unwrap_or(r.start);
            cuts.push(start..r.end);
        }
        prev_end = Some(r.end);
    }
    let mut out = String::new();
    let mut at = 0;
    for c in cuts {
        out.push_str(&xml[at..c.start]);
        at = c.end;
    }
    out.push_str(&xml[at..]);
    out
}

/// `virt-xml-validate FILE domain`. Without the tool (Debian: libvirt-clients and
/// libxml2-utils, which CI installs) the validation is reported as a named skip of the
/// calling test, whose other checks still run.
pub fn validate(xml: &str, what: &str) {
    if testkit::which("virt-xml-validate").is_none() {
        return testkit::skip(
            &testkit::current_test(),
            format!("{what} not validated: virt-xml-validate is not installed (Debian: libvirt-clients libxml2-utils)"),
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("domain.xml");
    std::fs::write(&path, xml).expect("write");
    let out = Command::new("virt-xml-validate")
        .arg(&path)
        .arg("domain")
        .output()
        .expect("virt-xml-validate must be installed (Debian: libvirt-clients, libxml2-utils)");
    assert!(
        out.status.success(),
        "{what} does not validate:\n{}{}\n{xml}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `virsh -c test:///default define` + `dumpxml` in one session (the test driver forgets
/// everything between connections): what libvirt keeps of the domain, or why it refuses it.
pub fn virsh_define(xml: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("domain.xml");
    std::fs::write(&path, xml).expect("write");
    let name = emit::libvirt::domain_choices(xml)
        .map_err(|e| e.to_string())?
        .source
        .trim_start_matches("domain ")
        .trim_matches('"')
        .to_string();
    let out = Command::new("virsh")
        .args([
            "-q",
            "-c",
            "test:///default",
            &format!("define {}; dumpxml {name}", path.display()),
        ])
        .output()
        .expect("virsh must be installed (Debian: libvirt-clients)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{}{stdout}", String::from_utf8_lossy(&out.stderr)))
    }
}

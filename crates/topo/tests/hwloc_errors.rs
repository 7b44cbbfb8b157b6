//! Bad input to the hwloc XML loader: every failure is one line naming the file, never a
//! panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

const REAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/topologies/hwloc/topo.jrc0323.xml"
);
const REAL_V1: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/topologies/hwloc/topo.jwc09n003.xml"
);

fn real(path: &str) -> String {
    std::fs::read_to_string(path).expect("shared topology")
}

/// Write `bytes` to a temp file, load it, and return the error line.
fn load_err(bytes: &[u8]) -> (PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("broken-topology.xml");
    std::fs::write(&p, bytes).unwrap();
    let e = match topo::hwloc::load_file(&p) {
        Ok(h) => panic!("loaded {} PUs from bad input", h.pus.len()),
        Err(e) => e.to_string(),
    };
    (p, e)
}

fn assert_one_line_naming(path: &Path, e: &str, want: &str) {
    assert!(e.contains(&path.display().to_string()), "no path in: {e}");
    assert!(!e.contains('\n'), "not one line: {e}");
    assert!(e.contains(want), "expected {want:?} in: {e}");
}

#[test]
fn truncated_real_file() {
    let text = real(REAL);
    let half = &text.as_bytes()[..text.len() / 2];
    let (p, e) = load_err(half);
    assert_one_line_naming(&p, &e, "malformed XML");
    // the error says where the text stops
    let lines = std::str::from_utf8(half)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    assert!(e.contains(&format!("line {lines}")), "{e}");
    // cut inside a tag: roxmltree reports its own line:column
    let inside = text.find("pci_busid").unwrap() + 4;
    let (p, e) = load_err(format!("{}\"", &text[..inside]).as_bytes());
    assert_one_line_naming(&p, &e, "malformed XML");
}

#[test]
fn garbage_bytes() {
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (p, e) = load_err(&junk);
    assert_one_line_naming(&p, &e, "not UTF-8");
    let (p, e) = load_err(b"\x7fELF\x02\x01\x01 this is not xml at all");
    assert_one_line_naming(&p, &e, "malformed XML");
}

#[test]
fn non_hwloc_xml() {
    let (p, e) =
        load_err(b"<?xml version=\"1.0\"?>\n<domain type=\"kvm\"><name>win10</name></domain>\n");
    assert_one_line_naming(&p, &e, "not an hwloc topology");
    assert!(e.contains("<domain>"), "{e}");
}

#[test]
fn bad_cpuset_attribute_names_the_line() {
    let text = real(REAL).replacen("cpuset=\"0x00000001\"", "cpuset=\"0xnothex\"", 1);
    let line = text
        .lines()
        .position(|l| l.contains("0xnothex"))
        .map(|i| i + 1)
        .unwrap();
    let (p, e) = load_err(text.as_bytes());
    assert_one_line_naming(&p, &e, "bad cpuset");
    assert!(e.contains(&format!("line {line}:")), "{e}");
}

#[test]
fn bad_numbers_and_missing_attributes() {
    let cases = [
        (
            real(REAL).replacen("os_index=\"5\"", "os_index=\"five\"", 1),
            "not a number",
        ),
        (
            real(REAL).replacen("local_memory=\"", "local_memory=\"-", 1),
            "not a number",
        ),
        (
            real(REAL_V1).replacen("cache_size=\"", "cache_size=\"12x", 1),
            "not a number",
        ),
        (
            real(REAL).replacen("type=\"PU\" os_index=\"0\"", "type=\"PU\"", 1),
            "PU without an os_index",
        ),
        (
            real(REAL).replacen("pci_type=\"", "pci_type=\"zz", 1),
            "bad pci_type",
        ),
        (
            real(REAL).replacen("pci_busid=\"0000:", "pci_busid=\"0000:1", 1),
            "bad pci_busid",
        ),
        (
            real(REAL).replacen("nbobjs=\"8\"", "nbobjs=\"1000000000\"", 1),
            "nbobjs",
        ),
        (
            real(REAL).replacen("type=\"Package\"", "type=\"Socketz\"", 1),
            "unknown object type",
        ),
        (
            real(REAL_V1).replacen("<latency value=\"2.100000\"/>", "", 1),
            "latencies",
        ),
    ];
    for (text, want) in cases {
        let (p, e) = load_err(text.as_bytes());
        assert_one_line_naming(&p, &e, want);
    }
}

#[test]
fn empty_and_missing_files() {
    let (p, e) = load_err(b"");
    assert_one_line_naming(&p, &e, "empty file");
    let (p, e) = load_err(b"\n\n   \n");
    assert_one_line_naming(&p, &e, "empty file");
    let p = Path::new("/nonexistent/dir/topology.xml");
    let e = topo::hwloc::load_file(p).unwrap_err().to_string();
    assert_one_line_naming(p, &e, "No such file");
}

#[test]
fn hostile_xml_is_refused_quickly() {
    // billion laughs: roxmltree refuses the entity expansion
    let lol = r#"<?xml version="1.0"?>
<!DOCTYPE topology [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
]>
<topology version="2.0"><object type="Machine" cpuset="0x1"><info name="HostName" value="&e;"/></object></topology>"#;
    let (p, e) = load_err(lol.as_bytes());
    assert_one_line_naming(&p, &e, "malformed XML");
    // a huge PU number is refused, not allocated
    let big = "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" os_index=\"4000000000\" cpuset=\"0x1\"/></object></topology>";
    let (p, e) = load_err(big.as_bytes());
    assert_one_line_naming(&p, &e, "above");
}

/// Arbitrary damage to a real file: flipped bytes, inserted bytes, truncation.
fn mutate(base: &[u8], edits: &[(usize, u8, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut v = base.to_vec();
    for &(pos, op, byte) in edits {
        if v.is_empty() {
            break;
        }
        let i = pos % v.len();
        match op % 3 {
            0 => v[i] ^= byte | 1,
            1 => v.insert(i, byte),
            _ => {
                v.remove(i);
            }
        }
    }
    if let Some(c) = cut {
        let n = v.len();
        v.truncate(c % (n + 1));
    }
    v
}

/// Mutations aimed at the syntax hwloc XML is made of.
fn structural(base: &str, picks: &[(usize, usize)]) -> String {
    const FROM: [&str; 8] = [
        "0x",
        ",",
        "\"",
        ">",
        "<object",
        "os_index=\"",
        "type=\"",
        " ",
    ];
    const TO: [&str; 8] = [
        "",
        ",,",
        "\"\"",
        "",
        "<objec",
        "os_index=\"-",
        "type=\"PU",
        "  \u{e9}",
    ];
    let mut s = base.to_string();
    for &(which, nth) in picks {
        let (from, to) = (FROM[which % FROM.len()], TO[(which / 8) % TO.len()]);
        let hits: Vec<usize> = s.match_indices(from).map(|(i, _)| i).collect();
        if hits.is_empty() {
            continue;
        }
        let at = hits[nth % hits.len()];
        s.replace_range(at..at + from.len(), to);
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn mutated_real_files_never_panic(
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..12),
        cut in prop::option::of(any::<usize>()),
        v1 in any::<bool>(),
    ) {
        let base = if v1 { real(REAL_V1) } else { real(REAL) };
        let bytes = mutate(base.as_bytes(), &edits, cut);
        let text = String::from_utf8_lossy(&bytes);
        let p = Path::new("mutated.xml");
        if let Err(e) = topo::hwloc::parse_str(&text, p) {
            let e = e.to_string();
            prop_assert!(e.contains("mutated.xml"), "{}", e);
            prop_assert!(!e.contains('\n'), "{}", e);
        }
    }

    #[test]
    fn structurally_mutated_files_never_panic(
        picks in prop::collection::vec((0usize..64, any::<usize>()), 1..6),
        v1 in any::<bool>(),
    ) {
        let base = if v1 { real(REAL_V1) } else { real(REAL) };
        let text = structural(&base, &picks);
        match topo::hwloc::parse_str(&text, Path::new("mutated.xml")) {
            Ok(h) => {
                // whatever loads is a consistent model
                prop_assert!(!h.pus.is_empty());
                for pu in &h.pus {
                    prop_assert!(h.cores.get(pu.core as usize).is_some_and(|c| c.pus.contains(pu.os_index)));
                }
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.contains("mutated.xml") && !e.contains('\n'), "{}", e);
            }
        }
    }
}

//! `proto/nri.proto` is NRI v0.12.3's `pkg/api/api.proto`, descriptor for descriptor: the same
//! package, messages (with their nested types), fields (name, number, label, type, type name),
//! enums and values, services and methods. Comments, file options and the order of
//! declarations may differ.
//!
//! The upstream file is read from `$NRI_API_PROTO`, else from the Go module cache
//! (`go env GOMODCACHE`, where building containerd 2.4.2 puts github.com/containerd/nri@v0.12.3);
//! without it the test says it skipped.

use std::path::{Path, PathBuf};

use protobuf::descriptor::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto};

fn upstream() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NRI_API_PROTO") {
        return Some(PathBuf::from(p));
    }
    let out = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()?;
    let cache = String::from_utf8(out.stdout).ok()?;
    let p = Path::new(cache.trim()).join("github.com/containerd/nri@v0.12.3/pkg/api/api.proto");
    p.is_file().then_some(p)
}

fn parse(path: &Path) -> FileDescriptorProto {
    let dir = path.parent().expect("a file has a folder");
    let mut parsed = protobuf_parse::Parser::new()
        .pure()
        .include(dir)
        .input(path)
        .parse_and_typecheck()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parsed.file_descriptors.pop().expect("one file")
}

fn enum_lines(prefix: &str, e: &EnumDescriptorProto, out: &mut Vec<String>) {
    for v in &e.value {
        out.push(format!(
            "enum {prefix}{} {} = {}",
            e.name(),
            v.name(),
            v.number()
        ));
    }
}

fn message_lines(prefix: &str, m: &DescriptorProto, out: &mut Vec<String>) {
    out.push(format!("message {prefix}{}", m.name()));
    for f in &m.field {
        out.push(format!(
            "field {prefix}{}.{} = {} {:?} {:?} {}",
            m.name(),
            f.name(),
            f.number(),
            f.label(),
            f.type_(),
            f.type_name()
        ));
    }
    let inner = format!("{prefix}{}.", m.name());
    for n in &m.nested_type {
        message_lines(&inner, n, out);
    }
    for e in &m.enum_type {
        enum_lines(&inner, e, out);
    }
}

/// The file as sorted lines of what goes on the wire and what the services are.
fn shape(f: &FileDescriptorProto) -> Vec<String> {
    let mut out = vec![
        format!("package {}", f.package()),
        format!("syntax {}", f.syntax()),
    ];
    for m in &f.message_type {
        message_lines("", m, &mut out);
    }
    for e in &f.enum_type {
        enum_lines("", e, &mut out);
    }
    for s in &f.service {
        for m in &s.method {
            out.push(format!(
                "rpc {}.{}({}) returns ({})",
                s.name(),
                m.name(),
                m.input_type(),
                m.output_type()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn our_schema_is_nri_v0_12_3_api_proto() {
    let ours = shape(&parse(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/nri.proto"),
    ));
    let Some(path) = upstream() else {
        testkit::skip(
            "our_schema_is_nri_v0_12_3_api_proto",
            "NRI v0.12.3's api.proto is not at hand (set NRI_API_PROTO, or build containerd 2.4.2 with Go so the module cache has it)",
        );
        return;
    };
    let theirs = shape(&parse(&path));
    let missing: Vec<&String> = theirs.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<&String> = ours.iter().filter(|l| !theirs.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "proto/nri.proto differs from {}:\nmissing: {missing:#?}\nextra: {extra:#?}",
        path.display()
    );
    assert!(
        ours.len() > 400,
        "{} lines: the comparison read too little",
        ours.len()
    );
}

//! Shared by the cdi integration tests: the schema checks, the sysfs generator, helpers.
#![allow(dead_code)]

pub mod gen;
pub mod schema;

use std::collections::BTreeMap;

use serde_json::Value;

/// A device node as the spec spells it: (path, type, major, minor).
pub type NodeSpelling = (String, Option<String>, Option<i64>, Option<i64>);

/// The spec passes the CDI rules (`cdi::rules`) and, separately, the JSON schema checks.
pub fn assert_valid(spec: &cdi::Spec) -> Value {
    let doc = serde_json::to_value(spec).expect("spec serializes");
    if let Err(v) = cdi::rules::validate(&doc) {
        panic!("CDI rules: {v:?}\n{}", spec.to_json());
    }
    let s = schema::check(&doc);
    assert!(s.is_empty(), "schema: {s:?}");
    // and what is written reads back as the same spec, strictly
    let back: cdi::Spec = serde_json::from_str(&spec.to_json()).expect("reads back");
    assert_eq!(&back, spec);
    doc
}

/// Every device name of a spec → its nodes.
pub fn nodes_by_name(spec: &cdi::Spec) -> BTreeMap<String, Vec<NodeSpelling>> {
    spec.devices
        .iter()
        .map(|d| {
            let nodes = d
                .container_edits
                .device_nodes
                .iter()
                .map(|n| (n.path.clone(), n.node_type.clone(), n.major, n.minor))
                .collect();
            (d.name.clone(), nodes)
        })
        .collect()
}

pub fn char_node(path: &str, dev: Option<(u32, u32)>) -> NodeSpelling {
    (
        path.to_string(),
        Some("c".to_string()),
        dev.map(|d| d.0 as i64),
        dev.map(|d| d.1 as i64),
    )
}

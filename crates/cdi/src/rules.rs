//! The rules a CDI spec must meet to load, checked on its JSON: the JSON schema's types and
//! required fields (schema/schema.json, schema/defs.json), the reference loader's checks
//! (pkg/cdi: spec.go, device.go, container-edits.go; pkg/parser; internal/validation) and the
//! MUSTs of SPEC.md — encoded here from reading them, not copied.
//!
//! Every violation names where it is (`devices[2].containerEdits.deviceNodes[0].path`).
//! `vmtune cdi` runs this on every spec before writing it: a spec the loader rejects in
//! `/var/run/cdi` makes the CDI registry's refresh fail, and with it every CDI injection on
//! the node (Kata's runtime stops at "CDI registry refresh failed").
//!
//! One rule is stricter than the loader: device node paths (and hook paths, which SPEC.md
//! says MUST be absolute) must be absolute, as OCI's `linux.devices[].path` is a full path.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::names;
use crate::version::{minimum_required, Version};

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where: a JSON path like `devices[0].name` (empty for the document itself).
    pub at: String,
    pub msg: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}: {}", self.at, self.msg)
        }
    }
}

/// Every violation, in document order; `Ok` when there is none.
pub fn validate(doc: &Value) -> Result<(), Vec<Violation>> {
    let mut c = Checker::default();
    c.spec(doc);
    if c.out.is_empty() {
        Ok(())
    } else {
        Err(c.out)
    }
}

/// Hook names a loader accepts (the OCI hooks).
pub const HOOK_NAMES: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// Device node types: block, char, unbuffered char, FIFO (or none: taken from the host).
pub const NODE_TYPES: [&str; 5] = ["", "b", "c", "u", "p"];

/// Total size of one annotations map (keys + values), as Kubernetes bounds it.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 << 10;

#[derive(Default)]
struct Checker {
    out: Vec<Violation>,
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Checker {
    fn bad(&mut self, at: impl Into<String>, msg: impl Into<String>) {
        self.out.push(Violation {
            at: at.into(),
            msg: msg.into(),
        });
    }

    /// The object at `at`, and a violation for every key not in `allowed` (loaders parse
    /// strictly: an unknown field fails the whole spec).
    fn object<'a>(
        &mut self,
        v: &'a Value,
        at: &str,
        allowed: &[&str],
    ) -> Option<&'a Map<String, Value>> {
        let Some(m) = v.as_object() else {
            self.bad(at, format!("must be an object, is {}", type_name(v)));
            return None;
        };
        for k in m.keys() {
            if !allowed.contains(&k.as_str()) {
                self.bad(
                    join(at, k),
                    format!("unknown field (allowed here: {})", allowed.join(", ")),
                );
            }
        }
        Some(m)
    }

    fn required<'a>(
        &mut self,
        m: &'a Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Option<&'a Value> {
        let v = m.get(key);
        if v.is_none() {
            self.bad(join(at, key), "required field is missing");
        }
        v
    }

    fn string<'a>(&mut self, v: &'a Value, at: &str) -> Option<&'a str> {
        match v.as_str() {
            Some(s) => Some(s),
            None => {
                self.bad(at, format!("must be a string, is {}", type_name(v)));
                None
            }
        }
    }

    fn array<'a>(&mut self, v: &'a Value, at: &str) -> Option<&'a Vec<Value>> {
        match v.as_array() {
            Some(a) => Some(a),
            None => {
                self.bad(at, format!("must be an array, is {}", type_name(v)));
                None
            }
        }
    }

    fn strings(&mut self, v: &Value, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(a) = self.array(v, at) {
            for (i, e) in a.iter().enumerate() {
                if let Some(s) = self.string(e, &format!("{at}[{i}]")) {
                    out.push(s.to_string());
                }
            }
        }
        out
    }

    /// An integer within `[min, max]` (the schema's `int64` / `uint32`).
    fn integer(&mut self, v: &Value, at: &str, min: i128, max: i128) -> Option<i128> {
        let n = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from));
        match n {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                self.bad(at, format!("{n} is outside {min}..={max}"));
                None
            }
            None => {
                self.bad(at, format!("must be an integer, is {}", type_name(v)));
                None
            }
        }
    }

    fn uint32(&mut self, v: &Value, at: &str) -> Option<i128> {
        self.integer(v, at, 0, u32::MAX as i128)
    }

    fn absolute_path(&mut self, v: &Value, at: &str, what: &str) -> Option<String> {
        let s = self.string(v, at)?;
        if s.is_empty() {
            self.bad(at, format!("empty {what}"));
        } else if !s.starts_with('/') {
            self.bad(at, format!("{what} {s:?} is not absolute"));
        }
        Some(s.to_string())
    }

    fn env(&mut self, v: &Value, at: &str) {
        for (i, e) in self.strings(v, at).iter().enumerate() {
            if !matches!(e.find('='), Some(p) if p > 0) {
                self.bad(format!("{at}[{i}]"), format!("{e:?} is not NAME=VALUE"));
            }
        }
    }

    fn annotations(&mut self, v: &Value, at: &str) {
        let Some(m) = v.as_object() else {
            self.bad(at, format!("must be an object, is {}", type_name(v)));
            return;
        };
        let mut size = 0usize;
        for (k, val) in m {
            let kat = format!("{at}[{k:?}]");
            if let Err(e) = names::validate_annotation_key(k) {
                self.bad(&kat, e);
            }
            if let Some(s) = self.string(val, &kat) {
                size += k.len() + s.len();
            }
        }
        if size > MAX_ANNOTATIONS_BYTES {
            self.bad(
                at,
                format!("annotations are {size} bytes (at most {MAX_ANNOTATIONS_BYTES})"),
            );
        }
    }

    fn spec(&mut self, doc: &Value) {
        let Some(m) = self.object(
            doc,
            "",
            &[
                "cdiVersion",
                "kind",
                "annotations",
                "devices",
                "containerEdits",
            ],
        ) else {
            return;
        };
        if let Some(v) = self.required(m, "", "cdiVersion") {
            if let Some(s) = self.string(v, "cdiVersion") {
                match Version::parse(s) {
                    None => self.bad(
                        "cdiVersion",
                        format!("{s:?} is not a semantic version MAJOR.MINOR.PATCH"),
                    ),
                    Some(ver) if !ver.is_released() => self.bad(
                        "cdiVersion",
                        format!("{s:?} is not a released CDI spec version"),
                    ),
                    Some(ver) => {
                        let (min, why) = minimum_required(doc);
                        if ver < min {
                            self.bad(
                                "cdiVersion",
                                format!("{s:?} is older than {min}, which {why} needs"),
                            );
                        }
                    }
                }
            }
        }
        if let Some(v) = self.required(m, "", "kind") {
            if let Some(s) = self.string(v, "kind") {
                if let Err(e) = names::parse_kind(s) {
                    self.bad("kind", e);
                }
            }
        }
        if let Some(a) = m.get("annotations") {
            self.annotations(a, "annotations");
        }
        if let Some(e) = m.get("containerEdits") {
            self.edits(e, "containerEdits", false);
        }
        let Some(devs) = self.required(m, "", "devices") else {
            return;
        };
        let Some(devs) = self.array(devs, "devices") else {
            return;
        };
        if devs.is_empty() {
            self.bad("devices", "no devices (a spec needs at least one)");
        }
        let mut seen: HashSet<&str> = HashSet::new();
        for (i, d) in devs.iter().enumerate() {
            let at = format!("devices[{i}]");
            let Some(dm) = self.object(d, &at, &["name", "annotations", "containerEdits"]) else {
                continue;
            };
            if let Some(n) = self.required(dm, &at, "name") {
                if let Some(name) = self.string(n, &join(&at, "name")) {
                    if let Err(e) = names::validate_device_name(name) {
                        self.bad(join(&at, "name"), e);
                    }
                    if !seen.insert(name) {
                        self.bad(join(&at, "name"), format!("device {name:?} appears twice"));
                    }
                }
            }
            if let Some(a) = dm.get("annotations") {
                self.annotations(a, &join(&at, "annotations"));
            }
            if let Some(e) = self.required(dm, &at, "containerEdits") {
                self.edits(e, &join(&at, "containerEdits"), true);
            }
        }
    }

    /// `containerEdits`; a device's must not be empty (device.go: "empty device edits").
    fn edits(&mut self, v: &Value, at: &str, device: bool) {
        let Some(m) = self.object(
            v,
            at,
            &[
                "env",
                "deviceNodes",
                "netDevices",
                "hooks",
                "mounts",
                "intelRdt",
                "additionalGids",
            ],
        ) else {
            return;
        };
        let mut effective = 0;
        if let Some(e) = m.get("env") {
            self.env(e, &join(at, "env"));
            effective += e.as_array().map_or(0, Vec::len);
        }
        if let Some(n) = m.get("deviceNodes") {
            let nat = join(at, "deviceNodes");
            if let Some(nodes) = self.array(n, &nat) {
                effective += nodes.len();
                for (i, node) in nodes.iter().enumerate() {
                    self.device_node(node, &format!("{nat}[{i}]"));
                }
            }
        }
        if let Some(n) = m.get("netDevices") {
            let nat = join(at, "netDevices");
            if let Some(list) = self.array(n, &nat) {
                effective += list.len();
                let mut hosts = BTreeSet::new();
                let mut names = BTreeSet::new();
                for (i, d) in list.iter().enumerate() {
                    let dat = format!("{nat}[{i}]");
                    let Some(dm) = self.object(d, &dat, &["hostInterfaceName", "name"]) else {
                        continue;
                    };
                    for (key, set) in [("hostInterfaceName", &mut hosts), ("name", &mut names)] {
                        let kat = join(&dat, key);
                        let Some(s) = dm.get(key) else {
                            self.bad(kat, "required field is missing");
                            continue;
                        };
                        let Some(s) = self.string(s, &kat) else {
                            continue;
                        };
                        if s.is_empty() {
                            self.bad(&kat, "empty interface name");
                        } else if !set.insert(s.to_string()) {
                            self.bad(&kat, format!("{s:?} appears twice"));
                        }
                    }
                }
            }
        }
        if let Some(h) = m.get("hooks") {
            let hat = join(at, "hooks");
            if let Some(list) = self.array(h, &hat) {
                effective += list.len();
                for (i, hook) in list.iter().enumerate() {
                    self.hook(hook, &format!("{hat}[{i}]"));
                }
            }
        }
        if let Some(ms) = m.get("mounts") {
            let mat = join(at, "mounts");
            if let Some(list) = self.array(ms, &mat) {
                effective += list.len();
                for (i, mount) in list.iter().enumerate() {
                    self.mount(mount, &format!("{mat}[{i}]"));
                }
            }
        }
        if let Some(r) = m.get("intelRdt") {
            if !r.is_null() {
                effective += 1;
                self.intel_rdt(r, &join(at, "intelRdt"));
            }
        }
        if let Some(g) = m.get("additionalGids") {
            let gat = join(at, "additionalGids");
            if let Some(list) = self.array(g, &gat) {
                effective += list.len();
                for (i, gid) in list.iter().enumerate() {
                    self.uint32(gid, &format!("{gat}[{i}]"));
                }
            }
        }
        if device && effective == 0 {
            self.bad(at, "a device's edits are empty (it would change nothing)");
        }
    }

    fn device_node(&mut self, v: &Value, at: &str) {
        let Some(m) = self.object(
            v,
            at,
            &[
                "path",
                "hostPath",
                "type",
                "major",
                "minor",
                "fileMode",
                "permissions",
                "uid",
                "gid",
            ],
        ) else {
            return;
        };
        if let Some(p) = self.required(m, at, "path") {
            self.absolute_path(p, &join(at, "path"), "device path");
        }
        if let Some(p) = m.get("hostPath") {
            let pat = join(at, "hostPath");
            // the loader treats an empty hostPath as "same as path"
            if p.as_str() != Some("") {
                self.absolute_path(p, &pat, "host path");
            }
        }
        if let Some(t) = m.get("type") {
            if let Some(s) = self.string(t, &join(at, "type")) {
                if !NODE_TYPES.contains(&s) {
                    self.bad(
                        join(at, "type"),
                        format!("{s:?} is not a device type (b, c, u or p)"),
                    );
                }
            }
        }
        for key in ["major", "minor"] {
            if let Some(n) = m.get(key) {
                self.integer(n, &join(at, key), i64::MIN as i128, i64::MAX as i128);
            }
        }
        for key in ["fileMode", "uid", "gid"] {
            if let Some(n) = m.get(key) {
                self.uint32(n, &join(at, key));
            }
        }
        if let Some(p) = m.get("permissions") {
            if let Some(s) = self.string(p, &join(at, "permissions")) {
                if !(s.is_empty() || s == "none" || s.bytes().all(|b| b"rwm".contains(&b))) {
                    self.bad(
                        join(at, "permissions"),
                        format!("{s:?} is not cgroup permissions (r, w, m, or \"none\")"),
                    );
                }
            }
        }
    }

    fn hook(&mut self, v: &Value, at: &str) {
        let Some(m) = self.object(v, at, &["hookName", "path", "args", "env", "timeout"]) else {
            return;
        };
        if let Some(n) = self.required(m, at, "hookName") {
            if let Some(s) = self.string(n, &join(at, "hookName")) {
                if !HOOK_NAMES.contains(&s) {
                    self.bad(
                        join(at, "hookName"),
                        format!("{s:?} is not one of {}", HOOK_NAMES.join(", ")),
                    );
                }
            }
        }
        if let Some(p) = self.required(m, at, "path") {
            self.absolute_path(p, &join(at, "path"), "hook path");
        }
        if let Some(a) = m.get("args") {
            self.strings(a, &join(at, "args"));
        }
        if let Some(e) = m.get("env") {
            self.env(e, &join(at, "env"));
        }
        if let Some(t) = m.get("timeout") {
            if self.uint32(t, &join(at, "timeout")) == Some(0) {
                self.bad(
                    join(at, "timeout"),
                    "a hook timeout must be greater than zero",
                );
            }
        }
    }

    fn mount(&mut self, v: &Value, at: &str) {
        let Some(m) = self.object(v, at, &["hostPath", "containerPath", "options", "type"]) else {
            return;
        };
        for key in ["hostPath", "containerPath"] {
            if let Some(p) = self.required(m, at, key) {
                if self.string(p, &join(at, key)) == Some("") {
                    self.bad(join(at, key), "empty mount path");
                }
            }
        }
        if let Some(o) = m.get("options") {
            self.strings(o, &join(at, "options"));
        }
        if let Some(t) = m.get("type") {
            self.string(t, &join(at, "type"));
        }
    }

    fn intel_rdt(&mut self, v: &Value, at: &str) {
        let Some(m) = self.object(
            v,
            at,
            &[
                "closID",
                "l3CacheSchema",
                "memBwSchema",
                "schemata",
                "enableMonitoring",
            ],
        ) else {
            return;
        };
        if let Some(c) = m.get("closID") {
            if let Some(s) = self.string(c, &join(at, "closID")) {
                let bad = s != "/"
                    && (s.len() >= 4096 || s == "." || s == ".." || s.contains(['/', '\n']));
                if bad {
                    self.bad(
                        join(at, "closID"),
                        format!("{s:?} is not a valid CLOS name"),
                    );
                }
            }
        }
        for key in ["l3CacheSchema", "memBwSchema"] {
            if let Some(s) = m.get(key) {
                self.string(s, &join(at, key));
            }
        }
        if let Some(s) = m.get("schemata") {
            self.strings(s, &join(at, "schemata"));
        }
        if let Some(b) = m.get("enableMonitoring") {
            if !b.is_boolean() {
                self.bad(
                    join(at, "enableMonitoring"),
                    format!("must be a boolean, is {}", type_name(b)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(doc: &Value) -> Vec<String> {
        validate(doc)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|v| v.to_string())
            .collect()
    }

    /// The spec the Kata GPU boot study's DaemonSet wrote by hand (first device, legacy
    /// group node), in its shape: empty spec-level edits, `permissions: rwm`, no numbers.
    fn study_spec() -> Value {
        json!({
          "cdiVersion": "0.7.0",
          "kind": "nvidia.com/gpu",
          "containerEdits": {},
          "devices": [
            {"name": "0", "containerEdits": {"deviceNodes": [
              {"path": "/dev/vfio/66", "type": "c", "permissions": "rwm"}]}}
          ]
        })
    }

    #[test]
    fn the_study_spec_is_valid() {
        assert_eq!(errs(&study_spec()), Vec::<String>::new());
    }

    #[test]
    fn each_rule_is_caught_and_located() {
        type Edit = fn(&mut Value);
        let cases: Vec<(Edit, &str)> = vec![
            (
                |d| d["cdiVersion"] = json!("0.7"),
                "cdiVersion: \"0.7\" is not a semantic",
            ),
            (|d| d["cdiVersion"] = json!("0.9.0"), "not a released"),
            (
                |d| d["cdiVersion"] = json!("0.4.0"),
                "older than 0.5.0, which a device name starting with a digit needs",
            ),
            (
                |d| d["cdiVersion"] = json!(7),
                "cdiVersion: must be a string",
            ),
            (
                |d| {
                    d.as_object_mut().unwrap().remove("kind");
                },
                "kind: required field is missing",
            ),
            (|d| d["kind"] = json!("nvidia.com"), "is not vendor/class"),
            (|d| d["kind"] = json!("nvidia.com/gpu/x"), "character '/'"),
            (|d| d["devices"] = json!([]), "devices: no devices"),
            (|d| d["devices"] = json!({}), "devices: must be an array"),
            (
                |d| d["devices"][0]["name"] = json!("gpu 0"),
                "devices[0].name: device name \"gpu 0\"",
            ),
            (
                |d| {
                    let x = d["devices"][0].clone();
                    d["devices"].as_array_mut().unwrap().push(x);
                },
                "devices[1].name: device \"0\" appears twice",
            ),
            (
                |d| {
                    d["devices"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("containerEdits");
                },
                "devices[0].containerEdits: required field is missing",
            ),
            (
                |d| d["devices"][0]["containerEdits"] = json!({}),
                "edits are empty",
            ),
            (
                |d| {
                    d["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] =
                        json!("dev/vfio/66")
                },
                "deviceNodes[0].path: device path \"dev/vfio/66\" is not absolute",
            ),
            (
                |d| d["devices"][0]["containerEdits"]["deviceNodes"][0]["type"] = json!("x"),
                "is not a device type",
            ),
            (
                |d| d["devices"][0]["containerEdits"]["deviceNodes"][0]["major"] = json!(1.5),
                "major: must be an integer",
            ),
            (
                |d| d["devices"][0]["containerEdits"]["deviceNodes"][0]["uid"] = json!(-1),
                "uid: -1 is outside",
            ),
            (
                |d| {
                    d["devices"][0]["containerEdits"]["deviceNodes"][0]["permissions"] = json!("rx")
                },
                "not cgroup permissions",
            ),
            (
                |d| d["devices"][0]["containerEdits"]["deviceNodes"][0]["mode"] = json!(1),
                "deviceNodes[0].mode: unknown field",
            ),
            (
                |d| d["devices"][0]["containerEdits"]["env"] = json!(["=x"]),
                "env[0]: \"=x\" is not NAME=VALUE",
            ),
            (
                |d| d["devices"][0]["annotations"] = json!({"a/b/c": "x"}),
                "more than one '/'",
            ),
            (
                |d| d["devices"][0]["annotations"] = json!({"k": 1}),
                "must be a string",
            ),
            (|d| d["extra"] = json!(1), "extra: unknown field"),
            (
                |d| {
                    d["containerEdits"]["hooks"] =
                        json!([{"hookName": "preStart", "path": "/bin/x"}])
                },
                "is not one of",
            ),
            (
                |d| {
                    d["containerEdits"]["hooks"] =
                        json!([{"hookName": "poststop", "path": "/bin/x", "timeout": 0}])
                },
                "greater than zero",
            ),
            (
                |d| d["containerEdits"]["mounts"] = json!([{"hostPath": "/a"}]),
                "mounts[0].containerPath: required field is missing",
            ),
            (
                |d| d["containerEdits"]["netDevices"] = json!([{"hostInterfaceName": "e", "name": "n"}, {"hostInterfaceName": "e", "name": "m"}]),
                "appears twice",
            ),
            (
                |d| d["containerEdits"]["intelRdt"] = json!({"closID": ".."}),
                "not a valid CLOS name",
            ),
            (
                |d| d["containerEdits"]["additionalGids"] = json!([4294967296u64]),
                "outside",
            ),
        ];
        for (i, (edit, want)) in cases.into_iter().enumerate() {
            let mut d = study_spec();
            edit(&mut d);
            let e = errs(&d);
            assert!(
                e.iter().any(|m| m.contains(want)),
                "case {i}: wanted {want:?} in {e:?}"
            );
        }
    }

    #[test]
    fn newer_features_need_a_newer_version() {
        let mut d = study_spec();
        d["containerEdits"] =
            json!({"netDevices": [{"hostInterfaceName": "eth1", "name": "net1"}]});
        assert!(errs(&d).iter().any(|m| m.contains("older than 1.1.0")));
        d["cdiVersion"] = json!("1.1.0");
        assert_eq!(errs(&d), Vec::<String>::new());
        assert!(validate(&json!([])).is_err());
    }
}

//! CDI spec versions and the minimum version a spec's contents need.
//!
//! The released versions and what each added are SPEC.md's table and specs-go/version.go of
//! cncf-tags/container-device-interface (current: 1.1.0). A loader refuses a spec whose
//! `cdiVersion` it does not know, or that is lower than what the spec's contents need, so a
//! writer that wants old loaders to read its spec writes the minimum its contents need, as the
//! CDI library itself does (`MinimumRequiredVersion`):
//!
//! | version | needed by |
//! |---|---|
//! | 0.4.0 | a mount with `type` |
//! | 0.5.0 | a device name starting with a digit; a device node with `hostPath` |
//! | 0.6.0 | `annotations` (spec or device); a dot in the kind's class |
//! | 0.7.0 | `intelRdt`; `additionalGids` |
//! | 1.1.0 | `netDevices`; `intelRdt.schemata` / `enableMonitoring` |
//!
//! 0.8.0 and 1.0.0 changed only the Go API. 0.3.0 is the earliest a current loader accepts.

use std::fmt;

use serde_json::Value;

/// A CDI spec version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

/// Every released spec version, oldest first.
pub const RELEASED: [Version; 10] = [
    Version(0, 1, 0),
    Version(0, 2, 0),
    Version(0, 3, 0),
    Version(0, 4, 0),
    Version(0, 5, 0),
    Version(0, 6, 0),
    Version(0, 7, 0),
    Version(0, 8, 0),
    Version(1, 0, 0),
    Version(1, 1, 0),
];

/// The current spec version (SPEC.md "This is CDI spec version 1.1.0").
pub const CURRENT: Version = Version(1, 1, 0);
/// The earliest version the reference loader accepts when nothing newer is needed.
pub const EARLIEST: Version = Version(0, 3, 0);

impl Version {
    /// Parse `MAJOR.MINOR.PATCH` (Semantic Versioning 2.0 core, no leading zeros), with the
    /// optional leading `v` the reference loader strips. Pre-release or build suffixes are
    /// refused: no released CDI version has one.
    pub fn parse(s: &str) -> Option<Version> {
        let t = s.strip_prefix('v').unwrap_or(s);
        let parts: Vec<&str> = t.split('.').collect();
        let [a, b, c] = parts.as_slice() else {
            return None;
        };
        let num = |p: &str| -> Option<u32> {
            let ok = !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p == "0" || !p.starts_with('0'));
            ok.then(|| p.parse().ok()).flatten()
        };
        Some(Version(num(a)?, num(b)?, num(c)?))
    }

    pub fn is_released(&self) -> bool {
        RELEASED.contains(self)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

fn non_empty_object(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_some_and(|m| !m.is_empty())
}

fn non_empty_array(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

/// The edits objects of a spec: the spec's own and every device's.
fn edits(doc: &Value) -> Vec<&Value> {
    let mut out: Vec<&Value> = doc.get("containerEdits").into_iter().collect();
    if let Some(devs) = doc.get("devices").and_then(Value::as_array) {
        out.extend(devs.iter().filter_map(|d| d.get("containerEdits")));
    }
    out
}

/// The minimum version a spec document's contents need (the rules of the table above, as
/// specs-go/version.go checks them), and why.
pub fn minimum_required(doc: &Value) -> (Version, &'static str) {
    let devices: Vec<&Value> = doc
        .get("devices")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let edits = edits(doc);
    let rdts: Vec<&Value> = edits
        .iter()
        .filter_map(|e| e.get("intelRdt"))
        .filter(|r| !r.is_null())
        .collect();
    if edits.iter().any(|e| non_empty_array(e.get("netDevices"))) {
        return (Version(1, 1, 0), "netDevices");
    }
    if rdts.iter().any(|r| {
        r.get("schemata").is_some_and(|s| !s.is_null())
            || r.get("enableMonitoring").and_then(Value::as_bool) == Some(true)
    }) {
        return (Version(1, 1, 0), "intelRdt.schemata or enableMonitoring");
    }
    if !rdts.is_empty() {
        return (Version(0, 7, 0), "intelRdt");
    }
    if edits
        .iter()
        .any(|e| non_empty_array(e.get("additionalGids")))
    {
        return (Version(0, 7, 0), "additionalGids");
    }
    if non_empty_object(doc.get("annotations"))
        || devices
            .iter()
            .any(|d| non_empty_object(d.get("annotations")))
    {
        return (Version(0, 6, 0), "annotations");
    }
    let class = doc
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|k| k.split_once('/'))
        .map(|(_, c)| c);
    if class.is_some_and(|c| c.contains('.')) {
        return (Version(0, 6, 0), "a dot in the kind's class");
    }
    let digit_name = devices.iter().any(|d| {
        d.get("name")
            .and_then(Value::as_str)
            .and_then(|n| n.bytes().next())
            .is_some_and(|b| b.is_ascii_digit())
    });
    if digit_name {
        return (Version(0, 5, 0), "a device name starting with a digit");
    }
    let host_path = edits.iter().any(|e| {
        e.get("deviceNodes")
            .and_then(Value::as_array)
            .is_some_and(|nodes| {
                nodes.iter().any(|n| {
                    n.get("hostPath")
                        .and_then(Value::as_str)
                        .is_some_and(|p| !p.is_empty())
                })
            })
    });
    if host_path {
        return (Version(0, 5, 0), "a device node's hostPath");
    }
    let mount_type = edits.iter().any(|e| {
        e.get("mounts").and_then(Value::as_array).is_some_and(|ms| {
            ms.iter().any(|m| {
                m.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty())
            })
        })
    });
    if mount_type {
        return (Version(0, 4, 0), "a mount's type");
    }
    (EARLIEST, "nothing newer")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_versions() {
        assert_eq!(Version::parse("1.1.0"), Some(CURRENT));
        assert_eq!(Version::parse("v0.5.0"), Some(Version(0, 5, 0)));
        for bad in [
            "",
            "1",
            "1.0",
            "1.0.0.0",
            "01.0.0",
            "1.0.0-rc1",
            "1.a.0",
            "vv1.0.0",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert!(Version(0, 7, 0).is_released());
        assert!(!Version(0, 9, 0).is_released());
        assert!(Version(0, 10, 0) > Version(0, 9, 0));
    }

    #[test]
    fn minimum_by_feature() {
        let base = || {
            json!({"cdiVersion": "1.1.0", "kind": "vendor.com/gpu",
                   "devices": [{"name": "gpu0", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu0"}]}}]})
        };
        assert_eq!(minimum_required(&base()).0, EARLIEST);
        let mut d = base();
        d["devices"][0]["name"] = json!("0");
        assert_eq!(minimum_required(&d).0, Version(0, 5, 0));
        let mut d = base();
        d["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"] = json!("/dev/x");
        assert_eq!(minimum_required(&d).0, Version(0, 5, 0));
        let mut d = base();
        d["kind"] = json!("vendor.com/gpu.v2");
        assert_eq!(minimum_required(&d).0, Version(0, 6, 0));
        let mut d = base();
        d["devices"][0]["annotations"] = json!({"a": "b"});
        assert_eq!(minimum_required(&d).0, Version(0, 6, 0));
        let mut d = base();
        d["annotations"] = json!({});
        assert_eq!(
            minimum_required(&d).0,
            EARLIEST,
            "empty annotations need nothing"
        );
        let mut d = base();
        d["containerEdits"] = json!({"additionalGids": [44]});
        assert_eq!(minimum_required(&d).0, Version(0, 7, 0));
        let mut d = base();
        d["containerEdits"] = json!({"intelRdt": {"closID": "x"}});
        assert_eq!(minimum_required(&d).0, Version(0, 7, 0));
        let mut d = base();
        d["devices"][0]["containerEdits"]["intelRdt"] = json!({"enableMonitoring": true});
        assert_eq!(minimum_required(&d).0, Version(1, 1, 0));
        let mut d = base();
        d["devices"][0]["containerEdits"]["netDevices"] =
            json!([{"hostInterfaceName": "eth1", "name": "net1"}]);
        assert_eq!(minimum_required(&d).0, Version(1, 1, 0));
        let mut d = base();
        d["containerEdits"] =
            json!({"mounts": [{"hostPath": "/a", "containerPath": "/b", "type": "bind"}]});
        assert_eq!(minimum_required(&d).0, Version(0, 4, 0));
    }
}

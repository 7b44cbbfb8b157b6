//! The CDI JSON schema (schema/schema.json + schema/defs.json of
//! cncf-tags/container-device-interface, draft-07), written out as checks: types, required
//! properties and integer ranges. Independent of `cdi::rules` (which also holds the loader's
//! rules): a spec that passes both meets the schema and the loader.
//!
//! What the schema does not say is not checked here: it allows unknown properties, it does not
//! bound `devices` to be non-empty, and its `env` items carry a `ref` (not `$ref`), so env
//! entries are unconstrained by the schema.

use serde_json::{Map, Value};

pub fn check(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    root(doc, &mut out);
    out
}

fn obj<'a>(v: &'a Value, at: &str, out: &mut Vec<String>) -> Option<&'a Map<String, Value>> {
    let o = v.as_object();
    if o.is_none() {
        out.push(format!("{at}: not an object"));
    }
    o
}

fn required(m: &Map<String, Value>, at: &str, keys: &[&str], out: &mut Vec<String>) {
    for k in keys {
        if !m.contains_key(*k) {
            out.push(format!("{at}: missing required {k}"));
        }
    }
}

fn string(v: Option<&Value>, at: &str, out: &mut Vec<String>) {
    if let Some(v) = v {
        if !v.is_string() {
            out.push(format!("{at}: not a string"));
        }
    }
}

/// draft-07 "integer": a number with no fractional part.
fn integer(v: Option<&Value>, at: &str, min: f64, max: f64, out: &mut Vec<String>) {
    let Some(v) = v else { return };
    let n = match v {
        Value::Number(n) => n
            .as_i64()
            .map(|i| i as f64)
            .or_else(|| n.as_u64().map(|u| u as f64))
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0)),
        _ => None,
    };
    match n {
        Some(n) if n >= min && n <= max => {}
        Some(n) => out.push(format!("{at}: {n} out of [{min}, {max}]")),
        None => out.push(format!("{at}: not an integer")),
    }
}

const U32: (f64, f64) = (0.0, 4_294_967_295.0);
const I64: (f64, f64) = (-9_223_372_036_854_775_808.0, 9_223_372_036_854_775_807.0);

fn array<'a>(v: Option<&'a Value>, at: &str, out: &mut Vec<String>) -> &'a [Value] {
    match v {
        None => &[],
        Some(Value::Array(a)) => a,
        Some(_) => {
            out.push(format!("{at}: not an array"));
            &[]
        }
    }
}

fn strings(v: Option<&Value>, at: &str, out: &mut Vec<String>) {
    for (i, s) in array(v, at, out).iter().enumerate() {
        string(Some(s), &format!("{at}[{i}]"), out);
    }
}

/// `mapStringString`: every property whose name has at least one character is a string.
fn map_string_string(v: Option<&Value>, at: &str, out: &mut Vec<String>) {
    let Some(v) = v else { return };
    if let Some(m) = obj(v, at, out) {
        for (k, val) in m {
            if !k.is_empty() && !val.is_string() {
                out.push(format!("{at}.{k}: not a string"));
            }
        }
    }
}

fn root(doc: &Value, out: &mut Vec<String>) {
    let Some(m) = obj(doc, "$", out) else { return };
    required(m, "$", &["cdiVersion", "kind", "devices"], out);
    string(m.get("cdiVersion"), "$.cdiVersion", out);
    string(m.get("kind"), "$.kind", out);
    map_string_string(m.get("annotations"), "$.annotations", out);
    for (i, d) in array(m.get("devices"), "$.devices", out).iter().enumerate() {
        let at = format!("$.devices[{i}]");
        let Some(dm) = obj(d, &at, out) else { continue };
        required(dm, &at, &["name", "containerEdits"], out);
        string(dm.get("name"), &format!("{at}.name"), out);
        map_string_string(dm.get("annotations"), &format!("{at}.annotations"), out);
        if let Some(e) = dm.get("containerEdits") {
            edits(e, &format!("{at}.containerEdits"), out);
        }
    }
    if let Some(e) = m.get("containerEdits") {
        edits(e, "$.containerEdits", out);
    }
}

fn edits(v: &Value, at: &str, out: &mut Vec<String>) {
    let Some(m) = obj(v, at, out) else { return };
    array(m.get("env"), &format!("{at}.env"), out);
    for (i, n) in array(m.get("deviceNodes"), &format!("{at}.deviceNodes"), out)
        .iter()
        .enumerate()
    {
        let nat = format!("{at}.deviceNodes[{i}]");
        let Some(nm) = obj(n, &nat, out) else {
            continue;
        };
        required(nm, &nat, &["path"], out);
        for k in ["path", "hostPath", "permissions", "type"] {
            string(nm.get(k), &format!("{nat}.{k}"), out);
        }
        for k in ["major", "minor"] {
            integer(nm.get(k), &format!("{nat}.{k}"), I64.0, I64.1, out);
        }
        for k in ["uid", "gid"] {
            integer(nm.get(k), &format!("{nat}.{k}"), U32.0, U32.1, out);
        }
    }
    for (i, n) in array(m.get("netDevices"), &format!("{at}.netDevices"), out)
        .iter()
        .enumerate()
    {
        let nat = format!("{at}.netDevices[{i}]");
        let Some(nm) = obj(n, &nat, out) else {
            continue;
        };
        required(nm, &nat, &["hostInterfaceName", "name"], out);
        string(nm.get("hostInterfaceName"), &nat, out);
        string(nm.get("name"), &nat, out);
    }
    for (i, n) in array(m.get("mounts"), &format!("{at}.mounts"), out)
        .iter()
        .enumerate()
    {
        let nat = format!("{at}.mounts[{i}]");
        let Some(nm) = obj(n, &nat, out) else {
            continue;
        };
        required(nm, &nat, &["hostPath", "containerPath"], out);
        for k in ["hostPath", "containerPath", "type"] {
            string(nm.get(k), &format!("{nat}.{k}"), out);
        }
        strings(nm.get("options"), &format!("{nat}.options"), out);
    }
    for (i, n) in array(m.get("hooks"), &format!("{at}.hooks"), out)
        .iter()
        .enumerate()
    {
        let nat = format!("{at}.hooks[{i}]");
        let Some(nm) = obj(n, &nat, out) else {
            continue;
        };
        required(nm, &nat, &["hookName", "path"], out);
        string(nm.get("hookName"), &format!("{nat}.hookName"), out);
        string(nm.get("path"), &format!("{nat}.path"), out);
        strings(nm.get("args"), &format!("{nat}.args"), out);
        strings(nm.get("env"), &format!("{nat}.env"), out);
        integer(
            nm.get("timeout"),
            &format!("{nat}.timeout"),
            U32.0,
            U32.1,
            out,
        );
    }
    if let Some(r) = m.get("intelRdt") {
        let rat = format!("{at}.intelRdt");
        if let Some(rm) = obj(r, &rat, out) {
            for k in ["closID", "l3CacheSchema", "memBwSchema"] {
                string(rm.get(k), &format!("{rat}.{k}"), out);
            }
            strings(rm.get("schemata"), &format!("{rat}.schemata"), out);
            if let Some(b) = rm.get("enableMonitoring") {
                if !b.is_boolean() {
                    out.push(format!("{rat}.enableMonitoring: not a boolean"));
                }
            }
        }
    }
    for (i, g) in array(
        m.get("additionalGids"),
        &format!("{at}.additionalGids"),
        out,
    )
    .iter()
    .enumerate()
    {
        integer(
            Some(g),
            &format!("{at}.additionalGids[{i}]"),
            U32.0,
            U32.1,
            out,
        );
    }
}

//! The CDI specification's name rules: kind (`vendor/class`), device names, annotation keys.
//!
//! From SPEC.md ("Kind", "CDI Devices") and the reference parser (pkg/parser/parser.go,
//! internal/validation/k8s of cncf-tags/container-device-interface):
//! - vendor and class: start with a letter, end with a letter or digit, `A-Za-z0-9_.-` in
//!   between; SPEC.md also bounds the class (its "name segment") to 63 characters and the
//!   vendor (a DNS subdomain) to 253;
//! - device name: start and end with a letter or digit, `A-Za-z0-9_.:-` in between (a
//!   leading digit needs cdiVersion 0.5.0);
//! - annotation keys: Kubernetes qualified names (an optional DNS-1123 subdomain prefix and
//!   `/`, then 1-63 of `A-Za-z0-9_.-` starting and ending alphanumeric), compared lower-case.

/// Longest class ("name segment of the kind", SPEC.md).
pub const MAX_CLASS_LEN: usize = 63;
/// Longest vendor (a DNS subdomain, SPEC.md).
pub const MAX_VENDOR_LEN: usize = 253;
/// Longest name part of an annotation key (Kubernetes qualified name).
pub const MAX_QUALIFIED_NAME_LEN: usize = 63;

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Vendor or class of a kind (parser.go `validateVendorOrClassName`).
fn vendor_or_class(what: &str, name: &str, max: usize) -> Result<(), String> {
    let b = name.as_bytes();
    let Some(&first) = b.first() else {
        return Err(format!("empty {what}"));
    };
    if !first.is_ascii_alphabetic() {
        return Err(format!("{what} {name:?} must start with a letter"));
    }
    if let Some(c) = b
        .iter()
        .skip(1)
        .take(b.len().saturating_sub(2))
        .find(|&&c| !(alnum(c) || matches!(c, b'_' | b'-' | b'.')))
    {
        return Err(format!(
            "{what} {name:?} has the character {:?} (allowed: letters, digits, '_', '-', '.')",
            *c as char
        ));
    }
    if b.len() > 1 && !alnum(b[b.len() - 1]) {
        return Err(format!("{what} {name:?} must end with a letter or digit"));
    }
    if b.len() > max {
        return Err(format!(
            "{what} {name:?} is {} characters (at most {max})",
            b.len()
        ));
    }
    Ok(())
}

pub fn validate_vendor(vendor: &str) -> Result<(), String> {
    vendor_or_class("vendor", vendor, MAX_VENDOR_LEN)
}

pub fn validate_class(class: &str) -> Result<(), String> {
    vendor_or_class("class", class, MAX_CLASS_LEN)
}

/// Split and check a kind: exactly one `/` with a valid vendor before and class after.
pub fn parse_kind(kind: &str) -> Result<(&str, &str), String> {
    let Some((vendor, class)) = kind.split_once('/') else {
        return Err(format!("kind {kind:?} is not vendor/class"));
    };
    if vendor.is_empty() || class.is_empty() {
        return Err(format!("kind {kind:?} is not vendor/class"));
    }
    validate_vendor(vendor).map_err(|e| format!("kind {kind:?}: {e}"))?;
    validate_class(class).map_err(|e| format!("kind {kind:?}: {e}"))?;
    Ok((vendor, class))
}

/// A device name (parser.go `ValidateDeviceName`).
pub fn validate_device_name(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    let Some(&first) = b.first() else {
        return Err("empty device name".into());
    };
    if !alnum(first) {
        return Err(format!(
            "device name {name:?} must start with a letter or digit"
        ));
    }
    if let Some(c) = b
        .iter()
        .skip(1)
        .take(b.len().saturating_sub(2))
        .find(|&&c| !(alnum(c) || matches!(c, b'_' | b'-' | b'.' | b':')))
    {
        return Err(format!(
            "device name {name:?} has the character {:?} (allowed: letters, digits, '_', '-', '.', ':')",
            *c as char
        ));
    }
    if b.len() > 1 && !alnum(b[b.len() - 1]) {
        return Err(format!(
            "device name {name:?} must end with a letter or digit"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain: lower-case labels of `a-z0-9-` starting and ending alphanumeric,
/// joined by dots, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// An annotation key (k8s `IsQualifiedName` on the lower-cased key).
pub fn validate_annotation_key(key: &str) -> Result<(), String> {
    let lower = key.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if !is_dns1123_subdomain(prefix) {
                return Err(format!(
                    "annotation key {key:?}: prefix {prefix:?} is not a DNS-1123 subdomain"
                ));
            }
            *name
        }
        _ => return Err(format!("annotation key {key:?} has more than one '/'")),
    };
    let b = name.as_bytes();
    if b.is_empty() || b.len() > MAX_QUALIFIED_NAME_LEN {
        return Err(format!(
            "annotation key {key:?}: the name part must be 1-{MAX_QUALIFIED_NAME_LEN} characters"
        ));
    }
    let ok = alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        return Err(format!(
            "annotation key {key:?}: the name part must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// The spec file name CDI's `GenerateSpecName` gives a kind: `vendor-class` (the caller adds
/// `.json`).
pub fn spec_file_stem(vendor: &str, class: &str) -> String {
    format!("{vendor}-{class}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_the_spec_examples() {
        // SPEC.md: valid `vendor.com/foo`, `foo.bar.baz/foo-bar123.B_az`;
        // invalid `foo`, `vendor.com/foo/`, `vendor.com/foo/bar`
        assert_eq!(parse_kind("vendor.com/foo"), Ok(("vendor.com", "foo")));
        assert!(parse_kind("foo.bar.baz/foo-bar123.B_az").is_ok());
        for bad in [
            "foo",
            "vendor.com/foo/",
            "vendor.com/foo/bar",
            "/foo",
            "vendor.com/",
            "1vendor.com/foo",
            "vendor.com/-foo",
            "vendor.com/foo-",
            "ven dor.com/foo",
        ] {
            assert!(parse_kind(bad).is_err(), "{bad}");
        }
        let long = format!("vendor.com/{}", "a".repeat(64));
        assert!(parse_kind(&long).unwrap_err().contains("64 characters"));
        assert!(parse_kind(&format!("vendor.com/{}", "a".repeat(63))).is_ok());
    }

    #[test]
    fn device_names() {
        for good in [
            "0",
            "gpu0",
            "0000:01:00.0",
            "10000:e1:00.0",
            "vfio12",
            "a_b-c.d:e",
            "Z",
        ] {
            assert_eq!(validate_device_name(good), Ok(()), "{good}");
        }
        for bad in ["", ":0", "0:", "gpu/0", "gpu 0", "gpu=0", "-a", "a-", "é"] {
            assert!(validate_device_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn annotation_keys() {
        for good in [
            "vmtune.io/bdf",
            "cdi.k8s.io/vfio17",
            "bdf",
            "Vendor.COM/Upper_Case.ok",
            "a",
        ] {
            assert_eq!(validate_annotation_key(good), Ok(()), "{good}");
        }
        let long = format!("vmtune.io/{}", "a".repeat(64));
        for bad in [
            "",
            "/bdf",
            "vmtune.io/",
            "vmtune.io/a/b",
            "-vmtune.io/bdf",
            "vmtune..io/bdf",
            "vmtune.io/b:df",
            "vmtune.io/_bdf",
            long.as_str(),
        ] {
            assert!(validate_annotation_key(bad).is_err(), "{bad}");
        }
    }
}

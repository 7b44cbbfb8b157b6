//! libvirt's value syntax, shared by the XML splicer and the domain reader: cpusets
//! (`1-4,^3,6`) and scaled integers (`16 GiB`).

use topo::CpuSet;

use crate::EmitError;

/// Parse a libvirt cpuset (`1-4,^3,6`): comma-separated CPUs and ranges, `^N` removes `N`
/// from what came before (libvirt's `virBitmapParse`).
pub fn parse_libvirt_cpuset(s: &str) -> Result<CpuSet, EmitError> {
    let bad = |why: &str| EmitError::Invalid(format!("invalid cpuset {s:?}: {why}"));
    let num = |t: &str| -> Result<u32, EmitError> {
        let n: u32 = t
            .trim()
            .parse()
            .map_err(|_| bad(&format!("{:?} is not a CPU number", t.trim())))?;
        if n > topo::cpuset::MAX_CPU {
            return Err(bad(&format!("CPU {n} is too large")));
        }
        Ok(n)
    };
    let mut set = CpuSet::new();
    if s.trim().is_empty() {
        return Err(bad("empty"));
    }
    for part in s.split(',') {
        let part = part.trim();
        if let Some(neg) = part.strip_prefix('^') {
            set.remove(num(neg)?);
        } else if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(bad(&format!("range {a}-{b} goes backwards")));
            }
            for c in a..=b {
                set.insert(c);
            }
        } else {
            set.insert(num(part)?);
        }
    }
    Ok(set)
}

/// Bytes in `value` `unit` (libvirt scaled integers: `K`/`KiB` = 1024, `KB` = 1000, …;
/// no unit = `default_unit`).
pub(crate) fn scaled(
    value: &str,
    unit: Option<&str>,
    default_mult: u64,
    what: &str,
) -> Result<u64, EmitError> {
    let v: u64 = value
        .trim()
        .parse()
        .map_err(|_| EmitError::Invalid(format!("{what}: {:?} is not a number", value.trim())))?;
    let mult: u64 = match unit.map(|u| u.trim()) {
        None | Some("") => default_mult,
        Some(u) => match u.to_ascii_lowercase().as_str() {
            "b" | "bytes" => 1,
            "k" | "kib" => 1 << 10,
            "kb" => 1000,
            "m" | "mib" => 1 << 20,
            "mb" => 1_000_000,
            "g" | "gib" => 1 << 30,
            "gb" => 1_000_000_000,
            "t" | "tib" => 1 << 40,
            "tb" => 1_000_000_000_000,
            "p" | "pib" => 1 << 50,
            "pb" => 1_000_000_000_000_000,
            "e" | "eib" => 1 << 60,
            "eb" => 1_000_000_000_000_000_000,
            _ => return Err(EmitError::Invalid(format!("{what}: unknown unit {u:?}"))),
        },
    };
    v.checked_mul(mult)
        .ok_or_else(|| EmitError::Invalid(format!("{what}: {v} {} overflows", unit.unwrap_or(""))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuset_syntax() {
        assert_eq!(
            parse_libvirt_cpuset("1-4,^3,6").unwrap().to_vec(),
            vec![1, 2, 4, 6]
        );
        assert_eq!(
            parse_libvirt_cpuset(" 0 , 2-3 ").unwrap().to_vec(),
            vec![0, 2, 3]
        );
        assert!(parse_libvirt_cpuset("").is_err());
        assert!(parse_libvirt_cpuset("3-1").is_err());
        assert!(parse_libvirt_cpuset("a").is_err());
        assert!(parse_libvirt_cpuset("99999999").is_err());
    }

    #[test]
    fn scaled_units() {
        assert_eq!(scaled("16", Some("GiB"), 1024, "x").unwrap(), 16 << 30);
        assert_eq!(scaled("16", None, 1024, "x").unwrap(), 16 << 10);
        assert_eq!(scaled("1", Some("KB"), 1024, "x").unwrap(), 1000);
        assert!(scaled("1", Some("furlongs"), 1024, "x").is_err());
        assert!(scaled(&u64::MAX.to_string(), Some("G"), 1024, "x").is_err());
    }
}

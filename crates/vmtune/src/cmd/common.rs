//! Argument helpers shared by subcommands: host input and sizes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use topo::Host;

/// `--topology PATH`: hwloc XML, sysfs snapshot directory or tarball, or `builtin` (the
/// built-in example host). Without it, the live host.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HostArgs {
    /// Host to read: hwloc XML file, sysfs snapshot directory or .tar/.tar.gz/.tar.bz2, or
    /// `builtin` for the built-in example host. Default: the live host.
    #[arg(long, value_name = "PATH")]
    pub topology: Option<PathBuf>,
}

impl HostArgs {
    pub fn load(&self) -> Result<Host> {
        match &self.topology {
            Some(p) if is_builtin(p) => Ok(topo::builtin::default_host()),
            Some(p) => Ok(topo::load_path(p)?),
            None => topo::load(None)
                .context("reading the live host (use --topology builtin for the example host)"),
        }
    }
}

fn is_builtin(p: &std::path::Path) -> bool {
    let s = p.to_string_lossy();
    s == "builtin" || s == format!("builtin:{}", topo::builtin::DEFAULT_NAME)
}

/// Parse a size: `512M`, `64G`, `1T`, `4096K`, `1.5G`, or plain bytes. Binary units
/// (K = 1024). A trailing `B`/`iB` is accepted (`64GiB`, `512MB`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1u64 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        Some('t') => (&lower[..lower.len() - 1], 1 << 40),
        _ => (lower, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid size {t:?} (examples: 512M, 64G, 1T)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("invalid size {t:?}: must be a non-negative number"));
    }
    let bytes = v * mult as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size {t:?} is too large"));
    }
    Ok(bytes.round() as u64)
}

/// Print a value as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("64G").unwrap(), 64 << 30);
        assert_eq!(parse_size("1T").unwrap(), 1 << 40);
        assert_eq!(parse_size("64GiB").unwrap(), 64 << 30);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("").is_err());
    }
}

//! Argument helpers shared by subcommands: host input and sizes.

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// Parse a size: `512M`, `64G`, `1T`, `4096K`, `1.5G`, `4096B` (bytes). Binary units
/// (K = 1024); `KiB`/`KB` spellings are accepted (`64GiB`, `512MB`). A number without a unit
/// is refused (except 0): QEMU users mean MiB, the kernel means bytes, so vmtune asks.
pub fn parse_size(s: &str) -> Result<u64, String> {
    const UNITS: &[(&str, u64)] = &[
        ("kib", 1 << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("tib", 1 << 40),
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("tb", 1 << 40),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
        ("t", 1 << 40),
        ("b", 1),
    ];
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let unit = UNITS.iter().find(|(u, _)| lower.ends_with(u));
    let num = unit.map_or(lower.as_str(), |(u, _)| &lower[..lower.len() - u.len()]);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid size {t:?} (examples: 512M, 64G, 1T)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("invalid size {t:?}: must be a non-negative number"));
    }
    let Some(&(_, mult)) = unit else {
        if v == 0.0 {
            return Ok(0);
        }
        return Err(format!(
            "size {t:?} has no unit: add a unit (e.g. {}M); K, M, G, T are 1024-based, B is bytes",
            num.trim()
        ));
    };
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

/// Start the journal of a long-running command that journals what it may change as it goes
/// (`irq balance`, `irq boost`): its directory made, its own lock taken (refused while another
/// process holds it), a fresh journal written. Hold the lock until the journal is restored.
pub fn start_journal(
    path: &Path,
    qemu_pid: Option<i32>,
) -> Result<(apply::journal::Lock, apply::journal::Journal)> {
    use apply::journal::{self, Header, Journal, Lock};
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // the journal's own lock, not the directory's: `apply` and the hook go on meanwhile
    let lock = Lock::acquire(&journal::own_lock_path(path), Duration::from_secs(2))
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let header = Header {
        journal: "vmtune".into(),
        version: 1,
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        apply_pid: std::process::id(),
        qemu_pid,
    };
    let journal =
        Journal::create(path, &header).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((lock, journal))
}

/// The domain's XML: a file, or a defined domain's persistent definition; `true` when it
/// came from libvirt.
pub fn read_domain(arg: &str, virsh: &apply::libvirt::Virsh) -> Result<(String, bool)> {
    let p = Path::new(arg);
    if p.is_file() {
        let xml = std::fs::read_to_string(p)
            .with_context(|| format!("domain {}: cannot read", p.display()))?;
        return Ok((xml, false));
    }
    if arg.contains('/') {
        anyhow::bail!("domain {arg}: no such file");
    }
    let xml = virsh
        .dumpxml(arg, true)
        .map_err(|e| anyhow::anyhow!("domain {arg}: not a file, and libvirt says: {e}"))?;
    Ok((xml, true))
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
        assert_eq!(parse_size("4096B").unwrap(), 4096);
        assert_eq!(parse_size("512MB").unwrap(), 512 << 20);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("0").unwrap(), 0);
        for bare in ["4096", "1.5", " 16 "] {
            let e = parse_size(bare).unwrap_err();
            assert!(e.contains("add a unit (e.g. "), "{e}");
            assert!(e.contains(&format!("{}M)", bare.trim())), "{e}");
        }
        assert!(parse_size("inf").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("").is_err());
    }
}

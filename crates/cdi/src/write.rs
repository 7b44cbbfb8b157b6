//! Writing a spec where runtimes read it, atomically: a temporary file in the same
//! directory, fsync'd, then renamed over the destination, as the CDI library's own writer
//! does. The temporary name ends in `.tmp`, which CDI caches do not load (they read `.json`
//! and `.yaml`), so a runtime that scans the directory meanwhile sees the old spec or the new
//! one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::names;
use crate::CdiError;

/// Where CDI looks for generated specs (`DefaultDynamicDir`; `/etc/cdi` is for static ones).
pub const DEFAULT_DIR: &str = "/var/run/cdi";

/// `dir/vendor-class.json`, the name CDI's `GenerateSpecName` gives a kind's spec.
pub fn default_path(dir: &Path, kind: &str) -> Result<PathBuf, CdiError> {
    let (vendor, class) = names::parse_kind(kind).map_err(CdiError::Kind)?;
    Ok(dir.join(format!("{}.json", names::spec_file_stem(vendor, class))))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CdiError + '_ {
    move |source| CdiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What [`write_atomic`] does when the spec's directory does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDir {
    /// Create it (0755): the default directory, or one the user named as a directory.
    Create,
    /// Fail with [`CdiError::NoDir`]: a file path whose directory is missing is more likely a
    /// typo than a wish for a new tree.
    Refuse,
}

/// The directory `path` goes in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replace `path` with `bytes` atomically (mode 0644); a missing directory is created (0755)
/// or refused as `missing` says. On any error the old file, if any, is left as it was and no
/// temporary remains.
pub fn write_atomic(path: &Path, bytes: &[u8], missing: MissingDir) -> Result<(), CdiError> {
    let dir = parent_dir(path);
    if !dir.is_dir() {
        if missing == MissingDir::Refuse || dir.exists() {
            return Err(CdiError::NoDir(dir));
        }
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        set_mode(&dir, 0o755).map_err(io(&dir))?;
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".vmtune-cdi-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(io(&dir))?;
    tmp.write_all(bytes).map_err(io(tmp.path()))?;
    set_mode(tmp.path(), 0o644).map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| CdiError::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    // the rename is durable once the directory is synced (best effort: some filesystems
    // refuse fsync on a directory)
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_atomically_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = default_path(&d.path().join("run/cdi"), "vmtune.io/vfio").unwrap();
        assert!(p.ends_with("run/cdi/vmtune.io-vfio.json"));
        write_atomic(&p, b"{\"a\":1}\n", MissingDir::Create).unwrap();
        write_atomic(&p, b"{\"a\":2}\n", MissingDir::Refuse).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":2}\n");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let names: Vec<String> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["vmtune.io-vfio.json".to_string()]);
    }

    #[test]
    fn a_missing_directory_is_refused_unless_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("no/such/spec.json");
        let e = write_atomic(&p, b"{}", MissingDir::Refuse).unwrap_err();
        assert!(matches!(&e, CdiError::NoDir(dir) if dir == &d.path().join("no/such")));
        let msg = e.to_string();
        assert!(
            msg.contains("no/such") && msg.contains("does not exist"),
            "{msg}"
        );
        assert!(
            !d.path().join("no").exists(),
            "the refusal created a directory"
        );
        // a file where the directory should be is not a directory, created or not
        std::fs::write(d.path().join("file"), "x").unwrap();
        let e = write_atomic(&d.path().join("file/spec.json"), b"{}", MissingDir::Create)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
        write_atomic(&p, b"{}", MissingDir::Create).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        // the destination is a non-empty directory: the rename fails
        let p = d.path().join("spec.json");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("keep"), "x").unwrap();
        let e = write_atomic(&p, b"{}", MissingDir::Create)
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.json"), "{e}");
        assert!(p.join("keep").exists());
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary left behind");
        assert!(default_path(d.path(), "novendor").is_err());
    }
}

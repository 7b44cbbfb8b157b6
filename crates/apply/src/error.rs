//! Errors of the apply crate. Each names the file, thread or thing and the problem.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A value read from the host did not have the expected shape.
    #[error("{}: {msg}", path.display())]
    Parse { path: PathBuf, msg: String },
    /// The plan cannot be applied to this host; nothing was changed.
    #[error("plan refused: {0}")]
    Refused(String),
    /// Talking to QEMU (QMP or /proc) failed.
    #[error("qemu: {0}")]
    Qemu(String),
    /// The journal is missing, damaged or already in use.
    #[error("journal {}: {msg}", path.display())]
    Journal { path: PathBuf, msg: String },
    /// A system call on a thread failed.
    #[error("thread {tid}: {msg}")]
    Thread { tid: i32, msg: String },
    /// Something else, one sentence.
    #[error("{0}")]
    Other(String),
}

impl ApplyError {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        ApplyError::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub fn parse(path: impl AsRef<Path>, msg: impl Into<String>) -> Self {
        ApplyError::Parse {
            path: path.as_ref().to_path_buf(),
            msg: msg.into(),
        }
    }

    pub fn journal(path: impl AsRef<Path>, msg: impl Into<String>) -> Self {
        ApplyError::Journal {
            path: path.as_ref().to_path_buf(),
            msg: msg.into(),
        }
    }

    /// The OS error number behind an I/O error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ApplyError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

pub type Result<T, E = ApplyError> = std::result::Result<T, E>;

/// Read a small sysfs/procfs file, trimmed.
pub fn read_trim(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| ApplyError::io(path, e))
}

/// Write a value to a sysfs/procfs/cgroupfs file in one `write(2)` (these files take one
/// value per write).
pub fn write_value(path: &Path, value: &str) -> Result<()> {
    use std::io::Write;
    // O_TRUNC as `echo >` does: ignored by sysfs/procfs/cgroupfs, right for plain files
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| ApplyError::io(path, e))?;
    f.write_all(value.as_bytes())
        .map_err(|e| ApplyError::io(path, e))
}

/// The few errno numbers we look at (Linux values; avoids a libc dependency).
pub(crate) mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EIO: i32 = 5;
    pub const EBUSY: i32 = 16;
    pub const EINVAL: i32 = 22;
}

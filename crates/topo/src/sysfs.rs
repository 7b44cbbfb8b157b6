//! Live sysfs/procfs loader under a configurable root, and sysfs snapshot archives.
//! PLACEHOLDER: being written.

use std::path::Path;

use crate::error::TopoError;
use crate::model::Host;

/// Read the host under `root` (`/` for the live host).
pub fn load_root(root: &Path) -> Result<Host, TopoError> {
    Err(TopoError::format(root, "sysfs loader not implemented yet"))
}

/// Read a `.tar`, `.tar.gz` or `.tar.bz2` sysfs snapshot.
pub fn load_archive(path: &Path) -> Result<Host, TopoError> {
    Err(TopoError::format(path, "sysfs archive loader not implemented yet"))
}

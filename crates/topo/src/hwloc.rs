//! hwloc XML loader (v1, v2, v3). PLACEHOLDER: being written.

use std::path::Path;

use crate::error::TopoError;
use crate::model::Host;

/// Load an hwloc XML file.
pub fn load_file(path: &Path) -> Result<Host, TopoError> {
    let text = std::fs::read_to_string(path).map_err(|e| TopoError::io(path, e))?;
    parse_str(&text, path)
}

/// Parse hwloc XML text; `path` names the source in errors.
pub fn parse_str(_text: &str, path: &Path) -> Result<Host, TopoError> {
    Err(TopoError::format(path, "hwloc XML loader not implemented yet"))
}

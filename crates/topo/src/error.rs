//! Errors of the topology loaders. Every message names the file (or source) and the problem
//! on one line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The XML is not well-formed (truncated, bad syntax).
    #[error("{}: malformed XML: {msg}", path.display())]
    Xml { path: PathBuf, msg: String },
    /// The input is well-formed but not what was expected (not hwloc XML, missing attribute,
    /// bad number, junk in an archive, missing sysfs file).
    #[error("{}: {msg}", path.display())]
    Format { path: PathBuf, msg: String },
    /// The data read is inconsistent (a PU in two cores, no PUs at all).
    #[error("{source_name}: {msg}")]
    Invalid { source_name: String, msg: String },
}

impl TopoError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TopoError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        TopoError::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

//! Errors of the bench crate: each names the file or thing and the problem in one line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Format { path: PathBuf, msg: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("interrupted by signal; state restored")]
    Interrupted,
}

impl BenchError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        BenchError::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }
    pub fn sys(what: impl Into<String>) -> Self {
        BenchError::Sys {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

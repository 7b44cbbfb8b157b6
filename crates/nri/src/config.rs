//! The agent's configuration file (TOML): the same settings as the command-line flags, which
//! win over it. Unknown keys are an error, so a misspelt key is said rather than ignored.
//!
//! ```toml
//! socket = "/var/run/nri/nri.sock"
//! name = "vmtune"
//! index = "90"
//! topology = "/etc/vmtune/node.xml"      # default: the live host
//! reserved_cpus = "0-1,64-65"            # the kubelet's --reserved-cpus; default: the planner's
//! strict = false
//! kata_runtime_prefix = "kata"
//! kata_default_vcpus = 1
//! kata_default_memory = "2G"
//! cdi_dirs = ["/etc/cdi", "/var/run/cdi"]
//! state_dir = "/var/run/vmtune-nri"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub socket: Option<PathBuf>,
    pub name: Option<String>,
    pub index: Option<String>,
    pub topology: Option<PathBuf>,
    pub reserved_cpus: Option<String>,
    pub strict: Option<bool>,
    pub kata_runtime_prefix: Option<String>,
    pub kata_default_vcpus: Option<u32>,
    /// A size with a unit (`2G`, `2048M`).
    pub kata_default_memory: Option<String>,
    pub cdi_dirs: Option<Vec<PathBuf>>,
    pub state_dir: Option<PathBuf>,
}

impl FileConfig {
    pub fn parse(text: &str) -> Result<FileConfig, String> {
        toml::from_str(text).map_err(|e| e.message().to_string())
    }

    pub fn load(path: &Path) -> Result<FileConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        FileConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_and_a_misspelt_one_is_named() {
        let c = FileConfig::parse("index = \"90\"\nstrict = true\ncdi_dirs = [\"/x\"]\n").unwrap();
        assert_eq!(c.index.as_deref(), Some("90"));
        assert_eq!(c.strict, Some(true));
        assert_eq!(c.cdi_dirs, Some(vec![PathBuf::from("/x")]));
        let e = FileConfig::parse("stirct = true\n").unwrap_err();
        assert!(e.contains("stirct"), "{e}");
        assert!(FileConfig::parse("index = 90\n").is_err());
    }
}

//! `kubectl describe pod` lines: `Name:`, `Start Time:` (pod accepted) and a container's
//! `Started:` (RFC 1123 with numeric zone).

use crate::parse::time::{parse_rfc1123, Nanos};

#[derive(Debug, Clone, PartialEq)]
pub enum KubectlLine {
    /// `Name:  cdi-vfio-gpu0-test-160` (the first, unindented one is the pod).
    Name(String),
    /// `Node:  dal03-sgpu-160/10.0.0.160`: the node the pod runs on (its name, without the
    /// address).
    Node(String),
    /// Pod `Start Time:`.
    StartTime(Nanos),
    /// A container state's `Started:`.
    Started(Nanos),
    /// A container state's `Finished:`.
    Finished(Nanos),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubectlError {
    #[error("bad time {0:?}")]
    BadTime(String),
}

/// Parse one line. `Ok(None)`: not a line we use.
pub fn parse_line(line: &str) -> Result<Option<KubectlLine>, KubectlError> {
    let indented = line.starts_with(' ') || line.starts_with('\t');
    let l = line.trim();
    let Some((key, value)) = l.split_once(':') else {
        return Ok(None);
    };
    let value = value.trim();
    let time = || parse_rfc1123(value).ok_or_else(|| KubectlError::BadTime(value.to_string()));
    match key {
        "Start Time" => Ok(Some(KubectlLine::StartTime(time()?))),
        "Started" if value.contains(',') || value.contains(' ') => {
            Ok(Some(KubectlLine::Started(time()?)))
        }
        "Finished" if value.contains(' ') => Ok(Some(KubectlLine::Finished(time()?))),
        "Name" if !indented && !value.is_empty() => Ok(Some(KubectlLine::Name(value.to_string()))),
        "Node" if !indented => {
            // `<none>` while the pod is not scheduled
            let name = value.split('/').next().unwrap_or("").trim();
            Ok((!name.is_empty() && name != "<none>").then(|| KubectlLine::Node(name.to_string())))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines() {
        let a = parse_line("Start Time:          Mon, 24 Nov 2025 21:21:09 +0000").unwrap();
        let b = parse_line("      Started:      Mon, 24 Nov 2025 21:24:12 +0000").unwrap();
        match (a, b) {
            (Some(KubectlLine::StartTime(a)), Some(KubectlLine::Started(b))) => {
                assert_eq!(b - a, 183_000_000_000)
            }
            x => panic!("{x:?}"),
        }
        assert!(parse_line("Start Time:   yesterday").is_err());
        assert_eq!(parse_line("Status: Running").unwrap(), None);
        assert_eq!(
            parse_line("Name:         cdi-vfio-gpu0-test-160").unwrap(),
            Some(KubectlLine::Name("cdi-vfio-gpu0-test-160".into()))
        );
        assert_eq!(
            parse_line("Node:             dal03-sgpu-160/10.0.0.160").unwrap(),
            Some(KubectlLine::Node("dal03-sgpu-160".into()))
        );
        assert_eq!(parse_line("Node:             <none>").unwrap(), None);
        assert_eq!(parse_line("    Node:  x").unwrap(), None);
    }
}

//! The filesystem a loader reads: a directory on disk (the live host at `/`, or an extracted
//! snapshot) or an in-memory tree read from a snapshot archive.
//!
//! All paths are relative to the snapshot root and use `/`. Symlinks are resolved by this
//! module, not by the OS: an absolute link target is re-rooted at the snapshot root and `..`
//! stops at the root, so no link inside a snapshot can reach a file outside it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::TopoError;

/// Largest file the loader reads (a /proc/interrupts of a 1,000-CPU host is a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Symlinks followed while resolving one path (Linux uses 40).
const MAX_LINK_HOPS: u32 = 40;

/// What a path names, without following a final symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of an in-memory tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(String),
}

/// An in-memory directory tree (a snapshot archive's contents). Keys are normalized
/// relative paths (`a/b/c`, no `.`/`..`, no empty components); `""` is the root.
#[derive(Debug, Default, Clone)]
pub struct MemTree {
    nodes: BTreeMap<String, Node>,
    children: HashMap<String, Vec<String>>,
}

impl MemTree {
    pub fn new() -> Self {
        let mut t = MemTree::default();
        t.nodes.insert(String::new(), Node::Dir);
        t
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// Insert `node` at the normalized path `path`, creating parent directories. Fails when a
    /// parent is a file or a symlink (an entry "below" a non-directory).
    pub fn insert(&mut self, path: &str, node: Node) -> Result<(), String> {
        if path.is_empty() {
            return match node {
                Node::Dir => Ok(()),
                _ => Err("an entry replaces the archive root".into()),
            };
        }
        let mut parent = String::new();
        for comp in path.split('/').take(path.split('/').count() - 1) {
            let here = join(&parent, comp);
            match self.nodes.get(&here) {
                Some(Node::Dir) => {}
                Some(_) => return Err(format!("{path}: a parent ({here}) is not a directory")),
                None => {
                    self.nodes.insert(here.clone(), Node::Dir);
                    self.children
                        .entry(parent.clone())
                        .or_default()
                        .push(comp.to_string());
                }
            }
            parent = here;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        match self.nodes.get(path) {
            // re-adding a directory keeps its children
            Some(Node::Dir) if node == Node::Dir => {}
            Some(Node::Dir) => {
                if self.children.get(path).is_some_and(|c| !c.is_empty()) {
                    return Err(format!("{path}: replaces a non-empty directory"));
                }
                self.nodes.insert(path.to_string(), node);
            }
            Some(_) => {
                self.nodes.insert(path.to_string(), node);
            }
            None => {
                self.nodes.insert(path.to_string(), node);
                self.children
                    .entry(parent)
                    .or_default()
                    .push(name.to_string());
            }
        }
        Ok(())
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Directories `d` (shallowest first) for which `d/sys` is a directory.
    pub fn dirs_containing_sys(&self, max_depth: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .nodes
            .iter()
            .filter(|(k, v)| **v == Node::Dir && (k.as_str() == "sys" || k.ends_with("/sys")))
            .map(|(k, _)| {
                k.strip_suffix("sys")
                    .unwrap_or("")
                    .trim_end_matches('/')
                    .to_string()
            })
            .filter(|d| depth(d) <= max_depth)
            .collect();
        out.sort_by_key(|d| (depth(d), d.clone()));
        out
    }
}

fn depth(p: &str) -> usize {
    if p.is_empty() {
        0
    } else {
        p.split('/').count()
    }
}

/// Join a normalized relative directory and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

enum Backend {
    /// A directory on disk; `live` when it is the real root `/`.
    Dir { root: PathBuf },
    /// An archive's tree; `prefix` is the snapshot root inside it (`""` or `topdir`).
    Mem {
        tree: MemTree,
        prefix: String,
        archive: PathBuf,
    },
}

/// A snapshot root (or the live `/`) with in-root symlink resolution.
pub struct Fs {
    backend: Backend,
    /// Resolved directories: relative path → resolved path (`None` = does not resolve).
    cache: RefCell<HashMap<String, Option<String>>>,
}

impl Fs {
    pub fn dir(root: &Path) -> Fs {
        Fs {
            backend: Backend::Dir {
                root: root.to_path_buf(),
            },
            cache: RefCell::default(),
        }
    }

    pub fn mem(tree: MemTree, prefix: String, archive: &Path) -> Fs {
        Fs {
            backend: Backend::Mem {
                tree,
                prefix,
                archive: archive.to_path_buf(),
            },
            cache: RefCell::default(),
        }
    }

    /// A one-line error about the file `rel` (named the way the user can find it).
    pub fn error(&self, rel: &str, msg: impl std::fmt::Display) -> TopoError {
        match &self.backend {
            Backend::Dir { root } => TopoError::format(root.join(rel), msg.to_string()),
            Backend::Mem {
                prefix, archive, ..
            } => TopoError::format(archive, format!("{}: {msg}", join(prefix, rel))),
        }
    }

    fn lstat(&self, rel: &str) -> Option<Kind> {
        match &self.backend {
            Backend::Dir { root } => {
                let md = std::fs::symlink_metadata(root.join(rel)).ok()?;
                let ft = md.file_type();
                Some(if ft.is_symlink() {
                    Kind::Symlink
                } else if ft.is_dir() {
                    Kind::Dir
                } else if ft.is_file() {
                    Kind::File
                } else {
                    Kind::Other
                })
            }
            Backend::Mem { tree, prefix, .. } => match tree.get(&join(prefix, rel))? {
                Node::File(_) => Some(Kind::File),
                Node::Dir => Some(Kind::Dir),
                Node::Symlink(_) => Some(Kind::Symlink),
            },
        }
    }

    fn raw_link(&self, rel: &str) -> Option<String> {
        match &self.backend {
            Backend::Dir { root } => std::fs::read_link(root.join(rel))
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            Backend::Mem { tree, prefix, .. } => match tree.get(&join(prefix, rel))? {
                Node::Symlink(t) => Some(t.clone()),
                _ => None,
            },
        }
    }

    /// Resolve `path` inside the root, following every symlink (also a final one). `None`
    /// when some component does not exist, or links loop.
    pub fn resolve(&self, path: &str) -> Option<String> {
        let path = path.trim_matches('/');
        match path.rsplit_once('/') {
            Some((parent, name)) if name != ".." && name != "." && !name.is_empty() => {
                let dir = self.resolve_dir(parent)?;
                self.walk(dir, name)
            }
            _ => self.walk(String::new(), path),
        }
    }

    fn resolve_dir(&self, dir: &str) -> Option<String> {
        if let Some(hit) = self.cache.borrow().get(dir) {
            return hit.clone();
        }
        let r = self.resolve(dir);
        self.cache.borrow_mut().insert(dir.to_string(), r.clone());
        r
    }

    /// Resolve the relative path `rest` starting at the resolved directory `start`.
    fn walk(&self, start: String, rest: &str) -> Option<String> {
        let mut out: Vec<String> = if start.is_empty() {
            Vec::new()
        } else {
            start.split('/').map(str::to_string).collect()
        };
        let mut pending: Vec<String> = rest.split('/').rev().map(str::to_string).collect();
        let mut hops = 0;
        while let Some(comp) = pending.pop() {
            match comp.as_str() {
                "" | "." => continue,
                ".." => {
                    out.pop();
                    continue;
                }
                _ => {}
            }
            out.push(comp);
            let here = out.join("/");
            match self.lstat(&here)? {
                Kind::Symlink => {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        return None;
                    }
                    let target = self.raw_link(&here)?;
                    out.pop();
                    if target.starts_with('/') {
                        out.clear();
                    }
                    pending.extend(target.split('/').rev().map(str::to_string));
                }
                Kind::File | Kind::Other if !pending.iter().all(|c| c.is_empty() || c == ".") => {
                    // a file used as a directory
                    return None;
                }
                _ => {}
            }
        }
        Some(out.join("/"))
    }

    /// Read a text file; `None` when it is missing or unreadable. Trailing NUL bytes (some
    /// snapshot tools and old kernels leave them after the newline) are dropped.
    pub fn read(&self, rel: &str) -> Option<String> {
        let mut b = self.read_bytes(rel).ok()?;
        while b.last() == Some(&0) {
            b.pop();
        }
        Some(String::from_utf8_lossy(&b).into_owned())
    }

    /// Read a binary file; `None` when it is missing or unreadable.
    pub fn read_raw(&self, rel: &str) -> Option<Vec<u8>> {
        self.read_bytes(rel).ok()
    }

    fn read_bytes(&self, rel: &str) -> Result<Vec<u8>, TopoError> {
        let Some(real) = self.resolve(rel) else {
            return Err(self.error(rel, "missing"));
        };
        match &self.backend {
            Backend::Dir { root } => {
                let p = root.join(&real);
                let f = std::fs::File::open(&p).map_err(|e| self.error(rel, e))?;
                let mut buf = Vec::new();
                f.take(MAX_FILE_BYTES + 1)
                    .read_to_end(&mut buf)
                    .map_err(|e| self.error(rel, e))?;
                if buf.len() as u64 > MAX_FILE_BYTES {
                    return Err(self.error(rel, format!("larger than {MAX_FILE_BYTES} bytes")));
                }
                Ok(buf)
            }
            Backend::Mem { tree, prefix, .. } => match tree.get(&join(prefix, &real)) {
                Some(Node::File(b)) => Ok(b.clone()),
                Some(_) => Err(self.error(rel, "not a regular file")),
                None => Err(self.error(rel, "missing")),
            },
        }
    }

    /// Whether `rel` exists (after resolving links).
    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel).is_some()
    }

    /// Whether `rel` resolves to a directory.
    pub fn is_dir(&self, rel: &str) -> bool {
        self.resolve(rel)
            .is_some_and(|r| r.is_empty() || self.lstat(&r) == Some(Kind::Dir))
    }

    /// Names in the directory `rel`, sorted; `None` when it is not a readable directory.
    pub fn list(&self, rel: &str) -> Option<Vec<String>> {
        let real = self.resolve(rel)?;
        let mut names: Vec<String> = match &self.backend {
            Backend::Dir { root } => std::fs::read_dir(root.join(&real))
                .ok()?
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect(),
            Backend::Mem { tree, prefix, .. } => {
                let key = join(prefix, &real);
                match tree.get(&key)? {
                    Node::Dir => tree.children.get(&key).cloned().unwrap_or_default(),
                    _ => return None,
                }
            }
        };
        names.sort();
        Some(names)
    }

    /// The last component of a symlink's target (`driver` → `vfio-pci`); the link is read,
    /// not followed, so it need not resolve inside the snapshot.
    pub fn link_name(&self, rel: &str) -> Option<String> {
        let dir = match rel.rsplit_once('/') {
            Some((d, _)) => self.resolve_dir(d)?,
            None => String::new(),
        };
        let name = rel.rsplit('/').next()?;
        let target = self.raw_link(&join(&dir, name))?;
        target
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    /// How the root is named in `Host::source`.
    pub fn source_name(&self) -> String {
        match &self.backend {
            Backend::Dir { root } if root == Path::new("/") => "live:/".into(),
            Backend::Dir { root } => format!("sysfs:{}", root.display()),
            Backend::Mem { archive, .. } => format!("sysfs:{}", archive.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> MemTree {
        let mut t = MemTree::new();
        t.insert(
            "top/sys/devices/pci0000:00/0000:00:01.0/vendor",
            Node::File(b"0x8086\n".to_vec()),
        )
        .unwrap();
        t.insert(
            "top/sys/bus/pci/devices/0000:00:01.0",
            Node::Symlink("../../../devices/pci0000:00/0000:00:01.0".into()),
        )
        .unwrap();
        t.insert("top/sys/abs", Node::Symlink("/sys/devices".into()))
            .unwrap();
        t.insert("top/sys/escape", Node::Symlink("../../../../../etc".into()))
            .unwrap();
        t.insert("top/sys/loop", Node::Symlink("loop".into()))
            .unwrap();
        t.insert("etc/passwd", Node::File(b"root".to_vec()))
            .unwrap();
        t
    }

    #[test]
    fn resolves_links_inside_the_root() {
        let fs = Fs::mem(tree(), "top".into(), Path::new("x.tar"));
        assert_eq!(
            fs.read("sys/bus/pci/devices/0000:00:01.0/vendor")
                .as_deref(),
            Some("0x8086\n")
        );
        assert_eq!(
            fs.resolve("sys/bus/pci/devices/0000:00:01.0").as_deref(),
            Some("sys/devices/pci0000:00/0000:00:01.0")
        );
        // absolute links are re-rooted at the snapshot root
        assert!(fs.is_dir("sys/abs/pci0000:00"));
        // `..` stops at the root: `etc` outside `top/` is unreachable
        assert_eq!(fs.resolve("sys/escape").as_deref(), None);
        assert_eq!(fs.read("../etc/passwd"), None);
        assert_eq!(fs.resolve("sys/loop"), None);
        assert_eq!(
            fs.list("sys").unwrap(),
            vec!["abs", "bus", "devices", "escape", "loop"]
        );
        assert_eq!(
            fs.link_name("sys/bus/pci/devices/0000:00:01.0").as_deref(),
            Some("0000:00:01.0")
        );
        let e = fs.read_bytes("sys/nothing").unwrap_err().to_string();
        assert_eq!(e, "x.tar: top/sys/nothing: missing");
    }

    #[test]
    fn tree_rejects_entries_below_files() {
        let mut t = MemTree::new();
        t.insert("a", Node::File(vec![])).unwrap();
        assert!(t.insert("a/b", Node::File(vec![])).is_err());
        assert_eq!(t.dirs_containing_sys(3), Vec::<String>::new());
        t.insert("x/y/sys/z", Node::Dir).unwrap();
        t.insert("w/sys", Node::Dir).unwrap();
        assert_eq!(
            t.dirs_containing_sys(3),
            vec!["w".to_string(), "x/y".to_string()]
        );
    }

    #[test]
    fn dir_backend_does_not_follow_links_out_of_the_root() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("sys")).unwrap();
        std::fs::write(d.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("../../secret", root.join("sys/rel")).unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), root.join("sys/abs")).unwrap();
        let fs = Fs::dir(&root);
        assert_eq!(fs.read("sys/rel"), None);
        assert_eq!(fs.read("sys/abs"), None);
        assert!(fs.is_dir("sys"));
    }
}

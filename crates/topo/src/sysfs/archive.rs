//! Snapshot archives (`.tar`, `.tar.gz`, `.tar.bz2`) read into memory.
//!
//! Nothing is written to disk, so an archive cannot plant files outside a directory: entries
//! become nodes of a [`MemTree`], symlinks are kept as text and resolved inside the snapshot
//! root by [`super::fs::Fs`]. Entries with `..` are rejected, device nodes and FIFOs are
//! skipped, and the decompressed stream, the entry count and each file are bounded.

use std::io::{self, Read};
use std::path::Path;

use crate::error::TopoError;

use super::fs::{MemTree, Node};

/// Most bytes read from the decompressed stream (headers, data and padding).
pub const MAX_UNPACKED_BYTES: u64 = 512 << 20;
/// Most entries in one archive (the shared snapshots have 1,700-4,500).
pub const MAX_ENTRIES: usize = 200_000;
/// Largest single file kept.
pub const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// Counts the bytes the tar reader pulls and fails past the limit (decompression bombs).
struct Limited<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // probe one byte: exactly at the limit and at EOF is fine
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(format!(
                    "archive expands beyond {} MiB",
                    MAX_UNPACKED_BYTES >> 20
                ))),
            };
        }
        let n = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got as u64;
        Ok(got)
    }
}

enum Compression {
    None,
    Gzip,
    Bzip2,
}

fn sniff(head: &[u8]) -> Result<Compression, String> {
    match head {
        [0x1f, 0x8b, ..] => Ok(Compression::Gzip),
        [b'B', b'Z', b'h', ..] => Ok(Compression::Bzip2),
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => {
            Err("xz-compressed archives are not supported (use .tar, .tar.gz or .tar.bz2)".into())
        }
        [0x28, 0xb5, 0x2f, 0xfd, ..] => {
            Err("zstd-compressed archives are not supported (use .tar, .tar.gz or .tar.bz2)".into())
        }
        [] => Err("empty file".into()),
        _ => Ok(Compression::None),
    }
}

/// One line from an error and its sources (`tar` nests the cause).
fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    printable(&s)
}

/// Keep an error message on one short printable line: tar quotes raw header bytes, which
/// in a junk file are binary.
fn printable(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(240)
        .collect();
    if s.chars().count() > 240 {
        out.push_str("...");
    }
    out
}

/// Whether a 512-byte block is a tar header: POSIX/GNU magic, or (v7 tar) a checksum that
/// matches.
fn is_tar_header(block: &[u8]) -> bool {
    if block.len() < 512 {
        return false;
    }
    if &block[257..262] == b"ustar" {
        return true;
    }
    let field = &block[148..156];
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0 && b != b' ')
        .map(|&b| b as char)
        .collect();
    let Ok(want) = u32::from_str_radix(text.trim(), 8) else {
        return false;
    };
    let sum: u32 = block[..512]
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                b' ' as u32
            } else {
                b as u32
            }
        })
        .sum();
    sum == want
}

/// Read an archive from `bytes` (`name` names it in errors).
pub fn read_bytes(bytes: &[u8], name: &Path) -> Result<MemTree, TopoError> {
    read_from(bytes, name)
}

/// Read an archive file.
pub fn read_file(path: &Path) -> Result<MemTree, TopoError> {
    let f = std::fs::File::open(path).map_err(|e| TopoError::io(path, e))?;
    read_from(io::BufReader::new(f), path)
}

fn read_from<R: Read>(mut r: R, name: &Path) -> Result<MemTree, TopoError> {
    let bad = |msg: String| TopoError::format(name, msg);
    let mut head = Vec::with_capacity(6);
    (&mut r)
        .take(6)
        .read_to_end(&mut head)
        .map_err(|e| TopoError::io(name, e))?;
    let comp = sniff(&head).map_err(bad)?;
    let stream = io::Cursor::new(head).chain(r);
    let decoded: Box<dyn Read> = match comp {
        Compression::None => Box::new(stream),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(stream)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(stream)),
    };
    let mut limited = Limited {
        inner: decoded,
        left: MAX_UNPACKED_BYTES,
    };
    let what = match comp {
        Compression::None => "tar",
        Compression::Gzip => "gzip tar",
        Compression::Bzip2 => "bzip2 tar",
    };
    // Look at the first tar block before handing the stream to `tar`, for a clear message
    // on files that are not tar archives at all.
    let mut first = Vec::with_capacity(512);
    (&mut limited)
        .take(512)
        .read_to_end(&mut first)
        .map_err(|e| {
            bad(format!(
                "corrupt or truncated {what} archive: {}",
                one_line(&e)
            ))
        })?;
    if first.iter().all(|&b| b == 0) {
        return Err(bad(format!("empty {what} archive")));
    }
    if !is_tar_header(&first) {
        let inner = match comp {
            Compression::None => {
                "not a tar archive (expected .tar, .tar.gz or .tar.bz2)".to_string()
            }
            _ => format!("decompresses to something that is not a tar archive ({what})"),
        };
        return Err(bad(inner));
    }
    let mut archive = tar::Archive::new(io::Cursor::new(first).chain(limited));
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("not a readable {what} archive: {}", one_line(&e))))?;

    let mut tree = MemTree::new();
    let mut count = 0usize;
    // bytes kept in memory: file data, including copies made for hard links
    let mut stored = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            bad(format!(
                "corrupt or truncated {what} archive: {}",
                one_line(&e)
            ))
        })?;
        count += 1;
        if count > MAX_ENTRIES {
            return Err(bad(format!("more than {MAX_ENTRIES} entries")));
        }
        let raw = entry.path_bytes();
        let Ok(raw) = std::str::from_utf8(&raw).map(str::to_string) else {
            continue; // sysfs and procfs names are ASCII; skip anything else
        };
        let Some(path) = normalize(&raw) else {
            return Err(bad(format!(
                "entry {raw:?} points outside the archive (`..`)"
            )));
        };
        let ty = entry.header().entry_type();
        let node = if ty.is_dir() {
            Node::Dir
        } else if ty.is_file() || ty.is_contiguous() {
            let size = entry.size();
            if size > MAX_ENTRY_BYTES {
                return Err(bad(format!(
                    "entry {path}: {size} bytes, more than {MAX_ENTRY_BYTES}"
                )));
            }
            let mut data = Vec::with_capacity(size.min(1 << 20) as usize);
            entry
                .read_to_end(&mut data)
                .map_err(|e| bad(format!("entry {path}: {}", one_line(&e))))?;
            Node::File(data)
        } else if ty.is_symlink() {
            let Some(target) = entry.link_name_bytes() else {
                continue;
            };
            let Ok(target) = std::str::from_utf8(&target) else {
                continue;
            };
            Node::Symlink(target.to_string())
        } else if ty.is_hard_link() {
            // a hard link names an earlier entry: copy it if it is a file in the tree
            let target = entry
                .link_name_bytes()
                .and_then(|t| std::str::from_utf8(&t).ok().and_then(normalize));
            match target.and_then(|t| tree.get(&t).cloned()) {
                Some(n @ Node::File(_)) => n,
                _ => continue,
            }
        } else {
            continue; // device nodes, FIFOs, sockets: never part of a usable snapshot
        };
        if let Node::File(data) = &node {
            stored += data.len() as u64;
            if stored > MAX_UNPACKED_BYTES {
                return Err(bad(format!(
                    "files add up to more than {} MiB",
                    MAX_UNPACKED_BYTES >> 20
                )));
            }
        }
        tree.insert(&path, node).map_err(bad)?;
    }
    // The tar end marker may come before the end of the compressed stream: read the rest so
    // a truncated or corrupt .gz/.bz2 is reported, not silently accepted.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(|e| {
        bad(format!(
            "corrupt or truncated {what} archive: {}",
            one_line(&e)
        ))
    })?;
    if tree.is_empty() {
        return Err(bad(format!("empty {what} archive")));
    }
    Ok(tree)
}

/// `./a//b/` → `a/b`; `None` when a component is `..`.
fn normalize(p: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => out.push(c),
        }
    }
    Some(out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (p, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::file());
            h.set_cksum();
            b.append_data(&mut h, p, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn plain_gzip_and_bzip2() {
        let t = tar_of(&[("snap/sys/devices/system/cpu/online", b"0-1\n")]);
        let tree = read_bytes(&t, Path::new("a.tar")).unwrap();
        assert!(matches!(
            tree.get("snap/sys/devices/system/cpu/online"),
            Some(Node::File(_))
        ));
        assert_eq!(tree.get("snap/sys"), Some(&Node::Dir));

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &t).unwrap();
        let gz = gz.finish().unwrap();
        assert!(read_bytes(&gz, Path::new("a.tgz")).is_ok());
        let e = read_bytes(&gz[..gz.len() / 2], Path::new("a.tgz"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.tgz: "), "{e}");
        assert!(!e.contains('\n'));

        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        std::io::Write::write_all(&mut bz, &t).unwrap();
        let bz = bz.finish().unwrap();
        assert!(read_bytes(&bz, Path::new("a.tbz2")).is_ok());
        let e = read_bytes(&bz[..bz.len() - 10], Path::new("a.tbz2"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.tbz2: "), "{e}");
    }

    #[test]
    fn junk_and_hostile_archives() {
        let e = read_bytes(b"", Path::new("e.tar")).unwrap_err().to_string();
        assert_eq!(e, "e.tar: empty file");
        let junk: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let e = read_bytes(&junk, Path::new("j.tar"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "j.tar: not a tar archive (expected .tar, .tar.gz or .tar.bz2)"
        );
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        std::io::Write::write_all(&mut bz, &junk).unwrap();
        let e = read_bytes(&bz.finish().unwrap(), Path::new("j.tbz2"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("decompresses to something that is not a tar archive"),
            "{e}"
        );
        let e = read_bytes(&[0u8; 1024], Path::new("z.tar"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "z.tar: empty tar archive");
        // a valid header followed by a truncated body
        let t = tar_of(&[("sys/a", &[7u8; 3000])]);
        let e = read_bytes(&t[..1500], Path::new("t.tar"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.tar: "), "{e}");
        assert!(e.chars().all(|c| c == ' ' || c.is_ascii_graphic()), "{e}");
        let e = read_bytes(b"BZh91AY&SYjunkjunk", Path::new("j.tar.bz2"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("j.tar.bz2: "), "{e}");
        let e = read_bytes(&[0xfd, b'7', b'z', b'X', b'Z', 0, 1], Path::new("x.tar.xz"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("xz"), "{e}");

        // `..` entries: tar::Builder refuses to write them, so build the header by hand
        let mut h = tar::Header::new_old();
        let name = b"../etc/passwd";
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(1);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::file());
        h.set_cksum();
        let mut t = h.as_bytes().to_vec();
        t.push(b'x');
        t.resize(512 * 2 + 1024, 0);
        let e = read_bytes(&t, Path::new("evil.tar"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the archive"), "{e}");
    }

    #[test]
    fn normalizes_paths() {
        assert_eq!(normalize("./a//b/").as_deref(), Some("a/b"));
        assert_eq!(normalize("/abs/x").as_deref(), Some("abs/x"));
        assert_eq!(normalize("a/../b"), None);
    }
}

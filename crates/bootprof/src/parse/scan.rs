//! The byte-level prefilter in front of the parsers, run over whole blocks of lines.
//!
//! Most of a host journal is noise: other units' lines and other sandboxes' lines. The
//! prefilter classifies every line without parsing it, exactly as the per-line rules in
//! [`Prefilter::classify_line`] say, but over a block at a time: one `memmem` pass finds every
//! ` sandbox=` in the block and one `memchr` pass its line ends, so a noise line costs a
//! newline search and a look at its first bytes. Blocks hold whole lines, so they can be
//! scanned independently (on several threads) and their counts added up; the lines that need
//! the parsers are handed back by position, to be fed to the stateful
//! [`Ingester`](crate::Ingester) in file order.

use memchr::memmem;

/// Both ways a line names its sandbox contain this word: one search finds them all.
const SANDBOX: &[u8] = b"sandbox";
/// `" sandbox="`: how a containerd (logrus) line names its sandbox.
#[cfg(test)]
const SANDBOX_KEY: &[u8] = b" sandbox=";
/// `sandbox \"`: how a CRI error names its sandbox inside a quoted value
/// (`failed to start sandbox \"ID\"`, `CreateContainer within sandbox \"ID\"`).
const SANDBOX_TEXT: &[u8] = b"sandbox \\\"";

/// How a `sandbox` found at `at` in `b` names a sandbox, if it does: `Some((true, value))`
/// for the ` sandbox=` key, `Some((false, value))` for the `sandbox \"` text.
fn naming(b: &[u8], at: usize) -> Option<(bool, usize)> {
    let after = at + SANDBOX.len();
    if at >= 1 && b.get(at - 1) == Some(&b' ') && b.get(after) == Some(&b'=') {
        Some((true, after + 1))
    } else if b.get(after..after + 3) == Some(&SANDBOX_TEXT[SANDBOX.len()..]) {
        Some((false, after + 3))
    } else {
        None
    }
}

/// A journald-prefixed line that names no sandbox by key or in a CRI error, but by
/// containerd's `msg="StopPodSandbox for \"ID\""`, `msg="[cleaning up after ]shim
/// disconnected" id=ID` or (v2.1.1 on) `msg="cleaning up dead shim" id=ID`: where its id
/// starts; a Kata 1.x `kata-runtime[PID]` line (or a Go shim's `kata[PID]` one) naming only
/// `container=ID`: where that id starts (the reader joins it to the sandbox of that id its
/// pid names); a Kata 1.x `kata-proxy[PID]` line, a runtime-rs `kata[PID]` line (not
/// logfmt) and the Go shim's agent client's lines (`name=agent-client`, under `kata[PID]`
/// or `containerd[PID]`) that name none are kept whatever the wanted sandbox (their end: no
/// id). Looked for only in lines that would otherwise be another
/// unit's, by their journald identifier first (in the prefix: a kubelet's line costs two
/// searches of its first bytes).
fn stop_naming(line: &[u8]) -> Option<usize> {
    use std::sync::LazyLock;
    static KATA: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b" kata"));
    static CONTAINERD: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b" containerd"));
    static MSG: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b" msg=\""));
    static CONTAINER: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b" container="));
    static AGENT_CLIENT: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b" name=agent-client"));
    const STOP: &[u8] = b"StopPodSandbox for \\\"";
    const GONE: &[u8] = b"shim disconnected\" id=";
    const CLEAN: &[u8] = b"cleaning up after shim disconnected\" id=";
    const DEAD: &[u8] = b"cleaning up dead shim\" id=";
    // the prefix: time, host and identifier
    let head = line.get(..line.len().min(160)).unwrap_or(line);
    // one search finds both Kata identifiers (most lines have neither)
    let mut from = 0;
    while let Some(i) = head.get(from..).and_then(|h| KATA.find(h)) {
        let at = from + i;
        from = at + 1;
        let ident = line.get(at + b" kata".len()..)?;
        if ident.starts_with(b"-proxy[") {
            // Kata 1.0's proxy names no sandbox: its console lines are read as a dmesg
            // file's
            return Some(line.len());
        }
        if ident.starts_with(b"-runtime[") {
            // Kata 1.x's runtime: its agent client's lines are kept, and a line that names
            // only `container=` may be its sandbox's own (the reader joins either to the
            // sandbox its pid names): filtered by that id
            if AGENT_CLIENT.find(ident).is_some() {
                return Some(line.len());
            }
            let at = line.len() - ident.len();
            return CONTAINER
                .find(ident)
                .map(|i| at + i + CONTAINER.needle().len());
        }
        if ident.first() == Some(&b'[') {
            // the Rust shim (runtime-rs) names its sandbox only in passing: its lines are
            // kept (the reader learns the sandbox of its pid); the Go shim's logfmt under the
            // same identifier names it by key, but for its agent client's lines (kept: the
            // reader joins them to their pid's sandbox) and lines naming only `container=`
            let msg = ident.get(memmem::find(ident, b"]: ")? + 3..)?;
            if !msg.starts_with(b"time=") {
                return Some(line.len());
            }
            if AGENT_CLIENT.find(msg).is_some() {
                return Some(line.len());
            }
            let at = line.len() - msg.len();
            return CONTAINER
                .find(msg)
                .map(|i| at + i + CONTAINER.needle().len());
        }
    }
    let unit = CONTAINERD.find(head)? + b" containerd".len();
    let Some(at) = MSG.find(line) else {
        // no `msg="`: perhaps `containerd[PID]: {…}`, runtime-rs's JSON (Kata 3.0–3.19)
        // relayed by containerd; it names its sandbox as the logger's `source`: kept, the
        // reader filters it (looked at only here, off the path of containerd's own lines)
        let rest = line.get(unit..)?;
        let digits = rest
            .iter()
            .skip(1)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if rest.first() == Some(&b'[') && rest.get(1 + digits..1 + digits + 4) == Some(b"]: {") {
            let json = rest.get(1 + digits + 3..)?;
            return memmem::find(json, b"\"kata-runtime\"").map(|_| line.len());
        }
        return None;
    };
    let at = at + b" msg=\"".len();
    let msg = line.get(at..)?;
    if msg.starts_with(STOP) {
        Some(at + STOP.len())
    } else if msg.starts_with(GONE) {
        Some(at + GONE.len())
    } else if msg.starts_with(CLEAN) {
        Some(at + CLEAN.len())
    } else if msg.starts_with(DEAD) {
        Some(at + DEAD.len())
    } else {
        // a copy of the Go shim's agent client's line (its pid's sandbox's, for the reader)
        AGENT_CLIENT.find(msg).map(|_| line.len())
    }
}

/// What the prefilter decided about one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Needs the parsers.
    Keep,
    /// Names only sandboxes other than the wanted one.
    OtherSandbox,
    /// A journald-prefixed line that names no sandbox: another unit's line.
    Unrecognized,
}

/// Line counts of one block (the kept lines are reported separately).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub lines: u64,
    pub bytes: u64,
    pub unrecognized: u64,
    pub other_sandbox: u64,
}

/// A kept line of a block: its 0-based index among the block's lines and its byte range
/// (with its line end, if it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kept {
    pub index: u64,
    pub start: usize,
    pub end: usize,
}

/// The line classifier for one `--sandbox` choice.
#[derive(Debug, Clone)]
pub(crate) struct Prefilter {
    word: memmem::Finder<'static>,
    want: Option<Vec<u8>>,
}

impl Prefilter {
    pub fn new(want: Option<&str>) -> Self {
        Prefilter {
            word: memmem::Finder::new(SANDBOX),
            want: want.map(|w| w.as_bytes().to_vec()),
        }
    }

    /// Is the sandbox whose id starts at `value` in `b` the wanted one? Without
    /// `--sandbox`, every sandbox is.
    fn wanted_at(&self, b: &[u8], value: usize) -> bool {
        match &self.want {
            None => true,
            Some(w) => b.get(value..).is_some_and(|rest| rest.starts_with(w)),
        }
    }

    /// The rules, for one line (with its line end, if any): the definition the block scan
    /// is tested against.
    #[cfg(test)]
    pub fn classify_line(&self, line: &[u8]) -> Class {
        let keys: Vec<usize> = memmem::find_iter(line, SANDBOX_KEY)
            .map(|k| k + SANDBOX_KEY.len())
            .collect();
        let texts: Vec<usize> = memmem::find_iter(line, SANDBOX_TEXT)
            .map(|k| k + SANDBOX_TEXT.len())
            .collect();
        let mut named = if keys.is_empty() { texts } else { keys };
        if named.is_empty() && journald_prefix(line) {
            named.extend(stop_naming(line));
        }
        if !named.is_empty() {
            if named
                .iter()
                .any(|v| *v == line.len() || self.wanted_at(line, *v))
            {
                Class::Keep
            } else {
                Class::OtherSandbox
            }
        } else if journald_prefix(line) {
            Class::Unrecognized
        } else {
            Class::Keep
        }
    }

    /// Classify every line of `block` (whole lines; the last may lack its line end), calling
    /// `keep` for the lines that need the parsers, in order. Returns the block's counts.
    pub fn scan(&self, block: &[u8], mut keep: impl FnMut(Kept)) -> Counts {
        let mut c = Counts {
            bytes: block.len() as u64,
            ..Counts::default()
        };
        // `sandbox` holds no line end, so every match lies inside one line, and one search
        // over the block finds exactly the per-line matches of both ways of naming one
        let mut words = self.word.find_iter(block);
        let mut next_word = words.next().unwrap_or(usize::MAX);
        let mut start = 0usize;
        let mut line = |start: usize, end: usize, c: &mut Counts| {
            let index = c.lines;
            c.lines += 1;
            let text = block.get(start..end).unwrap_or(&[]);
            // (named by a key, by a key that is wanted, by text, by text that is wanted)
            let mut seen = (false, false, false, false);
            while next_word < end {
                if let Some((key, value)) = naming(block, next_word) {
                    let hit = self.wanted_at(block, value);
                    if key {
                        seen.0 = true;
                        seen.1 |= hit;
                    } else {
                        seen.2 = true;
                        seen.3 |= hit;
                    }
                }
                next_word = words.next().unwrap_or(usize::MAX);
            }
            let named = match seen {
                (true, hit, ..) => Some(hit),
                (false, _, true, hit) => Some(hit),
                _ => None,
            };
            let class = if let Some(hit) = named {
                if hit {
                    Class::Keep
                } else {
                    Class::OtherSandbox
                }
            } else if journald_prefix(text) {
                match stop_naming(text) {
                    Some(v) if v == text.len() || self.wanted_at(text, v) => Class::Keep,
                    Some(_) => Class::OtherSandbox,
                    None => Class::Unrecognized,
                }
            } else {
                Class::Keep
            };
            match class {
                Class::Keep => keep(Kept { index, start, end }),
                Class::OtherSandbox => c.other_sandbox += 1,
                Class::Unrecognized => c.unrecognized += 1,
            }
        };
        for nl in memchr::memchr_iter(b'\n', block) {
            line(start, nl + 1, &mut c);
            start = nl + 1;
        }
        if start < block.len() {
            line(start, block.len(), &mut c);
        }
        c
    }
}

/// Guest console lines per sandbox id, counted at the byte level: for each line that
/// names its sandbox with the ` sandbox=` key, the id, and whether the line carries a
/// `vmconsole=` payload. Ids in order of first appearance.
pub(crate) fn console_census(data: &[u8], out: &mut Vec<(Vec<u8>, u64)>) {
    let word = memmem::Finder::new(SANDBOX);
    let console = memmem::Finder::new(b" vmconsole=");
    let mut index: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    for (i, (id, _)) in out.iter().enumerate() {
        index.insert(id.clone(), i);
    }
    let mut skip_to = 0usize;
    for at in word.find_iter(data) {
        if at < skip_to {
            continue;
        }
        let Some((true, value)) = naming(data, at) else {
            continue;
        };
        let rest = data.get(value..).unwrap_or(&[]);
        let end_id = rest
            .iter()
            .position(|c| matches!(c, b' ' | b'\n' | b'\r' | b'"'))
            .unwrap_or(rest.len());
        let id = rest.get(..end_id).unwrap_or(&[]);
        if id.is_empty() {
            continue;
        }
        let line_end = memchr::memchr(b'\n', rest).map_or(data.len(), |n| value + n);
        let line_start = memchr::memrchr(b'\n', data.get(..at).unwrap_or(&[])).map_or(0, |n| n + 1);
        let line = data.get(line_start..line_end).unwrap_or(&[]);
        let is_console = u64::from(console.find(line).is_some());
        match index.get(id) {
            Some(&i) => {
                if let Some(e) = out.get_mut(i) {
                    e.1 += is_console;
                }
            }
            None => {
                index.insert(id.to_vec(), out.len());
                out.push((id.to_vec(), is_console));
            }
        }
        // one count per line
        skip_to = line_end;
    }
}

/// Does the line start with a journald short / short-iso prefix (`Nov 20 16:25:32 ` or
/// `2025-11-20T16:25:32`)? Byte-level and cheap: used to skip other units' lines.
pub(crate) fn journald_prefix(b: &[u8]) -> bool {
    journald_prefix_bare(b) || ci_clock(b).is_some_and(journald_prefix_bare)
}

/// What follows a CI runner's clock before a line (Jenkins' timestamper `HH:MM:SS `,
/// `HH:MM:SS.mmm `, `[HH:MM:SS] `), as [`crate::parse::journal::ci_clock`] reads it; GitHub
/// Actions' RFC 3339 clock reads as a short-iso prefix already.
fn ci_clock(b: &[u8]) -> Option<&[u8]> {
    let b = b.strip_prefix(b"[").unwrap_or(b);
    let hour = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let rest = match (hour, b.get(hour..)?) {
        (1 | 2, [b':', m0, m1, b':', s0, s1, rest @ ..])
            if [m0, m1, s0, s1].iter().all(|c| c.is_ascii_digit()) =>
        {
            rest
        }
        _ => return None,
    };
    let rest = match rest {
        [b'.' | b',', rest @ ..] => {
            let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
            rest.get(n..)?
        }
        _ => rest,
    };
    let rest = rest.strip_prefix(b"]").unwrap_or(rest);
    let spaces = rest.iter().take_while(|c| **c == b' ').count();
    (spaces > 0).then(|| rest.get(spaces..)).flatten()
}

fn journald_prefix_bare(b: &[u8]) -> bool {
    // `1月 19 21:11:37 `, `11월 20 …` (CJK locales): one or two digits, 月 or 월, a space
    let cjk = |rest: &[u8]| {
        matches!(rest, [0xE6, 0x9C, 0x88, b' ', d0, d1, b' ', ..] | [0xEC, 0x9B, 0x94, b' ', d0, d1, b' ', ..]
            if (d0.is_ascii_digit() || *d0 == b' ') && d1.is_ascii_digit())
    };
    match b {
        [m0, rest @ ..] if m0.is_ascii_digit() && cjk(rest) => return true,
        [m0, m1, rest @ ..] if m0.is_ascii_digit() && m1.is_ascii_digit() && cjk(rest) => {
            return true
        }
        _ => {}
    }
    match b {
        [m0, m1, m2, b' ', d0, d1, b' ', h0, h1, b':', ..] => {
            m0.is_ascii_uppercase()
                && m1.is_ascii_lowercase()
                && m2.is_ascii_lowercase()
                && (d0.is_ascii_digit() || *d0 == b' ')
                && d1.is_ascii_digit()
                && h0.is_ascii_digit()
                && h1.is_ascii_digit()
        }
        [y0, y1, y2, y3, b'-', _, _, b'-', _, _, b'T', rest @ ..] => {
            // `2025-11-20T16:25:32+0000 host …`, not bpftrace's `2025-11-20T…Z: vfio…` nor
            // `dmesg --time-format iso`'s `2025-11-20T16:25:32,201931+00:00 pci …`
            [y0, y1, y2, y3].iter().all(|c| c.is_ascii_digit())
                && rest.get(8) != Some(&b',')
                && rest
                    .iter()
                    .position(|c| *c == b' ')
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| rest.get(i))
                    .is_some_and(|c| *c != b':')
        }
        _ => false,
    }
}

/// Split `data` into blocks of whole lines of about `target` bytes (at least 1): each block
/// ends just after a line end, or at the end of `data`. Returns the block boundaries
/// (`0 = b[0] < b[1] < … < b[n] = data.len()`); empty data gives `[0]`.
pub(crate) fn line_blocks(data: &[u8], target: usize) -> Vec<usize> {
    let target = target.max(1);
    let mut bounds = vec![0usize];
    let mut at = 0usize;
    while at < data.len() {
        let probe = at.saturating_add(target).min(data.len());
        // the block ends after the first line end at or past `probe - 1`
        let end = data
            .get(probe - 1..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(data.len(), |i| probe + i);
        bounds.push(end);
        at = end;
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_prefixes() {
        assert!(journald_prefix(b"Nov 20 16:25:32 host kubelet[1]: x"));
        assert!(journald_prefix(b"Nov  2 16:25:32 host kubelet[1]: x"));
        assert!(journald_prefix(
            b"2025-11-20T16:25:32+0000 host kubelet[1]: x"
        ));
        assert!(!journald_prefix(
            b"2025-11-20T17:56:21.688170596Z: vfio_pin_pages_remote took 3 ms"
        ));
        assert!(!journald_prefix(b"[    3.201931] pci 0000:02:00.0: x"));
        assert!(journald_prefix(
            b"2025-11-20T16:25:32.201931+00:00 host kernel: x"
        ));
        assert!(!journald_prefix(
            b"2025-11-20T16:25:32,201931+00:00 pci 0000:02:00.0: x"
        ));
        assert!(!journald_prefix(
            b"Start Time:   Mon, 24 Nov 2025 21:21:09 +0000"
        ));
        assert!(journald_prefix(
            "1月 19 21:11:37 node kata[1]: x".as_bytes()
        ));
        assert!(journald_prefix(
            "11月 09 21:11:37 node kata[1]: x".as_bytes()
        ));
        assert!(!journald_prefix("1月19日 x".as_bytes()));
    }

    #[test]
    fn census_counts_console_lines_per_sandbox() {
        let data = b"Nov 20 16:25:32 h containerd[1]: time=x sandbox=abc subsystem=sandbox vmconsole=\"[ 1.0] k\"\n\
Nov 20 16:25:32 h containerd[1]: time=x sandbox=abc msg=y\n\
Nov 20 16:25:32 h containerd[1]: time=x sandbox=zz vmconsole=\"x\"\n\
Nov 20 16:25:32 h containerd[1]: time=x sandbox=abc vmconsole=\"y\"\n\
noise sandbox \\\"abc\\\"";
        let mut out = Vec::new();
        console_census(data, &mut out);
        assert_eq!(out, vec![(b"abc".to_vec(), 2), (b"zz".to_vec(), 1)]);
    }

    #[test]
    fn blocks_end_after_line_ends() {
        let data = b"aa\nbbbb\nc\n\ndd";
        assert_eq!(line_blocks(data, 1), vec![0, 3, 8, 10, 11, 13]);
        assert_eq!(line_blocks(data, 3), vec![0, 3, 8, 11, 13]);
        assert_eq!(line_blocks(data, 4), vec![0, 8, 13]);
        assert_eq!(line_blocks(data, 100), vec![0, 13]);
        assert_eq!(line_blocks(b"", 4), vec![0]);
        assert_eq!(line_blocks(b"\n\n", 0), vec![0, 1, 2]);
    }

    #[test]
    fn classifies_like_the_rules() {
        let p = Prefilter::new(Some("abc"));
        let block = b"Nov 20 16:25:32 h containerd[1]: time=x sandbox=abc1 msg=y\n\
Nov 20 16:25:32 h containerd[1]: time=x sandbox=zzz msg=y\n\
Nov 20 16:25:32 h kubelet[1]: noise\n\
[    1.0] kernel line\n\
x sandbox=zzz sandbox=abc\r\n\
Nov 20 16:25:32 h containerd[1]: time=x level=error msg=\"RunPodSandbox failed\" error=\"failed to start sandbox \\\"abc9\\\": x\"\n\
Nov 20 16:25:32 h containerd[1]: time=x level=error msg=\"CreateContainer within sandbox \\\"zz\\\" failed\"\n\
tail without end sandbox=ab";
        let mut kept = Vec::new();
        let c = p.scan(block, |k| kept.push(k));
        assert_eq!(c.lines, 8);
        assert_eq!(c.bytes, block.len() as u64);
        assert_eq!(c.other_sandbox, 3);
        assert_eq!(c.unrecognized, 1);
        assert_eq!(
            kept.iter().map(|k| k.index).collect::<Vec<_>>(),
            vec![0, 3, 4, 5]
        );
        for k in &kept {
            let line = &block[k.start..k.end];
            assert_eq!(p.classify_line(line), Class::Keep);
        }
        assert_eq!(
            p.classify_line(b"tail without end sandbox=ab"),
            Class::OtherSandbox
        );
        let all = Prefilter::new(None);
        assert_eq!(all.scan(block, |_| {}).other_sandbox, 0);
    }
}

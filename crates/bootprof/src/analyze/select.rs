//! Step 1 of the analysis: which boots the inputs hold, and the records of the one to
//! analyze. A boot is a sandbox id's lines written by one shim process (`pid=`) on one
//! node (the journal's host field; a line without one belongs to the host the rest of its
//! file names); lines that name no shim pid (CRI errors) join the sandbox's current boot
//! unless a long silence separates them from it (but for containerd's stop of the
//! sandbox, which ends its current boot). Lines that name no sandbox (dmesg, agent
//! JSON, host traces, `kubectl describe`) go with whichever boot is analyzed; later steps
//! keep the ones that fit its time window.

use std::collections::HashMap;

use crate::analyze::model::BootSummary;
use crate::parse::ingest::{ClockSamples, Event, Ingest};
use crate::parse::time::{format_rfc3339, Nanos, NS_PER_S};

/// A silence this long between two lines of one sandbox that name no shim pid starts a
/// new boot (a boot's agent prints every ~2 s while it waits; a retried pod comes back
/// later).
pub const BOOT_GAP_NS: Nanos = 10 * 60 * NS_PER_S;

/// How many other sandboxes an error message lists.
const LIST_MAX: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("no boot events found ({lines} lines read, {bad} bad{why})")]
    NoEvents { lines: u64, bad: u64, why: String },
    #[error("sandbox {want:?} not found in the input{hint}")]
    NotFound { want: String, hint: String },
    #[error("sandbox {want:?} is ambiguous: it is the start of {n} sandbox ids ({list}); give more of the id")]
    Ambiguous {
        want: String,
        n: usize,
        list: String,
    },
    #[error(
        "sandbox {id} has {n} boot(s) in the input: --sandbox {id}@{k} is out of range (1..={n})"
    )]
    NoSuchBoot { id: String, n: usize, k: usize },
    #[error("--sandbox {0:?}: the part after @ must be a boot number (1, 2, …)")]
    BadBootNumber(String),
}

#[derive(Debug, Clone)]
struct Entry {
    sandbox: u32,
    /// Index into [`Ingest::nodes`].
    node: Option<u32>,
    pid: Option<u32>,
    first: Option<Nanos>,
    last: Option<Nanos>,
    lines: u64,
    console: u64,
    first_event: usize,
}

impl Entry {
    /// Count event `e`'s lines into this boot.
    fn count(&mut self, e: &Event) {
        self.lines += e.lines();
        if e.is_console() {
            self.console += e.lines();
        }
        if let Some((lo, hi)) = e.host_range() {
            self.first = Some(self.first.map_or(lo, |f| f.min(lo)));
            self.last = Some(self.last.map_or(hi, |l| l.max(hi)));
        }
    }
}

/// The boots of the sandboxes in an [`Ingest`].
#[derive(Debug, Clone)]
pub struct Boots {
    /// Boot of each event (`u32::MAX`: a line that names no sandbox).
    of_event: Vec<u32>,
    list: Vec<Entry>,
    /// The boots of each sandbox, in time order.
    of_sandbox: HashMap<u32, Vec<usize>>,
}

/// The records of one boot: what [`crate::analyze()`] reads.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    pub ing: &'a Ingest,
    /// What the inputs of this boot say about their clocks (all of them for one boot; the
    /// boot's node's in a fleet).
    pub clocks: &'a ClockSamples,
    pub boot: Option<BootSummary>,
    pub other_boots: Vec<BootSummary>,
    pub other_sandboxes: Vec<String>,
    /// The boot's own lines and every line that names no sandbox, in input order; with
    /// `traces`, but for the host's traces and kubectl output.
    pub events: Vec<&'a Event>,
    /// The host's traces and kubectl output of the boot's node, read once for all its boots
    /// (`None`: they are among `events`).
    pub traces: Option<&'a crate::analyze::traces::Traces>,
}

/// The host each input file's lines name most (index into [`Ingest::nodes`]): the node of
/// the file's lines that name none.
pub fn file_nodes(ing: &Ingest) -> Vec<Option<u32>> {
    // per file, a count per node (nodes are few: a vector indexed by node)
    let mut counts: Vec<Vec<u64>> = vec![Vec::new(); ing.files.len()];
    for e in &ing.events {
        if let (Some(n), Some(c)) = (e.node, counts.get_mut(e.src.file as usize)) {
            if c.len() <= n as usize {
                c.resize(n as usize + 1, 0);
            }
            if let Some(k) = c.get_mut(n as usize) {
                *k += e.lines();
            }
        }
    }
    counts
        .into_iter()
        .map(|c| {
            c.into_iter()
                .enumerate()
                .filter(|(_, k)| *k > 0)
                .max_by_key(|(n, k)| (*k, std::cmp::Reverse(*n)))
                .map(|(n, _)| n as u32)
        })
        .collect()
}

/// Split every sandbox's lines into boots.
pub fn boots(ing: &Ingest) -> Boots {
    let mut of_event = vec![u32::MAX; ing.events.len()];
    let mut list: Vec<Entry> = Vec::new();
    let file_node = file_nodes(ing);
    // per sandbox and node: its boots, and the one lines without a pid join
    let mut by_sandbox: HashMap<(u32, Option<u32>), (Vec<usize>, usize)> = HashMap::new();
    // (sandbox, node, boot) of the last line that named its shim
    let mut last: Option<(u32, Option<u32>, usize)> = None;
    for (i, e) in ing.events.iter().enumerate() {
        let Some(s) = e.sandbox else { continue };
        let node = e
            .node
            .or_else(|| file_node.get(e.src.file as usize).copied().flatten());
        let new_entry = |list: &mut Vec<Entry>, pid| {
            list.push(Entry {
                sandbox: s,
                node,
                pid,
                first: None,
                last: None,
                lines: 0,
                console: 0,
                first_event: i,
            });
            list.len() - 1
        };
        // lines of one boot come in runs: the last one's boot first
        // (a line naming the same shim as the last one is in its boot: a shim's pid picks
        // one boot of a sandbox, whatever the silence before it)
        if let Some((ls, ln, lk)) = last {
            let same = ls == s
                && ln == node
                && e.pid
                    .is_some_and(|p| list.get(lk).is_some_and(|b| b.pid == Some(p)));
            if let (true, Some(b)) = (same, list.get_mut(lk)) {
                b.count(e);
                if let Some(slot) = of_event.get_mut(i) {
                    *slot = lk as u32;
                }
                continue;
            }
        }
        let k = match by_sandbox.get_mut(&(s, node)) {
            None => {
                let k = new_entry(&mut list, e.pid);
                by_sandbox.insert((s, node), (vec![k], k));
                k
            }
            Some((mine, current)) => {
                let cur = *current;
                let gap = match (e.host, list.get(cur).and_then(|b| b.last)) {
                    (Some(t), Some(l)) => t.saturating_sub(l) > BOOT_GAP_NS,
                    _ => false,
                };
                let k = match e.pid {
                    Some(p) => {
                        if let Some(&k) = mine
                            .iter()
                            .find(|&&k| list.get(k).is_some_and(|b| b.pid == Some(p)))
                        {
                            k
                        } else if list.get(cur).is_some_and(|b| b.pid.is_none()) && !gap {
                            if let Some(b) = list.get_mut(cur) {
                                b.pid = Some(p);
                            }
                            cur
                        } else {
                            let k = new_entry(&mut list, Some(p));
                            mine.push(k);
                            k
                        }
                    }
                    // containerd's stop of a sandbox (`StopPodSandbox`, `shim
                    // disconnected`) ends its current boot, however long after
                    None if gap && !is_stop_line(e) => {
                        let k = new_entry(&mut list, None);
                        mine.push(k);
                        k
                    }
                    None => cur,
                };
                *current = k;
                k
            }
        };
        // the lines of a run after its first would each have been taken by the shortcut
        // above (same sandbox, node and shim): counted with it
        if let Some(b) = list.get_mut(k) {
            b.count(e);
        }
        if let Some(slot) = of_event.get_mut(i) {
            *slot = k as u32;
        }
        last = e.pid.is_some().then_some((s, node, k));
    }
    let list = merge_unsilent(list, &mut of_event);
    let mut of_sandbox: HashMap<u32, Vec<usize>> = HashMap::new();
    for (k, b) in list.iter().enumerate() {
        of_sandbox.entry(b.sandbox).or_default().push(k);
    }
    for v in of_sandbox.values_mut() {
        v.sort_by_key(|&k| {
            list.get(k)
                .map(|b| (b.first.unwrap_or(Nanos::MAX), b.first_event))
        });
    }
    Boots {
        of_event,
        list,
        of_sandbox,
    }
}

/// Undo the split of a boot that names no shim pid from the boot of its sandbox and node
/// that still logs after it began: the silence that split it was not one (the shim's lines
/// that name no pid, or a `pid=` that is not one, such as `Wait for process failed`'s exec
/// id in kata-containers#4880, came before the shim's own lines of the same second).
fn merge_unsilent(list: Vec<Entry>, of_event: &mut [u32]) -> Vec<Entry> {
    let mut into: Vec<usize> = (0..list.len()).collect();
    for (k, b) in list.iter().enumerate() {
        let (None, Some(first)) = (b.pid, b.first) else {
            continue;
        };
        let host = list.iter().enumerate().find(|(j, o)| {
            *j != k
                && o.pid.is_some()
                && (o.sandbox, o.node) == (b.sandbox, b.node)
                && o.first.is_some_and(|f| f <= first)
                && o.last.is_some_and(|l| l >= first)
        });
        if let Some((j, _)) = host {
            into[k] = j;
        }
    }
    if into.iter().enumerate().all(|(k, j)| k == *j) {
        return list;
    }
    let mut kept: Vec<Entry> = Vec::new();
    let mut index = vec![usize::MAX; list.len()];
    let mut merged: Vec<(usize, Entry)> = Vec::new();
    for (k, b) in list.into_iter().enumerate() {
        if into[k] == k {
            index[k] = kept.len();
            kept.push(b);
        } else {
            merged.push((into[k], b));
        }
    }
    for (j, b) in merged {
        if let Some(h) = kept.get_mut(index[j]) {
            h.lines += b.lines;
            h.console += b.console;
            h.first = h.first.min(b.first).or(h.first).or(b.first);
            h.last = h.last.max(b.last);
            h.first_event = h.first_event.min(b.first_event);
        }
    }
    for slot in of_event.iter_mut().filter(|s| **s != u32::MAX) {
        let k = *slot as usize;
        *slot = index[into.get(k).copied().unwrap_or(k)] as u32;
    }
    kept
}

/// containerd's line that stops a sandbox ([`crate::parse::journal::is_stop`]).
fn is_stop_line(e: &Event) -> bool {
    matches!(&e.body, crate::parse::ingest::Body::Host(h) if crate::parse::journal::is_stop(&h.msg))
}

impl Boots {
    /// Number of boots (0 when no line names a sandbox).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The boots of sandbox `s`, in time order.
    fn of_sandbox(&self, s: u32) -> Vec<usize> {
        self.of_sandbox.get(&s).cloned().unwrap_or_default()
    }

    /// What a report says about boot `k`.
    pub fn summary(&self, ing: &Ingest, k: usize) -> Option<BootSummary> {
        let b = self.list.get(k)?;
        let mine = self.of_sandbox(b.sandbox);
        Some(BootSummary {
            sandbox: ing.sandboxes.get(b.sandbox as usize).cloned(),
            node: b.node.and_then(|n| ing.nodes.get(n as usize)).cloned(),
            shim_pid: b.pid,
            boot: mine.iter().position(|&x| x == k).map_or(1, |p| p + 1),
            boots_of_sandbox: mine.len(),
            first: b.first.map(format_rfc3339),
            last: b.last.map(format_rfc3339),
            lines: b.lines,
            console: b.console,
            first_ns: b.first,
        })
    }

    /// Every boot, as reports name them.
    pub fn summaries(&self, ing: &Ingest) -> Vec<BootSummary> {
        (0..self.list.len())
            .filter_map(|k| self.summary(ing, k))
            .collect()
    }

    /// The records of boot `k` (or, with `None`, of an input that names no sandbox).
    pub fn records<'a>(&self, ing: &'a Ingest, k: Option<usize>) -> Selection<'a> {
        let want = k.map(|k| k as u32);
        let events = ing
            .events
            .iter()
            .zip(&self.of_event)
            .filter(|(_, &b)| b == u32::MAX || Some(b) == want)
            .map(|(e, _)| e)
            .collect();
        let me = k.and_then(|k| self.list.get(k));
        let other_boots = me
            .map(|b| {
                self.of_sandbox(b.sandbox)
                    .into_iter()
                    .filter(|&x| Some(x) != k)
                    .filter_map(|x| self.summary(ing, x))
                    .collect()
            })
            .unwrap_or_default();
        let other_sandboxes = ing
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(i, _)| me.is_none_or(|b| b.sandbox as usize != *i))
            .map(|(_, s)| s.clone())
            .collect();
        Selection {
            ing,
            clocks: &ing.clocks,
            boot: k.and_then(|k| self.summary(ing, k)),
            other_boots,
            other_sandboxes,
            events,
            traces: None,
        }
    }

    /// The boot of each event, in input order (`None`: a line that names no sandbox).
    pub fn of_events(&self) -> impl Iterator<Item = Option<usize>> + '_ {
        self.of_event
            .iter()
            .map(|&b| (b != u32::MAX).then_some(b as usize))
    }

    /// The node of boot `k` (index into [`Ingest::nodes`]), if its lines name one.
    pub fn node(&self, k: usize) -> Option<u32> {
        self.list.get(k).and_then(|b| b.node)
    }

    /// The records of boot `k` for a fleet view: its own lines and `shared` (the lines of
    /// its node that name no sandbox, but for its traces and kubectl output: `traces`),
    /// merged in input order and analyzed against `clocks`; other sandboxes are not listed.
    pub fn fleet_records<'a>(
        &self,
        ing: &'a Ingest,
        k: usize,
        own: &[u32],
        shared: &[u32],
        traces: &'a crate::analyze::traces::Traces,
        clocks: &'a ClockSamples,
    ) -> Selection<'a> {
        let mut events = Vec::with_capacity(own.len() + shared.len());
        let (mut a, mut b) = (own.iter().peekable(), shared.iter().peekable());
        loop {
            let i = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) if x <= y => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            if let Some(e) = i.and_then(|&i| ing.events.get(i as usize)) {
                events.push(e);
            }
        }
        let me = self.list.get(k);
        let other_boots = me
            .map(|b| {
                self.of_sandbox(b.sandbox)
                    .into_iter()
                    .filter(|&x| x != k)
                    .filter_map(|x| self.summary(ing, x))
                    .collect()
            })
            .unwrap_or_default();
        Selection {
            ing,
            clocks,
            boot: self.summary(ing, k),
            other_boots,
            other_sandboxes: Vec::new(),
            events,
            traces: Some(traces),
        }
    }

    /// The boot with the most guest console records (then lines): what `analyze` reports
    /// without `--sandbox`.
    pub fn busiest(&self) -> Option<usize> {
        (0..self.list.len())
            .rev()
            .max_by_key(|&k| self.list.get(k).map_or((0, 0), |b| (b.console, b.lines)))
    }
}

fn listing(ids: &[&String]) -> String {
    let mut s: Vec<String> = ids.iter().take(LIST_MAX).map(|s| s.to_string()).collect();
    if ids.len() > LIST_MAX {
        s.push(format!("and {} more", ids.len() - LIST_MAX));
    }
    s.join(", ")
}

/// The records to analyze: the boot `want` names (`ID`, a unique prefix of one, or
/// `ID@N` for its N-th boot; the latest by default), else the busiest boot.
pub fn select<'a>(ing: &'a Ingest, want: Option<&str>) -> Result<Selection<'a>, SelectError> {
    let boots = boots(ing);
    let Some(w) = want else {
        if ing.events.is_empty() {
            return Err(SelectError::NoEvents {
                lines: ing.stats.lines,
                bad: ing.stats.bad.total(),
                why: ing.stats.why_no_events(),
            });
        }
        return Ok(boots.records(ing, boots.busiest()));
    };
    let (id, nth) = match w.split_once('@') {
        Some((id, n)) => (
            id,
            Some(
                n.parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| SelectError::BadBootNumber(w.to_string()))?,
            ),
        ),
        None => (w, None),
    };
    let exact: Vec<usize> = (0..ing.sandboxes.len())
        .filter(|&i| ing.sandboxes.get(i).is_some_and(|s| s == id))
        .collect();
    let hits = if exact.is_empty() {
        (0..ing.sandboxes.len())
            .filter(|&i| ing.sandboxes.get(i).is_some_and(|s| s.starts_with(id)))
            .collect()
    } else {
        exact
    };
    let s = match hits.as_slice() {
        [s] => *s as u32,
        [] => {
            let seen: Vec<&String> = ing.sandboxes.iter().collect();
            let hint = if !seen.is_empty() {
                format!("; sandboxes in the input: {}", listing(&seen))
            } else if ing.stats.other_sandbox > 0 {
                format!(
                    "; {} lines of other sandboxes were skipped (run without --sandbox to see their ids)",
                    ing.stats.other_sandbox
                )
            } else {
                "; no line of the input names a sandbox".to_string()
            };
            return Err(SelectError::NotFound {
                want: id.to_string(),
                hint,
            });
        }
        many => {
            let ids: Vec<&String> = many.iter().filter_map(|&i| ing.sandboxes.get(i)).collect();
            return Err(SelectError::Ambiguous {
                want: id.to_string(),
                n: ids.len(),
                list: listing(&ids),
            });
        }
    };
    let mine = boots.of_sandbox(s);
    let k = match nth {
        None => mine.last().copied(),
        Some(n) => Some(*mine.get(n - 1).ok_or_else(|| SelectError::NoSuchBoot {
            id: ing.sandboxes.get(s as usize).cloned().unwrap_or_default(),
            n: mine.len(),
            k: n,
        })?),
    };
    Ok(boots.records(ing, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::ingest::{ingest_str, Options};

    fn line(t: &str, pid: u32, sandbox: &str, console: &str) -> String {
        format!(
            "Aug 11 21:53:16 gpu-box containerd[2334]: time=\"{t}\" level=debug msg=\"reading guest console\" name=containerd-shim-v2 pid={pid} sandbox={sandbox} source=virtcontainers vmconsole=\"{console}\"\n"
        )
    }

    /// `ctr run … arch`: the same sandbox name booted twice, two days apart, by two shims.
    #[test]
    fn one_sandbox_id_two_boots() {
        let mut text = String::new();
        text += &line(
            "2025-08-09T21:53:16.0-04:00",
            9100,
            "arch",
            "[    0.100000] a",
        );
        text += &line(
            "2025-08-09T21:53:17.0-04:00",
            9100,
            "arch",
            "[    1.100000] b",
        );
        text += &line(
            "2025-08-11T21:53:16.0-04:00",
            9491,
            "arch",
            "[    0.100000] a",
        );
        text += &line(
            "2025-08-11T21:53:17.0-04:00",
            9491,
            "arch",
            "[    1.100000] b",
        );
        text += &line(
            "2025-08-11T21:53:18.0-04:00",
            9491,
            "arch",
            "[    2.100000] c",
        );
        text += &line(
            "2025-08-11T21:53:18.5-04:00",
            77,
            "test",
            "[    0.100000] x",
        );
        let ing = ingest_str("j", &text, Options::default());
        assert_eq!(ing.stats.bad.total(), 0, "{:?}", ing.stats.bad_examples);
        let b = boots(&ing);
        assert_eq!(b.len(), 3);
        let s = select(&ing, Some("arch")).unwrap();
        let me = s.boot.unwrap();
        assert_eq!(
            (me.shim_pid, me.boot, me.boots_of_sandbox),
            (Some(9491), 2, 2)
        );
        assert_eq!(s.other_boots.len(), 1);
        assert_eq!(s.events.len(), 3);
        let s = select(&ing, Some("arch@1")).unwrap();
        assert_eq!(s.boot.unwrap().shim_pid, Some(9100));
        assert!(matches!(
            select(&ing, Some("arch@3")),
            Err(SelectError::NoSuchBoot { n: 2, .. })
        ));
        assert!(matches!(
            select(&ing, Some("arch@x")),
            Err(SelectError::BadBootNumber(_))
        ));
        // the busiest boot without --sandbox
        assert_eq!(
            select(&ing, None).unwrap().boot.unwrap().shim_pid,
            Some(9491)
        );
        // `test` is a whole id and the start of none other; `te` too; `a` is not found
        assert!(select(&ing, Some("test")).is_ok());
        let e = select(&ing, Some("zz")).unwrap_err().to_string();
        assert!(e.contains("not found") && e.contains("arch, test"), "{e}");
    }

    #[test]
    fn ambiguous_prefix_says_so() {
        let mut text = String::new();
        for (i, id) in ["ab12", "ab34", "ab56", "ab78", "ab90", "abcd", "zz"]
            .iter()
            .enumerate()
        {
            text += &line(
                &format!("2025-08-11T21:53:{:02}.0Z", 10 + i),
                100 + i as u32,
                id,
                "[    0.1] x",
            );
        }
        let ing = ingest_str("j", &text, Options::default());
        let e = select(&ing, Some("ab")).unwrap_err().to_string();
        assert!(
            e.contains("ambiguous") && e.contains("6 sandbox ids") && e.contains("and 1 more"),
            "{e}"
        );
        // with the line filter, the other ids are not read: the error says how to see them
        let ing = ingest_str(
            "j",
            &text,
            Options {
                sandbox: Some("nope".into()),
            },
        );
        let e = select(&ing, Some("nope")).unwrap_err().to_string();
        assert!(
            e.contains("not found") && e.contains("7 lines of other sandboxes"),
            "{e}"
        );
    }
}

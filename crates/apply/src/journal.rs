//! The crash-safe journal: append-only JSON lines, `fsync`'d before each change.
//!
//! ```text
//! {"journal":"vmtune","version":1,"created_unix":1732190000,"apply_pid":4242,"qemu_pid":4100}
//! {"step":1,"state":"intended","target":{"actuator":"irq",...},"previous":"0-1","new":"0"}
//! {"step":1,"state":"done","note":null}
//! {"step":2,"state":"intended",...}
//! ```
//!
//! A step's `intended` line (with the previous value) reaches the disk before the change is
//! made; the outcome line follows it. `restore` walks the steps backwards and writes each
//! previous value back — also for steps with no outcome line (a crash between the change and
//! its record), because writing a previous value again is harmless. A torn last line (a crash
//! inside `write`) is ignored: its change was never made.
//!
//! A hugepage reservation is undone by giving back the pages it added, not by writing its
//! previous value ([`crate::hugepages`]), which is not harmless to repeat. Its outcome line
//! carries the pool read back after the change (`applied`), and `restore` journals the
//! give-back too: an `undoing` line with the values it will write (fsync'd first), then
//! `undone`. A restore that is run again (after a crash, or after another step failed) writes
//! an `undoing` step's value again and leaves an `undone` step alone.
//!
//! ```text
//! {"step":1,"state":"done","note":"…","applied":"1030"}
//! {"step":1,"state":"undoing","previous":"1030","new":"1024"}
//! {"step":1,"state":"undone"}
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{ApplyError, Result};
use crate::step::Target;

/// Default journal location.
pub const DEFAULT_JOURNAL: &str = "/run/vmtune/journal";

/// The first line of a journal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub journal: String,
    pub version: u32,
    pub created_unix: u64,
    pub apply_pid: u32,
    pub qemu_pid: Option<i32>,
}

/// What happened to a step.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Recorded before the change; the change may or may not have happened.
    Intended,
    /// The change was made.
    Done,
    /// The change was refused by the kernel in a way that is expected (managed IRQ, gone
    /// thread): nothing was changed.
    Skipped,
    /// The change failed; nothing was changed.
    Failed,
    /// A restore is about to undo the step by writing `new` (the pool was `previous`).
    Undoing,
    /// The restore's write was made.
    Undone,
}

/// One line after the header.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub step: u32,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The value read back right after the change (hugepages: the persistent pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
}

/// A step as read back from a journal: its intended record and its last outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalStep {
    pub step: u32,
    pub target: Target,
    pub previous: String,
    pub new: String,
    /// `Intended` when no outcome line was written (crash).
    pub state: State,
    /// The value read back right after the change, when the outcome line has it.
    pub applied: Option<String>,
    /// A restore's give-back of this step, when one was started.
    pub undo: Option<Undo>,
}

/// A restore's journaled undo of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    /// The value before the undo.
    pub from: String,
    /// The value the undo writes.
    pub to: String,
    /// Whether the write was made (`undone` recorded).
    pub done: bool,
}

/// An open journal being appended to.
pub struct Journal {
    path: PathBuf,
    file: File,
    next_step: u32,
}

impl Journal {
    /// Create a new journal (failing if one exists), write and fsync the header, and fsync
    /// the directory so the file's existence is durable.
    pub fn create(path: &Path, header: &Header) -> Result<Journal> {
        let dir = parent_dir(path);
        std::fs::create_dir_all(&dir).map_err(|e| ApplyError::io(&dir, e))?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ApplyError::journal(
                        path,
                        "a journal of an earlier apply exists: run `vmtune restore` first",
                    )
                } else {
                    ApplyError::io(path, e)
                }
            })?;
        let line =
            serde_json::to_string(header).map_err(|e| ApplyError::journal(path, e.to_string()))?;
        writeln!(file, "{line}").map_err(|e| ApplyError::io(path, e))?;
        file.sync_all().map_err(|e| ApplyError::io(path, e))?;
        let d = File::open(&dir).map_err(|e| ApplyError::io(&dir, e))?;
        d.sync_all().map_err(|e| ApplyError::io(&dir, e))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            next_step: 1,
        })
    }

    /// Open an existing journal to append more steps (`--watch`).
    pub fn open_append(path: &Path) -> Result<Journal> {
        let (_, steps) = read(path)?;
        let next_step = steps.iter().map(|s| s.step).max().unwrap_or(0) + 1;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| ApplyError::io(path, e))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            next_step,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record a step before it is made; returns its number. The line is on disk when this
    /// returns.
    pub fn intend(&mut self, target: &Target, previous: &str, new: &str) -> Result<u32> {
        let step = self.next_step;
        self.next_step += 1;
        self.append(&Record {
            step,
            state: State::Intended,
            target: Some(target.clone()),
            previous: Some(previous.to_string()),
            new: Some(new.to_string()),
            note: None,
            applied: None,
        })?;
        Ok(step)
    }

    /// Record the outcome of a step.
    pub fn outcome(&mut self, step: u32, state: State, note: Option<String>) -> Result<()> {
        self.outcome_applied(step, state, note, None)
    }

    /// Record the outcome of a step with the value read back right after it.
    pub fn outcome_applied(
        &mut self,
        step: u32,
        state: State,
        note: Option<String>,
        applied: Option<String>,
    ) -> Result<()> {
        self.append(&Record {
            step,
            state,
            target: None,
            previous: None,
            new: None,
            note,
            applied,
        })
    }

    /// Record, before it is made, a restore's undo of `step`: from `from` to `to`.
    pub fn undoing(&mut self, step: u32, from: &str, to: &str) -> Result<()> {
        self.append(&Record {
            step,
            state: State::Undoing,
            target: None,
            previous: Some(from.to_string()),
            new: Some(to.to_string()),
            note: None,
            applied: None,
        })
    }

    /// Record that a restore's undo of `step` was written.
    pub fn undone(&mut self, step: u32, note: Option<String>) -> Result<()> {
        self.outcome(step, State::Undone, note)
    }

    fn append(&mut self, rec: &Record) -> Result<()> {
        let line = serde_json::to_string(rec)
            .map_err(|e| ApplyError::journal(&self.path, e.to_string()))?;
        // one write of the whole line, then fsync: the record is durable before the change
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        self.file
            .write_all(&buf)
            .map_err(|e| ApplyError::io(&self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| ApplyError::io(&self.path, e))
    }
}

/// Read a journal: the header and its steps in order.
pub fn read(path: &Path) -> Result<(Header, Vec<JournalStep>)> {
    let text = std::fs::read_to_string(path).map_err(|e| ApplyError::io(path, e))?;
    parse(path, &text)
}

/// Parse journal text. A damaged *last* line is a torn write and is ignored; damage anywhere
/// else is an error.
pub fn parse(path: &Path, text: &str) -> Result<(Header, Vec<JournalStep>)> {
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let mut header = None;
    let mut steps: Vec<JournalStep> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == n && !text.ends_with('\n');
        if line.trim().is_empty() {
            continue;
        }
        if i == 0 {
            match serde_json::from_str::<Header>(line) {
                Ok(h) if h.journal == "vmtune" => header = Some(h),
                Ok(_) | Err(_) if last => break,
                _ => {
                    return Err(ApplyError::journal(
                        path,
                        "line 1 is not a vmtune journal header",
                    ))
                }
            }
            continue;
        }
        let rec: Record = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(_) if last => break,
            Err(e) => return Err(ApplyError::journal(path, format!("line {}: {e}", i + 1))),
        };
        match rec.state {
            State::Intended => {
                let (Some(target), Some(previous), Some(new)) = (rec.target, rec.previous, rec.new)
                else {
                    return Err(ApplyError::journal(
                        path,
                        format!(
                            "line {}: intended record without target/previous/new",
                            i + 1
                        ),
                    ));
                };
                steps.push(JournalStep {
                    step: rec.step,
                    target,
                    previous,
                    new,
                    state: State::Intended,
                    applied: None,
                    undo: None,
                });
            }
            other => {
                let Some(s) = steps.iter_mut().rev().find(|s| s.step == rec.step) else {
                    return Err(ApplyError::journal(
                        path,
                        format!("line {}: outcome for unknown step {}", i + 1, rec.step),
                    ));
                };
                match other {
                    State::Undoing => {
                        let (Some(from), Some(to)) = (rec.previous, rec.new) else {
                            return Err(ApplyError::journal(
                                path,
                                format!("line {}: undoing record without previous/new", i + 1),
                            ));
                        };
                        s.undo = Some(Undo {
                            from,
                            to,
                            done: false,
                        });
                    }
                    State::Undone => match s.undo.as_mut() {
                        Some(u) => u.done = true,
                        None => {
                            return Err(ApplyError::journal(
                                path,
                                format!("line {}: undone before undoing step {}", i + 1, rec.step),
                            ))
                        }
                    },
                    _ => {
                        s.state = other;
                        if rec.applied.is_some() {
                            s.applied = rec.applied;
                        }
                    }
                }
            }
        }
    }
    let header = header.ok_or_else(|| ApplyError::journal(path, "empty or torn header"))?;
    Ok((header, steps))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The lock file next to a journal: `<journal dir>/lock` (`/run/vmtune/lock` by default).
pub fn lock_path(journal: &Path) -> PathBuf {
    parent_dir(journal).join("lock")
}

/// The lock of one journal alone: `<journal>.lock`. A long-running writer (`irq boost`, `irq
/// balance`) holds it for its life instead of the directory's [`lock_path`], so `apply` and the
/// libvirt hook are not kept waiting behind it; a restore takes both, so it never undoes a
/// journal whose writer still runs.
pub fn own_lock_path(journal: &Path) -> PathBuf {
    let mut p = journal.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// An exclusive `flock` held for the life of the value.
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Take the lock, waiting at most `wait`.
    pub fn acquire(path: &Path, wait: Duration) -> Result<Lock> {
        let dir = parent_dir(path);
        std::fs::create_dir_all(&dir).map_err(|e| ApplyError::io(&dir, e))?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| ApplyError::io(path, e))?;
        Lock::wait_for(file, path, wait, "another vmtune apply/restore")
    }

    /// Lock a file that exists, opened read-only (a sysfs attribute such as a hugepage
    /// pool's `nr_hugepages`: `flock` works on any inode, and nothing is created).
    pub fn acquire_existing(path: &Path, wait: Duration) -> Result<Lock> {
        let file = File::open(path).map_err(|e| ApplyError::io(path, e))?;
        Lock::wait_for(
            file,
            path,
            wait,
            "another vmtune apply/restore of this pool",
        )
    }

    fn wait_for(file: File, path: &Path, wait: Duration, who: &str) -> Result<Lock> {
        use rustix::fs::{flock, FlockOperation};
        let start = Instant::now();
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Lock { _file: file }),
                Err(rustix::io::Errno::WOULDBLOCK) if start.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(ApplyError::journal(
                        path,
                        format!("locked by {who} (waited {wait:?})"),
                    ))
                }
                Err(e) => return Err(ApplyError::io(path, e.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::Target;

    fn header() -> Header {
        Header {
            journal: "vmtune".into(),
            version: 1,
            created_unix: 1,
            apply_pid: 2,
            qemu_pid: Some(3),
        }
    }

    fn target(n: u32) -> Target {
        Target::Irq(crate::step::Irq {
            irq: n,
            path: PathBuf::from(format!("/proc/irq/{n}/smp_affinity_list")),
            name: "virtio0".into(),
            class: crate::step::IrqClass::Host,
            previous_effective: None,
        })
    }

    #[test]
    fn write_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/journal");
        let mut j = Journal::create(&p, &header()).unwrap();
        let s1 = j.intend(&target(24), "0-1", "0").unwrap();
        j.outcome(s1, State::Done, None).unwrap();
        let s2 = j.intend(&target(25), "0-1", "0").unwrap();
        drop(j);
        let (h, steps) = read(&p).unwrap();
        assert_eq!(h, header());
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].state, State::Done);
        assert_eq!(steps[1].step, s2);
        assert_eq!(steps[1].state, State::Intended);
        assert!(
            Journal::create(&p, &header()).is_err(),
            "second create must refuse"
        );
        let mut j = Journal::open_append(&p).unwrap();
        assert_eq!(j.intend(&target(26), "1", "0").unwrap(), 3);
    }

    #[test]
    fn torn_last_line_is_ignored_but_damage_elsewhere_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal");
        let mut j = Journal::create(&p, &header()).unwrap();
        j.intend(&target(24), "0-1", "0").unwrap();
        drop(j);
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"step\":2,\"state\":\"inten");
        let (_, steps) = parse(&p, &text).unwrap();
        assert_eq!(steps.len(), 1);
        let bad = text.replace("\"intended\"", "\"bogus\"");
        assert!(parse(&p, &bad).is_err());
        assert!(parse(&p, "").is_err());
        assert!(parse(&p, "garbage\n").is_err());
    }

    #[test]
    fn lock_excludes_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        let l = Lock::acquire(&p, Duration::from_millis(10)).unwrap();
        assert!(Lock::acquire(&p, Duration::from_millis(50)).is_err());
        drop(l);
        assert!(Lock::acquire(&p, Duration::from_millis(10)).is_ok());
    }
}

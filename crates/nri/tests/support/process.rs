//! Running the runtime's tools with a deadline, and the few process-level operations the
//! harness needs (signals, finding processes by command line, unmounting), through the
//! system's own `kill` and `umount` so that the tests need no extra crate.

use super::{Error, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished command printed.
#[derive(Debug)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

/// Run `cmd` to completion within `timeout` (killed after it). `Err` unless it exits 0; the
/// message names the command line and carries its output.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let line = command_line(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error(format!("cannot run {line}: {e}")))?;
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status =
        wait_timeout(&mut child, timeout).map_err(|e| Error(format!("waiting for {line}: {e}")))?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(Output { stdout, stderr }),
        Some(s) => Err(Error(format!(
            "{line} failed ({s}):\n{}{}",
            indent(&stderr),
            if stdout.trim().is_empty() {
                String::new()
            } else {
                format!("\nstdout:\n{}", indent(&stdout))
            }
        ))),
        None => Err(Error(format!(
            "{line} did not finish in {:.0} s (killed):\n{}",
            timeout.as_secs_f64(),
            indent(&stderr)
        ))),
    }
}

/// Wait for `child` at most `timeout`; kill it (SIGKILL) and reap it when the time is up
/// (`Ok(None)`).
pub fn wait_timeout(
    child: &mut Child,
    timeout: Duration,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kill -s SIGNAL PID` (SIGNAL like `TERM`, `KILL`).
pub fn signal(pid: u32, sig: &str) -> Result<()> {
    run(
        Command::new("kill").args(["-s", sig, &pid.to_string()]),
        Duration::from_secs(10),
    )
    .map(drop)
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // the state follows the parenthesized command name
            let after = s.rsplit_once(')')?.1;
            after
                .split_whitespace()
                .next()
                .map(|st| st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

/// The pids whose command line satisfies `pred` (its arguments, split).
pub fn find_processes(pred: impl Fn(&[String]) -> bool) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.is_empty() && pred(&args) {
            pids.push(pid);
        }
    }
    pids
}

/// Mount points at or below `dir`, deepest (and latest) first, from `/proc/self/mountinfo`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect();
    found.reverse();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found.dedup();
    found
}

/// Unmount every mount at or below `dir` (lazily, deepest first); `Err` lists what stayed.
pub fn unmount_all(dir: &Path) -> Result<()> {
    for m in mounts_under(dir) {
        let _ = run(
            Command::new("umount").arg("--lazy").arg(&m),
            Duration::from_secs(10),
        );
    }
    let left = mounts_under(dir);
    if left.is_empty() {
        Ok(())
    } else {
        Err(Error(format!(
            "still mounted under {}: {}",
            dir.display(),
            left.iter()
                .map(|m| m.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = oct.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The command as a shell would show it (for messages).
pub fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn indent(s: &str) -> String {
    let s = s.trim_end();
    if s.is_empty() {
        return "  (no output)".into();
    }
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

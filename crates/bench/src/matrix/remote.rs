//! The user's own guest as the measuring machine: each layout boots the domain's OS (its
//! disks behind the caller's overlays) and the matrix runs commands inside it through
//! **qemu-guest-agent** (`guest-exec` / `guest-exec-status` / `guest-file-*`, spoken through
//! libvirt: [`Domains::agent`]) or **SSH** (the `ssh` client, key authentication, batch
//! mode). Readiness is waited for (`guest-ping`, or an SSH `true`) up to the boot timeout.
//!
//! Per run: define → start → ready → copy `--guest-file`s to `/opt` → snapshot the guest's
//! topology ([`view::GATHER`], read by `topo`) and its `lscpu`, `numactl --hardware` and
//! `/proc/meminfo` → each `--run` command (its exit status, output, a timeout) → remove.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{view, Domains, LayoutSpec, MatrixOptions, UserResult};
use crate::error::{BenchError, Result};
use crate::guest::{sh_quote, RunOutput};
use crate::{signals, RunFile};

/// How commands reach the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Transport {
    /// vmtune's own measuring initramfs instead of the domain's disks (the built-in suite).
    Initramfs,
    /// qemu-guest-agent in the domain's own OS.
    Agent,
    /// SSH into the domain's own OS.
    Ssh(SshTarget),
}

impl Transport {
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Initramfs => "initramfs",
            Transport::Agent => "agent",
            Transport::Ssh(_) => "ssh",
        }
    }
}

/// Where SSH logs in: `user@host`, a port, a key (else the user's agent and defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    pub destination: String,
    pub port: u16,
    pub key: Option<PathBuf>,
}

/// A command's end inside the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// `None`: it did not end before its timeout (it was killed).
    pub rc: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A shell inside the guest.
pub trait Shell {
    /// Wait until the guest answers, up to `timeout`.
    fn ready(&mut self, timeout: Duration) -> Result<()>;
    /// `sh -c command`, up to `timeout`.
    fn exec(&mut self, command: &str, timeout: Duration) -> Result<Exec>;
    /// Write `data` to `path` in the guest (mode 0755).
    fn put(&mut self, data: &[u8], path: &str) -> Result<()>;
}

/// qemu-guest-agent through libvirt.
pub struct AgentShell<'a> {
    pub dom: &'a mut dyn Domains,
    pub name: String,
}

/// How long one agent request may take (libvirt's `--timeout`).
const AGENT_CALL: Duration = Duration::from_secs(10);
/// Bytes per `guest-file-write` (its base64 stays well under one argument's 128 KiB).
const CHUNK: usize = 48 * 1024;

impl AgentShell<'_> {
    fn call(&mut self, req: Value) -> Result<Value> {
        let reply = self.dom.agent(&self.name, &req.to_string(), AGENT_CALL)?;
        let v: Value = serde_json::from_str(reply.trim()).map_err(|e| {
            BenchError::Invalid(format!(
                "{}: the guest agent's reply is not JSON ({e}): {}",
                self.name,
                reply.lines().next().unwrap_or("")
            ))
        })?;
        if let Some(err) = v.get("error") {
            return Err(BenchError::Invalid(format!(
                "{}: the guest agent refused {}: {}",
                self.name,
                req["execute"],
                err.get("desc").unwrap_or(err)
            )));
        }
        Ok(v.get("return").cloned().unwrap_or(Value::Null))
    }

    fn decoded(v: &Value, key: &str) -> String {
        v.get(key)
            .and_then(Value::as_str)
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl Shell for AgentShell<'_> {
    fn ready(&mut self, timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        let mut last = String::new();
        while t0.elapsed() < timeout {
            if signals::interrupted() {
                return Err(BenchError::Interrupted);
            }
            match self.call(json!({"execute": "guest-ping"})) {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(BenchError::Invalid(format!(
            "{}: the guest agent did not answer in {} s (is qemu-guest-agent installed and running in the guest?); last: {last}",
            self.name,
            timeout.as_secs()
        )))
    }

    fn exec(&mut self, command: &str, timeout: Duration) -> Result<Exec> {
        let started = self.call(json!({
            "execute": "guest-exec",
            "arguments": {"path": "/bin/sh", "arg": ["-c", command], "capture-output": true}
        }))?;
        let pid = started.get("pid").and_then(Value::as_i64).ok_or_else(|| {
            BenchError::Invalid(format!("{}: guest-exec returned no pid", self.name))
        })?;
        let t0 = Instant::now();
        let mut wait = Duration::from_millis(100);
        loop {
            let st =
                self.call(json!({"execute": "guest-exec-status", "arguments": {"pid": pid}}))?;
            if st.get("exited").and_then(Value::as_bool) == Some(true) {
                let rc = st
                    .get("exitcode")
                    .and_then(Value::as_i64)
                    .map(|c| c as i32)
                    .or_else(|| {
                        st.get("signal")
                            .and_then(Value::as_i64)
                            .map(|s| 128 + s as i32)
                    });
                return Ok(Exec {
                    rc,
                    stdout: Self::decoded(&st, "out-data"),
                    stderr: Self::decoded(&st, "err-data"),
                });
            }
            if signals::interrupted() {
                return Err(BenchError::Interrupted);
            }
            if t0.elapsed() > timeout {
                let _ = self.call(json!({
                    "execute": "guest-exec",
                    "arguments": {"path": "/bin/kill", "arg": ["-9", pid.to_string()]}
                }));
                return Ok(Exec {
                    rc: None,
                    stdout: String::new(),
                    stderr: format!("killed after {} s", timeout.as_secs()),
                });
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    }

    fn put(&mut self, data: &[u8], path: &str) -> Result<()> {
        let h = self.call(
            json!({"execute": "guest-file-open", "arguments": {"path": path, "mode": "w"}}),
        )?;
        let handle = h.as_i64().ok_or_else(|| {
            BenchError::Invalid(format!("{}: guest-file-open gave no handle", self.name))
        })?;
        let mut wrote = Ok(());
        for chunk in data.chunks(CHUNK) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(chunk);
            if let Err(e) = self.call(json!({
                "execute": "guest-file-write",
                "arguments": {"handle": handle, "buf-b64": b64}
            })) {
                wrote = Err(e);
                break;
            }
        }
        let closed =
            self.call(json!({"execute": "guest-file-close", "arguments": {"handle": handle}}));
        wrote?;
        closed?;
        let x = self.exec(&format!("chmod 755 {}", sh_quote(path)), AGENT_CALL)?;
        match x.rc {
            Some(0) => Ok(()),
            _ => Err(BenchError::Invalid(format!(
                "{}: chmod {path} in the guest failed: {}",
                self.name,
                x.stderr.trim()
            ))),
        }
    }
}

/// The `ssh` client, batch mode (never a password prompt), the guest's host key not kept.
/// One connection per run: the first login becomes a master (`ControlMaster=auto`) that
/// every later command of the run shares, so a guest pays one key exchange, not one per
/// command (under TCG each costs seconds); the master is told to exit when the shell drops.
pub struct SshShell {
    pub target: SshTarget,
    /// The master's socket, short enough for a Unix socket path.
    control: PathBuf,
}

impl SshShell {
    pub fn new(target: SshTarget) -> SshShell {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let control = std::env::temp_dir().join(format!("vmtune-ssh-{}-{n}", std::process::id()));
        SshShell { target, control }
    }

    /// `ssh` with this run's master socket.
    fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-o")
            .arg(format!("ControlPath={}", self.control.display()));
        c
    }

    fn command(&self, connect_timeout: u64) -> Command {
        let mut c = self.ssh();
        c.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=300"]);
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
        ])
        .arg(format!("ConnectTimeout={connect_timeout}"))
        .arg("-p")
        .arg(self.target.port.to_string());
        if let Some(k) = &self.target.key {
            c.arg("-i").arg(k).args(["-o", "IdentitiesOnly=yes"]);
        }
        c.arg(&self.target.destination);
        c
    }

    fn run(&self, mut c: Command, input: Option<&[u8]>, timeout: Duration) -> Result<Exec> {
        c.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|e| BenchError::Sys {
            what: "running ssh (apt-get install openssh-client)".into(),
            source: e,
        })?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            let _ = stdin.write_all(data);
        }
        let out = wait_output(child, timeout)?;
        Ok(out)
    }
}

/// Wait for `child` up to `timeout` (then kill it), reading its output.
fn wait_output(mut child: std::process::Child, timeout: Duration) -> Result<Exec> {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut o = Vec::new();
        if let Some(s) = out.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut o);
        }
        o
    });
    let ereader = std::thread::spawn(move || {
        let mut o = Vec::new();
        if let Some(s) = err.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut o);
        }
        o
    });
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() > timeout || signals::interrupted() => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                return Err(BenchError::Sys {
                    what: "waiting for ssh".into(),
                    source: e,
                })
            }
        }
    };
    let stdout = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&ereader.join().unwrap_or_default()).into_owned();
    if signals::interrupted() {
        return Err(BenchError::Interrupted);
    }
    Ok(Exec {
        rc: status.and_then(|s| s.code()),
        stdout,
        stderr,
    })
}

impl Drop for SshShell {
    fn drop(&mut self) {
        if self.control.exists() {
            let mut c = self.ssh();
            c.args(["-O", "exit", "-p"])
                .arg(self.target.port.to_string())
                .arg(&self.target.destination);
            let _ = self.run(c, None, Duration::from_secs(10));
        }
    }
}

impl Shell for SshShell {
    fn ready(&mut self, timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        let mut last = String::new();
        while t0.elapsed() < timeout {
            // the connect timeout covers the banner too, which a booting guest under load
            // (TCG, a busy host) can take well over 5 s to send
            let mut c = self.command(30);
            c.arg("true");
            let x = self.run(c, None, Duration::from_secs(60))?;
            if x.rc == Some(0) {
                return Ok(());
            }
            last = x.stderr.trim().to_string();
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(BenchError::Invalid(format!(
            "ssh {} -p {}: no login in {} s; last: {}",
            self.target.destination,
            self.target.port,
            timeout.as_secs(),
            if last.is_empty() { "no answer" } else { &last }
        )))
    }

    fn exec(&mut self, command: &str, timeout: Duration) -> Result<Exec> {
        let mut c = self.command(30);
        // ssh joins its arguments into one remote command line: one quoted word for sh -c
        c.arg(format!("sh -c {}", sh_quote(command)));
        let x = self.run(c, None, timeout)?;
        if x.rc == Some(255) {
            return Err(BenchError::Invalid(format!(
                "ssh {}: {}",
                self.target.destination,
                x.stderr.trim()
            )));
        }
        Ok(x)
    }

    fn put(&mut self, data: &[u8], path: &str) -> Result<()> {
        let mut c = self.command(30);
        let q = sh_quote(path);
        c.arg(format!("cat > {q} && chmod 755 {q}"));
        let x = self.run(c, Some(data), Duration::from_secs(120))?;
        match x.rc {
            Some(0) => Ok(()),
            _ => Err(BenchError::Invalid(format!(
                "ssh {}: writing {path}: {}",
                self.target.destination,
                x.stderr.trim()
            ))),
        }
    }
}

/// The guest's own description of itself, recorded with each run: the section name and the
/// command. `readers::view` reads each.
const VIEW_FILES: [(&str, &str); 3] = [
    ("lscpu", "lscpu"),
    ("numactl", "numactl --hardware"),
    ("meminfo", "cat /proc/meminfo"),
];
const VIEW_MARK: &str = "### vmtune guest view: ";

/// A run's recorded `view_text` read back (`readers::view`), its sections merged; `None`
/// where none of them reads.
pub fn guest_view(text: &str) -> Option<crate::readers::view::GuestView> {
    use crate::readers::view;
    let mut got: Option<view::GuestView> = None;
    for part in text.split(VIEW_MARK).skip(1) {
        let (section, body) = part.split_once('\n').unwrap_or((part, ""));
        let read = match section.trim() {
            "lscpu" => view::lscpu(body),
            "numactl" => view::numactl_hardware(body),
            "meminfo" => view::meminfo(body),
            _ => continue,
        };
        if let Ok(v) = read {
            got = Some(match got {
                Some(g) => g.merge(v),
                None => v,
            });
        }
    }
    got
}

/// Per layout, the guest's view of its first counted run that recorded one.
pub fn views(
    records: &[super::RunRecord],
) -> std::collections::BTreeMap<String, crate::readers::view::GuestView> {
    let mut out = std::collections::BTreeMap::new();
    for r in records.iter().filter(|r| r.counts()) {
        if out.contains_key(&r.layout) {
            continue;
        }
        if let Some(v) = r.view_text.as_deref().and_then(guest_view) {
            out.insert(r.layout.clone(), v);
        }
    }
    out
}

/// What one run in the user's own guest brought back.
pub struct GuestRunOutput {
    pub suite: RunFile,
    pub user: Vec<UserResult>,
    /// The guest's topology as `topo` reads its sysfs; `Err`: why it could not be read.
    pub view: std::result::Result<topo::Host, String>,
    /// `lscpu`, `numactl --hardware`, `/proc/meminfo`'s huge lines, as the guest printed them.
    pub view_text: String,
}

/// Boot the user's own OS in layout `l` as `name`, wait for it, measure, remove it.
pub fn one(
    l: &LayoutSpec,
    name: &str,
    opts: &MatrixOptions,
    dom: &mut dyn Domains,
) -> Result<GuestRunOutput> {
    let xml = dom.guest_xml(l, name)?;
    let xml_path = opts.workdir.join(format!("{name}.xml"));
    std::fs::write(&xml_path, &xml).map_err(|e| BenchError::io(&xml_path, e))?;
    dom.define(name, &xml_path)?;
    let got = dom.start(name).and_then(|()| inside(l, name, opts, dom));
    let removed = dom.remove(name);
    let got = got?;
    removed?;
    Ok(got)
}

fn inside(
    l: &LayoutSpec,
    name: &str,
    opts: &MatrixOptions,
    dom: &mut dyn Domains,
) -> Result<GuestRunOutput> {
    let mut agent;
    let mut ssh;
    let sh: &mut dyn Shell = match &opts.transport {
        Transport::Ssh(t) => {
            ssh = SshShell::new(t.clone());
            &mut ssh
        }
        _ => {
            agent = AgentShell {
                dom,
                name: name.to_string(),
            };
            &mut agent
        }
    };
    sh.ready(opts.timeout)?;
    if !opts.files.is_empty() {
        must(sh.exec("mkdir -p /opt", AGENT_CALL)?, "mkdir -p /opt")?;
    }
    for f in &opts.files {
        let data = std::fs::read(f).map_err(|e| BenchError::io(f, e))?;
        let base = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        sh.put(&data, &format!("/opt/{base}"))?;
    }
    let view = gather(sh, &opts.workdir, name);
    let mut text = String::new();
    for (section, command) in VIEW_FILES {
        let out = sh
            .exec(command, Duration::from_secs(30))
            .ok()
            .filter(|x| x.rc == Some(0))
            .map(|x| x.stdout);
        text.push_str(&format!("{VIEW_MARK}{section}\n"));
        text.push_str(out.as_deref().unwrap_or(""));
    }
    let mut user = Vec::new();
    for r in &opts.user_runs {
        let x = sh.exec(&r.command, opts.timeout)?;
        let mut output = x.stdout;
        if !x.stderr.trim().is_empty() {
            output.push_str(&x.stderr);
        }
        user.push(UserResult::read(&RunOutput {
            name: r.name.clone(),
            rc: x.rc,
            output,
        }));
    }
    let mut suite = RunFile::new(l.name.clone());
    suite.host = view.as_ref().ok().cloned();
    suite.host_error = view.as_ref().err().cloned();
    Ok(GuestRunOutput {
        suite,
        user,
        view,
        view_text: text,
    })
}

fn must(x: Exec, what: &str) -> Result<()> {
    match x.rc {
        Some(0) => Ok(()),
        _ => Err(BenchError::Invalid(format!(
            "{what} in the guest failed: {}",
            x.stderr.trim()
        ))),
    }
}

/// The guest's topology: [`view::GATHER`]'s snapshot, read by `topo` like a host's.
fn gather(
    sh: &mut dyn Shell,
    workdir: &Path,
    name: &str,
) -> std::result::Result<topo::Host, String> {
    let x = sh
        .exec(view::GATHER, Duration::from_secs(120))
        .map_err(|e| e.to_string())?;
    if x.rc != Some(0) {
        return Err(format!(
            "the guest's topology snapshot failed (exit {}): {}",
            x.rc.map_or("none".into(), |c| c.to_string()),
            x.stderr.lines().last().unwrap_or("")
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(x.stdout.trim())
        .map_err(|e| format!("the guest's topology snapshot is not base64: {e}"))?;
    let path = workdir.join(format!("{name}.view.tar.gz"));
    std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let host = topo::load(Some(&path)).map_err(|e| format!("the guest's topology: {e}"));
    let _ = std::fs::remove_file(&path);
    host
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;

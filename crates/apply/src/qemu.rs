//! Finding a running QEMU's threads: over QMP (`query-cpus-fast`, `query-iothreads`) or from
//! /proc/PID/task/*/comm (`CPU n/KVM`, `CPU n/TCG`, `IO <id>`; QEMU names its threads only
//! with `-name …,debug-threads=on`, which libvirt always passes).
//!
//! The QMP client is small and synchronous: read the greeting, send `qmp_capabilities`, then
//! one command at a time; asynchronous `event` lines in between are skipped; every read and
//! write has a timeout.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::error::{ApplyError, Result};
use crate::proc;

/// A QEMU process and the role of each of its threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QemuThreads {
    pub pid: i32,
    /// (vCPU index, thread id), sorted by index.
    pub vcpus: Vec<(u32, i32)>,
    /// (iothread id, thread id).
    pub iothreads: Vec<(String, i32)>,
    /// Every other thread of the process: main loop, workers, RCU, …
    pub emulator: Vec<i32>,
}

/// A connected QMP session.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    socket: String,
}

impl Qmp {
    /// Connect, read the greeting and leave capabilities negotiation mode.
    pub fn connect(socket: &Path, timeout: Duration) -> Result<Qmp> {
        let name = socket.display().to_string();
        let err = |m: String| ApplyError::Qemu(format!("QMP {name}: {m}"));
        let stream = UnixStream::connect(socket).map_err(|e| err(format!("connect: {e}")))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| err(e.to_string()))?;
        let writer = stream.try_clone().map_err(|e| err(e.to_string()))?;
        let mut q = Qmp {
            reader: BufReader::new(stream),
            writer,
            socket: name,
        };
        let greeting = q.read_message()?;
        if greeting.get("QMP").is_none() {
            return Err(q.err(format!("expected the QMP greeting, got {greeting}")));
        }
        q.execute("qmp_capabilities")?;
        Ok(q)
    }

    fn err(&self, m: String) -> ApplyError {
        ApplyError::Qemu(format!("QMP {}: {m}", self.socket))
    }

    fn read_message(&mut self) -> Result<Value> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|e| self.err(format!("read: {e}")))?;
        if n == 0 {
            return Err(self.err("connection closed".into()));
        }
        serde_json::from_str(&line).map_err(|e| self.err(format!("bad JSON from QEMU: {e}")))
    }

    /// Run a command without arguments and return its `return` value.
    pub fn execute(&mut self, command: &str) -> Result<Value> {
        let msg = serde_json::json!({ "execute": command });
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .map_err(|e| self.err(format!("write: {e}")))?;
        loop {
            let v = self.read_message()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                let class = e.get("class").and_then(Value::as_str).unwrap_or("?");
                let desc = e.get("desc").and_then(Value::as_str).unwrap_or("?");
                return Err(self.err(format!("{command}: {class}: {desc}")));
            }
            // an asynchronous event: skip
        }
    }

    /// `query-cpus-fast`: (cpu-index, thread-id) per vCPU.
    pub fn vcpu_threads(&mut self) -> Result<Vec<(u32, i32)>> {
        let r = self.execute("query-cpus-fast")?;
        parse_cpus_fast(&r).map_err(|m| self.err(m))
    }

    /// `query-iothreads`: (id, thread-id) per iothread.
    pub fn iothreads(&mut self) -> Result<Vec<(String, i32)>> {
        let r = self.execute("query-iothreads")?;
        parse_iothreads(&r).map_err(|m| self.err(m))
    }
}

/// Parse the `return` of `query-cpus-fast`.
pub fn parse_cpus_fast(v: &Value) -> Result<Vec<(u32, i32)>, String> {
    let arr = v.as_array().ok_or("query-cpus-fast: not a list")?;
    let mut out = Vec::new();
    for c in arr {
        let idx = c
            .get("cpu-index")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .ok_or("query-cpus-fast: entry without cpu-index")?;
        let tid = c
            .get("thread-id")
            .and_then(Value::as_i64)
            .and_then(|i| i32::try_from(i).ok())
            .filter(|t| *t > 0)
            .ok_or("query-cpus-fast: entry without a valid thread-id")?;
        out.push((idx, tid));
    }
    out.sort_unstable();
    Ok(out)
}

/// Parse the `return` of `query-iothreads`.
pub fn parse_iothreads(v: &Value) -> Result<Vec<(String, i32)>, String> {
    let arr = v.as_array().ok_or("query-iothreads: not a list")?;
    let mut out = Vec::new();
    for t in arr {
        let id = t
            .get("id")
            .and_then(Value::as_str)
            .ok_or("query-iothreads: entry without id")?;
        let tid = t
            .get("thread-id")
            .and_then(Value::as_i64)
            .and_then(|i| i32::try_from(i).ok())
            .filter(|t| *t > 0)
            .ok_or("query-iothreads: entry without a valid thread-id")?;
        out.push((id.to_string(), tid));
    }
    Ok(out)
}

/// Role of a thread from its `comm`: `CPU 3/KVM` → vCPU 3, `IO iothread0` → iothread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommRole {
    Vcpu(u32),
    IoThread(String),
    Other,
}

pub fn classify_comm(comm: &str) -> CommRole {
    if let Some(rest) = comm.strip_prefix("CPU ") {
        if let Some((n, accel)) = rest.split_once('/') {
            if !accel.is_empty() {
                if let Ok(i) = n.parse() {
                    return CommRole::Vcpu(i);
                }
            }
        }
    }
    if let Some(id) = comm.strip_prefix("IO ") {
        if !id.is_empty() {
            return CommRole::IoThread(id.to_string());
        }
    }
    CommRole::Other
}

/// Threads of QEMU process `pid` found by their names.
pub fn threads_from_proc(proc_root: &Path, pid: i32) -> Result<QemuThreads> {
    let tids =
        proc::tids(proc_root, pid).map_err(|e| ApplyError::Qemu(format!("process {pid}: {e}")))?;
    let mut vcpus = Vec::new();
    let mut iothreads = Vec::new();
    let mut emulator = Vec::new();
    for tid in tids {
        let Ok(c) = proc::comm(proc_root, pid, tid) else {
            continue;
        };
        match classify_comm(&c) {
            CommRole::Vcpu(i) => vcpus.push((i, tid)),
            CommRole::IoThread(id) => iothreads.push((id, tid)),
            CommRole::Other => emulator.push(tid),
        }
    }
    if vcpus.is_empty() {
        return Err(ApplyError::Qemu(format!(
            "process {pid} has no threads named \"CPU n/…\": start QEMU with -name NAME,debug-threads=on or use --qmp SOCKET"
        )));
    }
    vcpus.sort_unstable();
    Ok(QemuThreads {
        pid,
        vcpus,
        iothreads,
        emulator,
    })
}

/// Threads of the QEMU behind a QMP socket. The process id is the thread group of the first
/// vCPU thread; emulator threads are the process's other threads.
pub fn threads_from_qmp(proc_root: &Path, socket: &Path, timeout: Duration) -> Result<QemuThreads> {
    let mut q = Qmp::connect(socket, timeout)?;
    let vcpus = q.vcpu_threads()?;
    let iothreads = q.iothreads()?;
    let first = vcpus.first().map(|v| v.1).ok_or_else(|| {
        ApplyError::Qemu(format!("QMP {}: QEMU reports no vCPUs", socket.display()))
    })?;
    let pid = proc::tgid(proc_root, first)
        .ok_or_else(|| ApplyError::Qemu(format!("vCPU thread {first} is not visible in /proc")))?;
    let all = proc::tids(proc_root, pid)?;
    let special: Vec<i32> = vcpus
        .iter()
        .map(|v| v.1)
        .chain(iothreads.iter().map(|t| t.1))
        .collect();
    let emulator = all.into_iter().filter(|t| !special.contains(t)).collect();
    Ok(QemuThreads {
        pid,
        vcpus,
        iothreads,
        emulator,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_roles() {
        assert_eq!(classify_comm("CPU 0/KVM"), CommRole::Vcpu(0));
        assert_eq!(classify_comm("CPU 12/TCG"), CommRole::Vcpu(12));
        assert_eq!(
            classify_comm("IO iothread0"),
            CommRole::IoThread("iothread0".into())
        );
        assert_eq!(classify_comm("qemu-system-x86"), CommRole::Other);
        assert_eq!(classify_comm("CPU x/KVM"), CommRole::Other);
        assert_eq!(classify_comm("CPU 1/"), CommRole::Other);
        assert_eq!(classify_comm("IO "), CommRole::Other);
        assert_eq!(
            classify_comm("IO mon_iothread"),
            CommRole::IoThread("mon_iothread".into())
        );
    }

    #[test]
    fn qmp_replies() {
        let v: Value = serde_json::from_str(
            r#"[{"thread-id": 25627, "props": {"core-id": 0, "thread-id": 0, "socket-id": 1}, "qom-path": "/machine/unattached/device[2]", "cpu-index": 1, "target": "x86_64"},
                {"thread-id": 25626, "props": {"core-id": 0, "thread-id": 0, "socket-id": 0}, "qom-path": "/machine/unattached/device[0]", "cpu-index": 0, "target": "x86_64"}]"#,
        )
        .unwrap();
        assert_eq!(parse_cpus_fast(&v).unwrap(), vec![(0, 25626), (1, 25627)]);
        assert!(parse_cpus_fast(&serde_json::json!([{"cpu-index": 0}])).is_err());
        assert!(parse_cpus_fast(&serde_json::json!({})).is_err());
        let io: Value =
            serde_json::json!([{"id": "iothread0", "thread-id": 3144, "poll-max-ns": 32768}]);
        assert_eq!(
            parse_iothreads(&io).unwrap(),
            vec![("iothread0".to_string(), 3144)]
        );
        assert!(parse_iothreads(&serde_json::json!([{"id": "x", "thread-id": -1}])).is_err());
    }
}

//! What a boot leaves behind as it runs: the journal lines of its shim and of its guest's
//! console (kernel and kata-agent records), and the host's pin calls; and the short boots of
//! other shims that share the journal.

use serde_json::json;

use super::journal::{Body, JLine};
use super::spec::Spec;
use super::{ns, rfc3339, Ids, Rng};
use crate::parse::time::{Nanos, NS_PER_S};

/// One `vfio_pin_pages_remote` call on the host.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pin {
    pub(super) start: Nanos,
    /// How long it took, ms (as the trace prints it).
    pub(super) ms: u64,
    pub(super) vaddr: u64,
    pub(super) size: u64,
    pub(super) pid: u32,
}

impl Pin {
    /// When the call returned.
    pub(super) fn end(&self) -> Nanos {
        self.start + (self.ms as Nanos) * 1_000_000
    }
}

/// The journal lines and the host pin calls generated so far.
#[derive(Default)]
pub(super) struct Out {
    pub(super) lines: Vec<JLine>,
    pub(super) pins: Vec<Pin>,
}

impl Out {
    /// The lines logged between `from` and `to` (a journal that starts late or ends early),
    /// taken out.
    pub(super) fn take_lines(&mut self, from: Nanos, to: Nanos) -> Vec<JLine> {
        std::mem::take(&mut self.lines)
            .into_iter()
            .filter(|l| l.t >= from && l.t <= to)
            .collect()
    }
}

/// Writes one shim's lines: its own, and its guest's console as the shim relays it.
pub(super) struct Guest<'a> {
    pub(super) out: &'a mut Out,
    pub(super) rng: &'a mut Rng,
    pub(super) sandbox: String,
    pub(super) shim: u32,
    /// The guest kernel's start (its console stamps count from it).
    pub(super) boot: Nanos,
    pub(super) agent_offset: Nanos,
}

impl Guest<'_> {
    fn delay(&mut self) -> Nanos {
        ns(self.rng.f(0.001, 0.015))
    }
    pub(super) fn kernel(&mut self, t: Nanos, text: &str) {
        let g = (t - self.boot) as f64 / 1e9;
        let d = self.delay();
        self.out.lines.push(JLine {
            t: t + d,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Console(format!("[{g:>12.6}] {text}")),
        });
    }
    /// A console line without a stamp (the second line of a two-line kernel message).
    pub(super) fn console_raw(&mut self, t: Nanos, text: &str) {
        let d = self.delay();
        self.out.lines.push(JLine {
            t: t + d,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Console(text.to_string()),
        });
    }
    pub(super) fn agent(
        &mut self,
        t: Nanos,
        subsystem: &str,
        msg: &str,
        extra: Option<(&str, String)>,
    ) {
        let mut v = json!({
            "msg": msg,
            "level": "INFO",
            "ts": rfc3339(t + self.agent_offset, None),
            "pid": "1",
            "version": "0.1.0",
            "subsystem": subsystem,
            "name": "kata-agent",
            "source": "agent",
        });
        if let (Some((k, x)), Some(m)) = (extra, v.as_object_mut()) {
            m.insert(k.to_string(), json!(x));
        }
        let d = self.delay();
        self.out.lines.push(JLine {
            t: t + d,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Console(v.to_string()),
        });
    }
    pub(super) fn uevent(
        &mut self,
        t: Nanos,
        action: &str,
        devpath: &str,
        subsystem: &str,
        seq: u64,
    ) {
        let ev = format!(
            "Uevent {{ action: \"{action}\", devpath: \"{devpath}\", devname: \"\", subsystem: \"{subsystem}\", seqnum: \"{seq}\", interface: \"\" }}"
        );
        self.agent(t, "uevent", "got uevent message", Some(("event", ev)));
    }
    pub(super) fn shim(
        &mut self,
        t: Nanos,
        level: &'static str,
        msg: &str,
        error: Option<String>,
        prefix_only: bool,
    ) {
        self.shim_with(t, level, msg, error, prefix_only, None);
    }
    /// A shim line of `subsystem` with more `fields` after `sandbox=` (each with its
    /// leading space).
    pub(super) fn shim_with(
        &mut self,
        t: Nanos,
        level: &'static str,
        msg: &str,
        error: Option<String>,
        prefix_only: bool,
        extra: Option<(&'static str, String)>,
    ) {
        self.out.lines.push(JLine {
            t,
            sandbox: self.sandbox.clone(),
            shim: self.shim,
            body: Body::Shim {
                level,
                msg: msg.to_string(),
                error,
                prefix_only,
                extra,
            },
        });
    }
    /// A line of containerd's own (no shim pid) with more `fields` after `msg=`.
    pub(super) fn containerd(&mut self, t: Nanos, level: &'static str, msg: &str, fields: String) {
        self.out.lines.push(JLine {
            t,
            sandbox: self.sandbox.clone(),
            shim: 0,
            body: Body::Containerd {
                level,
                msg: msg.to_string(),
                fields,
            },
        });
    }
    /// A line of containerd's CRI plugin (no shim pid).
    pub(super) fn cri(&mut self, t: Nanos, msg: &str, error: String) {
        self.out.lines.push(JLine {
            t,
            sandbox: self.sandbox.clone(),
            shim: 0,
            body: Body::Cri {
                msg: msg.to_string(),
                error,
            },
        });
    }
}

/// The same sandbox id booted two days earlier by another shim: its first lines.
pub(super) fn earlier_boot(spec: &Spec, ids: &Ids, out: &mut Out, rng: &mut Rng) {
    let t = ids.t0 - 2 * 86_400 * NS_PER_S;
    let old_shim = ids.shim_pid.wrapping_sub(7777).max(2);
    let mut g = Guest {
        out,
        rng,
        sandbox: ids.sandbox.clone(),
        shim: old_shim,
        boot: t + ns(5.0),
        agent_offset: spec.agent_offset_ms * 1_000_000,
    };
    g.shim(t, "info", "Creating sandbox", None, false);
    g.kernel(
        t + ns(5.0),
        "Linux version 6.12.47-nvidia-gpu (root@kata) #1 SMP",
    );
    g.kernel(t + ns(6.1), "Run /init as init process");
    g.agent(
        t + ns(6.3),
        "rpc",
        "rpc call from shim to agent: \"create_sandbox\"",
        None,
    );
}

/// Another sandbox's (smaller) boot about the same time: its first lines and a few agent
/// calls.
pub(super) fn other_sandbox(ids: &Ids, out: &mut Out, rng: &mut Rng) {
    let other = rng.hex(64);
    let t = ids.t0 + ns(rng.f(-30.0, 30.0));
    let mut g = Guest {
        out,
        rng,
        sandbox: other,
        shim: ids.shim_pid + 1,
        boot: t + ns(3.0),
        agent_offset: 0,
    };
    g.shim(t, "info", "Creating sandbox", None, false);
    g.kernel(t + ns(3.0), "Linux version 6.12.47 (root@kata) #1 SMP");
    g.kernel(t + ns(4.1), "Run /init as init process");
    for i in 0..5 {
        g.agent(
            t + ns(4.3 + f64::from(i)),
            "rpc",
            "rpc call from shim to agent: \"stats_container\"",
            None,
        );
    }
}

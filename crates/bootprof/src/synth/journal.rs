//! The containerd journal as `journalctl -o FORMAT` prints it: the boot's shim, console and
//! CRI lines in host time order, with noise from other units between them.

use super::spec::{CiClock, JournalFormat, ProxyConsole, Spec};
use super::{ns, rfc3339, weekday, zone_s, Rng, MONTHS};
use crate::parse::time::{civil_from_nanos, Nanos, NS_PER_S};

/// What a journal line carries.
pub(super) enum Body {
    Shim {
        level: &'static str,
        msg: String,
        error: Option<String>,
        prefix_only: bool,
        /// More fields after `sandbox=` (`vfio-device-BDF="…" vfio-device-ID=…`), with the
        /// subsystem they replace: `(subsystem, fields)`.
        extra: Option<(&'static str, String)>,
    },
    Console(String),
    /// containerd's CRI plugin: no shim pid, the sandbox named in the text.
    Cri {
        msg: String,
        error: String,
    },
    /// containerd's own line: `msg=` and more fields (` id=… namespace=…`).
    Containerd {
        level: &'static str,
        msg: String,
        fields: String,
    },
}

pub(super) struct JLine {
    /// When the host logged it.
    pub(super) t: Nanos,
    pub(super) sandbox: String,
    pub(super) shim: u32,
    pub(super) body: Body,
}

/// The abbreviation `short-full` prints for a zone (`%Z`).
fn zone_name(zone_s: i64) -> String {
    match zone_s {
        0 => "UTC".into(),
        28_800 => "CST".into(),
        -14_400 => "EDT".into(),
        19_800 => "IST".into(),
        3_600 => "CET".into(),
        o => crate::parse::time::format_offset(o).replace(':', ""),
    }
}

/// A CI runner's clock before a line the host logged at `t`: the runner prints it 2.5 s
/// later, in UTC.
fn ci_clock(t: Nanos, c: CiClock) -> String {
    let at = t + 2 * NS_PER_S + NS_PER_S / 2;
    let (y, mo, d, h, mi, s, sub) = civil_from_nanos(at);
    match c {
        CiClock::Hms => format!("{h:02}:{mi:02}:{s:02} "),
        CiClock::Bracketed => format!("[{h:02}:{mi:02}:{s:02}] "),
        CiClock::Millis => format!("{h:02}:{mi:02}:{s:02}.{:03} ", sub / 1_000_000),
        CiClock::Rfc3339 => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:07}Z ",
            sub / 100
        ),
    }
}

/// A journald prefix of `spec`'s format in the host's zone, with the host and the
/// identifier: `Nov 20 17:55:38 host ident: ` (nothing for `-o cat`).
fn prefix(t: Nanos, zone_s: i64, spec: &Spec, ident: &str) -> String {
    let local = t + zone_s * NS_PER_S;
    let (y, mo, d, h, mi, s, sub) = civil_from_nanos(local);
    let wd = weekday(local);
    let month = if spec.zh_prefix {
        format!("{mo}月")
    } else {
        MONTHS
            .get(mo as usize - 1)
            .copied()
            .unwrap_or("Jan")
            .to_string()
    };
    let off = crate::parse::time::format_offset(zone_s);
    let stamp = match spec.journal_format {
        JournalFormat::Short => format!("{month} {d:02} {h:02}:{mi:02}:{s:02}"),
        JournalFormat::ShortPrecise => {
            format!("{month} {d:02} {h:02}:{mi:02}:{s:02}.{:06}", sub / 1000)
        }
        JournalFormat::ShortIso => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}",
            off.replace(':', "")
        ),
        JournalFormat::ShortIsoPrecise => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}{off}",
            sub / 1000
        ),
        JournalFormat::ShortFull => format!(
            "{wd} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} {}",
            zone_name(zone_s)
        ),
        JournalFormat::Cat | JournalFormat::Json => return String::new(),
    };
    format!("{stamp} {} {ident}: ", spec.host)
}

/// Go `%q` of a console payload.
pub(super) fn go_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Kubelet lines across the boot from `t0` to `end` (`kubelet[2211]: message`), in the
/// order drawn.
fn noise(rng: &mut Rng, t0: Nanos, end: Nanos) -> Vec<(Nanos, String)> {
    let span = ((end - t0) as f64 / 1e9).max(1.0);
    (0..(span as usize / 4 + 3))
        .map(|i| {
            let t = t0 + ns(rng.f(0.0, span));
            (
                t,
                format!(
                    "kubelet[2211]: I1120 {:02}:00:00.000000 2211 prober.go:107] \"Probe failed\" probeType=\"Readiness\" pod=\"default/web-{i}\"",
                    i % 24
                ),
            )
        })
        .collect()
}

/// Write the journal: sort by host time, add noise from other units, format. With
/// [`Spec::dup_identifiers`], every shim line with a `time=` is written twice, as
/// `containerd[…]` and as `kata[SHIM]`, in either order, the second copy sometimes after
/// the next line; returns the text and the number of such copies.
pub(super) fn write(
    spec: &Spec,
    rng: &mut Rng,
    mut lines: Vec<JLine>,
    t0: Nanos,
    end: Nanos,
) -> (String, u64) {
    let zone_s = zone_s(spec);
    let noise = noise(rng, t0, end);
    lines.sort_by_key(|l| l.t);
    let cat = spec.journal_format == JournalFormat::Cat;
    let field_zone = spec.zoned_time_field.then_some(zone_s);
    let mut text = String::new();
    let mut ni = noise.into_iter().peekable();
    // a copy held back to follow the next line: (time, identifier, message)
    let mut held: Option<(Nanos, String, String)> = None;
    let mut copies = 0u64;
    // the Rust shims that have logged their QEMU command (it names their sandbox)
    let mut named = std::collections::HashSet::new();
    for (i, l) in lines.iter().enumerate() {
        while let Some((t, n)) = ni.peek() {
            if *t > l.t {
                break;
            }
            if !cat {
                // `kubelet[2211]: message`: the identifier is the noise line's own
                if let Some((ident, msg)) = n.split_once(": ") {
                    journal_entry(&mut text, *t, zone_s, spec, ident, msg);
                }
            }
            ni.next();
        }
        if let Some(msg) = rust_message(spec, l) {
            let ident = format!("kata[{}]", l.shim);
            journal_entry(&mut text, l.t, zone_s, spec, &ident, &msg);
            if named.insert(l.shim) {
                let cmd = format!(
                    "qemu cmd: Command {{ std: \"/opt/kata/bin/qemu-system-x86_64\" \"-name\" \"sandbox-{sb}\" \"-chardev\" \"socket,id=charconsole0,server=on,wait=off,path=/run/kata/{sb}/console.sock\", kill_on_drop: false }}",
                    sb = l.sandbox
                );
                journal_entry(&mut text, l.t, zone_s, spec, &ident, &cmd);
            }
            continue;
        }
        if let Some((ident, msg)) = proxy_line(spec, l, &rfc3339(l.t, field_zone)) {
            journal_entry(&mut text, l.t, zone_s, spec, &ident, &msg);
            if let Some((t, i, m)) = held.take() {
                journal_entry(&mut text, t, zone_s, spec, &i, &m);
            }
            continue;
        }
        let msg = message(l, &rfc3339(l.t, field_zone), cat);
        let containerd = "containerd[2771108]".to_string();
        let copied = spec.dup_identifiers && l.shim != 0 && msg.starts_with("time=");
        if !copied {
            journal_entry(&mut text, l.t, zone_s, spec, &containerd, &msg);
        } else {
            copies += 1;
            let kata = format!("kata[{}]", l.shim);
            let (first, second) = if rng.next().is_multiple_of(2) {
                (kata, containerd)
            } else {
                (containerd, kata)
            };
            journal_entry(&mut text, l.t, zone_s, spec, &first, &msg);
            // the next line follows within milliseconds (a console burst)
            let close = lines
                .get(i + 1)
                .is_some_and(|n| n.t.saturating_sub(l.t) < ns(0.2));
            if close && rng.next().is_multiple_of(3) {
                // containerd copies the shim's log FIFO later than the syslog hook writes
                if let Some((t, i, m)) = held.replace((l.t, second, msg)) {
                    journal_entry(&mut text, t, zone_s, spec, &i, &m);
                }
                continue;
            }
            journal_entry(&mut text, l.t, zone_s, spec, &second, &msg);
        }
        if let Some((t, i, m)) = held.take() {
            journal_entry(&mut text, t, zone_s, spec, &i, &m);
        }
    }
    if let Some((t, i, m)) = held.take() {
        journal_entry(&mut text, t, zone_s, spec, &i, &m);
    }
    (text, copies)
}

/// A shim or console line as the Rust shim logs it through journald ([`Spec::rust_shim`]):
/// the message alone; `None` for containerd's own lines and without the Rust shim.
fn rust_message(spec: &Spec, l: &JLine) -> Option<String> {
    if !spec.rust_shim || l.shim == 0 {
        return None;
    }
    match &l.body {
        Body::Console(p) if p.starts_with('{') => Some(p.clone()),
        Body::Console(p) => Some(format!("vm console: {p:?}")),
        Body::Shim { msg, .. } => Some(msg.clone()),
        Body::Cri { .. } | Body::Containerd { .. } => None,
    }
}

/// A guest kernel line as Kata 1.x's proxy logs it ([`Spec::proxy_console`]): its
/// identifier and message (`time=… level=info msg="[    0.566334] …\n" name=kata-proxy
/// pid=… [sandbox=…] source=agent`); `None` for any other line.
fn proxy_line(spec: &Spec, l: &JLine, time: &str) -> Option<(String, String)> {
    let Body::Console(payload) = &l.body else {
        return None;
    };
    let with_sandbox = match spec.proxy_console? {
        ProxyConsole::WithSandbox => true,
        ProxyConsole::NoSandbox => false,
    };
    if payload.starts_with('{') || l.shim == 0 {
        return None;
    }
    let pid = l.shim + 17;
    let sandbox = if with_sandbox {
        format!(" sandbox={}", l.sandbox)
    } else {
        String::new()
    };
    Some((
        format!("kata-proxy[{pid}]"),
        format!(
            "time=\"{time}\" level=info msg={} name=kata-proxy pid={pid}{sandbox} source=agent",
            go_quote(&format!("{payload}\n"))
        ),
    ))
}

/// containerd's message for a line logged at `time` (its `time=` field); `cat`: the
/// journal is printed without prefixes.
fn message(l: &JLine, time: &str, cat: bool) -> String {
    match &l.body {
        Body::Console(payload) => format!(
            "time=\"{time}\" level=debug msg=\"reading guest console\" console-protocol=unix console-url=/run/vc/vm/{sb}/console.sock name=containerd-shim-v2 pid={pid} sandbox={sb} source=virtcontainers subsystem=sandbox vmconsole={}",
            go_quote(payload),
            sb = l.sandbox,
            pid = l.shim
        ),
        Body::Shim {
            level,
            msg,
            error,
            prefix_only,
            extra,
        } => {
            // `-o cat` has no prefix: every line keeps its time=
            let t = if *prefix_only && !cat {
                String::new()
            } else {
                format!("time=\"{time}\" ")
            };
            let err = error
                .as_ref()
                .map_or(String::new(), |e| format!(" error={}", go_quote(e)));
            let (subsystem, fields) = extra
                .as_ref()
                .map_or(("sandbox", ""), |(s, f)| (*s, f.as_str()));
            format!(
                "{t}level={level} msg={}{err} name=containerd-shim-v2 pid={} sandbox={} source=virtcontainers subsystem={subsystem}{fields}",
                go_quote(msg),
                l.shim,
                l.sandbox
            )
        }
        Body::Containerd { level, msg, fields } => {
            format!("time=\"{time}\" level={level} msg={}{fields}", go_quote(msg))
        }
        Body::Cri { msg, error } => format!(
            "time=\"{time}\" level=error msg={} error={}",
            go_quote(msg),
            go_quote(error)
        ),
    }
}

/// One journal entry as `journalctl -o FORMAT` prints it: the prefix and the message, or
/// for `-o json` an object of journald's fields.
fn journal_entry(text: &mut String, t: Nanos, zone_s: i64, spec: &Spec, ident: &str, msg: &str) {
    if spec.journal_format != JournalFormat::Json {
        if spec.journal_format != JournalFormat::Cat {
            if let Some(c) = spec.ci_clock {
                text.push_str(&ci_clock(t, c));
            }
        }
        text.push_str(&prefix(t, zone_s, spec, ident));
        text.push_str(msg);
        text.push('\n');
        return;
    }
    let (name, pid) = ident
        .strip_suffix(']')
        .and_then(|i| i.split_once('['))
        .unwrap_or((ident, ""));
    let us = t.div_euclid(1000);
    // journald writes a message holding control characters as its bytes
    let message = if msg.bytes().any(|b| b < 0x20) {
        serde_json::json!(msg.as_bytes())
    } else {
        serde_json::json!(msg)
    };
    let entry = serde_json::json!({
        "__CURSOR": format!("s=5e1c;i={us:x};b=7a0e;m={:x};t={us:x};x=1", us % 0xffff_ffff),
        "__REALTIME_TIMESTAMP": us.to_string(),
        "__MONOTONIC_TIMESTAMP": (us % 1_000_000_000_000).to_string(),
        "_BOOT_ID": "7a0e0c6f0e4b4f7e9a0d3c1b2a190807",
        "PRIORITY": "6",
        "SYSLOG_FACILITY": "3",
        "_UID": "0",
        "_GID": "0",
        "_TRANSPORT": "stdout",
        "_SYSTEMD_UNIT": format!("{name}.service"),
        "SYSLOG_IDENTIFIER": name,
        "_PID": pid,
        "_COMM": name,
        "_HOSTNAME": spec.host,
        "MESSAGE": message,
    });
    text.push_str(&entry.to_string());
    text.push('\n');
}

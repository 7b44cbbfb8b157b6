//! Synthetic journal generator for benchmarks: the Kata GPU boot study's run-2 containerd
//! journal (the test fixture) repeated as one boot after another up to a target size,
//! interleaved with noise from other units. Every boot has its own ids — its sandbox, the
//! other sandbox whose console line the template carries, their shim pids — and its own
//! times (each boot starts [`BOOT_SPACING_S`] after the previous one, all of its stamps
//! shifted alike), so the journal reads like one host's log. The first boot keeps the
//! fixture's ids and times.

use std::io::{self, Write};

use crate::parse::time::{civil_from_nanos, parse_rfc3339, Nanos, NS_PER_S};

/// The run-2 journal fixture (built from the Kata GPU boot study's excerpts by `scripts/make-fixtures.py`).
pub const TEMPLATE: &str = include_str!("../../tests/fixtures/run2-containerd.journal");
/// The sandbox id used in [`TEMPLATE`].
pub const TEMPLATE_SANDBOX: &str =
    "c9f7bf13c1911810fa49a6be9a9d1efe0872d4088a008ac9eddd5bece6e56889";
/// The other sandbox whose console line [`TEMPLATE`] carries.
const TEMPLATE_OTHER: &str = "38f55c4a058a0f7227e64edd75f2aed134bee7db4b211f071be84fb44d17b0bb";
const TEMPLATE_PIDS: [&str; 2] = ["pid=3454180", "pid=3426175"];
/// Seconds from one boot's start to the next one's (the template spans ~160 s).
pub const BOOT_SPACING_S: i64 = 240;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

const NOISE: [&str; 8] = [
    "kubelet[2211]: I1120 {T} 2211 kubelet.go:2453] \"SyncLoop (PLEG): event for pod\" pod=\"default/web-{N}\" event={{\"ID\":\"{H}\",\"Type\":\"ContainerStarted\"}}",
    "kubelet[2211]: I1120 {T} 2211 prober.go:107] \"Probe failed\" probeType=\"Readiness\" pod=\"default/web-{N}\" containerName=\"app\" probeResult=\"failure\"",
    "systemd[1]: Started session-{N}.scope - Session {N} of User root.",
    "kernel: IPv6: ADDRCONF(NETDEV_CHANGE): veth{H8}: link becomes ready",
    "containerd[2771108]: time=\"{D}T{T}Z\" level=info msg=\"ImageCreate event name:\\\"docker.io/library/ubuntu:22.04\\\"\"",
    "containerd[2771108]: time=\"{D}T{T}Z\" level=debug msg=\"garbage collected\" d=\"{N}.1µs\"",
    "sshd[{N}]: Accepted publickey for root from 10.0.0.{N8} port 5{N8}22 ssh2: ED25519 SHA256:{H}",
    "dockerd[1187]: time=\"{D}T{T}Z\" level=warning msg=\"failed to retrieve runc version\" error=\"exit status 1\"",
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn hex(rng: &mut XorShift, n: usize) -> String {
    let mut s = String::with_capacity(n);
    while s.len() < n {
        s.push_str(&format!("{:016x}", rng.next()));
    }
    s.truncate(n);
    s
}

/// A piece of a template line.
enum Piece {
    Text(String),
    /// The journald prefix time `Nov 20 17:55:38`.
    Prefix(Nanos),
    /// An RFC 3339 UTC stamp with `digits` fraction digits.
    Stamp {
        ns: Nanos,
        digits: usize,
    },
    Sandbox,
    Other,
    ShimPid(usize),
}

/// A template line cut into pieces, and the host time it was logged at.
struct Line {
    pieces: Vec<Piece>,
    at: Nanos,
}

fn split_template() -> Vec<Line> {
    const KEYS: [&str; 4] = ["2025-11-20T", TEMPLATE_SANDBOX, TEMPLATE_OTHER, "pid=34"];
    let mut out = Vec::new();
    let mut last_at = 0;
    for l in TEMPLATE.lines() {
        let mut pieces = Vec::new();
        let mut rest = l;
        let mut at = None;
        // `Nov 20 17:55:38 ` — the fixture's prefix
        if let (Some(p), Some(hms)) = (rest.get(..15), rest.get(7..15)) {
            if p.starts_with("Nov 20 ") {
                if let Some(ns) = parse_rfc3339(&format!("2025-11-20T{hms}Z")) {
                    pieces.push(Piece::Prefix(ns));
                    rest = rest.get(15..).unwrap_or("");
                }
            }
        }
        loop {
            let next = KEYS
                .iter()
                .filter_map(|k| rest.find(k).map(|i| (i, *k)))
                .min_by_key(|(i, _)| *i);
            let Some((i, key)) = next else {
                pieces.push(Piece::Text(rest.to_string()));
                break;
            };
            pieces.push(Piece::Text(rest.get(..i).unwrap_or("").to_string()));
            rest = rest.get(i..).unwrap_or("");
            if key == "2025-11-20T" {
                let end = rest.find('Z').map_or(rest.len(), |z| z + 1);
                let stamp = rest.get(..end).unwrap_or("");
                match parse_rfc3339(stamp) {
                    Some(ns) => {
                        let digits = stamp.find('.').map_or(0, |d| end - d - 2);
                        at.get_or_insert(ns);
                        pieces.push(Piece::Stamp { ns, digits });
                    }
                    None => pieces.push(Piece::Text(stamp.to_string())),
                }
                rest = rest.get(end..).unwrap_or("");
            } else if key == TEMPLATE_SANDBOX {
                pieces.push(Piece::Sandbox);
                rest = rest.get(key.len()..).unwrap_or("");
            } else if key == TEMPLATE_OTHER {
                pieces.push(Piece::Other);
                rest = rest.get(key.len()..).unwrap_or("");
            } else if let Some(k) = TEMPLATE_PIDS.iter().position(|p| rest.starts_with(p)) {
                pieces.push(Piece::ShimPid(k));
                rest = rest.get(TEMPLATE_PIDS[k].len()..).unwrap_or("");
            } else {
                pieces.push(Piece::Text(key.to_string()));
                rest = rest.get(key.len()..).unwrap_or("");
            }
        }
        let at = at.unwrap_or(last_at);
        last_at = at;
        out.push(Line { pieces, at });
    }
    out
}

fn push_stamp(s: &mut String, ns: Nanos, digits: usize) {
    let (y, mo, d, h, mi, sec, sub) = civil_from_nanos(ns);
    s.push_str(&format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}"));
    if digits > 0 {
        let frac = format!("{sub:09}");
        s.push('.');
        s.push_str(frac.get(..digits.min(9)).unwrap_or(""));
    }
    s.push('Z');
}

fn push_prefix(s: &mut String, ns: Nanos) {
    let (_, mo, d, h, mi, sec, _) = civil_from_nanos(ns);
    let m = MONTHS.get(mo as usize - 1).copied().unwrap_or("Jan");
    s.push_str(&format!("{m} {d:02} {h:02}:{mi:02}:{sec:02}"));
}

/// Write about `target` bytes; returns (bytes written, boots written).
pub fn generate<W: Write>(
    target: u64,
    noise_per_boot_line: u32,
    seed: u64,
    out: &mut W,
) -> io::Result<(u64, u64)> {
    let mut rng = XorShift(seed | 1);
    let mut written = 0u64;
    let mut boots = 0u64;
    let lines = split_template();
    let mut buf = String::with_capacity(4096);
    while written < target {
        let (sb, other, pids) = if boots == 0 {
            (
                TEMPLATE_SANDBOX.to_string(),
                TEMPLATE_OTHER.to_string(),
                ["3454180".to_string(), "3426175".to_string()],
            )
        } else {
            let a = 100_000 + rng.next() % 3_900_000;
            (
                hex(&mut rng, 64),
                hex(&mut rng, 64),
                [a.to_string(), (a + 1 + rng.next() % 999).to_string()],
            )
        };
        let shift = boots as Nanos * BOOT_SPACING_S * NS_PER_S;
        for l in &lines {
            buf.clear();
            for p in &l.pieces {
                match p {
                    Piece::Text(t) => buf.push_str(t),
                    Piece::Prefix(ns) => push_prefix(&mut buf, ns + shift),
                    Piece::Stamp { ns, digits } => push_stamp(&mut buf, ns + shift, *digits),
                    Piece::Sandbox => buf.push_str(&sb),
                    Piece::Other => buf.push_str(&other),
                    Piece::ShimPid(k) => {
                        buf.push_str("pid=");
                        buf.push_str(pids.get(*k).map_or("1", String::as_str));
                    }
                }
            }
            buf.push('\n');
            out.write_all(buf.as_bytes())?;
            written += buf.len() as u64;
            for _ in 0..noise_per_boot_line {
                let r = rng.next();
                let tmpl = NOISE
                    .get((r % NOISE.len() as u64) as usize)
                    .copied()
                    .unwrap_or("");
                // other units log around the same moment
                let at = l.at + shift + ((r >> 8) % 1_000_000) as Nanos * 1000;
                let (y, mo, d, h, mi, sec, sub) = civil_from_nanos(at);
                let t = format!("{h:02}:{mi:02}:{sec:02}.{:06}", sub / 1000);
                let body = tmpl
                    .replace("{D}", &format!("{y:04}-{mo:02}-{d:02}"))
                    .replace("{T}", &t)
                    .replace("{N8}", &((r >> 24) % 250).to_string())
                    .replace("{N}", &((r >> 32) % 100_000).to_string())
                    .replace("{H8}", &hex(&mut rng, 8))
                    .replace("{H}", &hex(&mut rng, 32))
                    .replace("{{", "{")
                    .replace("}}", "}");
                let mut s = String::with_capacity(body.len() + 40);
                push_prefix(&mut s, at);
                s.push_str(" dal03-sgpu-160 ");
                s.push_str(&body);
                s.push('\n');
                out.write_all(s.as_bytes())?;
                written += s.len() as u64;
            }
            if written >= target && boots > 0 {
                break;
            }
        }
        boots += 1;
    }
    Ok((written, boots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_parsable_journal() {
        let mut buf = Vec::new();
        let (n, boots) = generate(2_000_000, 3, 7, &mut buf).unwrap();
        assert!(n >= 2_000_000 && boots >= 2);
        assert_eq!(n as usize, buf.len());
        let ing = crate::parse::ingest::ingest_bytes(
            "gen",
            &buf,
            crate::parse::ingest::Options {
                sandbox: Some(TEMPLATE_SANDBOX.into()),
            },
        );
        let r = crate::analyze::build(&ing, None).unwrap();
        assert_eq!(r.gpu_count, Some(7));
        assert!(ing.stats.other_sandbox > 0);
        assert_eq!(ing.stats.bad.total(), 0, "{:?}", ing.stats.bad_examples);
    }

    /// Every boot has its own ids and times: without `--sandbox` the analysis finds one
    /// boot per sandbox id (two ids per boot: its own and the one console line of another),
    /// picks a whole boot, and no boot's lines go back in time.
    #[test]
    fn every_boot_its_own_ids_and_times() {
        let mut buf = Vec::new();
        let (_, boots) = generate(2_500_000, 1, 9, &mut buf).unwrap();
        assert!(boots >= 3);
        let ing = crate::parse::ingest::ingest_bytes(
            "gen",
            &buf,
            crate::parse::ingest::Options::default(),
        );
        assert_eq!(ing.stats.bad.total(), 0, "{:?}", ing.stats.bad_examples);
        assert_eq!(ing.sandboxes.len() as u64, 2 * boots);
        let all = crate::analyze::select::boots(&ing);
        assert_eq!(all.len() as u64, 2 * boots);
        let r = crate::analyze::build(&ing, None).unwrap();
        assert_eq!(r.sandbox.as_deref(), Some(TEMPLATE_SANDBOX));
        assert_eq!(r.gpu_count, Some(7));
        assert_eq!(r.state.status, "complete");
        for name in [
            "vm_create",
            "kernel_boot",
            "pci_enumeration",
            "gpu_driver_init",
            "cdi_wait",
            "memory_hotplug",
            "container_start",
        ] {
            assert!(r.phase(name).is_some(), "no {name}");
        }
        // the second boot is the same boot, BOOT_SPACING_S later, under other ids
        let second = all
            .summaries(&ing)
            .into_iter()
            .filter(|b| b.console > 100)
            .nth(1)
            .unwrap();
        let r2 = crate::analyze::build(&ing, second.sandbox.as_deref()).unwrap();
        assert_eq!(r2.phases.len(), r.phases.len());
        assert!((r2.total_s.unwrap() - r.total_s.unwrap()).abs() < 1e-6);
        let t0 = |r: &crate::Report| {
            crate::parse::time::parse_rfc3339(r.t0.as_deref().unwrap()).unwrap()
        };
        assert_eq!(t0(&r2) - t0(&r), BOOT_SPACING_S * NS_PER_S);
        // the census picks the same boot without parsing the others, and names them
        let mut census = crate::parse::ingest::Census::default();
        census.add(&buf);
        assert_eq!(census.busiest(), Some(TEMPLATE_SANDBOX));
        let only = crate::parse::ingest::ingest_bytes(
            "gen",
            &buf,
            crate::parse::ingest::Options {
                sandbox: census.busiest().map(str::to_string),
            },
        );
        let mut r3 = crate::analyze::build(&only, None).unwrap();
        crate::analyze::other_sandboxes_from(&mut r3, &census);
        assert_eq!(r3.other_sandboxes, r.other_sandboxes);
        assert_eq!(
            serde_json::to_value(&r3.phases).unwrap(),
            serde_json::to_value(&r.phases).unwrap()
        );
    }
}

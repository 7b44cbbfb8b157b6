//! Synthetic journal generator for benchmarks: the Kata GPU boot study's run-2 containerd journal (the test
//! fixture) repeated under fresh sandbox ids, interleaved with noise from other units, up to
//! a target size. The first copy keeps the fixture's sandbox id.

use std::io::{self, Write};

/// The run-2 journal fixture (built from the Kata GPU boot study's excerpts by `scripts/make-fixtures.py`).
pub const TEMPLATE: &str = include_str!("../tests/fixtures/run2-containerd.journal");
/// The sandbox id used in [`TEMPLATE`].
pub const TEMPLATE_SANDBOX: &str =
    "c9f7bf13c1911810fa49a6be9a9d1efe0872d4088a008ac9eddd5bece6e56889";

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
    "containerd[2771108]: time=\"2025-11-20T{T}Z\" level=info msg=\"ImageCreate event name:\\\"docker.io/library/ubuntu:22.04\\\"\"",
    "containerd[2771108]: time=\"2025-11-20T{T}Z\" level=debug msg=\"garbage collected\" d=\"{N}.1µs\"",
    "sshd[{N}]: Accepted publickey for root from 10.0.0.{N8} port 5{N8}22 ssh2: ED25519 SHA256:{H}",
    "dockerd[1187]: time=\"2025-11-20T{T}Z\" level=warning msg=\"failed to retrieve runc version\" error=\"exit status 1\"",
];

fn hex(rng: &mut XorShift, n: usize) -> String {
    let mut s = String::with_capacity(n);
    while s.len() < n {
        s.push_str(&format!("{:016x}", rng.next()));
    }
    s.truncate(n);
    s
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
    let lines: Vec<&str> = TEMPLATE.lines().collect();
    while written < target {
        let sb = if boots == 0 {
            TEMPLATE_SANDBOX.to_string()
        } else {
            hex(&mut rng, 64)
        };
        for l in &lines {
            let line = if boots == 0 {
                (*l).to_string()
            } else {
                l.replace(TEMPLATE_SANDBOX, &sb)
            };
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            written += line.len() as u64 + 1;
            for _ in 0..noise_per_boot_line {
                let r = rng.next();
                let tmpl = NOISE
                    .get((r % NOISE.len() as u64) as usize)
                    .copied()
                    .unwrap_or("");
                let secs = (r >> 8) % 86_400;
                let t = format!(
                    "{:02}:{:02}:{:02}.{:06}",
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60,
                    (r >> 20) % 1_000_000
                );
                let body = tmpl
                    .replace("{T}", &t)
                    .replace("{N8}", &((r >> 24) % 250).to_string())
                    .replace("{N}", &((r >> 32) % 100_000).to_string())
                    .replace("{H8}", &hex(&mut rng, 8))
                    .replace("{H}", &hex(&mut rng, 32))
                    .replace("{{", "{")
                    .replace("}}", "}");
                let s = format!(
                    "Nov 20 {} dal03-sgpu-160 {body}\n",
                    t.get(..8).unwrap_or("00:00:00")
                );
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
        let ing = crate::ingest::ingest_bytes(
            "gen",
            &buf,
            crate::ingest::Options {
                sandbox: Some(TEMPLATE_SANDBOX.into()),
            },
        );
        let r = crate::timeline::build(&ing, None).unwrap();
        assert_eq!(r.gpus.len(), 7);
        assert!(ing.stats.other_sandbox > 0);
    }
}

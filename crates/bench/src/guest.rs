//! The `--guest` runner: boot a throw-away QEMU guest with a given configuration, run
//! `vmtune bench suite` inside it, and collect the result.
//!
//! The guest needs no disk image: vmtune builds an initramfs (newc cpio) holding busybox
//! (Debian's `busybox-static`), the running vmtune binary with the shared libraries `ldd`
//! lists, and an `/init` script that mounts proc/sys/dev, runs the suite and writes the JSON
//! to the second serial port, which QEMU saves to a file. The first serial port is the
//! console, kept for error messages. The configuration under test is whatever QEMU
//! arguments are given (`-smp`, `-numa`, CPU model, pinning is applied from outside).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::{signals, RunFile};

const RESULT_BEGIN: &str = "VMTUNE-RESULT-BEGIN";
const RESULT_END: &str = "VMTUNE-RESULT-END";
const RUN_BEGIN: &str = "VMTUNE-RUN-BEGIN";
const RUN_END: &str = "VMTUNE-RUN-END";

/// A command run inside the guest: `NAME=COMMAND` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRun {
    pub name: String,
    pub command: String,
}

impl UserRun {
    /// `NAME=COMMAND`; NAME is letters, digits, `-`, `_`, `.` (it prefixes the metrics).
    pub fn parse(s: &str) -> Result<UserRun> {
        let (name, command) = s
            .split_once('=')
            .ok_or_else(|| BenchError::Invalid(format!("--run {s:?}: expected NAME=COMMAND")))?;
        let name = name.trim();
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            return Err(BenchError::Invalid(format!(
                "--run {s:?}: the name {name:?} must be letters, digits, - _ ."
            )));
        }
        if command.trim().is_empty() {
            return Err(BenchError::Invalid(format!("--run {s:?}: no command")));
        }
        Ok(UserRun {
            name: name.to_string(),
            command: command.to_string(),
        })
    }
}

/// What one `--run` command printed inside the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    pub name: String,
    /// Its exit status (`None`: the guest stopped before it finished).
    pub rc: Option<i32>,
    pub output: String,
}

/// A shell word: single-quoted, its quotes escaped.
pub(crate) fn sh_quote(a: &str) -> String {
    format!("'{}'", a.replace('\'', "'\\''"))
}

#[derive(Debug, Clone)]
pub struct GuestOptions {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    pub busybox: PathBuf,
    /// The vmtune binary to run inside (normally the running one).
    pub vmtune: PathBuf,
    pub cpus: u32,
    pub memory_bytes: u64,
    /// `kvm`, `tcg` or `kvm:tcg` (try KVM, fall back to TCG).
    pub accel: String,
    pub extra_args: Vec<String>,
    /// Arguments after `vmtune bench suite` inside the guest.
    pub suite_args: Vec<String>,
    /// Commands run inside the guest after the suite (`bench matrix --run`), their output
    /// brought back for the readers.
    pub runs: Vec<UserRun>,
    /// Host files copied into the guest's `/opt` (what `runs` call).
    pub files: Vec<PathBuf>,
    pub timeout: Duration,
    /// Where the initramfs and logs go (created; removed after a successful run).
    pub workdir: PathBuf,
}

/// What came back from the guest.
#[derive(Debug)]
pub struct GuestRun {
    pub run: RunFile,
    pub command: Vec<String>,
    pub seconds: f64,
}

/// The newest `/boot/vmlinuz-*`.
pub fn find_kernel(boot: &Path) -> Option<PathBuf> {
    let mut k: Vec<PathBuf> = fs::read_dir(boot)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .collect();
    k.sort();
    k.pop()
}

/// A newc ("070701") cpio archive writer.
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Default for Cpio {
    fn default() -> Self {
        Self::new()
    }
}

impl Cpio {
    pub fn new() -> Cpio {
        Cpio {
            buf: Vec::new(),
            ino: 1,
        }
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        let name = name.trim_start_matches('/');
        let fields = [
            self.ino,
            mode,
            0,
            0,
            if mode & 0o170000 == 0o040000 { 2 } else { 1 },
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | (mode & 0o7777), data);
    }
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes());
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.buf
    }
}

/// Shared libraries of a binary, from `ldd` output.
pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn read(p: &Path) -> Result<Vec<u8>> {
    fs::read(p).map_err(|e| BenchError::io(p, e))
}

/// The guest's `/init`.
pub fn init_script(suite_args: &[String]) -> String {
    init_script_with(suite_args, &[])
}

/// The guest's `/init`, running `runs` after the suite.
pub fn init_script_with(suite_args: &[String], runs: &[UserRun]) -> String {
    let quoted: Vec<String> = suite_args.iter().map(|a| sh_quote(a)).collect();
    let mut user = String::new();
    for r in runs {
        user.push_str(&format!(
            "echo {RUN_BEGIN} {name} > /dev/ttyS1\n\
/bin/sh -c {cmd} > /tmp/run.txt 2>&1\n\
rc=$?\n\
{{ /bin/busybox cat /tmp/run.txt; echo; echo {RUN_END} $rc; }} > /dev/ttyS1\n",
            name = r.name,
            cmd = sh_quote(&r.command)
        ));
    }
    format!(
        "#!/bin/busybox sh\n\
/bin/busybox mkdir -p /proc /sys /dev /run /tmp\n\
/bin/busybox mount -t proc proc /proc\n\
/bin/busybox mount -t sysfs sysfs /sys\n\
/bin/busybox mount -t devtmpfs devtmpfs /dev\n\
/bin/busybox mount -t tmpfs tmpfs /run\n\
/bin/busybox mount -t tmpfs tmpfs /tmp\n\
/bin/busybox --install -s /bin\n\
export PATH=/opt:/bin\n\
echo vmtune-guest: running the suite\n\
/vmtune bench suite --out /tmp --json {args} > /tmp/result.json 2> /tmp/err.txt\n\
rc=$?\n\
/bin/busybox cat /tmp/err.txt\n\
{{ echo {RESULT_BEGIN} $rc; /bin/busybox cat /tmp/result.json; echo; echo {RESULT_END}; /bin/busybox cat /tmp/err.txt; }} > /dev/ttyS1\n\
{user}\
/bin/busybox sync\n\
/bin/busybox poweroff -f\n",
        args = quoted.join(" ")
    )
}

/// The `--run` outputs in what the guest wrote to its second serial port, in order.
pub fn parse_runs(text: &str) -> Vec<RunOutput> {
    let text = text.replace('\r', "");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find(RUN_BEGIN) {
        let after = &rest[i + RUN_BEGIN.len()..];
        let (head, body) = after.split_once('\n').unwrap_or((after, ""));
        let name = head.trim().to_string();
        let (output, rc, next) = match body.find(RUN_END) {
            Some(e) => {
                let tail = &body[e + RUN_END.len()..];
                let (rc_line, next) = tail.split_once('\n').unwrap_or((tail, ""));
                (&body[..e], rc_line.trim().parse().ok(), next)
            }
            None => (body, None, ""),
        };
        out.push(RunOutput {
            name,
            rc,
            output: output.trim_end_matches('\n').to_string(),
        });
        rest = next;
    }
    out
}

/// The vmtune binary the guest runs: without its debug sections when `objcopy` can strip
/// them (a debug build is ~10x larger, and the guest holds the initramfs twice in RAM while
/// it unpacks), else as it is.
fn guest_binary(opts: &GuestOptions) -> Result<Vec<u8>> {
    let stripped = opts.workdir.join("vmtune.stripped");
    let ok = fs::create_dir_all(&opts.workdir).is_ok()
        && Command::new("objcopy")
            .arg("--strip-debug")
            .arg(&opts.vmtune)
            .arg(&stripped)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let bytes = if ok {
        read(&stripped)
    } else {
        read(&opts.vmtune)
    };
    let _ = fs::remove_file(&stripped);
    bytes
}

/// Build the initramfs in memory.
pub fn initramfs(opts: &GuestOptions) -> Result<Vec<u8>> {
    let mut c = Cpio::new();
    for d in [
        "bin", "dev", "proc", "sys", "run", "tmp", "lib", "lib64", "usr", "usr/lib",
    ] {
        c.dir(d);
    }
    c.file("bin/busybox", 0o755, &read(&opts.busybox)?);
    c.symlink("bin/sh", "busybox");
    c.file(
        "init",
        0o755,
        init_script_with(&opts.suite_args, &opts.runs).as_bytes(),
    );
    c.dir("opt");
    for f in &opts.files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| BenchError::Invalid(format!("{}: not a file name", f.display())))?;
        c.file(&format!("opt/{name}"), 0o755, &read(f)?);
    }
    c.file("vmtune", 0o755, &guest_binary(opts)?);
    let ldd = Command::new("ldd")
        .arg(&opts.vmtune)
        .output()
        .map_err(|e| BenchError::Sys {
            what: "running ldd".into(),
            source: e,
        })?;
    let mut made = std::collections::BTreeSet::new();
    for lib in parse_ldd(&String::from_utf8_lossy(&ldd.stdout)) {
        let name = lib.to_string_lossy().trim_start_matches('/').to_string();
        // parent directories
        let mut acc = String::new();
        if let Some(parent) = Path::new(&name).parent() {
            for part in parent.iter() {
                if !acc.is_empty() {
                    acc.push('/');
                }
                acc.push_str(&part.to_string_lossy());
                if !["lib", "lib64", "usr", "usr/lib"].contains(&acc.as_str())
                    && made.insert(acc.clone())
                {
                    c.dir(&acc);
                }
            }
        }
        c.file(&name, 0o755, &read(&lib)?);
    }
    Ok(c.finish())
}

/// The QEMU command line.
pub fn qemu_command(
    opts: &GuestOptions,
    initrd: &Path,
    console: &Path,
    result: &Path,
) -> Vec<String> {
    let mut v: Vec<String> = vec![opts.qemu.to_string_lossy().into_owned()];
    for a in opts.accel.split(':').filter(|a| !a.is_empty()) {
        v.push("-accel".into());
        v.push(if a == "tcg" {
            "tcg,thread=multi".into()
        } else {
            a.to_string()
        });
    }
    v.extend([
        "-m".to_string(),
        format!("{}M", (opts.memory_bytes >> 20).max(128)),
        "-smp".into(),
        opts.cpus.max(1).to_string(),
        "-kernel".into(),
        opts.kernel.to_string_lossy().into_owned(),
        "-initrd".into(),
        initrd.to_string_lossy().into_owned(),
        "-append".into(),
        // no_timer_check: under TCG on a busy host the kernel's boot-time check of the
        // IO-APIC timer can miss its ticks and panic ("IO-APIC + timer doesn't work!");
        // the check guards broken chipsets, not QEMU's
        "console=ttyS0 panic=-1 quiet rdinit=/init no_timer_check".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-monitor".into(),
        "none".into(),
        "-serial".into(),
        format!("file:{}", console.display()),
        "-serial".into(),
        format!("file:{}", result.display()),
    ]);
    if opts.accel.starts_with("kvm") {
        v.extend(["-cpu".into(), "host".into()]);
    }
    v.extend(opts.extra_args.iter().cloned());
    v
}

/// Pull the run out of what the guest wrote to its second serial port.
pub fn parse_result(text: &str, path: &Path) -> Result<(i32, RunFile)> {
    let text = text.replace('\r', "");
    let start = text
        .find(RESULT_BEGIN)
        .ok_or_else(|| BenchError::format(path, "the guest wrote no result"))?;
    let rest = text.get(start + RESULT_BEGIN.len()..).unwrap_or("");
    let (rc_line, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let rc: i32 = rc_line.trim().parse().unwrap_or(-1);
    let end = body.find(RESULT_END).unwrap_or(body.len());
    let json = body.get(..end).unwrap_or("").trim();
    let after = body.get(end + RESULT_END.len()..).unwrap_or("").trim();
    if rc != 0 || json.is_empty() {
        return Err(BenchError::format(
            path,
            format!(
                "the suite failed in the guest (exit {rc}): {}",
                after
                    .lines()
                    .find(|l| l.contains("error:"))
                    .or_else(|| after.lines().last())
                    .unwrap_or("no message")
            ),
        ));
    }
    Ok((rc, RunFile::parse(json, path)?))
}

pub fn run(opts: &GuestOptions, bar: &indicatif::ProgressBar) -> Result<GuestRun> {
    for (what, p) in [
        ("kernel", &opts.kernel),
        ("busybox", &opts.busybox),
        ("vmtune", &opts.vmtune),
    ] {
        if !p.is_file() {
            return Err(BenchError::Invalid(format!(
                "guest {what} {} not found",
                p.display()
            )));
        }
    }
    fs::create_dir_all(&opts.workdir).map_err(|e| BenchError::io(&opts.workdir, e))?;
    let initrd = opts.workdir.join("initramfs.cpio");
    let console = opts.workdir.join("console.log");
    let result = opts.workdir.join("result.txt");
    bar.set_message("building initramfs");
    let image = initramfs(opts)?;
    fs::File::create(&initrd)
        .and_then(|mut f| f.write_all(&image))
        .map_err(|e| BenchError::io(&initrd, e))?;
    let _ = fs::remove_file(&result);
    let cmd = qemu_command(opts, &initrd, &console, &result);
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::Sys {
            what: format!("starting {}", cmd[0]),
            source: e,
        })?;
    let t0 = Instant::now();
    bar.set_message("guest running");
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| BenchError::Sys {
            what: "waiting for QEMU".into(),
            source: e,
        })? {
            break st;
        }
        if signals::interrupted() || t0.elapsed() > opts.timeout {
            let _ = child.kill();
            let _ = child.wait();
            if signals::interrupted() {
                return Err(BenchError::Interrupted);
            }
            return Err(BenchError::Invalid(format!(
                "guest did not finish in {} s (console: {})",
                opts.timeout.as_secs(),
                console.display()
            )));
        }
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let text = fs::read_to_string(&result).unwrap_or_default();
    if text.is_empty() {
        let console_tail = fs::read_to_string(&console).unwrap_or_default();
        let last = console_tail
            .lines()
            .chain(stderr.lines())
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("no output")
            .to_string();
        return Err(BenchError::Invalid(format!(
            "guest produced no result (QEMU {status}; last output: {last}; console: {})",
            console.display()
        )));
    }
    let (_, run) = parse_result(&text, &result)?;
    let _ = fs::remove_dir_all(&opts.workdir);
    Ok(GuestRun {
        run,
        command: cmd,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_layout() {
        let mut c = Cpio::new();
        c.dir("bin");
        c.file("bin/x", 0o755, b"hello");
        let a = c.finish();
        assert!(a.starts_with(b"070701"));
        assert_eq!(a.len() % 4, 0);
        // first header: ino 1, mode 040755, namesize 4 ("bin\0")
        assert_eq!(&a[6..14], b"00000001");
        assert_eq!(&a[14..22], b"000041ed");
        assert_eq!(&a[94..102], b"00000004");
        let s = String::from_utf8_lossy(&a);
        assert!(s.contains("bin/x\0") && s.contains("hello") && s.contains("TRAILER!!!"));
    }

    #[test]
    fn ldd_output() {
        let t = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n\tnot a dynamic executable\n";
        assert_eq!(
            parse_ldd(t),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }

    #[test]
    fn result_parsing() {
        let p = Path::new("result.txt");
        let mut r = RunFile::new("guest");
        r.refresh_metrics();
        let json = serde_json::to_string(&r).unwrap();
        let text = format!("junk\r\n{RESULT_BEGIN} 0\r\n{json}\r\n{RESULT_END}\r\n");
        let (rc, got) = parse_result(&text, p).unwrap();
        assert_eq!(rc, 0);
        assert_eq!(got.config, "guest");
        let e = parse_result(
            &format!("{RESULT_BEGIN} 2\n\n{RESULT_END}\nvmtune: error: boom\n"),
            p,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("exit 2") && e.to_string().contains("boom"),
            "{e}"
        );
        assert!(parse_result("nothing", p).is_err());
        assert!(init_script(&["--config".into(), "it's".into()]).contains("'it'\\''s'"));
    }

    #[test]
    fn user_runs_round_trip() {
        let runs = [
            UserRun::parse("stream=/opt/stream -n 3").unwrap(),
            UserRun::parse("gen=echo x 1 GB/s").unwrap(),
        ];
        let init = init_script_with(&[], &runs);
        assert!(init.contains("/bin/sh -c '/opt/stream -n 3'"), "{init}");
        assert!(init.contains("/bin/sh -c 'echo x 1 GB/s'"), "{init}");
        let serial = format!(
            "{RESULT_BEGIN} 0\r\n{{}}\r\n{RESULT_END}\r\n{RUN_BEGIN} stream\r\nTriad: 1\r\n\r\n{RUN_END} 0\r\n{RUN_BEGIN} gen\r\nx 1 GB/s\r\n"
        );
        let got = parse_runs(&serial);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].name.as_str(), got[0].rc), ("stream", Some(0)));
        assert_eq!(got[0].output, "Triad: 1");
        assert_eq!((got[1].name.as_str(), got[1].rc), ("gen", None));
        for bad in ["noequals", "=cmd", "a b=cmd", "x= "] {
            assert!(UserRun::parse(bad).is_err(), "{bad}");
        }
    }
}

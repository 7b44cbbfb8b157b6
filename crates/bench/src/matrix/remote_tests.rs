//! The guest transports without a daemon or a guest: a fake libvirt whose "guest agent"
//! runs each `guest-exec` on this machine (so [`view::GATHER`] snapshots this machine's
//! real sysfs and `topo` reads it back) and keeps `guest-file-write`s under a directory.

use std::collections::BTreeMap;

use super::*;
use crate::guest::UserRun;
use crate::matrix::{run, MatrixOptions, RunRecord, ScratchFiles};

#[derive(Default)]
struct Agent {
    root: PathBuf,
    running: BTreeMap<String, bool>,
    execs: BTreeMap<i64, Exec>,
    next: i64,
    files: BTreeMap<i64, (String, Vec<u8>)>,
    log: Vec<String>,
    /// Answers `guest-ping` only after this many tries (a guest still booting).
    boot_pings: usize,
}

impl Domains for Agent {
    fn scratch_xml(&self, _: &LayoutSpec, _: &ScratchFiles) -> Result<String> {
        unreachable!("the guest transports make no initramfs domain")
    }
    fn define(&mut self, name: &str, _: &Path) -> Result<()> {
        self.log.push(format!("define {name}"));
        Ok(())
    }
    fn start(&mut self, name: &str) -> Result<()> {
        self.running.insert(name.into(), true);
        Ok(())
    }
    fn state(&mut self, name: &str) -> Result<Option<String>> {
        Ok(self.running.get(name).map(|_| "running".into()))
    }
    fn remove(&mut self, name: &str) -> Result<()> {
        self.log.push(format!("remove {name}"));
        self.running.remove(name);
        Ok(())
    }
    fn guest_xml(&mut self, l: &LayoutSpec, name: &str) -> Result<String> {
        self.log.push(format!("overlays {name}"));
        Ok(format!(
            "<domain><name>{name}</name><!-- {} --></domain>",
            l.name
        ))
    }
    fn agent(&mut self, name: &str, request: &str, _: Duration) -> Result<String> {
        assert!(
            self.running.contains_key(name),
            "agent call to {name}, not running"
        );
        let r: Value = serde_json::from_str(request).unwrap();
        let a = &r["arguments"];
        let b64 = &base64::engine::general_purpose::STANDARD;
        let ret = match r["execute"].as_str().unwrap() {
            "guest-ping" => {
                if self.boot_pings > 0 {
                    self.boot_pings -= 1;
                    return Err(BenchError::Invalid(
                        "error: Guest agent is not responding".into(),
                    ));
                }
                json!({})
            }
            "guest-exec" => {
                let args: Vec<String> = a["arg"]
                    .as_array()
                    .map(|v| v.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                // the guest's /opt is the fake's directory
                let args: Vec<String> = args
                    .iter()
                    .map(|x| x.replace("/opt", &self.root.join("opt").display().to_string()))
                    .collect();
                let out = Command::new(a["path"].as_str().unwrap())
                    .args(&args)
                    .output()
                    .unwrap();
                self.next += 1;
                self.execs.insert(
                    self.next,
                    Exec {
                        rc: out.status.code(),
                        stdout: String::from_utf8_lossy(&out.stdout).into(),
                        stderr: String::from_utf8_lossy(&out.stderr).into(),
                    },
                );
                json!({"pid": self.next})
            }
            "guest-exec-status" => {
                let x = &self.execs[&a["pid"].as_i64().unwrap()];
                json!({"exited": true, "exitcode": x.rc, "out-data": b64.encode(&x.stdout), "err-data": b64.encode(&x.stderr)})
            }
            "guest-file-open" => {
                self.next += 1;
                let path = a["path"].as_str().unwrap().to_string();
                self.files.insert(self.next, (path, Vec::new()));
                json!(self.next)
            }
            "guest-file-write" => {
                let f = self.files.get_mut(&a["handle"].as_i64().unwrap()).unwrap();
                f.1.extend(b64.decode(a["buf-b64"].as_str().unwrap()).unwrap());
                json!({"count": 0})
            }
            "guest-file-close" => {
                let (path, data) = self.files.remove(&a["handle"].as_i64().unwrap()).unwrap();
                let local = self.root.join(path.trim_start_matches('/'));
                std::fs::create_dir_all(local.parent().unwrap()).unwrap();
                std::fs::write(local, data).unwrap();
                json!({})
            }
            other => panic!("unexpected agent command {other}"),
        };
        Ok(json!({ "return": ret }).to_string())
    }
}

fn this_machine() -> topo::Host {
    topo::load(None).expect("this machine's topology")
}

fn layout(name: &str, expect: Option<view::Expect>) -> LayoutSpec {
    LayoutSpec {
        name: name.into(),
        describe: name.into(),
        domain_xml: "<domain/>".into(),
        vcpus: 1,
        pins: "none".into(),
        guest: "as given".into(),
        notes: vec![],
        plan: None,
        expect,
    }
}

/// What this machine looks like as a guest's layout.
fn expect_here() -> view::Expect {
    let h = this_machine();
    let threads = h.cores.iter().map(|c| c.pus.len() as u32).max().unwrap();
    let packages = h.packages.len().max(1) as u32;
    view::Expect {
        vcpus: h.pus.len() as u32,
        topology: Some([packages, 1, h.cores.len() as u32 / packages, threads]),
        cells: if h.numa_nodes.len() > 1 {
            h.numa_nodes
                .iter()
                .map(|n| view::ExpectCell {
                    id: n.os_index,
                    vcpus: n.cpus.clone(),
                    memory_bytes: n.memory_bytes.unwrap_or(0),
                })
                .collect()
        } else {
            Vec::new()
        },
        devices: Vec::new(),
    }
}

fn opts(dir: &Path, program: &Path) -> MatrixOptions {
    MatrixOptions {
        runs: 1,
        prefix: "t".into(),
        workdir: dir.join("work"),
        kernel: PathBuf::new(),
        busybox: PathBuf::new(),
        vmtune: PathBuf::new(),
        suite_args: vec![],
        user_runs: vec![
            UserRun::parse(&format!(
                "rate=/opt/{}",
                program.file_name().unwrap().to_string_lossy()
            ))
            .unwrap(),
            UserRun::parse("broken=exit 3").unwrap(),
        ],
        files: vec![program.to_path_buf()],
        timeout: Duration::from_secs(30),
        transport: Transport::Agent,
    }
}

#[test]
fn the_agent_runs_the_users_commands_and_the_guest_view_is_read_by_topo() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("rate.sh");
    std::fs::write(&program, "#!/bin/sh\necho 'triad 1234.5 MB/s'\n").unwrap();
    let mut fake = Agent {
        root: dir.path().join("guest"),
        boot_pings: 2,
        ..Agent::default()
    };
    let mut wrong = expect_here();
    wrong.vcpus += 1;
    wrong.cells = vec![
        view::ExpectCell {
            id: 0,
            vcpus: [0].into_iter().collect(),
            memory_bytes: 1 << 30,
        },
        view::ExpectCell {
            id: 1,
            vcpus: [1].into_iter().collect(),
            memory_bytes: 1 << 30,
        },
    ];
    let layouts = [
        layout("right", Some(expect_here())),
        layout("wrong", Some(wrong)),
    ];
    let o = opts(dir.path(), &program);
    let recs: Vec<RunRecord> =
        run(&layouts, &o, &mut fake, &indicatif::ProgressBar::hidden()).unwrap();
    assert_eq!(recs.len(), 2);
    let right = recs.iter().find(|r| r.layout == "right").unwrap();
    assert_eq!(right.error, None);
    assert_eq!(right.invalid, None, "{:?}", right.view);
    let h = this_machine();
    let seen = right.suite.as_ref().unwrap().host.as_ref().unwrap();
    // the snapshot taken through the agent reads as the machine itself
    assert_eq!(seen.pus.len(), h.pus.len());
    assert_eq!(seen.cores.len(), h.cores.len());
    assert_eq!(seen.numa_nodes.len(), h.numa_nodes.len());
    assert_eq!(seen.pci_devices.len(), h.pci_devices.len());
    assert!(right
        .view
        .as_ref()
        .unwrap()
        .contains(&format!("{} CPU(s)", h.pus.len())));
    // the copied program ran and its output was read; a failing command is its own error
    let rate = right.user.iter().find(|u| u.name == "rate").unwrap();
    assert_eq!(rate.rc, Some(0));
    assert!(!rate.measures.is_empty(), "{rate:?}");
    let broken = right.user.iter().find(|u| u.name == "broken").unwrap();
    assert_eq!(broken.rc, Some(3));
    assert!(broken.error.as_ref().unwrap().starts_with("exit 3"));
    // the wrong layout's run is invalid and says why
    let bad = recs.iter().find(|r| r.layout == "wrong").unwrap();
    let why = bad.invalid.as_ref().expect("flagged invalid");
    assert!(why.contains("CPU(s) online"), "{why}");
    // every scratch domain was removed after its run
    let defined = fake.log.iter().filter(|l| l.starts_with("define")).count();
    let removed = fake.log.iter().filter(|l| l.starts_with("remove")).count();
    assert_eq!((defined, removed), (2, 2), "{:?}", fake.log);
}

#[test]
fn a_guest_that_never_answers_fails_its_run_and_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("p");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    let mut fake = Agent {
        root: dir.path().join("guest"),
        boot_pings: usize::MAX,
        ..Agent::default()
    };
    let mut o = opts(dir.path(), &program);
    o.timeout = Duration::from_secs(2);
    let recs = run(
        &[layout("pin", None)],
        &o,
        &mut fake,
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap();
    let e = recs[0].error.as_ref().unwrap();
    assert!(e.contains("did not answer in 2 s"), "{e}");
    assert!(fake.running.is_empty());
}

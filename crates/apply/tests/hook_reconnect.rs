//! `reconnect begin`: libvirtd restarted while the VM runs. The hook applies nothing again and
//! keeps the journal; the IRQ watcher the `started` call began is started again only when it
//! is gone (its process exited, or its number now belongs to another process), and left
//! alone while it runs.
//!
//! No host change: the plan reserves nothing, "QEMU" is a `sleep` and the watcher a script
//! that records its arguments.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use apply::hook::{self, HookConfig};

/// Kills the processes a test started: its own children (then reaps them), and watchers by
/// process group (the hook starts each in a group of its own, with the script's `sleep`).
#[derive(Default)]
struct Kill {
    children: Vec<Child>,
    groups: Vec<u32>,
}

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for g in &self.groups {
            let _ = Command::new("kill").arg("--").arg(format!("-{g}")).status();
        }
    }
}

fn sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

fn run(cfg: &HookConfig, op: &str, sub: &str) -> Vec<String> {
    let r = hook::run("vm1", op, sub, String::new(), cfg);
    assert!(r.completed, "{r:?}");
    r.messages
}

fn pid_in(p: &Path) -> u32 {
    std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
}

#[test]
fn reconnect_keeps_the_journal_and_restarts_only_a_watcher_that_is_gone() {
    let d = tempfile::tempdir().unwrap();
    let (plans, run_dir, libvirt) = (
        d.path().join("plans"),
        d.path().join("run"),
        d.path().join("libvirt"),
    );
    for p in [&plans, &run_dir, &libvirt] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(plans.join("vm1.json"), testkit::cpu0_plan_json("linux")).unwrap();
    let watcher = d.path().join("watcher.sh");
    let args_log = d.path().join("watcher.args");
    std::fs::write(
        &watcher,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nsleep 60\n",
            args_log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&watcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut kill = Kill::default();
    kill.children.push(sleeper());
    let qemu_pid = kill.children[0].id();
    std::fs::write(libvirt.join("vm1.pid"), format!("{qemu_pid}\n")).unwrap();
    let cfg = HookConfig {
        plan_dir: plans.clone(),
        journal_dir: run_dir.clone(),
        libvirt_run_dir: libvirt.clone(),
        timeout: Duration::from_secs(10),
        watcher_exe: Some(watcher.clone()),
        ..HookConfig::default()
    };
    let journal = hook::journal_path(&cfg, "vm1");
    let pidfile = PathBuf::from(format!("{}.watch.pid", journal.display()));

    // reconnect with nothing applied
    let m = run(&cfg, "reconnect", "begin");
    assert!(m[0].contains("nothing was applied"), "{m:?}");
    assert!(!journal.exists());

    run(&cfg, "prepare", "begin");
    let written = std::fs::read(&journal).unwrap();
    // no watcher was started for it (no `started`): none is started now
    let m = run(&cfg, "reconnect", "begin");
    assert_eq!(
        m,
        vec![format!(
            "journal {} kept, nothing applied again",
            journal.display()
        )]
    );
    assert!(!args_log.exists());

    // the watcher `started` began has exited: started again, with the same arguments
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    std::fs::write(&pidfile, format!("{}\n", gone.id())).unwrap();
    let m = run(&cfg, "reconnect", "begin");
    assert!(m[1].contains("was gone: started again"), "{m:?}");
    let w = pid_in(&pidfile);
    kill.groups.push(w);
    std::thread::sleep(Duration::from_millis(300));
    let args = std::fs::read_to_string(&args_log).unwrap();
    assert_eq!(
        args.trim(),
        format!(
            "apply {} --pid {} --journal {} --append --only irqs --watch",
            plans.join("vm1.json").display(),
            qemu_pid,
            journal.display()
        )
    );

    // running: left alone
    let m = run(&cfg, "reconnect", "begin");
    assert_eq!(m[1], format!("IRQ watcher running (pid {w})"), "{m:?}");
    assert_eq!(
        std::fs::read_to_string(&args_log).unwrap().lines().count(),
        1
    );

    // its number now belongs to a process that is not a watcher of this journal
    kill.children.push(sleeper());
    let other = kill.children[1].id();
    std::fs::write(&pidfile, format!("{other}\n")).unwrap();
    let m = run(&cfg, "reconnect", "begin");
    assert!(m[1].contains("was gone: started again"), "{m:?}");
    kill.groups.push(pid_in(&pidfile));

    // the journal went through all of it untouched
    assert_eq!(std::fs::read(&journal).unwrap(), written);

    // QEMU gone while libvirtd was down: libvirt will call release; nothing started
    kill.children[0].kill().unwrap();
    kill.children[0].wait().unwrap();
    std::fs::remove_file(&pidfile).unwrap();
    let m = run(&cfg, "reconnect", "begin");
    assert!(m[1].contains("is not running"), "{m:?}");
    assert!(!pidfile.exists());
    assert_eq!(std::fs::read(&journal).unwrap(), written);
}

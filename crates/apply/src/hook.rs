//! The libvirt qemu hook: `/etc/libvirt/hooks/qemu DOMAIN OP SUB-OP EXTRA` with the domain
//! XML on stdin (<https://libvirt.org/hooks.html>). libvirt waits for the hook and a non-zero
//! exit stops the VM start (on `reconnect`, kills the running QEMU), so this hook is bounded in
//! time and never fails: every problem is logged and the VM starts.
//!
//! What libvirt sends (its hooks documentation), and what this hook does with it:
//!
//! | call | when | here |
//! |---|---|---|
//! | `prepare begin -` | before resources are labelled (also on a migration's destination) | reserve the plan's hugepages, before QEMU allocates guest memory |
//! | `start begin -` | labelled, QEMU not yet started | nothing |
//! | `started begin -` | QEMU runs (on a migration's destination: paused, `-incoming`) | pin QEMU's threads, route IRQs, shield the guest CPUs; start a detached `vmtune apply --only irqs --watch` for the VFIO vectors the guest driver enables later |
//! | `stopped end -` | QEMU exited, labels not yet restored | nothing |
//! | `release end REASON` | all resources released; REASON (libvirt ≥ 10.5, else `-`) is `shutdown`, `destroyed`, `crashed`, `migrated`, `saved`, `failed`, `from snapshot`, `daemon` or `unknown` | restore everything from the domain's journal, whatever the reason |
//! | `migrate begin -` | an incoming migration, before `prepare` | nothing; a *filter*: libvirt reads stdout as the new domain XML (empty: unchanged), so nothing may be printed there |
//! | `restore begin -` | a saved image is restored, before `prepare` | the same filter rule (not `vmtune restore`) |
//! | `reconnect begin -` | libvirtd restarted while the VM runs; failing kills the VM | nothing is re-applied and the journal is kept (the changes outlive libvirtd); an IRQ watcher that died is started again |
//! | `attach begin -` | libvirt adopts a QEMU it did not start | nothing |
//!
//! The plan comes from `PLAN_DIR/<domain>.json` (default `/etc/vmtune`, written from
//! `vmtune plan --json`), or else from the domain XML's
//! `<metadata><vmtune:plan xmlns:vmtune="https://vmtune.dev/xmlns/plan/1">{…plan JSON…}</vmtune:plan></metadata>`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use plan::Plan;
use serde::Serialize;

use crate::engine::{self, ApplyOptions, HostPaths, Phases, QemuRef};
use crate::error::{ApplyError, Result};

/// XML namespace of the `<vmtune:plan>` metadata element.
pub const PLAN_NS: &str = "https://vmtune.dev/xmlns/plan/1";

#[derive(Debug, Clone)]
pub struct HookConfig {
    /// Where `<domain>.json` plans are looked up.
    pub plan_dir: PathBuf,
    /// Where journals and logs go: `<domain>.journal`, `<domain>.log`.
    pub journal_dir: PathBuf,
    /// Where libvirt writes `<domain>.pid` for running QEMU domains.
    pub libvirt_run_dir: PathBuf,
    /// Longest the hook may take; past it, the hook returns and lets the VM go on.
    pub timeout: Duration,
    /// The vmtune binary, to start the IRQ watcher after `started`; `None`: no watcher.
    pub watcher_exe: Option<PathBuf>,
    pub paths: HostPaths,
}

impl Default for HookConfig {
    fn default() -> Self {
        HookConfig {
            plan_dir: PathBuf::from("/etc/vmtune"),
            journal_dir: PathBuf::from("/run/vmtune"),
            libvirt_run_dir: PathBuf::from("/run/libvirt/qemu"),
            timeout: Duration::from_secs(20),
            watcher_exe: None,
            paths: HostPaths::default(),
        }
    }
}

/// What a hook call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookAction {
    Prepare,
    Started,
    Release,
    /// libvirtd restarted with the VM running: keep everything, restart a dead IRQ watcher.
    Reconnect,
    /// Any other operation (start, stopped, migrate, restore, attach, …).
    Ignore,
}

pub fn action(op: &str, sub_op: &str) -> HookAction {
    match (op, sub_op) {
        ("prepare", "begin") => HookAction::Prepare,
        ("started", "begin") => HookAction::Started,
        ("release", "end") => HookAction::Release,
        ("reconnect", "begin") => HookAction::Reconnect,
        _ => HookAction::Ignore,
    }
}

/// Whether libvirt reads the hook's stdout as the new domain XML for this operation
/// (`migrate begin`, `restore begin`): the hook must print nothing there (empty output
/// leaves the XML unchanged; anything else that is not a domain XML aborts the migration or
/// the restore).
pub fn is_filter(op: &str) -> bool {
    matches!(op, "migrate" | "restore")
}

/// What the hook did, for the log and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct HookReport {
    pub domain: String,
    pub action: HookAction,
    pub plan_source: Option<String>,
    /// One line each.
    pub messages: Vec<String>,
    /// Whether the work finished within the time limit.
    pub completed: bool,
}

/// A domain name usable in file names (libvirt forbids `/` too).
pub fn valid_domain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('/')
        && !name.starts_with('.')
        && name.len() <= 255
        && !name.contains('\0')
}

/// The vmtune plan in a domain XML's `<metadata>`, if any.
pub fn plan_from_domain_xml(xml: &str) -> Result<Option<Plan>> {
    let doc = roxmltree::Document::parse(xml)
        .map_err(|e| ApplyError::Other(format!("domain XML on stdin: {e}")))?;
    let root = doc.root_element();
    if root.tag_name().name() != "domain" {
        return Err(ApplyError::Other(format!(
            "domain XML on stdin: root element is <{}>, not <domain>",
            root.tag_name().name()
        )));
    }
    let Some(meta) = root.children().find(|n| n.has_tag_name("metadata")) else {
        return Ok(None);
    };
    let Some(el) = meta.children().find(|n| {
        n.is_element() && n.tag_name().name() == "plan" && n.tag_name().namespace() == Some(PLAN_NS)
    }) else {
        return Ok(None);
    };
    let text: String = el
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect();
    serde_json::from_str(text.trim()).map(Some).map_err(|e| {
        ApplyError::Other(format!("domain XML: <vmtune:plan> is not a plan JSON: {e}"))
    })
}

/// The domain's `<name>` from its XML.
pub fn domain_name_in_xml(xml: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    doc.root_element()
        .children()
        .find(|n| n.has_tag_name("name"))
        .and_then(|n| n.text())
        .map(|s| s.trim().to_string())
}

/// Find the plan: `PLAN_DIR/<domain>.json` first, then the XML metadata.
pub fn find_plan(domain: &str, xml: &str, plan_dir: &Path) -> Result<Option<(Plan, String)>> {
    let file = plan_dir.join(format!("{domain}.json"));
    if file.exists() {
        let text = std::fs::read_to_string(&file).map_err(|e| ApplyError::io(&file, e))?;
        let p: Plan = serde_json::from_str(&text)
            .map_err(|e| ApplyError::parse(&file, format!("not a vmtune plan: {e}")))?;
        return Ok(Some((p, file.display().to_string())));
    }
    if xml.trim().is_empty() {
        return Ok(None);
    }
    Ok(plan_from_domain_xml(xml)?.map(|p| (p, "domain XML <metadata>".to_string())))
}

/// The domain's journal.
pub fn journal_path(cfg: &HookConfig, domain: &str) -> PathBuf {
    cfg.journal_dir.join(format!("{domain}.journal"))
}

/// Run the hook within `cfg.timeout`. Never fails: problems become messages.
pub fn run(domain: &str, op: &str, sub_op: &str, xml: String, cfg: &HookConfig) -> HookReport {
    let act = action(op, sub_op);
    let mut rep = HookReport {
        domain: domain.to_string(),
        action: act,
        plan_source: None,
        messages: Vec::new(),
        completed: true,
    };
    if act == HookAction::Ignore {
        rep.messages.push(format!("{op} {sub_op}: nothing to do"));
        return rep;
    }
    if !valid_domain_name(domain) {
        rep.messages.push(format!(
            "domain name {domain:?} cannot name a file: nothing done"
        ));
        return rep;
    }
    let (tx, rx) = mpsc::channel();
    let (d, c) = (domain.to_string(), cfg.clone());
    std::thread::spawn(move || {
        let mut msgs = Vec::new();
        let src = work(&d, act, &xml, &c, &mut msgs);
        let _ = tx.send((src, msgs));
    });
    match rx.recv_timeout(cfg.timeout) {
        Ok((src, msgs)) => {
            rep.plan_source = src;
            rep.messages.extend(msgs);
        }
        Err(_) => {
            rep.completed = false;
            rep.messages.push(format!(
                "gave up after {:?} so the VM start is not held up; the journal records what was done (`vmtune restore --journal {}` undoes it)",
                cfg.timeout,
                journal_path(cfg, domain).display()
            ));
        }
    }
    rep
}

fn work(
    domain: &str,
    act: HookAction,
    xml: &str,
    cfg: &HookConfig,
    msgs: &mut Vec<String>,
) -> Option<String> {
    let journal = journal_path(cfg, domain);
    if act == HookAction::Reconnect {
        reconnect(domain, xml, cfg, &journal, msgs);
        return None;
    }
    if act == HookAction::Release {
        end_claim(cfg, domain, msgs);
        match engine::restore(&journal, Duration::from_secs(5)) {
            Ok(r) => {
                msgs.push(format!(
                    "restore: {} steps undone, {} failed",
                    r.steps.len(),
                    r.failed
                ));
                // and what each hugepage give-back returned and could not
                msgs.extend(
                    r.steps
                        .iter()
                        .filter(|s| s.result != "restored" || s.pages.is_some())
                        .map(|s| step_line(&s.result, &s.target, s.note.as_deref())),
                );
                msgs.extend(r.notes);
            }
            Err(e) => msgs.push(format!("restore failed: {e}")),
        }
        return None;
    }
    let (plan, src) = match find_plan(domain, xml, &cfg.plan_dir) {
        Ok(Some(p)) => p,
        Ok(None) => {
            msgs.push(format!(
                "no vmtune plan for {domain} ({}/{domain}.json or <vmtune:plan> metadata): nothing to do",
                cfg.plan_dir.display()
            ));
            return None;
        }
        Err(e) => {
            msgs.push(format!("{e}; nothing done"));
            return None;
        }
    };
    let mut opts = ApplyOptions::new(&journal);
    opts.append = true;
    opts.lock_wait = Duration::from_secs(5);
    opts.paths = cfg.paths.clone();
    let qemu = if act == HookAction::Prepare {
        opts.phases = Phases {
            hugepages: true,
            ..Phases::NONE
        };
        // the pages counted for this VM stay free until its QEMU maps them: claimed, so a
        // prepare of another VM before then does not count them as its own
        opts.claims = Some(engine::ClaimLedger {
            dir: cfg.journal_dir.clone(),
            owner: domain.to_string(),
            pid_dir: Some(cfg.libvirt_run_dir.clone()),
        });
        None
    } else {
        // QEMU is up: its guest RAM is mapped, the claim's pages are its own now
        end_claim(cfg, domain, msgs);
        opts.phases = Phases {
            hugepages: false,
            ..Phases::ALL
        };
        let pidfile = cfg.libvirt_run_dir.join(format!("{domain}.pid"));
        match std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            Some(pid) => Some(QemuRef::Pid(pid)),
            None => {
                msgs.push(format!(
                    "cannot read the QEMU pid from {}: nothing done",
                    pidfile.display()
                ));
                return Some(src);
            }
        }
    };
    match engine::apply(&plan, qemu.as_ref(), &opts) {
        Ok(r) => {
            let done = r.steps.iter().filter(|s| s.result == "done").count();
            msgs.push(format!(
                "{:?}: {done} changes made, journal {}",
                act,
                journal.display()
            ));
            msgs.extend(
                r.steps
                    .iter()
                    .filter(|s| s.result != "done")
                    .map(|s| step_line(&s.result, &s.target, s.note.as_deref())),
            );
            msgs.extend(r.notes);
            if let (HookAction::Started, Some(QemuRef::Pid(pid)), Some(exe)) =
                (act, &qemu, &cfg.watcher_exe)
            {
                match spawn_watcher(exe, &src, &plan, *pid, &journal, cfg) {
                    Ok(w) => msgs.push(format!("IRQ watcher started (pid {w})")),
                    Err(e) => msgs.push(format!("IRQ watcher not started: {e}")),
                }
            }
        }
        Err(e) => msgs.push(format!("apply failed, VM continues untuned: {e}")),
    }
    Some(src)
}

/// End the domain's hugepage claim, if it has one.
fn end_claim(cfg: &HookConfig, domain: &str, msgs: &mut Vec<String>) {
    match crate::hugepages::drop_claim(&cfg.journal_dir, domain) {
        Ok(true) => msgs.push("hugepage claim ended".into()),
        Ok(false) => {}
        Err(e) => msgs.push(format!("hugepage claim not removed: {e}")),
    }
}

/// libvirtd restarted while the VM runs: the pins, IRQ routes and shielding are still in
/// place and the journal still records them, so nothing is applied again. An IRQ watcher
/// started for this VM that is no longer running (its daemon's cgroup was killed) is started
/// again.
fn reconnect(domain: &str, xml: &str, cfg: &HookConfig, journal: &Path, msgs: &mut Vec<String>) {
    if !journal.exists() {
        msgs.push(format!(
            "no journal at {}: nothing was applied, nothing to do",
            journal.display()
        ));
        return;
    }
    msgs.push(format!(
        "journal {} kept, nothing applied again",
        journal.display()
    ));
    let pidfile = cfg.libvirt_run_dir.join(format!("{domain}.pid"));
    let qemu = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|p| crate::proc::process_running(&cfg.paths.proc_root, *p));
    let Some(pid) = qemu else {
        msgs.push(format!(
            "QEMU of {domain} is not running ({}): libvirt calls release, which restores",
            pidfile.display()
        ));
        return;
    };
    let Some(old) = watcher_pid(journal) else {
        return;
    };
    if watcher_running(&cfg.paths.proc_root, old, journal) {
        msgs.push(format!("IRQ watcher running (pid {old})"));
        return;
    }
    let Some(exe) = &cfg.watcher_exe else {
        msgs.push(format!(
            "IRQ watcher (pid {old}) is gone; not started again (--no-watch)"
        ));
        return;
    };
    match find_plan(domain, xml, &cfg.plan_dir) {
        Ok(Some((plan, src))) => match spawn_watcher(exe, &src, &plan, pid, journal, cfg) {
            Ok(w) => msgs.push(format!(
                "IRQ watcher (pid {old}) was gone: started again (pid {w})"
            )),
            Err(e) => msgs.push(format!(
                "IRQ watcher (pid {old}) is gone; not started again: {e}"
            )),
        },
        Ok(None) => msgs.push(format!(
            "IRQ watcher (pid {old}) is gone, and the plan with it: not started again"
        )),
        Err(e) => msgs.push(format!(
            "IRQ watcher (pid {old}) is gone; not started again: {e}"
        )),
    }
}

/// `<journal>.watch.pid`: the IRQ watcher started for this journal.
fn watcher_pid_path(journal: &Path) -> PathBuf {
    let mut p = journal.as_os_str().to_owned();
    p.push(".watch.pid");
    PathBuf::from(p)
}

fn watcher_pid(journal: &Path) -> Option<i32> {
    std::fs::read_to_string(watcher_pid_path(journal))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` is a watcher of this journal (not a process that reused the number): its
/// command line has `--watch` and the journal's path.
fn watcher_running(proc_root: &Path, pid: i32, journal: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(proc_root.join(pid.to_string()).join("cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let j = journal.as_os_str().as_encoded_bytes();
    args.contains(&b"--watch".as_slice()) && args.contains(&j)
}

/// Start `vmtune apply PLAN --pid PID --journal J --append --only irqs --watch` detached:
/// own process group, stdio to `<domain>.watch.log`, so libvirt does not wait for it. Its pid
/// goes to `<journal>.watch.pid`, for `reconnect`.
fn spawn_watcher(
    exe: &Path,
    src: &str,
    plan: &Plan,
    pid: i32,
    journal: &Path,
    cfg: &HookConfig,
) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let plan_file = if Path::new(src).is_file() {
        PathBuf::from(src)
    } else {
        // plan from the XML metadata: keep a copy next to the journal
        let mut p = journal.as_os_str().to_owned();
        p.push(".plan.json");
        let p = PathBuf::from(p);
        let text =
            serde_json::to_string_pretty(plan).map_err(|e| ApplyError::Other(e.to_string()))?;
        std::fs::write(&p, text).map_err(|e| ApplyError::io(&p, e))?;
        p
    };
    let mut log = journal.as_os_str().to_owned();
    log.push(".watch.log");
    let log = PathBuf::from(log);
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| ApplyError::io(&log, e))?;
    let err = out.try_clone().map_err(|e| ApplyError::io(&log, e))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("apply")
        .arg(&plan_file)
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--journal")
        .arg(journal)
        .args(["--append", "--only", "irqs", "--watch"])
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    if cfg.paths.sys_root != Path::new("/sys") || cfg.paths.proc_root != Path::new("/proc") {
        return Err(ApplyError::Other(
            "watcher needs the live /proc and /sys".into(),
        ));
    }
    let child = cmd
        .spawn()
        .map_err(|e| ApplyError::Other(format!("{}: {e}", exe.display())))?;
    let pidfile = watcher_pid_path(journal);
    std::fs::write(&pidfile, format!("{}\n", child.id()))
        .map_err(|e| ApplyError::io(&pidfile, e))?;
    Ok(child.id())
}

/// One step of an apply or restore report that did not go as planned, for the hook's log.
fn step_line(result: &str, target: &str, note: Option<&str>) -> String {
    format!("  {result} {target}: {}", note.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions() {
        assert_eq!(action("prepare", "begin"), HookAction::Prepare);
        assert_eq!(action("started", "begin"), HookAction::Started);
        assert_eq!(action("release", "end"), HookAction::Release);
        assert_eq!(action("stopped", "end"), HookAction::Ignore);
        assert_eq!(action("start", "begin"), HookAction::Ignore);
        assert_eq!(action("migrate", "begin"), HookAction::Ignore);
        assert_eq!(action("restore", "begin"), HookAction::Ignore);
        assert_eq!(action("reconnect", "begin"), HookAction::Reconnect);
        assert_eq!(action("attach", "begin"), HookAction::Ignore);
        assert!(is_filter("migrate") && is_filter("restore") && !is_filter("prepare"));
    }

    #[test]
    fn domain_names() {
        assert!(valid_domain_name("win10-gpu"));
        assert!(!valid_domain_name("../etc/passwd"));
        assert!(!valid_domain_name(""));
        assert!(!valid_domain_name(".hidden"));
    }

    #[test]
    fn metadata_plan() {
        let plan = crate::engine::tests_support::small_plan_json();
        let xml = format!(
            "<domain type='kvm'><name>w</name><metadata><vmtune:plan xmlns:vmtune='{PLAN_NS}'>{plan}</vmtune:plan></metadata></domain>"
        );
        let p = plan_from_domain_xml(&xml).unwrap().unwrap();
        assert_eq!(p.vcpus.len(), 2);
        assert_eq!(domain_name_in_xml(&xml).as_deref(), Some("w"));
        assert!(plan_from_domain_xml("<domain><name>w</name></domain>")
            .unwrap()
            .is_none());
        // same local name, other namespace: not ours
        let other = "<domain><metadata><x:plan xmlns:x='urn:other'>{}</x:plan></metadata></domain>";
        assert!(plan_from_domain_xml(other).unwrap().is_none());
        assert!(plan_from_domain_xml("<domain").is_err());
        assert!(plan_from_domain_xml("<network/>").is_err());
        let bad = format!("<domain><metadata><vmtune:plan xmlns:vmtune='{PLAN_NS}'>nope</vmtune:plan></metadata></domain>");
        assert!(plan_from_domain_xml(&bad).is_err());
    }
}

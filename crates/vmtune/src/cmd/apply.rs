//! `vmtune apply`, `vmtune restore`, `vmtune hook`: the thin edge over the `apply` crate.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apply::hook::{self, HookConfig};
use apply::{ApplyOptions, Phases, QemuRef, StepReport};

use super::common::print_json;

/// Apply a plan to a running QEMU: pin its threads, route IRQs, shield the guest CPUs. Hugepages
/// are reserved for a VM about to start (`--only hugepages` without a QEMU, before it starts);
/// with a running QEMU, whose guest RAM is already allocated, the pools are left alone and the
/// notes say how many pages it holds. Every change is written to a journal (fsync'd before the
/// change, with the previous value) so `vmtune restore` can undo it exactly — also after a
/// crash or kill -9.
///
/// Example: `vmtune plan --vcpus 4 --memory 8G --json > plan.json;
/// vmtune apply plan.json --qmp /run/vm.qmp --dry-run`
#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// Plan file: the output of `vmtune plan --json`.
    #[arg(value_name = "PLAN.json")]
    pub plan: PathBuf,
    /// QMP socket of the QEMU (`-qmp unix:PATH,server=on,wait=off`); vCPU threads come from
    /// `query-cpus-fast`, iothreads from `query-iothreads`.
    #[arg(long, value_name = "SOCKET", conflicts_with = "pid")]
    pub qmp: Option<PathBuf>,
    /// QEMU process id; threads are found by name (`CPU n/KVM`), which needs QEMU started with
    /// `-name NAME,debug-threads=on` (libvirt does that).
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Journal file.
    #[arg(long, value_name = "FILE", default_value = apply::DEFAULT_JOURNAL)]
    pub journal: PathBuf,
    /// Print every change in order (target, old → new) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// After applying, keep routing new IRQs (the VFIO vectors appear when the guest driver
    /// enables them) until QEMU exits or the journal is restored.
    #[arg(long)]
    pub watch: bool,
    /// Poll interval of --watch, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Only these parts: comma list of hugepages, threads, irqs, shield. Default: all.
    #[arg(long, value_name = "PHASES")]
    pub only: Option<String>,
    /// Add to an existing journal instead of refusing (what the hook does between `prepare`
    /// and `started`).
    #[arg(long)]
    pub append: bool,
    /// Machine output: the steps with their results.
    #[arg(long)]
    pub json: bool,
}

/// Undo everything a journal records, newest change first, returning the host to exactly its
/// earlier state. Threads or IRQs that no longer exist are skipped and said so. Running it
/// again is harmless; the restored journal is kept as JOURNAL.restored.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// Journal file (default /run/vmtune/journal). A journal named here that does not exist
    /// (and was not restored before, as FILE.restored) is an error; a missing default journal
    /// means nothing was applied.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Print what would be restored, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Machine output.
    #[arg(long)]
    pub json: bool,
}

/// libvirt qemu hook. Install /etc/libvirt/hooks/qemu as `exec vmtune hook "$@"` (see
/// docs/hook.md). On `prepare begin` it reserves hugepages, on `started begin` it pins, routes
/// IRQs and shields, on `release end` it restores. It always exits 0 within --timeout-s so a VM
/// start is never blocked; what it did goes to stderr (libvirt's log) and to
/// JOURNAL_DIR/DOMAIN.log.
#[derive(clap::Args, Debug)]
pub struct HookArgs {
    /// Domain name (libvirt's first argument; may begin with `-`).
    #[arg(allow_hyphen_values = true)]
    pub domain: String,
    /// Operation: prepare, start, started, stopped, release, migrate, restore, reconnect, attach.
    #[arg(allow_hyphen_values = true)]
    pub op: String,
    /// Sub-operation: begin or end.
    #[arg(allow_hyphen_values = true)]
    pub sub_op: String,
    /// libvirt's extra argument: `-`, or on `release end` the shutoff reason (libvirt ≥ 10.5:
    /// shutdown, destroyed, crashed, migrated, saved, failed, `from snapshot`, daemon, unknown).
    #[arg(allow_hyphen_values = true)]
    pub extra: Option<String>,
    /// Directory of per-domain plans, DOMAIN.json.
    #[arg(long, value_name = "DIR", default_value = "/etc/vmtune")]
    pub plan_dir: PathBuf,
    /// Directory of per-domain journals and logs.
    #[arg(long, value_name = "DIR", default_value = "/run/vmtune")]
    pub journal_dir: PathBuf,
    /// Where libvirt keeps DOMAIN.pid of running domains.
    #[arg(long, value_name = "DIR", default_value = "/run/libvirt/qemu")]
    pub libvirt_run_dir: PathBuf,
    /// Longest the hook may take, in seconds.
    #[arg(long, value_name = "S", default_value_t = 20)]
    pub timeout_s: u64,
    /// Do not start the background IRQ watcher after `started`.
    #[arg(long)]
    pub no_watch: bool,
    /// Machine output.
    #[arg(long)]
    pub json: bool,
}

fn print_steps(steps: &[StepReport]) {
    for s in steps {
        let n = s
            .step
            .map(|n| format!("{n:>3}"))
            .unwrap_or_else(|| "  -".into());
        let prev = if s.previous.is_empty() {
            "(none)"
        } else {
            &s.previous
        };
        print!("{n} {:<8} {}: {prev} -> {}", s.result, s.target, s.new);
        if let Some(o) = &s.observed {
            print!("  [now {o}]");
        }
        if let Some(note) = &s.note {
            print!("  ({note})");
        }
        println!();
    }
}

pub fn run_apply(a: ApplyArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&a.plan)
        .with_context(|| format!("reading {}", a.plan.display()))?;
    let plan: plan::Plan = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a vmtune plan (vmtune plan --json)",
            a.plan.display()
        )
    })?;
    let qemu = match (&a.qmp, a.pid) {
        (Some(s), _) => Some(QemuRef::Qmp(s.clone())),
        (None, Some(p)) => Some(QemuRef::Pid(p)),
        (None, None) => None,
    };
    let mut opts = ApplyOptions::new(&a.journal);
    opts.dry_run = a.dry_run;
    opts.append = a.append;
    if let Some(only) = &a.only {
        opts.phases = Phases::parse(only).map_err(|e| anyhow::anyhow!("--only: {e}"))?;
    }
    if qemu.is_none() && (opts.phases.threads || a.watch) && a.only.is_none() {
        bail!("give the QEMU with --qmp SOCKET or --pid PID (or --only hugepages,irqs,shield)");
    }
    if let Ok(v) = std::env::var(apply::CRASH_ENV) {
        // test hook, see docs/hook.md
        opts.crash_after_step = Some(
            v.trim()
                .parse()
                .with_context(|| format!("{}={v:?}", apply::CRASH_ENV))?,
        );
    }
    let rep = apply::apply(&plan, qemu.as_ref(), &opts)?;
    if a.json {
        print_json(&rep)?;
    } else {
        let verb = if rep.dry_run { "would make" } else { "made" };
        println!(
            "{} {} changes{}; journal {}",
            verb,
            rep.steps.len(),
            rep.qemu_pid
                .map(|p| format!(" for QEMU {p}"))
                .unwrap_or_default(),
            rep.journal.display()
        );
        print_steps(&rep.steps);
        for n in &rep.notes {
            println!("note: {n}");
        }
    }
    if a.watch && !a.dry_run {
        let pid = rep
            .qemu_pid
            .context("--watch needs the QEMU (--qmp or --pid)")?;
        let why = apply::watch(
            &plan,
            pid,
            &opts,
            Duration::from_millis(a.poll_ms.max(10)),
            None,
            |s| {
                if a.json {
                    if let Ok(l) = serde_json::to_string(s) {
                        println!("{l}");
                    }
                } else {
                    print_steps(std::slice::from_ref(s));
                }
            },
        )?;
        if !a.json {
            println!("watch ended: {why}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_restore(a: RestoreArgs) -> Result<ExitCode> {
    let journal = match &a.journal {
        Some(j) => {
            let archived = apply::engine::archived_path(j);
            if !j.exists() && !archived.exists() {
                bail!(
                    "journal {} does not exist (nor {}): nothing was applied with it; check the path",
                    j.display(),
                    archived.display()
                );
            }
            j.clone()
        }
        None => PathBuf::from(apply::DEFAULT_JOURNAL),
    };
    let rep = if a.dry_run {
        apply::restore_dry_run(&journal)?
    } else {
        apply::restore(&journal, Duration::from_secs(10))?
    };
    if a.json {
        print_json(&rep)?;
    } else {
        println!(
            "{} {} steps from {}",
            if a.dry_run {
                "would restore"
            } else {
                "restored"
            },
            rep.steps.len(),
            rep.journal.display()
        );
        print_steps(&rep.steps);
        for n in &rep.notes {
            println!("note: {n}");
        }
        if let Some(p) = &rep.archived_as {
            println!("journal archived as {}", p.display());
        }
    }
    if rep.failed > 0 {
        bail!(
            "{} steps could not be restored; journal kept at {}",
            rep.failed,
            rep.journal.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_hook(a: HookArgs) -> Result<ExitCode> {
    let cfg = HookConfig {
        plan_dir: a.plan_dir.clone(),
        journal_dir: a.journal_dir.clone(),
        libvirt_run_dir: a.libvirt_run_dir.clone(),
        timeout: Duration::from_secs(a.timeout_s.max(1)),
        watcher_exe: if a.no_watch {
            None
        } else {
            std::env::current_exe().ok()
        },
        paths: Default::default(),
    };
    // stdin (the domain XML) is read within the time limit too
    let xml = read_stdin_within(Duration::from_secs(2));
    let rep = hook::run(&a.domain, &a.op, &a.sub_op, xml, &cfg);
    let lines: Vec<String> = rep
        .messages
        .iter()
        .map(|m| format!("vmtune hook {} {} {}: {m}", a.domain, a.op, a.sub_op))
        .collect();
    for l in &lines {
        eprintln!("{l}");
    }
    if hook::valid_domain_name(&a.domain) && rep.action != hook::HookAction::Ignore {
        let log = a.journal_dir.join(format!("{}.log", a.domain));
        if std::fs::create_dir_all(&a.journal_dir).is_ok() {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
            {
                use std::io::Write;
                for l in &lines {
                    let _ = writeln!(f, "{l}");
                }
            }
        }
    }
    // on `migrate begin` / `restore begin` libvirt reads stdout as the new domain XML:
    // nothing may go there (empty output keeps the XML)
    if a.json && !hook::is_filter(&a.op) {
        // never fail the hook on output problems
        let _ = print_json(&rep);
    }
    Ok(ExitCode::SUCCESS)
}

/// The hook was called with arguments vmtune cannot read: say so on stderr (libvirt's log)
/// and exit 0, so a VM start (or, on `reconnect`, a running VM) is never stopped by it.
pub fn hook_bad_arguments(e: &clap::Error) -> ExitCode {
    // clap's message up to its usage block, on one line
    let msg = e.to_string();
    let what: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let what = what.join(" ");
    let what = what.trim_start_matches("error: ");
    eprintln!("vmtune hook: cannot read its arguments ({what}): nothing done");
    // take the domain XML libvirt is writing, so its write does not fail
    let _ = read_stdin_within(Duration::from_secs(2));
    ExitCode::SUCCESS
}

/// stdin (the domain XML, at most 16 MiB), read for at most `limit`: libvirt closes it after
/// writing, a caller that never does gets what came.
fn read_stdin_within(limit: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().take(16 << 20).read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx.recv_timeout(limit).unwrap_or_default()
}

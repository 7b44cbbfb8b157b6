//! The journal and restore on file actuators in a scratch tree (no root needed): a crash at any
//! point of an apply — before a change, after it, in the middle of writing a record — is undone
//! exactly by `restore`, and restore is idempotent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apply::journal::{self, Header, Journal, State};
use apply::step::{Actuator, PlannedStep, Target};
use proptest::prelude::*;

struct Tree {
    _dir: tempfile::TempDir,
    files: Vec<(PathBuf, &'static str)>,
    journal: PathBuf,
}

/// Files that look like the real ones, with their initial values.
fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let files = vec![
        (r.join("nr_hugepages"), "0"),
        (r.join("default_smp_affinity"), "ff"),
        (r.join("cpumask"), "ff"),
        (r.join("cpuset.cpus"), "0-7"),
    ];
    for (p, v) in &files {
        std::fs::write(p, v).unwrap();
    }
    // the pool's other file (the pages are "used" at once, so it stays 0)
    std::fs::write(r.join("free_hugepages"), "0").unwrap();
    let journal = r.join("run/journal");
    Tree {
        _dir: dir,
        files,
        journal,
    }
}

fn steps(t: &Tree) -> Vec<PlannedStep> {
    let f = |i: usize| t.files[i].0.clone();
    vec![
        PlannedStep::new(
            Target::Hugepages(apply::step::Hugepages {
                node: 0,
                size_kb: 2048,
                path: f(0),
                compact: PathBuf::from("/nonexistent"),
                asked: 512,
                reserved: None,
                own_pages: true,
            }),
            "0",
            "512",
        ),
        PlannedStep::new(
            Target::MaskFile(apply::step::MaskFile {
                path: f(1),
                what: "default IRQ affinity".into(),
            }),
            "ff",
            "0f",
        ),
        PlannedStep::new(
            Target::MaskFile(apply::step::MaskFile {
                path: f(2),
                what: "workqueue cpumask".into(),
            }),
            "ff",
            "0f",
        ),
        PlannedStep::new(
            Target::CgroupFile(apply::step::CgroupFile {
                path: f(3),
                created: false,
            }),
            "0-7",
            "0-3",
        ),
    ]
}

fn header() -> Header {
    Header {
        journal: "vmtune".into(),
        version: 1,
        created_unix: 0,
        apply_pid: 1,
        qemu_pid: None,
    }
}

fn state(t: &Tree) -> Vec<String> {
    t.files
        .iter()
        .map(|(p, _)| std::fs::read_to_string(p).unwrap())
        .collect()
}

fn initial(t: &Tree) -> Vec<String> {
    t.files.iter().map(|(_, v)| v.to_string()).collect()
}

/// Apply the steps like the engine does, stopping ("crashing") after `crash_after` changes,
/// with `record_outcome` saying whether the last change got its outcome line.
fn apply_until(t: &Tree, crash_after: usize, record_outcome: bool) {
    let mut j = Journal::create(&t.journal, &header()).unwrap();
    for (i, s) in steps(t).iter().enumerate() {
        let n = j.intend(&s.target, &s.previous, &s.new).unwrap();
        s.target.apply(&s.new).unwrap();
        if i + 1 == crash_after {
            if record_outcome {
                j.outcome(n, State::Done, None).unwrap();
            }
            return;
        }
        j.outcome(n, State::Done, None).unwrap();
    }
}

#[test]
fn crash_after_every_step_is_undone_exactly() {
    for k in 1..=steps(&tree()).len() {
        for recorded in [false, true] {
            let t = tree();
            apply_until(&t, k, recorded);
            assert_ne!(state(&t), initial(&t));
            let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
            assert_eq!(r.failed, 0);
            assert_eq!(r.steps.len(), k);
            assert_eq!(
                state(&t),
                initial(&t),
                "crash after step {k} (outcome recorded: {recorded})"
            );
            assert!(!t.journal.exists());
            // idempotent
            let again = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
            assert!(again.steps.is_empty());
            assert_eq!(state(&t), initial(&t));
        }
    }
}

#[test]
fn torn_record_after_a_crash_inside_write() {
    let t = tree();
    apply_until(&t, 2, true);
    // a crash in the middle of writing step 3's intended record: the change was never made
    let mut text = std::fs::read_to_string(&t.journal).unwrap();
    text.push_str("{\"step\":3,\"state\":\"intended\",\"target\":{\"actuator\":\"mask_f");
    std::fs::write(&t.journal, text).unwrap();
    let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
    assert_eq!(r.steps.len(), 2);
    assert_eq!(state(&t), initial(&t));
}

#[test]
fn restore_reports_the_failure_and_keeps_the_journal() {
    let t = tree();
    apply_until(&t, 4, true);
    // a target that became a directory cannot be written back
    std::fs::remove_file(&t.files[3].0).unwrap();
    std::fs::create_dir(&t.files[3].0).unwrap();
    let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
    assert_eq!(r.failed, 1);
    assert!(t.journal.exists(), "kept for another try");
    assert!(r.archived_as.is_none());
    // the other steps were restored anyway
    assert_eq!(std::fs::read_to_string(&t.files[1].0).unwrap(), "ff");
}

#[test]
fn dry_run_restore_changes_nothing() {
    let t = tree();
    apply_until(&t, 4, true);
    let during = state(&t);
    let r = apply::restore_dry_run(&t.journal).unwrap();
    assert_eq!(r.steps.len(), 4);
    assert_eq!(r.steps[0].result, "planned");
    assert_eq!(state(&t), during);
    assert!(t.journal.exists());
}

fn lock_of(p: &Path) -> PathBuf {
    journal::lock_path(p)
}

#[test]
fn restore_waits_for_the_lock() {
    let t = tree();
    apply_until(&t, 1, true);
    let l = journal::Lock::acquire(&lock_of(&t.journal), Duration::from_millis(10)).unwrap();
    let e = apply::restore(&t.journal, Duration::from_millis(100)).unwrap_err();
    assert!(e.to_string().contains("locked"), "{e}");
    drop(l);
    apply::restore(&t.journal, Duration::from_millis(100)).unwrap();
    assert_eq!(state(&t), initial(&t));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The journal parser never panics, whatever a crash or a disk leaves behind.
    #[test]
    fn journal_parse_never_panics(text in "\\PC{0,400}") {
        let _ = journal::parse(Path::new("j"), &text);
    }

    /// Nor with a valid header and arbitrary records.
    #[test]
    fn journal_parse_records_never_panic(lines in proptest::collection::vec("\\PC{0,120}", 0..8)) {
        let mut text = serde_json::to_string(&header()).unwrap();
        text.push('\n');
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        let _ = journal::parse(Path::new("j"), &text);
    }

    #[test]
    fn hook_xml_never_panics(xml in "\\PC{0,300}") {
        let _ = apply::hook::plan_from_domain_xml(&xml);
        let _ = apply::hook::domain_name_in_xml(&xml);
    }

    #[test]
    fn irq_names_never_panic(s in "\\PC{0,80}") {
        let _ = apply::irq::vfio_device(&s);
        let _ = apply::qemu::classify_comm(&s);
        let _ = apply::proc::parse_start_time(&s);
    }
}

/// A restore that failed on another step is run again after the cause is fixed: the
/// hugepage give-back it made is not made twice (another VM's 100 pages, reserved between the
/// two restores, stay).
#[test]
fn a_give_back_is_not_repeated_by_a_second_restore() {
    let t = tree();
    apply_until(&t, 4, true);
    std::fs::remove_file(&t.files[3].0).unwrap();
    std::fs::create_dir(&t.files[3].0).unwrap();
    let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
    assert_eq!(r.failed, 1);
    let h = r.steps.iter().find(|s| s.actuator == "hugepages").unwrap();
    assert_eq!((h.previous.as_str(), h.new.as_str()), ("512", "0"));
    assert_eq!(h.pages.unwrap().returned, 512);
    // fixed; meanwhile another VM reserved 100 pages
    std::fs::remove_dir(&t.files[3].0).unwrap();
    std::fs::write(&t.files[3].0, "0-3").unwrap();
    std::fs::write(&t.files[0].0, "100").unwrap();
    let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
    assert_eq!(r.failed, 0, "{r:#?}");
    let h = r.steps.iter().find(|s| s.actuator == "hugepages").unwrap();
    assert_eq!(h.result, "skipped", "{h:#?}");
    assert_eq!(std::fs::read_to_string(&t.files[0].0).unwrap(), "100");
    assert_eq!(std::fs::read_to_string(&t.files[3].0).unwrap(), "0-7");
}

/// A restore killed between journaling a give-back and writing it: the next restore writes
/// the journaled value (it does not compute a second give-back from the pool).
#[test]
fn a_give_back_interrupted_by_a_crash_is_finished() {
    for written in [false, true] {
        let t = tree();
        apply_until(&t, 1, true);
        let mut j = Journal::open_append(&t.journal).unwrap();
        j.undoing(1, "512", "0").unwrap();
        if written {
            std::fs::write(&t.files[0].0, "0").unwrap();
        }
        drop(j);
        let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
        assert_eq!(r.failed, 0);
        assert_eq!(r.steps[0].new, "0", "{:#?}", r.steps);
        assert_eq!(std::fs::read_to_string(&t.files[0].0).unwrap(), "0");
    }
}

/// A journal written before hugepage steps owned their pages (no `own_pages`): restore
/// writes its previous value back, as that version did.
#[test]
fn an_older_journals_hugepage_step_is_restored_absolutely() {
    let t = tree();
    let mut j = Journal::create(&t.journal, &header()).unwrap();
    let target: Target = serde_json::from_value(serde_json::json!({
        "actuator": "hugepages", "node": 0, "size_kb": 2048,
        "path": t.files[0].0, "compact": "/nonexistent", "asked": 8
    }))
    .unwrap();
    let n = j.intend(&target, "0", "8").unwrap();
    target.apply("8").unwrap();
    j.outcome(n, State::Done, None).unwrap();
    drop(j);
    std::fs::write(&t.files[0].0, "20").unwrap();
    let r = apply::restore(&t.journal, Duration::from_secs(1)).unwrap();
    assert_eq!(r.failed, 0);
    assert!(r.steps[0].pages.is_none());
    assert_eq!(std::fs::read_to_string(&t.files[0].0).unwrap(), "0");
}

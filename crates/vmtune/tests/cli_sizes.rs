//! Sizes on the command line: a number without a unit is refused with the fix spelled out
//! (QEMU users mean MiB, the kernel means bytes: vmtune does not guess), and `--help` says so.

mod common;
use common::run;

#[test]
fn a_bare_number_is_refused_with_the_unit_to_add() {
    for (args, bare) in [
        (
            &[
                "plan",
                "--topology",
                "builtin",
                "--vcpus",
                "4",
                "--memory",
                "4096",
            ][..],
            "4096",
        ),
        (
            &["boot", "estimate", "--memory", "110", "--gpus", "7"][..],
            "110",
        ),
        (&["bench", "membw", "--size", "64"][..], "64"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("add a unit (e.g. {bare}M)")),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}: nothing runs");
    }
}

#[test]
fn sizes_with_a_unit_mean_what_they_say() {
    for (mem, bytes) in [
        ("4096M", 4096u64 << 20),
        ("4G", 4 << 30),
        ("4GiB", 4 << 30),
        ("4194304K", 4 << 30),
    ] {
        let o = run(&[
            "plan",
            "--topology",
            "builtin",
            "--vcpus",
            "4",
            "--memory",
            mem,
            "--json",
        ]);
        assert!(
            o.status.success(),
            "{mem}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["request"]["memory_bytes"], bytes, "{mem}");
    }
}

#[test]
fn help_states_the_unit_rule() {
    // help text is wrapped to the terminal: compare with whitespace collapsed
    let help = |args: &[&str]| {
        let o = run(args);
        let h = String::from_utf8_lossy(&o.stdout).into_owned();
        h.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let h = help(&["plan", "--help"]);
    assert!(
        h.contains("a bare number is refused: add a unit, e.g. 4096M"),
        "{h}"
    );
    let h = help(&["--help"]);
    assert!(h.contains("Sizes need a unit: 512M, 64G, 1T"), "{h}");
}

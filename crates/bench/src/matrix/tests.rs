//! The matrix without a daemon: a fake libvirt that "boots" a layout by writing what the
//! guest's init would write, with figures that depend on the layout.

use std::collections::BTreeSet;

use super::*;
use crate::readers::synth::{stream, StreamStyle};

/// A fake libvirt: `start` writes the result file the measuring init would, with a triad
/// rate of `rate(layout, run)`; layouts named in `fail` refuse to start.
struct Fake {
    defined: BTreeSet<String>,
    running: BTreeSet<String>,
    log: Vec<String>,
    fail: Vec<&'static str>,
    rate: fn(&str, usize) -> f64,
    files: std::collections::BTreeMap<String, ScratchFiles>,
}

impl Fake {
    fn new(rate: fn(&str, usize) -> f64) -> Fake {
        Fake {
            defined: BTreeSet::new(),
            running: BTreeSet::new(),
            log: Vec::new(),
            fail: Vec::new(),
            rate,
            files: Default::default(),
        }
    }
}

fn layout_of(name: &str) -> (&str, usize) {
    // PREFIX-LAYOUT-RUN with PREFIX "t"
    let rest = name.strip_prefix("t-").unwrap();
    let (l, r) = rest.rsplit_once('-').unwrap();
    (l, r.parse().unwrap())
}

impl Domains for Fake {
    fn scratch_xml(&self, layout: &LayoutSpec, f: &ScratchFiles) -> Result<String> {
        Ok(format!(
            "<domain><name>{}</name><!-- {} --></domain>",
            f.name, layout.name
        ))
    }
    fn define(&mut self, name: &str, _xml: &Path) -> Result<()> {
        self.log.push(format!("define {name}"));
        self.defined.insert(name.to_string());
        Ok(())
    }
    fn start(&mut self, name: &str) -> Result<()> {
        let (layout, run) = layout_of(name);
        if self.fail.contains(&layout) {
            return Err(BenchError::Invalid(format!(
                "virsh start: {layout} refused"
            )));
        }
        self.log.push(format!("start {name}"));
        let f = self.files.get(name).cloned();
        let result = f.map(|f| f.result).unwrap_or_else(|| {
            // the matrix writes the result path next to the XML it defined
            PathBuf::new()
        });
        let mut rf = RunFile::new("guest");
        let rate = (self.rate)(layout, run);
        rf.metrics.push(Metric::new(
            "membw.triad",
            "MB/s",
            true,
            vec![rate * 0.99, rate, rate * 1.01],
        ));
        rf.metrics
            .push(Metric::new("timer.tsc.vdso", "ns", false, vec![20.0, 21.0]));
        let body = stream(
            StreamStyle::C510,
            &[[rate; 4]; 4].map(|r| [r[0], 0.01, 0.01, 0.01]),
            false,
        );
        let text = format!(
            "VMTUNE-RESULT-BEGIN 0\n{}\nVMTUNE-RESULT-END\nVMTUNE-RUN-BEGIN stream\n{body}\nVMTUNE-RUN-END 0\n",
            serde_json::to_string(&rf).unwrap()
        );
        std::fs::write(&result, text).unwrap();
        self.running.insert(name.to_string());
        Ok(())
    }
    fn state(&mut self, name: &str) -> Result<Option<String>> {
        Ok(self.defined.contains(name).then(|| "shut off".to_string()))
    }
    fn remove(&mut self, name: &str) -> Result<()> {
        self.log.push(format!("remove {name}"));
        self.defined.remove(name);
        self.running.remove(name);
        Ok(())
    }
}

/// The fake needs the result path before `start`: take it from the XML file the matrix
/// wrote beside it (`NAME.result` → `NAME.xml`).
struct Paths<'a>(&'a mut Fake, PathBuf);

impl Domains for Paths<'_> {
    fn scratch_xml(&self, l: &LayoutSpec, f: &ScratchFiles) -> Result<String> {
        self.0.scratch_xml(l, f)
    }
    fn define(&mut self, name: &str, xml: &Path) -> Result<()> {
        let f = ScratchFiles {
            name: name.into(),
            kernel: self.1.join("vmlinuz"),
            initrd: self.1.join("initramfs.cpio"),
            cmdline: CMDLINE.into(),
            console: xml.with_extension("console"),
            result: xml.with_extension("result"),
        };
        self.0.files.insert(name.into(), f);
        self.0.define(name, xml)
    }
    fn start(&mut self, name: &str) -> Result<()> {
        self.0.start(name)
    }
    fn state(&mut self, name: &str) -> Result<Option<String>> {
        self.0.state(name)
    }
    fn remove(&mut self, name: &str) -> Result<()> {
        self.0.remove(name)
    }
}

fn layouts() -> Vec<LayoutSpec> {
    ["default", "pin", "pin-numa", "pin-numa-smt"]
        .iter()
        .map(|n| LayoutSpec {
            name: n.to_string(),
            describe: n.to_string(),
            domain_xml: "<domain/>".into(),
            vcpus: 4,
            pins: "none".into(),
            guest: "1 socket".into(),
            notes: vec![],
            plan: None,
            expect: None,
        })
        .collect()
}

fn opts(dir: &Path, runs: usize) -> MatrixOptions {
    // any files stand in for the kernel, busybox and vmtune: the fake never boots them
    let stub = dir.join("stub");
    std::fs::write(&stub, b"\x7fELF").unwrap();
    MatrixOptions {
        runs,
        prefix: "t".into(),
        workdir: dir.join("work"),
        kernel: stub.clone(),
        busybox: stub.clone(),
        vmtune: stub,
        suite_args: vec![],
        user_runs: vec![UserRun::parse("stream=/opt/stream").unwrap()],
        files: vec![],
        timeout: Duration::from_secs(5),
        transport: Transport::Initramfs,
    }
}

/// The four layouts, `runs` each, through `fake`.
fn run_fake(fake: &mut Fake, dir: &Path, runs: usize) -> Vec<RunRecord> {
    let o = opts(dir, runs);
    let work = o.workdir.clone();
    run(
        &layouts(),
        &o,
        &mut Paths(fake, work),
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap()
}

#[test]
fn the_order_interleaves_and_rotates() {
    let o = order(4, 3);
    assert_eq!(o.len(), 12);
    let all: BTreeSet<_> = o.iter().copied().collect();
    assert_eq!(all.len(), 12, "each (layout, run) once");
    // each round holds every layout once, and the first layout of round r is r mod 4
    for r in 0..3 {
        let round: Vec<usize> = o.iter().filter(|x| x.1 == r).map(|x| x.0).collect();
        assert_eq!(round.len(), 4);
        assert_eq!(round[0], r % 4);
        assert_eq!(round.iter().collect::<BTreeSet<_>>().len(), 4);
    }
}

fn by_layout(l: &str, run: usize) -> f64 {
    match l {
        "pin-numa" | "pin-numa-smt" => 20_000.0 + run as f64 * 100.0,
        _ => 10_000.0 + run as f64 * 100.0,
    }
}

#[test]
fn every_run_is_measured_and_every_scratch_domain_removed() {
    let d = tempfile::tempdir().unwrap();
    let mut fake = Fake::new(by_layout);
    let recs = run_fake(&mut fake, d.path(), 2);
    assert_eq!(recs.len(), 8);
    assert!(recs.iter().all(|r| r.error.is_none()), "{recs:?}");
    assert!(fake.defined.is_empty(), "left defined: {:?}", fake.defined);
    let defines = fake.log.iter().filter(|l| l.starts_with("define")).count();
    let removes = fake.log.iter().filter(|l| l.starts_with("remove")).count();
    assert_eq!((defines, removes), (8, 8));
    // the --run command's STREAM table was read
    let u = &recs[0].user[0];
    assert_eq!(u.tool.as_deref(), Some("stream"));
    assert!(u.measures.iter().any(|m| m.metric == "triad"));

    let mut ls = layouts();
    ls[2].plan = Some(serde_json::json!({"guest_numa": [{"cell": 0}, {"cell": 1}]}));
    let rep = summarize(
        ls,
        2,
        recs,
        Some("pin".into()),
        "the planner's plan is pin".into(),
        None,
    );
    assert!(!rep.partial);
    // the plans differ by design: not listed as "what differed" (the layouts' table says how)
    assert!(
        rep.comparison
            .differences
            .iter()
            .all(|d| !d.contains("plan.")),
        "{:?}",
        rep.comparison.differences
    );
    assert!(rep.per_layout[2].plan.is_some(), "kept in matrix.json");
    let triad = rep
        .comparison
        .rows
        .iter()
        .find(|r| r.metric == "membw.triad")
        .unwrap();
    // one sample per run: the run's median
    let pin_numa = triad.runs[2].as_ref().unwrap();
    assert_eq!(pin_numa.n, 2);
    assert_eq!((pin_numa.min, pin_numa.max), (20_100.0, 20_200.0));
    assert_eq!(triad.changes[2].as_ref().unwrap().beyond_noise, Some(true));
    // the planner chose pin and pin-numa beat it beyond noise: said
    assert!(rep.verdict[0].contains("disagrees"), "{:?}", rep.verdict);
    assert!(
        rep.verdict[0].contains("pin-numa beat it on membw.triad"),
        "{:?}",
        rep.verdict
    );
    let t = text(&rep);
    assert!(t.contains("pin *"), "{t}");
    assert!(t.contains("stream.stream.triad"), "{t}");
    let h = html(&rep, "matrix");
    assert!(
        h.contains("planner&#39;s choice") || h.contains("planner's choice"),
        "{h}"
    );
    assert!(h.find("<h2>Layouts</h2>").unwrap() < h.find("<h2>Runs</h2>").unwrap());
    assert!(!h.contains("plan.guest_numa"), "{h}");
}

#[test]
fn agreement_is_said_and_so_is_a_failed_run() {
    let d = tempfile::tempdir().unwrap();
    let mut fake = Fake::new(by_layout);
    fake.fail = vec!["pin-numa-smt"];
    let recs = run_fake(&mut fake, d.path(), 2);
    assert_eq!(recs.iter().filter(|r| r.error.is_some()).count(), 2);
    // a domain that failed to start was still removed
    assert!(fake.defined.is_empty(), "{:?}", fake.defined);
    let rep = summarize(
        layouts(),
        2,
        recs,
        Some("pin-numa".into()),
        "pin-numa".into(),
        None,
    );
    assert!(rep.partial);
    assert!(
        rep.verdict[0].contains("agrees with the planner's choice, pin-numa"),
        "{:?}",
        rep.verdict
    );
    let triad = rep
        .comparison
        .rows
        .iter()
        .find(|r| r.metric == "membw.triad")
        .unwrap();
    assert!(
        triad.runs[3].is_none(),
        "a failed layout has no figure, not a zero"
    );
    let t = text(&rep);
    assert!(
        t.starts_with("PARTIAL: 6 of 8 runs measured (2 failed)"),
        "{t}"
    );
    assert!(
        t.contains("FAILED: pin-numa-smt run 1: virsh start: pin-numa-smt refused"),
        "{t}"
    );
}

#[test]
fn no_plan_means_nothing_to_check() {
    let rep = summarize(
        layouts(),
        1,
        vec![],
        None,
        "the planner makes no plan on this host: too small".into(),
        None,
    );
    assert!(rep.partial);
    assert_eq!(
        rep.verdict,
        ["the planner makes no plan on this host: too small: no choice to check."]
    );
}

#[test]
fn time_units_are_lower_is_better() {
    for u in ["s", "ms", "us", "ns"] {
        assert!(is_time_unit(u));
    }
    for u in ["MB/s", "GB/s", "events/s", "MiB/sec"] {
        assert!(!is_time_unit(u));
    }
}

fn snapshot(name: &str) -> topo::Host {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"));
    topo::load_path(&p).unwrap()
}

/// The VM's GPU on a link trained at 2.5 of 16 GT/s: one line in the text and HTML report
/// (and matrix.json); the same GPU on a healthy link, or no host model: none.
#[test]
fn a_downgraded_gpu_link_is_a_line_of_the_report() {
    let mut ls = layouts();
    for l in &mut ls[1..] {
        l.plan = Some(serde_json::json!({"devices": [
            {"bdf": "0000:01:00.0"}, {"bdf": "0000:01:00.1"}
        ]}));
    }
    let rep = |host: Option<topo::Host>| {
        summarize(
            ls.clone(),
            1,
            vec![],
            Some("pin".into()),
            "pin".into(),
            host,
        )
    };
    let bad = rep(Some(snapshot("desktop-pcie-downgraded")));
    assert_eq!(bad.links.len(), 1, "{:?}", bad.links);
    let line = &bad.links[0];
    assert!(
        line.starts_with("PCIe: 0000:01:00.0's link runs at 2.5 GT/s x16 of 16 GT/s x16, 4.0 of 31.5 GB/s (downgraded)"),
        "{line}"
    );
    assert!(text(&bad).contains(&format!("note (host): {line}")));
    assert!(
        html(&bad, "m").contains("0000:01:00.0&#39;s link")
            || html(&bad, "m").contains("0000:01:00.0's link")
    );
    let json = serde_json::to_value(&bad).unwrap();
    assert_eq!(json["links"][0], line.as_str());
    assert!(rep(Some(snapshot("desktop-pcie-healthy"))).links.is_empty());
    assert!(rep(None).links.is_empty());
    // a report written before the field reads
    let mut old = json;
    old.as_object_mut().unwrap().remove("links");
    let back: MatrixReport = serde_json::from_value(old).unwrap();
    assert!(back.links.is_empty());
}

/// A record of `layout` run `run` whose `--run` commands printed `outputs` (name, text).
fn record(layout: &str, run: usize, outputs: &[(&str, String)]) -> RunRecord {
    RunRecord {
        layout: layout.into(),
        run,
        position: run,
        seconds: 1.0,
        suite: None,
        user: outputs
            .iter()
            .map(|(n, t)| UserResult::from_text(n, t))
            .collect(),
        error: None,
        invalid: None,
        view: None,
        view_text: None,
    }
}

/// A bandwidthTest output of `runs` back-to-back runs, host to device at `gbps[i]`.
fn bandwidth_runs(gbps: &[f64]) -> String {
    use crate::readers::synth::{bandwidth_test, BandwidthTable, BandwidthTestStyle};
    gbps.iter()
        .map(|g| {
            bandwidth_test(
                BandwidthTestStyle::ReadableGb,
                &[BandwidthTable {
                    direction: 0,
                    pinned: true,
                    write_combined: false,
                    devices: 1,
                    rows: vec![(32_000_000, *g)],
                }],
            )
        })
        .collect()
}

const H2D: &str =
    "bw.bandwidthTest.bandwidth.size=32000000.devices=1.direction=host_to_device.memory=pinned";

#[test]
fn an_invalid_run_is_shown_and_kept_out_like_a_failed_one() {
    let ls = layouts();
    let mut recs = Vec::new();
    for (i, l) in ls.iter().enumerate() {
        for run in 1..=2 {
            let g = 10.0 + i as f64 + run as f64 * 0.1;
            recs.push(record(&l.name, run, &[("bw", bandwidth_runs(&[g]))]));
        }
    }
    // pin-numa's second run booted a guest that did not match it; pin-numa-smt's both
    // beat everything but were invalid too
    recs[5].invalid = Some("the guest saw 1 NUMA node, the layout has 2".into());
    for r in recs.iter_mut().filter(|r| r.layout == "pin-numa-smt") {
        r.invalid = Some("the guest saw 1 thread a core, the layout has 2".into());
        r.user = vec![UserResult::from_text("bw", &bandwidth_runs(&[99.0]))];
    }
    let rep = summarize(ls, 2, recs, Some("pin".into()), "pin".into(), None);
    assert!(rep.partial);
    let row = rep
        .comparison
        .rows
        .iter()
        .find(|r| r.metric == H2D)
        .unwrap();
    assert_eq!(
        row.runs[2].as_ref().unwrap().n,
        1,
        "the invalid run is not a sample"
    );
    assert!(row.runs[3].is_none(), "an invalid layout has no figure");
    assert!(
        !rep.verdict.iter().any(|v| v.contains("pin-numa-smt")),
        "{:?}",
        rep.verdict
    );
    let t = text(&rep);
    assert!(
        t.starts_with(
            "PARTIAL: 5 of 8 runs measured (0 failed, 3 invalid: the guest did not match its layout)."
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "INVALID: pin-numa run 2: the guest saw 1 NUMA node, the layout has 2 (not compared)"
        ),
        "{t}"
    );
    let h = html(&rep, "m");
    assert!(
        h.contains("pin-numa-smt <strong>(invalid runs)</strong>"),
        "{h}"
    );
    assert!(h.contains("<li>INVALID: pin-numa-smt run 1"), "{h}");
    let json = serde_json::to_value(&rep).unwrap();
    assert_eq!(
        json["records"][5]["invalid"],
        "the guest saw 1 NUMA node, the layout has 2"
    );
    // a record saved before the field reads back without it
    let mut old = json["records"][0].clone();
    old.as_object_mut().unwrap().remove("invalid");
    let back: RunRecord = serde_json::from_value(old).unwrap();
    assert_eq!(back.invalid, None);
}

#[test]
fn repeats_in_one_output_are_one_figure_of_that_run() {
    let ls: Vec<LayoutSpec> = layouts().into_iter().take(2).collect();
    let recs = vec![
        record(
            "default",
            1,
            &[("bw", bandwidth_runs(&[10.0, 12.0, 11.0, 30.0, 11.5]))],
        ),
        record(
            "default",
            2,
            &[("bw", bandwidth_runs(&[11.0, 11.0, 11.2, 11.1, 10.9]))],
        ),
        record("pin", 1, &[("bw", bandwidth_runs(&[20.0; 5]))]),
        record("pin", 2, &[("bw", bandwidth_runs(&[21.0; 5]))]),
    ];
    let rep = summarize(ls, 2, recs, None, "none".into(), None);
    let m = rep.per_layout[0]
        .metrics
        .iter()
        .find(|m| m.name == H2D)
        .unwrap();
    // five blocks are not five runs: one sample per run, the median of its five
    assert_eq!(m.samples, vec![11.5, 11.0]);
    assert!(
        rep.notes.iter().any(|n| n
            == "--run bw (bandwidthTest) printed its figures 5 times in one output: repeats of one run, made one figure per run by the median (the tool's own rule)"),
        "{:?}",
        rep.notes
    );
}

#[test]
fn settings_that_differ_between_layouts_are_said() {
    use crate::readers::synth::{nccl, nccl_env, NcclRow, NcclStyle};
    let rows: Vec<NcclRow> = (0..4)
        .map(|i| NcclRow {
            size: 1024 << (4 * i),
            count: 256 << (4 * i),
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            halves: [
                vec![10.0, 1.0 + i as f64, 1.5 + i as f64],
                vec![10.0, 1.0, 1.5],
            ],
        })
        .collect();
    let out = |env: &[(String, String)]| {
        format!(
            "{}{}",
            nccl_env(env),
            nccl(NcclStyle::V2022, None, &rows, 2.0)
        )
    };
    let p2p = [("NCCL_P2P_DISABLE".to_string(), "1".to_string())];
    let ls: Vec<LayoutSpec> = layouts().into_iter().take(2).collect();
    let recs = vec![
        record("default", 1, &[("nccl", out(&p2p))]),
        record("pin", 1, &[("nccl", out(&[]))]),
    ];
    let rep = summarize(ls, 1, recs, None, "none".into(), None);
    assert!(
        rep.notes.contains(&"nccl: NCCL_P2P_DISABLE differs between layouts (default 1, pin unset): their figures differ by it too".to_string()),
        "{:?}",
        rep.notes
    );
    assert!(rep
        .notes
        .contains(&"nccl: ranks = 2 in every layout".to_string()));
    // the sweep is drawn as a curve per layout over the message size
    let h = html(&rep, "m");
    assert!(h.contains("aria-label=\"nccl: nccl-tests busbw\""), "{h}");
    assert!(h.contains("class=\"chart curve\""));
    let charts = h.find("<h2>Benchmark outputs</h2>").unwrap();
    assert!(h.find("<h2>Comparison</h2>").unwrap() < charts);
    assert!(charts < h.find("Generated by").unwrap());
}

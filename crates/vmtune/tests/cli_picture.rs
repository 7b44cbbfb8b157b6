//! `vmtune plan --svg/--html` and `vmtune topo --svg` on every shared topology: the drawing is
//! read back as geometry (not pixels) — each vCPU, emulator and housekeeping CPU of the plan
//! lies inside the boxes of its PU, core, L3 and NUMA node — the cores and PUs of each L3
//! match `lstopo-no-graphics`'s own count for the same XML, and headless chromium loads every
//! picture and page without a console error.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ok_json, run as vmtune};

fn topologies() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies");
    let mut out = vec!["builtin".to_string()];
    for sub in ["hwloc", "sysfs"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".xml") || n.ends_with(".tar.bz2")
            })
            .collect();
        v.sort();
        out.extend(v.into_iter().map(|p| p.to_string_lossy().into_owned()));
    }
    out
}

/// The built-in example's plan, as the README draws it.
const WIN10: &[&str] = &[
    "plan",
    "--topology",
    "builtin",
    "--vcpus",
    "12",
    "--memory",
    "16G",
    "--gpu",
    "01:00.0",
    "--os",
    "windows",
    "--name",
    "win10",
];

/// A box of the drawing: what it stands for and where it is.
#[derive(Debug, Clone)]
struct Drawn {
    kind: String,
    id: Option<u32>,
    cpus: Vec<u32>,
    roles: Vec<String>,
    folded: bool,
    cores: Option<usize>,
    pus: Option<usize>,
    rect: (f64, f64, f64, f64),
    /// Index of each box this one is drawn in (the groups around it).
    ancestors: Vec<usize>,
}

fn cpu_list(s: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

/// A CPU set of the plan JSON (an array of CPU numbers).
fn json_cpus(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a CPU array: {v}"))
        .iter()
        .map(|c| c.as_u64().unwrap() as u32)
        .collect()
}

fn read_svg(text: &str) -> Vec<Drawn> {
    let doc = roxmltree::Document::parse(text).expect("the SVG is well-formed XML");
    let mut out: Vec<Drawn> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for g in doc.descendants().filter(|n| n.has_tag_name("g")) {
        let Some(kind) = g.attribute("data-kind") else {
            continue;
        };
        let Some(rect) = g.children().find(|c| c.has_tag_name("rect")) else {
            continue;
        };
        let f = |a: &str| rect.attribute(a).unwrap().parse::<f64>().unwrap();
        let ancestors = g
            .ancestors()
            .skip(1)
            .filter_map(|a| index.get(&a.id()).copied())
            .collect();
        index.insert(g.id(), out.len());
        out.push(Drawn {
            kind: kind.to_string(),
            id: g.attribute("data-id").map(|v| v.parse().unwrap()),
            cpus: g.attribute("data-cpus").map(cpu_list).unwrap_or_default(),
            roles: g
                .attribute("data-roles")
                .map(|r| r.split(' ').map(str::to_string).collect())
                .unwrap_or_default(),
            folded: g.attribute("data-folded").is_some(),
            cores: g.attribute("data-cores").map(|v| v.parse().unwrap()),
            pus: g.attribute("data-pus").map(|v| v.parse().unwrap()),
            rect: (f("x"), f("y"), f("width"), f("height")),
            ancestors,
        });
    }
    out
}

fn inside(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
    a.0 >= b.0 && a.1 >= b.1 && a.0 + a.2 <= b.0 + b.2 && a.1 + a.3 <= b.1 + b.3
}

/// The host model's place of each PU: (core, L3, NUMA node), from `vmtune topo --json`.
fn places(topology: &str) -> BTreeMap<u32, (u32, Option<u32>, Option<u32>)> {
    let v = ok_json(&["topo", "--topology", topology, "--json"]);
    let n = |x: &serde_json::Value| x.as_u64().map(|n| n as u32);
    v["pus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                n(&p["os_index"]).unwrap(),
                (n(&p["core"]).unwrap(), n(&p["l3"]), n(&p["numa"])),
            )
        })
        .collect()
}

/// Checks that `cpu`'s PU box carries `role` and lies in the boxes of its core, L3 and node.
fn check_cpu(
    drawn: &[Drawn],
    place: &BTreeMap<u32, (u32, Option<u32>, Option<u32>)>,
    cpu: u32,
    role: &str,
    what: &str,
) {
    let pu = drawn
        .iter()
        .find(|d| d.kind == "pu" && d.id == Some(cpu))
        .unwrap_or_else(|| panic!("{what}: no PU box for CPU {cpu}"));
    assert!(
        pu.roles.iter().any(|r| r == role),
        "{what}: CPU {cpu} roles {:?}, want {role}",
        pu.roles
    );
    let (core, l3, node) = place[&cpu];
    let mut want = vec![("core", core)];
    want.extend(l3.map(|l| ("l3", l)));
    want.extend(node.map(|n| ("numa", n)));
    for (kind, id) in want {
        let b = drawn
            .iter()
            .find(|d| d.kind == kind && d.id == Some(id))
            .unwrap_or_else(|| panic!("{what}: no {kind} {id} drawn for CPU {cpu}"));
        assert!(
            b.cpus.contains(&cpu),
            "{what}: {kind} {id} does not list CPU {cpu}"
        );
        assert!(
            inside(pu.rect, b.rect),
            "{what}: CPU {cpu} ({role}) at {:?} is outside {kind} {id} at {:?}",
            pu.rect,
            b.rect
        );
    }
}

/// Cores and PUs per L3 in `lstopo-no-graphics -i XML --of console`.
fn lstopo_l3_counts(lstopo: &Path, xml: &str) -> BTreeMap<u32, (usize, usize)> {
    let o = Command::new(lstopo)
        .args(["-i", xml, "--of", "console", "--no-io"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = BTreeMap::new();
    let mut open: Option<(u32, usize)> = None; // (L3 index, its indentation)
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if open.is_some_and(|(_, i)| indent <= i) {
            open = None;
        }
        let mut rest = line;
        if let Some(at) = line.find("L3 L#") {
            let n: u32 = line[at + 5..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap();
            open = Some((n, indent));
            out.insert(n, (0, 0));
            rest = &line[at..];
        }
        if let Some((n, _)) = open {
            let e = out.get_mut(&n).unwrap();
            e.0 += rest.matches("Core L#").count();
            e.1 += rest.matches("PU L#").count();
        }
    }
    out
}

fn plan_with_picture(topology: &str, dir: &Path, tag: &str) -> (serde_json::Value, String) {
    let svg = dir.join(format!("{tag}.svg"));
    for vcpus in ["8", "4", "2"] {
        let o = vmtune(&[
            "plan",
            "--topology",
            topology,
            "--vcpus",
            vcpus,
            "--memory",
            "4G",
            "--hugepages",
            "none",
            "--json",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        if o.status.success() {
            let plan = serde_json::from_slice(&o.stdout).unwrap();
            return (plan, std::fs::read_to_string(&svg).unwrap());
        }
    }
    panic!("{topology}: no plan of 8, 4 or 2 vCPUs");
}

#[test]
fn every_topologys_plan_is_drawn_in_the_right_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let lstopo = testkit::which("lstopo-no-graphics");
    for (i, t) in topologies().iter().enumerate() {
        let (plan, text) = plan_with_picture(t, dir.path(), &format!("p{i}"));
        let drawn = read_svg(&text);
        let place = places(t);
        let cpus = |k: &str| json_cpus(&plan[k]);
        for pin in plan["vcpus"].as_array().unwrap() {
            let (v, c) = (
                pin["vcpu"].as_u64().unwrap(),
                pin["cpu"].as_u64().unwrap() as u32,
            );
            check_cpu(&drawn, &place, c, &format!("vcpu:{v}"), t);
        }
        for c in cpus("emulator_cpus") {
            check_cpu(&drawn, &place, c, "emulator", t);
        }
        assert!(
            !cpus("host_cpus").is_empty(),
            "{t}: a plan without housekeeping CPUs"
        );
        for c in cpus("host_cpus") {
            check_cpu(&drawn, &place, c, "housekeeping", t);
        }
        // every PU of the host is drawn once, or counted in a folded box
        let shown = drawn.iter().filter(|d| d.kind == "pu").count();
        let folded: usize = drawn
            .iter()
            .filter(|d| d.folded)
            .filter_map(|d| d.pus)
            .sum();
        assert_eq!(
            shown + folded,
            place.len(),
            "{t}: PUs drawn {shown} + folded {folded}"
        );
        // an unfolded L3 draws the cores and PUs it says it holds
        for (j, l3) in drawn
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == "l3" && !d.folded)
        {
            let inner = |k: &str| {
                drawn
                    .iter()
                    .filter(|d| d.kind == k && d.ancestors.contains(&j))
                    .count()
            };
            assert_eq!(Some(inner("core")), l3.cores, "{t}: L3 {:?} cores", l3.id);
            assert_eq!(Some(inner("pu")), l3.pus, "{t}: L3 {:?} PUs", l3.id);
        }
        if let (Some(lstopo), true) = (&lstopo, t.ends_with(".xml")) {
            let want = lstopo_l3_counts(lstopo, t);
            let host_only = dir.path().join(format!("h{i}.svg"));
            let o = vmtune(&[
                "topo",
                "--topology",
                t,
                "--svg",
                host_only.to_str().unwrap(),
            ]);
            assert!(o.status.success());
            for pic in [text.clone(), std::fs::read_to_string(&host_only).unwrap()] {
                let got: BTreeMap<u32, (usize, usize)> = read_svg(&pic)
                    .iter()
                    .filter(|d| d.kind == "l3")
                    .map(|d| (d.id.unwrap(), (d.cores.unwrap(), d.pus.unwrap())))
                    .collect();
                assert_eq!(got, want, "{t}: cores and PUs per L3 against lstopo");
            }
        }
    }
    if lstopo.is_none() {
        testkit::skip(
            "every_topologys_plan_is_drawn_in_the_right_boxes",
            "lstopo-no-graphics is not installed (Debian: hwloc): L3 counts not compared",
        );
    }
}

#[test]
fn a_384_pu_host_folds_what_the_plan_leaves_and_a_hybrid_tells_cores_apart() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc");
    let big = root.join("192em64t-24n8c2t.xml");
    let (plan, text) = plan_with_picture(big.to_str().unwrap(), dir.path(), "big");
    let drawn = read_svg(&text);
    let nodes: Vec<&Drawn> = drawn.iter().filter(|d| d.kind == "numa").collect();
    assert_eq!(nodes.len(), 24);
    let used: Vec<u32> = plan["memory"]["host_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap() as u32)
        .collect();
    // nodes the plan leaves keep their box (memory, devices) with their L3 folded
    for (j, n) in drawn.iter().enumerate().filter(|(_, d)| d.kind == "numa") {
        let id = n.id.unwrap();
        let pus = drawn
            .iter()
            .filter(|d| d.kind == "pu" && d.ancestors.contains(&j))
            .count();
        let folded_l3 = drawn
            .iter()
            .filter(|d| d.kind == "l3" && d.folded && d.ancestors.contains(&j))
            .count();
        if used.contains(&id) {
            assert_eq!((pus, folded_l3), (16, 0), "node {id} holds the VM's memory");
        } else if !n
            .cpus
            .iter()
            .any(|c| json_cpus(&plan["host_cpus"]).contains(c))
        {
            assert_eq!((pus, folded_l3), (0, 1), "node {id}: nothing planned there");
        }
    }
    let folded = drawn.iter().filter(|d| d.folded).count();
    assert!(folded >= 20, "{folded} of 24 L3 groups folded");
    let (w, h) = (drawn[0].rect.2, drawn[0].rect.3);
    assert!(w < 2000.0 && h < 1500.0, "the picture is {w}×{h}");

    let hybrid = root.join("Intel-RaptorLake-Corei7-1370P.xml");
    let (_, text) = plan_with_picture(hybrid.to_str().unwrap(), dir.path(), "hybrid");
    assert!(text.contains("P-core") && text.contains("E-core"));
}

#[test]
fn pictures_and_the_page_load_in_headless_chromium_without_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("plan.html");
    let o = vmtune(&[WIN10, &["--html", page.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"));
    assert!(html.contains("<h2>Why</h2>") && html.contains("vCPU → host CPU"));
    let Some(chromium) = testkit::chromium() else {
        return;
    };
    let mut files = vec![page];
    for (i, t) in topologies().iter().enumerate() {
        files.push(dir.path().join(format!("c{i}.svg")));
        plan_with_picture(t, dir.path(), &format!("c{i}"));
    }
    for f in files {
        let o = testkit::headless(
            &chromium,
            dir.path(),
            &["--dump-dom"],
            &format!("file://{}", f.display()),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "chromium on {}: {stderr}", f.display());
        let dom = String::from_utf8_lossy(&o.stdout);
        assert!(
            dom.contains("data-kind=\"pu\""),
            "{}: {dom:.500}",
            f.display()
        );
        for bad in testkit::BROWSER_PROBLEMS {
            assert!(
                !stderr.contains(bad),
                "{}: browser reported {bad:?}: {stderr}",
                f.display()
            );
        }
    }
}

/// The README's picture is what the built-in example's plan draws today.
#[test]
fn the_readmes_picture_is_the_built_in_plan_as_drawn_now() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("plan.svg");
    let o = vmtune(&[WIN10, &["--svg", svg.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/plan-builtin.svg");
    assert_eq!(
        std::fs::read_to_string(&svg).unwrap(),
        std::fs::read_to_string(&committed).unwrap(),
        "docs/plan-builtin.svg is stale: regenerate it with the command in the README"
    );
}

/// A tenant's CPUs are drawn as the tenant's, and the new VM's vCPUs beside them.
#[test]
fn tenants_are_drawn_on_their_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let first = ok_json(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--hugepages",
        "none",
        "--name",
        "t1",
        "--json",
    ]);
    let tenant = dir.path().join("t1.json");
    std::fs::write(&tenant, first.to_string()).unwrap();
    let svg = dir.path().join("second.svg");
    let second = ok_json(&[
        "plan",
        "--topology",
        "builtin",
        "--vcpus",
        "4",
        "--memory",
        "4G",
        "--hugepages",
        "none",
        "--tenant",
        tenant.to_str().unwrap(),
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let drawn = read_svg(&std::fs::read_to_string(&svg).unwrap());
    let place = places("builtin");
    for pin in first["vcpus"].as_array().unwrap() {
        let cpu = pin["cpu"].as_u64().unwrap() as u32;
        check_cpu(&drawn, &place, cpu, "tenant:t1", "tenant t1");
    }
    for pin in second["vcpus"].as_array().unwrap() {
        let (v, c) = (
            pin["vcpu"].as_u64().unwrap(),
            pin["cpu"].as_u64().unwrap() as u32,
        );
        check_cpu(&drawn, &place, c, &format!("vcpu:{v}"), "second VM");
    }
}

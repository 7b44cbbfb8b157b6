//! A generator of libvirt domains in the shapes users write — any indentation, quote, line
//! ending and final newline; `<hyperv>` with or without `mode`, any subset of enlightenments
//! on or off with their values and sub-features; the hypervisor bit's policy; the hidden KVM
//! signature; timers (an rtc with `track` and `<catchup>`); `<vcpu current>` and a `<vcpus>`
//! block; guest NUMA cells with `memAccess` and `discard`, an HMAT `<cache>` in a cell and
//! `<interconnects>` naming it; `<hugepages>` with a `<page>` per size bound to cells by
//! `nodeset`; DIMM, NVDIMM and virtio-mem devices bound to any cell (also one the plan's
//! guest does not have); a `<numatune>` of any mode with `<memnode>`s; a comment at column
//! 0 before the indented elements — with the choices it wrote as known truth. Properties: `domain_choices` recovers
//! that truth exactly, and after patching with any plan every choice of the user reads back
//! unchanged (the cells' `memAccess`, the rtc's `track` too; where the plan folds the
//! domain's cells into fewer, every cell takes `memAccess='shared'`/`discard='yes'` if any
//! cell had it, the HMAT description goes, each memory device targets a cell the guest has,
//! and each dropped page size, memory device and `<numatune>` mode is warned about), every
//! vCPU of the plan is
//! online, the bytes outside the owned elements are the same, and every line the patch adds
//! is indented and quoted as the document is.

mod common;

use emit::libvirt::{domain_choices, patch};
use plan::{DomainChoices, DomainEnlightenment, DomainTimer, GuestOs, Plan};
use proptest::prelude::*;
use topo::CpuSet;

/// Enlightenments with no value or sub-feature.
const PLAIN: &[&str] = &[
    "relaxed",
    "vapic",
    "vpindex",
    "runtime",
    "synic",
    "reset",
    "frequencies",
    "reenlightenment",
    "tlbflush",
    "ipi",
    "evmcs",
    "avic",
];

#[derive(Debug, Clone)]
struct Shape {
    indent: &'static str,
    quote: char,
    nl: &'static str,
    final_newline: bool,
    header_comment: bool,
    /// A comment at column 0 as the first child of `<domain>`.
    col0_comment: bool,
}

#[derive(Debug, Clone)]
struct Generated {
    xml: String,
    truth: DomainChoices,
    /// `memAccess` of each guest NUMA cell written (by id), none: no `<numa>`.
    cells: Vec<Option<&'static str>>,
    /// `discard` of each cell written (by id).
    discards: Vec<Option<&'static str>>,
    /// What was written of memory beyond the cells.
    mem: MemGen,
    /// The rtc timer was written with `track='guest'` and a `<catchup>`.
    rtc_track: bool,
}

/// Memory beyond the cells' attributes: an HMAT cache in a cell (by index) and
/// `<interconnects>`, memory devices (model, target cell), `<page>`s (1 GiB?, bound to the
/// cell of that index?), a `<numatune>` (mode, with memnodes).
#[derive(Debug, Clone, Default)]
struct MemGen {
    cache_in: Option<usize>,
    interconnects: bool,
    devices: Vec<(&'static str, u32)>,
    pages: Vec<(bool, Option<usize>)>,
    numatune: Option<(&'static str, bool)>,
}

fn arb_mem() -> impl Strategy<Value = MemGen> {
    (
        proptest::option::of(0usize..3),
        any::<bool>(),
        proptest::collection::vec((0usize..3, 0u32..4), 0..3),
        proptest::collection::vec((any::<bool>(), proptest::option::of(0usize..3)), 0..3),
        proptest::option::of((0usize..4, any::<bool>())),
    )
        .prop_map(|(cache_in, interconnects, devices, pages, numatune)| {
            let models = ["dimm", "nvdimm", "virtio-mem"];
            let modes = ["strict", "preferred", "interleave", "restrictive"];
            MemGen {
                cache_in,
                interconnects,
                devices: devices.into_iter().map(|(m, n)| (models[m], n)).collect(),
                pages,
                numatune: numatune.map(|(m, memnodes)| (modes[m], memnodes)),
            }
        })
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    (
        prop_oneof![Just(" "), Just("  "), Just("    "), Just("\t")],
        prop_oneof![Just('\''), Just('"')],
        prop_oneof![Just("\n"), Just("\r\n")],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(indent, quote, nl, final_newline, header_comment, col0_comment)| Shape {
                indent,
                quote,
                nl,
                final_newline,
                header_comment,
                col0_comment,
            },
        )
}

type HypervGen = (
    Option<Option<bool>>,   // None: no <hyperv>; Some(None): no mode; Some(Some(pt))
    Vec<(usize, bool)>,     // plain entries: index into PLAIN, on
    Option<(bool, u32)>,    // spinlocks: on, retries
    Option<(bool, String)>, // vendor_id
    Option<(bool, Option<bool>)>, // stimer, direct
);

fn arb_hyperv() -> impl Strategy<Value = HypervGen> {
    (
        prop_oneof![
            Just(None),
            Just(Some(None)),
            any::<bool>().prop_map(|b| Some(Some(b)))
        ],
        proptest::collection::btree_map(0..PLAIN.len(), any::<bool>(), 0..PLAIN.len())
            .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
        proptest::option::of((any::<bool>(), 4095u32..1_000_000)),
        proptest::option::of((any::<bool>(), "[A-Za-z0-9]{1,12}")),
        proptest::option::of((any::<bool>(), proptest::option::of(any::<bool>()))),
    )
}

fn arb_domain() -> impl Strategy<Value = Generated> {
    (
        arb_shape(),
        arb_hyperv(),
        prop_oneof![Just(None), Just(Some("disable")), Just(Some("require"))],
        proptest::option::of(any::<bool>()),
        (1u32..16, any::<bool>(), any::<bool>(), any::<u16>()),
        proptest::collection::vec(
            (0usize..4, proptest::option::of(any::<bool>()), 0usize..3),
            0..4,
        ),
        (
            proptest::collection::vec((0usize..3, 0usize..3), 0..4),
            any::<bool>(),
            arb_mem(),
        ),
    )
        .prop_map(
            |(shape, hv, policy, kvm, vcpu, timers, (cells, track, mem))| {
                let access = [None, Some("shared"), Some("private")];
                let discard = [None, Some("yes"), Some("no")];
                let (cells, discards) = cells
                    .into_iter()
                    .map(|(a, d)| (access[a], discard[d]))
                    .unzip();
                build(
                    shape,
                    hv,
                    policy,
                    kvm,
                    vcpu,
                    timers,
                    (cells, discards, track, mem),
                )
            },
        )
}

fn build(
    s: Shape,
    (hv_mode, plain, spin, vendor, stimer): HypervGen,
    policy: Option<&str>,
    kvm: Option<bool>,
    (max, with_current, with_block, offline_bits): (u32, bool, bool, u16),
    timers: Vec<(usize, Option<bool>, usize)>,
    (cells, discards, track, mut mem): (
        Vec<Option<&'static str>>,
        Vec<Option<&'static str>>,
        bool,
        MemGen,
    ),
) -> Generated {
    let q = s.quote;
    let a = |k: &str, v: &str| format!(" {k}={q}{v}{q}");
    let state = |on: bool| a("state", if on { "on" } else { "off" });
    let ind = |d: usize| format!("{}{}", s.nl, s.indent.repeat(d));
    let mut truth = DomainChoices {
        source: "domain \"gen\"".into(),
        ..Default::default()
    };
    let mut x = String::new();
    if s.header_comment {
        x.push_str(&format!(
            "<!-- generated by hand{}edit with virsh edit gen -->{}",
            s.nl, s.nl
        ));
    }
    x.push_str(&format!("<domain{}>", a("type", "kvm")));
    if s.col0_comment {
        x.push_str(&format!("{}<!-- pinned by hand -->", s.nl));
    }
    x.push_str(&format!("{}<name>gen</name>", ind(1)));
    x.push_str(&format!(
        "{}<memory{}>4194304</memory>",
        ind(1),
        a("unit", "KiB")
    ));
    // <memoryBacking><hugepages>: a <page> per size, bound to a written cell or not
    if cells.is_empty() {
        mem.pages.iter_mut().for_each(|p| p.1 = None);
    }
    mem.pages.sort_by_key(|p| p.0);
    mem.pages.dedup_by_key(|p| p.0);
    if !mem.pages.is_empty() {
        x.push_str(&format!("{}<memoryBacking>{}<hugepages>", ind(1), ind(2)));
        for (big, cell) in &mem.pages {
            let size = if *big { 1048576 } else { 2048 };
            let nodeset = cell.map(|c| (c % cells.len()).to_string());
            let mut el = format!(
                "{}<page{}{}",
                ind(3),
                a("size", &size.to_string()),
                a("unit", "KiB")
            );
            if let Some(n) = &nodeset {
                el.push_str(&a("nodeset", n));
            }
            el.push_str("/>");
            x.push_str(&el);
            truth.hugepages.push(plan::DomainPage {
                size_kb: size,
                nodeset,
            });
        }
        x.push_str(&format!("{}</hugepages>{}</memoryBacking>", ind(2), ind(1)));
        let first = truth
            .hugepages
            .iter()
            .find(|p| p.nodeset.is_none())
            .or(truth.hugepages.first());
        truth.hugepage_size_kb = first.map(|p| p.size_kb);
    }

    // vCPUs: current and a block that keeps some offline (never vCPU 0)
    let offline: CpuSet = (1..max).filter(|i| offline_bits & (1 << i) != 0).collect();
    truth.vcpus = Some(max);
    let current = if with_block {
        max - offline.len() as u32
    } else if with_current {
        (max / 2).max(1)
    } else {
        max
    };
    if with_current || with_block {
        truth.vcpus_current = Some(current);
        x.push_str(&format!(
            "{}<vcpu{}{}>{max}</vcpu>",
            ind(1),
            a("placement", "static"),
            a("current", &current.to_string())
        ));
    } else {
        x.push_str(&format!(
            "{}<vcpu{}>{max}</vcpu>",
            ind(1),
            a("placement", "static")
        ));
    }
    if with_block {
        truth.vcpus_offline = offline.clone();
        x.push_str(&format!("{}<vcpus>", ind(1)));
        for i in 0..max {
            let on = !offline.contains(i);
            x.push_str(&format!(
                "{}<vcpu{}{}{}/>",
                ind(2),
                a("id", &i.to_string()),
                a("enabled", if on { "yes" } else { "no" }),
                a("hotpluggable", if i == 0 { "no" } else { "yes" })
            ));
        }
        x.push_str(&format!("{}</vcpus>", ind(1)));
    }
    x.push_str(&format!(
        "{}<os>{}<type{}>hvm</type>{}</os>",
        ind(1),
        ind(2),
        a("arch", "x86_64"),
        ind(1)
    ));

    // <numatune>: any mode, memnodes for the written cells
    if let Some((mode, memnodes)) = mem.numatune {
        x.push_str(&format!(
            "{}<numatune>{}<memory{}{}/>",
            ind(1),
            ind(2),
            a("mode", mode),
            a("nodeset", "0")
        ));
        let mut nt = plan::DomainNumatune {
            mode: Some(mode.into()),
            nodeset: Some("0".into()),
            ..Default::default()
        };
        if memnodes {
            for id in 0..cells.len() as u32 {
                x.push_str(&format!(
                    "{}<memnode{}{}{}/>",
                    ind(2),
                    a("cellid", &id.to_string()),
                    a("mode", mode),
                    a("nodeset", "0")
                ));
                nt.memnodes.push((id, mode.to_string(), "0".to_string()));
            }
        }
        x.push_str(&format!("{}</numatune>", ind(1)));
        truth.numatune = Some(nt);
    }

    // <features>
    x.push_str(&format!(
        "{}<features>{}<acpi/>{}<apic/>",
        ind(1),
        ind(2),
        ind(2)
    ));
    if let Some(mode) = hv_mode {
        let mode_attr = match mode {
            None => String::new(),
            Some(true) => a("mode", "passthrough"),
            Some(false) => a("mode", "custom"),
        };
        truth.hyperv_mode = Some(
            if mode == Some(true) {
                "passthrough"
            } else {
                "custom"
            }
            .into(),
        );
        x.push_str(&format!("{}<hyperv{mode_attr}>", ind(2)));
        let mut push = |name: &str, on: bool, value: Option<String>, el: String| {
            truth.hyperv.push(DomainEnlightenment {
                name: name.into(),
                on,
                value,
            });
            x.push_str(&el);
        };
        for (i, on) in &plain {
            push(
                PLAIN[*i],
                *on,
                None,
                format!("{}<{}{}/>", ind(3), PLAIN[*i], state(*on)),
            );
        }
        if let Some((on, r)) = spin {
            push(
                "spinlocks",
                on,
                Some(r.to_string()),
                format!(
                    "{}<spinlocks{}{}/>",
                    ind(3),
                    state(on),
                    a("retries", &r.to_string())
                ),
            );
        }
        if let Some((on, v)) = &vendor {
            push(
                "vendor_id",
                *on,
                Some(v.clone()),
                format!("{}<vendor_id{}{}/>", ind(3), state(*on), a("value", v)),
            );
        }
        if let Some((on, direct)) = stimer {
            match direct {
                None => push(
                    "stimer",
                    on,
                    None,
                    format!("{}<stimer{}/>", ind(3), state(on)),
                ),
                Some(d) => {
                    push(
                        "stimer",
                        on,
                        None,
                        format!(
                            "{}<stimer{}>{}<direct{}/>{}</stimer>",
                            ind(3),
                            state(on),
                            ind(4),
                            state(d),
                            ind(3)
                        ),
                    );
                    truth.hyperv.push(DomainEnlightenment {
                        name: "stimer_direct".into(),
                        on: on && d,
                        value: None,
                    });
                }
            }
        }
        x.push_str(&format!("{}</hyperv>", ind(2)));
    }
    if let Some(h) = kvm {
        truth.kvm_hidden = Some(h);
        x.push_str(&format!(
            "{}<kvm>{}<hidden{}/>{}</kvm>",
            ind(2),
            ind(3),
            state(h),
            ind(2)
        ));
    }
    x.push_str(&format!("{}</features>", ind(1)));
    if cells.is_empty() {
        mem.cache_in = None;
        mem.interconnects = false;
    }

    // <cpu>
    truth.cpu_mode = Some("host-passthrough".into());
    x.push_str(&format!("{}<cpu{}>", ind(1), a("mode", "host-passthrough")));
    if let Some(p) = policy {
        truth.hypervisor_policy = Some(p.into());
        x.push_str(&format!(
            "{}<feature{}{}/>",
            ind(2),
            a("policy", p),
            a("name", "hypervisor")
        ));
    }
    if !cells.is_empty() {
        truth.guest_cells = Some(cells.len() as u32);
        x.push_str(&format!("{}<numa>", ind(2)));
        let per = 4194304 / cells.len() as u64;
        for (id, acc) in cells.iter().enumerate() {
            let mut el = format!(
                "{}<cell{}{}{}{}",
                ind(3),
                a("id", &id.to_string()),
                a("cpus", &(id as u32 % max).to_string()),
                a("memory", &per.to_string()),
                a("unit", "KiB")
            );
            let mut attrs = Vec::new();
            if let Some(m) = acc {
                el.push_str(&a("memAccess", m));
                attrs.push(("memAccess".to_string(), m.to_string()));
            }
            if let Some(d) = discards[id] {
                el.push_str(&a("discard", d));
                attrs.push(("discard".to_string(), d.to_string()));
            }
            let cache = mem.cache_in.is_some_and(|c| c % cells.len() == id);
            if cache {
                el.push_str(&format!(
                    ">{}<cache{}{}{}>{}<size{}{}/>{}<line{}{}/>{}</cache>{}</cell>",
                    ind(4),
                    a("level", "1"),
                    a("associativity", "direct"),
                    a("policy", "writeback"),
                    ind(5),
                    a("value", "10"),
                    a("unit", "KiB"),
                    ind(5),
                    a("value", "8"),
                    a("unit", "B"),
                    ind(4),
                    ind(3)
                ));
            } else {
                el.push_str("/>");
            }
            x.push_str(&el);
            truth.cells.push(plan::DomainCell {
                id: id as u32,
                attrs,
                caches: u32::from(cache),
                distances: false,
            });
        }
        if mem.interconnects {
            truth.interconnects = true;
            x.push_str(&format!("{}<interconnects>", ind(3)));
            x.push_str(&format!(
                "{}<latency{}{}{}{}/>",
                ind(4),
                a("initiator", "0"),
                a("target", &(cells.len() - 1).to_string()),
                a("type", "access"),
                a("value", "5")
            ));
            if let Some(c) = mem.cache_in {
                x.push_str(&format!(
                    "{}<latency{}{}{}{}{}/>",
                    ind(4),
                    a("initiator", "0"),
                    a("target", &(c % cells.len()).to_string()),
                    a("cache", "1"),
                    a("type", "access"),
                    a("value", "10")
                ));
            }
            x.push_str(&format!("{}</interconnects>", ind(3)));
        }
        x.push_str(&format!("{}</numa>", ind(2)));
    }
    x.push_str(&format!("{}</cpu>", ind(1)));

    // <clock>
    let names = ["rtc", "pit", "hpet", "hypervclock"];
    let tps = [None, Some("catchup"), Some("delay")];
    let mut seen = Vec::new();
    let mut rtc_track = false;
    x.push_str(&format!("{}<clock{}>", ind(1), a("offset", "localtime")));
    for (n, present, tp) in timers {
        let name = names[n];
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let tp = if name == "hypervclock" { None } else { tps[tp] };
        let mut el = format!("{}<timer{}", ind(2), a("name", name));
        if let Some(t) = tp {
            el.push_str(&a("tickpolicy", t));
        }
        if let Some(p) = present {
            el.push_str(&a("present", if p { "yes" } else { "no" }));
        }
        if track && name == "rtc" && tp == Some("catchup") {
            rtc_track = true;
            el.push_str(&format!(
                "{}>{}<catchup{}/>{}</timer>",
                a("track", "guest"),
                ind(3),
                a("slew", "120"),
                ind(2)
            ));
        } else {
            el.push_str("/>");
        }
        x.push_str(&el);
        truth.timers.push(DomainTimer {
            name: name.into(),
            present,
            tickpolicy: tp.map(str::to_string),
        });
    }
    x.push_str(&format!("{}</clock>", ind(1)));
    if mem.devices.is_empty() {
        x.push_str(&format!("{}<devices/>", ind(1)));
    } else {
        x.push_str(&format!("{}<devices>", ind(1)));
        for (model, node) in &mem.devices {
            x.push_str(&format!(
                "{}<memory{}>{}<target>{}<size{}>524288</size>{}<node>{node}</node>{}</target>{}</memory>",
                ind(2),
                a("model", model),
                ind(3),
                ind(4),
                a("unit", "KiB"),
                ind(4),
                ind(3),
                ind(2)
            ));
            truth.memory_devices.push(plan::DomainMemoryDevice {
                model: model.to_string(),
                node: *node,
            });
        }
        truth.memory_devices_bytes = 524288 * 1024 * mem.devices.len() as u64;
        x.push_str(&format!("{}</devices>", ind(1)));
    }
    x.push_str(&format!("{}</domain>", s.nl));
    if s.final_newline {
        x.push_str(s.nl);
    }
    Generated {
        xml: x,
        truth,
        cells,
        discards,
        mem,
        rtc_track,
    }
}

/// `xml` with the text of every `<node>` element left out.
fn without_nodes(xml: &str) -> String {
    let mut out = String::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<node>") {
        out.push_str(&rest[..i + "<node>".len()]);
        rest = &rest[i + "<node>".len()..];
        match rest.find("</node>") {
            Some(j) => rest = &rest[j..],
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// Lines of `after` that `before` does not have (a multiset difference).
fn added_lines<'a>(before: &str, after: &'a str) -> Vec<&'a str> {
    let mut pool: Vec<&str> = before.lines().collect();
    let mut out = Vec::new();
    for l in after.lines() {
        match pool.iter().position(|p| *p == l) {
            Some(i) => {
                pool.swap_remove(i);
            }
            None => out.push(l),
        }
    }
    out
}

/// (id, memAccess, discard) of every `<cell>` of `<cpu><numa>`.
fn cells_of(xml: &str) -> Vec<(usize, Option<String>, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).expect("parse");
    doc.descendants()
        .filter(|n| n.tag_name().name() == "cell")
        .map(|c| {
            (
                c.attribute("id").and_then(|i| i.parse().ok()).unwrap_or(0),
                c.attribute("memAccess").map(str::to_string),
                c.attribute("discard").map(str::to_string),
            )
        })
        .collect()
}

fn plans() -> Vec<Plan> {
    let host = topo::builtin::default_host();
    [
        (12, GuestOs::Windows),
        (4, GuestOs::Windows7),
        (6, GuestOs::Linux),
    ]
    .into_iter()
    .map(|(vcpus, os)| {
        let req = plan::Request {
            name: Some("gen".into()),
            vcpus,
            memory_bytes: 4 << 30,
            devices: vec!["01:00.0".into()],
            profile: plan::Profile::Gaming,
            os,
            hugepages: plan::HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
            threads: plan::ThreadPolicy::Auto,
        };
        plan::plan(&req, &host, &[]).expect("plan")
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn choices_are_read_exactly(g in arb_domain()) {
        let got = domain_choices(&g.xml).expect("choices");
        prop_assert_eq!(got, g.truth);
    }

    #[test]
    fn patch_keeps_every_choice_and_starts_every_vcpu(g in arb_domain(), which in 0usize..3) {
        let p = &plans()[which];
        let patched = patch(&g.xml, p).expect("patch");
        let out = patched.xml.clone();
        let warned = |words: &[&str]| patched.plan.warnings.iter().any(|w| words.iter().all(|x| w.contains(x)));
        let after = domain_choices(&out).expect("choices after");
        let t = &g.truth;
        for e in &t.hyperv {
            prop_assert!(after.hyperv.contains(e), "lost {:?}:\n{}", e, out);
        }
        prop_assert_eq!(&after.hyperv_mode, &t.hyperv_mode.clone().or_else(|| after.hyperv_mode.clone()));
        if t.kvm_hidden.is_some() {
            prop_assert_eq!(after.kvm_hidden, t.kvm_hidden);
        }
        if t.hypervisor_policy.as_deref() == Some("disable") {
            prop_assert_eq!(after.hypervisor_policy.as_deref(), Some("disable"));
        }
        prop_assert_eq!(after.vcpus, Some(p.vcpus.len() as u32));
        prop_assert_eq!(after.vcpus_current, None);
        prop_assert!(after.vcpus_offline.is_empty());
        prop_assert_eq!(g.xml.ends_with('\n'), out.ends_with('\n'));
        // (a memory device's <target><node> is the one byte range outside them the patch
        // may change, checked below)
        prop_assert_eq!(
            without_nodes(&common::without_owned(&g.xml)),
            without_nodes(&common::without_owned(&out))
        );
        // every guest cell keeps the memAccess and discard of the user's cell with its id
        // where the plan's cells are the domain's; where it folds them, each takes
        // shared / yes if any cell had it, else the first cell's word
        let cells = cells_of(&out);
        let plan_cells = p.guest_numa.len().max(1);
        let same = g.cells.len() == plan_cells
            && (0..plan_cells as u32).all(|id| p.guest_numa.is_empty() || p.guest_numa.iter().any(|c| c.cell == id));
        let fold = |v: &[Option<&'static str>], wins: &'static str| {
            if v.contains(&Some(wins)) { Some(wins) } else { v.iter().copied().flatten().next() }
        };
        if g.cells.is_empty() {
            // only a plan that shows the guest several cells writes a <numa>
            let shown = if p.guest_numa.len() > 1 { p.guest_numa.len() } else { 0 };
            prop_assert_eq!(cells.len(), shown);
        } else {
            prop_assert_eq!(cells.len(), plan_cells);
            for (id, acc, discard) in &cells {
                let (want_acc, want_discard) = if same {
                    (g.cells[*id], g.discards[*id])
                } else {
                    (fold(&g.cells, "shared"), fold(&g.discards, "yes"))
                };
                prop_assert_eq!(acc.as_deref(), want_acc, "cell {} memAccess:\n{}", id, out);
                prop_assert_eq!(discard.as_deref(), want_discard, "cell {} discard:\n{}", id, out);
            }
            // the HMAT description stays with the domain's own cells only
            let doc = roxmltree::Document::parse(&out).expect("parse");
            let has = |name: &str| doc.descendants().any(|n| n.tag_name().name() == name);
            prop_assert_eq!(has("interconnects"), g.mem.interconnects && same, "{}", out);
            prop_assert_eq!(has("cache"), g.mem.cache_in.is_some() && same, "{}", out);
            if !same && (g.mem.interconnects || g.mem.cache_in.is_some()) {
                prop_assert!(warned(&["dropped"]), "{:?}", patched.plan.warnings);
            }
            if !same && g.cells.len() > 1 {
                let shared = g.cells.contains(&Some("shared"));
                if shared && !g.cells.iter().all(|c| *c == Some("shared")) {
                    prop_assert!(warned(&["memAccess='shared'", "vhost-user"]), "{:?}", patched.plan.warnings);
                }
            }
        }
        // every memory device targets a cell the patched guest has; each moved one is said
        let after_cells: Vec<u32> = cells.iter().map(|c| c.0 as u32).collect();
        let devices = domain_choices(&out).expect("choices").memory_devices;
        prop_assert_eq!(devices.len(), g.mem.devices.len());
        for (d, (model, node)) in devices.iter().zip(&g.mem.devices) {
            if !after_cells.is_empty() {
                prop_assert!(after_cells.contains(&d.node), "{:?} not in {:?}:\n{}", d, after_cells, out);
            }
            if d.node != *node {
                prop_assert!(warned(&[&format!("<memory model='{model}'> targets guest NUMA cell {node}")]), "{:?}", patched.plan.warnings);
            }
        }
        // every page size the plan does not use is said, with the cells it was bound to
        for (big, _) in &g.mem.pages {
            let kb = if *big { 1048576 } else { 2048 };
            if kb != p.memory.hugepage_size_kb {
                let name = if *big { "1 GiB pages" } else { "2 MiB pages" };
                prop_assert!(warned(&[name, "<hugepages>"]), "{:?}", patched.plan.warnings);
            }
        }
        // a <numatune> mode other than strict is said
        if let Some((mode, _)) = g.mem.numatune {
            if mode != "strict" {
                prop_assert!(warned(&[&format!("<numatune><memory mode='{mode}'")]), "{:?}", patched.plan.warnings);
            }
        }
        // the rtc's track and catchup stay
        if g.rtc_track {
            prop_assert!(out.contains("track=") && out.contains("<catchup"), "{}", out);
        }
        // what the patch adds is indented and quoted as the document is
        let other = if g.xml.contains("type='kvm'") { '"' } else { '\'' };
        let unit = if g.xml.contains("\t<name>") { "\t" } else { " " };
        for l in added_lines(&g.xml, &out) {
            prop_assert!(!l.contains(other), "quoted otherwise: {:?}\n{}", l, out);
            prop_assert!(l.starts_with(unit), "not indented: {:?}\n{}", l, out);
        }
        // a line ending the document never had does not appear
        if !g.xml.contains("\r\n") {
            prop_assert!(!out.contains('\r'));
        } else {
            prop_assert!(!out.replace("\r\n", "").contains('\n'));
        }
    }
}

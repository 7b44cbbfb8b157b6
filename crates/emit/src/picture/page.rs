//! The plan as one self-contained HTML page: the picture, the plan's table and its "Why",
//! with inline CSS and no scripts or network.

use std::fmt::Write as _;

use plan::{Plan, Tenant};
use topo::Host;

use super::draw::esc;
use super::{svg, Marks};

fn or_none(s: String) -> String {
    if s.is_empty() {
        "none".into()
    } else {
        s
    }
}

/// The rows of the plan's table: what lives where.
fn rows(plan: &Plan) -> Vec<(String, String)> {
    let pins: Vec<String> = plan
        .vcpus
        .iter()
        .map(|p| format!("{}→{}", p.vcpu, p.cpu))
        .collect();
    let g = &plan.guest_topology;
    let mut rows = vec![
        ("vCPU → host CPU".to_string(), pins.join(" ")),
        (
            "emulator".into(),
            or_none(plan.emulator_cpus.to_list_string()),
        ),
        (
            "iothreads".into(),
            or_none(plan.iothread_cpus.to_list_string()),
        ),
        (
            "host housekeeping".into(),
            or_none(plan.host_cpus.to_list_string()),
        ),
        (
            "guest topology".into(),
            format!(
                "{} sockets × {} dies × {} cores × {} threads",
                g.sockets, g.dies, g.cores, g.threads
            ),
        ),
    ];
    for c in &plan.guest_numa {
        rows.push((
            format!("guest NUMA cell {}", c.cell),
            format!(
                "vCPUs {}, {} on host node {}",
                c.vcpus.to_list_string(),
                plan::memory::human_bytes(c.memory_bytes),
                c.host_nodes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    let m = &plan.memory;
    let nodes: Vec<String> = m.host_nodes.iter().map(u32::to_string).collect();
    let pages = if m.hugepage_size_kb > 4 {
        format!("{} pages of {} KiB", m.pages, m.hugepage_size_kb)
    } else {
        "4 KiB pages".into()
    };
    rows.push((
        "memory".into(),
        format!(
            "{} on host node {} in {pages}",
            plan::memory::human_bytes(plan.request.memory_bytes),
            nodes.join(",")
        ),
    ));
    for d in &plan.devices {
        rows.push(("device".into(), format!("{} ({:?})", d.bdf, d.kind)));
    }
    rows.push((
        "interrupts".into(),
        format!(
            "the VM's devices → CPUs {}; every other movable interrupt → CPUs {}",
            or_none(plan.irq.vfio_cpus.to_list_string()),
            or_none(plan.irq.host_cpus.to_list_string())
        ),
    ));
    rows
}

/// The page: title, picture, table, "Why", warnings.
pub fn html(plan: &Plan, host: &Host, tenants: &[Tenant]) -> String {
    let marks = Marks::plan(plan, host, tenants);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:sans-serif;margin:1.5em;color:#202124}}table{{border-collapse:collapse}}td,th{{border:1px solid #dadce0;padding:3px 8px;text-align:left;vertical-align:top}}.pic{{overflow:auto;border:1px solid #dadce0;padding:4px}}li{{margin:2px 0}}.warn{{color:#b3261e}}</style></head><body>\n<h1>{}</h1>\n",
        esc(&marks.title),
        esc(&marks.title)
    );
    out.push_str("<div class=\"pic\">\n");
    out.push_str(&svg(host, &marks));
    out.push_str("</div>\n<h2>Plan</h2>\n<table>\n");
    for (k, v) in rows(plan) {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
    }
    out.push_str("</table>\n<h2>Why</h2>\n<ul>\n");
    for r in &plan.rationale {
        let _ = writeln!(out, "<li>{}</li>", esc(r));
    }
    out.push_str("</ul>\n");
    if !plan.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2>\n<ul class=\"warn\">\n");
        for w in &plan.warnings {
            let _ = writeln!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul>\n");
    }
    let _ = writeln!(
        out,
        "<p>Host: {}. Made by vmtune {}.</p>\n</body></html>",
        esc(&plan.host_source),
        env!("CARGO_PKG_VERSION")
    );
    out
}

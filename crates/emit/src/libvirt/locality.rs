//! A patched domain's passed-through devices moved behind the expander buses of their guest
//! cells ([`crate::locality`]): a `pcie-expander-bus` per cell with `<target><node>` (q35;
//! `pci-expander-bus` on i440fx, with the devices on it directly), a `pcie-root-port` per
//! host slot below it, and each `<hostdev>`'s guest `<address>` on that port. Spliced into the
//! text after the plan's elements are: every other byte — the user's other controllers and
//! addresses included — stays as it was, so the root ports the hostdevs leave stay (empty).

use plan::Plan;

use super::read::{child, children, parse_doc, pci_bdf, pci_part};
use crate::locality::{expanders, Expander};
use crate::xml::{apply_edits, line_indent, Edit, El, Style};
use crate::EmitError;

/// A controller's `index`.
fn index_of(c: roxmltree::Node) -> Option<u32> {
    c.attribute("index").and_then(|i| i.trim().parse().ok())
}

/// The PCI bus an element's own guest `<address>` puts it on.
fn bus_of(n: roxmltree::Node) -> Option<u32> {
    let a = children(n, "address").find(|a| a.attribute("type") == Some("pci"))?;
    pci_part(a, "bus").ok()
}

/// Removals (and the start offsets of the controllers removed) of the expander buses (and the root ports on them) an earlier patch wrote: those
/// holding nothing but hostdevs this plan places, so a second patch writes them once. An
/// expander bus holding anything else is the user's and stays.
fn stale(
    xml: &str,
    devices: roxmltree::Node,
    hostdevs: &[(roxmltree::Node, String)],
    placed: &dyn Fn(&str) -> bool,
) -> (Vec<Edit>, Vec<usize>) {
    let controllers: Vec<roxmltree::Node> = children(devices, "controller")
        .filter(|c| c.attribute("type") == Some("pci"))
        .collect();
    let mut edits = Vec::new();
    let mut removed = Vec::new();
    for e in controllers.iter().filter(|c| {
        matches!(
            c.attribute("model"),
            Some("pcie-expander-bus" | "pci-expander-bus")
        )
    }) {
        let Some(ei) = index_of(*e) else { continue };
        let ports: Vec<&roxmltree::Node> = controllers
            .iter()
            .filter(|c| c.attribute("model") == Some("pcie-root-port") && bus_of(**c) == Some(ei))
            .collect();
        let buses: Vec<u32> = std::iter::once(ei)
            .chain(ports.iter().filter_map(|p| index_of(**p)))
            .collect();
        let ours = devices
            .children()
            .filter(|d| d.is_element())
            .filter(|d| d.tag_name().name() != "controller" || !ports.contains(&d))
            .filter(|d| bus_of(*d).is_some_and(|b| buses.contains(&b)))
            .all(|d| hostdevs.iter().any(|(h, b)| *h == d && placed(b)));
        if !ours {
            continue;
        }
        for c in std::iter::once(e).chain(ports) {
            let r = c.range();
            // with the line it stands on
            let start = match line_indent(xml, r.start) {
                Some(i) => xml[..r.start - i.len()]
                    .rfind('\n')
                    .unwrap_or(r.start - i.len()),
                None => r.start,
            };
            edits.push(Edit {
                at: start..r.end,
                text: String::new(),
            });
            removed.push(r.start);
        }
    }
    (edits, removed)
}

/// `xml` with the devices of `plan` behind their cells' expander buses; unchanged when no
/// device has a guest cell or the domain passes none of them through.
pub fn place_devices(xml: &str, plan: &Plan) -> Result<String, EmitError> {
    let exp = expanders(plan);
    if exp.is_empty() {
        return Ok(xml.to_string());
    }
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let Some(devices) = child(root, "devices") else {
        return Ok(xml.to_string());
    };
    let hostdevs: Vec<(roxmltree::Node, String)> = children(devices, "hostdev")
        .filter(|h| {
            h.attribute("mode").unwrap_or("subsystem") == "subsystem"
                && h.attribute("type") == Some("pci")
        })
        .filter_map(|h| {
            let addr = child(h, "source").and_then(|s| child(s, "address"))?;
            pci_bdf(addr).ok().map(|b| (h, b))
        })
        .collect();
    let placed = |bdf: &str| exp.iter().any(|e| has(e, bdf));
    if !hostdevs.iter().any(|(_, b)| placed(b)) {
        return Ok(xml.to_string());
    }
    let pcie = is_pcie(root, devices);
    let (mut edits, removed) = stale(xml, devices, &hostdevs, &placed);
    let kept = |c: &roxmltree::Node| !removed.contains(&c.range().start);
    let st = Style::detect(xml, &root).inside(xml, &devices, 1);
    let mut next = children(devices, "controller")
        .filter(|c| c.attribute("type") == Some("pci") && kept(c))
        .filter_map(index_of)
        .max()
        .map_or(1, |m| m + 1);
    let mut controllers: Vec<El> = Vec::new();
    // host BDF → (bus index, slot, function, multifunction)
    let mut address: Vec<(String, u32, u8, u8, bool)> = Vec::new();
    for e in &exp {
        let bus = next;
        next += 1;
        controllers.push(expander_el(e, bus, pcie));
        for p in &e.ports {
            let (dev_bus, dev_slot) = if pcie {
                let port = next;
                next += 1;
                controllers.push(
                    El::new("controller")
                        .attr("type", "pci")
                        .attr("index", port)
                        .attr("model", "pcie-root-port")
                        .kid(pci_address(bus, p.slot, 0, false)),
                );
                (port, 0)
            } else {
                (bus, p.slot)
            };
            for (bdf, f) in &p.functions {
                let multi = *f == 0 && p.functions.len() > 1;
                address.push((bdf.clone(), dev_bus, dev_slot, *f, multi));
            }
        }
    }
    for (h, bdf) in &hostdevs {
        let Some((_, bus, slot, f, multi)) = address.iter().find(|a| &a.0 == bdf) else {
            continue;
        };
        let el = pci_address(*bus, *slot, *f, *multi).render(&st, 1);
        match children(*h, "address").next() {
            Some(a) => edits.push(Edit {
                at: a.range(),
                text: el,
            }),
            None => {
                // before `</hostdev>`: on a line of its own, indented as its <source>,
                // where the end tag starts a line; else right before it
                let end = h.range().end;
                let close = xml[..end].rfind("</").unwrap_or(end);
                let text = match line_indent(xml, close) {
                    Some(close_indent) => {
                        let source = child(*h, "source")
                            .and_then(|s| line_indent(xml, s.range().start))
                            .unwrap_or_default();
                        let pad = source
                            .strip_prefix(close_indent.as_str())
                            .filter(|p| !p.is_empty())
                            .unwrap_or(st.unit.as_str());
                        format!("{pad}{el}{}{close_indent}", st.nl)
                    }
                    None => el,
                };
                edits.push(Edit {
                    at: close..close,
                    text,
                });
            }
        }
    }
    // the controllers after the domain's last controller, else first in <devices>
    let (at, indent) = match children(devices, "controller").filter(kept).last() {
        Some(c) => (
            c.range().end,
            line_indent(xml, c.range().start).unwrap_or_default(),
        ),
        None => {
            let first = devices.children().find(|c| c.is_element());
            match first {
                Some(f) => (
                    f.range().start,
                    line_indent(xml, f.range().start).unwrap_or_default(),
                ),
                None => (
                    xml[..devices.range().end]
                        .rfind("</")
                        .unwrap_or(devices.range().end),
                    String::new(),
                ),
            }
        }
    };
    let mut text = String::new();
    for c in &controllers {
        text.push_str(&st.nl);
        text.push_str(&indent);
        text.push_str(&c.render(&st, 1));
    }
    edits.push(Edit { at: at..at, text });
    Ok(apply_edits(xml, edits))
}

fn has(e: &Expander, bdf: &str) -> bool {
    e.ports
        .iter()
        .any(|p| p.functions.iter().any(|(b, _)| b == bdf))
}

/// A q35 domain (PCIe): its machine type says so, or its root controller is `pcie-root`.
fn is_pcie(root: roxmltree::Node, devices: roxmltree::Node) -> bool {
    let root_model = children(devices, "controller")
        .filter(|c| c.attribute("type") == Some("pci"))
        .find_map(|c| c.attribute("model").filter(|m| m.ends_with("-root")));
    match root_model {
        Some(m) => m == "pcie-root",
        None => child(root, "os")
            .and_then(|o| child(o, "type"))
            .and_then(|t| t.attribute("machine"))
            .is_some_and(|m| m.contains("q35")),
    }
}

fn expander_el(e: &Expander, index: u32, pcie: bool) -> El {
    let model = if pcie {
        "pcie-expander-bus"
    } else {
        "pci-expander-bus"
    };
    El::new("controller")
        .attr("type", "pci")
        .attr("index", index)
        .attr("model", model)
        .kid(
            El::new("target")
                .attr("busNr", e.bus_nr)
                .kid(El::new("node").text(e.cell)),
        )
}

fn pci_address(bus: u32, slot: u8, function: u8, multi: bool) -> El {
    let mut a = El::new("address")
        .attr("type", "pci")
        .attr("domain", "0x0000")
        .attr("bus", format!("0x{bus:02x}"))
        .attr("slot", format!("0x{slot:02x}"))
        .attr("function", format!("0x{function:x}"));
    if multi {
        a = a.attr("multifunction", "on");
    }
    a
}

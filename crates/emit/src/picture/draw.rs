//! Layout and SVG of the picture: each box lays its children out in rows (wrapping at a width
//! per kind, as lstopo does), sizes come bottom-up, positions top-down.

use std::fmt::Write as _;

use topo::{DeviceKind, Host, PciDevice};

use super::tree::{self, Kind, Obj};
use super::{Marks, Role};

const PU_W: f64 = 46.0;
const PU_H: f64 = 32.0;
const PAD: f64 = 5.0;
const LINE: f64 = 14.0;
const DEV_W: f64 = 132.0;
const DEV_H: f64 = 32.0;
/// Devices drawn per node before the rest are counted in one box.
const DEVICES_SHOWN: usize = 6;
/// Hosts with more PUs fold the parts nothing of the plan touches.
const FOLD_ABOVE_PUS: usize = 128;
/// Without a plan, only hosts this large are folded.
const FOLD_HOST_ABOVE_PUS: usize = 512;

pub const VCPU: &str = "#4c8bf5";
pub const EMULATOR: &str = "#f29d38";
pub const IOTHREAD: &str = "#f5d04c";
pub const HOUSEKEEPING: &str = "#9aa0a6";
pub const TENANT: &str = "#c58af9";
pub const VFIO_IRQ: &str = "#d93025";
pub const HOST_IRQ: &str = "#3c4043";

/// A laid-out box: size, place in its parent, and what it draws.
struct Boxed {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    /// `data-*` attributes of its group.
    attrs: Vec<(&'static str, String)>,
    lines: Vec<String>,
    fill: String,
    dashed: bool,
    /// Small circles in the top right corner (interrupt routing).
    dots: Vec<&'static str>,
    children: Vec<Boxed>,
}

impl Boxed {
    fn leaf(w: f64, h: f64, fill: &str, lines: Vec<String>) -> Boxed {
        Boxed {
            x: 0.0,
            y: 0.0,
            w,
            h,
            attrs: Vec::new(),
            lines,
            fill: fill.to_string(),
            dashed: false,
            dots: Vec::new(),
            children: Vec::new(),
        }
    }
}

struct Ctx<'a> {
    host: &'a Host,
    marks: &'a Marks,
    fold: bool,
}

fn max_row_width(kind: Kind) -> f64 {
    match kind {
        Kind::Machine => 1900.0,
        Kind::Package => 1850.0,
        Kind::Die => 1800.0,
        Kind::Node => 1000.0,
        Kind::L3 => 900.0,
        Kind::L2 => 520.0,
        Kind::Core | Kind::Pu => f64::INFINITY,
    }
}

/// Place `children` in rows below a header of `head` lines, a new row at `break_at` (the
/// devices under a node start their own row); returns the box size.
fn arrange(
    children: &mut [Boxed],
    kind: Kind,
    head: usize,
    min_w: f64,
    break_at: Option<usize>,
) -> (f64, f64) {
    let max = max_row_width(kind);
    let top = PAD + LINE * head as f64 + if head > 0 { 2.0 } else { 0.0 };
    let (mut x, mut y, mut row_h, mut w) = (PAD, top, 0.0f64, min_w);
    for (i, c) in children.iter_mut().enumerate() {
        if x > PAD && (x + c.w + PAD > max || break_at == Some(i)) {
            x = PAD;
            y += row_h + PAD;
            row_h = 0.0;
        }
        c.x = x;
        c.y = y;
        x += c.w + PAD;
        row_h = row_h.max(c.h);
        w = w.max(x);
    }
    let h = if children.is_empty() {
        top + PAD
    } else {
        y + row_h + PAD
    };
    (w, h)
}

fn short_role(r: &Role) -> String {
    match r {
        Role::Vcpu(v) => format!("v{v}"),
        Role::Emulator => "emu".into(),
        Role::Iothread => "io".into(),
        Role::Housekeeping => "host".into(),
        Role::Tenant(n) => n.chars().take(6).collect(),
    }
}

fn role_fill(r: &Role) -> &'static str {
    match r {
        Role::Vcpu(_) => VCPU,
        Role::Emulator => EMULATOR,
        Role::Iothread => IOTHREAD,
        Role::Housekeeping => HOUSEKEEPING,
        Role::Tenant(_) => "url(#tenant)",
    }
}

fn pu_box(ctx: &Ctx, o: &Obj) -> Boxed {
    let roles = ctx.marks.roles.get(&o.id).cloned().unwrap_or_default();
    let fill = roles.first().map(role_fill).unwrap_or("#ffffff");
    let second = roles.iter().map(short_role).collect::<Vec<_>>().join("+");
    let mut b = Boxed::leaf(PU_W, PU_H, fill, vec![format!("PU {}", o.id), second]);
    b.attrs.push(("kind", "pu".into()));
    b.attrs.push(("id", o.id.to_string()));
    b.attrs.push(("cpus", o.id.to_string()));
    if !roles.is_empty() {
        let words: Vec<String> = roles.iter().map(Role::word).collect();
        b.attrs.push(("roles", words.join(" ")));
    }
    if ctx.marks.vfio_irq_cpus.contains(o.id) {
        b.dots.push(VFIO_IRQ);
    }
    if ctx.marks.host_irq_cpus.contains(o.id) {
        b.dots.push(HOST_IRQ);
    }
    b
}

/// Width of a box that shows `lines` (11 px sans: ~6.4 px a character).
fn text_width(lines: &[String]) -> f64 {
    lines
        .iter()
        .map(|l| l.chars().count() as f64 * 6.4)
        .fold(0.0, f64::max)
        + 2.0 * PAD
}

fn size_words(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        Some(b) if b >= 1 << 20 => format!("{} MiB", b >> 20),
        Some(b) => format!("{} KiB", b >> 10),
        None => "size unknown".into(),
    }
}

fn page_words(kb: u64) -> String {
    match kb {
        1_048_576 => "1G".into(),
        2048 => "2M".into(),
        k => format!("{k}K"),
    }
}

/// The label lines of a box that holds others.
fn labels(ctx: &Ctx, o: &Obj) -> Vec<String> {
    let h = ctx.host;
    match o.kind {
        Kind::Machine => vec![ctx.marks.title.clone()],
        Kind::Package => {
            let p = h.packages.iter().find(|p| p.id == o.id);
            let model = p.and_then(|p| p.model.clone()).unwrap_or_default();
            let n = p.and_then(|p| p.os_index).unwrap_or(o.id);
            vec![format!("Package P#{n} {model}").trim_end().to_string()]
        }
        Kind::Die => vec![format!("Die {}", o.id)],
        Kind::Node => node_labels(ctx, o.id),
        Kind::L3 | Kind::L2 => {
            let level = if o.kind == Kind::L3 { 3 } else { 2 };
            let c = h.caches.iter().find(|c| c.id == o.id && c.level == level);
            let lvl = if o.kind == Kind::L3 { "L3" } else { "L2" };
            vec![format!(
                "{lvl} {}",
                size_words(c.and_then(|c| c.size_bytes))
            )]
        }
        Kind::Core => {
            let kind = o
                .cpus
                .first()
                .and_then(|p| h.pus.iter().find(|x| x.os_index == p))
                .and_then(|p| p.kind.as_deref())
                .map(|k| match k {
                    "performance" => " · P-core".to_string(),
                    "efficiency" => " · E-core".to_string(),
                    other => format!(" · {other}"),
                })
                .unwrap_or_default();
            vec![format!("Core {}{kind}", o.id)]
        }
        Kind::Pu => Vec::new(),
    }
}

fn node_labels(ctx: &Ctx, id: u32) -> Vec<String> {
    let n = ctx.host.numa_nodes.iter().find(|n| n.os_index == id);
    let mut first = format!(
        "NUMA node {id} · {}",
        size_words(n.and_then(|n| n.memory_bytes))
    );
    for hp in n.map(|n| n.hugepages.as_slice()).unwrap_or_default() {
        let free = hp.free.map(|f| f.to_string()).unwrap_or_else(|| "?".into());
        let total = hp
            .total
            .map(|f| f.to_string())
            .unwrap_or_else(|| "?".into());
        if hp.total.unwrap_or(0) > 0 || hp.free.unwrap_or(0) > 0 {
            let _ = write!(first, " · {}: {free}/{total} free", page_words(hp.size_kb));
        }
    }
    let mut out = vec![first];
    if let Some((bytes, kb, pages)) = ctx.marks.memory.get(&id) {
        let how = if *kb > 4 && *pages > 0 {
            format!("{pages} × {} pages", page_words(*kb))
        } else {
            "4 KiB pages".into()
        };
        out.push(format!("VM memory: {} in {how}", size_words(Some(*bytes))));
    }
    out
}

fn shown_device(ctx: &Ctx, d: &PciDevice) -> bool {
    ctx.marks.devices.contains(&d.bdf)
        || ctx.marks.tenant_devices.contains_key(&d.bdf)
        || matches!(
            d.kind,
            DeviceKind::Gpu | DeviceKind::Accelerator | DeviceKind::Nic | DeviceKind::Storage
        )
}

fn device_box(ctx: &Ctx, d: &PciDevice) -> Boxed {
    let kind = format!("{:?}", d.kind).to_uppercase();
    let bdf = d.bdf.strip_prefix("0000:").unwrap_or(&d.bdf);
    let mut first = format!("{bdf} {kind}");
    let (fill, who) = if ctx.marks.devices.contains(&d.bdf) {
        (VCPU, Some("→ this VM".to_string()))
    } else if let Some(t) = ctx.marks.tenant_devices.get(&d.bdf) {
        ("url(#tenant)", Some(format!("→ {t}")))
    } else {
        ("#f1f3f4", None)
    };
    if let Some(w) = &who {
        first.push(' ');
        first.push_str(w);
    }
    let name: String = d.name.as_deref().unwrap_or("").chars().take(32).collect();
    let lines = vec![first, name];
    let mut b = Boxed::leaf(text_width(&lines).max(DEV_W), DEV_H, fill, lines);
    b.attrs.push(("kind", "pci".into()));
    b.attrs.push(("bdf", d.bdf.clone()));
    b
}

/// The devices of a node worth drawing: the plan's and tenants' first, then GPUs,
/// accelerators, NICs and storage, at most [`DEVICES_SHOWN`] and a box counting the rest.
fn device_row(ctx: &Ctx, node: Option<u32>) -> Vec<Boxed> {
    let mut devs: Vec<&PciDevice> = ctx
        .host
        .pci_devices
        .iter()
        .filter(|d| d.numa.as_ref().and_then(|n| n.first().copied()) == node)
        .filter(|d| shown_device(ctx, d))
        .collect();
    let marked = |d: &PciDevice| {
        !(ctx.marks.devices.contains(&d.bdf) || ctx.marks.tenant_devices.contains_key(&d.bdf))
    };
    devs.sort_by_key(|d| marked(d));
    let mut out: Vec<Boxed> = devs
        .iter()
        .take(DEVICES_SHOWN)
        .map(|d| device_box(ctx, d))
        .collect();
    if devs.len() > DEVICES_SHOWN {
        let rest = devs.len() - DEVICES_SHOWN;
        let mut b = Boxed::leaf(
            DEV_W,
            DEV_H,
            "#f1f3f4",
            vec![format!("+ {rest} more devices")],
        );
        b.attrs.push(("kind", "pci-more".into()));
        out.push(b);
    }
    out
}

/// Whether `o` is drawn as one summary box: on a large host, an L3 or L2 group nothing of the
/// plan touches, or such a NUMA node without cache groups to fold instead (the node itself
/// stays, with its memory and devices).
fn folded(ctx: &Ctx, o: &Obj) -> bool {
    let groups =
        |o: &Obj| !tree::all_of(o, Kind::L3).is_empty() || !tree::all_of(o, Kind::L2).is_empty();
    ctx.fold
        && !ctx.marks.touches(&o.cpus)
        && match o.kind {
            Kind::L3 | Kind::L2 => true,
            Kind::Node => !groups(o),
            _ => false,
        }
}

fn counts(o: &Obj) -> (usize, usize) {
    (
        tree::all_of(o, Kind::Core).len(),
        tree::all_of(o, Kind::Pu).len(),
    )
}

fn lay(ctx: &Ctx, o: &Obj) -> Boxed {
    if o.kind == Kind::Pu {
        return pu_box(ctx, o);
    }
    let mut lines = labels(ctx, o);
    let (cores, pus) = counts(o);
    let fold = folded(ctx, o);
    let mut children: Vec<Boxed> = if fold {
        lines.push(format!(
            "{cores} cores · {pus} PUs (folded: nothing planned here)"
        ));
        Vec::new()
    } else {
        o.children.iter().map(|c| lay(ctx, c)).collect()
    };
    let break_at = Some(children.len());
    if o.kind == Kind::Node {
        children.extend(device_row(ctx, Some(o.id)));
    }
    if o.kind == Kind::Machine {
        children.extend(device_row(ctx, None));
    }
    let (w, h) = arrange(
        &mut children,
        o.kind,
        lines.len(),
        text_width(&lines),
        break_at,
    );
    let fill = match o.kind {
        Kind::Machine => "#ffffff",
        Kind::Package => "#dfe7f3",
        Kind::Die => "#e8eef7",
        Kind::Node => "#eaf5e4",
        Kind::L3 => "#ffffff",
        Kind::L2 => "#fafafa",
        Kind::Core => "#bdbdbd",
        Kind::Pu => "#ffffff",
    };
    let mut b = Boxed::leaf(w, h, fill, lines);
    b.children = children;
    b.dashed = fold
        || o.kind == Kind::Core
            && o.cpus
                .first()
                .and_then(|p| ctx.host.pus.iter().find(|x| x.os_index == p))
                .and_then(|p| p.kind.as_deref())
                == Some("efficiency");
    b.attrs.push(("kind", o.kind.name().into()));
    b.attrs.push(("id", o.id.to_string()));
    b.attrs.push(("cpus", o.cpus.to_list_string()));
    if matches!(
        o.kind,
        Kind::Node | Kind::L3 | Kind::L2 | Kind::Package | Kind::Die
    ) {
        b.attrs.push(("cores", cores.to_string()));
        b.attrs.push(("pus", pus.to_string()));
    }
    if fold {
        b.attrs.push(("folded", "true".into()));
    }
    b
}

/// Text and attribute values escaped for SVG and HTML.
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn emit(out: &mut String, b: &Boxed, ox: f64, oy: f64) {
    let (x, y) = (ox + b.x, oy + b.y);
    out.push_str("<g");
    for (k, v) in &b.attrs {
        let _ = write!(out, " data-{k}=\"{}\"", esc(v));
    }
    out.push('>');
    let dash = if b.dashed {
        " stroke-dasharray=\"4 3\""
    } else {
        ""
    };
    let _ = write!(
        out,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" stroke=\"#5f6368\"{dash}/>",
        b.w, b.h, b.fill
    );
    for (i, l) in b.lines.iter().enumerate() {
        if l.is_empty() {
            continue;
        }
        let weight =
            if i == 0 && b.children.is_empty() && b.attrs.first().is_some_and(|a| a.1 == "pu") {
                " font-size=\"10\""
            } else {
                ""
            };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\"{weight}>{}</text>",
            x + PAD,
            y + PAD + LINE * (i as f64 + 1.0) - 3.0,
            esc(l)
        );
    }
    for (i, color) in b.dots.iter().enumerate() {
        let _ = write!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\"/>",
            x + b.w - 6.0 - 9.0 * i as f64,
            y + 6.0
        );
    }
    for c in &b.children {
        emit(out, c, x, y);
    }
    out.push_str("</g>\n");
}

fn legend(out: &mut String, x: f64, y: f64) -> f64 {
    let items: [(&str, &str, bool); 7] = [
        (VCPU, "vCPU N of this VM (vN)", false),
        (EMULATOR, "emulator (emu)", false),
        (IOTHREAD, "iothreads (io)", false),
        (HOUSEKEEPING, "host housekeeping (host)", false),
        ("url(#tenant)", "a VM already on the host", false),
        (VFIO_IRQ, "the VM's device interrupts go here", true),
        (HOST_IRQ, "other movable interrupts go here", true),
    ];
    let _ = write!(out, "<g data-kind=\"legend\">");
    let mut cx = x;
    for (color, text, dot) in items {
        if dot {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{color}\"/>",
                cx + 7.0,
                y + 7.0
            );
        } else {
            let _ = write!(
                out,
                "<rect x=\"{cx:.1}\" y=\"{y:.1}\" width=\"14\" height=\"14\" fill=\"{color}\" stroke=\"#5f6368\"/>"
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            cx + 18.0,
            y + 11.0,
            esc(text)
        );
        cx += 24.0 + text.chars().count() as f64 * 6.0;
    }
    out.push_str("</g>\n");
    let _ = writeln!(
        out,
        "<text x=\"{x:.1}\" y=\"{:.1}\" fill=\"#5f6368\">Dashed: E-cores, and parts folded because nothing of the plan is there.</text>",
        y + 30.0
    );
    cx
}

/// The whole document.
pub fn svg(host: &Host, marks: &Marks) -> String {
    let root = tree::build(host);
    let planned = !marks.roles.is_empty();
    let ctx = Ctx {
        host,
        marks,
        fold: host.pus.len() > FOLD_ABOVE_PUS && planned || host.pus.len() > FOLD_HOST_ABOVE_PUS,
    };
    let mut b = lay(&ctx, &root);
    b.x = 10.0;
    b.y = 10.0;
    let legend_y = b.y + b.h + 14.0;
    let mut body = String::new();
    emit(&mut body, &b, 0.0, 0.0);
    let legend_w = legend(&mut body, 10.0, legend_y);
    let width = (b.w + 20.0).max(legend_w + 10.0);
    let height = legend_y + 44.0;
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n<title>{}</title>\n",
        esc(&marks.title)
    );
    let _ = writeln!(
        out,
        "<defs><pattern id=\"tenant\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/><rect width=\"3\" height=\"6\" fill=\"{TENANT}\"/></pattern></defs>"
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

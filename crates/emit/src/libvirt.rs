//! libvirt domain XML: the plan as domain elements, an existing domain patched in place, and
//! an existing domain read back as a [`Tenant`].
//!
//! Elements written (libvirt formatdomain): `<memory>`, `<currentMemory>`, `<memoryBacking>`,
//! `<vcpu>`, `<iothreads>`, `<cputune>`, `<numatune>`, `<features>`, `<cpu>` and, for
//! Windows guests, `<clock>`.
//!
//! Choices, and why:
//! - `<cpu mode='host-passthrough' check='none' migratable='off'>`: pinned VFIO guests do not
//!   migrate; `migratable='off'` lets libvirt pass non-migratable features such as `invtsc`.
//!   No `<cache mode='passthrough'/>`: it copies the host's "logical CPUs sharing this cache"
//!   counts into CPUID leaf 4, which disagree with a guest smaller than the host (12 vCPUs of
//!   a 16-thread i9-9900K); QEMU's default cache info follows the guest topology instead.
//! - No `<locked/>`: VFIO already pins all guest RAM (libvirt raises the memlock limit for
//!   domains with hostdevs by itself), hugetlbfs pages are never swapped, and `<locked/>`
//!   without a `<memtune><hard_limit>` makes libvirt lift the memlock limit entirely.
//! - `<page>` carries no `nodeset`: that attribute names *guest* NUMA cells and the plan uses
//!   one page size for all of them; host placement is `<numatune>`'s job.
//! - One `<iothreads>` thread pinned to `iothread_cpus` when the plan has iothread CPUs; an
//!   existing domain keeps its own iothread count/ids (its disks refer to them) and every one
//!   is pinned — to the emulator CPUs when the plan has no iothread CPUs.
//!
//! Patching (`--domain FILE`) keeps every byte it does not own. Inside elements it merges:
//! - `<cputune>`: `<vcpupin>`/`<emulatorpin>`/`<iothreadpin>` are ours; `<shares>`,
//!   `<vcpusched>`, `<cachetune>`… are kept (their `vcpus` clipped to the plan's vCPUs).
//! - `<cpu>`: the start tag, `<topology>`, `<numa>` and the `invtsc`/`hypervisor` features are
//!   ours; `<model>`/`<vendor>` are removed (meaningless with host-passthrough); the user's
//!   other `<feature>`s (e.g. `topoext` on AMD), `<cache>`, `<maxphysaddr>` are kept.
//! - `<features>`: `<hyperv>` is ours when the plan lists enlightenments (and removed when it
//!   hides the hypervisor bit: the guest cannot see them then), `<kvm><hidden>` when it hides
//!   KVM; `<acpi>`, `<apic>`, `<vmport>`… are kept (`<acpi/>`/`<apic/>` are added if
//!   missing).
//! - `<memoryBacking>`: `<hugepages>` is ours (removed for 4K plans); `<source>`, `<access>`,
//!   `<locked>`, `<nosharepages>`… are kept.
//! - `<clock>` (when the plan has timers): the plan's `<timer>`s are ours; the start tag
//!   (`offset`) and other timers are kept.
//! - `<vcpu>`, `<memory>`, `<currentMemory>`, `<numatune>` are replaced whole; `<vcpus>` is
//!   removed when it lists a different number of vCPUs.

use plan::{GuestOs, Plan, Tenant, TenantHugepages, Timer};
use topo::CpuSet;

use crate::xml::{merge, El, Style};
use crate::EmitError;

/// Order in which `virsh dumpxml` writes the children of `<domain>` (libvirt's
/// `virDomainDefFormatInternal`); used to place elements the input lacks.
const DOMAIN_ORDER: &[&str] = &[
    "name",
    "uuid",
    "genid",
    "title",
    "description",
    "metadata",
    "maxMemory",
    "memory",
    "currentMemory",
    "blkiotune",
    "memtune",
    "memoryBacking",
    "vcpu",
    "vcpus",
    "iothreads",
    "iothreadids",
    "defaultiothread",
    "cputune",
    "numatune",
    "resource",
    "sysinfo",
    "bootloader",
    "bootloader_args",
    "os",
    "idmap",
    "features",
    "cpu",
    "clock",
    "on_poweroff",
    "on_reboot",
    "on_crash",
    "on_lockfailure",
    "pm",
    "perf",
    "devices",
    "seclabel",
    "keywrap",
    "launchSecurity",
];

const FEATURES_ORDER: &[&str] = &[
    "acpi",
    "apic",
    "pae",
    "hap",
    "viridian",
    "privnet",
    "hyperv",
    "kvm",
    "xen",
    "pvspinlock",
    "pmu",
    "vmport",
    "gic",
    "smm",
    "ioapic",
];

/// Hyper-V enlightenments libvirt knows (`<hyperv mode='custom'>` children), in the order
/// libvirt writes them.
const HYPERV: &[&str] = &[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "synic",
    "stimer",
    "reset",
    "vendor_id",
    "frequencies",
    "reenlightenment",
    "tlbflush",
    "ipi",
    "evmcs",
    "avic",
];

/// Retries before a Windows guest notifies the hypervisor of a spinning lock (the value
/// libvirt/virt-manager and the QEMU docs use).
pub(crate) const SPINLOCK_RETRIES: u32 = 8191;
/// `<vendor_id>` value when the plan does not give one (any 1–12 characters but "Microsoft Hv"
/// hides the Hyper-V vendor from drivers that refuse to run under a hypervisor).
pub(crate) const DEFAULT_VENDOR_ID: &str = "vmtune";

/// A Hyper-V enlightenment from the plan, spelled `relaxed`, `hv-relaxed`, `hv_relaxed` or
/// with a value: `spinlocks=4095`, `vendor_id=whatever`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Enlightenment {
    pub name: &'static str,
    pub value: Option<String>,
}

impl Enlightenment {
    /// `spinlocks=N` retries, or [`SPINLOCK_RETRIES`] when absent or not a number.
    pub fn retries(&self) -> u32 {
        self.value
            .as_deref()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(SPINLOCK_RETRIES)
    }

    /// `vendor_id=…` as given, or [`DEFAULT_VENDOR_ID`]; each emitter keeps the characters
    /// its format allows.
    pub fn vendor(&self) -> &str {
        self.value.as_deref().unwrap_or(DEFAULT_VENDOR_ID)
    }
}

/// Parse the plan's enlightenment names: known ones in libvirt's order, unknown ones apart.
pub(crate) fn enlightenments(names: &[String]) -> (Vec<Enlightenment>, Vec<String>) {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for raw in names {
        let (n, v) = match raw.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
            None => (raw.trim(), None),
        };
        let n = n.to_ascii_lowercase().replace('-', "_");
        let n = n.strip_prefix("hv_").unwrap_or(&n).to_string();
        let n = if n == "vendorid" {
            "vendor_id".to_string()
        } else {
            n
        };
        if n == "time" {
            // QEMU's hv-time is libvirt's <timer name='hypervclock'>, written in <clock>
            continue;
        }
        match HYPERV.iter().find(|k| **k == n) {
            Some(k) if !known.iter().any(|e: &Enlightenment| e.name == *k) => {
                known.push(Enlightenment { name: k, value: v })
            }
            Some(_) => {}
            None => unknown.push(raw.clone()),
        }
    }
    known.sort_by_key(|e| HYPERV.iter().position(|k| *k == e.name));
    (known, unknown)
}

/// Timer names libvirt's schema accepts.
const TIMERS: &[&str] = &[
    "platform",
    "rtc",
    "tsc",
    "hpet",
    "pit",
    "armvtimer",
    "kvmclock",
    "hypervclock",
];
const TICKPOLICIES: &[&str] = &["delay", "catchup", "merge", "discard"];

/// The plan's guest timers; a Windows plan from before the planner said timers gets the usual
/// Windows set.
pub(crate) fn plan_timers(plan: &Plan) -> Vec<Timer> {
    if !plan.cpu_features.timers.is_empty() || !is_windows(plan) {
        return plan.cpu_features.timers.clone();
    }
    let t = |name: &str, present: bool, tp: Option<&str>| Timer {
        name: name.into(),
        present,
        tickpolicy: tp.map(str::to_string),
    };
    let mut v = vec![
        t("rtc", true, Some("catchup")),
        t("pit", true, Some("delay")),
        t("hpet", false, None),
    ];
    if !plan.cpu_features.hyperv.is_empty() {
        v.push(t("hypervclock", true, None));
    }
    v
}

pub(crate) fn is_windows(plan: &Plan) -> bool {
    matches!(plan.request.os, GuestOs::Windows | GuestOs::Windows7)
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

fn nodes_list(nodes: &[u32]) -> String {
    nodes.iter().copied().collect::<CpuSet>().to_list_string()
}

fn vcpu_count(plan: &Plan) -> usize {
    if plan.vcpus.is_empty() {
        plan.request.vcpus as usize
    } else {
        plan.vcpus.len()
    }
}

/// What the plan's elements depend on in an existing domain.
#[derive(Debug, Default)]
struct DomainInfo {
    /// Ids of the domain's iothreads (`<iothreadids>` or `1..=<iothreads>`).
    iothread_ids: Vec<u32>,
    /// Number of `<vcpu>` children of `<vcpus>`, if present.
    vcpus_listed: Option<usize>,
}

fn iothread_ids(plan: &Plan, info: Option<&DomainInfo>) -> Vec<u32> {
    match info {
        Some(i) if !i.iothread_ids.is_empty() => i.iothread_ids.clone(),
        _ if !plan.iothread_cpus.is_empty() => vec![1],
        _ => Vec::new(),
    }
}

/// The plan's domain elements. `info` is the domain being patched (None for a fragment).
fn elements(plan: &Plan, info: Option<&DomainInfo>) -> Vec<El> {
    let mut out = Vec::new();
    let mem_kib = kib(plan.request.memory_bytes);
    out.push(El::new("memory").attr("unit", "KiB").text(mem_kib));
    out.push(El::new("currentMemory").attr("unit", "KiB").text(mem_kib));

    // <memoryBacking>
    let mut mb = El::new("memoryBacking").merged().drops(&["hugepages"]);
    if plan.memory.hugepage_size_kb > 4 {
        mb.push(
            El::new("hugepages").kid(
                El::new("page")
                    .attr("size", plan.memory.hugepage_size_kb)
                    .attr("unit", "KiB"),
            ),
        );
    }
    out.push(mb);

    // <vcpu>, <iothreads>
    let n = vcpu_count(plan);
    out.push(El::new("vcpu").attr("placement", "static").text(n));
    let ids = iothread_ids(plan, info);
    if info.is_none_or(|i| i.iothread_ids.is_empty()) && !ids.is_empty() {
        out.push(El::new("iothreads").text(ids.len()).soft());
    }

    // <cputune>
    let mut ct = El::new("cputune")
        .merged()
        .drops(&["vcpupin", "emulatorpin", "iothreadpin"]);
    ct.clip_vcpus = Some(u32::try_from(n).unwrap_or(u32::MAX));
    let mut pins = plan.vcpus.clone();
    pins.sort_by_key(|p| p.vcpu);
    for p in &pins {
        ct.push(
            El::new("vcpupin")
                .attr("vcpu", p.vcpu)
                .attr("cpuset", p.cpu),
        );
    }
    if !plan.emulator_cpus.is_empty() {
        ct.push(El::new("emulatorpin").attr("cpuset", plan.emulator_cpus.to_list_string()));
    }
    let io_set = if plan.iothread_cpus.is_empty() {
        &plan.emulator_cpus
    } else {
        &plan.iothread_cpus
    };
    if !io_set.is_empty() {
        for id in &ids {
            ct.push(
                El::new("iothreadpin")
                    .attr("iothread", id)
                    .attr("cpuset", io_set.to_list_string()),
            );
        }
    }
    out.push(ct);

    // <numatune>
    let exposed = crate::guest_numa_exposed(plan);
    if !plan.memory.host_nodes.is_empty() {
        let mut nt = El::new("numatune").kid(
            El::new("memory")
                .attr("mode", "strict")
                .attr("nodeset", nodes_list(&plan.memory.host_nodes)),
        );
        if exposed {
            for c in &plan.guest_numa {
                if !c.host_nodes.is_empty() {
                    nt.push(
                        El::new("memnode")
                            .attr("cellid", c.cell)
                            .attr("mode", "strict")
                            .attr("nodeset", nodes_list(&c.host_nodes)),
                    );
                }
            }
        }
        out.push(nt);
    }

    // <features>
    let mut f = El::new("features").merged();
    f.order = FEATURES_ORDER;
    if plan.cpu_features.hide_hypervisor {
        // with the hypervisor CPUID bit clear the guest never looks for Hyper-V leaves
        f.drops.push("hyperv".into());
    }
    f.push(El::new("acpi").soft());
    f.push(El::new("apic").soft());
    let (hv, unknown) = enlightenments(&plan.cpu_features.hyperv);
    if !hv.is_empty() {
        let mut h = El::new("hyperv").attr("mode", "custom");
        for e in &hv {
            let mut x = El::new(e.name).attr("state", "on");
            match e.name {
                "spinlocks" => x = x.attr("retries", e.retries()),
                "vendor_id" => {
                    let v: String = e.vendor().chars().filter(|c| *c != ',').take(12).collect();
                    x = x.attr("value", v);
                }
                _ => {}
            }
            h.push(x);
        }
        f.push(h);
    }
    for u in &unknown {
        f.comment(format!(
            "vmtune: unknown Hyper-V enlightenment {u:?} left out"
        ));
    }
    if plan.cpu_features.kvm_hidden {
        f.push(
            El::new("kvm")
                .merged()
                .kid(El::new("hidden").attr("state", "on")),
        );
    }
    out.push(f);

    // <cpu>
    let t = &plan.guest_topology;
    let mut cpu = El::new("cpu")
        .attr("mode", "host-passthrough")
        .attr("check", "none")
        .attr("migratable", "off")
        .merged()
        .drops(&["model", "vendor", "topology", "numa"]);
    cpu.push(
        El::new("topology")
            .attr("sockets", t.sockets.max(1))
            .attr("dies", t.dies.max(1))
            .attr("cores", t.cores.max(1))
            .attr("threads", t.threads.max(1)),
    );
    if plan.cpu_features.invtsc {
        cpu.push(
            El::new("feature")
                .attr("policy", "require")
                .attr("name", "invtsc"),
        );
    }
    if plan.cpu_features.hide_hypervisor {
        cpu.push(
            El::new("feature")
                .attr("policy", "disable")
                .attr("name", "hypervisor"),
        );
    }
    if exposed {
        let mut numa = El::new("numa");
        for c in &plan.guest_numa {
            numa.push(
                El::new("cell")
                    .attr("id", c.cell)
                    .attr("cpus", c.vcpus.to_list_string())
                    .attr("memory", kib(c.memory_bytes))
                    .attr("unit", "KiB"),
            );
        }
        cpu.push(numa);
    }
    out.push(cpu);

    // <clock>: the plan's timers (Windows: RTC catch-up, PIT delay, no HPET — emulated in
    // QEMU userspace, the Windows 7 timer note — and the Hyper-V reference clock). A plan without timers
    // leaves the domain's clock alone.
    let timers = plan_timers(plan);
    if !timers.is_empty() {
        let offset = if is_windows(plan) { "localtime" } else { "utc" };
        let mut c = El::new("clock")
            .attr("offset", offset)
            .merged()
            .keep_start();
        for t in &timers {
            if !TIMERS.contains(&t.name.as_str()) {
                c.comment(format!("vmtune: unknown timer {:?} left out", t.name));
                continue;
            }
            let mut x = El::new("timer").attr("name", &t.name);
            if let Some(tp) = &t.tickpolicy {
                if TICKPOLICIES.contains(&tp.as_str())
                    && t.name != "kvmclock"
                    && t.name != "hypervclock"
                {
                    x = x.attr("tickpolicy", tp);
                }
            }
            if !t.present {
                x = x.attr("present", "no");
            } else if t.tickpolicy.is_none() {
                x = x.attr("present", "yes");
            }
            c.push(x);
        }
        out.push(c);
    }
    out
}

/// The `<vcpu>`, `<cputune>`, `<numatune>`, `<memoryBacking>`, `<cpu>` and `<features>`
/// elements for the plan (plus `<memory>` and, for Windows, `<clock>`), as an XML fragment to
/// paste into a `<domain>`.
pub fn domain_fragment(plan: &Plan) -> String {
    let st = Style::default();
    let name = plan.request.name.as_deref().unwrap_or("the VM");
    let mut s = format!(
        "<!-- vmtune plan for {}: {} vCPUs, {} MiB; paste into <domain> -->\n",
        crate::xml::escape(name).replace("--", "- -"),
        vcpu_count(plan),
        plan.request.memory_bytes / (1024 * 1024)
    );
    for e in elements(plan, None) {
        if e.merge && e.kids.is_empty() && e.text.is_none() {
            continue;
        }
        s.push_str(&e.render(&st, 0));
        s.push('\n');
    }
    s
}

fn check_plan(plan: &Plan) -> Result<(), EmitError> {
    if vcpu_count(plan) == 0 {
        return Err(EmitError::Invalid("plan has no vCPUs".into()));
    }
    if plan.request.memory_bytes == 0 {
        return Err(EmitError::Invalid("plan has no memory".into()));
    }
    Ok(())
}

fn parse_doc(xml: &str) -> Result<roxmltree::Document<'_>, EmitError> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts)
        .map_err(|e| EmitError::Xml(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "domain" || root.tag_name().namespace().is_some() {
        return Err(EmitError::Xml(format!(
            "root element is <{}>, not <domain>",
            root.tag_name().name()
        )));
    }
    Ok(doc)
}

fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i: 'a>(
    n: roxmltree::Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> + 'a {
    n.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// Patch an existing domain XML: replace the plan's elements (merging inside `<cputune>`,
/// `<cpu>`, `<features>`, `<memoryBacking>`, `<clock>` as the module docs say), insert the
/// missing ones where `virsh dumpxml` puts them, and leave every other byte identical.
pub fn patch_domain(xml: &str, plan: &Plan) -> Result<String, EmitError> {
    check_plan(plan)?;
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let mut info = DomainInfo::default();
    if let Some(ids) = child(root, "iothreadids") {
        for t in children(ids, "iothread") {
            if let Some(id) = t.attribute("id").and_then(|v| v.trim().parse::<u32>().ok()) {
                info.iothread_ids.push(id);
            }
        }
    }
    if info.iothread_ids.is_empty() {
        if let Some(n) = child(root, "iothreads")
            .and_then(|t| t.text())
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            // a hostile count must not make us write millions of pins
            info.iothread_ids = (1..=n.min(1024)).collect();
        }
    }
    info.vcpus_listed = child(root, "vcpus").map(|v| children(v, "vcpu").count());

    let mut dom = El::new("domain").merged().keep_start();
    dom.order = DOMAIN_ORDER;
    dom.drops.push("numatune".into());
    if info.vcpus_listed.is_some_and(|n| n != vcpu_count(plan)) {
        dom.drops.push("vcpus".into());
    }
    for e in elements(plan, Some(&info)) {
        dom.push(e);
    }
    let st = Style::detect(xml, &root);
    let patched = merge(xml, &root, &dom, &st, 0);
    let r = root.range();
    let mut out = String::with_capacity(xml.len() + patched.len());
    out.push_str(xml.get(..r.start).unwrap_or(""));
    out.push_str(&patched);
    out.push_str(xml.get(r.end..).unwrap_or(""));
    Ok(out)
}

/// Parse a libvirt cpuset (`1-4,^3,6`): comma-separated CPUs and ranges, `^N` removes `N`
/// from what came before (libvirt's `virBitmapParse`).
pub fn parse_libvirt_cpuset(s: &str) -> Result<CpuSet, EmitError> {
    let bad = |why: &str| EmitError::Invalid(format!("invalid cpuset {s:?}: {why}"));
    let num = |t: &str| -> Result<u32, EmitError> {
        let n: u32 = t
            .trim()
            .parse()
            .map_err(|_| bad(&format!("{:?} is not a CPU number", t.trim())))?;
        if n > topo::cpuset::MAX_CPU {
            return Err(bad(&format!("CPU {n} is too large")));
        }
        Ok(n)
    };
    let mut set = CpuSet::new();
    if s.trim().is_empty() {
        return Err(bad("empty"));
    }
    for part in s.split(',') {
        let part = part.trim();
        if let Some(neg) = part.strip_prefix('^') {
            set.remove(num(neg)?);
        } else if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(bad(&format!("range {a}-{b} goes backwards")));
            }
            for c in a..=b {
                set.insert(c);
            }
        } else {
            set.insert(num(part)?);
        }
    }
    Ok(set)
}

/// Bytes in `value` `unit` (libvirt scaled integers: `K`/`KiB` = 1024, `KB` = 1000, …;
/// no unit = `default_unit`).
fn scaled(
    value: &str,
    unit: Option<&str>,
    default_mult: u64,
    what: &str,
) -> Result<u64, EmitError> {
    let v: u64 = value
        .trim()
        .parse()
        .map_err(|_| EmitError::Invalid(format!("{what}: {:?} is not a number", value.trim())))?;
    let mult: u64 = match unit.map(|u| u.trim()) {
        None | Some("") => default_mult,
        Some(u) => match u.to_ascii_lowercase().as_str() {
            "b" | "bytes" => 1,
            "k" | "kib" => 1 << 10,
            "kb" => 1000,
            "m" | "mib" => 1 << 20,
            "mb" => 1_000_000,
            "g" | "gib" => 1 << 30,
            "gb" => 1_000_000_000,
            "t" | "tib" => 1 << 40,
            "tb" => 1_000_000_000_000,
            "p" | "pib" => 1 << 50,
            "pb" => 1_000_000_000_000_000,
            "e" | "eib" => 1 << 60,
            "eb" => 1_000_000_000_000_000_000,
            _ => return Err(EmitError::Invalid(format!("{what}: unknown unit {u:?}"))),
        },
    };
    v.checked_mul(mult)
        .ok_or_else(|| EmitError::Invalid(format!("{what}: {v} {} overflows", unit.unwrap_or(""))))
}

fn attr_cpuset(n: roxmltree::Node, attr: &str) -> Result<Option<CpuSet>, EmitError> {
    n.attribute(attr)
        .map(|v| {
            parse_libvirt_cpuset(v)
                .map_err(|e| EmitError::Invalid(format!("<{} {attr}>: {e}", n.tag_name().name())))
        })
        .transpose()
}

fn pci_part(n: roxmltree::Node, attr: &str) -> Result<u32, EmitError> {
    let v = n
        .attribute(attr)
        .ok_or_else(|| EmitError::Invalid(format!("hostdev PCI address lacks {attr}")))?
        .trim();
    let r = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => v.parse::<u32>(),
    };
    r.map_err(|_| EmitError::Invalid(format!("hostdev PCI address {attr}={v:?} is not a number")))
}

fn pci_bdf(addr: roxmltree::Node) -> Result<String, EmitError> {
    let (d, b, s, f) = (
        pci_part(addr, "domain").unwrap_or(0),
        pci_part(addr, "bus")?,
        pci_part(addr, "slot")?,
        pci_part(addr, "function")?,
    );
    if d > 0xffff || b > 0xff || s > 0x1f || f > 7 {
        return Err(EmitError::Invalid(format!(
            "hostdev PCI address {d:x}:{b:x}:{s:x}.{f:x} is out of range"
        )));
    }
    Ok(format!("{d:04x}:{b:02x}:{s:02x}.{f:x}"))
}

/// Read a libvirt domain as a tenant: its name, the host CPUs it pins (`<vcpupin>`,
/// `<emulatorpin>`, `<iothreadpin>`, `<vcpu cpuset>`), its PCI hostdevs (also
/// `<interface type='hostdev'>` VFs), and the hugepages it holds per host node.
pub fn tenant_from_domain_xml(xml: &str) -> Result<Tenant, EmitError> {
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let name = child(root, "name")
        .and_then(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| EmitError::Invalid("domain has no <name>".into()))?;

    let mut cpus = CpuSet::new();
    let mut emulator_cpus = CpuSet::new();
    if let Some(v) = child(root, "vcpu") {
        if let Some(s) = attr_cpuset(v, "cpuset")? {
            cpus = cpus.union(&s);
        }
    }
    if let Some(ct) = child(root, "cputune") {
        for c in ct.children().filter(|c| c.is_element()) {
            let name = c.tag_name().name();
            if matches!(name, "vcpupin" | "emulatorpin" | "iothreadpin") {
                if let Some(s) = attr_cpuset(c, "cpuset")? {
                    if name == "vcpupin" {
                        cpus = cpus.union(&s);
                    } else {
                        emulator_cpus = emulator_cpus.union(&s);
                    }
                }
            }
        }
    }
    // emulator/iothread CPUs the vCPUs do not use may be the host's (shared, not taken)
    let emulator_cpus = emulator_cpus.difference(&cpus);
    let cpus = cpus.union(&emulator_cpus);

    let mut devices = Vec::new();
    if let Some(devs) = child(root, "devices") {
        for d in devs.children().filter(|c| c.is_element()) {
            let pci = match d.tag_name().name() {
                "hostdev" => {
                    d.attribute("mode").unwrap_or("subsystem") == "subsystem"
                        && d.attribute("type") == Some("pci")
                }
                "interface" => d.attribute("type") == Some("hostdev"),
                _ => false,
            };
            if !pci {
                continue;
            }
            let Some(addr) = child(d, "source").and_then(|s| child(s, "address")) else {
                continue;
            };
            if d.tag_name().name() == "interface"
                && addr.attribute("type").unwrap_or("pci") != "pci"
            {
                continue;
            }
            let bdf = pci_bdf(addr)?;
            if !devices.contains(&bdf) {
                devices.push(bdf);
            }
        }
    }

    let hugepages = tenant_hugepages(root)?;
    Ok(Tenant {
        name,
        cpus,
        emulator_cpus,
        host_cpus: None,
        devices,
        hugepages,
    })
}

fn tenant_hugepages(root: roxmltree::Node) -> Result<Vec<TenantHugepages>, EmitError> {
    let Some(hp) = child(root, "memoryBacking").and_then(|m| child(m, "hugepages")) else {
        return Ok(Vec::new());
    };
    let memory = match child(root, "memory") {
        Some(m) => scaled(
            m.text().unwrap_or(""),
            m.attribute("unit"),
            1024,
            "<memory>",
        )?,
        None => {
            return Err(EmitError::Invalid(
                "domain with hugepages has no <memory>".into(),
            ))
        }
    };
    // Guest NUMA cells: id -> bytes.
    let mut cells: Vec<(u32, u64)> = Vec::new();
    if let Some(numa) = child(root, "cpu").and_then(|c| child(c, "numa")) {
        for (i, c) in children(numa, "cell").enumerate() {
            let id = match c.attribute("id") {
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| EmitError::Invalid(format!("<cell id={v:?}> is not a number")))?,
                None => i as u32,
            };
            let bytes = scaled(
                c.attribute("memory").unwrap_or(""),
                c.attribute("unit"),
                1024,
                "<cell memory>",
            )?;
            cells.push((id, bytes));
        }
    }
    // Host node(s) of the whole guest and of each cell (numatune).
    let numatune = child(root, "numatune");
    let single = |s: &CpuSet| (s.len() == 1).then(|| s.first()).flatten();
    let whole_node = match numatune.and_then(|n| child(n, "memory")) {
        Some(m) => attr_cpuset(m, "nodeset")?.and_then(|s| single(&s)),
        None => None,
    };
    let mut cell_node: Vec<(u32, Option<u32>)> = Vec::new();
    if let Some(nt) = numatune {
        for mn in children(nt, "memnode") {
            let Some(id) = mn
                .attribute("cellid")
                .and_then(|v| v.trim().parse::<u32>().ok())
            else {
                continue;
            };
            let node = attr_cpuset(mn, "nodeset")?.and_then(|s| single(&s));
            cell_node.push((id, node));
        }
    }
    let node_of_cell = |id: u32| {
        cell_node
            .iter()
            .find(|(c, _)| *c == id)
            .map(|(_, n)| *n)
            .unwrap_or(whole_node)
    };

    // Page sizes: each <page> covers the guest cells in its nodeset; one without a nodeset
    // covers the rest. No <page> at all: the host's default hugepage size (2 MiB on x86).
    let mut pages: Vec<(u64, Option<CpuSet>)> = Vec::new();
    for p in children(hp, "page") {
        let size = scaled(
            p.attribute("size").unwrap_or(""),
            p.attribute("unit"),
            1024,
            "<page size>",
        )?;
        if size < 4096 {
            return Err(EmitError::Invalid(format!(
                "<page size> of {size} bytes is too small"
            )));
        }
        pages.push((size, attr_cpuset(p, "nodeset")?));
    }
    if pages.is_empty() {
        pages.push((2 << 20, None));
    }
    let default_size = pages.iter().find(|(_, ns)| ns.is_none()).map(|(s, _)| *s);

    let mut out: Vec<TenantHugepages> = Vec::new();
    let mut add = |node: Option<u32>, size: u64, bytes: u64| {
        let size_kb = size / 1024;
        let n = bytes.div_ceil(size);
        if n == 0 {
            return;
        }
        match out
            .iter_mut()
            .find(|h| h.node == node && h.size_kb == size_kb)
        {
            Some(h) => h.pages += n,
            None => out.push(TenantHugepages {
                node,
                size_kb,
                pages: n,
            }),
        }
    };
    if cells.is_empty() {
        if let Some(size) = default_size.or_else(|| pages.first().map(|(s, _)| *s)) {
            add(whole_node, size, memory);
        }
    } else {
        for (id, bytes) in &cells {
            let size = pages
                .iter()
                .find(|(_, ns)| ns.as_ref().is_some_and(|s| s.contains(*id)))
                .map(|(s, _)| *s)
                .or(default_size);
            if let Some(size) = size {
                add(node_of_cell(*id), size, *bytes);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuset_syntax() {
        assert_eq!(
            parse_libvirt_cpuset("1-4,^3,6").unwrap().to_vec(),
            vec![1, 2, 4, 6]
        );
        assert_eq!(
            parse_libvirt_cpuset(" 0 , 2-3 ").unwrap().to_vec(),
            vec![0, 2, 3]
        );
        assert!(parse_libvirt_cpuset("").is_err());
        assert!(parse_libvirt_cpuset("3-1").is_err());
        assert!(parse_libvirt_cpuset("a").is_err());
        assert!(parse_libvirt_cpuset("99999999").is_err());
    }

    #[test]
    fn enlightenment_spellings() {
        let names: Vec<String> = [
            "hv-vapic",
            "relaxed",
            "spinlocks=4095",
            "hv_time",
            "vendor-id=x",
            "warp",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (k, u) = enlightenments(&names);
        let got: Vec<&str> = k.iter().map(|e| e.name).collect();
        assert_eq!(got, vec!["relaxed", "vapic", "spinlocks", "vendor_id"]);
        assert_eq!(k[2].value.as_deref(), Some("4095"));
        assert_eq!(u, vec!["warp".to_string()]);
    }

    #[test]
    fn scaled_units() {
        assert_eq!(scaled("16", Some("GiB"), 1024, "x").unwrap(), 16 << 30);
        assert_eq!(scaled("16", None, 1024, "x").unwrap(), 16 << 10);
        assert_eq!(scaled("1", Some("KB"), 1024, "x").unwrap(), 1000);
        assert!(scaled("1", Some("furlongs"), 1024, "x").is_err());
        assert!(scaled(&u64::MAX.to_string(), Some("G"), 1024, "x").is_err());
    }
}

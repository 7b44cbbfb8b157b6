//! libvirt domain XML: the plan as domain elements, an existing domain patched in place, and
//! an existing domain read back as a [`plan::Tenant`] or as the choices the plan keeps
//! ([`domain_choices`]).
//!
//! Elements written (libvirt formatdomain): `<memory>`, `<currentMemory>`, `<memoryBacking>`,
//! `<vcpu>`, `<cputune>`, `<numatune>`, `<features>`, `<cpu>` and, when the plan has timers,
//! `<clock>`.
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
//! - No `<iothreads>` is added: an iothread no disk names does nothing. An existing domain
//!   keeps its own iothread count/ids (its disks refer to them) and every one is pinned to the
//!   plan's iothread CPUs (the emulator CPUs when it has none).
//!
//! Patching (`--domain FILE`) keeps every byte it does not own, and first merges the domain's
//! own CPU choices into the plan ([`plan::adopt_domain`]: its Hyper-V settings, hidden KVM
//! signature, hidden hypervisor bit and disabled invtsc are kept, with a warning wherever the
//! plan overrides the domain). Inside elements it merges:
//! - `<cputune>`: `<vcpupin>`/`<emulatorpin>`/`<iothreadpin>` are ours; `<shares>`,
//!   `<vcpusched>`, `<cachetune>`… are kept (their `vcpus` clipped to the plan's vCPUs).
//! - `<cpu>`: the start tag, `<topology>`, `<numa>` and the `invtsc`/`hypervisor` features are
//!   ours; `<model>`/`<vendor>` are removed (meaningless with host-passthrough); the user's
//!   other `<feature>`s (e.g. `topoext` on AMD), `<cache>`, `<maxphysaddr>` are kept. A
//!   domain's own `<numa>` stays even for a one-cell plan, and one with `<maxMemory>` (memory
//!   hotplug) gets one: cells keep the user's `memAccess`/`discard` (virtiofs needs
//!   `memAccess='shared'` where `<memoryBacking>` has no `<access mode='shared'/>`), and their
//!   `<distances>` when the plan's cells are the domain's. A domain showing the guest several
//!   cells that the plan replaces with another count gets a warning.
//! - `<features>`: inside `<hyperv>` (whose start tag, so `mode='passthrough'`, is kept) the
//!   plan only adds enlightenments the domain does not mention; every child the domain has
//!   (`vendor_id`, `spinlocks` retries, `stimer` with `direct`, `evmcs`, `avic`, states
//!   `off`) stays byte-identical. `<kvm><hidden>` is added when the plan hides KVM and the
//!   domain says nothing. `<acpi>`, `<apic>`, `<vmport>`… are kept (`<acpi/>`/`<apic/>` are
//!   added if missing).
//! - `<memoryBacking>`: `<hugepages>` is ours (removed for 4K plans); `<source>`, `<access>`,
//!   `<locked>`, `<nosharepages>`… are kept. A hugepage plan for a domain with
//!   `<source type='anonymous'/>` is refused (libvirt refuses that pair).
//!
//! Elements the plan would write exactly as the domain has them keep their bytes; written ones
//! take the quote most of the file's attributes use, and the indentation of where they go:
//! a new top-level element the one most of the top-level elements have, anything inside an
//! existing element (or written over one) that element's own (a block pasted with tabs into
//! a file indented with spaces gets tabs).
//! - `<clock>` (when the plan has timers): the plan's `<timer>`s are ours; the start tag
//!   (`offset`) and other timers are kept. A timer the plan keeps on keeps the domain's
//!   other attributes (`track`, `mode`, `frequency`) and its `<catchup>`; one it turns off is
//!   written whole.
//! - `<vcpu>`, `<memory>`, `<currentMemory>`, `<numatune>` are replaced whole (so `current`
//!   goes: every vCPU starts); `<vcpus>` is rewritten to the plan's count, all enabled, each
//!   vCPU's `hotpluggable` as the domain had it — and left alone when it already says that.

mod guest;
mod locality;
mod read;
mod scratch;

use plan::{Plan, Timer};
use topo::CpuSet;

use crate::features::{
    enlightenments, is_windows, plan_timers, vcpu_count, HYPERV, TICKPOLICIES, TIMERS,
};
use crate::xml::{merge, El, Style};
use crate::EmitError;

pub use crate::values::parse_libvirt_cpuset;
pub use guest::{
    domain_disks, guest_shape, hugepage_backing, memory_backing, scratch_guest,
    with_memory_backing, DiskSource, GuestScratch, GuestShape, AGENT_CHANNEL,
};
pub use read::{domain_choices, domain_guest_os, tenant_from_domain_xml, DomainOs};
use read::{parse_doc, DomainInfo};
pub use scratch::{domain_shape, scratch_domain, DomainShape, Scratch};

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

/// Order in which libvirt writes the children of `<cpu>` (`virCPUDefFormatBuf`).
const CPU_ORDER: &[&str] = &[
    "model",
    "vendor",
    "topology",
    "cache",
    "maxphysaddr",
    "feature",
    "numa",
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

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

fn nodes_list(nodes: &[u32]) -> String {
    nodes.iter().copied().collect::<CpuSet>().to_list_string()
}

/// The iothreads the plan pins: the domain's own (none in a fragment: nothing would use one).
fn iothread_ids(info: Option<&DomainInfo>) -> Vec<u32> {
    info.map(|i| i.iothread_ids.clone()).unwrap_or_default()
}

/// `<vcpus>` rewritten for `n` vCPUs, all enabled; `None` when the domain's block already
/// says exactly that (or there is none).
fn vcpus_block(n: usize, info: Option<&DomainInfo>) -> Option<El> {
    let block = info?.vcpus.as_ref()?;
    let fine = block.len() == n
        && block
            .iter()
            .enumerate()
            .all(|(i, (id, enabled, _))| *enabled && *id as usize == i);
    if fine {
        return None;
    }
    let mut el = El::new("vcpus");
    for i in 0..n {
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        let hot = block
            .iter()
            .find(|(v, _, _)| *v == id)
            .and_then(|(_, _, h)| h.clone())
            .filter(|_| id != 0)
            .unwrap_or_else(|| "no".into());
        el.push(
            El::new("vcpu")
                .attr("id", id)
                .attr("enabled", "yes")
                .attr("hotpluggable", hot),
        );
    }
    Some(el)
}

/// The `<hyperv>` element of the plan: merged into the domain's, adding only what the domain
/// does not mention.
fn hyperv_element(plan: &Plan) -> Option<(El, Vec<String>)> {
    let f = &plan.cpu_features;
    let (on, unknown) = enlightenments(&f.hyperv);
    let (off, _) = enlightenments(&f.hyperv_off);
    if on.is_empty() && off.is_empty() && !f.hyperv_passthrough {
        return None;
    }
    let mode = if f.hyperv_passthrough {
        "passthrough"
    } else {
        "custom"
    };
    let mut h = El::new("hyperv").attr("mode", mode).merged().keep_start();
    h.order = HYPERV;
    for e in on.iter().filter(|e| e.sub().is_none()) {
        let mut x = El::new(e.name).attr("state", "on");
        match e.name {
            "spinlocks" => x = x.attr("retries", e.retries()),
            "vendor_id" => {
                // libvirt: 1–12 characters; a comma would end QEMU's property
                let v: String = e.vendor().chars().filter(|c| *c != ',').take(12).collect();
                x = x.attr("value", v);
            }
            _ => {}
        }
        for s in &on {
            if let Some((parent, kid)) = s.sub() {
                if parent == e.name {
                    x.push(El::new(kid).attr("state", "on"));
                }
            }
        }
        h.push(x.soft());
    }
    for e in off.iter().filter(|e| e.sub().is_none()) {
        h.push(El::new(e.name).attr("state", "off").soft());
    }
    Some((h, unknown))
}

fn timer_element(t: &Timer) -> El {
    let mut x = El::new("timer").attr("name", &t.name);
    if let Some(tp) = &t.tickpolicy {
        if TICKPOLICIES.contains(&tp.as_str()) && t.name != "kvmclock" && t.name != "hypervclock" {
            x = x.attr("tickpolicy", tp);
        }
    }
    if !t.present {
        // a timer turned off needs nothing else: the whole element is ours
        return x.attr("present", "no");
    }
    if t.tickpolicy.is_none() {
        x = x.attr("present", "yes");
    }
    // the domain's `track`, `frequency`, `mode` and `<catchup>` stay; a `present='no'` turns
    // to yes
    x.override_attr("present", "yes").keep_attrs(true)
}

/// `<cpu><numa>`: the plan's guest cells when it shows the guest more than one. A domain
/// that has its own `<numa>` keeps one even for a single cell, and a domain with
/// `<maxMemory>` gets one (libvirt hotplugs memory into a cell). Where the plan's cells are
/// the domain's, each keeps its attributes, `<distances>` and `<cache>`s and the
/// `<interconnects>` stay; where they are not (a one-node host folds several cells into
/// one), every cell takes [`plan::folded_cell_attrs`] — `memAccess='shared'` of any cell,
/// the shared memory vhost-user and virtiofs need — and the HMAT `<interconnects>`, which
/// name the old cells and their caches, go with them (`plan::adopt_domain` says so).
fn numa_element(plan: &Plan, info: Option<&DomainInfo>) -> Option<El> {
    let user = info.and_then(|i| i.numa_cells.as_deref());
    let hotplug = info.is_some_and(|i| i.max_memory);
    if !crate::guest_numa_exposed(plan) && user.is_none() && !hotplug {
        return None;
    }
    let mut cells: Vec<(u32, CpuSet, u64)> = plan
        .guest_numa
        .iter()
        .map(|c| (c.cell, c.vcpus.clone(), c.memory_bytes))
        .collect();
    if cells.is_empty() {
        let n = u32::try_from(vcpu_count(plan)).unwrap_or(u32::MAX);
        cells.push((0, CpuSet::range(0, n), plan.request.memory_bytes));
    }
    let user = user.unwrap_or(&[]);
    let same_cells = plan::same_cells(&plan::guest_cell_ids(plan), user);
    let folded = plan::folded_cell_attrs(user);
    let mut numa = El::new("numa").merged().drops(&["cell"]);
    if !same_cells {
        numa = numa.drops(&["interconnects"]);
    }
    for (id, cpus, bytes) in cells {
        let mut cell = El::new("cell")
            .attr("id", id)
            .attr("cpus", cpus.to_list_string())
            .attr("memory", kib(bytes))
            .attr("unit", "KiB");
        let own = user.iter().find(|u| u.id == id);
        let attrs = match own {
            Some(o) if same_cells => &o.attrs,
            _ => &folded,
        };
        for (k, v) in attrs {
            cell = cell.attr(k, v);
        }
        if own.is_some() {
            cell = cell.keep_attrs(same_cells);
        }
        numa.push(cell);
    }
    Some(numa)
}

/// The plan's domain elements. `info` is the domain being patched (None for a fragment).
fn elements(plan: &Plan, info: Option<&DomainInfo>) -> Vec<El> {
    let mut out = memory_elements(plan, info);
    // <vcpu>, <vcpus>
    let n = vcpu_count(plan);
    out.push(El::new("vcpu").attr("placement", "static").text(n));
    if let Some(v) = vcpus_block(n, info) {
        out.push(v);
    }
    out.push(cputune_element(plan, info, n));
    if let Some(nt) = numatune_element(plan) {
        out.push(nt);
    }
    out.push(features_element(plan, info));
    out.push(cpu_element(plan, info));
    if let Some(c) = clock_element(plan, info) {
        out.push(c);
    }
    out
}

/// `<memory>`, `<currentMemory>` and `<memoryBacking>`.
fn memory_elements(plan: &Plan, info: Option<&DomainInfo>) -> Vec<El> {
    let mut out = Vec::new();
    // in KiB, or in the domain's own unit when it already says the plan's size
    let bytes = plan.request.memory_bytes;
    let memory = |name: &str, had: Option<&(u64, Option<String>, String)>| match had {
        Some((b, unit, text)) if *b == bytes => {
            let mut e = El::new(name);
            if let Some(u) = unit {
                e = e.attr("unit", u);
            }
            e.text(text)
        }
        _ => El::new(name).attr("unit", "KiB").text(kib(bytes)),
    };
    out.push(memory("memory", info.and_then(|i| i.memory.as_ref())));
    out.push(memory(
        "currentMemory",
        info.and_then(|i| i.current_memory.as_ref()),
    ));

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
    out
}

/// `<cputune>`: a pin per vCPU, the emulator's and each iothread's (`n` vCPUs).
fn cputune_element(plan: &Plan, info: Option<&DomainInfo>, n: usize) -> El {
    let ids = iothread_ids(info);
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
    ct
}

/// `<numatune>`: the memory's host nodes, and each exposed guest cell's; none when unbound.
fn numatune_element(plan: &Plan) -> Option<El> {
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
        return Some(nt);
    }
    None
}

/// `<features>`: ACPI and APIC where absent, Hyper-V, a hidden KVM signature.
fn features_element(plan: &Plan, info: Option<&DomainInfo>) -> El {
    let mut f = El::new("features").merged();
    f.order = FEATURES_ORDER;
    f.push(El::new("acpi").soft());
    f.push(El::new("apic").soft());
    if let Some((h, unknown)) = hyperv_element(plan) {
        f.push(h);
        // said in a fragment; a patch adds no comment (it would pile up on every patch)
        if info.is_none() {
            for u in &unknown {
                f.comment(format!(
                    "vmtune: unknown Hyper-V enlightenment {u:?} left out"
                ));
            }
        }
    }
    if plan.cpu_features.kvm_hidden {
        f.push(
            El::new("kvm")
                .merged()
                .kid(El::new("hidden").attr("state", "on").soft()),
        );
    }
    f
}

/// `<cpu>`: host-passthrough (a TCG domain's own mode), the guest topology, invtsc, the
/// hypervisor bit and the guest NUMA cells.
fn cpu_element(plan: &Plan, info: Option<&DomainInfo>) -> El {
    let t = &plan.guest_topology;
    let mut cpu = if info.is_some_and(|i| i.emulated) {
        // TCG: the domain's own CPU mode and model stay (libvirt refuses host-passthrough
        // for type='qemu')
        El::new("cpu")
            .merged()
            .keep_start()
            .drops(&["topology", "numa"])
    } else {
        El::new("cpu")
            .attr("mode", "host-passthrough")
            .attr("check", "none")
            .attr("migratable", "off")
            .merged()
            .drops(&["model", "vendor", "topology", "numa"])
    };
    cpu.order = CPU_ORDER;
    cpu.push(
        El::new("topology")
            .attr("sockets", t.sockets.max(1))
            .attr("dies", t.dies.max(1))
            .attr("cores", t.cores.max(1))
            .attr("threads", t.threads.max(1)),
    );
    if plan.cpu_features.invtsc || plan.cpu_features.invtsc_disabled {
        let policy = if plan.cpu_features.invtsc {
            "require"
        } else {
            "disable"
        };
        cpu.push(
            El::new("feature")
                .attr("policy", policy)
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
    if let Some(numa) = numa_element(plan, info) {
        cpu.push(numa);
    }
    cpu
}

/// `<clock>`: the plan's timers (Windows: RTC catch-up, PIT delay, no HPET — emulated in
/// QEMU userspace, the Windows 7 timer note — and the Hyper-V reference clock). A plan without
/// timers leaves the domain's clock alone (`None`).
fn clock_element(plan: &Plan, info: Option<&DomainInfo>) -> Option<El> {
    let timers = plan_timers(plan);
    if !timers.is_empty() {
        let offset = if is_windows(plan) { "localtime" } else { "utc" };
        let mut c = El::new("clock")
            .attr("offset", offset)
            .merged()
            .keep_start();
        for t in &timers {
            if !TIMERS.contains(&t.name.as_str()) {
                if info.is_none() {
                    c.comment(format!("vmtune: unknown timer {:?} left out", t.name));
                }
                continue;
            }
            c.push(timer_element(t));
        }
        return Some(c);
    }
    None
}

/// The `<vcpu>`, `<cputune>`, `<numatune>`, `<memoryBacking>`, `<cpu>` and `<features>`
/// elements for the plan (plus `<memory>` and `<clock>`), as an XML fragment to paste into a
/// `<domain>`.
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

/// What libvirt would refuse in the patched domain, said before writing it.
fn check_domain(plan: &Plan, dom: &plan::DomainChoices) -> Result<(), EmitError> {
    if plan.memory.hugepage_size_kb > 4 && dom.memory_source.as_deref() == Some("anonymous") {
        return Err(EmitError::Invalid(format!(
            "{} backs its memory with <source type='anonymous'/>, and libvirt refuses hugepages with it: plan with --hugepages none, or remove that <source> to use the plan's {} KiB pages",
            dom.source, plan.memory.hugepage_size_kb
        )));
    }
    if let Some(max) = dom.max_memory_bytes {
        let need = plan
            .request
            .memory_bytes
            .saturating_add(dom.memory_devices_bytes);
        if need > max {
            return Err(EmitError::Invalid(format!(
                "{} has <maxMemory> of {} KiB, less than the plan's {} KiB plus its {} KiB of <memory> devices: raise <maxMemory> (libvirt refuses a domain whose memory exceeds it)",
                dom.source,
                kib(max),
                kib(plan.request.memory_bytes),
                kib(dom.memory_devices_bytes)
            )));
        }
    }
    Ok(())
}

/// An existing domain patched with a plan.
#[derive(Debug, Clone)]
pub struct Patched {
    /// The whole domain, every byte the plan does not own unchanged.
    pub xml: String,
    /// The plan with the domain's CPU choices merged in ([`plan::adopt_domain`]): its
    /// `cpu_features` are what the patched domain says, its rationale and warnings say what
    /// was kept and what the plan overrode.
    pub plan: Plan,
}

/// Patch an existing domain XML: merge the domain's CPU choices into the plan
/// ([`plan::adopt_domain`]), replace the plan's elements (merging inside `<cputune>`, `<cpu>`,
/// `<features>`, `<memoryBacking>`, `<clock>` as the module docs say), insert the missing ones
/// where `virsh dumpxml` puts them, and leave every other byte identical — including whether
/// the file ends with a newline.
pub fn patch(xml: &str, plan: &Plan) -> Result<Patched, EmitError> {
    check_plan(plan)?;
    let choices = domain_choices(xml)?;
    let mut plan = plan.clone();
    plan::adopt_domain(&mut plan, &choices);
    let doc = parse_doc(xml)?;
    let root = doc.root_element();
    let info = DomainInfo::read(root);
    if info.emulated {
        emulated(&mut plan);
    }
    check_domain(&plan, &choices)?;

    let mut dom = El::new("domain").merged().keep_start();
    dom.order = DOMAIN_ORDER;
    dom.drops.push("numatune".into());
    for e in elements(&plan, Some(&info)) {
        dom.push(e);
    }
    let st = Style::detect(xml, &root);
    let patched = merge(xml, &root, &dom, &st, 0);
    let r = root.range();
    let mut out = String::with_capacity(xml.len() + patched.len());
    out.push_str(xml.get(..r.start).unwrap_or(""));
    out.push_str(&patched);
    out.push_str(xml.get(r.end..).unwrap_or(""));
    let out = retarget_memory_devices(&out, &plan)?;
    let out = locality::place_devices(&out, &plan)?;
    Ok(Patched { xml: out, plan })
}

/// `<devices><memory>` (DIMM, NVDIMM, virtio-mem) whose `<target><node>` names a guest cell
/// the plan's guest does not have move to the cell that cell's memory folds into
/// ([`plan::fold_target`]); libvirt refuses a memory device on a missing cell. Only the
/// number changes; `plan::adopt_domain` says it.
fn retarget_memory_devices(xml: &str, plan: &Plan) -> Result<String, EmitError> {
    let doc = parse_doc(xml)?;
    let Some(devices) = read::child(doc.root_element(), "devices") else {
        return Ok(xml.to_string());
    };
    let ids = plan::guest_cell_ids(plan);
    let mut edits = Vec::new();
    for m in read::children(devices, "memory") {
        let Some(node) = read::child(m, "target").and_then(|t| read::child(t, "node")) else {
            continue;
        };
        let Some(text) = node.first_child().filter(|t| t.is_text()) else {
            continue;
        };
        let Some(id) = text.text().and_then(|t| t.trim().parse::<u32>().ok()) else {
            continue;
        };
        if !ids.contains(&id) {
            edits.push(crate::xml::Edit {
                at: text.range(),
                text: plan::fold_target(&ids, id).to_string(),
            });
        }
    }
    Ok(crate::xml::apply_edits(xml, edits))
}

/// A `type='qemu'` domain runs under TCG: there is no host CPU to pass through and no
/// invariant TSC to expose, so the plan keeps the domain's CPU model and says so.
fn emulated(plan: &mut Plan) {
    plan.cpu_features.invtsc = false;
    plan.rationale
        .retain(|r| !r.contains("becomes host-passthrough"));
    plan.warnings
        .retain(|r| !r.contains("becomes host-passthrough"));
    plan.rationale.push(
        "the domain is type='qemu' (TCG, no KVM): its <cpu> mode and model are kept, and no invtsc is required — host-passthrough and invtsc need KVM".into(),
    );
}

/// [`patch`], the XML only.
pub fn patch_domain(xml: &str, plan: &Plan) -> Result<String, EmitError> {
    patch(xml, plan).map(|p| p.xml)
}

//! Guest CPU features and timers for the guest OS ([`choose`]), and how they merge with what an
//! existing domain already chose ([`adopt_domain`]).
//!
//! The plan owns placement; the user owns their guest's identity. So when a domain is given,
//! its Hyper-V settings (`vendor_id`, `mode='passthrough'`, `reenlightenment`, `evmcs`, `avic`,
//! `stimer` with `direct`, anything turned off), its hidden KVM signature and its hidden
//! hypervisor bit are kept; the plan only adds what the domain does not mention. Where the
//! plan must differ (a Windows 7 plan hides the hypervisor bit, the plan's timers replace the
//! domain's), a warning says so, and the rationale says what was kept.
//!
//! The features' sentences in the plan's "Why" list are born here, beside each choice:
//! [`choose`] writes them (invtsc, the guest OS's clock and enlightenments, the NVIDIA GPU's
//! hidden KVM signature and `vendor_id`) and `crate::rationale` puts them last; [`adopt_domain`]
//! later rewrites in place the lines a domain's choice replaces (those starting with
//! `WINDOWS_LINE`, `VENDOR_LINE`, `KVM_LINE`, `INVTSC_LINE`) and appends its own, each once.

use serde::{Deserialize, Serialize};
use topo::{CpuSet, Host};

use crate::fold::{self, DomainCell, DomainMemoryDevice, DomainNumatune, DomainPage};
use crate::memory::{human_bytes, page_name};
use crate::model::DeviceInfo;
use crate::{CpuFeatures, GuestOs, Plan, Timer};

/// Hyper-V enlightenments for Windows 8+/10/11 guests (libvirt `<hyperv>` element names), in
/// the order their prerequisites allow (each needs only ones before it).
pub const HYPERV_WINDOWS: &[&str] = &[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "synic",
    "stimer",
    "reset",
    "frequencies",
    "tlbflush",
    "ipi",
];

/// What each enlightenment needs (QEMU's docs/system/i386/hyperv.rst, "Requirements"): QEMU
/// refuses to start a guest that has one without the other. `stimer` also needs `hv-time`,
/// libvirt's `<timer name='hypervclock'>`, which the Windows plan always has.
const PREREQUISITES: &[(&str, &[&str])] = &[
    ("synic", &["vpindex"]),
    ("stimer", &["synic"]),
    ("stimer_direct", &["stimer"]),
    ("tlbflush", &["vpindex"]),
    ("tlbflush_extended", &["tlbflush"]),
    ("tlbflush_direct", &["vapic"]),
    ("ipi", &["vpindex"]),
    ("evmcs", &["vapic"]),
    ("avic", &["vapic"]),
];

/// `vendor_id` the plan sets when the domain has none and the guest gets an NVIDIA consumer
/// GPU (any 1–12 characters but `Microsoft Hv`).
pub const VENDOR_ID: &str = "vmtune";

/// First words of the Windows rationale line, which [`adopt_domain`] rewrites when the domain
/// hides the hypervisor bit.
const WINDOWS_LINE: &str = "Windows guest: Hyper-V enlightenments";
const VENDOR_LINE: &str = "Hyper-V vendor_id set to";
const KVM_LINE: &str = "KVM signature hidden:";

fn timer(name: &str, present: bool, tickpolicy: Option<&str>) -> Timer {
    Timer {
        name: name.into(),
        present,
        tickpolicy: tickpolicy.map(str::to_string),
    }
}

/// A passed-through NVIDIA GPU that presents itself as a VGA controller (class 0x0300:
/// GeForce, Quadro/RTX workstation cards). NVIDIA's data-centre parts are 3D controllers
/// (0x0302) and their drivers never refused to run in a VM.
fn nvidia_consumer_gpu(host: &Host, devices: &[DeviceInfo]) -> Option<String> {
    devices
        .iter()
        .find(|d| {
            host.pci(&d.bdf).is_some_and(|p| {
                p.vendor_id == Some(0x10de) && p.kind == topo::DeviceKind::Gpu && p.class == 0x0300
            })
        })
        .map(|d| d.bdf.clone())
}

pub fn choose(
    os: GuestOs,
    host: &Host,
    devices: &[DeviceInfo],
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> CpuFeatures {
    let mut f = CpuFeatures::default();
    if let Some(arch) = host
        .arch
        .as_deref()
        .filter(|_| host.is_x86() == Some(false))
    {
        // invtsc, Hyper-V, kvmclock, the RTC/PIT/HPET, the hypervisor CPUID bit and the KVM
        // signature are all x86: QEMU has none of them for another architecture
        rationale.push(format!(
            "no x86 CPU features or timers: the host is {arch}, and invtsc, Hyper-V enlightenments, kvmclock, RTC/PIT/HPET tick policies, the hypervisor CPUID bit and the KVM signature exist only on x86; the guest keeps its platform's own timers"
        ));
        if os != GuestOs::Linux {
            warnings.push(format!(
                "the {} guest gets none of the plan's Windows settings (Hyper-V enlightenments, Windows timers{}): they are x86 features and the host is {arch}",
                if os == GuestOs::Windows7 { "Windows 7" } else { "Windows" },
                if os == GuestOs::Windows7 { ", hidden hypervisor CPUID bit" } else { "" }
            ));
        }
        return f;
    }
    match host.tsc_stable {
        Some(true) => {
            f.invtsc = true;
            rationale.push(format!("{INVTSC_LINE}: the host TSC is stable (constant and nonstop), so the guest can use the TSC as its clocksource"));
        }
        Some(false) => rationale.push(
            "invtsc not exposed: the host TSC is not stable, the guest must not trust it".into(),
        ),
        None => rationale.push(
            "invtsc not exposed: the host model does not say whether the TSC is stable".into(),
        ),
    }
    let nvidia = nvidia_consumer_gpu(host, devices);
    let kvm_line = |bdf: &str| {
        format!("{KVM_LINE} the NVIDIA consumer GPU {bdf}'s Windows drivers before 465 stop with Code 43 when they see KVM")
    };
    match os {
        GuestOs::Linux => {
            f.timers = vec![timer("kvmclock", true, None)];
            rationale.push("Linux guest: kvmclock, no Hyper-V enlightenments".into());
        }
        GuestOs::Windows => {
            f.hyperv = HYPERV_WINDOWS.iter().map(|s| s.to_string()).collect();
            f.timers = vec![
                timer("rtc", true, Some("catchup")),
                timer("pit", true, Some("delay")),
                timer("hpet", false, None),
                timer("hypervclock", true, None),
            ];
            rationale.push(format!("{WINDOWS_LINE} and the Hyper-V reference clock (hypervclock); HPET off; the hypervisor CPUID bit stays visible (hiding it only helps Windows 7, the Windows 7 timer note)"));
            if let Some(bdf) = nvidia {
                f.kvm_hidden = true;
                rationale.push(kvm_line(&bdf));
                f.hyperv.push(format!("vendor_id={VENDOR_ID}"));
                rationale.push(format!("{VENDOR_LINE} '{VENDOR_ID}': the same drivers also stop when the Hyper-V vendor reads 'Microsoft Hv'"));
            }
        }
        GuestOs::Windows7 => {
            f.hide_hypervisor = true;
            f.timers = vec![
                timer("rtc", true, Some("catchup")),
                timer("pit", true, Some("delay")),
                timer("hpet", false, None),
            ];
            rationale.push("Windows 7 guest: hypervisor CPUID bit hidden so Windows 7 uses the TSC for QueryPerformanceCounter instead of the emulated ACPI PM timer (Windows 7 timer note: 12.52 ns vs 3,605 ns per read); no Hyper-V enlightenments, which Windows 7 cannot find with the bit hidden".into());
            if host.tsc_stable != Some(true) {
                warnings.push("Windows 7 with the hypervisor bit hidden relies on the TSC, but the host TSC is not known to be stable (Windows 7 timer note: may not work on `clocksource tsc unstable` systems)".into());
            }
            if let Some(bdf) = nvidia {
                f.kvm_hidden = true;
                rationale.push(kvm_line(&bdf));
            }
        }
    }
    f
}

/// What an existing VM definition already says about the guest CPU, Hyper-V and timers (read
/// from a libvirt domain by `emit::libvirt::domain_choices`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainChoices {
    /// Where the choices come from, for messages ("domain win10.xml").
    pub source: String,
    /// `<hyperv mode=…>`: `custom` or `passthrough`; `None` when there is no `<hyperv>`.
    pub hyperv_mode: Option<String>,
    /// `<hyperv>` children in document order (sub-elements as `stimer_direct`, …).
    pub hyperv: Vec<DomainEnlightenment>,
    /// `<cpu><feature name='hypervisor' policy=…/>`.
    pub hypervisor_policy: Option<String>,
    /// `<cpu><feature name='invtsc' policy=…/>`.
    #[serde(default)]
    pub invtsc_policy: Option<String>,
    /// `<features><kvm><hidden state=…/>`.
    pub kvm_hidden: Option<bool>,
    /// `<clock><timer>`s.
    pub timers: Vec<DomainTimer>,
    /// `<cpu mode=…>`.
    pub cpu_mode: Option<String>,
    /// `<vcpu>`'s count, its `current`, and the vCPUs `<vcpus>` disables.
    pub vcpus: Option<u32>,
    pub vcpus_current: Option<u32>,
    pub vcpus_offline: CpuSet,
    /// `<cpu migratable=…>` as written.
    #[serde(default)]
    pub cpu_migratable: Option<String>,
    /// `<memoryBacking><source type=…>`: `file`, `anonymous` or `memfd`.
    #[serde(default)]
    pub memory_source: Option<String>,
    /// The page size (KiB) of `<memoryBacking><hugepages>` (its `<page>` without a `nodeset`,
    /// else its first; the host's default, 2 MiB on x86, when it names none); `None` without
    /// `<hugepages>`.
    #[serde(default)]
    pub hugepage_size_kb: Option<u64>,
    /// How many guest NUMA cells `<cpu><numa>` shows the guest; `None` without one.
    #[serde(default)]
    pub guest_cells: Option<u32>,
    /// `<maxMemory>` in bytes: memory hotplug is on.
    #[serde(default)]
    pub max_memory_bytes: Option<u64>,
    /// Bytes of the domain's `<memory>` devices (DIMM, NVDIMM, virtio-mem …), which libvirt
    /// adds to the guest's NUMA cells.
    #[serde(default)]
    pub memory_devices_bytes: u64,
    /// QEMU options the domain passes itself in `<qemu:commandline>` that replace what
    /// libvirt writes from the plan's elements (`-cpu`, `-smp`, `-m`, `-numa`), with their
    /// values.
    #[serde(default)]
    pub qemu_overrides: Vec<(String, String)>,
    /// The cells of `<cpu><numa>` with the attributes the plan does not set; empty without
    /// one.
    #[serde(default)]
    pub cells: Vec<DomainCell>,
    /// `<cpu><numa><interconnects>` (HMAT latencies and bandwidths) is present.
    #[serde(default)]
    pub interconnects: bool,
    /// Every `<hugepages><page>`, in document order.
    #[serde(default)]
    pub hugepages: Vec<DomainPage>,
    /// `<devices><memory>` bound to a guest cell (`<target><node>`).
    #[serde(default)]
    pub memory_devices: Vec<DomainMemoryDevice>,
    /// `<numatune>`, when the domain has one.
    #[serde(default)]
    pub numatune: Option<DomainNumatune>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainEnlightenment {
    pub name: String,
    pub on: bool,
    /// `retries` of `<spinlocks>`, `value` of `<vendor_id>`.
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainTimer {
    pub name: String,
    /// `None`: the attribute is absent (the hypervisor's default).
    pub present: Option<bool>,
    pub tickpolicy: Option<String>,
}

/// Split `name=value`.
fn split(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (entry.trim(), None),
    }
}

fn spell(e: &DomainEnlightenment) -> String {
    match &e.value {
        Some(v) => format!("{}={v}", e.name),
        None => e.name.clone(),
    }
}

fn push_once(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// How the rationale's invtsc line starts (replaced when a domain keeps invtsc disabled).
const INVTSC_LINE: &str = "invtsc exposed";

fn replace_line(v: &mut [String], prefix: &str, new: String) {
    if let Some(l) = v.iter_mut().find(|l| l.starts_with(prefix)) {
        *l = new;
    }
}

/// A timer's settings as libvirt spells them.
fn timer_words(present: Option<bool>, tickpolicy: Option<&str>) -> String {
    let mut w = Vec::new();
    match present {
        Some(true) => w.push("present='yes'".to_string()),
        Some(false) => w.push("present='no'".to_string()),
        None => {}
    }
    if let Some(tp) = tickpolicy {
        w.push(format!("tickpolicy='{tp}'"));
    }
    if w.is_empty() {
        "the hypervisor's default".into()
    } else {
        w.join(" ")
    }
}

/// Merge what the domain chose into the plan's CPU features (see the module docs): the
/// domain's Hyper-V settings, KVM and hypervisor-bit choices are kept unless the plan must
/// change them; every change and every kept conflict is said in `rationale` or `warnings`.
/// Applying it twice changes nothing more.
pub fn adopt_domain(plan: &mut Plan, dom: &DomainChoices) {
    let mut a = Adoption::new(dom);
    a.offline_vcpus(plan);
    a.hypervisor_bit(plan);
    a.hyperv(plan);
    a.kvm_signature(plan);
    a.timers(plan);
    a.cpu_model();
    a.invtsc(plan);
    a.cpu_migratable(plan);
    a.page_size(plan);
    a.guest_cells(plan);
    a.memory_devices(plan);
    a.numatune(plan);
    a.qemu_overrides();
    a.finish(plan);
}

impl DomainChoices {
    /// The enlightenments the domain turns on, in its order.
    fn hyperv_on(&self) -> Vec<&DomainEnlightenment> {
        self.hyperv.iter().filter(|e| e.on).collect()
    }

    /// The enlightenments the domain turns off, in its order.
    fn hyperv_off(&self) -> Vec<String> {
        self.hyperv
            .iter()
            .filter(|e| !e.on)
            .map(|e| e.name.clone())
            .collect()
    }

    /// Whether the domain's `<hyperv>` mentions `name`, on or off.
    fn mentions(&self, name: &str) -> bool {
        self.hyperv.iter().any(|e| e.name == name)
    }
}

/// One merge of a domain's choices into a plan, step by step. Lines of the plan's rationale
/// that a choice replaces are rewritten at once; the sentences it adds are gathered here and
/// added at the end, each only if the plan does not have it yet.
struct Adoption<'a> {
    dom: &'a DomainChoices,
    /// How the sentences name the domain.
    src: String,
    rationale: Vec<String>,
    warnings: Vec<String>,
}

impl<'a> Adoption<'a> {
    fn new(dom: &'a DomainChoices) -> Self {
        let src = if dom.source.is_empty() {
            "the domain".to_string()
        } else {
            dom.source.clone()
        };
        Adoption {
            dom,
            src,
            rationale: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// vCPUs the domain kept offline come online.
    fn offline_vcpus(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        let n = if plan.vcpus.is_empty() {
            plan.request.vcpus
        } else {
            u32::try_from(plan.vcpus.len()).unwrap_or(u32::MAX)
        };
        let Some(max) = dom.vcpus else { return };
        let offline = &dom.vcpus_offline;
        let current = dom.vcpus_current.unwrap_or(max);
        if current < max || !offline.is_empty() {
            let how = match (current < max, offline.is_empty()) {
                (true, false) => format!("current='{current}', <vcpus> disables {offline}"),
                (true, true) => format!("current='{current}'"),
                _ => format!("<vcpus> disables {offline}"),
            };
            let online = if offline.is_empty() {
                current
            } else {
                max.saturating_sub(u32::try_from(offline.len()).unwrap_or(u32::MAX))
            };
            self.warnings.push(format!(
                "{src} starts {online} of its {max} vCPUs ({how}); the patched domain starts all {n} of the plan's vCPUs, each pinned"
            ));
            self.rationale.push(format!(
                "all {n} vCPUs start, each pinned to its own host CPU: {src}'s offline vCPUs ({how}) would leave pinned host CPUs idle"
            ));
        }
    }

    /// The hypervisor CPUID bit: the Windows 7 plan hides it whatever the domain requires; a
    /// domain that hides it keeps it hidden, and a Windows guest then gets no enlightenments.
    fn hypervisor_bit(&mut self, plan: &mut Plan) {
        let (dom, src) = (self.dom, &self.src);
        let f = &mut plan.cpu_features;
        let windows = plan.request.os == GuestOs::Windows;
        let user_hides = matches!(dom.hypervisor_policy.as_deref(), Some("disable" | "forbid"));
        let user_requires = matches!(dom.hypervisor_policy.as_deref(), Some("require" | "force"));
        if f.hide_hypervisor && user_requires {
            self.warnings.push(format!(
                "{src} requires the hypervisor CPUID bit; the Windows 7 plan hides it (Windows 7 timer note: Windows 7 then uses the TSC instead of the emulated ACPI PM timer), so that <feature> is replaced"
            ));
            self.rationale.push(format!(
                "hypervisor CPUID bit hidden although {src} requires it: the Windows 7 timer fix needs it hidden"
            ));
        }
        if !f.hide_hypervisor && user_hides {
            f.hide_hypervisor = true;
            if windows {
                // Enlightenments and the Hyper-V clock live behind the bit: keep the user's
                // choice (anti-cheat setups need it) and add nothing the guest cannot see.
                f.hyperv.clear();
                f.timers.retain(|t| t.name != "hypervclock");
                self.warnings.push(format!(
                    "{src} hides the hypervisor CPUID bit (<feature policy='disable' name='hypervisor'/>, as anti-cheat setups do): Windows cannot see Hyper-V enlightenments or the Hyper-V clock without it, so the plan keeps the bit hidden and adds none of its own; the domain's own <hyperv> settings stay as written but are inactive. Remove that <feature> line to let Windows use the enlightenments"
                ));
                replace_line(
                    &mut plan.rationale,
                    WINDOWS_LINE,
                    format!("Windows guest: the hypervisor CPUID bit stays hidden as {src} has it, so no Hyper-V enlightenments or Hyper-V clock (Windows cannot see them without the bit); HPET off"),
                );
                replace_line(
                    &mut plan.rationale,
                    VENDOR_LINE,
                    "Hyper-V vendor_id not set: with the hypervisor bit hidden no driver reads it"
                        .into(),
                );
            } else {
                self.rationale.push(format!(
                    "hypervisor CPUID bit hidden, as {src} has it (<feature policy='disable' name='hypervisor'/>)"
                ));
            }
        }
        let f = &plan.cpu_features;
        if f.hide_hypervisor && dom.hyperv.iter().any(|e| e.on) && !user_hides {
            self.warnings.push(format!(
                "the plan hides the hypervisor CPUID bit for Windows 7: {src}'s <hyperv> settings stay as written, but Windows 7 cannot see them"
            ));
            self.rationale.push(format!(
                "Hyper-V: {src}'s <hyperv> settings kept as written, inactive with the hypervisor bit hidden"
            ));
        }
    }

    /// Hyper-V: the domain's settings first, the plan's where the domain says nothing; then
    /// the domain's own prerequisite conflicts.
    fn hyperv(&mut self, plan: &mut Plan) {
        if self.dom.hyperv_mode.as_deref() == Some("passthrough") {
            self.hyperv_passthrough(plan);
        } else if self.dom.hyperv_mode.is_some() {
            self.hyperv_custom(plan);
        }
        if !plan.cpu_features.hyperv_passthrough {
            self.prerequisite_conflicts();
        }
    }

    /// `<hyperv mode='passthrough'>` is kept, with the domain's own settings.
    fn hyperv_passthrough(&mut self, plan: &mut Plan) {
        let (dom, src) = (self.dom, &self.src);
        let f = &mut plan.cpu_features;
        if !dom.mentions("vendor_id") {
            replace_line(
                &mut plan.rationale,
                VENDOR_LINE,
                "Hyper-V vendor_id not set: with <hyperv mode='passthrough'> the guest reads KVM's own vendor ('Linux KVM Hv'), not 'Microsoft Hv'".into(),
            );
        }
        f.hyperv_passthrough = true;
        f.hyperv = dom.hyperv_on().iter().map(|e| spell(e)).collect();
        f.hyperv_off = dom.hyperv_off();
        if !f.hide_hypervisor {
            self.rationale.push(format!(
                "Hyper-V: {src}'s <hyperv mode='passthrough'> is kept: it gives the guest every enlightenment the host supports, a superset of the plan's{}",
                if f.hyperv.is_empty() {
                    String::new()
                } else {
                    format!(", with its own {}", f.hyperv.join(", "))
                }
            ));
        }
    }

    /// A custom `<hyperv>`: the domain's settings, then each of the plan's the domain does
    /// not mention and whose prerequisites are on.
    fn hyperv_custom(&mut self, plan: &mut Plan) {
        let (dom, src) = (self.dom, &self.src);
        let f = &mut plan.cpu_features;
        let user_on = dom.hyperv_on();
        let user_off = dom.hyperv_off();
        let plan_wants: Vec<String> = if f.hide_hypervisor {
            Vec::new()
        } else {
            f.hyperv.clone()
        };
        let mut merged: Vec<String> = user_on.iter().map(|e| spell(e)).collect();
        let on = |merged: &[String], name: &str| merged.iter().any(|m| split(m).0 == name);
        let mut kept = Vec::new();
        for want in &plan_wants {
            let (name, value) = split(want);
            if let Some(u) = dom.hyperv.iter().find(|e| e.name == name) {
                if !u.on {
                    self.rationale.push(format!(
                        "Hyper-V {name} stays off as {src} has it (the plan would turn it on)"
                    ));
                } else if name == "vendor_id" {
                    let v = u.value.as_deref().unwrap_or("");
                    replace_line(
                        &mut plan.rationale,
                        VENDOR_LINE,
                        format!("Hyper-V vendor_id '{v}' kept from {src} (it already keeps NVIDIA's drivers before 465 from stopping with Code 43)"),
                    );
                } else if value.is_some() && u.value.as_deref() != value {
                    kept.push(spell(u));
                }
                continue;
            }
            // prerequisites come first in the plan's order, so one not on by now stays off
            if let Some(missing) = prerequisites(name).iter().find(|r| !on(&merged, r)) {
                let why = if dom.mentions(missing) {
                    format!("{src} turns off {missing}")
                } else {
                    format!("{missing} is left out")
                };
                self.rationale.push(format!(
                    "Hyper-V {name} not added: {why}, and QEMU refuses {name} without it"
                ));
                continue;
            }
            merged.push(want.clone());
        }
        let added: Vec<&String> = merged
            .iter()
            .filter(|m| !dom.mentions(split(m).0))
            .collect();
        let user_names: Vec<String> = user_on.iter().map(|e| spell(e)).collect();
        if !user_names.is_empty() {
            self.rationale.push(format!(
                "Hyper-V: {src}'s settings kept ({}{}){}",
                user_names.join(", "),
                if user_off.is_empty() {
                    String::new()
                } else {
                    format!("; off: {}", user_off.join(", "))
                },
                if added.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; the plan adds {}",
                        added
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
        if !kept.is_empty() {
            self.rationale.push(format!(
                "Hyper-V values from {src} kept over the plan's: {}",
                kept.join(", ")
            ));
        }
        f.hyperv = merged;
        f.hyperv_off = user_off;
    }

    /// The domain's own prerequisite conflicts: QEMU would refuse to start it anyway.
    fn prerequisite_conflicts(&mut self) {
        let (dom, src) = (self.dom, &self.src);
        for e in dom.hyperv_on() {
            for r in prerequisites(&e.name) {
                if dom.hyperv.iter().any(|x| x.name == *r && !x.on) {
                    self.warnings.push(format!(
                        "{src} enables Hyper-V {} but turns off {r}, which it needs: QEMU refuses to start such a guest",
                        e.name
                    ));
                }
            }
        }
    }

    /// The KVM signature: hidden or visible as the domain has it.
    fn kvm_signature(&mut self, plan: &mut Plan) {
        let (dom, src) = (self.dom, &self.src);
        let f = &mut plan.cpu_features;
        match (dom.kvm_hidden, f.kvm_hidden) {
            (Some(false), true) => {
                f.kvm_hidden = false;
                replace_line(
                    &mut plan.rationale,
                    KVM_LINE,
                    format!("KVM signature left visible as {src} has it (<hidden state='off'/>): NVIDIA's Windows drivers since 465 run under KVM; older ones stop with Code 43"),
                );
            }
            (Some(true), false) => {
                f.kvm_hidden = true;
                self.rationale
                    .push(format!("KVM signature hidden, as {src} has it"));
            }
            _ => {}
        }
    }

    /// Timers: the plan's replace the domain's timers of the same name.
    fn timers(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        let mut replaced = Vec::new();
        for t in &plan.cpu_features.timers {
            let Some(u) = dom.timers.iter().find(|u| u.name == t.name) else {
                continue;
            };
            let differs = u.present.is_some_and(|p| p != t.present)
                || (u.tickpolicy.is_some() && u.tickpolicy != t.tickpolicy && t.present);
            if differs {
                let why = match (t.name.as_str(), t.present) {
                    ("hpet", false) => ": HPET is emulated in QEMU userspace, each read a VM exit (Windows 7 timer note: 3,605 ns per read of an emulated timer vs 12.52 ns for the TSC)",
                    ("hypervclock", true) => ": the Hyper-V reference clock lets Windows read time without a VM exit",
                    ("kvmclock", true) => ": Linux keeps time with kvmclock without a VM exit",
                    ("rtc", true) => ": Windows counts RTC ticks for time of day, so missed ticks are caught up",
                    ("pit", true) => ": missed PIT ticks are delivered late rather than in a burst",
                    _ => "",
                };
                self.warnings.push(format!(
                    "timer {}: the plan sets {} where {src} had {}{why}",
                    t.name,
                    timer_words(Some(t.present), t.tickpolicy.as_deref()),
                    timer_words(u.present, u.tickpolicy.as_deref())
                ));
                replaced.push(t.name.clone());
            }
        }
        if !replaced.is_empty() {
            self.rationale.push(format!(
                "timers {} set as the plan chose them, not as {src} had them (see the warnings)",
                replaced.join(", ")
            ));
        }
    }

    /// The CPU model becomes host-passthrough.
    fn cpu_model(&mut self) {
        let (dom, src) = (self.dom, &self.src);
        if let Some(mode) = dom.cpu_mode.as_deref().filter(|m| *m != "host-passthrough") {
            let line = format!(
                "CPU mode '{mode}' of {src} becomes host-passthrough: pinned VFIO guests do not migrate, and the guest sees the host's real CPU (caches, invtsc)"
            );
            // said on stderr like every other override (host-model and maximum too: the
            // guest's CPUID changes)
            self.warnings.push(line.clone());
            self.rationale.push(line);
        }
    }

    /// invtsc: a domain that disables it keeps it disabled (its user chose a migratable TSC
    /// or distrusts this host's); one that requires it where the host TSC is not stable is
    /// overridden, saying so.
    fn invtsc(&mut self, plan: &mut Plan) {
        let (dom, src) = (self.dom, &self.src);
        let invtsc = dom.invtsc_policy.as_deref().map(str::trim);
        if matches!(invtsc, Some("disable" | "forbid")) {
            let f = &mut plan.cpu_features;
            if f.invtsc {
                f.invtsc = false;
                replace_line(
                    &mut plan.rationale,
                    INVTSC_LINE,
                    format!("invtsc stays disabled as {src} has it (<feature policy='{}' name='invtsc'/>), although the host TSC is stable: the guest will not use the TSC as its clocksource (remove that line to let it)", invtsc.unwrap_or("disable")),
                );
            }
            f.invtsc_disabled = true;
        } else if matches!(invtsc, Some("require" | "force")) && !plan.cpu_features.invtsc {
            self.warnings.push(format!(
                "{src} requires invtsc; the plan leaves it out (see the rationale: the host TSC is not known to be stable), so that <feature> is removed"
            ));
        }
    }

    /// A migratable CPU becomes non-migratable.
    fn cpu_migratable(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        if dom.cpu_migratable.as_deref().map(str::trim) == Some("on") {
            let why = if plan.cpu_features.invtsc {
                "the guest gets invtsc, which blocks migration, and "
            } else {
                ""
            };
            self.rationale.push(format!(
                "CPU migratable='on' of {src} becomes 'off': {why}a VM with pinned vCPUs and passed-through devices does not migrate"
            ));
        }
    }

    /// The domain's page size, where the plan chose another.
    fn page_size(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        if !dom.hugepages.is_empty() {
            self.warnings
                .extend(fold::page_warnings(plan, &dom.hugepages, src));
            return;
        }
        let Some(theirs) = dom.hugepage_size_kb else {
            return;
        };
        let ours = plan.memory.hugepage_size_kb;
        if theirs != ours {
            let ask = match theirs {
                crate::memory::KB_1G => " (--hugepages 1G asks for theirs)",
                crate::memory::KB_2M => " (--hugepages 2M asks for theirs)",
                _ => "",
            };
            self.warnings.push(format!(
                "{src} backs its memory with {} pages (<hugepages>); the plan uses {}, as the rationale says{ask}",
                page_name(theirs),
                page_name(ours)
            ));
        }
    }

    /// A guest NUMA layout of several cells the plan replaces with another: the guest's
    /// vCPUs and memory are split as the plan's cells, which the user must hear (KubeVirt and
    /// Nova write one cell per host node they placed the VM on).
    fn guest_cells(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        self.warnings
            .extend(fold::cell_warnings(plan, &dom.cells, src));
        self.warnings.extend(fold::interconnect_warning(
            plan,
            &dom.cells,
            dom.interconnects,
            src,
        ));
        let Some(theirs) = dom.guest_cells.filter(|n| *n > 1) else {
            return;
        };
        let ours = plan.guest_numa.len().max(1);
        if usize::try_from(theirs).is_ok_and(|t| t != ours) {
            let cells = |n: usize| {
                if n == 1 {
                    "1 cell".to_string()
                } else {
                    format!("{n} cells")
                }
            };
            self.warnings.push(format!(
                "{src} has {theirs} guest NUMA cells (<cpu><numa>); the plan's <cpu><numa> and <numatune> show the guest {} instead, as the rationale says (guest NUMA follows the host nodes the plan places the VM on)",
                cells(ours)
            ));
        }
    }

    /// Memory hotplug: the domain's `<memory>` devices come on top of the plan's memory.
    fn memory_devices(&mut self, plan: &Plan) {
        let (dom, src) = (self.dom, &self.src);
        self.warnings
            .extend(fold::memory_device_warnings(plan, &dom.memory_devices, src));
        if dom.memory_devices_bytes > 0 {
            let total = plan
                .request
                .memory_bytes
                .saturating_add(dom.memory_devices_bytes);
            self.warnings.push(format!(
                "{src} has {} of <memory> devices (DIMM, virtio-mem …) besides its NUMA cells: libvirt adds them, so the guest has {} with them attached, while the plan places and backs {}",
                human_bytes(dom.memory_devices_bytes),
                human_bytes(total),
                human_bytes(plan.request.memory_bytes)
            ));
        }
    }

    /// `<numatune>`: the plan's replaces the domain's; a mode, placement or `<memnode>` it
    /// does not keep is said.
    fn numatune(&mut self, plan: &Plan) {
        if let Some(nt) = &self.dom.numatune {
            let w = fold::numatune_warnings(plan, nt, &self.src);
            self.warnings.extend(w);
        }
    }

    /// `<qemu:commandline>` options that replace what libvirt writes from the plan.
    fn qemu_overrides(&mut self) {
        let (dom, src) = (self.dom, &self.src);
        for (opt, value) in &dom.qemu_overrides {
            let effect = match opt.trim_start_matches('-') {
                "cpu" => format!("QEMU takes the last {opt} it is given, so this replaces the <cpu> and <hyperv> settings libvirt writes from the plan (topology, invtsc, enlightenments, vendor_id, hidden KVM); fold its flags into <cpu> and <features> instead"),
                "smp" => format!("QEMU takes the last {opt} it is given, so this replaces the vCPU count and guest topology of the plan's <vcpu> and <cpu><topology>, which its pins follow"),
                "m" => format!("QEMU takes the last {opt} it is given, so this replaces the plan's <memory>"),
                _ => "QEMU adds it to the guest NUMA nodes libvirt writes from the plan's <cpu><numa>".to_string(),
            };
            self.warnings.push(format!(
                "{src} passes `{opt} {value}` in <qemu:commandline>: {effect}"
            ));
        }
    }

    /// Add the gathered sentences, each only if the plan does not have it yet.
    fn finish(self, plan: &mut Plan) {
        for r in self.rationale {
            push_once(&mut plan.rationale, r);
        }
        for w in self.warnings {
            push_once(&mut plan.warnings, w);
        }
    }
}

/// The enlightenments `name` needs ([`PREREQUISITES`]).
fn prerequisites(name: &str) -> &'static [&'static str] {
    PREREQUISITES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HugepagePolicy, Profile, Request};

    fn windows_plan() -> Plan {
        let host = topo::builtin::default_host();
        let req = Request {
            name: Some("win".into()),
            vcpus: 4,
            memory_bytes: 4 << 30,
            devices: vec!["01:00.0".into()],
            profile: Profile::Gaming,
            os: GuestOs::Windows,
            hugepages: HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
            threads: crate::ThreadPolicy::Auto,
        };
        crate::plan(&req, &host, &[]).unwrap()
    }

    fn en(name: &str, on: bool, value: Option<&str>) -> DomainEnlightenment {
        DomainEnlightenment {
            name: name.into(),
            on,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn nvidia_consumer_gpu_gets_vendor_id_and_hidden_kvm() {
        let p = windows_plan();
        assert!(p
            .cpu_features
            .hyperv
            .contains(&"vendor_id=vmtune".to_string()));
        assert!(p.cpu_features.kvm_hidden);
        assert!(p.rationale.iter().any(|r| r.starts_with(VENDOR_LINE)));
    }

    #[test]
    fn users_hyperv_is_kept_and_the_plan_fills_in() {
        let mut p = windows_plan();
        let dom = DomainChoices {
            source: "domain g.xml".into(),
            hyperv_mode: Some("custom".into()),
            hyperv: vec![
                en("relaxed", true, None),
                en("spinlocks", true, Some("4095")),
                en("vendor_id", true, Some("banana")),
                en("reset", false, None),
                en("evmcs", true, None),
                en("stimer_direct", true, None),
            ],
            ..Default::default()
        };
        adopt_domain(&mut p, &dom);
        let hv = &p.cpu_features.hyperv;
        for want in [
            "spinlocks=4095",
            "vendor_id=banana",
            "evmcs",
            "stimer_direct",
            "vapic",
        ] {
            assert!(hv.contains(&want.to_string()), "{want}: {hv:?}");
        }
        assert!(!hv.iter().any(|h| h == "reset" || h == "vendor_id=vmtune"));
        assert_eq!(p.cpu_features.hyperv_off, vec!["reset".to_string()]);
        assert!(p.rationale.iter().any(|r| r.contains("'banana' kept")));
        // idempotent
        let once = p.clone();
        adopt_domain(&mut p, &dom);
        assert_eq!(p, once);
    }

    #[test]
    fn prerequisites_the_user_turned_off_block_the_plans_additions() {
        let mut p = windows_plan();
        let dom = DomainChoices {
            hyperv_mode: Some("custom".into()),
            hyperv: vec![en("vpindex", false, None)],
            ..Default::default()
        };
        adopt_domain(&mut p, &dom);
        let hv = &p.cpu_features.hyperv;
        for gone in ["synic", "stimer", "tlbflush", "ipi"] {
            assert!(!hv.contains(&gone.to_string()), "{gone}: {hv:?}");
        }
        assert!(hv.contains(&"relaxed".to_string()));
    }

    #[test]
    fn hidden_hypervisor_bit_is_kept_with_a_warning() {
        let mut p = windows_plan();
        let dom = DomainChoices {
            hyperv_mode: Some("custom".into()),
            hyperv: vec![en("relaxed", true, None)],
            hypervisor_policy: Some("disable".into()),
            ..Default::default()
        };
        adopt_domain(&mut p, &dom);
        assert!(p.cpu_features.hide_hypervisor);
        assert_eq!(p.cpu_features.hyperv, vec!["relaxed".to_string()]);
        assert!(!p
            .cpu_features
            .timers
            .iter()
            .any(|t| t.name == "hypervclock"));
        assert!(p.warnings.iter().any(|w| w.contains("anti-cheat")));
        assert!(!p.rationale.iter().any(|r| r.contains("stays visible")));
    }

    #[test]
    fn passthrough_and_offline_vcpus() {
        let mut p = windows_plan();
        let dom = DomainChoices {
            hyperv_mode: Some("passthrough".into()),
            hyperv: vec![en("vendor_id", true, Some("ASRock"))],
            kvm_hidden: Some(false),
            vcpus: Some(12),
            vcpus_current: Some(8),
            vcpus_offline: CpuSet::parse_list("4-7").unwrap(),
            timers: vec![DomainTimer {
                name: "hpet".into(),
                present: Some(true),
                tickpolicy: None,
            }],
            ..Default::default()
        };
        adopt_domain(&mut p, &dom);
        let f = &p.cpu_features;
        assert!(f.hyperv_passthrough);
        assert_eq!(f.hyperv, vec!["vendor_id=ASRock".to_string()]);
        assert!(!f.kvm_hidden);
        assert!(p.warnings.iter().any(|w| w.contains("starts 8 of its 12")));
        assert!(p.warnings.iter().any(|w| w.starts_with("timer hpet")));
    }
}

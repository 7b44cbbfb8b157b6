//! Kata Containers: a `configuration.toml` drop-in, pod annotations and the pod's resources.
//!
//! # How Kata and Kubernetes count a VM's memory
//!
//! Read from the sources (kata-containers/kata-containers at 7c6ba40c, Kubernetes' kubelet);
//! `crates/emit/tests/consumers.rs` holds the same rules as a table and checks every emitted
//! Pod against it:
//!
//! 1. **Kata sizes the VM from `default_memory` and the memory limits only.** With
//!    `static_sandbox_resource_mgmt = true` (the GPU classes' default: everything at boot, no
//!    hotplug, which matters with VFIO) the Go runtime starts the VM with `default_memory` +
//!    the pod's memory limits (`oci.SandboxConfig`: `MemorySize += WorkloadMemMB`, from
//!    `CalculateSandboxSizing`/`CalculateContainerSizing`, which read `Memory.Limit` and
//!    nothing else); runtime-rs with `overhead_memory` + the memory limits
//!    (`InitialSizeManager`). A `hugepages-<size>` limit adds no guest RAM in this mode (only
//!    the hotplug path, `calculateSandboxMemory`, adds it, for hugetlbfs volumes *inside* the
//!    guest). vCPUs: `default_vcpus` + the CPU limits.
//! 2. **The hugepages resource must cover all of the guest RAM.** With `enable_hugepages`,
//!    QEMU backs the whole guest RAM with the hugetlbfs at `/dev/hugepages`; the GPU classes
//!    run QEMU inside the pod's cgroup (`sandbox_cgroup_only = true`), and the kubelet caps
//!    the pod's hugetlb usage at its `hugepages-<size>` requests (0 for a size not
//!    requested). Fewer pages than the guest RAM and QEMU cannot preallocate it (the Kata GPU
//!    boot study's pods ask for `hugepages-1Gi` for this reason).
//! 3. **The scheduler counts memory and hugepages apart.** The kubelet takes the
//!    pre-allocated hugepages out of the node's allocatable memory, so a pod's `memory` and
//!    `hugepages-<size>` requests are reserved from disjoint pools.
//! 4. **A container's memory limit is also its ceiling inside the guest.** Kata passes
//!    `Linux.Resources.Memory` to the agent, which sets it on the container's cgroup in the
//!    guest.
//! 5. **4 KiB guest RAM is ordinary memory of the pod.** Without hugepages, QEMU's guest RAM
//!    is charged to the pod's memory cgroup, whose limit is the memory limits plus the runtime
//!    class's `overhead.podFixed.memory`.
//!
//! So a hugepage-backed guest whose RAM came from the memory limit (as the Kata GPU boot
//! study's pod does: `memory: 100Gi` and `hugepages-1Gi: 125Gi` for a 110 GiB VM) is reserved
//! twice: once as hugepages, which it uses, and once as memory, which it does not (rule 3).
//! On today's Kata no Pod avoids that and still lets the workload use the guest's RAM
//! (kata-containers issue 13561): the memory limit is both added to the guest and the
//! container's ceiling in it (rule 4). vmtune sizes the guest as Kata's floor in
//! `default_memory` plus the container's limit, and asks for exactly the guest's pages: by
//! default the container may use all of the guest's RAM but that floor, and the scheduler
//! reserves the RAM about twice (as hugepages and as memory), which the Pod says. A workload
//! known to need less can be given a lower ceiling
//! ([`KataOptions::container_memory_mib`], `--kata-container-memory`): the VM keeps the
//! plan's size (the rest moves to `default_memory`, which the scheduler does not see) and
//! the double reservation shrinks to that ceiling — down to [`MIN_CONTAINER_MEMORY_MIB`],
//! the RAM reserved once. A ceiling is never chosen silently below the guest: a container
//! killed by the guest's OOM killer inside a running VM is a worse surprise than a
//! reservation the Pod states.
//!
//! A 4 KiB guest's RAM is ordinary memory (rule 5): the memory limit carries all of it but
//! `default_memory`, which is kept at Kata's floor ([`KATA_MIN_MEMORY_MIB`]) since the runtime
//! class's overhead must hold it besides QEMU itself; the Pod says so.
//!
//! vCPUs: the base is 0 (the `default_vcpus` annotation; `overhead_vcpus` for runtime-rs)
//! and the container asks for all of them as a whole-CPU limit. The pod is Guaranteed
//! (requests = limits for CPU and memory), so the kubelet's static CPU manager gives it
//! exactly that many exclusive CPUs, and `enable_vcpus_pinning` pins vCPU *n* to the *n*th
//! of them — Kata pins only when the vCPU count equals the cpuset's size.
//!
//! What Kata cannot be told: which host CPUs. To put the vCPUs on the plan's CPUs exactly,
//! run `vmtune apply PLAN.json --pid QEMU_PID` after the start. Kata always backs hugepage
//! RAM with the hugetlbfs at `/dev/hugepages`, so for 1 GiB pages that mount (the kernel's
//! `default_hugepagesz`) must be 1 GiB, as on the Kata GPU boot study host.
//!
//! The TOML is a drop-in (`config.d/` beside the runtime's configuration file, which both
//! runtimes read after it): only the keys listed change. A drop-in replaces arrays whole, so
//! `enable_annotations` repeats the distribution's list ([`DISTRIBUTION_ANNOTATIONS`]) and
//! adds the plan's.

use std::fmt::Write as _;

use serde::Serialize;

use plan::Plan;

use crate::features::vcpu_count;
use crate::hugepage_quantity;

/// Annotation prefix of Kata's per-pod hypervisor settings.
pub const ANNOTATION_PREFIX: &str = "io.katacontainers.config.hypervisor.";

/// The Go runtime's floor for `default_memory` (`vc.MinHypervisorMemory`), MiB: a configured
/// value below it becomes 2048, an annotation below it is refused.
pub const KATA_MIN_MEMORY_MIB: u64 = 256;
/// runtime-rs's floor for the `default_memory` annotation (`MIN_QEMU_MEMORY_SIZE_MB`), MiB.
pub const KATA_RS_MIN_MEMORY_MIB: u64 = 64;
/// vmtune's floor for the container's memory limit, MiB: a Guaranteed pod needs one (and
/// the lowest `--kata-container-memory`: the guest's RAM then reserved once).
pub const MIN_CONTAINER_MEMORY_MIB: u64 = 64;
/// Root ports the Go runtime creates at most (`maxPCIeRootPorts`); more are clamped.
pub const KATA_MAX_ROOT_PORTS: usize = 16;

/// `enable_annotations` of Kata's distribution configurations (`DEFENABLEANNOTATIONS` in
/// `src/runtime/Makefile`): kept, since a drop-in's list replaces the file's.
pub const DISTRIBUTION_ANNOTATIONS: &[&str] =
    &["enable_iommu", "kernel_params", "kernel_verity_params"];
/// `enable_annotations` of the confidential GPU classes (`DEFENABLEANNOTATIONS_COCO`:
/// `configuration-qemu-nvidia-gpu-snp.toml`, `-tdx.toml`, `coco-dev`): the distribution's
/// list, the plan's, and these. Not written (they would let any pod of a non-confidential
/// class pass initdata), but named in the drop-in so a confidential class keeps them.
pub const CONFIDENTIAL_ANNOTATIONS: &[&str] = &["cc_init_data"];
/// The annotations the pod carries (base names), added to the distribution's list.
pub const PLAN_ANNOTATIONS: &[&str] = &["default_vcpus", "default_memory", "enable_hugepages"];

/// Choices the plan does not make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KataOptions {
    /// The container's memory limit, MiB: its ceiling inside the guest. `None`: all of the
    /// plan's memory but Kata's floor for `default_memory` (for a hugepage-backed guest the
    /// scheduler then reserves the RAM about twice; see the module docs).
    pub container_memory_mib: Option<u64>,
}

/// The plan split into Kata's base sandbox size and the container limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizing {
    /// `default_vcpus` annotation (Go) and `overhead_vcpus` (runtime-rs): always 0.
    pub default_vcpus: u32,
    /// Whole CPUs of the container's limit: the plan's vCPUs.
    pub container_cpus: u32,
    /// `default_memory` (Go) and `overhead_memory` (runtime-rs), MiB.
    pub default_memory_mib: u64,
    /// The container's memory limit, MiB (added to the guest, and its ceiling there).
    pub container_memory_mib: u64,
    /// MiB the VM gets beyond the plan (a plan too small for Kata's floor and a container,
    /// or a container limit larger than the plan leaves).
    pub extra_memory_mib: u64,
    /// `hugepages-2Mi`/`hugepages-1Gi` and the quantity in bytes, when the plan has them:
    /// the whole guest RAM in whole pages.
    pub hugepages: Option<(String, u64)>,
}

impl Sizing {
    /// The VM's RAM as Kata computes it (rule 1), MiB.
    pub fn vm_memory_mib(&self) -> u64 {
        self.default_memory_mib + self.container_memory_mib
    }

    /// What the scheduler reserves for the pod besides the runtime class's overhead (rule 3):
    /// (memory, hugepages) in bytes.
    pub fn reserved_bytes(&self) -> (u64, u64) {
        (
            self.container_memory_mib << 20,
            self.hugepages.as_ref().map_or(0, |(_, b)| *b),
        )
    }
}

/// Split the plan with the default choices (see the module docs).
pub fn sizing(plan: &Plan) -> Sizing {
    sizing_with(plan, &KataOptions::default())
}

/// Split the plan (see the module docs).
pub fn sizing_with(plan: &Plan, opts: &KataOptions) -> Sizing {
    let n = u32::try_from(vcpu_count(plan)).unwrap_or(u32::MAX).max(1);
    let mem_mib = plan.request.memory_bytes.div_ceil(1 << 20).max(1);
    let huge = hugepage_quantity(plan.memory.hugepage_size_kb);
    // by default the container may use the guest's RAM, all but Kata's floor (a 4 KiB
    // guest's limit carries its RAM; a hugepage guest's is its ceiling, see the module docs)
    let container = opts
        .container_memory_mib
        .unwrap_or(mem_mib.saturating_sub(KATA_MIN_MEMORY_MIB))
        .max(MIN_CONTAINER_MEMORY_MIB);
    let base = mem_mib.saturating_sub(container).max(KATA_MIN_MEMORY_MIB);
    let vm_mib = base + container;
    let hugepages = huge.map(|name| {
        let size = plan.memory.hugepage_size_kb * 1024;
        // whole pages covering the guest RAM (the plan's count, or computed if absent)
        let pages = if plan.memory.pages > 0 && vm_mib == mem_mib {
            plan.memory.pages
        } else {
            (vm_mib << 20).div_ceil(size)
        };
        (format!("hugepages-{name}"), pages.saturating_mul(size))
    });
    Sizing {
        default_vcpus: 0,
        container_cpus: n,
        default_memory_mib: base,
        container_memory_mib: container,
        extra_memory_mib: vm_mib.saturating_sub(mem_mib),
        hugepages,
    }
}

#[derive(Serialize)]
struct Config {
    hypervisor: Hypervisor,
    runtime: Runtime,
}

#[derive(Serialize)]
struct Hypervisor {
    qemu: Qemu,
}

#[derive(Serialize)]
struct Qemu {
    default_memory: u64,
    enable_hugepages: bool,
    enable_mem_prealloc: bool,
    enable_iothreads: bool,
    cpu_features: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cold_plug_vfio: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hot_plug_vfio: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcie_root_port: Option<usize>,
    enable_annotations: Vec<&'static str>,
}

#[derive(Serialize)]
struct Runtime {
    static_sandbox_resource_mgmt: bool,
    enable_vcpus_pinning: bool,
}

/// Kata's `cpu_features` string: the distribution's `pmu=off` (x86 `CPUFEATURES`) plus the
/// plan's features.
fn cpu_features(plan: &Plan) -> String {
    let mut v = vec!["pmu=off".to_string()];
    if plan.cpu_features.invtsc {
        v.push("+invtsc".into());
    } else if plan.cpu_features.invtsc_disabled {
        v.push("-invtsc".into());
    }
    if plan.cpu_features.hide_hypervisor {
        v.push("-hypervisor".into());
    }
    v.join(",")
}

/// The `enable_annotations` list the drop-in writes: the distribution's, then the plan's.
pub fn enable_annotations() -> Vec<&'static str> {
    DISTRIBUTION_ANNOTATIONS
        .iter()
        .chain(PLAN_ANNOTATIONS)
        .copied()
        .collect()
}

/// A `config.d/` drop-in for the runtime class that runs VMs of this plan's shape.
pub fn config_toml(plan: &Plan) -> String {
    config_toml_with(plan, &KataOptions::default())
}

/// [`config_toml`] with the choices in `opts`.
pub fn config_toml_with(plan: &Plan, opts: &KataOptions) -> String {
    let s = sizing_with(plan, opts);
    let hp = s.hugepages.is_some();
    let devices = plan.devices.len();
    let cfg = Config {
        hypervisor: Hypervisor {
            qemu: Qemu {
                default_memory: s.default_memory_mib,
                enable_hugepages: hp,
                // hugepages imply preallocation in Kata; say so for 4K too: VFIO pins it all
                enable_mem_prealloc: hp || devices > 0,
                enable_iothreads: !plan.iothread_cpus.is_empty(),
                cpu_features: cpu_features(plan),
                // cold-plug at boot; the Go runtime refuses hot- and cold-plug together
                cold_plug_vfio: (devices > 0).then_some("root-port"),
                hot_plug_vfio: (devices > 0).then_some("no-port"),
                pcie_root_port: (devices > 0).then_some(devices.min(KATA_MAX_ROOT_PORTS)),
                enable_annotations: enable_annotations(),
            },
        },
        runtime: Runtime {
            static_sandbox_resource_mgmt: true,
            enable_vcpus_pinning: true,
        },
    };
    let mut body = String::new();
    for line in toml::to_string(&cfg).unwrap_or_default().lines() {
        if line.starts_with("enable_annotations") {
            let _ = writeln!(
                body,
                "# Kata's default list (this one replaces the file's) and the plan's names; the\n\
                 # confidential GPU classes (configuration-qemu-nvidia-gpu-snp/-tdx) also enable {}: add it there",
                CONFIDENTIAL_ANNOTATIONS
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        body.push_str(line);
        body.push('\n');
    }
    let mut head = format!(
        "# vmtune: Kata settings for {} ({} vCPUs, {} MiB{}).\n\
         # A drop-in: save as config.d/50-vmtune.toml beside the runtime class's\n\
         # configuration-qemu*.toml; keys not listed keep their values.\n",
        plan.request.name.as_deref().unwrap_or("this plan"),
        vcpu_count(plan),
        plan.request.memory_bytes / (1 << 20),
        s.hugepages
            .as_ref()
            .map(|(n, _)| format!(", {n}"))
            .unwrap_or_default()
    );
    if plan.memory.hugepage_size_kb >= 1 << 20 {
        head.push_str(
            "# Kata backs guest RAM with the hugetlbfs at /dev/hugepages: boot the host with\n\
             # default_hugepagesz=1G so that mount serves 1 GiB pages (Kata GPU boot study's host).\n",
        );
    }
    if let Some(note) = crate::locality::unexpressed(plan, "Kata's configuration") {
        let _ = writeln!(head, "# {note}");
    }
    if devices > KATA_MAX_ROOT_PORTS {
        let _ = writeln!(
            head,
            "# {devices} devices but Kata creates at most {KATA_MAX_ROOT_PORTS} root ports: use cold_plug_vfio = \"switch-port\" for the rest."
        );
    }
    let _ = write!(
        head,
        "# runtime-rs sizes a static sandbox from overhead_* instead of default_*; for it add\n\
         # overhead_vcpus = {}.0 and overhead_memory = {} under [hypervisor.qemu].\n",
        s.default_vcpus, s.default_memory_mib
    );
    format!("{head}{body}")
}

/// Pod annotations (`io.katacontainers.config.hypervisor.*`) for the plan; they need the
/// names in `enable_annotations` (as `config_toml` writes it).
pub fn pod_annotations(plan: &Plan) -> Vec<(String, String)> {
    pod_annotations_with(plan, &KataOptions::default())
}

/// [`pod_annotations`] with the choices in `opts`.
pub fn pod_annotations_with(plan: &Plan, opts: &KataOptions) -> Vec<(String, String)> {
    let s = sizing_with(plan, opts);
    vec![
        (
            format!("{ANNOTATION_PREFIX}default_vcpus"),
            s.default_vcpus.to_string(),
        ),
        (
            format!("{ANNOTATION_PREFIX}default_memory"),
            s.default_memory_mib.to_string(),
        ),
        (
            format!("{ANNOTATION_PREFIX}enable_hugepages"),
            s.hugepages.is_some().to_string(),
        ),
    ]
}

/// A Kubernetes quantity for bytes: `16Gi`, `512Mi`, else `Ki`.
fn quantity(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 30) {
        format!("{}Gi", bytes >> 30)
    } else if bytes.is_multiple_of(1 << 20) {
        format!("{}Mi", bytes >> 20)
    } else {
        format!("{}Ki", bytes.div_ceil(1024))
    }
}

/// YAML double-quoted scalar (JSON string syntax is valid YAML).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// RFC 1123 name from the VM name (`vmtune-vm` when there is none).
fn k8s_name(plan: &Plan) -> String {
    let raw = plan.request.name.as_deref().unwrap_or("vmtune-vm");
    let mut s: String = raw
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s = s.trim_matches('-').chars().take(63).collect();
    let s = s.trim_end_matches('-').to_string();
    if s.is_empty() {
        "vmtune-vm".into()
    } else {
        s
    }
}

/// GPUs the plan passes through (not their audio functions, which the device plugin hands out
/// with the GPU).
pub(crate) fn gpu_count(plan: &Plan) -> usize {
    plan.devices
        .iter()
        .filter(|d| {
            matches!(
                d.kind,
                topo::DeviceKind::Gpu | topo::DeviceKind::Accelerator
            )
        })
        .count()
}

/// A Pod manifest with the annotations and the container's `resources`: limits = requests
/// for every resource, whole CPUs, so the pod is Guaranteed and the kubelet's static CPU
/// manager gives it one exclusive CPU per vCPU (as the Kata GPU boot study writes its pods).
/// Its comment says how Kata sizes the VM and what the scheduler reserves for it.
pub fn pod_spec_yaml(plan: &Plan) -> String {
    pod_spec_yaml_with(plan, &KataOptions::default())
}

/// [`pod_spec_yaml`] with the choices in `opts`.
pub fn pod_spec_yaml_with(plan: &Plan, opts: &KataOptions) -> String {
    let s = sizing_with(plan, opts);
    let gpus = gpu_count(plan);
    let runtime_class = if gpus > 0 {
        "kata-qemu-nvidia-gpu"
    } else {
        "kata-qemu"
    };
    let mut res: Vec<(String, String)> = Vec::new();
    if gpus > 0 {
        // the device plugin's resource name; `nvidia.com/gpu` for the NVIDIA GPU operator
        res.push(("nvidia.com/gpu".into(), gpus.to_string()));
    }
    res.push(("cpu".into(), q(&s.container_cpus.to_string())));
    res.push(("memory".into(), quantity(s.container_memory_mib << 20)));
    if let Some((name, bytes)) = &s.hugepages {
        res.push((name.clone(), quantity(*bytes)));
    }
    let plan_mib = plan.request.memory_bytes.div_ceil(1 << 20);
    let mut y = String::new();
    y.push_str("# vmtune: Kata sizes the VM as the annotations' base plus these limits:\n");
    let _ = writeln!(
        y,
        "# {} + {} vCPUs, {} + {} MiB = {} vCPUs, {} MiB{}.",
        s.default_vcpus,
        s.container_cpus,
        s.default_memory_mib,
        s.container_memory_mib,
        s.default_vcpus + s.container_cpus,
        s.vm_memory_mib(),
        if s.extra_memory_mib > 0 {
            format!(
                ": {} MiB more than the plan's {plan_mib} MiB, since Kata's base is at least {KATA_MIN_MEMORY_MIB} MiB and the container needs a memory limit ({} MiB) for a Guaranteed pod",
                s.extra_memory_mib, s.container_memory_mib
            )
        } else {
            ", the plan's".into()
        }
    );
    let (mem, pages) = s.reserved_bytes();
    match &s.hugepages {
        Some((name, bytes)) => {
            let _ = writeln!(
                y,
                "# The guest RAM is {} of {name}, every page of it (QEMU maps it inside the pod's\n\
                 # hugetlb limit). The memory limit is not guest RAM on the host, so the scheduler\n\
                 # reserves {} {name} + {} memory, plus the runtime class's overhead for QEMU.",
                quantity(*bytes),
                quantity(pages),
                quantity(mem)
            );
            if s.container_memory_mib > MIN_CONTAINER_MEMORY_MIB {
                let _ = writeln!(
                    y,
                    "# Kata applies the memory limit inside the guest too: the container may use\n\
                     # {} MiB of the guest's RAM, and the scheduler reserves that a second time (Kata\n\
                     # adds the limit to the guest and caps the container with it; kata-containers\n\
                     # issue 13561). For a workload that needs less, plan with\n\
                     # --kata-container-memory SIZE ({MIN_CONTAINER_MEMORY_MIB}M or more): the VM stays\n\
                     # {} MiB and only SIZE is reserved twice.",
                    s.container_memory_mib,
                    s.vm_memory_mib()
                );
            } else {
                let _ = writeln!(
                    y,
                    "# Kata applies the memory limit inside the guest too: the container may use\n\
                     # only {} MiB of the guest's RAM (--kata-container-memory); without that\n\
                     # flag it may use all but {KATA_MIN_MEMORY_MIB} MiB, reserved a second time.",
                    s.container_memory_mib
                );
            }
        }
        None => {
            let _ = writeln!(
                y,
                "# The guest RAM is ordinary memory charged to the pod: the {} memory limit plus\n\
                 # the runtime class's overhead.podFixed.memory must hold all {} MiB of it, so that\n\
                 # overhead must cover default_memory ({} MiB) as well as QEMU itself.",
                quantity(mem),
                s.vm_memory_mib(),
                s.default_memory_mib
            );
        }
    }
    y.push_str("# Guaranteed QoS (requests = limits): the static CPU manager gives the pod\n");
    let _ = writeln!(
        y,
        "# {} exclusive CPU(s), and Kata pins one vCPU to each.",
        s.container_cpus
    );
    y.push_str("apiVersion: v1\nkind: Pod\nmetadata:\n");
    let _ = writeln!(y, "  name: {}\n  annotations:", k8s_name(plan));
    for (k, v) in pod_annotations_with(plan, opts) {
        let _ = writeln!(y, "    {k}: {}", q(&v));
    }
    let _ = writeln!(y, "spec:\n  runtimeClassName: {runtime_class}");
    y.push_str("  containers:\n  - name: main\n    image: \"ubuntu:22.04\"\n    resources:\n");
    for section in ["limits", "requests"] {
        let _ = writeln!(y, "      {section}:");
        for (k, v) in &res {
            let _ = writeln!(y, "        {k}: {v}");
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(vcpus: u32, mib: u64) -> Plan {
        let host = topo::builtin::default_host();
        let req = plan::Request {
            name: Some("k".into()),
            vcpus,
            memory_bytes: mib << 20,
            devices: vec![],
            profile: plan::Profile::Compute,
            os: plan::GuestOs::Linux,
            hugepages: plan::HugepagePolicy::Size2M,
            host_cpus: None,
            move_host_cpus: false,
            threads: plan::ThreadPolicy::Auto,
        };
        plan::plan(&req, &host, &[]).unwrap()
    }

    #[test]
    fn sums_are_the_plan_and_floors_hold() {
        for (v, mib) in [
            (1, 256),
            (1, 320),
            (2, 512),
            (4, 4096),
            (12, 16384),
            (3, 300),
        ] {
            let p = plan_of(v, mib);
            let s = sizing(&p);
            assert_eq!(s.default_vcpus + s.container_cpus, v, "{v} {mib}");
            assert!(s.default_memory_mib >= KATA_MIN_MEMORY_MIB, "{s:?}");
            assert!(s.container_memory_mib >= MIN_CONTAINER_MEMORY_MIB, "{s:?}");
            assert_eq!(
                s.default_memory_mib + s.container_memory_mib,
                mib + s.extra_memory_mib
            );
            if mib >= KATA_MIN_MEMORY_MIB + MIN_CONTAINER_MEMORY_MIB {
                assert_eq!(s.extra_memory_mib, 0, "{s:?}");
            }
        }
    }
}

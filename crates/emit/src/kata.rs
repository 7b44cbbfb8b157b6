//! Kata Containers: `configuration.toml` settings, pod annotations and the pod's resources.
//!
//! How Kata sizes a VM (runtime `static_sandbox_resource_mgmt = true`, the default of the
//! GPU runtime classes): vCPUs = `default_vcpus` + the containers' CPU limits, memory =
//! `default_memory` + the containers' memory limits, all at boot (no hotplug, which matters
//! with VFIO: hot-added RAM must be pinned and mapped again). So the plan's vCPUs and memory
//! are split into a base (the annotations) and the container limits; their sums are the
//! plan's. The hugepages resource covers the whole guest RAM (Kata GPU boot study: without it, QEMU
//! cannot use the node's pre-allocated 1 GiB pages and boot spends minutes in page pinning).
//!
//! What Kata cannot be told: which host CPUs. The kubelet's static CPU manager gives a
//! Guaranteed pod (integer CPU requests = limits) an exclusive cpuset; with
//! `enable_vcpus_pinning = true` Kata pins vCPU *n* to the *n*th CPU of it. To put the vCPUs
//! on the plan's CPUs exactly, run `vmtune apply PLAN.json --pid QEMU_PID` after the start.
//! Kata always backs hugepage RAM with the hugetlbfs at `/dev/hugepages`, so for 1 GiB pages
//! that mount (the kernel's `default_hugepagesz`) must be 1 GiB, as on the Kata GPU boot study host.

use serde::Serialize;

use plan::Plan;

use crate::hugepage_quantity;

/// Annotation prefix of Kata's per-pod hypervisor settings.
pub const ANNOTATION_PREFIX: &str = "io.katacontainers.config.hypervisor.";

/// Kata's own default base memory (`DEFMEMSZ`), MiB.
const KATA_BASE_MEMORY_MIB: u64 = 2048;

/// The plan split into Kata's base sandbox size and the container limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizing {
    pub default_vcpus: u32,
    /// Whole CPUs for the container limit (0: no CPU limit beyond the base).
    pub container_cpus: u32,
    pub default_memory_mib: u64,
    pub container_memory_mib: u64,
    /// `hugepages-2Mi`/`hugepages-1Gi` and the quantity in bytes, when the plan has them.
    pub hugepages: Option<(String, u64)>,
}

fn total_vcpus(plan: &Plan) -> u32 {
    if plan.vcpus.is_empty() {
        plan.request.vcpus
    } else {
        u32::try_from(plan.vcpus.len()).unwrap_or(u32::MAX)
    }
}

/// Split the plan: one base vCPU (Kata's agent and the sandbox) plus whole CPUs for the
/// container; the base memory is Kata's default or half the plan, whichever is smaller.
pub fn sizing(plan: &Plan) -> Sizing {
    let n = total_vcpus(plan).max(1);
    let mem_mib = plan.request.memory_bytes.div_ceil(1 << 20).max(1);
    let base_mem = KATA_BASE_MEMORY_MIB.min(mem_mib.div_ceil(2));
    let hugepages = hugepage_quantity(plan.memory.hugepage_size_kb).map(|name| {
        let size = plan.memory.hugepage_size_kb * 1024;
        // whole pages covering the guest RAM (the plan's count, or computed if absent)
        let pages = if plan.memory.pages > 0 {
            plan.memory.pages
        } else {
            plan.request.memory_bytes.div_ceil(size)
        };
        (format!("hugepages-{name}"), pages.saturating_mul(size))
    });
    Sizing {
        default_vcpus: 1,
        container_cpus: n - 1,
        default_memory_mib: base_mem,
        container_memory_mib: mem_mib - base_mem,
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
    default_vcpus: u32,
    default_maxvcpus: u32,
    default_memory: u64,
    enable_hugepages: bool,
    enable_mem_prealloc: bool,
    enable_iothreads: bool,
    cpu_features: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cold_plug_vfio: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcie_root_port: Option<usize>,
    enable_annotations: Vec<&'static str>,
}

#[derive(Serialize)]
struct Runtime {
    static_sandbox_resource_mgmt: bool,
    enable_vcpus_pinning: bool,
}

/// Kata's `cpu_features` string: the upstream default `pmu=off` plus the plan's features.
fn cpu_features(plan: &Plan) -> String {
    let mut v = vec!["pmu=off".to_string()];
    if plan.cpu_features.invtsc {
        v.push("+invtsc".into());
    }
    if plan.cpu_features.hide_hypervisor {
        v.push("-hypervisor".into());
    }
    v.join(",")
}

/// `configuration.toml` `[hypervisor.qemu]` (and the two `[runtime]` keys it needs) for a
/// runtime class dedicated to VMs of this plan's shape.
pub fn config_toml(plan: &Plan) -> String {
    let s = sizing(plan);
    let hp = s.hugepages.is_some();
    let cfg = Config {
        hypervisor: Hypervisor {
            qemu: Qemu {
                default_vcpus: s.default_vcpus,
                default_maxvcpus: total_vcpus(plan).max(1),
                default_memory: s.default_memory_mib,
                enable_hugepages: hp,
                // hugepages imply preallocation in Kata; say so for 4K too: VFIO pins it all
                enable_mem_prealloc: hp || !plan.devices.is_empty(),
                enable_iothreads: !plan.iothread_cpus.is_empty(),
                cpu_features: cpu_features(plan),
                cold_plug_vfio: (!plan.devices.is_empty()).then_some("root-port"),
                pcie_root_port: (!plan.devices.is_empty()).then_some(plan.devices.len()),
                enable_annotations: vec!["default_vcpus", "default_memory", "enable_hugepages"],
            },
        },
        runtime: Runtime {
            static_sandbox_resource_mgmt: true,
            enable_vcpus_pinning: true,
        },
    };
    let body = toml::to_string(&cfg).unwrap_or_default();
    let note = if plan.memory.hugepage_size_kb >= 1 << 20 {
        "# Kata backs guest RAM with the hugetlbfs at /dev/hugepages: boot the host with\n\
         # default_hugepagesz=1G so that mount serves 1 GiB pages (Kata GPU boot study's host).\n"
    } else {
        ""
    };
    format!(
        "# vmtune: Kata settings for {} ({} vCPUs, {} MiB{}).\n\
         # Merge into configuration-qemu*.toml; keys not listed keep their values.\n{note}{body}",
        plan.request.name.as_deref().unwrap_or("this plan"),
        total_vcpus(plan),
        plan.request.memory_bytes / (1 << 20),
        s.hugepages
            .as_ref()
            .map(|(n, _)| format!(", {n}"))
            .unwrap_or_default()
    )
}

/// Pod annotations (`io.katacontainers.config.hypervisor.*`) for the plan; they need the
/// names in `enable_annotations` (as `config_toml` writes it).
pub fn pod_annotations(plan: &Plan) -> Vec<(String, String)> {
    let s = sizing(plan);
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

/// A Pod manifest with the annotations and the container's `resources` (limits = requests,
/// so the pod is Guaranteed and the kubelet's CPU manager gives it exclusive CPUs), as seed
/// 001 writes them.
pub fn pod_spec_yaml(plan: &Plan) -> String {
    let s = sizing(plan);
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
    if s.container_cpus > 0 {
        res.push(("cpu".into(), q(&s.container_cpus.to_string())));
    }
    res.push(("memory".into(), quantity(s.container_memory_mib << 20)));
    if let Some((name, bytes)) = &s.hugepages {
        res.push((name.clone(), quantity(*bytes)));
    }
    let mut y = String::new();
    y.push_str("# vmtune: Kata sizes the VM as the annotations' base plus these limits:\n");
    y.push_str(&format!(
        "# {} + {} vCPUs, {} + {} MiB = the plan's {} vCPUs, {} MiB.\n",
        s.default_vcpus,
        s.container_cpus,
        s.default_memory_mib,
        s.container_memory_mib,
        total_vcpus(plan).max(1),
        s.default_memory_mib + s.container_memory_mib
    ));
    y.push_str("apiVersion: v1\nkind: Pod\nmetadata:\n");
    y.push_str(&format!("  name: {}\n  annotations:\n", k8s_name(plan)));
    for (k, v) in pod_annotations(plan) {
        y.push_str(&format!("    {k}: {}\n", q(&v)));
    }
    y.push_str(&format!("spec:\n  runtimeClassName: {runtime_class}\n"));
    y.push_str("  containers:\n  - name: main\n    image: \"ubuntu:22.04\"\n    resources:\n");
    for section in ["limits", "requests"] {
        y.push_str(&format!("      {section}:\n"));
        for (k, v) in &res {
            y.push_str(&format!("        {k}: {v}\n"));
        }
    }
    y
}

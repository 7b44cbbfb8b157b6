//! What the consumers accept: every key `--emit kata` writes checked against the names,
//! sections, types and rules of Kata Containers' configuration and annotations — so that
//! Kata's Go loader (and runtime-rs) keep every value — and the KubeVirt fragment against the
//! fields and enums of KubeVirt's VirtualMachineInstance schema and its admitter's Hyper-V
//! rules.
//!
//! The facts are written down here from the sources (kata-containers/kata-containers at
//! 7c6ba40c: `src/runtime/pkg/katautils/config.go`, `src/runtime/pkg/oci/utils.go`,
//! `src/runtime/virtcontainers/hypervisor.go`, `src/runtime/Makefile`,
//! `src/libs/kata-types/src/{annotations/mod.rs,config/default.rs,config/hypervisor/mod.rs}`,
//! `src/runtime-rs/crates/resource/src/cpu_mem/initial_size.rs`; kubevirt/kubevirt at
//! d923fdb8: `staging/src/kubevirt.io/api/core/v1/schema.go`, `pkg/virt-api/webhooks/hyperv.go`),
//! not copied from them.

mod common;

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};
use yaml_rust2::{Yaml, YamlLoader};

// ---------------------------------------------------------------------------------------
// Kata Containers
// ---------------------------------------------------------------------------------------

/// A TOML value as Kata's Go loader types it.
#[derive(Debug, Clone, Copy)]
enum KataType {
    Bool,
    U32,
    Str,
    StrList,
    /// `config.PCIePort`: one of these strings.
    PciePort,
}

/// (section, key, type, what the Go loader does with a value: `Ok` keeps it, `Err` says how
/// it is replaced or refused).
type Rule = fn(&toml::Value) -> Result<(), String>;

fn keep(_: &toml::Value) -> Result<(), String> {
    Ok(())
}

/// `hypervisor.defaultMemSz()`: below `vc.MinHypervisorMemory` (256) the configured value
/// is replaced with `DEFMEMSZ` (2048).
fn min_memory(v: &toml::Value) -> Result<(), String> {
    match v.as_integer() {
        Some(m) if m >= 256 => Ok(()),
        m => Err(format!(
            "default_memory {m:?} < 256 MiB: the Go loader uses 2048"
        )),
    }
}

/// `hypervisor.pcieRootPort()`: more than `maxPCIeRootPorts` (16) are clamped.
fn root_ports(v: &toml::Value) -> Result<(), String> {
    match v.as_integer() {
        Some(n) if (0..=16).contains(&n) => Ok(()),
        n => Err(format!("pcie_root_port {n:?} > 16: clamped")),
    }
}

/// `hypervisor.cpuFeatures()`: split on ',', items trimmed, empty items dropped.
fn cpu_features(v: &toml::Value) -> Result<(), String> {
    let s = v.as_str().unwrap_or("");
    if s.split(',').all(|f| !f.is_empty() && f.trim() == f) {
        Ok(())
    } else {
        Err(format!("cpu_features {s:?} is rewritten by the loader"))
    }
}

const KATA_KEYS: &[(&str, &str, KataType, Rule)] = &[
    (
        "hypervisor.qemu",
        "default_memory",
        KataType::U32,
        min_memory,
    ),
    ("hypervisor.qemu", "enable_hugepages", KataType::Bool, keep),
    (
        "hypervisor.qemu",
        "enable_mem_prealloc",
        KataType::Bool,
        keep,
    ),
    ("hypervisor.qemu", "enable_iothreads", KataType::Bool, keep),
    (
        "hypervisor.qemu",
        "cpu_features",
        KataType::Str,
        cpu_features,
    ),
    (
        "hypervisor.qemu",
        "cold_plug_vfio",
        KataType::PciePort,
        keep,
    ),
    ("hypervisor.qemu", "hot_plug_vfio", KataType::PciePort, keep),
    (
        "hypervisor.qemu",
        "pcie_root_port",
        KataType::U32,
        root_ports,
    ),
    (
        "hypervisor.qemu",
        "enable_annotations",
        KataType::StrList,
        keep,
    ),
    (
        "runtime",
        "static_sandbox_resource_mgmt",
        KataType::Bool,
        keep,
    ),
    ("runtime", "enable_vcpus_pinning", KataType::Bool, keep),
];

/// `config.PCIePort.Valid()`.
const PCIE_PORTS: &[&str] = &["root-port", "switch-port", "bridge-port", "no-port"];

/// `DEFENABLEANNOTATIONS` of the distribution's configurations (Makefile).
const DISTRIBUTION_ANNOTATIONS: &[&str] =
    &["enable_iommu", "kernel_params", "kernel_verity_params"];
/// `DEFENABLEANNOTATIONS_COCO`: the confidential classes' list (`configuration-qemu-nvidia-
/// gpu-snp.toml.in`, `-tdx`, `coco-dev`, `se`), Kata's Makefile, main branch.
const COCO_ANNOTATIONS: &[&str] = &[
    "enable_iommu",
    "kernel_params",
    "kernel_verity_params",
    "default_vcpus",
    "default_memory",
    "cc_init_data",
];

/// Pod annotations Kata reads (`io.katacontainers.config.hypervisor.` + name): how the Go
/// runtime (`addHypervisorCPUOverrides`/`addHypervisorMemoryOverrides`) and runtime-rs
/// (`Annotation::update_config_by_annotation`) parse and check each. `host_cpus` is the
/// node's CPU count.
fn annotation_accepted(name: &str, value: &str, host_cpus: u32) -> Result<(), String> {
    match name {
        // Go: ParseFloat, >= 0, <= NumCPU(); runtime-rs: f32 <= the plugin's max vCPUs
        "default_vcpus" => {
            let v: f32 = value
                .parse()
                .map_err(|_| format!("{value:?} is not a number"))?;
            if v < 0.0 || v > host_cpus as f32 {
                return Err(format!("default_vcpus {v} outside 0..={host_cpus}"));
            }
            Ok(())
        }
        // Go: ParseUint, >= MinHypervisorMemory (256); runtime-rs: >= MIN_QEMU_MEMORY_SIZE_MB (64)
        "default_memory" => {
            let v: u64 = value
                .parse()
                .map_err(|_| format!("{value:?} is not a whole number"))?;
            if v < 256 {
                return Err(format!("default_memory {v} less than minimum required 256"));
            }
            Ok(())
        }
        // Go: strconv.ParseBool; runtime-rs: bool
        "enable_hugepages" => match value {
            "true" | "false" => Ok(()),
            "1" | "t" | "T" | "TRUE" | "True" | "0" | "f" | "F" | "FALSE" | "False" => {
                Err(format!("{value:?}: Go takes it, runtime-rs does not"))
            }
            _ => Err(format!("{value:?} is not a bool")),
        },
        other => Err(format!("vmtune should not write annotation {other}")),
    }
}

fn kata_plan(vcpus: u32, memory_mib: u64, gpu: bool) -> Plan {
    let host = topo::builtin::default_host();
    let req = Request {
        name: Some("kata".into()),
        vcpus,
        memory_bytes: memory_mib << 20,
        devices: if gpu { vec!["01:00.0".into()] } else { vec![] },
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    plan::plan(&req, &host, &[]).expect("plan")
}

fn kata_plans() -> Vec<(String, Plan)> {
    let mut v: Vec<(String, Plan)> = common::plans()
        .into_iter()
        .map(|(n, p)| (n.to_string(), p))
        .collect();
    for (vcpus, mib, gpu) in [
        (1, 256, false),
        (1, 300, false),
        (2, 512, true),
        (14, 2048, true),
    ] {
        v.push((
            format!("{vcpus} vCPU {mib} MiB"),
            kata_plan(vcpus, mib, gpu),
        ));
    }
    v
}

/// Every key in the TOML is one Kata defines, in its section, of its type, and kept as
/// written by the Go loader.
fn check_kata_toml(toml_text: &str, what: &str) {
    let doc: toml::Value = toml::from_str(toml_text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut seen = 0;
    for (section, table) in [
        (
            "hypervisor.qemu",
            doc.get("hypervisor").and_then(|h| h.get("qemu")),
        ),
        ("runtime", doc.get("runtime")),
    ] {
        let Some(table) = table.and_then(|t| t.as_table()) else {
            continue;
        };
        for (key, value) in table {
            let Some((_, _, ty, rule)) = KATA_KEYS
                .iter()
                .find(|(s, k, _, _)| *s == section && k == key)
            else {
                panic!("{what}: [{section}] {key} is not a key vmtune may write");
            };
            let typed = match ty {
                KataType::Bool => value.is_bool(),
                KataType::U32 => value.as_integer().is_some_and(|i| u32::try_from(i).is_ok()),
                KataType::Str => value.is_str(),
                KataType::StrList => value
                    .as_array()
                    .is_some_and(|a| a.iter().all(|x| x.is_str())),
                KataType::PciePort => value.as_str().is_some_and(|s| PCIE_PORTS.contains(&s)),
            };
            assert!(typed, "{what}: [{section}] {key} = {value} is not a {ty:?}");
            if let Err(e) = rule(value) {
                panic!("{what}: the Go loader does not keep [{section}] {key}: {e}");
            }
            seen += 1;
        }
    }
    let top: Vec<&String> = doc
        .as_table()
        .map(|t| t.keys().collect())
        .unwrap_or_default();
    for k in top {
        assert!(k == "hypervisor" || k == "runtime", "{what}: section {k}");
    }
    assert!(seen > 0, "{what}: nothing checked");
    let qemu = &doc["hypervisor"]["qemu"];
    // checkPCIeConfig: cold- and hot-plug are never both set
    let cold = qemu.get("cold_plug_vfio").and_then(|v| v.as_str());
    if cold.is_some_and(|c| c != "no-port") {
        assert_eq!(
            qemu.get("hot_plug_vfio").and_then(|v| v.as_str()),
            Some("no-port"),
            "{what}"
        );
    }
    // a drop-in replaces the list: the distribution's names must still be there
    let list: Vec<&str> = qemu["enable_annotations"]
        .as_array()
        .expect("enable_annotations")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for d in DISTRIBUTION_ANNOTATIONS {
        assert!(
            list.contains(d),
            "{what}: {d} dropped from enable_annotations {list:?}"
        );
    }
}

/// Go's `checkAnnotationNameIsValid`: the name after the prefix must match one of the
/// `enable_annotations` regular expressions (unanchored). vmtune's entries are plain words,
/// so a match is a substring; the test also proves they are plain words.
fn annotation_enabled(list: &[&str], name: &str) -> bool {
    list.iter().any(|re| {
        assert!(
            re.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{re} is not a plain word"
        );
        name.contains(re)
    })
}

fn yaml(text: &str, what: &str) -> Yaml {
    let mut docs =
        YamlLoader::load_from_str(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    assert_eq!(docs.len(), 1, "{what}");
    docs.remove(0)
}

/// Kubernetes quantity to bytes (the binary and plain forms vmtune writes).
fn bytes(q: &Yaml) -> u64 {
    let s = q
        .as_str()
        .map(str::to_string)
        .or_else(|| q.as_i64().map(|i| i.to_string()))
        .unwrap_or_default();
    for (suffix, mult) in [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
    ] {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<u64>().expect("quantity") * mult;
        }
    }
    s.parse().expect("quantity")
}

#[test]
fn kata_toml_keys_and_values_survive_the_go_loader() {
    for (name, p) in kata_plans() {
        let toml = emit::kata::config_toml(&p);
        check_kata_toml(&toml, &name);
    }
}

#[test]
fn kata_dropin_names_what_a_confidential_class_would_lose() {
    // the drop-in's list replaces the file's: beside a confidential GPU class, every name of
    // that class's list that the drop-in does not write must be named in it, or pods passing
    // initdata break without a word
    for (name, p) in kata_plans() {
        let text = emit::kata::config_toml(&p);
        let doc: toml::Value = toml::from_str(&text).unwrap();
        let list: Vec<&str> = doc["hypervisor"]["qemu"]["enable_annotations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        for a in COCO_ANNOTATIONS.iter().filter(|a| !list.contains(a)) {
            assert!(
                text.lines()
                    .any(|l| l.starts_with('#') && l.contains(&format!("{a:?}"))),
                "{name}: {a} not named:\n{text}"
            );
        }
    }
}

#[test]
fn kata_plan_of_256_mib_keeps_every_value() {
    let p = kata_plan(1, 256, false);
    let toml = emit::kata::config_toml(&p);
    check_kata_toml(&toml, "256 MiB");
    let doc: toml::Value = toml::from_str(&toml).unwrap();
    assert_eq!(
        doc["hypervisor"]["qemu"]["default_memory"].as_integer(),
        Some(256)
    );
    for (k, v) in emit::kata::pod_annotations(&p) {
        let n = k
            .strip_prefix(emit::kata::ANNOTATION_PREFIX)
            .expect("prefix");
        annotation_accepted(n, &v, 16).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    // the VM is bigger than 256 MiB (Kata's floor plus a container limit), and says so
    let pod = emit::kata::pod_spec_yaml(&p);
    assert!(pod.contains("MiB more than the plan's 256 MiB"), "{pod}");
}

#[test]
fn kata_pod_is_guaranteed_and_sums_to_the_plan() {
    let host_cpus = topo::builtin::default_host().pus.len() as u32;
    for (name, p) in kata_plans() {
        let toml: toml::Value = toml::from_str(&emit::kata::config_toml(&p)).unwrap();
        let enabled: Vec<&str> = toml["hypervisor"]["qemu"]["enable_annotations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        let text = emit::kata::pod_spec_yaml(&p);
        let pod = yaml(&text, &name);
        assert_eq!(pod["apiVersion"].as_str(), Some("v1"), "{name}");
        assert_eq!(pod["kind"].as_str(), Some("Pod"), "{name}");
        // annotations: enabled by the drop-in, accepted by both runtimes
        let ann = pod["metadata"]["annotations"]
            .as_hash()
            .expect("annotations");
        let mut base_vcpus = None;
        let mut base_mem = None;
        for (k, v) in ann {
            let (k, v) = (
                k.as_str().unwrap(),
                v.as_str().expect("annotation values are strings"),
            );
            let n = k
                .strip_prefix(emit::kata::ANNOTATION_PREFIX)
                .expect("Kata prefix");
            assert!(
                annotation_enabled(&enabled, n),
                "{name}: {n} not enabled in {enabled:?}"
            );
            annotation_accepted(n, v, host_cpus).unwrap_or_else(|e| panic!("{name}: {k}: {e}"));
            match n {
                "default_vcpus" => base_vcpus = v.parse::<f32>().ok(),
                "default_memory" => base_mem = v.parse::<u64>().ok(),
                _ => {}
            }
        }
        // Guaranteed QoS: one container, requests == limits for every resource, cpu and
        // memory set, a whole number of CPUs (the static CPU manager's condition)
        let c = &pod["spec"]["containers"][0];
        let lim = c["resources"]["limits"].as_hash().expect("limits");
        let req = c["resources"]["requests"].as_hash().expect("requests");
        assert_eq!(lim, req, "{name}: requests != limits");
        let cpu = &c["resources"]["limits"]["cpu"];
        let cpus: u32 = cpu
            .as_str()
            .expect("cpu as a string")
            .parse()
            .expect("whole CPUs");
        assert!(cpus >= 1, "{name}");
        let mem = bytes(&c["resources"]["limits"]["memory"]);
        assert!(mem > 0, "{name}");
        // Kata's static sizing: base + limits = the plan (or more, when said)
        let n = p.vcpus.len() as f32;
        assert_eq!(base_vcpus.unwrap() + cpus as f32, n, "{name}: vCPUs");
        let vm_mib = base_mem.unwrap() + mem / (1 << 20);
        let plan_mib = p.request.memory_bytes.div_ceil(1 << 20);
        if vm_mib != plan_mib {
            assert!(
                vm_mib > plan_mib && text.contains("more than the plan's"),
                "{name}"
            );
        }
        // hugepages: requests == limits (checked above), and they cover the VM's RAM
        if p.memory.hugepage_size_kb > 4 {
            let key = format!(
                "hugepages-{}",
                emit::hugepage_quantity(p.memory.hugepage_size_kb).unwrap()
            );
            let hp = bytes(&c["resources"]["limits"][key.as_str()]);
            assert!(hp >= vm_mib << 20, "{name}: {hp} < {vm_mib} MiB");
        }
    }
}

// ---------------------------------------------------------------------------------------
// How Kata and the kubelet count a Kata VM's memory
// ---------------------------------------------------------------------------------------

/// A Kata pod's memory as the consumers see it: the `default_memory` annotation, the
/// container's memory limit (= request), its `hugepages-<size>` limit, `enable_hugepages`.
#[derive(Debug, Clone, Copy)]
struct PodMemory {
    default_memory_mib: u64,
    memory_limit: u64,
    /// (page size, bytes).
    hugepages: Option<(u64, u64)>,
    enable_hugepages: bool,
}

/// The rules, each with its source (read there, written here):
///
/// | consumer | rule | source |
/// |---|---|---|
/// | Kata Go runtime, `static_sandbox_resource_mgmt` | VM RAM = `default_memory` + the memory limits; `hugepages-<size>` adds nothing | `oci.SandboxConfig` (`MemorySize += WorkloadMemMB`), `CalculateSandboxSizing`/`CalculateContainerSizing` (read `Memory.Limit` only); `Sandbox.updateResources` returns early under static management, so `calculateSandboxMemory` (which adds `HugepageLimits`) never runs |
/// | Kata runtime-rs, static | VM RAM = `overhead_memory` + the memory limits | `InitialSizeManager` (`initial_size.rs`: `memory().limit()`) |
/// | QEMU under Kata with `enable_hugepages` | all guest RAM from `/dev/hugepages`, preallocated | `govmm` `memory-backend-file,...,mem-path=/dev/hugepages` |
/// | kubelet | pod hugetlb limit per size = its `hugepages-<size>` requests, **0 for a size not requested**; QEMU runs in the pod's cgroup on the GPU classes (`sandbox_cgroup_only = true`, `DEFSANDBOXCGROUPONLY_NV`) | `cgroup_manager_linux.go` `maybeSetHugetlb` ("for each page size omitted, limit to 0") |
/// | kubelet / scheduler | allocatable memory excludes the pre-allocated hugepages: `memory` and `hugepages-<size>` are reserved from disjoint pools | kubelet node status (`allocatableMemory.Sub(hugepages)`) |
/// | Kata agent | a container's memory limit is its cgroup's limit inside the guest | `constrainGRPCSpec` keeps `Linux.Resources.Memory`; rustjail `set_memory_resources` |
/// | 4 KiB guest | guest RAM is ordinary memory charged to the pod: memory limits + `overhead.podFixed.memory` must hold it | kubelet pod cgroup `memory.max`; the Kata GPU boot study's 20Gi overhead note |
impl PodMemory {
    /// Kata's VM RAM, MiB (Go and runtime-rs, static sizing).
    fn kata_vm_mib(&self) -> u64 {
        self.default_memory_mib + self.memory_limit / (1 << 20)
    }

    /// Whether QEMU can map the guest RAM inside the pod's hugetlb limit.
    fn qemu_maps_guest_ram(&self) -> Result<(), String> {
        if !self.enable_hugepages {
            return Ok(());
        }
        let cap = self.hugepages.map_or(0, |(_, b)| b);
        let need = self.kata_vm_mib() << 20;
        if cap < need {
            return Err(format!(
                "hugetlb limit {cap} < guest RAM {need}: QEMU cannot preallocate"
            ));
        }
        Ok(())
    }

    /// What the scheduler reserves besides the runtime class's overhead: (memory, hugepages).
    fn reserved(&self) -> (u64, u64) {
        (self.memory_limit, self.hugepages.map_or(0, |(_, b)| b))
    }

    /// What the VM's guest RAM takes on the host: (memory, hugepages).
    fn used(&self) -> (u64, u64) {
        let ram = self.kata_vm_mib() << 20;
        if self.enable_hugepages {
            (0, ram)
        } else {
            (ram, 0)
        }
    }

    /// The container's ceiling inside the guest.
    fn guest_ceiling(&self) -> u64 {
        self.memory_limit
    }

    fn from_pod(pod: &Yaml) -> PodMemory {
        let ann = &pod["metadata"]["annotations"];
        let a = |n: &str| {
            ann[format!("{}{n}", emit::kata::ANNOTATION_PREFIX).as_str()]
                .as_str()
                .map(str::to_string)
        };
        let lim = &pod["spec"]["containers"][0]["resources"]["limits"];
        let mut hugepages = None;
        for (k, v) in lim.as_hash().expect("limits") {
            let k = k.as_str().unwrap();
            if let Some(size) = k.strip_prefix("hugepages-") {
                hugepages = Some((bytes(&Yaml::String(size.into())), bytes(v)));
            }
        }
        PodMemory {
            default_memory_mib: a("default_memory").map_or(0, |v| v.parse().unwrap()),
            memory_limit: bytes(&lim["memory"]),
            hugepages,
            enable_hugepages: a("enable_hugepages").as_deref() == Some("true"),
        }
    }
}

/// The rules on the Kata GPU boot study's own hugepage pod (in its shape: `default_memory`
/// 10240, `memory: 100Gi`, `hugepages-1Gi: 125Gi`): Kata makes a 110 GiB VM (the study's
/// QEMU has `-m 10240M` plus a 100 GiB backend), its pages are mapped, and the scheduler
/// reserves 225 GiB for it: the guest RAM twice over (100 GiB as memory it does not use,
/// and 15 idle 1 GiB pages).
#[test]
fn the_rules_on_the_boot_studys_pod() {
    let study = yaml(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
  annotations:
    io.katacontainers.config.hypervisor.default_memory: "10240"
    io.katacontainers.config.hypervisor.enable_hugepages: "true"
spec:
  runtimeClassName: kata-qemu-nvidia-gpu
  containers:
  - name: check
    image: ubuntu:22.04
    resources:
      limits:
        nvidia.com/gpu: 7
        cpu: 500m
        memory: 100Gi
        hugepages-1Gi: 125Gi
      requests:
        nvidia.com/gpu: 7
        cpu: 500m
        memory: 100Gi
        hugepages-1Gi: 125Gi
"#,
        "study pod",
    );
    let m = PodMemory::from_pod(&study);
    assert_eq!(m.kata_vm_mib(), 110 << 10);
    assert!(m.qemu_maps_guest_ram().is_ok());
    let (mem, huge) = m.reserved();
    assert_eq!(mem + huge, 225 << 30);
    assert_eq!(m.used(), (0, 110 << 30));
    // without the hugepages resource QEMU could not map a page (the kubelet's 0)
    let without = PodMemory {
        hugepages: None,
        ..m
    };
    assert!(without.qemu_maps_guest_ram().is_err());
}

/// Every Pod vmtune emits, by the rules: Kata makes the plan's VM (or a bigger one, and says
/// so); a hugepage-backed guest's pages are all mapped and none idle, and the scheduler
/// reserves its RAM once (as hugepages) plus the container's ceiling inside the guest — all
/// of the guest but Kata's 256 MiB floor unless a lower ceiling is asked for, and the Pod says
/// it is reserved twice; a 4 KiB guest's RAM is reserved as memory, all but
/// `default_memory`, kept at the 256 MiB the runtime class's overhead must then hold.
#[test]
fn kata_pods_reserve_what_the_vm_uses() {
    for (name, p) in kata_plans() {
        let plan_mib = p.request.memory_bytes.div_ceil(1 << 20);
        for ceiling in [None, Some(4096u64), Some(plan_mib / 2)] {
            let opts = emit::kata::KataOptions {
                container_memory_mib: ceiling,
            };
            let what = format!("{name}, ceiling {ceiling:?}");
            let text = emit::kata::pod_spec_yaml_with(&p, &opts);
            let m = PodMemory::from_pod(&yaml(&text, &what));
            let s = emit::kata::sizing_with(&p, &opts);
            let vm = m.kata_vm_mib();
            assert_eq!(vm, s.vm_memory_mib(), "{what}");
            assert!(vm >= plan_mib, "{what}");
            if vm > plan_mib {
                assert!(text.contains("more than the plan's"), "{what}:\n{text}");
            }
            m.qemu_maps_guest_ram()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let (res_mem, res_huge) = m.reserved();
            let (use_mem, use_huge) = m.used();
            assert_eq!(m.enable_hugepages, p.memory.hugepage_size_kb > 4, "{what}");
            if let Some((page, huge)) = m.hugepages {
                // every page mapped, none idle
                assert!(huge >= use_huge && huge - use_huge < page, "{what}");
                assert_eq!(res_huge, huge, "{what}");
                // the memory request is the ceiling inside the guest, nothing more
                assert_eq!(use_mem, 0, "{what}");
                assert_eq!(res_mem, m.guest_ceiling(), "{what}");
                let want = ceiling.unwrap_or(plan_mib.saturating_sub(256));
                assert_eq!(m.guest_ceiling(), want.max(64) << 20, "{what}");
                // the RAM once, plus exactly the ceiling, which the Pod states
                assert!(
                    res_mem + res_huge < (vm << 20) + page + m.guest_ceiling(),
                    "{what}: reserves {} for a {vm} MiB VM",
                    res_mem + res_huge
                );
                if m.guest_ceiling() > 64 << 20 {
                    assert!(
                        text.contains("reserves that a second time"),
                        "{what}:\n{text}"
                    );
                }
                assert!(text.contains("--kata-container-memory"), "{what}");
            } else {
                assert_eq!(res_huge, 0, "{what}");
                // the overhead must hold the rest: default_memory, at Kata's floor
                assert_eq!(use_mem - res_mem, m.default_memory_mib << 20, "{what}");
                if ceiling.is_none() {
                    assert_eq!(m.default_memory_mib, 256, "{what}");
                }
                assert!(
                    text.contains(&format!(
                        "overhead must cover default_memory ({} MiB)",
                        m.default_memory_mib
                    )),
                    "{what}:\n{text}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// KubeVirt
// ---------------------------------------------------------------------------------------

/// A slice of KubeVirt's `kubevirt.io/v1` schema: the fields `spec.domain` may have where
/// vmtune writes (strict decoding rejects any other).
#[derive(Debug)]
enum S {
    Obj(&'static [(&'static str, S)]),
    List(&'static S),
    Str,
    Bool,
    U32,
    Quantity,
    Enum(&'static [&'static str]),
}

const FEATURE_STATE: S = S::Obj(&[("enabled", S::Bool)]);
const TICK_HPET: &[&str] = &["delay", "catchup", "merge", "discard"];
const TICK_PIT: &[&str] = &["delay", "catchup", "discard"];
const TICK_RTC: &[&str] = &["delay", "catchup"];

static DOMAIN: S = S::Obj(&[
    (
        "cpu",
        S::Obj(&[
            ("cores", S::U32),
            ("sockets", S::U32),
            ("threads", S::U32),
            ("model", S::Str),
            ("dedicatedCpuPlacement", S::Bool),
            ("isolateEmulatorThread", S::Bool),
            ("numa", S::Obj(&[("guestMappingPassthrough", S::Obj(&[]))])),
            (
                "features",
                S::List(&S::Obj(&[
                    ("name", S::Str),
                    (
                        "policy",
                        S::Enum(&["force", "require", "optional", "disable", "forbid"]),
                    ),
                ])),
            ),
        ]),
    ),
    (
        "memory",
        S::Obj(&[
            ("guest", S::Quantity),
            ("hugepages", S::Obj(&[("pageSize", S::Str)])),
        ]),
    ),
    (
        "resources",
        S::Obj(&[(
            "requests",
            S::Obj(&[("memory", S::Quantity), ("cpu", S::Quantity)]),
        )]),
    ),
    (
        "features",
        S::Obj(&[
            ("acpi", FEATURE_STATE),
            (
                "apic",
                S::Obj(&[("enabled", S::Bool), ("endOfInterrupt", S::Bool)]),
            ),
            ("smm", FEATURE_STATE),
            ("pvspinlock", FEATURE_STATE),
            ("hypervPassthrough", S::Obj(&[("enabled", S::Bool)])),
            ("kvm", S::Obj(&[("hidden", S::Bool)])),
            (
                "hyperv",
                S::Obj(&[
                    ("relaxed", FEATURE_STATE),
                    ("vapic", FEATURE_STATE),
                    (
                        "spinlocks",
                        S::Obj(&[("enabled", S::Bool), ("spinlocks", S::U32)]),
                    ),
                    ("vpindex", FEATURE_STATE),
                    ("runtime", FEATURE_STATE),
                    ("synic", FEATURE_STATE),
                    (
                        "synictimer",
                        S::Obj(&[("enabled", S::Bool), ("direct", FEATURE_STATE)]),
                    ),
                    ("reset", FEATURE_STATE),
                    (
                        "vendorid",
                        S::Obj(&[("enabled", S::Bool), ("vendorid", S::Str)]),
                    ),
                    ("frequencies", FEATURE_STATE),
                    ("reenlightenment", FEATURE_STATE),
                    (
                        "tlbflush",
                        S::Obj(&[
                            ("enabled", S::Bool),
                            ("direct", FEATURE_STATE),
                            ("extended", FEATURE_STATE),
                        ]),
                    ),
                    ("ipi", FEATURE_STATE),
                    ("evmcs", FEATURE_STATE),
                ]),
            ),
        ]),
    ),
    (
        "clock",
        S::Obj(&[
            ("utc", S::Obj(&[("offsetSeconds", S::U32)])),
            ("timezone", S::Str),
            (
                "timer",
                S::Obj(&[
                    (
                        "hpet",
                        S::Obj(&[("tickPolicy", S::Enum(TICK_HPET)), ("present", S::Bool)]),
                    ),
                    ("kvm", S::Obj(&[("present", S::Bool)])),
                    (
                        "pit",
                        S::Obj(&[("tickPolicy", S::Enum(TICK_PIT)), ("present", S::Bool)]),
                    ),
                    (
                        "rtc",
                        S::Obj(&[
                            ("tickPolicy", S::Enum(TICK_RTC)),
                            ("present", S::Bool),
                            ("track", S::Enum(&["guest", "wall"])),
                        ]),
                    ),
                    ("hyperv", S::Obj(&[("present", S::Bool)])),
                ]),
            ),
        ]),
    ),
    (
        "devices",
        S::Obj(&[
            (
                "gpus",
                S::List(&S::Obj(&[("name", S::Str), ("deviceName", S::Str)])),
            ),
            (
                "hostDevices",
                S::List(&S::Obj(&[("name", S::Str), ("deviceName", S::Str)])),
            ),
        ]),
    ),
]);

fn check_schema(v: &Yaml, s: &S, path: &str, errs: &mut Vec<String>) {
    match (s, v) {
        (S::Obj(fields), Yaml::Hash(h)) => {
            for (k, val) in h {
                let k = k.as_str().unwrap_or("?");
                match fields.iter().find(|(n, _)| *n == k) {
                    Some((_, sub)) => check_schema(val, sub, &format!("{path}.{k}"), errs),
                    None => errs.push(format!("{path}.{k}: unknown field")),
                }
            }
        }
        (S::List(item), Yaml::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                check_schema(x, item, &format!("{path}[{i}]"), errs);
            }
        }
        (S::Str, Yaml::String(_)) | (S::Bool, Yaml::Boolean(_)) => {}
        (S::U32, Yaml::Integer(i)) if u32::try_from(*i).is_ok() => {}
        (S::Quantity, Yaml::String(q)) if q.chars().next().is_some_and(|c| c.is_ascii_digit()) => {}
        (S::Quantity, Yaml::Integer(_)) => {}
        (S::Enum(vals), Yaml::String(x)) if vals.contains(&x.as_str()) => {}
        (s, v) => errs.push(format!("{path}: {v:?} is not a {s:?}")),
    }
}

/// KubeVirt's admitter (`getHypervFeatureDependencies`, `ValidateVirtualMachineInstanceHypervMode`).
fn check_hyperv_rules(features: &Yaml, errs: &mut Vec<String>) {
    let hv = &features["hyperv"];
    if !hv.is_badvalue() && !features["hypervPassthrough"].is_badvalue() {
        errs.push("hyperv and hypervPassthrough together".into());
    }
    let on = |k: &str| {
        let f = &hv[k];
        !f.is_badvalue() && f["enabled"].as_bool() != Some(false)
    };
    for (feature, needs) in [
        ("synic", "vpindex"),
        ("synictimer", "synic"),
        ("tlbflush", "vpindex"),
        ("ipi", "vpindex"),
        ("evmcs", "vapic"),
    ] {
        // a missing requirement is filled in by the mutator; one turned off is refused
        if on(feature) && !hv[needs].is_badvalue() && !on(needs) {
            errs.push(format!("{feature} requires {needs}, which was disabled"));
        }
    }
}

fn kubevirt_plans() -> Vec<(String, Plan)> {
    let mut v = kata_plans();
    // the users' domains' choices carried into KubeVirt
    for d in [
        "vfio/gaming_nvidia_qemu_commandline.xml",
        "vfio/passthrough_one_space.xml",
        "vfio/anticheat_hidden_hypervisor.xml",
        "vfio/mixed_quotes_no_vendor.xml",
    ] {
        let (_, p) = &common::plans()[0];
        let r = emit::libvirt::patch(&common::read(d), p).expect("patch");
        v.push((format!("gaming plan + {d}"), r.plan));
    }
    v
}

#[test]
fn kubevirt_fragment_matches_the_vmi_schema() {
    for (name, p) in kubevirt_plans() {
        let text = emit::kubevirt::vmi_fragment_yaml(&p);
        let doc = yaml(&text, &name);
        let mut errs = Vec::new();
        let top = doc.as_hash().expect("a mapping");
        assert_eq!(top.len(), 1, "{name}: only `domain:`");
        check_schema(&doc["domain"], &DOMAIN, "spec.domain", &mut errs);
        check_hyperv_rules(&doc["domain"]["features"], &mut errs);
        assert!(errs.is_empty(), "{name}: {errs:#?}\n{text}");
        // the plan's vCPUs
        let cpu = &doc["domain"]["cpu"];
        let product: i64 = ["sockets", "cores", "threads"]
            .iter()
            .map(|k| cpu[*k].as_i64().unwrap_or(1))
            .product();
        assert_eq!(product as usize, p.vcpus.len(), "{name}");
    }
}

#[test]
fn kubevirt_drops_tick_policies_its_timers_do_not_take() {
    let (_, mut p) = common::plans().remove(0);
    p.cpu_features.timers = vec![
        plan::Timer {
            name: "rtc".into(),
            present: true,
            tickpolicy: Some("merge".into()),
        },
        plan::Timer {
            name: "pit".into(),
            present: true,
            tickpolicy: Some("merge".into()),
        },
        plan::Timer {
            name: "hpet".into(),
            present: true,
            tickpolicy: Some("merge".into()),
        },
    ];
    let text = emit::kubevirt::vmi_fragment_yaml(&p);
    let doc = yaml(&text, "merge");
    let mut errs = Vec::new();
    check_schema(&doc["domain"], &DOMAIN, "spec.domain", &mut errs);
    assert!(errs.is_empty(), "{errs:#?}\n{text}");
    let timer = &doc["domain"]["clock"]["timer"];
    assert!(timer["rtc"]["tickPolicy"].is_badvalue(), "{text}");
    assert_eq!(timer["hpet"]["tickPolicy"].as_str(), Some("merge"));
    assert!(text.contains("\"merge\" left out: KubeVirt's rtc timer takes delay, catchup"));
}

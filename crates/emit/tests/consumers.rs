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

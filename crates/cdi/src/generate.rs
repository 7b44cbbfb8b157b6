//! Host → CDI spec for its VFIO devices: observe (which functions a VFIO driver owns, their
//! IOMMU groups and cdevs) → check (viable group, the nodes exist) → name → spec.
//!
//! Per device, the nodes a VMM opens to assign it:
//! - legacy VFIO: the container `/dev/vfio/vfio` and the group `/dev/vfio/GROUP`;
//! - IOMMUFD (Linux 6.6+): `/dev/iommu` and the device's cdev `/dev/vfio/devices/vfioN`,
//!   found under the function in sysfs (`vfio-dev/vfioN`).
//!
//! Each device is listed under several names with the same edits: its index among the
//! devices of the spec in BDF order (`0`, `1`, ... — stable across reboots, unlike cdev
//! numbers, which follow bind order), its BDF (`0000:18:00.0`), and with IOMMUFD its cdev
//! name (`vfio3`, the device ID NVIDIA's sandbox device plugin registers, which Kata's
//! runtime turns into `kind=vfio3` from the kubelet's Pod Resources API).

use std::collections::BTreeMap;

use topo::{DevNumber, DeviceKind, Host, PciDevice, VfioNodes};

use crate::names;
use crate::rules;
use crate::spec::{ContainerEdits, Device, DeviceNode, Spec};
use crate::version::{minimum_required, Version};
use crate::CdiError;

/// The default kind: vendor-neutral (any vfio-pci function, not only GPUs), and distinct
/// from the kinds NVIDIA's own plugins write (`nvidia.com/pgpu`, `nvidia.com/gpu`), so the
/// two specs never claim the same device names.
pub const DEFAULT_KIND: &str = "vmtune.io/vfio";

/// Annotation keys of `--annotate` (device-level; they need cdiVersion 0.6.0).
pub const ANNOTATION_PREFIX: &str = "vmtune.io/";

/// How a VMM opens the devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `/dev/vfio/vfio` + `/dev/vfio/GROUP`.
    Legacy,
    /// `/dev/iommu` + `/dev/vfio/devices/vfioN`.
    Iommufd,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// `vendor/class`.
    pub kind: String,
    pub mode: Mode,
    /// BDFs to put in the spec (any spelling `normalize_bdf` takes); empty: every function a
    /// VFIO driver owns.
    pub devices: Vec<String>,
    /// Only devices of these kinds (topo's classification of the PCI class: GPUs,
    /// NICs, ...; an NVSwitch is a `Bridge`, PCI class 0x0680); empty: any.
    pub classes: Vec<DeviceKind>,
    /// Add per-device annotations (BDF, PCI id, IOMMU group, cdev, NUMA node).
    pub annotate: bool,
    /// Write this cdiVersion instead of the minimum the spec needs.
    pub version: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kind: DEFAULT_KIND.into(),
            mode: Mode::Legacy,
            devices: Vec::new(),
            classes: Vec::new(),
            annotate: false,
            version: None,
        }
    }
}

/// A device node and where its numbers came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub path: String,
    /// `None`: the source does not say (the runtime stats the node on the host).
    pub dev: Option<DevNumber>,
}

/// One device in the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub bdf: String,
    pub index: usize,
    /// Every CDI device name it is listed under (index, BDF, cdev).
    pub names: Vec<String>,
    pub nodes: Vec<Node>,
    pub iommu_group: u32,
    pub cdev: Option<String>,
    /// PCI vendor and device ids; `None` where the host does not say.
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    pub kind: DeviceKind,
    pub driver: String,
}

/// A device left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub bdf: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Generated {
    pub spec: Spec,
    pub entries: Vec<Entry>,
    /// Functions a VFIO driver owns that cannot go in the spec.
    pub refused: Vec<Refusal>,
    /// GPUs and accelerators on other drivers (not candidates; said so an operator sees a
    /// GPU the vfio binding missed).
    pub not_vfio: Vec<Refusal>,
    /// What the output cannot say (device numbers the source lacks).
    pub notes: Vec<String>,
    /// Why the cdiVersion is what it is.
    pub version_reason: String,
}

fn driver_name(d: &PciDevice) -> &str {
    d.driver.as_deref().unwrap_or("no driver")
}

/// PCI-to-PCI, CardBus and subtractive bridges have a type 1/2 config header: VFIO never
/// counts them against a group's viability.
fn is_bridge_header(class: u16) -> bool {
    matches!(class, 0x0604 | 0x0607 | 0x0609)
}

/// Drivers that leave DMA to their owner (`driver_managed_dma`) and so may share an IOMMU
/// group with a VFIO device: VFIO drivers, pci-stub, and PCIe port services.
fn dma_owner_compatible(d: &PciDevice) -> bool {
    match d.driver.as_deref() {
        None => true,
        Some("pci-stub" | "pcieport") => true,
        Some(_) => d.vfio_bound() || is_bridge_header(d.class),
    }
}

/// Why a group is not viable: another function in it is on a driver that does DMA itself.
/// VFIO then fails to open the group (legacy: "group is not viable") or to bind the cdev
/// (IOMMUFD: VFIO_DEVICE_BIND_IOMMUFD fails), whatever the spec says.
fn group_blocker<'a>(host: &'a Host, dev: &PciDevice, group: u32) -> Option<&'a PciDevice> {
    host.pci_devices
        .iter()
        .find(|o| o.bdf != dev.bdf && o.iommu_group == Some(group) && !dma_owner_compatible(o))
}

fn node(path: String, dev: Option<DevNumber>) -> Node {
    Node { path, dev }
}

/// Check one VFIO-owned function and return its nodes, or why it cannot be used.
fn nodes_for(host: &Host, d: &PciDevice, mode: Mode) -> Result<(u32, Vec<Node>), String> {
    if !d.vfio_bound() {
        return Err(match &d.driver {
            Some(drv) => format!("bound to {drv}, not vfio-pci"),
            None if host_has_drivers(host) => "bound to no driver, not vfio-pci".into(),
            None => format!(
                "{} does not say which driver it is bound to (use a sysfs snapshot or the live host)",
                host.source
            ),
        });
    }
    let Some(group) = d.iommu_group else {
        return Err("no iommu_group link in sysfs (is the IOMMU enabled?)".into());
    };
    if let Some(b) = group_blocker(host, d, group) {
        return Err(format!(
            "IOMMU group {group} is not viable: {} in the same group is bound to {} (bind every function of the group to vfio-pci, or unbind it)",
            b.bdf,
            driver_name(b)
        ));
    }
    let vfio: Option<&VfioNodes> = host.vfio.as_ref();
    let group_node = vfio.map(|v| v.group(group));
    if let Some(Some(g)) = group_node {
        if g.noiommu {
            return Err(format!(
                "IOMMU group {group} is a VFIO no-IOMMU group ({}): no DMA isolation, a VM cannot be given it",
                g.path()
            ));
        }
    }
    match mode {
        Mode::Legacy => {
            let control = node("/dev/vfio/vfio".into(), vfio.and_then(|v| v.container));
            let g = match group_node {
                Some(Some(g)) => node(g.path(), g.dev),
                Some(None) => {
                    return Err(format!(
                        "no VFIO group device for IOMMU group {group} (no sys/class/vfio/{group}: a kernel without CONFIG_VFIO_GROUP?); use --iommufd"
                    ))
                }
                None => node(format!("/dev/vfio/{group}"), None),
            };
            Ok((group, vec![control, g]))
        }
        Mode::Iommufd => {
            let Some(c) = &d.vfio_cdev else {
                return Err(
                    "no VFIO cdev (vfio-dev/ in sysfs): IOMMUFD needs Linux 6.6+ with CONFIG_VFIO_DEVICE_CDEV"
                        .into(),
                );
            };
            let iommu = node("/dev/iommu".into(), vfio.and_then(|v| v.iommufd));
            Ok((group, vec![iommu, node(c.path(), c.dev)]))
        }
    }
}

fn host_has_drivers(host: &Host) -> bool {
    host.pci_devices.iter().any(|d| d.driver.is_some())
}

fn device_node(n: &Node) -> DeviceNode {
    DeviceNode {
        path: n.path.clone(),
        // every VFIO and iommufd node is a character device
        node_type: Some("c".into()),
        major: n.dev.map(|d| i64::from(d.major)),
        minor: n.dev.map(|d| i64::from(d.minor)),
        permissions: None,
    }
}

fn annotations(e: &Entry, d: &PciDevice) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    let k = |s: &str| format!("{ANNOTATION_PREFIX}{s}");
    a.insert(k("bdf"), e.bdf.clone());
    // an unknown id is left out (as an unknown cdev or NUMA node is), never written 0000:0000
    if let Some(id) = d.pci_id() {
        a.insert(k("pci-id"), id);
    }
    a.insert(k("iommu-group"), e.iommu_group.to_string());
    if let Some(c) = &d.vfio_cdev {
        a.insert(k("vfio-cdev"), c.name.clone());
    }
    if let Some(n) = &d.numa {
        let list: Vec<String> = n.iter().map(u32::to_string).collect();
        a.insert(k("numa-node"), list.join(","));
    }
    a
}

/// The spec for `host`'s VFIO devices. Errors when there is nothing to put in it, when a
/// device asked for by BDF cannot go in, or when the host lacks the mode's shared node.
pub fn generate(host: &Host, opts: &Options) -> Result<Generated, CdiError> {
    names::parse_kind(&opts.kind).map_err(CdiError::Kind)?;
    let explicit = !opts.devices.is_empty();
    let candidates = candidates(host, opts)?;
    let not_vfio = if explicit {
        Vec::new()
    } else {
        not_vfio(host, opts)
    };
    let (entries, refused) = entries(host, opts, candidates);

    if explicit && !refused.is_empty() {
        return Err(CdiError::Refused(refused));
    }
    if entries.is_empty() {
        return Err(CdiError::NoDevices(no_devices_message(
            host,
            &refused,
            &not_vfio,
            &opts.classes,
        )));
    }
    shared_node(host, opts.mode)?;

    let notes = notes(host, &entries);

    let devices = devices(host, opts, &entries);
    let mut spec = Spec {
        cdi_version: String::new(),
        kind: opts.kind.clone(),
        annotations: BTreeMap::new(),
        devices,
        container_edits: ContainerEdits::default(),
    };
    let (version, version_reason) = version(&spec, opts)?;
    spec.cdi_version = version.to_string();

    // never hand out a spec a CDI loader would reject: one bad spec in /var/run/cdi fails the
    // registry refresh for every device on the node
    let doc = serde_json::to_value(&spec).map_err(|e| CdiError::Invalid(e.to_string()))?;
    if let Err(v) = rules::validate(&doc) {
        return Err(CdiError::Invalid(
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    Ok(Generated {
        spec,
        entries,
        refused,
        not_vfio,
        notes,
        version_reason,
    })
}

/// A device of a kind asked for (none asked for: any).
fn wanted(opts: &Options, d: &PciDevice) -> bool {
    opts.classes.is_empty() || opts.classes.contains(&d.kind)
}

/// The devices asked for (an error names one that is not a PCI function of the host), or
/// every VFIO-owned function of the kinds asked for; sorted by address.
fn candidates<'h>(host: &'h Host, opts: &Options) -> Result<Vec<&'h PciDevice>, CdiError> {
    let explicit = !opts.devices.is_empty();
    let mut candidates: Vec<&PciDevice> = Vec::new();
    if explicit {
        for b in &opts.devices {
            let Some(want) = topo::normalize_bdf(b) else {
                return Err(CdiError::Device(format!(
                    "{b:?} is not a PCI address (expected [dddd:]bb:dd.f)"
                )));
            };
            let Some(d) = host.pci(&want) else {
                return Err(CdiError::Device(format!(
                    "{want}: no such PCI function on {}",
                    host.source
                )));
            };
            if !candidates.iter().any(|c| c.bdf == d.bdf) {
                candidates.push(d);
            }
        }
    } else {
        candidates = host
            .pci_devices
            .iter()
            .filter(|d| d.vfio_bound() && wanted(opts, d))
            .collect();
    }
    candidates.sort_by(|a, b| a.bdf.cmp(&b.bdf));

    Ok(candidates)
}

/// GPUs and accelerators of the kinds asked for that a driver other than vfio-pci holds.
fn not_vfio(host: &Host, opts: &Options) -> Vec<Refusal> {
    host.pci_devices
        .iter()
        .filter(|d| {
            matches!(d.kind, DeviceKind::Gpu | DeviceKind::Accelerator)
                && wanted(opts, d)
                && d.driver.is_some()
                && !d.vfio_bound()
        })
        .map(|d| Refusal {
            bdf: d.bdf.clone(),
            reason: format!("bound to {}, not vfio-pci", driver_name(d)),
        })
        .collect()
}

/// One entry per candidate that can go in the spec (its nodes, names), the others refused.
fn entries(host: &Host, opts: &Options, candidates: Vec<&PciDevice>) -> (Vec<Entry>, Vec<Refusal>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut refused: Vec<Refusal> = Vec::new();
    let mut used_names: BTreeMap<String, String> = BTreeMap::new();
    for d in candidates {
        let (group, nodes) = match nodes_for(host, d, opts.mode) {
            Ok(x) => x,
            Err(reason) => {
                refused.push(Refusal {
                    bdf: d.bdf.clone(),
                    reason,
                });
                continue;
            }
        };
        let cdev = d.vfio_cdev.as_ref().map(|c| c.name.clone());
        if opts.mode == Mode::Iommufd {
            // two functions claiming one cdev is a corrupt source; never name it twice
            if let Some(c) = &cdev {
                if let Some(other) = used_names.get(c) {
                    refused.push(Refusal {
                        bdf: d.bdf.clone(),
                        reason: format!("its cdev {c} is also {other}'s"),
                    });
                    continue;
                }
            }
        }
        let index = entries.len();
        let mut names = vec![index.to_string(), d.bdf.clone()];
        if opts.mode == Mode::Iommufd {
            names.extend(cdev.clone());
        }
        for n in &names {
            used_names.insert(n.clone(), d.bdf.clone());
        }
        entries.push(Entry {
            bdf: d.bdf.clone(),
            index,
            names,
            nodes,
            iommu_group: group,
            cdev,
            vendor_id: d.vendor_id,
            device_id: d.device_id,
            kind: d.kind,
            driver: driver_name(d).to_string(),
        });
    }
    (entries, refused)
}

/// The node every device of the mode shares exists (checked once there are devices, so a
/// host without VFIO devices hears that, not which module it lacks).
fn shared_node(host: &Host, mode: Mode) -> Result<(), CdiError> {
    if let Some(v) = host.vfio.as_ref() {
        match mode {
            Mode::Legacy if v.container.is_none() => {
                return Err(CdiError::Host(format!(
                    "{}: no /dev/vfio/vfio (no sys/class/misc/vfio: vfio not loaded, or a kernel without the VFIO container); use --iommufd",
                    host.source
                )))
            }
            Mode::Iommufd if v.iommufd.is_none() => {
                return Err(CdiError::Host(format!(
                    "{}: no /dev/iommu (no sys/class/misc/iommu): IOMMUFD needs the iommufd module (modprobe iommufd) or use legacy groups without --iommufd",
                    host.source
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the spec leaves to the runtime: device numbers sysfs does not give.
fn notes(host: &Host, entries: &[Entry]) -> Vec<String> {
    let mut notes = Vec::new();
    if host.vfio.is_none() {
        notes.push(format!(
            "{} does not list its VFIO nodes (no /sys/class/misc): device numbers are left out and the runtime takes them from the nodes on the host",
            host.source
        ));
    }
    if let Some(e) = entries
        .iter()
        .find(|e| e.nodes.iter().any(|n| n.dev.is_none()))
    {
        if host.vfio.is_some() {
            notes.push(format!(
                "{}: sysfs gives no device numbers for some of its nodes; those are left for the runtime to stat",
                e.bdf
            ));
        }
    }
    notes
}

/// The spec's devices: each entry under each of its names.
fn devices(host: &Host, opts: &Options, entries: &[Entry]) -> Vec<Device> {
    let by_bdf: BTreeMap<&str, &PciDevice> = host
        .pci_devices
        .iter()
        .map(|d| (d.bdf.as_str(), d))
        .collect();
    let mut devices = Vec::new();
    for e in entries {
        let edits = ContainerEdits {
            env: Vec::new(),
            device_nodes: e.nodes.iter().map(device_node).collect(),
        };
        let ann = match (opts.annotate, by_bdf.get(e.bdf.as_str())) {
            (true, Some(d)) => annotations(e, d),
            _ => BTreeMap::new(),
        };
        for name in &e.names {
            devices.push(Device {
                name: name.clone(),
                annotations: ann.clone(),
                container_edits: edits.clone(),
            });
        }
    }
    devices
}

/// The spec's cdiVersion: the one asked for (not below what the spec needs) or that
/// minimum, and why.
fn version(spec: &Spec, opts: &Options) -> Result<(Version, String), CdiError> {
    let doc = serde_json::to_value(spec).map_err(|e| CdiError::Invalid(e.to_string()))?;
    let (min, why) = minimum_required(&doc);
    let version = match &opts.version {
        None => min,
        Some(s) => {
            let v = Version::parse(s)
                .filter(Version::is_released)
                .ok_or_else(|| {
                    CdiError::Version(format!("{s:?} is not a released CDI spec version"))
                })?;
            if v < min {
                return Err(CdiError::Version(format!(
                    "cdiVersion {v} is too old: this spec needs {min} ({why})"
                )));
            }
            v
        }
    };
    let version_reason = if opts.version.is_some() {
        format!("as asked (the minimum is {min}: {why})")
    } else {
        format!("the minimum this spec needs: {why}")
    };
    Ok((version, version_reason))
}

/// `gpu`, `nic`, … as `--class` spells them.
fn class_name(k: DeviceKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{k:?}").to_lowercase())
}

fn no_devices_message(
    host: &Host,
    refused: &[Refusal],
    not_vfio: &[Refusal],
    classes: &[DeviceKind],
) -> String {
    // VFIO-owned functions the class filter left out: there are some, just not of that class
    let other_classes: Vec<String> = host
        .pci_devices
        .iter()
        .filter(|d| d.vfio_bound() && !classes.is_empty() && !classes.contains(&d.kind))
        .map(|d| format!("{} ({})", d.bdf, class_name(d.kind)))
        .collect();
    let mut msg = if !refused.is_empty() {
        format!(
            "no usable VFIO device on {}: {}",
            host.source,
            refused
                .iter()
                .map(|r| format!("{} {}", r.bdf, r.reason))
                .collect::<Vec<_>>()
                .join("; ")
        )
    } else if host.pci_devices.is_empty() {
        format!("no PCI devices on {}", host.source)
    } else if !other_classes.is_empty() {
        let wanted: Vec<String> = classes.iter().map(|k| class_name(*k)).collect();
        format!(
            "no {} function on {} is bound to vfio-pci (--class {}); bound to vfio-pci: {}",
            wanted.join("/"),
            host.source,
            wanted.join(" --class "),
            other_classes.join(", ")
        )
    } else if !host_has_drivers(host) {
        format!(
            "{} does not say which drivers its PCI devices are bound to (hwloc XML has no drivers): use a sysfs snapshot or the live host",
            host.source
        )
    } else {
        format!(
            "no PCI device on {} is bound to vfio-pci ({} PCI functions)",
            host.source,
            host.pci_devices.len()
        )
    };
    if !not_vfio.is_empty() {
        let list: Vec<String> = not_vfio
            .iter()
            .map(|r| {
                format!(
                    "{} ({})",
                    r.bdf,
                    r.reason.trim_end_matches(", not vfio-pci")
                )
            })
            .collect();
        msg.push_str(&format!(
            "; GPUs/accelerators on other drivers: {}",
            list.join(", ")
        ));
    }
    msg.push_str("; nothing written");
    msg
}

/// The Kubernetes annotation that asks Kata's runtime for one device when it cold-plugs from
/// annotations (no kubelet Pod Resources socket): `cdi.k8s.io/<plugin>_<id>` = `kind=name`,
/// with the key built as the CDI library's `AnnotationKey` does; `None` when the key would be
/// longer than 63 characters.
pub fn request_annotation(kind: &str, name: &str) -> Option<(String, String)> {
    let plugin = kind.replace('/', ".");
    let key_name = format!("{plugin}_{}", name.replace('/', "_"));
    let key = format!("cdi.k8s.io/{key_name}");
    names::validate_annotation_key(&key).ok()?;
    Some((key, format!("{kind}={name}")))
}

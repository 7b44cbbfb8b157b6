//! Which PCI devices a container has, so its CPUs go near them: its CDI device names looked up
//! in the node's CDI specs, and its VFIO device nodes, mapped to PCI addresses through the
//! host model.
//!
//! A CDI name is `vendor/class=device`. Its spec (a JSON file in `/etc/cdi` or `/var/run/cdi`,
//! as `vmtune cdi` writes them) gives the device's nodes — `/dev/vfio/<group>` (legacy VFIO:
//! every function of that IOMMU group) or `/dev/vfio/devices/vfioN` (IOMMUFD: the function
//! whose cdev that is) — and, from `vmtune cdi --annotate`, a `vmtune.io/bdf` annotation. A
//! name whose device part is a PCI address is taken as that address when no spec knows it.
//! What cannot be mapped is said, never guessed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topo::Host;

/// The CDI spec directories containerd reads by default.
pub const DEFAULT_CDI_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// One CDI device: its name and the device nodes and annotations of its spec entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CdiDevice {
    pub nodes: Vec<String>,
    pub annotations: BTreeMap<String, String>,
}

/// The CDI devices of every spec found in some directories, by fully qualified name.
#[derive(Debug, Clone, Default)]
pub struct CdiRegistry {
    pub devices: BTreeMap<String, CdiDevice>,
    /// Spec files that could not be read, and why (said once, at load).
    pub problems: Vec<String>,
}

impl CdiRegistry {
    /// Reads every `*.json` spec in `dirs` (missing directories are fine). YAML specs are
    /// listed as not read.
    pub fn load(dirs: &[PathBuf]) -> CdiRegistry {
        let mut reg = CdiRegistry::default();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                match p.extension().and_then(|e| e.to_str()) {
                    Some("json") => {
                        if let Err(e) = reg.add_file(&p) {
                            reg.problems.push(format!("{}: {e}", p.display()));
                        }
                    }
                    Some("yaml" | "yml") => reg.problems.push(format!(
                        "{}: YAML CDI specs are not read (write JSON)",
                        p.display()
                    )),
                    _ => {}
                }
            }
        }
        reg
    }

    fn add_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        self.add_json(&text)
    }

    /// Adds the devices of one spec's JSON text.
    pub fn add_json(&mut self, text: &str) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let kind = v
            .get("kind")
            .and_then(|k| k.as_str())
            .ok_or("no \"kind\"")?;
        let devices = v
            .get("devices")
            .and_then(|d| d.as_array())
            .ok_or("no \"devices\" list")?;
        for d in devices {
            let Some(name) = d.get("name").and_then(|n| n.as_str()) else {
                continue;
            };
            let nodes = d
                .pointer("/containerEdits/deviceNodes")
                .and_then(|n| n.as_array())
                .map(|ns| {
                    ns.iter()
                        .filter_map(|n| n.get("path").and_then(|p| p.as_str()).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let annotations = d
                .get("annotations")
                .and_then(|a| a.as_object())
                .map(|a| {
                    a.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            self.devices
                .insert(format!("{kind}={name}"), CdiDevice { nodes, annotations });
        }
        Ok(())
    }
}

/// The PCI devices a container has, and what could not be mapped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Normalized BDFs, sorted, each once.
    pub bdfs: Vec<String>,
    /// One phrase per name or node that named no device of the host model.
    pub unresolved: Vec<String>,
}

/// Maps a device node to the host's PCI functions: `/dev/vfio/N` is IOMMU group N,
/// `/dev/vfio/devices/vfioN` the function with that cdev.
fn node_bdfs(host: &Host, node: &str) -> Option<Vec<String>> {
    if let Some(cdev) = node.strip_prefix("/dev/vfio/devices/") {
        let d = host
            .pci_devices
            .iter()
            .find(|d| d.vfio_cdev.as_ref().is_some_and(|c| c.name == cdev))?;
        return Some(vec![d.bdf.clone()]);
    }
    let group: u32 = node.strip_prefix("/dev/vfio/")?.parse().ok()?;
    let in_group: Vec<String> = host
        .pci_devices
        .iter()
        .filter(|d| d.iommu_group == Some(group))
        .map(|d| d.bdf.clone())
        .collect();
    (!in_group.is_empty()).then_some(in_group)
}

/// The devices of a container with these CDI names and device nodes.
pub fn resolve(host: &Host, cdi: &CdiRegistry, names: &[String], nodes: &[String]) -> Resolved {
    let mut out = Resolved::default();
    let mut add = |bdfs: Vec<String>| {
        for b in bdfs {
            if !out.bdfs.contains(&b) {
                out.bdfs.push(b);
            }
        }
    };
    for name in names {
        if let Some(dev) = cdi.devices.get(name) {
            if let Some(bdf) = dev
                .annotations
                .get(&format!("{}bdf", cdi::ANNOTATION_PREFIX))
                .and_then(|b| topo::normalize_bdf(b))
                .filter(|b| host.pci(b).is_some())
            {
                add(vec![bdf]);
                continue;
            }
            let mapped: Vec<String> = dev
                .nodes
                .iter()
                .filter_map(|n| node_bdfs(host, n))
                .flatten()
                .collect();
            if mapped.is_empty() {
                out.unresolved.push(format!(
                    "CDI device {name}: its nodes ({}) name no PCI device of the host model",
                    if dev.nodes.is_empty() {
                        "none".to_string()
                    } else {
                        dev.nodes.join(", ")
                    }
                ));
            } else {
                add(mapped);
            }
            continue;
        }
        let bdf = name
            .split_once('=')
            .and_then(|(_, d)| topo::normalize_bdf(d))
            .filter(|b| host.pci(b).is_some());
        match bdf {
            Some(b) => add(vec![b]),
            None => out.unresolved.push(format!(
                "CDI device {name}: in no CDI spec read, and not a PCI address of the host"
            )),
        }
    }
    for node in nodes
        .iter()
        .filter(|n| n.starts_with("/dev/vfio/") && *n != "/dev/vfio/vfio")
    {
        match node_bdfs(host, node) {
            Some(b) => add(b),
            None => out.unresolved.push(format!(
                "device {node}: no PCI device of the host model has it"
            )),
        }
    }
    // the container's own node list repeats what its CDI devices add: each once
    out.bdfs.sort();
    out.bdfs.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        topo::load_path(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/topologies/hwloc/nvidiaDGX2.xml"),
        )
        .expect("DGX-2 topology")
    }

    #[test]
    fn a_cdi_name_maps_by_annotation_node_or_address() {
        let h = host();
        let gpu = h.gpus().next().expect("a GPU").bdf.clone();
        let mut reg = CdiRegistry::default();
        reg.add_json(&format!(
            r#"{{"cdiVersion":"0.5.0","kind":"vmtune.io/vfio","devices":[
                {{"name":"0","annotations":{{"vmtune.io/bdf":"{gpu}"}},"containerEdits":{{"deviceNodes":[{{"path":"/dev/vfio/999"}}]}}}},
                {{"name":"nowhere","containerEdits":{{"deviceNodes":[{{"path":"/dev/vfio/9999"}}]}}}}]}}"#
        ))
        .unwrap();
        let r = resolve(&h, &reg, &["vmtune.io/vfio=0".into()], &[]);
        assert_eq!(r.bdfs, vec![gpu.clone()]);
        assert!(r.unresolved.is_empty());
        // not in any spec, but its device part is a PCI address of the host
        let r = resolve(&h, &reg, &[format!("other.io/gpu={gpu}")], &[]);
        assert_eq!(r.bdfs, vec![gpu]);
        let r = resolve(
            &h,
            &reg,
            &["vmtune.io/vfio=nowhere".into(), "x.io/y=z".into()],
            &[],
        );
        assert!(r.bdfs.is_empty());
        assert_eq!(r.unresolved.len(), 2, "{:?}", r.unresolved);
    }

    #[test]
    fn a_bad_spec_is_an_error_not_a_panic() {
        let mut reg = CdiRegistry::default();
        assert!(reg.add_json("{").is_err());
        assert!(reg.add_json("{\"kind\":1}").is_err());
        assert!(reg.add_json("{\"kind\":\"a/b\",\"devices\":[{}]}").is_ok());
        assert!(reg.devices.is_empty());
    }
}

//! The user's own VM as the request: what a VM definition (a libvirt domain) says of its
//! vCPUs, memory, devices and name, merged with the flags that override it. Pure: the caller
//! reads the definition; this decides what the plan is asked for and what it must say.

use crate::memory::human_bytes;
use crate::PlanError;

/// What a VM definition says of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// How messages name it ("domain win10").
    pub source: String,
    pub name: Option<String>,
    pub vcpus: u32,
    pub memory_bytes: u64,
    /// Its passed-through PCI devices (normalized BDFs), in document order.
    pub devices: Vec<String>,
}

/// What the flags say; `None` (or empty) where not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    pub name: Option<String>,
    pub vcpus: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub devices: Vec<String>,
}

/// The request's vCPUs, memory, devices and name, and what the plan says about where they
/// came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub name: Option<String>,
    pub vcpus: u32,
    pub memory_bytes: u64,
    pub devices: Vec<String>,
    /// Where the request came from, and each flag that overrode the definition.
    pub rationale: Vec<String>,
    /// A definition shrunk by a flag, devices the definition does not pass through.
    pub warnings: Vec<String>,
}

/// The request from the flags alone, or from a definition with the flags overriding it.
/// Without a definition `--vcpus` and `--memory` are required.
pub fn merge(def: Option<&Definition>, given: Given) -> Result<Merged, PlanError> {
    let Some(def) = def else {
        let missing: Vec<&str> = [
            given.vcpus.is_none().then_some("--vcpus"),
            given.memory_bytes.is_none().then_some("--memory"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !missing.is_empty() {
            return Err(PlanError::Refused(format!(
                "{} needed: give them, or --domain FILE|NAME to plan a libvirt domain's own vCPUs, memory and devices",
                missing.join(" and ")
            )));
        }
        return Ok(Merged {
            name: given.name,
            vcpus: given.vcpus.unwrap_or_default(),
            memory_bytes: given.memory_bytes.unwrap_or_default(),
            devices: given.devices,
            rationale: Vec::new(),
            warnings: Vec::new(),
        });
    };
    let src = &def.source;
    let mut rationale = Vec::new();
    let mut warnings = Vec::new();
    let mut from_def = Vec::new();
    let vcpus = match given.vcpus {
        None => {
            from_def.push(format!("{} vCPUs", def.vcpus));
            def.vcpus
        }
        Some(v) if v < def.vcpus => {
            warnings.push(format!(
                "--vcpus {v} shrinks {src} from its {} vCPUs: the plan and the patched domain have {v}",
                def.vcpus
            ));
            v
        }
        Some(v) => {
            if v != def.vcpus {
                rationale.push(format!("--vcpus {v} overrides {src}'s {} vCPUs", def.vcpus));
            }
            v
        }
    };
    let memory_bytes = match given.memory_bytes {
        None => {
            from_def.push(human_bytes(def.memory_bytes));
            def.memory_bytes
        }
        Some(m) if m < def.memory_bytes => {
            warnings.push(format!(
                "--memory {} shrinks {src} from its {}: the plan and the patched domain have {}",
                human_bytes(m),
                human_bytes(def.memory_bytes),
                human_bytes(m)
            ));
            m
        }
        Some(m) => {
            if m != def.memory_bytes {
                rationale.push(format!(
                    "--memory {} overrides {src}'s {}",
                    human_bytes(m),
                    human_bytes(def.memory_bytes)
                ));
            }
            m
        }
    };
    let mut devices = def.devices.clone();
    if !def.devices.is_empty() {
        from_def.push(format!("its PCI hostdevs {}", def.devices.join(", ")));
    }
    for d in &given.devices {
        let norm = |b: &str| topo::normalize_bdf(b).unwrap_or_else(|| b.to_string());
        let known = def.devices.iter().any(|x| norm(x) == norm(d));
        if !known {
            warnings.push(format!(
                "--gpu {d} is not a <hostdev> of {src}: the plan places it, but the patched domain does not pass it through (add a <hostdev> for it)"
            ));
            devices.push(d.clone());
        }
    }
    let name = match (given.name, &def.name) {
        (Some(n), Some(d)) if &n != d => {
            rationale.push(format!("--name {n} overrides {src}'s name {d}"));
            Some(n)
        }
        (Some(n), _) => Some(n),
        (None, d) => {
            if let Some(d) = d {
                from_def.push(format!("its name {d}"));
            }
            d.clone()
        }
    };
    if !from_def.is_empty() {
        rationale.insert(
            0,
            format!("the request is {src}'s own: {}", from_def.join(", ")),
        );
    }
    Ok(Merged {
        name,
        vcpus,
        memory_bytes,
        devices,
        rationale,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> Definition {
        Definition {
            source: "domain win10".into(),
            name: Some("win10".into()),
            vcpus: 12,
            memory_bytes: 16 << 30,
            devices: vec!["0000:01:00.0".into(), "0000:01:00.1".into()],
        }
    }

    #[test]
    fn the_definition_is_the_request() {
        let m = merge(Some(&def()), Given::default()).unwrap();
        assert_eq!((m.vcpus, m.memory_bytes), (12, 16 << 30));
        assert_eq!(m.devices, def().devices);
        assert_eq!(m.name.as_deref(), Some("win10"));
        assert!(m.warnings.is_empty());
        assert!(m.rationale[0].contains("12 vCPUs, 16 GiB, its PCI hostdevs 0000:01:00.0"));
    }

    #[test]
    fn a_shrink_is_warned_and_an_override_said() {
        let given = Given {
            vcpus: Some(1),
            memory_bytes: Some(32 << 30),
            devices: vec!["01:00.0".into(), "02:00.0".into()],
            ..Given::default()
        };
        let m = merge(Some(&def()), given).unwrap();
        assert_eq!((m.vcpus, m.memory_bytes), (1, 32 << 30));
        assert!(m
            .warnings
            .iter()
            .any(|w| w.contains("--vcpus 1 shrinks domain win10 from its 12")));
        assert!(m
            .rationale
            .iter()
            .any(|r| r.contains("--memory 32 GiB overrides")));
        // 01:00.0 is the domain's own; 02:00.0 is not, and the patch will not add it
        assert_eq!(m.devices.len(), 3);
        assert!(m
            .warnings
            .iter()
            .any(|w| w.contains("--gpu 02:00.0 is not a <hostdev>")));
    }

    #[test]
    fn without_a_definition_vcpus_and_memory_are_needed() {
        let e = merge(None, Given::default()).unwrap_err().to_string();
        assert!(e.starts_with("--vcpus and --memory needed"), "{e}");
        let e = merge(
            None,
            Given {
                vcpus: Some(2),
                ..Given::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--memory needed"), "{e}");
    }
}

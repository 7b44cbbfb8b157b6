//! The host's housekeeping CPUs: a property of the host, chosen once and kept.
//!
//! The first plan on a host chooses them (or takes `--host-cpus`); every later plan keeps
//! what its tenants were planned with, so the host's interrupts, daemons and every VM's
//! shared emulator threads stay on the same cores however many VMs arrive. Moving them is an
//! error unless the request accepts it (`move_host_cpus`), because the tenants' applied
//! settings (interrupt routing, cpusets) still name the old ones.
//!
//! A tenant's emulator and iothread CPUs that are the housekeeping CPUs are shared with the
//! host, never the tenant's own: [`taken`] leaves them out.
//!
//! [`choose`] writes the housekeeping's "Why" sentence beside the choice it explains (kept,
//! requested, moved or chosen); it reaches `crate::rationale` in `Context.rationale`.

use topo::{CpuSet, Host};

use crate::model::CoreInfo;
use crate::{PlanError, Request, Tenant};

/// CPUs the tenants hold: everything they pin except emulator/iothread CPUs that are the
/// host's housekeeping CPUs.
pub fn taken(tenants: &[Tenant], host_cpus: &CpuSet) -> CpuSet {
    tenants.iter().fold(CpuSet::new(), |acc, t| {
        let shared = t.emulator_cpus.intersection(host_cpus);
        acc.union(&t.cpus.difference(&shared))
    })
}

/// CPUs a tenant holds whatever the housekeeping is: its vCPUs (emulator and iothread CPUs
/// may be shared with the host).
fn exclusive(t: &Tenant) -> CpuSet {
    t.cpus.difference(&t.emulator_cpus)
}

/// `cpus` widened to whole cores; an error names a CPU the host lacks.
fn whole_cores(
    cpus: &CpuSet,
    host: &Host,
    cores: &[CoreInfo],
    pu_core: impl Fn(u32) -> Option<u32>,
    what: &str,
) -> Result<CpuSet, PlanError> {
    let mut out = CpuSet::new();
    for cpu in cpus.iter() {
        if host.pu(cpu).is_none() {
            return Err(PlanError::Refused(format!(
                "{what} names CPU {cpu}, which this host does not have (CPUs {})",
                host.all_cpus()
            )));
        }
        if let Some(c) = pu_core(cpu).and_then(|c| cores.get(c as usize)) {
            for &p in &c.pus {
                out.insert(p);
            }
        }
    }
    Ok(out)
}

/// The housekeeping CPUs for this plan (whole cores).
pub fn choose(
    req: &Request,
    host: &Host,
    cores: &[CoreInfo],
    pu_core: impl Fn(u32) -> Option<u32> + Copy,
    tenants: &[Tenant],
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<CpuSet, PlanError> {
    // what the tenants were planned with (plan JSON tenants say; libvirt domains do not)
    let mut kept: Vec<(CpuSet, Vec<&str>)> = Vec::new();
    for t in tenants {
        let Some(h) = &t.host_cpus else { continue };
        let h = whole_cores(h, host, cores, pu_core, &format!("tenant {:?}", t.name))?;
        match kept.iter_mut().find(|(k, _)| *k == h) {
            Some((_, names)) => names.push(&t.name),
            None => kept.push((h, vec![&t.name])),
        }
    }
    let names = |n: &[&str]| {
        let shown: Vec<String> = n.iter().take(3).map(|s| format!("{s:?}")).collect();
        let more = if n.len() > 3 {
            format!(" and {} more", n.len() - 3)
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    };
    let exclusive_cpus = tenants
        .iter()
        .fold(CpuSet::new(), |acc, t| acc.union(&exclusive(t)));

    let out = if let Some(given) = &req.host_cpus {
        if given.is_empty() {
            return Err(PlanError::Refused(
                "--host-cpus is empty: the host needs at least one core".into(),
            ));
        }
        let out = whole_cores(given, host, cores, pu_core, "--host-cpus")?;
        if &out != given {
            rationale.push(format!(
                "host CPUs {given} widened to whole cores {out}: a core is never split between host and guest"
            ));
        } else {
            rationale.push(format!("host CPUs {out} as requested"));
        }
        let moved: Vec<&(CpuSet, Vec<&str>)> = kept.iter().filter(|(k, _)| *k != out).collect();
        if let Some((old, who)) = moved.first() {
            if !req.move_host_cpus {
                return Err(PlanError::Refused(format!(
                    "--host-cpus {out} moves the host housekeeping from {old}, which tenant(s) {} were planned with; add --move-host-cpus to accept, then re-plan and re-apply those tenants",
                    names(who)
                )));
            }
            warnings.push(format!(
                "host housekeeping moved from {old} to {out} (accepted with --move-host-cpus): re-plan and re-apply tenant(s) {} so their interrupt routing and cpusets agree",
                names(who)
            ));
        }
        out
    } else if let Some((first, who)) = kept.first() {
        if let Some((other, who2)) = kept.get(1) {
            return Err(PlanError::Refused(format!(
                "tenants were planned with different host housekeeping CPUs ({first} for {}; {other} for {}): give --host-cpus to say which the host keeps",
                names(who),
                names(who2)
            )));
        }
        rationale.push(format!(
            "host housekeeping CPUs {first}: kept as tenant(s) {} were planned (housekeeping is chosen once per host, so interrupts, daemons and shared emulator threads stay put as VMs arrive)",
            names(who)
        ));
        first.clone()
    } else {
        let want = (cores.len() / 32).max(1);
        let default: Vec<&CoreInfo> = cores.iter().take(want).collect();
        let blocked = default
            .iter()
            .flat_map(|c| c.pus.iter().copied())
            .filter(|&p| exclusive_cpus.contains(p))
            .collect::<CpuSet>();
        let picked: Vec<&CoreInfo> = if blocked.is_empty() {
            default
        } else {
            let who: Vec<&str> = tenants
                .iter()
                .filter(|t| exclusive(t).intersects(&blocked))
                .map(|t| t.name.as_str())
                .collect();
            if !req.move_host_cpus {
                return Err(PlanError::Refused(format!(
                    "tenant(s) {} pin CPU(s) {blocked} of the host's default housekeeping core(s): give --host-cpus, or add --move-host-cpus to take the first free core(s)",
                    names(&who)
                )));
            }
            let picked: Vec<&CoreInfo> = cores
                .iter()
                .filter(|c| !c.pus.iter().any(|&p| exclusive_cpus.contains(p)))
                .take(want)
                .collect();
            if picked.is_empty() {
                return Err(PlanError::Refused(format!(
                    "tenants pin every core ({exclusive_cpus}): no core is left for the host"
                )));
            }
            let cpus: CpuSet = picked.iter().flat_map(|c| c.pus.iter().copied()).collect();
            warnings.push(format!(
                "host housekeeping moved to {cpus} (accepted with --move-host-cpus): tenant(s) {} pin CPU(s) {blocked} of the first core(s)",
                names(&who)
            ));
            picked
        };
        let out: CpuSet = picked.iter().flat_map(|c| c.pus.iter().copied()).collect();
        rationale.push(format!(
            "host housekeeping CPUs {out}: {} whole core{} ({}), SMT siblings included, kept for the host kernel, interrupts and daemons (VFIO gaming-host write-up); later plans keep them",
            picked.len(),
            if picked.len() == 1 { "" } else { "s" },
            if want == 1 {
                "the first core".to_string()
            } else {
                format!("the first cores, one per 32 cores of this {}-core host", cores.len())
            }
        ));
        out
    };
    if out.intersects(&exclusive_cpus) {
        warnings.push(format!(
            "host CPUs {out} overlap CPUs pinned by tenants ({})",
            out.intersection(&exclusive_cpus)
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use topo::CpuSet;

    use crate::{plan, GuestOs, HugepagePolicy, Profile, Request, Tenant};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn req(vcpus: u32) -> Request {
        Request {
            name: Some("vm".into()),
            vcpus,
            memory_bytes: 2 << 30,
            devices: vec![],
            profile: Profile::Gaming,
            os: GuestOs::Linux,
            hugepages: HugepagePolicy::None,
            host_cpus: None,
            move_host_cpus: false,
            threads: crate::ThreadPolicy::Auto,
        }
    }

    #[test]
    fn an_emulator_on_the_housekeeping_cpus_does_not_take_them() {
        let host = topo::builtin::default_host();
        // 14 vCPUs fill every free core: the emulator shares the housekeeping CPUs
        let a = plan(&req(14), &host, &[]).unwrap();
        assert_eq!(a.emulator_cpus, a.host_cpus);
        let ta = Tenant::from_plan(&a);
        assert_eq!(ta.emulator_cpus, a.host_cpus);
        // nothing is left for a second VM, and the refusal names no moved housekeeping
        let e = plan(&req(1), &host, &[ta]).unwrap_err().to_string();
        assert!(e.contains("host keeps 0,8"), "{e}");
    }

    #[test]
    fn given_housekeeping_is_kept_by_later_plans() {
        let host = topo::builtin::default_host();
        let mut r = req(4);
        r.host_cpus = Some(set("3"));
        let a = plan(&r, &host, &[]).unwrap();
        assert_eq!(a.host_cpus, set("3,11"));
        let ta = Tenant::from_plan(&a);
        let b = plan(&req(4), &host, std::slice::from_ref(&ta)).unwrap();
        assert_eq!(b.host_cpus, set("3,11"));
        assert!(b.rationale.iter().any(|l| l.contains("kept as tenant")));
        // another --host-cpus moves it: refused unless accepted
        let mut moved = req(2);
        moved.host_cpus = Some(set("0"));
        let e = plan(&moved, &host, std::slice::from_ref(&ta))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("moves the host housekeeping from 3,11") && e.contains("--move-host-cpus"),
            "{e}"
        );
        moved.move_host_cpus = true;
        let c = plan(&moved, &host, std::slice::from_ref(&ta)).unwrap();
        assert_eq!(c.host_cpus, set("0,8"));
        assert!(c.warnings.iter().any(|w| w.contains("moved from 3,11")));
        // the same --host-cpus again is no move
        let mut same = req(2);
        same.host_cpus = Some(set("11"));
        assert_eq!(plan(&same, &host, &[ta]).unwrap().host_cpus, set("3,11"));
    }

    #[test]
    fn tenants_that_disagree_are_refused() {
        let host = topo::builtin::default_host();
        let mut r = req(2);
        r.host_cpus = Some(set("7"));
        let a = Tenant::from_plan(&plan(&r, &host, &[]).unwrap());
        let b = Tenant::from_plan(&plan(&req(2), &host, &[]).unwrap());
        let mut b = b;
        b.name = "b".into();
        b.cpus = set("4,12");
        let e = plan(&req(2), &host, &[a, b]).unwrap_err().to_string();
        assert!(e.contains("different host housekeeping"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_domain_pinning_the_first_core_is_refused_unless_accepted() {
        let host = topo::builtin::default_host();
        // a libvirt domain (no housekeeping recorded) with vCPUs on 0-3,8-11
        let t = Tenant {
            name: "win10".into(),
            cpus: set("0-3,8-11"),
            ..Tenant::default()
        };
        let e = plan(&req(2), &host, std::slice::from_ref(&t))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pin CPU(s) 0,8 of the host's default housekeeping"),
            "{e}"
        );
        let mut r = req(2);
        r.move_host_cpus = true;
        let p = plan(&r, &host, &[t]).unwrap();
        assert_eq!(p.host_cpus, set("4,12"));
        assert!(p.warnings.iter().any(|w| w.contains("moved to 4,12")));
    }

    #[test]
    fn the_write_ups_domain_shares_the_housekeeping_with_its_emulator() {
        let host = topo::builtin::default_host();
        // the VFIO gaming-host write-up: guest on 2-7,10-15, emulator on the host's 0-1,8-9
        let t = Tenant {
            name: "win10".into(),
            cpus: set("0-15"),
            emulator_cpus: set("0-1,8-9"),
            ..Tenant::default()
        };
        // the housekeeping stays on the first core (no move, no error about it); the
        // emulator's 1,9 beside it stay the domain's, so nothing is left for a second VM
        let e = plan(&req(2), &host, &[t]).unwrap_err().to_string();
        assert!(e.contains("host keeps 0,8, tenants pin 1-7,9-15"), "{e}");
    }
}

//! Where the VM's emulator and iothreads go, once its cores are chosen.
//!
//! The VFIO gaming-host write-up pins QEMU's emulator to threads of its own so its I/O work
//! neither preempts vCPUs nor lands on another VM. The rule, in order:
//!
//! 1. a spare whole core inside one of the VM's own L3 groups (its cache traffic stays with
//!    its own VM);
//! 2. a spare core in the host's L3 group (which the housekeeping already shares), unless
//!    another tenant's vCPUs use that group (other VMs' emulators there are fine: the host's
//!    group is where emulators go);
//! 3. the housekeeping CPUs themselves.
//!
//! Rules 1 and 2 take cores on the VM's nodes; rule 2 also takes a spare core of the host's
//! L3 group on another node when none of the housekeeping CPUs are on the VM's nodes: rule 3
//! would put the emulator on that other node anyway, on the CPUs the host's interrupts and
//! daemons use, and a core of its own beside them is no farther from the VM (on g4dn.metal a
//! 48-vCPU VM filling the GPU's node 1 shared CPUs 0,48 while 23 cores of the host's L3 on
//! node 0 were free). Where housekeeping CPUs are on the VM's nodes they are nearer than such
//! a core, and rule 3 keeps them.
//!
//! Never a core of an L3 group no one uses (that would spoil a clean group for the next VM)
//! and never one another tenant's vCPUs use. Among equals: on the VM's nodes, nearest the
//! devices, an efficiency core before a performance core (leave the fast cores to vCPUs), an
//! L2 cluster the VM or the host already uses before a clean one, the lowest core. On hosts
//! whose model has no L3 at all, any spare core on the VM's nodes counts as its own group.
//!
//! The emulator is not part of the guest's cost (it is the VM's own), so the guest's cores are
//! chosen first; [`settle`] then gives the emulator the lowest core of its class inside the
//! VM's footprint, so the host, the emulator and the guest read left to right (the write-up's
//! host and emulator on 0-1,8-9, guest on 2-7,10-15).

use std::cmp::Reverse;

use topo::CpuSet;

use crate::context::Context;

/// Which rule placed the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// A spare core in one of the VM's own L3 groups (or, on hosts with no L3 in the model,
    /// on the VM's nodes).
    OwnL3,
    /// A spare core in the host's L3 group (on the VM's nodes, or on the housekeeping's when
    /// none of it is on the VM's nodes).
    HostL3,
    /// The housekeeping CPUs.
    HostCpus,
}

/// The emulator's place: a core, or the housekeeping CPUs (`core: None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emulator {
    pub core: Option<u32>,
    pub place: Place,
}

/// The emulator for a VM on `nodes` whose guest cores are `guest`.
pub fn choose(ctx: &Context, nodes: &[u32], guest: &[u32]) -> Emulator {
    let own_l3: Vec<u32> = guest
        .iter()
        .filter_map(|&g| ctx.cores.get(g as usize).and_then(|c| c.l3))
        .collect();
    let own_l2: Vec<u32> = guest
        .iter()
        .filter_map(|&g| ctx.cores.get(g as usize).and_then(|c| c.l2))
        .collect();
    let l2_rank = |l2: Option<u32>| -> u32 {
        let Some(l) = l2 else { return 2 };
        let cpus = ctx.l2_cpus.get(&l);
        if own_l2.contains(&l) {
            0
        } else if cpus.is_some_and(|s| s.intersects(&ctx.host_cpus)) {
            1
        } else if cpus.is_some_and(|s| s.intersects(&ctx.tenant_cpus)) {
            3
        } else {
            2
        }
    };
    // off the VM's nodes only where the housekeeping CPUs are off them too
    let housekeeping_away = !ctx
        .host_cpus
        .iter()
        .any(|cpu| nodes.contains(&ctx.node_of(cpu)));
    let host_group = |l: u32| ctx.host_l3.contains(&l) && !ctx.tenant_vcpu_l3.contains(&l);
    ctx.cores
        .iter()
        .filter(|c| c.free && !guest.contains(&c.id))
        .filter_map(|c| {
            let away = !nodes.contains(&c.node);
            let place = match c.l3 {
                Some(l) if away && housekeeping_away && host_group(l) => Place::HostL3,
                _ if away => return None,
                _ if !ctx.has_l3 => Place::OwnL3,
                Some(l) if own_l3.contains(&l) => Place::OwnL3,
                Some(l) if host_group(l) => Place::HostL3,
                _ => return None,
            };
            let to_vm = if away {
                nodes
                    .iter()
                    .map(|&n| ctx.distance(c.node, n))
                    .min()
                    .unwrap_or(0)
            } else {
                0
            };
            let key = (
                place,
                away,
                to_vm,
                ctx.node_device_distance(c.node),
                Reverse(c.kind),
                l2_rank(c.l2),
                c.id,
            );
            Some((key, c.id))
        })
        .min()
        .map(|((place, ..), id)| Emulator {
            core: Some(id),
            place,
        })
        .unwrap_or(Emulator {
            core: None,
            place: Place::HostCpus,
        })
}

/// Give the emulator the lowest core of its class (node, L3, L2 cluster, kind, threads)
/// among its own and the guest's: those cores are interchangeable for every cost term, so
/// the guest's cost is unchanged. `guest` stays sorted.
pub fn settle(ctx: &Context, guest: &mut [u32], emulator: &mut Emulator) {
    let Some(e) = emulator.core else { return };
    let class = |id: u32| {
        ctx.cores
            .get(id as usize)
            .map(|c| (c.node, c.l3, c.l2, c.kind, c.pus.len()))
    };
    let Some(want) = class(e) else { return };
    if let Some(slot) = guest
        .iter_mut()
        .filter(|g| **g < e && class(**g) == Some(want))
        .min_by_key(|g| **g)
    {
        emulator.core = Some(*slot);
        *slot = e;
    }
    guest.sort_unstable();
}

/// The emulator's CPUs: its core's PUs, or the housekeeping CPUs.
pub fn cpus(ctx: &Context, emulator: &Emulator) -> CpuSet {
    match emulator.core.and_then(|e| ctx.cores.get(e as usize)) {
        Some(c) => c.pus.iter().copied().collect(),
        None => ctx.host_cpus.clone(),
    }
}

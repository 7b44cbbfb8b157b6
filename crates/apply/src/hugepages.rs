//! Hugepage pools: what the kernel does with `nr_hugepages`, how many pages a VM can take,
//! and how many a restore gives back.
//!
//! # What the kernel does (mm/hugetlb.c `set_max_huge_pages`, checked on this host)
//!
//! Per node and page size, sysfs shows `nr_hugepages` (the pool, surplus pages included),
//! `surplus_hugepages` (pages above the persistent count, freed as soon as their user lets
//! go) and `free_hugepages` (pages no mapping has faulted in; pages a mapping has reserved
//! but not touched yet are counted as free; `/sys/kernel/mm/hugepages/hugepages-<size>/
//! resv_hugepages` counts those, for all nodes together). Writing N to `nr_hugepages` asks
//! for N *persistent* pages:
//!
//! * growing first turns surplus pages back into persistent ones, then allocates;
//! * shrinking frees free, unreserved pages, and turns the pages it may not free (in use or
//!   reserved) into surplus pages instead. Lowering below what is in use never takes a page
//!   from its user; the kernel frees it when the user lets go.
//!
//! # vmtune's rule: give back what you added
//!
//! Several VMs (and other programs) share a pool. An apply adds only the pages its VM lacks
//! and journals the persistent count before, the count it wrote, and the count it read back;
//! a restore lowers the persistent pool by the pages *that* apply added, from whatever the
//! pool holds then, never to the old absolute value. So, whatever the order in which VMs are
//! released, and whatever others reserve meanwhile, every reservation stays until its owner
//! gives it back, and when every VM is gone the pool is what it was plus what others added.
//! A restore lowers the pool even when some of the pages are in use (another VM took free
//! pages this apply had added): the kernel keeps those as surplus pages until their user
//! stops, then frees them; the report says how many were freed at once and how many later.
//! For one apply and its restore (also after a crash or `kill -9`), this is exactly the
//! old value.
//!
//! Each apply and each give-back holds an `flock` on the pool's `nr_hugepages` from the read
//! that decides the count to the write (the engine's `lock_pools`), so applies with
//! different journals never grow the pool from the same count.
//!
//! # Claims: pages promised to a VM that has not started yet
//!
//! Pages an apply counted for its VM stay free until that VM's QEMU maps them, and the
//! kernel does not say for whom they are: a second `prepare` in between would count them as
//! available, and one of the two VMs would start short. So the libvirt hook's `prepare`
//! leaves a [`Claim`] (its pages per node) in the journal directory, written while it still
//! holds the pools' locks; a later prepare takes the other VMs' live claims off the pages it
//! counts as available. A claim ends when its VM has mapped its memory: at `started`, at
//! `release`, and — should the hook miss those (it gave up after its timeout) — when its
//! journal has been restored or its QEMU holds the pages already.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{read_trim, ApplyError, Result};

/// One node's pool of one page size, as sysfs shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pool {
    /// `nr_hugepages`: surplus pages included.
    pub total: u64,
    /// `surplus_hugepages`.
    pub surplus: u64,
    /// `free_hugepages`: reserved-but-untouched pages included.
    pub free: u64,
}

impl Pool {
    /// The persistent pool: what writing `nr_hugepages` sets.
    pub fn persistent(&self) -> u64 {
        self.total.saturating_sub(self.surplus)
    }

    /// Read a pool directory (`…/node0/hugepages/hugepages-2048kB`). A missing
    /// `surplus_hugepages` reads as 0 (plain files standing in for sysfs).
    pub fn read(dir: &Path) -> Result<Pool> {
        let surplus = dir.join("surplus_hugepages");
        Ok(Pool {
            total: read_count(&dir.join("nr_hugepages"))?,
            surplus: if surplus.exists() {
                read_count(&surplus)?
            } else {
                0
            },
            free: read_count(&dir.join("free_hugepages"))?,
        })
    }

    /// Pages a new mapping can take: the free pages no mapping has reserved. `reserved` is
    /// the size's `resv_hugepages` (all nodes: on a multi-node host an upper bound for this
    /// node, so a VM is never promised a page another mapping holds).
    pub fn available(&self, reserved: u64) -> u64 {
        self.free.saturating_sub(reserved)
    }
}

/// The `nr_hugepages` to write so that `need` pages are available, or `None` when they are
/// already. Counted from the whole pool (surplus included): the kernel turns surplus pages,
/// which are all in use, into persistent ones before it allocates, so asking for the
/// persistent count plus the shortfall would not make one page free.
pub fn grow_to(pool: &Pool, reserved: u64, need: u64) -> Option<u64> {
    let avail = pool.available(reserved);
    (avail < need).then(|| pool.total + (need - avail))
}

/// Pages a `prepare` counted for its VM, per NUMA node, until the VM has mapped them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Who claims: the libvirt domain.
    pub owner: String,
    pub size_kb: u64,
    /// Pages per node.
    pub pages: BTreeMap<u32, u64>,
    /// The journal of the apply that made the claim: restored (gone), the claim has lapsed.
    pub journal: PathBuf,
}

const CLAIM_SUFFIX: &str = ".hugepage-claim.json";

/// Where `owner`'s claim lives in `dir`.
pub fn claim_path(dir: &Path, owner: &str) -> PathBuf {
    dir.join(format!("{owner}{CLAIM_SUFFIX}"))
}

/// Write a claim (replacing the owner's earlier one): to a temporary file, then renamed,
/// so a reader sees the old claim or the new one, never a part.
pub fn write_claim(dir: &Path, c: &Claim) -> Result<()> {
    let path = claim_path(dir, &c.owner);
    let tmp = dir.join(format!(".{}{CLAIM_SUFFIX}.tmp", c.owner));
    let text = serde_json::to_string_pretty(c)
        .map_err(|e| ApplyError::Other(format!("claim of {}: {e}", c.owner)))?;
    std::fs::write(&tmp, text + "\n").map_err(|e| ApplyError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| ApplyError::io(&path, e))
}

/// End `owner`'s claim; `true` when there was one.
pub fn drop_claim(dir: &Path, owner: &str) -> Result<bool> {
    let path = claim_path(dir, owner);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ApplyError::io(&path, e)),
    }
}

/// The claims in `dir`, each with its file; a file that does not read as a claim comes
/// back as its error (the caller says so and counts it as no claim).
pub fn read_claims(dir: &Path) -> Vec<(PathBuf, std::result::Result<Claim, String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, std::result::Result<Claim, String>)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(CLAIM_SUFFIX) && !n.starts_with('.'))
        })
        .map(|p| {
            let c = std::fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|t| parse_claim(&t));
            (p, c)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A claim file's text (anything may be there: a crash, a hand edit).
pub fn parse_claim(text: &str) -> std::result::Result<Claim, String> {
    serde_json::from_str::<Claim>(text).map_err(|e| e.to_string())
}

/// Pages of size `size_kb` on `node` that other VMs' claims hold (`claims`: the live ones;
/// the claim of `owner` itself and claims of another size are not counted).
pub fn claimed(claims: &[Claim], owner: &str, size_kb: u64, node: u32) -> u64 {
    claims
        .iter()
        .filter(|c| c.owner != owner && c.size_kb == size_kb)
        .filter_map(|c| c.pages.get(&node))
        .sum()
}

/// How many persistent pages a journaled reservation added: from the persistent count read
/// back right after the write when the journal has it, else (a crash between the write and
/// its record) from what was asked, capped by what the pool holds now.
pub fn added(previous: u64, new: u64, applied: Option<u64>, persistent_now: u64) -> u64 {
    match applied {
        Some(a) => a.saturating_sub(previous),
        None => new.min(persistent_now).saturating_sub(previous),
    }
}

/// What a restore does with one reservation: lower the persistent pool from `from` to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GiveBack {
    /// Pages the apply added.
    pub added: u64,
    /// The persistent pool now.
    pub from: u64,
    /// The persistent pool to write.
    pub to: u64,
}

impl GiveBack {
    /// Lower `persistent_now` by `added`, but not below zero.
    pub fn new(persistent_now: u64, added: u64) -> GiveBack {
        GiveBack {
            added,
            from: persistent_now,
            to: persistent_now.saturating_sub(added),
        }
    }

    /// Pages taken off the persistent pool.
    pub fn returned(&self) -> u64 {
        self.from - self.to
    }

    /// Pages the apply added that were no longer in the pool (someone lowered it).
    pub fn missing(&self) -> u64 {
        self.added - self.returned()
    }
}

/// What a restore gave back, for the report (`pages` of a hugepage step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Returned {
    /// Pages the apply had added to the persistent pool.
    pub added: u64,
    /// Pages taken off the persistent pool by this restore.
    pub returned: u64,
    /// Of those, pages the kernel freed at once.
    pub freed: u64,
    /// Of those, pages still in use (by another VM or program): surplus pages now, freed by
    /// the kernel when their user lets go.
    pub in_use: u64,
    /// Pages the apply added that were gone already (the pool had been lowered by someone
    /// else), so nothing was left to give back for them.
    pub missing: u64,
}

impl Returned {
    /// From the plan of the give-back and the pool read before and after writing it.
    pub fn new(g: &GiveBack, before: &Pool, after: &Pool) -> Returned {
        let returned = g.returned();
        let freed = before.total.saturating_sub(after.total).min(returned);
        Returned {
            added: g.added,
            returned,
            freed,
            in_use: returned - freed,
            missing: g.missing(),
        }
    }

    /// One sentence for the report.
    pub fn sentence(&self) -> String {
        let mut s = format!(
            "gave back {} of the {} pages this apply added",
            self.returned, self.added
        );
        if self.in_use > 0 {
            s += &format!(
                " ({} freed now; {} still in use by another VM or program: the kernel frees them when it lets go)",
                self.freed, self.in_use
            );
        }
        if self.missing > 0 {
            s += &format!(
                "; {} could not be given back: the pool had been lowered by someone else",
                self.missing
            );
        }
        s
    }
}

fn read_count(path: &Path) -> Result<u64> {
    let s = read_trim(path)?;
    s.parse()
        .map_err(|_| ApplyError::parse(path, format!("not a page count: {s:?}")))
}

#[cfg(test)]
pub(crate) mod kernel {
    //! The kernel's pool of one size on one node, as `set_max_huge_pages`, the fault path
    //! and `free_huge_folio` keep it: the model the tests run vmtune's decisions against.

    use super::Pool;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Kernel {
        pub total: u64,
        pub surplus: u64,
        pub free: u64,
        pub resv: u64,
        /// Pages the buddy allocator can still give (memory left for the pool).
        pub capacity: u64,
    }

    impl Kernel {
        pub fn new(persistent: u64, capacity: u64) -> Kernel {
            Kernel {
                total: persistent,
                surplus: 0,
                free: persistent,
                resv: 0,
                capacity,
            }
        }

        pub fn persistent(&self) -> u64 {
            self.total - self.surplus
        }

        pub fn in_use(&self) -> u64 {
            self.total - self.free
        }

        pub fn pool(&self) -> Pool {
            Pool {
                total: self.total,
                surplus: self.surplus,
                free: self.free,
            }
        }

        /// `echo count > nr_hugepages`.
        pub fn write(&mut self, count: u64) {
            // grow: surplus pages become persistent first, then allocate
            while self.surplus > 0 && count > self.persistent() {
                self.surplus -= 1;
            }
            while count > self.persistent() && self.total < self.capacity {
                self.total += 1;
                self.free += 1;
            }
            // shrink: free unreserved free pages, turn the rest into surplus
            let min_count = (self.resv + self.total - self.free).max(count);
            while min_count < self.persistent() && self.free > 0 {
                self.total -= 1;
                self.free -= 1;
            }
            while count < self.persistent() && self.surplus < self.total {
                self.surplus += 1;
            }
        }

        /// A mapping faults `n` pages in (QEMU's preallocation); false if the pool has not
        /// that many to give (no overcommit).
        pub fn fault(&mut self, n: u64) -> bool {
            if self.free.saturating_sub(self.resv) < n {
                return false;
            }
            self.free -= n;
            true
        }

        /// A mapping lets go of `n` faulted pages: surplus ones go back to the buddy
        /// allocator, the others to the free pool.
        pub fn release(&mut self, n: u64) {
            for _ in 0..n {
                if self.surplus > 0 {
                    self.surplus -= 1;
                    self.total -= 1;
                } else {
                    self.free += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kernel::Kernel;
    use super::*;

    /// The model matches what this host's kernel did (the session recorded in the module
    /// comment): 10 pages, 6 in use, write 0 → 6 surplus; write 8 → 8, 2 free; write 2 →
    /// 4 surplus; the user exits → 2 left.
    #[test]
    fn the_model_follows_the_kernel() {
        let mut k = Kernel::new(10, 1000);
        assert!(k.fault(6));
        k.write(0);
        assert_eq!((k.total, k.free, k.surplus), (6, 0, 6));
        k.write(8);
        assert_eq!((k.total, k.free, k.surplus), (8, 2, 0));
        k.write(2);
        assert_eq!((k.total, k.free, k.surplus), (6, 0, 4));
        k.release(6);
        assert_eq!((k.total, k.free, k.surplus), (2, 2, 0));
        // reserved, untouched pages: counted free, kept as surplus
        let mut k = Kernel::new(10, 1000);
        k.resv = 6;
        k.write(0);
        assert_eq!((k.total, k.free, k.surplus), (6, 6, 6));
    }

    #[test]
    fn grow_counts_surplus_and_reservations() {
        let p = Pool {
            total: 10,
            surplus: 0,
            free: 10,
        };
        assert_eq!(grow_to(&p, 0, 8), None);
        assert_eq!(grow_to(&p, 6, 8), Some(14));
        // 6 surplus pages in use: writing persistent + 8 would only make them persistent
        let p = Pool {
            total: 6,
            surplus: 6,
            free: 0,
        };
        assert_eq!(grow_to(&p, 0, 8), Some(14));
        let mut k = Kernel {
            total: 6,
            surplus: 6,
            free: 0,
            resv: 0,
            capacity: 1000,
        };
        k.write(14);
        assert!(k.fault(8));
    }

    #[test]
    fn added_from_the_read_back_or_capped_after_a_crash() {
        assert_eq!(added(4, 10, Some(10), 30), 6);
        // short: asked 10, got 7
        assert_eq!(added(4, 10, Some(7), 30), 3);
        // crash before the read-back: the pool caps it
        assert_eq!(added(4, 10, None, 7), 3);
        assert_eq!(added(4, 10, None, 30), 6);
        assert_eq!(added(4, 10, None, 2), 0);
    }

    /// One VM's life as the libvirt hook drives it: `prepare` (vmtune reserves and claims),
    /// QEMU starts and preallocates (`started` ends the claim), then `stopped`/`release`
    /// (vmtune restores) in either order (a restore by hand while the VM runs). Other VMs'
    /// events may come between any two.
    #[derive(Debug, Clone, Copy)]
    enum Ev {
        Prepare(usize),
        Start(usize),
        Stop(usize),
        Release(usize),
        /// Someone else reserves pages for their own use: `nr_hugepages` += n.
        OperatorAdds(u64),
    }

    #[derive(Debug, Default)]
    struct Vm {
        need: u64,
        /// (previous persistent, written, read back): the journal of its apply.
        journal: Option<(u64, u64, u64)>,
        /// Its claim, from `prepare` until it has started.
        claim: Option<u64>,
        /// While it was claimed, another VM's restore gave pages back: the kernel lowers a
        /// pool through its free pages first, this VM's promised ones too (not settled by
        /// claims: the pages it counted may have been a stopped VM's, due back at its release).
        exposed: bool,
        running: bool,
    }

    /// Run vmtune's decisions (`grow_to` for its pages and the other VMs' claims, `added`, `GiveBack`)
    /// against the kernel model through one interleaving; check every write leaves pages in
    /// use alone, every VM gets its pages when memory allows, every restore finds its pages,
    /// and at the end the pool is what it was plus what the operator added. `claims: false`
    /// runs the decisions without claims (as before them).
    fn run(base: u64, base_used: u64, capacity: u64, needs: &[u64], evs: &[Ev], claims: bool) {
        let mut k = Kernel::new(base, capacity);
        assert!(k.fault(base_used));
        let mut vms: Vec<Vm> = needs
            .iter()
            .map(|&need| Vm {
                need,
                ..Vm::default()
            })
            .collect();
        let mut operator = 0;
        for ev in evs {
            let used = k.in_use();
            match *ev {
                Ev::Prepare(i) => {
                    let promised: u64 = if claims {
                        vms.iter().filter_map(|v| v.claim).sum()
                    } else {
                        0
                    };
                    let vm = &mut vms[i];
                    if let Some(new) = grow_to(&k.pool(), k.resv, vm.need + promised) {
                        let prev = k.pool().persistent();
                        k.write(new);
                        assert_eq!(k.in_use(), used, "a reservation took pages in use");
                        vm.journal = Some((prev, new, k.persistent()));
                    }
                    vm.claim = Some(vm.need);
                }
                Ev::Start(i) => {
                    let vm = &mut vms[i];
                    vm.running = k.fault(vm.need);
                    vm.claim = None;
                    // a VM goes without its pages only when memory ran out, or another VM's
                    // give-back came between its prepare and its start
                    assert!(
                        vm.running || k.total == k.capacity || vm.exposed,
                        "{ev:?}: {k:?}"
                    );
                }
                Ev::Stop(i) => {
                    if std::mem::take(&mut vms[i].running) {
                        k.release(vms[i].need);
                    }
                }
                Ev::Release(i) => {
                    vms[i].claim = None;
                    if vms[i].journal.is_some() {
                        for v in vms.iter_mut().filter(|v| v.claim.is_some()) {
                            v.exposed = true;
                        }
                    }
                    if let Some((prev, new, applied)) = vms[i].journal.take() {
                        let now = k.persistent();
                        let g = GiveBack::new(now, added(prev, new, Some(applied), now));
                        let before = k.pool();
                        k.write(g.to);
                        assert_eq!(k.in_use(), used, "a restore freed pages in use");
                        assert_eq!(k.persistent(), g.to);
                        assert_eq!(g.missing(), 0, "{ev:?}: pages gone: {k:?}");
                        let r = Returned::new(&g, &before, &k.pool());
                        assert_eq!(r.freed + r.in_use, r.returned);
                    }
                }
                Ev::OperatorAdds(n) => {
                    let before = k.persistent();
                    k.write(before + n);
                    assert_eq!(k.in_use(), used);
                    operator += k.persistent() - before;
                }
            }
        }
        assert_eq!(k.in_use(), base_used, "every VM stopped");
        assert_eq!(k.surplus, 0, "{k:?}");
        assert_eq!(k.persistent(), base + operator, "the pool is back: {k:?}");
    }

    /// The interleavings of `n` VMs' [prepare, start, stop, release] (or [prepare, start,
    /// release, stop]): a shuffled list with each VM four times, the k-th occurrence its
    /// k-th event.
    fn interleaving(order: &[usize], release_first: &[bool], ops: &[(usize, u64)]) -> Vec<Ev> {
        let mut seen = vec![0usize; release_first.len()];
        let mut out = Vec::new();
        for (pos, &i) in order.iter().enumerate() {
            for &(_, n) in ops.iter().filter(|(p, _)| *p == pos) {
                out.push(Ev::OperatorAdds(n));
            }
            out.push(match (seen[i], release_first[i]) {
                (0, _) => Ev::Prepare(i),
                (1, _) => Ev::Start(i),
                (2, false) | (3, true) => Ev::Stop(i),
                _ => Ev::Release(i),
            });
            seen[i] += 1;
        }
        out
    }

    #[test]
    fn two_vms_in_start_order_and_in_reverse() {
        for order in [[0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1, 0, 0]] {
            for base in [0, 8] {
                let evs = interleaving(&order, &[false, false], &[]);
                run(base, 0, 10_000, &[6, 4], &evs, true);
            }
        }
    }

    /// Two VMs prepared before either starts: without claims the second prepare counts the
    /// first one's pages as free and one VM starts short; with them both get their pages.
    #[test]
    fn two_prepares_before_either_start() {
        let evs = interleaving(&[0, 1, 0, 1, 0, 0, 1, 1], &[false, false], &[]);
        for base in [0, 3] {
            run(base, 0, 10_000, &[6, 4], &evs, true);
            let short = std::panic::catch_unwind(|| run(base, 0, 10_000, &[6, 4], &evs, false));
            assert!(
                short.is_err(),
                "base {base}: without claims both VMs got their pages"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn any_interleaving_gives_back_exactly(
            base in 0u64..60,
            used_share in 0u64..=100,
            extra_capacity in proptest::prop_oneof![0u64..40, proptest::strategy::Just(1_000_000u64)],
            needs in proptest::collection::vec(1u64..40, 2..=4),
            release_first in proptest::collection::vec(proptest::bool::ANY, 4),
            seed in proptest::collection::vec(0usize..1000, 16),
            ops in proptest::collection::vec((0usize..16, 1u64..20), 0..3),
        ) {
            let n = needs.len();
            // a shuffle of [0,0,0,0,1,1,1,1,…] by the seed's ranks
            let mut order: Vec<usize> = (0..4 * n).map(|j| j / 4).collect();
            let mut keyed: Vec<(usize, usize)> = seed.iter().take(4 * n).copied().zip(0..).collect();
            keyed.sort();
            order = keyed.iter().map(|&(_, j)| order[j]).collect();
            let evs = interleaving(&order, &release_first[..n], &ops);
            run(base, base * used_share / 100, base + extra_capacity, &needs, &evs, true);
        }
    }

    #[test]
    fn give_back_never_below_zero() {
        let g = GiveBack::new(10, 6);
        assert_eq!((g.to, g.returned(), g.missing()), (4, 6, 0));
        let g = GiveBack::new(4, 6);
        assert_eq!((g.to, g.returned(), g.missing()), (0, 4, 2));
        let before = Pool {
            total: 10,
            surplus: 0,
            free: 4,
        };
        let after = Pool {
            total: 6,
            surplus: 2,
            free: 0,
        };
        let r = Returned::new(&GiveBack::new(10, 6), &before, &after);
        assert_eq!((r.returned, r.freed, r.in_use, r.missing), (6, 4, 2, 0));
        assert!(r.sentence().contains("2 still in use"), "{}", r.sentence());
    }
}

//! What a container asks for, read from what containerd passes: its QoS class, its CPU request
//! and limit, whether it gets CPUs of its own, its memory, and whether it is a Kata VM.
//!
//! The kubelet does not pass the QoS class or the request as such; it passes what it derived
//! from them (Kubernetes `pkg/kubelet/cm`): the pod's cgroup parent names the class
//! (`/kubepods/burstable/pod<uid>`, `kubepods-besteffort-pod<uid>.slice`; a Guaranteed pod
//! sits right under `kubepods`), the CPU request becomes `cpu.shares = milliCPU·1024/1000`
//! (at least 2), and the limit `cpu.quota = milliCPU·period/1000`. Intel's nri-plugins read
//! them the same way (v0.14.0 `pkg/resmgr/cache`). A container gets CPUs of its own, as the
//! kubelet's static CPU manager gives them, when it is Guaranteed and asks for a whole number
//! of CPUs.

use serde::{Deserialize, Serialize};

use crate::model::{Container, Pod};

/// The pod's Kubernetes QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl std::fmt::Display for Qos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Qos::Guaranteed => "Guaranteed",
            Qos::Burstable => "Burstable",
            Qos::BestEffort => "BestEffort",
        })
    }
}

/// How the QoS class was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QosSource {
    /// The pod's cgroup parent.
    CgroupParent,
    /// No cgroup parent: guessed from the container's shares, quota and memory limit.
    Resources,
}

/// The least CPU shares the kubelet writes (a request of 0 or none).
pub const MIN_SHARES: u64 = 2;

/// What one container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub qos: Qos,
    pub qos_source: QosSource,
    /// The CPU request in milli-CPUs, from the shares (`None`: no shares in the spec).
    pub request_milli: Option<u64>,
    /// The CPU limit in milli-CPUs, from quota / period (`None`: no limit).
    pub limit_milli: Option<u64>,
    /// Whole CPUs of its own, or `None` for the shared pool.
    pub exclusive: Option<u32>,
    /// Why it gets CPUs of its own or shares the pool, in one phrase.
    pub why: String,
    pub memory_bytes: Option<u64>,
    /// The pod runs under a Kata Containers runtime handler: the container is a VM's.
    pub kata: bool,
}

/// The QoS class from the cgroup parent, as the kubelet names it in both cgroup drivers.
fn qos_from_parent(parent: &str) -> Option<Qos> {
    if parent.trim().is_empty() {
        return None;
    }
    let p = parent.to_ascii_lowercase();
    Some(if p.contains("besteffort") {
        Qos::BestEffort
    } else if p.contains("burstable") {
        Qos::Burstable
    } else {
        Qos::Guaranteed
    })
}

/// Shares back to the milli-CPUs the kubelet wrote them from (`shares = milli·1024/1000`,
/// rounded down, at least 2): the least request that gives these shares.
pub fn shares_to_milli(shares: u64) -> u64 {
    if shares <= MIN_SHARES {
        return 0;
    }
    // the kubelet truncates; the least milli with milli*1024/1000 >= shares
    (shares * 1000).div_ceil(1024)
}

/// quota / period in milli-CPUs, rounded up (the kubelet rounds the quota down).
pub fn quota_to_milli(quota: Option<i64>, period: Option<u64>) -> Option<u64> {
    let q = u64::try_from(quota?).ok().filter(|&q| q > 0)?;
    let p = period.filter(|&p| p > 0)?;
    Some(q.saturating_mul(1000).div_ceil(p))
}

/// Reads what `c` of pod `pod` asks for; `kata_prefix` is the runtime-handler prefix of Kata
/// pods (`kata`: `kata`, `kata-qemu`, `kata-qemu-nvidia-gpu`, …).
pub fn ask(pod: &Pod, c: &Container, kata_prefix: &str) -> Ask {
    let request_milli = c.cpu_shares.map(shares_to_milli);
    let limit_milli = quota_to_milli(c.cpu_quota, c.cpu_period);
    let memory_bytes = c
        .memory_limit
        .and_then(|m| u64::try_from(m).ok())
        .filter(|&m| m > 0);
    let (qos, qos_source) = match qos_from_parent(&pod.cgroup_parent) {
        Some(q) => (q, QosSource::CgroupParent),
        None => {
            let q = match (request_milli, limit_milli, memory_bytes) {
                (None | Some(0), None, None) => Qos::BestEffort,
                (Some(r), Some(l), Some(_)) if r == l && r > 0 => Qos::Guaranteed,
                _ => Qos::Burstable,
            };
            (q, QosSource::Resources)
        }
    };
    let kata = !kata_prefix.is_empty() && pod.runtime_handler.starts_with(kata_prefix);
    let (exclusive, why) = exclusive(qos, request_milli, limit_milli);
    Ask {
        qos,
        qos_source,
        request_milli,
        limit_milli,
        exclusive,
        why,
        memory_bytes,
        kata,
    }
}

fn exclusive(qos: Qos, request: Option<u64>, limit: Option<u64>) -> (Option<u32>, String) {
    if qos != Qos::Guaranteed {
        return (None, format!("{qos}: shares the pool"));
    }
    // a Guaranteed container's request equals its limit; where only one is in the spec, that one
    let milli = match (request, limit) {
        (Some(r), Some(l)) if r != l && r.abs_diff(l) > 1 => {
            return (
                None,
                format!("Guaranteed, but its request ({r}m from cpu.shares) and limit ({l}m from cpu.quota) differ: shares the pool"),
            )
        }
        (_, Some(l)) => l,
        (Some(r), None) => r,
        (None, None) => {
            return (
                None,
                "Guaranteed without a CPU request in its spec: shares the pool".into(),
            )
        }
    };
    if milli < 1000 {
        return (
            None,
            format!("Guaranteed with {milli}m, less than one CPU: shares the pool"),
        );
    }
    if milli % 1000 != 0 {
        return (
            None,
            format!("Guaranteed with {milli}m, not a whole number of CPUs: shares the pool"),
        );
    }
    let n = u32::try_from(milli / 1000).unwrap_or(u32::MAX);
    (
        Some(n),
        format!(
            "Guaranteed with a whole number of CPUs ({n}): CPUs of its own, as the kubelet's static CPU manager gives them"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pod(parent: &str, handler: &str) -> Pod {
        Pod {
            id: "p".into(),
            cgroup_parent: parent.into(),
            runtime_handler: handler.into(),
            ..Pod::default()
        }
    }

    /// The kubelet's own arithmetic (pkg/kubelet/cm/helpers_linux.go): MilliCPUToShares and
    /// MilliCPUToQuota with the default 100 ms period.
    fn kubelet_container(
        request_milli: u64,
        limit_milli: Option<u64>,
        mem: Option<i64>,
    ) -> Container {
        let shares = (request_milli * 1024 / 1000).max(MIN_SHARES);
        Container {
            id: "c".into(),
            pod_id: "p".into(),
            cpu_shares: Some(shares),
            cpu_quota: limit_milli.map(|l| (l * 100_000 / 1000).max(1000) as i64),
            cpu_period: limit_milli.map(|_| 100_000),
            memory_limit: mem,
            ..Container::default()
        }
    }

    #[test]
    fn classes_from_both_cgroup_drivers() {
        let c = kubelet_container(2000, Some(2000), Some(1 << 30));
        for (parent, want) in [
            ("/kubepods/pod1234", Qos::Guaranteed),
            ("/kubepods/burstable/pod1234", Qos::Burstable),
            ("/kubepods/besteffort/pod1234", Qos::BestEffort),
            ("kubepods-pod1234.slice", Qos::Guaranteed),
            ("kubepods-burstable-pod1234.slice", Qos::Burstable),
            ("kubepods-besteffort-pod1234.slice", Qos::BestEffort),
        ] {
            let a = ask(&pod(parent, ""), &c, "kata");
            assert_eq!(
                (a.qos, a.qos_source),
                (want, QosSource::CgroupParent),
                "{parent}"
            );
        }
    }

    #[test]
    fn exclusive_only_for_guaranteed_whole_cpus() {
        let g = pod("/kubepods/podx", "");
        assert_eq!(
            ask(
                &g,
                &kubelet_container(2000, Some(2000), Some(1 << 30)),
                "kata"
            )
            .exclusive,
            Some(2)
        );
        assert_eq!(
            ask(
                &g,
                &kubelet_container(1000, Some(1000), Some(1 << 30)),
                "kata"
            )
            .exclusive,
            Some(1)
        );
        let half = ask(
            &g,
            &kubelet_container(1500, Some(1500), Some(1 << 30)),
            "kata",
        );
        assert_eq!(half.exclusive, None);
        assert!(half.why.contains("1500m"), "{}", half.why);
        assert_eq!(
            ask(
                &g,
                &kubelet_container(500, Some(500), Some(1 << 30)),
                "kata"
            )
            .exclusive,
            None
        );
        let b = pod("/kubepods/burstable/podx", "");
        assert_eq!(
            ask(
                &b,
                &kubelet_container(2000, Some(4000), Some(1 << 30)),
                "kata"
            )
            .exclusive,
            None
        );
    }

    #[test]
    fn without_a_parent_the_class_comes_from_the_resources() {
        let none = pod("", "");
        assert_eq!(
            ask(
                &none,
                &kubelet_container(2000, Some(2000), Some(1 << 30)),
                "kata"
            )
            .qos,
            Qos::Guaranteed
        );
        assert_eq!(
            ask(&none, &kubelet_container(0, None, None), "kata").qos,
            Qos::BestEffort
        );
        assert_eq!(
            ask(&none, &kubelet_container(500, None, None), "kata").qos,
            Qos::Burstable
        );
        assert_eq!(
            ask(&none, &kubelet_container(500, None, None), "kata").qos_source,
            QosSource::Resources
        );
    }

    #[test]
    fn kata_by_runtime_handler_prefix() {
        let c = kubelet_container(2000, Some(2000), Some(1 << 30));
        assert!(ask(&pod("/kubepods/podx", "kata-qemu-nvidia-gpu"), &c, "kata").kata);
        assert!(!ask(&pod("/kubepods/podx", "runc"), &c, "kata").kata);
        assert!(!ask(&pod("/kubepods/podx", ""), &c, "kata").kata);
        assert!(!ask(&pod("/kubepods/podx", "kata"), &c, "").kata);
    }

    proptest! {
        /// Whatever the kubelet derives from a request and limit, the request and the limit
        /// come back: a Guaranteed container of N whole CPUs gets N, every other one shares.
        #[test]
        fn the_kubelets_arithmetic_round_trips(
            request in 0u64..256_000,
            limit_extra in proptest::option::of(0u64..64_000),
            guaranteed in any::<bool>(),
        ) {
            let limit = if guaranteed { Some(request) } else { limit_extra.map(|e| request + e) };
            let c = kubelet_container(request, limit, Some(1 << 30));
            let parent = if guaranteed { "/kubepods/podu" } else { "/kubepods/burstable/podu" };
            let a = ask(&pod(parent, ""), &c, "kata");
            if request >= 3 {
                // shares lose under 1 milli-CPU: the least request giving them is within 1;
                // requests 0, 1 and 2 all give the floor of 2 shares, read back as 0
                let r = a.request_milli.unwrap();
                prop_assert!(r <= request && request - r <= 1, "request {request} read back as {r}");
            } else {
                prop_assert_eq!(a.request_milli, Some(0));
            }
            if let Some(l) = limit {
                if l >= 10 {
                    prop_assert_eq!(a.limit_milli, Some(l));
                }
            }
            let want = (guaranteed && request >= 1000 && request % 1000 == 0).then_some((request / 1000) as u32);
            prop_assert_eq!(a.exclusive, want, "{}", a.why);
        }
    }
}

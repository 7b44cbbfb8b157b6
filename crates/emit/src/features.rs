//! The plan's CPU features as every emitter spells them: Hyper-V enlightenments (libvirt
//! element names, with their values and sub-features) and guest timers.

use plan::{GuestOs, Plan, Timer};

/// Hyper-V enlightenments libvirt knows (`<hyperv>` children), in the order libvirt writes
/// them.
pub(crate) const HYPERV: &[&str] = &[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "synic",
    "stimer",
    "reset",
    "vendor_id",
    "frequencies",
    "reenlightenment",
    "tlbflush",
    "ipi",
    "evmcs",
    "avic",
    "emsr_bitmap",
    "xmm_input",
];

/// Sub-features: (plan name, libvirt parent element, libvirt child element).
pub(crate) const HYPERV_SUB: &[(&str, &str, &str)] = &[
    ("stimer_direct", "stimer", "direct"),
    ("tlbflush_direct", "tlbflush", "direct"),
    ("tlbflush_extended", "tlbflush", "extended"),
];

/// Retries before a Windows guest notifies the hypervisor of a spinning lock (the value
/// libvirt/virt-manager and the QEMU docs use).
pub(crate) const SPINLOCK_RETRIES: u32 = 8191;
/// `<vendor_id>` value when the plan names `vendor_id` without one.
pub(crate) const DEFAULT_VENDOR_ID: &str = plan::VENDOR_ID;

/// A Hyper-V enlightenment from the plan, spelled `relaxed`, `hv-relaxed`, `hv_relaxed` or
/// with a value: `spinlocks=4095`, `vendor_id=whatever`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Enlightenment {
    pub name: &'static str,
    pub value: Option<String>,
}

impl Enlightenment {
    /// `spinlocks=N` retries, or [`SPINLOCK_RETRIES`] when absent or not a number.
    pub fn retries(&self) -> u32 {
        self.value
            .as_deref()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(SPINLOCK_RETRIES)
    }

    /// `vendor_id=…` as given, or [`DEFAULT_VENDOR_ID`]; each emitter keeps the characters
    /// its format allows.
    pub fn vendor(&self) -> &str {
        self.value.as_deref().unwrap_or(DEFAULT_VENDOR_ID)
    }

    /// A sub-feature (`stimer_direct`): its libvirt parent and child element.
    pub fn sub(&self) -> Option<(&'static str, &'static str)> {
        HYPERV_SUB
            .iter()
            .find(|(n, _, _)| *n == self.name)
            .map(|(_, p, c)| (*p, *c))
    }
}

fn canonical(raw: &str) -> String {
    let n = raw.trim().to_ascii_lowercase().replace('-', "_");
    let n = n.strip_prefix("hv_").unwrap_or(&n).to_string();
    match n.as_str() {
        "vendorid" => "vendor_id".into(),
        "tlbflush_ext" => "tlbflush_extended".into(),
        "apicv" => "avic".into(),
        _ => n,
    }
}

/// Parse the plan's enlightenment names: known ones in libvirt's order (sub-features after
/// the rest), unknown ones apart.
pub(crate) fn enlightenments(names: &[String]) -> (Vec<Enlightenment>, Vec<String>) {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for raw in names {
        let (n, v) = match raw.split_once('=') {
            Some((n, v)) => (n, Some(v.trim().to_string())),
            None => (raw.as_str(), None),
        };
        let n = canonical(n);
        if n == "time" {
            // QEMU's hv-time is libvirt's <timer name='hypervclock'>, written in <clock>
            continue;
        }
        let k = HYPERV
            .iter()
            .copied()
            .chain(HYPERV_SUB.iter().map(|(s, _, _)| *s))
            .find(|k| *k == n);
        match k {
            Some(k) if !known.iter().any(|e: &Enlightenment| e.name == k) => {
                known.push(Enlightenment { name: k, value: v })
            }
            Some(_) => {}
            None => unknown.push(raw.clone()),
        }
    }
    let rank = |name: &str| {
        HYPERV
            .iter()
            .chain(HYPERV_SUB.iter().map(|(s, _, _)| s))
            .position(|k| *k == name)
    };
    known.sort_by_key(|e| rank(e.name));
    (known, unknown)
}

/// Timer names libvirt's schema accepts.
pub(crate) const TIMERS: &[&str] = &[
    "platform",
    "rtc",
    "tsc",
    "hpet",
    "pit",
    "armvtimer",
    "kvmclock",
    "hypervclock",
];
/// Tick policies libvirt accepts (on timers that take one).
pub(crate) const TICKPOLICIES: &[&str] = &["delay", "catchup", "merge", "discard"];

/// The plan's guest timers; a Windows plan from before the planner said timers gets the usual
/// Windows set (without the Hyper-V clock when the hypervisor bit is hidden).
pub(crate) fn plan_timers(plan: &Plan) -> Vec<Timer> {
    if !plan.cpu_features.timers.is_empty() || !is_windows(plan) {
        return plan.cpu_features.timers.clone();
    }
    let t = |name: &str, present: bool, tp: Option<&str>| Timer {
        name: name.into(),
        present,
        tickpolicy: tp.map(str::to_string),
    };
    let mut v = vec![
        t("rtc", true, Some("catchup")),
        t("pit", true, Some("delay")),
        t("hpet", false, None),
    ];
    if !plan.cpu_features.hyperv.is_empty() && !plan.cpu_features.hide_hypervisor {
        v.push(t("hypervclock", true, None));
    }
    v
}

pub(crate) fn is_windows(plan: &Plan) -> bool {
    matches!(plan.request.os, GuestOs::Windows | GuestOs::Windows7)
}

/// vCPUs of the plan (the pins, or the request where a plan has none).
pub(crate) fn vcpu_count(plan: &Plan) -> usize {
    if plan.vcpus.is_empty() {
        plan.request.vcpus as usize
    } else {
        plan.vcpus.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enlightenment_spellings() {
        let names: Vec<String> = [
            "hv-vapic",
            "stimer_direct",
            "relaxed",
            "spinlocks=4095",
            "hv_time",
            "vendor-id=x",
            "hv-tlbflush-ext",
            "warp",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (k, u) = enlightenments(&names);
        let got: Vec<&str> = k.iter().map(|e| e.name).collect();
        assert_eq!(
            got,
            vec![
                "relaxed",
                "vapic",
                "spinlocks",
                "vendor_id",
                "stimer_direct",
                "tlbflush_extended"
            ]
        );
        assert_eq!(k[2].value.as_deref(), Some("4095"));
        assert_eq!(k[4].sub(), Some(("stimer", "direct")));
        assert_eq!(u, vec!["warp".to_string()]);
    }
}

//! The pod's `kubectl describe pod`: its node, its start time and its container's start, in
//! whole seconds of the host's zone.

use super::spec::Spec;
use super::{ns, weekday, zone_s, Rng, MONTHS};
use crate::parse::time::{civil_from_nanos, Nanos, NS_PER_S};

/// The describe output of a pod accepted shortly before `t0` whose container started
/// shortly after `end_of_boot`, and the seconds between the two as it prints them.
pub(super) fn describe(spec: &Spec, rng: &mut Rng, t0: Nanos, end_of_boot: Nanos) -> (String, f64) {
    let zone_s = zone_s(spec);
    let start = t0 - ns(rng.f(0.5, 3.0));
    let started = end_of_boot + ns(rng.f(0.0, 0.5));
    // the describe output has whole seconds
    let whole = |t: Nanos| t.div_euclid(NS_PER_S) * NS_PER_S;
    let total_s = (whole(started) - whole(start)) as f64 / 1e9;
    let text = format!(
        "Name:             gpu-job\nNamespace:        default\nNode:             {}/10.0.0.{}\nStart Time:       {}\nStatus:           Running\nContainers:\n  cuda:\n    State:          Running\n      Started:      {}\n",
        spec.host,
        1 + spec.seed % 250,
        rfc1123(start, zone_s),
        rfc1123(started, zone_s)
    );
    (text, total_s)
}

/// `Thu, 20 Nov 2025 17:55:38 +0800`.
pub(super) fn rfc1123(t: Nanos, zone_s: i64) -> String {
    let local = t + zone_s * NS_PER_S;
    let (y, mo, d, h, mi, s, _) = civil_from_nanos(local);
    let wd = weekday(local);
    let z = crate::parse::time::format_offset(zone_s).replace(':', "");
    format!(
        "{wd}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} {z}",
        MONTHS.get(mo as usize - 1).copied().unwrap_or("Jan")
    )
}

//! Host-side tracing scripts for `vmtune boot trace`. Their output is what
//! [`crate::parse::bpftrace`] parses.

/// The Kata GPU boot study's kprobe/kretprobe on `vfio_pin_pages_remote` (vfio_iommu_type1),
/// stamped with bpftrace's `strftime` (`%f`: microseconds, bpftrace ≥ 0.14; `%z`: the zone
/// it formats in) from one clock read. The study's script printed `nsecs % 1e9` after the
/// wall-clock seconds: the fraction of the clock since boot, not of the wall clock, so its
/// stamps were off by up to a second and a return could print before its call.
pub const PIN_PAGES: &str = r#"// vfio_pin_pages_remote: one line per call and per return, then @hist (ms).
// From the Kata GPU boot study; one clock read per probe, formatted as wall-clock time with
// microseconds (%f, bpftrace >= 0.14) and the zone it is formatted in (%z).
kprobe:vfio_pin_pages_remote {
    @start[tid] = nsecs;
    $now = nsecs;
    printf("%s: vfio_pin_pages_remote(): vaddr=0x%lx npage=%lu size=%luB limit=%lu pid=%d\n",
           strftime("%Y-%m-%dT%H:%M:%S.%f%z", $now), arg1, arg2, arg2 * 4096, arg4, pid);
}
kretprobe:vfio_pin_pages_remote /@start[tid]/ {
    $now = nsecs;
    $d = ($now - @start[tid]) / 1000000;
    printf("%s: vfio_pin_pages_remote took %d ms\n",
           strftime("%Y-%m-%dT%H:%M:%S.%f%z", $now), $d);
    @hist = hist($d);
    delete(@start[tid]);
}
"#;

/// The map ioctls seen from user space: works when `vfio_pin_pages_remote` is inlined (no
/// kprobe), and for IOMMUFD, which has no type1 pin function.
pub const MAP_IOCTLS: &str = r#"// VFIO_IOMMU_MAP_DMA (type1) and IOMMU_IOAS_MAP (iommufd) ioctls by duration.
// VFIO_IOMMU_MAP_DMA = _IO(';', 100 + 13) = 0x3b71; IOMMU_IOAS_MAP = _IO(';', 0x80 + 5) = 0x3b85.
// struct vfio_iommu_type1_dma_map { argsz, flags, vaddr, iova, size }: size at offset 24.
// struct iommu_ioas_map { size, flags, ioas_id, __reserved, user_va, length, iova }: length at 24.
tracepoint:syscalls:sys_enter_ioctl /args->cmd == 0x3b71 || args->cmd == 0x3b85/ {
    @ts[tid] = nsecs;
    @cmd[tid] = args->cmd;
    @len[tid] = *(uint64 *)uptr(args->arg + 24);
}
tracepoint:syscalls:sys_exit_ioctl /@ts[tid]/ {
    $now = nsecs;
    $us = ($now - @ts[tid]) / 1000;
    printf("%s: %s pid=%d size=%luB took %d us\n",
           strftime("%Y-%m-%dT%H:%M:%S.%f%z", $now),
           @cmd[tid] == 0x3b71 ? "VFIO_IOMMU_MAP_DMA" : "IOMMU_IOAS_MAP",
           pid, @len[tid], $us);
    @map_us = hist($us);
    delete(@ts[tid]); delete(@cmd[tid]); delete(@len[tid]);
}
"#;

/// The ftrace function_graph recipe from the Kata GPU boot study, as a shell script.
pub const FTRACE: &str = r#"#!/bin/sh
# function_graph on vfio_pin_pages_remote (Kata GPU boot study). Boot the VM between start and stop.
set -e
cd /sys/kernel/tracing
echo 0 > tracing_on
echo function_graph > current_tracer
echo vfio_pin_pages_remote > set_ftrace_filter
echo funcgraph-abstime > trace_options
echo 1 > tracing_on
echo "tracing; boot the VM, then press Enter" >&2
read _
echo 0 > tracing_on
cat trace > "${1:-/tmp/vfio-trace.out}"
echo nop > current_tracer
echo > set_ftrace_filter
"#;

/// Every script by name.
pub fn scripts() -> [(&'static str, &'static str); 3] {
    [
        ("pin-pages.bt", PIN_PAGES),
        ("map-ioctls.bt", MAP_IOCTLS),
        ("ftrace-pin.sh", FTRACE),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::bpftrace::{parse_line, BpfLine};

    /// The `printf` formats of a bpftrace script, in order.
    fn formats(script: &str) -> Vec<String> {
        script
            .split("printf(\"")
            .skip(1)
            .filter_map(|s| s.split_once("\",").map(|(f, _)| f.replace("\\n", "")))
            .collect()
    }

    /// `fmt` with its conversions filled from `args`, in order, as bpftrace prints them.
    fn printf(fmt: &str, args: &[&str]) -> String {
        let mut out = String::new();
        let mut args = args.iter();
        let mut rest = fmt;
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            let spec = &rest[at + 1..];
            let len = spec
                .find(|c: char| c.is_ascii_alphabetic() && c != 'l')
                .map_or(spec.len(), |i| i + 1);
            out.push_str(args.next().expect("an argument for every conversion"));
            rest = &spec[len..];
        }
        out.push_str(rest);
        out
    }

    /// What bpftrace's `strftime("%Y-%m-%dT%H:%M:%S.%f%z", t)` prints for the instant
    /// `utc_ns` on a host `zone_s` east of UTC: local wall time, its microseconds, the zone.
    fn strftime(utc_ns: i64, zone_s: i64) -> String {
        let local = crate::parse::time::format_rfc3339(utc_ns + zone_s * 1_000_000_000);
        let (secs, frac) = local
            .trim_end_matches('Z')
            .split_once('.')
            .unwrap_or((&local, "0"));
        let us: String = format!("{frac:0<6}").chars().take(6).collect();
        let sign = if zone_s < 0 { '-' } else { '+' };
        let z = zone_s.abs();
        format!("{secs}.{us}{sign}{:02}{:02}", z / 3600, z % 3600 / 60)
    }

    #[test]
    fn the_pin_script_prints_stamps_the_reader_takes_as_the_true_instant() {
        let f = formats(PIN_PAGES);
        assert_eq!(f.len(), 2, "{f:?}");
        // a call 0.9999 s past a whole second and its return 2 ms later, on a +05:30 host:
        // the study's `nsecs % 1e9` would have printed another second's fraction
        let call = 1_763_661_381_999_900_000_i64;
        let ret = call + 2_000_000;
        for zone in [0, 19_800, -25_200] {
            let c = printf(
                &f[0],
                &[
                    &strftime(call, zone),
                    "7f00",
                    "512",
                    "2097152",
                    "2048",
                    "42",
                ],
            );
            let r = printf(&f[1], &[&strftime(ret, zone), "2"]);
            match parse_line(&c) {
                Ok(Some(BpfLine::PinCall { ts, pid, .. })) => {
                    assert_eq!((ts, pid), (Some(call - call % 1000), Some(42)), "{c}")
                }
                other => panic!("{c}: {other:?}"),
            }
            match parse_line(&r) {
                Ok(Some(BpfLine::PinTook { ts, ms })) => {
                    assert_eq!((ts, ms), (Some(ret - ret % 1000), 2.0), "{r}")
                }
                other => panic!("{r}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_ioctl_script_prints_stamps_the_reader_takes_as_the_true_instant() {
        let f = formats(MAP_IOCTLS);
        assert_eq!(f.len(), 1, "{f:?}");
        let t = 1_763_661_381_500_000_000_i64;
        let line = printf(
            &f[0],
            &[&strftime(t, 3600), "IOMMU_IOAS_MAP", "7", "4096", "12"],
        );
        match parse_line(&line) {
            Ok(Some(BpfLine::MapIoctl { ts, .. })) => assert_eq!(ts, Some(t), "{line}"),
            other => panic!("{line}: {other:?}"),
        }
    }
}

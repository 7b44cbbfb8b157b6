//! Host-side tracing scripts for `vmtune boot trace`. Their output is what
//! [`crate::bpftrace`] parses.

/// The Kata GPU boot study's kprobe/kretprobe on `vfio_pin_pages_remote` (vfio_iommu_type1), with the
/// seconds and nanoseconds taken from one clock read so calls and returns stay in order.
pub const PIN_PAGES: &str = r#"// vfio_pin_pages_remote: one line per call and per return, then @hist (ms).
// From the Kata GPU boot study; the timestamp is read once per probe.
kprobe:vfio_pin_pages_remote {
    @start[tid] = nsecs;
    $now = nsecs;
    printf("%s.%09dZ: vfio_pin_pages_remote(): vaddr=0x%lx npage=%lu size=%luB limit=%lu pid=%d\n",
           strftime("%Y-%m-%dT%H:%M:%S", $now), $now % 1000000000, arg1, arg2, arg2 * 4096, arg4, pid);
}
kretprobe:vfio_pin_pages_remote /@start[tid]/ {
    $now = nsecs;
    $d = ($now - @start[tid]) / 1000000;
    printf("%s.%09dZ: vfio_pin_pages_remote took %d ms\n",
           strftime("%Y-%m-%dT%H:%M:%S", $now), $now % 1000000000, $d);
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
    printf("%s.%09dZ: %s pid=%d size=%luB took %d us\n",
           strftime("%Y-%m-%dT%H:%M:%S", $now), $now % 1000000000,
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

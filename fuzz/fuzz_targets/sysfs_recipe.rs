//! Sysfs snapshot recipes for the fuzz targets that read sysfs trees (`sysfs_archive`,
//! `cdi_generate`): the fuzzer picks paths from a dictionary of what the loader reads,
//! entry types (file, symlink, directory) and contents; `recipe` writes them as a ustar
//! archive, so the loader's parsers and link resolution see real trees.

pub const PATHS: &[&str] = &[
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpu0/online",
    "sys/devices/system/cpu/cpu0/topology/core_cpus",
    "sys/devices/system/cpu/cpu0/topology/core_cpus_list",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings",
    "sys/devices/system/cpu/cpu0/topology/package_cpus",
    "sys/devices/system/cpu/cpu0/topology/core_id",
    "sys/devices/system/cpu/cpu0/topology/physical_package_id",
    "sys/devices/system/cpu/cpu0/topology/die_cpus_list",
    "sys/devices/system/cpu/cpu0/topology/core_siblings",
    "sys/devices/system/cpu/cpu0/topology/core_siblings_list",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu1/topology/physical_package_id",
    "sys/devices/system/cpu/cpu1/topology/core_siblings",
    "sys/devices/system/cpu/cpu1/topology/core_cpus_list",
    "sys/devices/system/cpu/cpu1/topology/core_id",
    "sys/devices/system/cpu/cpu1/topology/package_cpus_list",
    "sys/devices/system/cpu/cpu0/cache/index0/shared_cpu_map",
    "sys/devices/system/cpu/cpu0/cache/index0/level",
    "sys/devices/system/cpu/cpu0/cache/index0/type",
    "sys/devices/system/cpu/cpu0/cache/index0/size",
    "sys/devices/system/cpu/cpu0/cache/index0/number_of_sets",
    "sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size",
    "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
    "sys/devices/system/cpu/cpu0/cpufreq/base_frequency",
    "sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq",
    "sys/devices/system/cpu/cpu0/cpu_capacity",
    "sys/devices/system/cpu/cpu0/cpufreq",
    "sys/devices/cpu_core/cpus",
    "sys/devices/cpu_atom/cpus",
    "sys/devices/system/node/online",
    "sys/devices/system/node/node0/cpumap",
    "sys/devices/system/node/node0/cpulist",
    "sys/devices/system/node/node0/meminfo",
    "sys/devices/system/node/node0/distance",
    "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
    "sys/devices/system/node/node1/meminfo",
    "sys/devices/system/node/node1/cpulist",
    "sys/devices/system/node/node1/distance",
    "sys/devices/system/node/node2/cpumap",
    "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
    "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
    "proc/meminfo",
    "sys/devices/system/node/node1/access0/initiators/read_bandwidth",
    "sys/bus/pci/devices/0000:00:01.0",
    "sys/devices/pci0000:00/0000:00:01.0/vendor",
    "sys/devices/pci0000:00/0000:00:01.0/device",
    "sys/devices/pci0000:00/0000:00:01.0/class",
    "sys/devices/pci0000:00/0000:00:01.0/config",
    "sys/devices/pci0000:00/0000:00:01.0/numa_node",
    "sys/devices/pci0000:00/0000:00:01.0/local_cpus",
    "sys/devices/pci0000:00/0000:00:01.0/resource",
    "sys/devices/pci0000:00/0000:00:01.0/irq",
    "sys/devices/pci0000:00/0000:00:01.0/msi_irqs/24",
    "sys/devices/pci0000:00/0000:00:01.0/driver",
    "sys/devices/pci0000:00/0000:00:01.0/iommu_group",
    "sys/devices/pci0000:00/0000:00:01.0/current_link_speed",
    "sys/devices/pci0000:00/0000:00:01.0/current_link_width",
    "sys/devices/pci0000:00/0000:00:01.0/max_link_speed",
    "sys/devices/pci0000:00/0000:00:01.0/max_link_width",
    "sys/bus/pci/devices/0000:01:00.0",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_speed",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_width",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_speed",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_width",
    "sys/devices/pci0000:00/0000:00:01.0/net/eth0",
    "sys/devices/pci0000:00/0000:00:01.0/vfio-dev/vfio0/dev",
    "sys/devices/pci0000:00/0000:00:01.0/vfio-dev/vfio12",
    "sys/bus/pci/devices/0000:00:02.0",
    "sys/devices/pci0000:00/0000:00:02.0/class",
    "sys/devices/pci0000:00/0000:00:02.0/driver",
    "sys/devices/pci0000:00/0000:00:02.0/iommu_group",
    "sys/devices/pci0000:00/0000:00:02.0/vfio-dev/vfio1/dev",
    "sys/class/misc/vfio/dev",
    "sys/class/misc/iommu/dev",
    "sys/class/misc/iommu",
    "sys/devices/virtual/misc/vfio/dev",
    "sys/class/vfio/1/dev",
    "sys/class/vfio/noiommu-3/dev",
    "sys/class/vfio/1",
    "sys/devices/virtual/vfio/7/dev",
    "sys/bus/dax/devices/dax0.0",
    "sys/bus/dax/drivers/kmem/dax0.0",
    "sys/devices/system/clocksource/clocksource0/available_clocksource",
    "proc/cpuinfo",
    "proc/interrupts",
    "proc/irq/24/smp_affinity_list",
    "proc/sys/kernel/hostname",
    "proc/driver/nvidia/gpus/0000:00:01.0/numa_status",
    "sys",
    "..",
];

/// A ustar header + data, padded to 512-byte blocks.
fn entry(out: &mut Vec<u8>, name: &str, typeflag: u8, data: &[u8], link: &[u8]) {
    let mut h = [0u8; 512];
    let name = name.as_bytes();
    let n = name.len().min(99);
    h[..n].copy_from_slice(&name[..n]);
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    let size = format!("{:011o}", data.len());
    h[124..135].copy_from_slice(size.as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = typeflag;
    let l = link.len().min(99);
    h[157..157 + l].copy_from_slice(&link[..l]);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    let ck = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(ck.as_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

pub fn recipe(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut it = data.iter().copied();
    while let (Some(sel), Some(len)) = (it.next(), it.next()) {
        let path = PATHS[sel as usize % PATHS.len()];
        let body: Vec<u8> = it.by_ref().take(len as usize % 64).collect();
        let name = format!("snap/{path}");
        match (sel as usize / PATHS.len()) % 4 {
            1 => entry(&mut out, &name, b'2', &[], &body),
            2 => entry(&mut out, &name, b'5', &[], &[]),
            _ => entry(&mut out, &name, b'0', &body, &[]),
        }
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

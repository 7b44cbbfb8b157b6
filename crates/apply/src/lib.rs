//! vmtune actuators with a crash-safe journal: thread pinning, IRQ affinity, cpusets, hugepages

//! Step 8 of the analysis: plain-word conclusions, each tied to the measured phase it is
//! about and the fix it points to. How the boot went comes first (failed, unfinished,
//! started late, inputs missing); advice on a phase is given only from what was measured,
//! and never from data that is absent.

use crate::analyze::model::{gib, secs_fmt, Finding, Report, DMA_ENTRY_LIMIT};
use crate::estimate::{Constants, PageSize};

fn fix_for_failure(step: &str, r: &Report) -> String {
    let limit = r
        .cdi
        .as_ref()
        .and_then(|c| c.limit_s)
        .map_or(String::new(), |l| {
            format!(" (at this pace the agent gives up after ~{l:.0} s)")
        });
    match step {
        "cold_plug" => "The pod asks for CDI devices the host cannot resolve: check the host's CDI specs (/var/run/cdi, the device plugin or `nvidia-ctk cdi generate`) name the devices requested (`nvidia.com/gpu=…`, `nvidia.com/pgpu=…`), and that the GPUs are bound to vfio-pci.".into(),
        "cdi_wait" => format!("The guest never produced the CDI specs{limit}: look in the guest console for the NVIDIA driver failing to load or bind a GPU and for NVRC / nvidia-ctk errors; a boot that is only slow needs a larger CDI timeout or a shorter gpu_driver_init."),
        "vfio_hotplug" => vfio_fix(r.state.failure.as_ref().map_or("", |f| f.summary.as_str())),
        "vm_create" => vm_start_fix(
            &r.state
                .failure
                .as_ref()
                .map_or(String::new(), |f| format!("{} {}", f.message, f.summary)),
        ),
        "agent_connect" => "The shim could not reach the kata-agent: look in the guest console for how far the guest got (a kernel panic, init or the agent failing to start); on the host check vsock (`modprobe vhost_vsock`, /dev/vhost-vsock; a nested host without vsock needs Kata 1.x's proxy or use_vsock = false); a guest that is only slow needs a larger dial_timeout.".into(),
        "create_container" if !r.state.failure.as_ref().is_some_and(|f| f.summary.contains("timed out")) => "The kata-agent refused the container: see its error as logged (a rootfs or volume mount that failed in the guest, a device or CDI spec it could not apply); the VM itself booted.".into(),
        "create_container" => "Raise the runtime's create_container_timeout, or shorten the boot (see the phases); if the agent was still waiting for CDI specs, fix that first.".into(),
        _ => "See the error as logged: the VM or its shim did not start.".into(),
    }
}

/// What to do about a hypervisor that did not start, by its error and what QEMU said
/// (`message`: the failure's message and summary).
fn vm_start_fix(message: &str) -> String {
    let m = message.to_ascii_lowercase();
    if m.contains("backing store")
        || m.contains("guest memory")
        || m.contains("cannot allocate memory")
    {
        "QEMU could not allocate the guest's RAM: with enable_hugepages = true the host's pool must hold the VM's whole memory in free pages of its size, on the node the VM runs on: check HugePages_Free in /proc/meminfo and /sys/devices/system/node/node*/hugepages, raise vm.nr_hugepages (or reserve 1 GiB pages at boot: hugepagesz=1G hugepages=N), or lower the pod's memory; without hugepages the host is out of memory.".into()
    } else if m.contains("kvm kernel module") || m.contains("failed to initialize kvm") {
        "QEMU found no KVM on the host: load the module (`modprobe kvm_intel` or `kvm_amd`), check that /dev/kvm exists and the runtime may open it, that virtualization (VT-x/AMD-V) is enabled in the firmware and, on a host that is itself a VM, that nested virtualization is on (`kata-runtime kata-check`, `kata-runtime check` on 2.x and later, says which).".into()
    } else if m.contains("qmp ready") || m.contains("initialise qmp") {
        "QEMU's monitor did not answer in the time runtime-rs allows it, a fixed deadline rather than the configuration's VM-start timeout (about 50 s of retries since runtime-rs of January 2026, kata-containers#13343; a single 5 s read before): with VFIO devices QEMU maps the whole guest RAM for DMA before its monitor is up, which grows with the VM's memory and its GPUs. If QEMU was still working (no `qemu stderr:` lines saying why it stopped), give the VM less memory or back it with hugepages (fewer pages to pin: `vmtune boot estimate` sizes both); the deadline is runtime-rs's own.".into()
    } else if m.contains("negotiate qmp capabilities") || m.contains("exiting qmp loop") {
        "QEMU exited while the shim was opening its monitor (the QMP handshake), before the VM ran: QEMU's own last error, named above, says why. An assertion or abort is QEMU failing on what it was asked to build (a device, machine type, firmware or CPU option this QEMU does not support, or a QEMU bug: use the QEMU build the Kata release ships and compare its version); run the QEMU command line the shim logs by hand to see it fail.".into()
    } else {
        "The hypervisor did not start: see its error as logged (the binary the configuration names, /dev/kvm access, the kernel and image paths, the hypervisor's own log).".into()
    }
}

/// What to do about a VFIO device the hypervisor refused, by its reason (`summary`).
fn vfio_fix(summary: &str) -> String {
    let s = summary.to_ascii_lowercase();
    if s.contains("not viable") {
        "Every device in the device's IOMMU group must be bound to vfio-pci (or be passed to the VM too): list /sys/kernel/iommu_groups/N/devices on the host and bind the GPU's other functions (audio, USB) to vfio-pci; a group shared with a device the host keeps needs another slot or ACS (QEMU VFIO: \"group N is not viable\").".into()
    } else if s.contains("multiple address spaces") {
        "The devices of one IOMMU group must go to one VM and one address space: pass all of the group's functions (e.g. 01:00.0 with 01:00.1) to the same container, not to two containers or VMs (QEMU VFIO: \"group N used in multiple address spaces\").".into()
    } else if s.contains("not found") || s.contains("port is not set") {
        "QEMU had no PCIe port to plug the device into: on q35 set hot_plug_vfio = \"root-port\" (Kata 2.x: hotplug_vfio_on_root_bus = true) and pcie_root_port to at least the number of devices (Kata GPU passthrough guide; kata-containers#2938).".into()
    } else {
        "The host could not map the VM's memory for the device: check the VMM's locked-memory limit (LimitMEMLOCK, ulimit -l), vfio_iommu_type1's dma_entry_limit, and that the device is not in use by another VM (QEMU VFIO: VFIO_MAP_DMA, failed to setup container; Cloud Hypervisor: VfioMapRegion).".into()
    }
}

/// Derive findings from a built report.
pub fn findings(r: &Report) -> Vec<Finding> {
    let c = Constants::default();
    let ram = RamPins::of(r);
    let mut out = how_the_boot_went(r);
    out.extend(bar_unassigned(r));
    out.extend(cdi_wait(r));
    out.extend(no_pin_trace(r));
    out.extend(bar_pinning(r, &c));
    out.extend(ram_pinning(r, &c, &ram));
    out.extend(memory_hotplug(r, &ram));
    out.extend(serial_driver_init(r));
    out.extend(dma_entry_limit(r));
    out.extend(skipped_input(r));
    out
}

/// This VM's guest RAM pin calls, added up.
struct RamPins {
    calls: usize,
    s: f64,
    bytes: u64,
}

impl RamPins {
    fn of(r: &Report) -> Self {
        let ram: Vec<_> = r.pins.iter().filter(|p| p.kind == "ram").collect();
        RamPins {
            calls: ram.len(),
            s: ram.iter().map(|p| p.duration_s).sum(),
            bytes: ram.iter().filter_map(|p| p.bytes).sum(),
        }
    }
}

/// How the boot went: failed, unfinished, started late.
fn how_the_boot_went(r: &Report) -> Vec<Finding> {
    let st = &r.state;
    let mut out = Vec::new();
    if let Some(f) = &st.failure {
        out.push(Finding {
            phase: f.step,
            measured_s: None,
            text: format!(
                "The boot failed at {}: {}. Logged{}: {}",
                f.step,
                f.summary,
                f.line
                    .as_deref()
                    .map_or(String::new(), |l| format!(" at {l}")),
                f.message
            ),
            fix: fix_for_failure(f.step, r),
            saving_s: None,
        });
    }
    if st.status == "unfinished" {
        out.push(Finding {
            phase: "state",
            measured_s: None,
            text: format!(
                "The log ends before the boot did, during {}. Phases that had not ended are drawn to the last line seen; nothing after it is known.",
                st.ends_during.as_deref().unwrap_or("an unknown phase")
            ),
            fix: "Collect the logs again after the pod is Running (or has failed), e.g. `journalctl -u containerd -S '40 min ago'`.".into(),
            saving_s: None,
        });
    }
    if st.status == "stopped" {
        out.push(Finding {
            phase: "state",
            measured_s: None,
            text: format!(
                "The boot did not finish: {}. Phases that had not ended are drawn to the last line before the stop; nothing after it is the boot's.",
                st.ends_during.as_deref().unwrap_or("the sandbox was stopped")
            ),
            fix: "A stop before the container starts comes from outside the boot: look at why the pod was deleted or its sandbox stopped (the kubelet's log, `kubectl describe pod` events: a probe, a timeout, an eviction, a user).".into(),
            saving_s: None,
        });
    }
    if !st.started_late.is_empty() {
        out.push(Finding {
            phase: "state",
            measured_s: None,
            text: format!(
                "The log starts after the boot began: {}. Phases before its first line are missing; the GPU count is taken from {}.",
                st.started_late.join("; "),
                r.gpu_count_from
            ),
            fix: "Collect the logs from before the pod was created (a wider `journalctl -S`).".into(),
            saving_s: None,
        });
    }
    out
}

/// `128 GiB`, `256 MiB`, `128.03 GiB`.
fn size_words(b: u64) -> String {
    let (v, unit) = if b >= 1 << 30 {
        (gib(b), "GiB")
    } else {
        (b as f64 / f64::from(1u32 << 20), "MiB")
    };
    let s = format!("{v:.2}");
    format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// `BAR 1 (256 MiB, 64-bit prefetchable)`.
fn resource_words(b: &crate::analyze::model::BarFailure) -> String {
    let mut what = Vec::new();
    if let Some(n) = b.bytes {
        what.push(size_words(n));
    }
    if b.pref64 {
        what.push("64-bit prefetchable".to_string());
    }
    if what.is_empty() {
        b.resource.clone()
    } else {
        format!("{} ({})", b.resource, what.join(", "))
    }
}

/// GPU BARs the guest kernel could not assign: the GPU, each BAR and its size, the bridge
/// windows above, what the kernel and the NVIDIA driver said; the fixes are the guest
/// firmware's 64-bit MMIO window, the root port's reserve, Kata's root port, `pci=realloc`.
fn bar_unassigned(r: &Report) -> Option<Finding> {
    let ba = r.bar_assignment.as_ref()?;
    let mut bdfs: Vec<&str> = Vec::new();
    for b in ba.failures.iter().filter(|b| b.gpu || !is_bridge(b)) {
        if !bdfs.contains(&b.bdf.as_str()) {
            bdfs.push(&b.bdf);
        }
    }
    let mut parts = Vec::new();
    for bdf in &bdfs {
        let mine: Vec<_> = ba
            .failures
            .iter()
            .filter(|b| b.bdf == *bdf && !is_bridge(b))
            .collect();
        let kind = if mine.iter().any(|b| b.gpu) {
            "GPU"
        } else {
            "device"
        };
        let first = mine
            .first()
            .map_or(String::new(), |b| format!(" — logged at {}", b.line));
        parts.push(format!(
            "{kind} {bdf}'s {}{first}",
            mine.iter()
                .map(|b| resource_words(b))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // the NVIDIA driver's own word for a GPU whose BAR lines the log lacks
    for n in &ba.nvrm_invalid {
        if let Some((bdf, bar)) = n.split_once(' ') {
            if !bdfs.contains(&bdf) {
                parts.push(format!("GPU {bdf}'s {bar}"));
            }
        }
    }
    let n = ba.failures.iter().filter(|b| !is_bridge(b)).count().max(1);
    let mut text = format!(
        "The guest could not assign {}: no space for {} in its PCI memory window, so the GPU cannot be used (its driver fails to probe it; no CDI spec can name it).",
        parts.join("; "),
        if n == 1 { "it" } else { "them" }
    );
    let bridges: Vec<String> = ba
        .failures
        .iter()
        .filter(|b| is_bridge(b))
        .map(|b| format!("{} {}", b.bdf, resource_words(b)))
        .collect();
    if !bridges.is_empty() {
        text.push_str(&format!(
            " The bridge window above could not be assigned either: {}.",
            bridges.join("; ")
        ));
    }
    if ba.realloc_hint {
        text.push_str(" The kernel says: try booting with pci=realloc.");
    }
    if !ba.nvrm_invalid.is_empty() {
        let said: Vec<String> = ba
            .nvrm_invalid
            .iter()
            .filter_map(|n| n.split_once(' '))
            .map(|(bdf, bar)| format!("{bar} is 0M ({bdf})"))
            .collect();
        text.push_str(&format!(
            " The NVIDIA driver: \"This PCI I/O region assigned to your NVIDIA device is invalid\", {}.",
            said.join(", ")
        ));
    }
    if !ba.probe_failed.is_empty() {
        text.push_str(&format!(
            " Probe failed: {}.",
            ba.probe_failed
                .iter()
                .map(|p| {
                    let w: Vec<&str> = p.split(' ').collect();
                    format!(
                        "{} {} (error {})",
                        w.first().unwrap_or(&"?"),
                        w.get(1).unwrap_or(&"?"),
                        w.get(2).unwrap_or(&"?")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let pref: u64 = ba
        .failures
        .iter()
        .filter(|b| !is_bridge(b) && b.pref64)
        .filter_map(|b| b.bytes)
        .sum();
    let all: u64 = ba
        .failures
        .iter()
        .filter(|b| !is_bridge(b))
        .filter_map(|b| b.bytes)
        .sum();
    let window_mib = (2 * all.max(1 << 30)).next_power_of_two() >> 20;
    let reserve = if pref > 0 {
        let r = pref.next_power_of_two();
        if r >= 1 << 30 {
            format!("{}G", r >> 30)
        } else {
            format!("{}M", (r >> 20).max(1))
        }
    } else {
        "SIZE".to_string()
    };
    Some(Finding {
        phase: "pci_enumeration",
        measured_s: None,
        text,
        fix: format!(
            "Give the guest a 64-bit MMIO window that holds the GPUs' BARs: with OVMF, QEMU `-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={window_mib}` (MiB; edk2 OVMF: an experimental knob up to 16 TB; Kata 3.2–3.27 set it from the host's GPU BARs, and edk2-stable202502 and later size the window from the devices attached); reserve the space on the port the GPU is plugged into, `-device pcie-root-port,…,pref64-reserve={reserve}` (QEMU pcie-root-port; Kata 2.5–3.27 sized it from the host's BARs); with Kata, machine_type = \"q35\" with hot_plug_vfio = \"root-port\" (2.x: hotplug_vfio_on_root_bus = true) and pcie_root_port = 1 or more (Kata GPU passthrough guide: large-BAR GPUs need a root port); or boot the guest kernel with pci=realloc (Linux PCI setup, the kernel's own hint)."
        ),
        saving_s: None,
    })
}

/// A bridge's window (`bridge window`, or an old kernel's bridge `BAR 13`–`15`), not a
/// device's own BAR.
fn is_bridge(b: &crate::analyze::model::BarFailure) -> bool {
    !b.gpu
        && (b.resource == "bridge window"
            || b.resource
                .strip_prefix("BAR ")
                .and_then(|n| n.parse::<u8>().ok())
                .is_some_and(|n| n > 6))
}

/// A CDI wait that resolved: how long, and how much of it the GPU driver's inits are.
fn cdi_wait(r: &Report) -> Option<Finding> {
    let cdi_failed = r
        .state
        .failure
        .as_ref()
        .is_some_and(|f| f.step == "cdi_wait");
    let (cdi, phase) = (r.cdi.as_ref()?, r.phase("cdi_wait")?);
    if !cdi.resolved || cdi_failed {
        return None;
    }
    let driver = r.phase_s("gpu_driver_init");
    let largest = r
        .phases
        .iter()
        .filter(|p| p.name != "vm_create")
        .max_by(|a, b| a.duration_s.total_cmp(&b.duration_s))
        .is_some_and(|l| l.name == "cdi_wait");
    // a log that starts after the first try shows a lower bound
    let least = if phase.at_least { "at least " } else { "" };
    let pace = match (cdi.interval_s, cdi.limit_s) {
        (Some(i), Some(l)) => format!(
            " At one try every {i:.2} s the agent gives up after ~{l:.0} s; this boot used {least}{:.0}% of that.",
            100.0 * phase.duration_s / l
        ),
        _ => String::new(),
    };
    let tries = match cdi.first_try.filter(|_| phase.at_least) {
        Some(k) if k > 0 => {
            format!("{} tries in the log, the first numbered {k}", cdi.tries)
        }
        _ if phase.at_least => format!(
            "{} tries in the log, which starts after the first",
            cdi.tries
        ),
        _ => format!("{} tries", cdi.tries),
    };
    Some(Finding {
        phase: "cdi_wait",
        measured_s: Some(phase.duration_s),
        text: format!(
            "The kata-agent waited {least}{:.1} s for the CDI specs of {} GPUs ({tries}){}. {:.1} s of that is the guest driver enabling the GPUs one at a time; the rest is NVRC/nvidia-ctk generating the specs after the last GPU.{pace}",
            phase.duration_s,
            cdi.devices,
            if largest { " — the largest phase of the boot" } else { "" },
            driver
        ),
        fix: "Shorten gpu_driver_init (hugepages, IOMMUFD or a newer host kernel shorten each GPU's DMA mapping); keep the GPU driver loaded (vGPU / persistent driver) to avoid cold GPU starts.".into(),
        saving_s: None,
    })
}

/// Host pinning said to be missing: a VM with GPUs and no pin trace.
fn no_pin_trace(r: &Report) -> Option<Finding> {
    let ps = &r.pin_summary;
    if ps.traced || r.gpu_count.unwrap_or(0) == 0 {
        return None;
    }
    let why = if ps.iommufd_maps > 0 {
        format!(
            "this VM mapped its memory through IOMMUFD ({} IOMMU_IOAS_MAP calls), which has no vfio_pin_pages_remote to time",
            ps.iommufd_maps
        )
    } else if ps.foreign_calls > 0 {
        format!(
            "the pin trace holds {} calls, none of them this boot's",
            ps.foreign_calls
        )
    } else {
        "IOMMUFD, or no bpftrace was run while the pod started".to_string()
    };
    Some(Finding {
        phase: "input",
        measured_s: None,
        text: format!(
            "No host pin trace for this boot ({why}): how long the host spent pinning GPU BARs and guest RAM is not known — not zero. Per-GPU pin times are left empty and no pinning fix is suggested."
        ),
        fix: "Run `vmtune boot trace --script pin-pages --run 600 > pins.txt` (type1) or `--script map-ioctls` (IOMMUFD) on the host while the pod starts, and add pins.txt.".into(),
        saving_s: None,
    })
}

/// Measured pins of GPU BARs (0.1 s or more each), and what a newer host kernel saves.
fn bar_pinning(r: &Report, c: &Constants) -> Option<Finding> {
    let bar_pins: Vec<_> = r
        .pins
        .iter()
        .filter(|p| p.kind == "bar" && p.duration_s >= 0.1)
        .collect();
    if bar_pins.is_empty() {
        return None;
    }
    let total: f64 = bar_pins.iter().map(|p| p.duration_s).sum();
    let n = bar_pins.len();
    let min = bar_pins
        .iter()
        .map(|p| p.duration_s)
        .fold(f64::INFINITY, f64::min);
    let max = bar_pins.iter().map(|p| p.duration_s).fold(0.0, f64::max);
    let size = bar_pins.iter().filter_map(|p| p.bytes).max().unwrap_or(0);
    let gpus = {
        let mut g: Vec<&str> = bar_pins.iter().filter_map(|p| p.gpu.as_deref()).collect();
        g.sort_unstable();
        g.dedup();
        g.len()
    };
    Some(Finding {
        phase: "dma_pinning",
        measured_s: Some(total),
        text: format!(
            "{n} pin calls of GPU BARs (up to {:.0} GiB) took {min:.2}-{max:.2} s each ({total:.1} s), for {gpus} GPUs, each while its driver was enabling: they run one after another inside gpu_driver_init.",
            gib(size)
        ),
        fix: "A newer host kernel (BAR mappings by huge pfnmap, commits 356e88ebe447, 0fd06844de5d, f9e54c3a2f5b) with QEMU >= 9.2 maps a BAR in under 1 ms; the IOMMUFD backend skips these peer-to-peer BAR mappings (Kata GPU boot study: 2:25 to 1:54).".into(),
        saving_s: Some((total - n as f64 * c.bar_new_s).max(0.0)),
    })
}

/// Guest RAM pinned at the pace of small pages for a second or more: hugepages save it.
fn ram_pinning(r: &Report, c: &Constants, ram: &RamPins) -> Option<Finding> {
    let ps = &r.pin_summary;
    let small_pages = ram.s >= 1.0 && ps.ram_backing == Some("small pages");
    if !small_pages {
        return None;
    }
    let ram_s = ram.s;
    let g = gib(ram.bytes);
    let with_huge = c.ram_pin_s(g, PageSize::G1, true);
    Some(Finding {
        phase: "dma_pinning",
        measured_s: Some(ram_s),
        text: format!(
            "Guest RAM pinning took {ram_s:.1} s over {} call{} ({g:.0} GiB at {:.3} s/GiB: the pace of small pages faulted in by the pin; hugetlbfs pins at ~0.003 s/GiB).",
            ram.calls,
            if ram.calls == 1 { "" } else { "s" },
            ps.ram_s_per_gib.unwrap_or(0.0)
        ),
        fix: format!(
            "Back guest RAM with hugepages (Kata enable_hugepages; the Kata GPU boot study: 3:03 to 2:26): pinning {g:.0} GiB of hugetlbfs takes ~{with_huge:.1} s; a kernel with 64 KiB pages walks 16x fewer pages."
        ),
        saving_s: Some((ram_s - with_huge).max(0.0)),
    })
}

/// A long memory hotplug whose RAM pinning is not already a finding.
fn memory_hotplug(r: &Report, ram: &RamPins) -> Option<Finding> {
    let mh = r.phase("memory_hotplug")?;
    (ram.s < 1.0 && mh.duration_s >= 5.0).then(|| Finding {
        phase: "memory_hotplug",
        measured_s: Some(mh.duration_s),
        text: format!("Memory hotplug took {:.1} s ({}).", mh.duration_s, mh.detail),
        fix: "Boot with more memory (Kata default_memory) or back it with hugepages so the hotplugged blocks are cheaper to pin.".into(),
        saving_s: None,
    })
}

/// The guest driver enabling two or more GPUs one after another.
fn serial_driver_init(r: &Report) -> Option<Finding> {
    let inits: Vec<f64> = r
        .phases
        .iter()
        .filter(|p| p.name == "gpu_driver_init")
        .map(|p| p.duration_s)
        .collect();
    if inits.len() < 2 {
        return None;
    }
    let total: f64 = inits.iter().sum();
    Some(Finding {
        phase: "gpu_driver_init",
        measured_s: Some(total),
        text: format!(
            "The guest driver enabled {} GPUs one after another, {:.2} s each on average ({total:.1} s).",
            inits.len(),
            total / inits.len() as f64
        ),
        fix: if r.pin_summary.traced {
            "Each enable waits for the host to DMA-map that GPU: a newer host kernel or IOMMUFD takes the BAR mapping out; 64 KiB pages cut the per-page work 16x."
        } else {
            "Each enable may wait for the host to DMA-map that GPU: trace the host (see the input finding) to see how much of it that is."
        }
        .into(),
        saving_s: None,
    })
}

/// DMA map/pin calls near VFIO type1's `dma_entry_limit`.
fn dma_entry_limit(r: &Report) -> Option<Finding> {
    let ps = &r.pin_summary;
    let maps = ps.calls.max(ps.map_ioctls);
    (maps as f64 >= 0.5 * DMA_ENTRY_LIMIT as f64).then(|| Finding {
        phase: "dma_pinning",
        measured_s: ps.total_s,
        text: format!("{maps} DMA map/pin calls: near VFIO type1's dma_entry_limit of {DMA_ENTRY_LIMIT}."),
        fix: "Hotplug memory in larger blocks, raise vfio_iommu_type1 dma_entry_limit, or use IOMMUFD.".into(),
        saving_s: None,
    })
}

/// Input lines left out: bad lines, and guest kernel lines stamped with the wall clock.
fn skipped_input(r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    if r.stats.bad.total() > 0 {
        out.push(Finding {
            phase: "input",
            measured_s: None,
            text: format!(
                "{} bad lines were skipped (see stats.bad).",
                r.stats.bad.total()
            ),
            fix: "None needed for the timeline; check the inputs if a phase is missing.".into(),
            saving_s: None,
        });
    }
    if r.stats.wall_clock_kernel > 0 {
        out.push(Finding {
            phase: "input",
            measured_s: None,
            text: format!(
                "{} guest kernel lines were not used: their stamps are wall-clock times ({}), not seconds since boot.",
                r.stats.wall_clock_kernel,
                r.stats.wall_clock_shapes.join(", ")
            ),
            fix: "Capture the guest's log with plain `dmesg` (no -T, -e or --time-format) or `journalctl -k -o short-monotonic`.".into(),
            saving_s: None,
        });
    }
    out
}

/// "Together the fixes …" when the findings name savings.
pub fn fixes_line(r: &Report) -> Option<String> {
    let save = r.fixes_save_s?;
    let to = match r.total_s {
        Some(t) if !r.total_at_least => format!(" (to ~{} s)", secs_fmt((t - save).max(0.0), 1)),
        _ => String::new(),
    };
    Some(format!(
        "Together the fixes above save up to ~{} s of the {} boot{to}: all of it where the phases they shorten lie on the critical path.",
        secs_fmt(save, 1),
        r.total_words(),
    ))
}

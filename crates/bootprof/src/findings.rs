//! Findings: plain-word conclusions from a timeline, each tied to the measured phase it is
//! about and the fix it points to (hugepages, IOMMUFD, a newer kernel, 64 KiB pages).

use crate::estimate::Constants;
use crate::timeline::{Finding, Report};

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Derive findings from a built report.
pub fn findings(r: &Report) -> Vec<Finding> {
    let c = Constants::default();
    let mut out = Vec::new();
    let sum = |name: &str| -> f64 {
        r.phases
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.duration_s)
            .sum()
    };
    let largest = r
        .phases
        .iter()
        .filter(|p| p.name != "vm_create")
        .max_by(|a, b| a.duration_s.total_cmp(&b.duration_s));

    // CDI wait
    if let (Some(cdi), Some(phase)) = (&r.cdi, r.phases.iter().find(|p| p.name == "cdi_wait")) {
        let driver = sum("gpu_driver_init");
        let is_largest = largest.is_some_and(|l| l.name == "cdi_wait");
        let pace = cdi.limit_s.map_or(String::new(), |l| {
            format!(
                " At one try every {:.2} s the agent gives up after ~{l:.0} s; this boot used {:.0}% of that.",
                cdi.interval_s.unwrap_or(0.0),
                100.0 * phase.duration_s / l
            )
        });
        out.push(Finding {
            phase: "cdi_wait",
            measured_s: phase.duration_s,
            text: format!(
                "The kata-agent waited {:.1} s for the CDI specs of {} GPUs ({} of {} tries){}. {:.1} s of that is the guest driver enabling the GPUs one at a time; the rest is NVRC/nvidia-ctk generating the specs after the last GPU.{pace}",
                phase.duration_s,
                cdi.devices,
                cdi.tries,
                cdi.max_tries,
                if is_largest { " — the largest phase of the boot" } else { "" },
                driver
            ),
            fix: "Shorten gpu_driver_init (hugepages, IOMMUFD or a newer host kernel shorten each GPU's DMA mapping); keep the GPU driver loaded (vGPU / persistent driver) to avoid cold GPU starts.".into(),
            saving_s: None,
        });
    }

    // BAR pinning per GPU
    let bar_pins: Vec<_> = r
        .pins
        .iter()
        .filter(|p| p.kind == "bar" && p.duration_s >= 0.1)
        .collect();
    if !bar_pins.is_empty() {
        let total: f64 = bar_pins.iter().map(|p| p.duration_s).sum();
        let n = bar_pins.len();
        let min = bar_pins
            .iter()
            .map(|p| p.duration_s)
            .fold(f64::INFINITY, f64::min);
        let max = bar_pins.iter().map(|p| p.duration_s).fold(0.0, f64::max);
        let size = bar_pins.first().and_then(|p| p.bytes).unwrap_or(0);
        let page = bar_pins.first().and_then(|p| p.page_size).unwrap_or(0);
        out.push(Finding {
            phase: "dma_pinning",
            measured_s: total,
            text: format!(
                "{n} pin calls of a {:.0} GiB GPU BAR took {min:.2}-{max:.2} s each ({total:.1} s), walked in {page}-byte pages, one per GPU while its driver was enabling: they run one after another inside gpu_driver_init.",
                gib(size)
            ),
            fix: "A newer host kernel (BAR mappings by huge pfnmap, commits 356e88ebe447, 0fd06844de5d, f9e54c3a2f5b) with QEMU >= 9.2 maps a BAR in under 1 ms; the IOMMUFD backend skips these peer-to-peer BAR mappings (Kata GPU boot study: 2:25 to 1:54).".into(),
            saving_s: Some(total - n as f64 * c.bar_new_s),
        });
    }

    // RAM pinning at small pages
    let ram: Vec<_> = r.pins.iter().filter(|p| p.kind == "ram").collect();
    let ram_s: f64 = ram.iter().map(|p| p.duration_s).sum();
    let ram_bytes: u64 = ram.iter().filter_map(|p| p.bytes).sum();
    let small = ram.iter().any(|p| p.page_size.is_some_and(|s| s < 1 << 21));
    if ram_s >= 1.0 && small {
        let g = gib(ram_bytes);
        let with_huge = c.ram_pin_s(g, crate::estimate::PageSize::G1, true);
        out.push(Finding {
            phase: "memory_hotplug",
            measured_s: ram_s,
            text: format!(
                "Guest RAM pinning took {ram_s:.1} s over {} calls ({g:.0} GiB at 4 KiB pages, {:.3} s/GiB).",
                ram.len(),
                if g > 0.0 { ram_s / g } else { 0.0 }
            ),
            fix: format!(
                "Back guest RAM with hugepages (Kata enable_hugepages; the Kata GPU boot study: 3:03 to 2:26): pinning {g:.0} GiB of hugetlbfs takes ~{with_huge:.1} s; a kernel with 64 KiB pages walks 16x fewer pages."
            ),
            saving_s: Some((ram_s - with_huge).max(0.0)),
        });
    }
    if let Some(mh) = r.phases.iter().find(|p| p.name == "memory_hotplug") {
        if ram_s < 1.0 && mh.duration_s >= 5.0 {
            out.push(Finding {
                phase: "memory_hotplug",
                measured_s: mh.duration_s,
                text: format!("Memory hotplug took {:.1} s ({}).", mh.duration_s, mh.detail),
                fix: "Boot with more memory (Kata default_memory) or back it with hugepages so the hotplugged blocks are cheaper to pin.".into(),
                saving_s: None,
            });
        }
    }
    // serial GPU driver init
    let inits: Vec<f64> = r
        .phases
        .iter()
        .filter(|p| p.name == "gpu_driver_init")
        .map(|p| p.duration_s)
        .collect();
    if inits.len() >= 2 {
        let total: f64 = inits.iter().sum();
        out.push(Finding {
            phase: "gpu_driver_init",
            measured_s: total,
            text: format!(
                "The guest driver enabled {} GPUs one after another, {:.2} s each on average ({total:.1} s).",
                inits.len(),
                total / inits.len() as f64
            ),
            fix: "Each enable waits for the host to DMA-map that GPU: a newer host kernel or IOMMUFD takes the BAR mapping out; 64 KiB pages cut the per-page work 16x.".into(),
            saving_s: None,
        });
    }
    // DMA entry limit
    let maps = r.pin_summary.calls.max(r.pin_summary.map_ioctls);
    if maps as f64 >= 0.5 * crate::timeline::DMA_ENTRY_LIMIT as f64 {
        out.push(Finding {
            phase: "dma_pinning",
            measured_s: r.pin_summary.total_s,
            text: format!("{maps} DMA map/pin calls: near VFIO type1's dma_entry_limit of {}.", crate::timeline::DMA_ENTRY_LIMIT),
            fix: "Hotplug memory in larger blocks, raise vfio_iommu_type1 dma_entry_limit, or use IOMMUFD.".into(),
            saving_s: None,
        });
    }
    if r.stats.bad.total() > 0 {
        out.push(Finding {
            phase: "input",
            measured_s: 0.0,
            text: format!(
                "{} bad lines were skipped (see stats.bad).",
                r.stats.bad.total()
            ),
            fix: "None needed for the timeline; check the inputs if a phase is missing.".into(),
            saving_s: None,
        });
    }
    out
}

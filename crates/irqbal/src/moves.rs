//! When does an affinity write take effect? Told apart by each IRQ's chip, as
//! `/proc/interrupts` (and `/sys/kernel/irq/N/chip_name`) names it.
//!
//! Linux moves an interrupt either at once, from the write (the next interrupt goes to the
//! new CPU), or *deferred*: the write is recorded and applied from the IRQ's next interrupt,
//! in its ack on the old CPU (`irq_move_irq()` from `apic_ack_irq()`), so that interrupt
//! still lands on the old CPU. Since Linux 6.13 a chip says so with `IRQCHIP_MOVE_DEFERRED`
//! (before, by not setting `IRQ_MOVE_PCNTXT`). Deferred chips:
//!
//! - x86 PCI MSI/MSI-X under the APIC vector domain, i.e. without interrupt remapping
//!   (`arch/x86/kernel/apic/msi.c`: `x86_init_dev_msi_info()`); the chip is named
//!   `PCI-MSI` / `PCI-MSIX-<bdf>` (per-device domains, 6.2+) — the common KVM guest without a
//!   vIOMMU, and this project's development VM;
//! - x86 IO-APIC, DMAR/AMD-Vi MSI, Hyper-V PCI MSI on x86 (`HV-PCI-MSI…`);
//! - RISC-V IMSIC PCI MSI.
//!
//! Remapped interrupts move at once: their MSI parent domain names its chips with the prefix
//! `IR-` (Intel DMAR, AMD-Vi, RISC-V IOMMU) or `vIR-` (a virtualised AMD IOMMU), e.g.
//! `IR-PCI-MSIX-0000:00:03.0` (older kernels: `IR-PCI-MSI`). arm64's GIC ITS (`ITS-…`) moves
//! at once too. A vIOMMU that does not remap interrupts (virtio-iommu) leaves the chip names
//! unprefixed: the chip, not the presence of an IOMMU, decides.

use serde::{Deserialize, Serialize};

use crate::policy::MoveKind;

/// One IRQ's move semantics and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqMoves {
    pub irq: u32,
    pub chip: Option<String>,
    pub moves: MoveKind,
    pub why: String,
}

/// The guest's move semantics for the IRQs it balances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveDetection {
    pub moves: MoveKind,
    /// One sentence: what decided it.
    pub reason: String,
    pub irqs: Vec<IrqMoves>,
}

/// The architecture vmtune was built for (`std::env::consts::ARCH`: `x86_64`, `aarch64`, …).
pub fn this_arch() -> &'static str {
    std::env::consts::ARCH
}

/// The move semantics of an IRQ whose chip is `chip` on `arch`, and why.
pub fn irq_moves(chip: Option<&str>, arch: &str) -> (MoveKind, String) {
    let x86 = matches!(arch, "x86_64" | "x86");
    let Some(chip) = chip.map(str::trim).filter(|c| !c.is_empty()) else {
        return if x86 {
            (
                MoveKind::Deferred,
                "chip unknown; on x86 a move is deferred unless the interrupt is remapped".into(),
            )
        } else {
            (
                MoveKind::Direct,
                format!("chip unknown; {arch} moves interrupts at once"),
            )
        };
    };
    if chip.starts_with("xen-") {
        return (
            MoveKind::Direct,
            format!("{chip}: a Xen event channel is rebound at once"),
        );
    }
    if chip.starts_with("IR-") || chip.starts_with("vIR-") {
        return (
            MoveKind::Direct,
            format!("{chip}: remapped (IR-), the next interrupt goes to the new CPU"),
        );
    }
    let msi = chip.contains("MSI");
    if x86 && (msi || chip.contains("IO-APIC")) {
        return (
            MoveKind::Deferred,
            format!(
                "{chip}: x86 {} without interrupt remapping, moved at its next interrupt on \
                 the old CPU",
                if msi { "MSI" } else { "IO-APIC" }
            ),
        );
    }
    if arch == "riscv64" && msi {
        return (
            MoveKind::Deferred,
            format!("{chip}: RISC-V IMSIC PCI MSI, moved at its next interrupt"),
        );
    }
    if x86 {
        // an x86 chip of another kind: be safe
        return (
            MoveKind::Deferred,
            format!("{chip}: not a remapped (IR-) chip; taken as deferred on x86"),
        );
    }
    (
        MoveKind::Direct,
        format!("{chip}: {arch} moves interrupts at once"),
    )
}

/// The guest's move semantics from the chips of the IRQs it balances (`(irq, chip)`): deferred
/// if any of them is (the safe choice for all), else direct.
pub fn detect(irqs: &[(u32, Option<String>)], arch: &str) -> MoveDetection {
    let per: Vec<IrqMoves> = irqs
        .iter()
        .map(|(irq, chip)| {
            let (moves, why) = irq_moves(chip.as_deref(), arch);
            IrqMoves {
                irq: *irq,
                chip: chip.clone(),
                moves,
                why,
            }
        })
        .collect();
    let deferred: Vec<&IrqMoves> = per
        .iter()
        .filter(|m| m.moves == MoveKind::Deferred)
        .collect();
    let (moves, reason) = if per.is_empty() {
        let (k, why) = irq_moves(None, arch);
        (k, format!("no balanced IRQ to look at; {why}"))
    } else if let Some(first) = deferred.first() {
        (
            MoveKind::Deferred,
            format!(
                "{} of {} balanced IRQ(s) move deferred ({})",
                deferred.len(),
                per.len(),
                first.why
            ),
        )
    } else {
        (
            MoveKind::Direct,
            format!(
                "all {} balanced IRQ(s) move at once ({})",
                per.len(),
                per[0].why
            ),
        )
    };
    MoveDetection {
        moves,
        reason,
        irqs: per,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chips_of_real_kernels() {
        // chip names as /proc/interrupts prints them: 6.2+ per-device domains, older kernels,
        // remapped (Intel DMAR / AMD-Vi), Hyper-V, arm64 ITS
        let cases = [
            ("PCI-MSIX-0000:00:03.0", "x86_64", MoveKind::Deferred),
            ("PCI-MSI-0000:00:1f.6", "x86_64", MoveKind::Deferred),
            ("PCI-MSI", "x86_64", MoveKind::Deferred),
            ("IO-APIC", "x86_64", MoveKind::Deferred),
            ("HV-PCI-MSIX-a1b2:00:02.0", "x86_64", MoveKind::Deferred),
            ("IR-PCI-MSIX-0000:3b:00.0", "x86_64", MoveKind::Direct),
            ("IR-PCI-MSI", "x86_64", MoveKind::Direct),
            ("IR-IO-APIC", "x86_64", MoveKind::Direct),
            ("vIR-PCI-MSIX-0000:00:04.0", "x86_64", MoveKind::Direct),
            ("ITS-PCI-MSIX-0000:00:01.0", "aarch64", MoveKind::Direct),
            ("GICv3", "aarch64", MoveKind::Direct),
            ("PCI-MSIX-0000:00:02.0", "riscv64", MoveKind::Deferred),
            ("IR-PCI-MSIX-0000:00:02.0", "riscv64", MoveKind::Direct),
            ("xen-pirq-msi", "x86_64", MoveKind::Direct),
            ("xen-dyn", "x86_64", MoveKind::Direct),
            ("LAPIC-NMI", "x86_64", MoveKind::Deferred),
        ];
        for (chip, arch, want) in cases {
            let (got, why) = irq_moves(Some(chip), arch);
            assert_eq!(got, want, "{chip} on {arch}: {why}");
            assert!(why.contains(chip), "{why}");
        }
        assert_eq!(irq_moves(None, "x86_64").0, MoveKind::Deferred);
        assert_eq!(irq_moves(Some("  "), "aarch64").0, MoveKind::Direct);
    }

    #[test]
    fn one_deferred_irq_makes_the_guest_deferred() {
        let d = detect(
            &[
                (38, Some("IR-PCI-MSIX-0000:00:03.0".into())),
                (39, Some("PCI-MSIX-0000:00:04.0".into())),
            ],
            "x86_64",
        );
        assert_eq!(d.moves, MoveKind::Deferred);
        assert!(d.reason.starts_with("1 of 2"), "{}", d.reason);
        assert_eq!(d.irqs[0].moves, MoveKind::Direct);
        let d = detect(&[(38, Some("IR-PCI-MSIX-0000:00:03.0".into()))], "x86_64");
        assert_eq!(d.moves, MoveKind::Direct);
        let d = detect(&[], "x86_64");
        assert_eq!(d.moves, MoveKind::Deferred);
        assert!(d.reason.contains("no balanced IRQ"), "{}", d.reason);
    }

    /// A guest's `/proc/interrupts` in the shapes kernels print, with known truth: the arch,
    /// the kernel era (per-device chip names `PCI-MSIX-<bdf>` since 6.2, `PCI-MSI <hwirq>`
    /// before), interrupt remapping or not, some virtio-net queues among other devices.
    fn guest_interrupts(arm: bool, new_names: bool, ir: bool, queues: u32, cpus: usize) -> String {
        let mut s = String::from("      ");
        for c in 0..cpus {
            s.push_str(&format!("     CPU{c}"));
        }
        s.push('\n');
        let counts = |n: u32| {
            (0..cpus)
                .map(|c| format!("{:>10}", (n as usize * 7 + c * 3) % 1000))
                .collect::<String>()
        };
        let prefix = if arm {
            "ITS-"
        } else if ir {
            "IR-"
        } else {
            ""
        };
        let chip = |bdf: &str, hw: u32| {
            if new_names {
                let trig = if arm {
                    format!("{hw} Edge")
                } else {
                    format!("{hw}-edge")
                };
                format!("{prefix}PCI-MSIX-{bdf}   {trig}")
            } else {
                let base = 524288 + hw;
                format!("{prefix}PCI-MSI {base}-edge")
            }
        };
        let mut n = 24;
        let io = if arm {
            "GICv3  27 Level"
        } else {
            "IO-APIC   2-edge"
        };
        s.push_str(&format!(" {n:>3}:{} {io}      timer\n", counts(n)));
        n += 1;
        s.push_str(&format!(
            " {n:>3}:{} {}      virtio1-req.0\n",
            counts(n),
            chip("0000:00:02.0", 1)
        ));
        for q in 0..queues {
            n += 1;
            s.push_str(&format!(
                " {n:>3}:{} {}      virtio2-input.{q}\n",
                counts(n),
                chip("0000:00:03.0", 2 * q + 1)
            ));
            n += 1;
            s.push_str(&format!(
                " {n:>3}:{} {}      virtio2-output.{q}\n",
                counts(n),
                chip("0000:00:03.0", 2 * q + 2)
            ));
        }
        s.push_str(&format!("NMI:{}   Non-maskable interrupts\n", counts(0)));
        s.push_str(&format!("LOC:{}   Local timer interrupts\n", counts(1)));
        s.push_str("ERR:          0\n");
        s
    }

    proptest::proptest! {
        #[test]
        fn detection_recovers_the_truth_from_generated_proc_interrupts(
            arm in proptest::bool::ANY, new_names in proptest::bool::ANY, ir in proptest::bool::ANY,
            queues in 1u32..5, cpus in 1usize..9,
        ) {
            let text = guest_interrupts(arm, new_names, ir, queues, cpus);
            let t = topo::interrupts::parse_proc_interrupts(&text).unwrap();
            let nets = vec!["virtio2".to_string()];
            let irqs: Vec<(u32, Option<String>)> = t
                .irqs
                .iter()
                .filter(|r| crate::daemon::is_nic_queue_name(&r.actions, &nets))
                .filter_map(|r| Some((r.number?, r.chip.clone())))
                .collect();
            proptest::prop_assert_eq!(irqs.len() as u32, 2 * queues, "{}", text);
            let arch = if arm { "aarch64" } else { "x86_64" };
            let d = detect(&irqs, arch);
            let want = if arm || ir { MoveKind::Direct } else { MoveKind::Deferred };
            proptest::prop_assert_eq!(d.moves, want, "{}", d.reason);
            proptest::prop_assert!(d.irqs.iter().all(|m| m.moves == want));
        }
    }
}

//! `/proc/interrupts` parser.
//!
//! ```text
//!            CPU0       CPU1
//!   0:         20          0  IR-IO-APIC    2-edge      timer
//!  26:          0       1234  PCI-MSIX-0000:00:03.0   1-edge      virtio0-input.0
//!  NMI:          0          0   Non-maskable interrupts
//!  ERR:          0
//! ```
//! Numbered rows carry the chip, the hardware IRQ with its trigger, and the action names
//! (which may contain spaces and commas); named rows carry a description. Rows may have fewer
//! count columns than CPUs (`ERR`, `MIS`).

use crate::cpuset::CpuSet;
use crate::model::{InterruptTable, Irq};

/// Parse the text of `/proc/interrupts`. The error names the line and the problem.
pub fn parse_proc_interrupts(text: &str) -> Result<InterruptTable, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("empty file")?;
    let mut cpus = Vec::new();
    for tok in header.split_whitespace() {
        let n = tok
            .strip_prefix("CPU")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| format!("line 1: header column {tok:?} is not CPUn"))?;
        cpus.push(n);
    }
    if cpus.is_empty() {
        return Err("line 1: no CPU columns in header".into());
    }
    let mut irqs = Vec::new();
    for (lineno, line) in lines {
        let (label, rest) = line
            .split_once(':')
            .ok_or_else(|| format!("line {}: no ':' after the IRQ label", lineno + 1))?;
        let id = label.trim().to_string();
        if id.is_empty() || id.contains(char::is_whitespace) {
            return Err(format!(
                "line {}: bad IRQ label {:?}",
                lineno + 1,
                label.trim()
            ));
        }
        let number = id.parse::<u32>().ok();
        // counts: up to cpus.len() leading numeric tokens
        let mut counts = Vec::with_capacity(cpus.len());
        let mut tail = rest;
        while counts.len() < cpus.len() {
            let trimmed = tail.trim_start();
            let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
            let tok = &trimmed[..end];
            match tok.parse::<u64>() {
                Ok(v) if !tok.is_empty() => {
                    counts.push(v);
                    tail = &trimmed[end..];
                }
                _ => break,
            }
        }
        let desc = tail.trim();
        let (chip, hwirq, actions) = if number.is_some() {
            split_chip(desc)
        } else {
            (None, None, desc.to_string())
        };
        irqs.push(Irq {
            id,
            number,
            counts,
            chip,
            hwirq,
            actions,
            affinity: None,
            effective_affinity: None,
        });
    }
    Ok(InterruptTable { cpus, irqs })
}

/// Split `IR-PCI-MSI 327680-edge      xhci_hcd` into chip, hwirq and actions. Old kernels print
/// `PCI-MSI-edge  eth0` (no separate hwirq column).
fn split_chip(desc: &str) -> (Option<String>, Option<String>, String) {
    let mut rest = desc;
    let next = |s: &mut &str| -> Option<String> {
        let t = s.trim_start();
        if t.is_empty() {
            return None;
        }
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let tok = t[..end].to_string();
        *s = &t[end..];
        Some(tok)
    };
    let chip = next(&mut rest);
    let save = rest;
    let hwirq = match next(&mut rest) {
        Some(t) if looks_like_hwirq(&t) => Some(t),
        // GIC-based chips (arm64) print the hwirq and the trigger apart:
        // `ITS-PCI-MSIX-0002:01:00.0   0 Edge      nvme0q0`
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) => {
            let after = rest;
            match next(&mut rest) {
                Some(trig) if matches!(trig.as_str(), "Edge" | "Level") => {
                    Some(format!("{t} {trig}"))
                }
                _ => {
                    rest = after;
                    Some(t)
                }
            }
        }
        _ => {
            rest = save;
            None
        }
    };
    (chip, hwirq, rest.trim().to_string())
}

fn looks_like_hwirq(tok: &str) -> bool {
    // `2-edge`, `524288-edge`, `9-fasteoi`, `0-level`, or a bare trigger word
    match tok.split_once('-') {
        Some((n, trig)) => {
            !n.is_empty() && n.chars().all(|c| c.is_ascii_hexdigit()) && !trig.is_empty()
        }
        None => matches!(tok, "edge" | "level" | "fasteoi"),
    }
}

/// Fill `affinity` / `effective_affinity` of each numbered IRQ from `read(path)` where
/// `path` is `N/smp_affinity_list` or `N/effective_affinity_list` relative to `/proc/irq`.
/// Unreadable or unparsable files leave the value unknown.
pub fn fill_affinities(table: &mut InterruptTable, read: impl Fn(&str) -> Option<String>) {
    for irq in &mut table.irqs {
        if let Some(n) = irq.number {
            irq.affinity =
                read(&format!("{n}/smp_affinity_list")).and_then(|s| CpuSet::parse_list(&s).ok());
            irq.effective_affinity = read(&format!("{n}/effective_affinity_list"))
                .and_then(|s| CpuSet::parse_list(&s).ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "           CPU0       CPU1
  0:         33          0   IO-APIC   2-edge      timer
  1:          0          9   IO-APIC   1-edge      i8042
 24:          0          0  PCI-MSIX-0000:00:03.0   0-edge      virtio0-config
 25:      12345        678  PCI-MSIX-0000:00:03.0   1-edge      virtio0-input.0
 30:          1          2  IR-PCI-MSI 524288-edge      vfio-msi[0](0000:01:00.0)
 31:          0          0  IO-APIC  18-fasteoi   ehci_hcd:usb1, ehci_hcd:usb2
 40:          5          0  PCI-MSI-edge      eth0
NMI:          0          0   Non-maskable interrupts
LOC:     123456     654321   Local timer interrupts
ERR:          0
MIS:          0
";

    #[test]
    fn parses_rows() {
        let t = parse_proc_interrupts(SAMPLE).unwrap();
        assert_eq!(t.cpus, vec![0, 1]);
        assert_eq!(t.irqs.len(), 11);
        let r = &t.irqs[3];
        assert_eq!(r.number, Some(25));
        assert_eq!(r.counts, vec![12345, 678]);
        assert_eq!(r.chip.as_deref(), Some("PCI-MSIX-0000:00:03.0"));
        assert_eq!(r.hwirq.as_deref(), Some("1-edge"));
        assert_eq!(r.actions, "virtio0-input.0");
        assert!(t.irqs[4].is_vfio());
        assert_eq!(t.irqs[5].actions, "ehci_hcd:usb1, ehci_hcd:usb2");
        assert_eq!(t.irqs[6].chip.as_deref(), Some("PCI-MSI-edge"));
        assert_eq!(t.irqs[6].hwirq, None);
        assert_eq!(t.irqs[6].actions, "eth0");
        let loc = t.irqs.iter().find(|i| i.id == "LOC").unwrap();
        assert_eq!(loc.number, None);
        assert_eq!(loc.total(), 777777);
        assert_eq!(loc.actions, "Local timer interrupts");
        let err = t.irqs.iter().find(|i| i.id == "ERR").unwrap();
        assert_eq!(err.counts, vec![0]);
    }

    #[test]
    fn arm64_gic_rows_split_hwirq_and_trigger() {
        // the shape of an arm64 host with a GICv3 ITS (hwirq and trigger in two columns)
        let text = "           CPU0       CPU1
 11:      98012      87234     GICv3  27 Level     arch_timer
123:          0          7 ITS-PCI-MSIX-0002:00:00.0   1 Edge      eth0-rxtx0
206:          0          0  ITS-PCI-MSIX-0002:01:00.0   0 Edge      nvme0q0
IPI0:       10         12       Rescheduling interrupts
";
        let t = parse_proc_interrupts(text).unwrap();
        let r = &t.irqs[1];
        assert_eq!(r.chip.as_deref(), Some("ITS-PCI-MSIX-0002:00:00.0"));
        assert_eq!(r.hwirq.as_deref(), Some("1 Edge"));
        assert_eq!(r.actions, "eth0-rxtx0");
        assert_eq!(t.irqs[0].hwirq.as_deref(), Some("27 Level"));
        assert_eq!(t.irqs[0].actions, "arch_timer");
        assert_eq!(t.irqs[2].actions, "nvme0q0");
    }

    #[test]
    fn rejects_junk() {
        assert!(parse_proc_interrupts("").is_err());
        assert!(parse_proc_interrupts("hello world\n").is_err());
        assert!(parse_proc_interrupts("   CPU0\n garbage line\n").is_err());
    }

    #[test]
    fn affinities() {
        let mut t = parse_proc_interrupts(SAMPLE).unwrap();
        fill_affinities(&mut t, |p| match p {
            "25/smp_affinity_list" => Some("0-1\n".into()),
            "25/effective_affinity_list" => Some("1\n".into()),
            _ => None,
        });
        assert_eq!(t.irqs[3].affinity.as_ref().unwrap().to_list_string(), "0-1");
        assert_eq!(
            t.irqs[3]
                .effective_affinity
                .as_ref()
                .unwrap()
                .to_list_string(),
            "1"
        );
        assert_eq!(t.irqs[0].affinity, None);
    }
}

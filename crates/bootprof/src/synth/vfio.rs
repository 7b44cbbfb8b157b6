//! A VFIO hot-plug the hypervisor refuses, in the wordings QEMU and Cloud Hypervisor use
//! across versions (QEMU's hw/vfio: `group N is not viable` with the `vfio BDF:` prefix of
//! QEMU ≥ 3 or the `vfio error: BDF:` one of 2.9–2.12, `group N used in multiple address
//! spaces`, `failed to setup container for group N: …`, `error getting device from group
//! N: …`, `VFIO_MAP_DMA failed: …` on QEMU's stderr as Kata ≥ 3.1 relays it; QMP's `Device
//! 'vfio-…' not found`; Cloud Hypervisor's `Failed to hotplug device … VfioMapRegion(…)`),
//! as the Kata shim reports them (kata-containers#4211, #10622, #10582, PR #3491).

use super::Rng;

/// What the shim logs of one refused device, and what a report must say of it.
pub(super) struct HotplugFailure {
    /// The shim's `error=` (QMP's or Cloud Hypervisor's text).
    pub(super) error: String,
    /// A line QEMU wrote on its stderr first (Kata ≥ 3.1 relays it at level=error).
    pub(super) qemu_stderr: Option<String>,
    /// The shim's `vfio-device-BDF=` (Kata drops domain 0 in some versions).
    pub(super) device_field: String,
    /// The shim's `vfio-device-ID=`.
    pub(super) id: String,
    /// The host device, with its domain.
    pub(super) device: String,
    /// The hypervisor's reason, as a report must quote it.
    pub(super) reason: String,
}

/// How many wordings `draw` picks from.
pub const WORDINGS: u64 = 8;

/// One refused hot-plug in wording `wording` (modulo [`WORDINGS`]), its device and group
/// drawn from `rng`.
pub(super) fn draw(rng: &mut Rng, wording: u64) -> HotplugFailure {
    let bus = 0x10 + rng.next() % 0xe0;
    let device = format!("0000:{bus:02x}:00.0");
    let group = 10 + rng.next() % 200;
    let id = format!("vfio-{}", rng.hex(17));
    let device_field = if rng.next().is_multiple_of(2) {
        device.clone()
    } else {
        format!("{bus:02x}:00.0")
    };
    let qmp = |s: &str| format!("QMP command failed: {s}");
    let (error, reason, qemu_stderr) = match wording % WORDINGS {
        0 => {
            let r = format!("group {group} is not viable");
            (qmp(&format!("vfio {device}: {r}")), r, None)
        }
        1 => {
            let r = format!("group {group} is not viable");
            (qmp(&format!("vfio error: {device}: {r}")), r, None)
        }
        2 => {
            let r = format!("group {group} used in multiple address spaces");
            (qmp(&format!("vfio {device}: {r}")), r, None)
        }
        3 => {
            let r = format!("failed to setup container for group {group}: memory listener initialization failed for container: Bad address");
            (qmp(&format!("vfio {device}: {r}")), r, None)
        }
        4 => {
            let r =
                format!("error getting device from group {group}: Inappropriate ioctl for device");
            (qmp(&format!("vfio {device}: {r}")), r, None)
        }
        5 => {
            let r = "Error from device manager: VfioMapRegion(DmaMap(IommuDmaMap(Error(17))))"
                .to_string();
            let e = format!("Failed to hotplug device &{{ID:{id} BDF:{device} SysfsDev:/sys/bus/pci/devices/{device} VendorID:0x10de DeviceID:0x2330 Class:0x030200 Bus:rp0 GuestPciPath: Type:1 IsPCIe:true APDevices:[] Port:root-port HostPath:/dev/vfio/{group}}} error: 500  reason: {r}");
            (e, r, None)
        }
        6 => {
            let r = format!("Device '{id}' not found");
            (qmp(&r), r, None)
        }
        _ => {
            let r = format!("failed to setup container for group {group}: memory listener initialization failed for container: No space left on device");
            (
                qmp(&format!("vfio {device}: {r}")),
                r,
                Some("VFIO_MAP_DMA failed: No space left on device".to_string()),
            )
        }
    };
    HotplugFailure {
        error,
        qemu_stderr,
        device_field,
        id,
        device,
        reason,
    }
}

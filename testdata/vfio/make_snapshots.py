#!/usr/bin/env python3
"""Write the VFIO sysfs snapshots in this folder as .tar.gz (run from anywhere; rewrites
them; the archives are byte-for-byte reproducible: sorted entries, fixed times and owners).

Hand-made, in the shapes a Linux kernel gives these files (see README.md for the sources):
only what vmtune reads is there, and the CPU part is trimmed.

  hgx-h100-vfio/   Linux 6.8, 2 sockets, HGX H100: 7 GPUs and 4 NVSwitches bound to vfio-pci,
                   each with its IOMMUFD cdev; one GPU still on nvidia; a ConnectX-7 pair in
                   one IOMMU group with only one port on vfio-pci (a group that is not viable).
  desktop-5.15-legacy/  Linux 5.15 (no VFIO cdevs): a GTX 1080 Ti on vfio-pci whose HDMI audio
                   function is still on snd_hda_intel, and an NVMe on vfio-pci in its own group.
  server-vmd/      Linux 6.8, 1 socket, Intel VMD: NVMe drives in PCI domain 10000 (five hex
                   digits) behind the VMD endpoint, without IOMMU groups; an L40S on vfio-pci.
  desktop-pcie-downgraded/, desktop-pcie-healthy/  Linux 6.8 Gen 4 desktop, two GPUs on
                   vfio-pci with every port's link: an RTX 5090 at 2.5 of 16 GT/s and an RTX
                   4090 at x4 of x16, or both at 16 GT/s x16.
"""

import gzip
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = Path(tempfile.mkdtemp(prefix="vfio-snapshots-"))


class Tree:
    def __init__(self, root: Path):
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        self.root = root

    def file(self, rel: str, text: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def link(self, rel: str, target_rel: str) -> None:
        """A relative symlink at `rel` pointing at `target_rel` (both from the root)."""
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        target = os.path.relpath(self.root / target_rel, p.parent)
        os.symlink(target, p)


def cpus(t: Tree, packages: int, cores: int, smt: int, hostname: str) -> list:
    """Linux numbering on Intel servers: first threads of every core of every package, then
    the second threads. Returns the PU lists per package."""
    n = packages * cores
    per_pkg = [[] for _ in range(packages)]
    for p in range(packages):
        for c in range(cores):
            first = p * cores + c
            sib = [first + k * n for k in range(smt)]
            per_pkg[p].extend(sib)
            for cpu in sib:
                d = f"sys/devices/system/cpu/cpu{cpu}/topology"
                t.file(f"{d}/core_cpus_list", ",".join(map(str, sib)) + "\n")
                t.file(f"{d}/core_id", f"{c}\n")
                t.file(f"{d}/physical_package_id", f"{p}\n")
    for p, lst in enumerate(per_pkg):
        s = ",".join(map(str, sorted(lst))) + "\n"
        for cpu in lst:
            t.file(f"sys/devices/system/cpu/cpu{cpu}/topology/package_cpus_list", s)
        t.file(f"sys/devices/system/node/node{p}/cpulist", s)
        t.file(
            f"sys/devices/system/node/node{p}/meminfo",
            f"Node {p} MemTotal:       1056323580 kB\nNode {p} MemFree:        1012345678 kB\n",
        )
    t.file("sys/devices/system/cpu/online", f"0-{n * smt - 1}\n")
    t.file("sys/devices/system/node/online", f"0-{packages - 1}\n")
    t.file("proc/sys/kernel/hostname", hostname + "\n")
    return per_pkg


class Pci:
    """One PCI function under `sys/devices/<path>`, with its bus, driver and group links."""

    def __init__(self, t: Tree, path: str, vendor: int, device: int, cls: int, numa: int,
                 local: str, driver, group, bars=(), speed=None, cap=None):
        self.t, self.path = t, path
        bdf = path.rsplit("/", 1)[1]
        self.bdf = bdf
        d = f"sys/devices/{path}"
        t.file(f"{d}/vendor", f"0x{vendor:04x}\n")
        t.file(f"{d}/device", f"0x{device:04x}\n")
        t.file(f"{d}/class", f"0x{cls:06x}\n")
        t.file(f"{d}/subsystem_vendor", f"0x{vendor:04x}\n")
        t.file(f"{d}/subsystem_device", "0x16c1\n" if vendor == 0x10DE else "0x0000\n")
        t.file(f"{d}/numa_node", f"{numa}\n")
        t.file(f"{d}/local_cpulist", local)
        lines = []
        for i in range(13):
            bar = dict(bars).get(i)
            if bar:
                start, size, flags = bar
                lines.append(f"0x{start:016x} 0x{start + size - 1:016x} 0x{flags:016x}")
            else:
                lines.append("0x0000000000000000 0x0000000000000000 0x0000000000000000")
        t.file(f"{d}/resource", "\n".join(lines) + "\n")
        if speed:
            t.file(f"{d}/current_link_speed", speed[0] + "\n")
            t.file(f"{d}/current_link_width", f"{speed[1]}\n")
        if cap:
            t.file(f"{d}/max_link_speed", cap[0] + "\n")
            t.file(f"{d}/max_link_width", f"{cap[1]}\n")
        t.link(f"sys/bus/pci/devices/{bdf}", d)
        if driver:
            t.link(f"{d}/driver", f"sys/bus/pci/drivers/{driver}")
            t.link(f"sys/bus/pci/drivers/{driver}/{bdf}", d)
        if group is not None:
            t.link(f"{d}/iommu_group", f"sys/kernel/iommu_groups/{group}")
            t.link(f"sys/kernel/iommu_groups/{group}/devices/{bdf}", d)
            t.file(f"sys/kernel/iommu_groups/{group}/type", "DMA-FQ\n")

    def cdev(self, n: int, major: int) -> None:
        """What vfio_device_add() makes with CONFIG_VFIO_DEVICE_CDEV: a `vfio-dev` class
        device below the function, its node /dev/vfio/devices/vfioN."""
        d = f"sys/devices/{self.path}/vfio-dev/vfio{n}"
        self.t.file(f"{d}/dev", f"{major}:{n}\n")
        self.t.file(f"{d}/uevent", f"MAJOR={major}\nMINOR={n}\nDEVNAME=vfio/devices/vfio{n}\n")
        self.t.link(f"{d}/device", f"sys/devices/{self.path}")
        self.t.link(f"{d}/subsystem", "sys/class/vfio-dev")
        self.t.link(f"sys/class/vfio-dev/vfio{n}", d)
        self.t.link(f"sys/dev/char/{major}:{n}", d)


def vfio_class(t: Tree, groups: list, group_major: int, iommufd_minor) -> None:
    """The misc `vfio` container (10:196), the misc `iommu` (iommufd) and one `vfio` class
    device per group that a VFIO driver holds, numbered in the order they were created."""
    for name, minor in [("vfio", 196)] + ([("iommu", iommufd_minor)] if iommufd_minor else []):
        d = f"sys/devices/virtual/misc/{name}"
        node = "vfio/vfio" if name == "vfio" else "iommu"
        t.file(f"{d}/dev", f"10:{minor}\n")
        t.file(f"{d}/uevent", f"MAJOR=10\nMINOR={minor}\nDEVNAME={node}\n")
        t.link(f"sys/class/misc/{name}", d)
        t.link(f"sys/dev/char/10:{minor}", d)
    for minor, g in enumerate(groups):
        d = f"sys/devices/virtual/vfio/{g}"
        t.file(f"{d}/dev", f"{group_major}:{minor}\n")
        t.file(f"{d}/uevent", f"MAJOR={group_major}\nMINOR={minor}\nDEVNAME=vfio/{g}\n")
        t.link(f"sys/class/vfio/{g}", d)
        t.link(f"sys/dev/char/{group_major}:{minor}", d)
    # misc devices a live host always has besides VFIO's
    d = "sys/devices/virtual/misc/cpu_dma_latency"
    t.file(f"{d}/dev", "10:62\n")
    t.link("sys/class/misc/cpu_dma_latency", d)


def hgx() -> None:
    t = Tree(WORK / "hgx-h100-vfio")
    pkgs = cpus(t, packages=2, cores=2, smt=2, hostname="hgx-h100-07")
    local = [",".join(map(str, sorted(p))) + "\n" for p in pkgs]
    bridge = 0x060400
    h100_bars = [
        (0, (0x0000_2000_0000_0000, 16 << 20, 0x0004_0200)),
        (1, (0x0000_2100_0000_0000, 128 << 30, 0x0014_220C)),
        (3, (0x0000_2200_0000_0000, 32 << 20, 0x0014_220C)),
    ]
    gen5 = ("32.0 GT/s PCIe", 16)
    # (root bus, GPU bus, socket, IOMMU group of the GPU, cdev minor, driver)
    # groups are the ones of the Kata GPU boot study's QEMU fd list (/dev/vfio/57, 46, 16,
    # 132, 112, 86, 66); cdev minors follow the order vfio-pci bound them, not the BDFs
    gpus = [
        (0x15, 0x18, 0, 16, 3, "vfio-pci"),
        (0x27, 0x2A, 0, 46, 0, "vfio-pci"),
        (0x37, 0x3A, 0, 57, 1, "vfio-pci"),
        (0x5A, 0x5D, 0, 66, 2, "vfio-pci"),
        (0x97, 0x9A, 1, 86, 4, "vfio-pci"),
        (0xA8, 0xAB, 1, 112, 6, "vfio-pci"),
        (0xB7, 0xBA, 1, 132, 5, "vfio-pci"),
        (0xD8, 0xDB, 1, 150, None, "nvidia"),
    ]
    vfio_groups = []
    next_group = 200
    for root, bus, sock, group, minor, driver in gpus:
        rp = f"pci0000:{root:02x}/0000:{root:02x}:01.0"
        up = f"{rp}/0000:{root + 1:02x}:00.0"
        down = f"{up}/0000:{root + 2:02x}:00.0"
        for path, dev in [(rp, 0x352A), (up, 0xC030), (down, 0xC030)]:
            vendor = 0x8086 if dev == 0x352A else 0x1000
            Pci(t, path, vendor, dev, bridge, sock, local[sock], "pcieport", next_group)
            next_group += 1
        gpu = Pci(t, f"{down}/0000:{bus:02x}:00.0", 0x10DE, 0x2330, 0x030200, sock,
                  local[sock], driver, group, h100_bars, gen5)
        if minor is not None:
            gpu.cdev(minor, 511)
            vfio_groups.append(group)
    # four NVSwitches (class 0x0680, "other bridge": a normal header, owned like any device)
    for i, bus in enumerate([0x05, 0x06, 0x07, 0x08]):
        sw = Pci(t, f"pci0000:00/0000:00:1b.{i}/0000:{bus:02x}:00.0", 0x10DE, 0x22A3, 0x068000,
                 0, local[0], "vfio-pci", 5 + i, [(0, (0xE000_0000 + i * 0x0200_0000, 32 << 20,
                                                       0x0004_0200))], ("16.0 GT/s PCIe", 2))
        sw.cdev(7 + i, 511)
        vfio_groups.append(5 + i)
    for i in range(4):
        Pci(t, f"pci0000:00/0000:00:1b.{i}", 0x8086, 0x1BBC + i, bridge, 0, local[0],
            "pcieport", 1 + i)
    # ConnectX-7 dual port: both functions in IOMMU group 40 (no ACS between functions);
    # port 1 was bound to vfio-pci, port 0 still runs mlx5_core: the group is not viable
    cx = "pci0000:4a/0000:4a:01.0"
    Pci(t, cx, 0x8086, 0x352A, bridge, 0, local[0], "pcieport", 39)
    Pci(t, f"{cx}/0000:4b:00.0", 0x15B3, 0x1021, 0x020700, 0, local[0], "mlx5_core", 40,
        [(0, (0x2300_0000_0000, 32 << 20, 0x0014_220C))], gen5)
    cx1 = Pci(t, f"{cx}/0000:4b:00.1", 0x15B3, 0x1021, 0x020700, 0, local[0], "vfio-pci", 40,
              [(0, (0x2300_0200_0000, 32 << 20, 0x0014_220C))], gen5)
    cx1.cdev(11, 511)
    vfio_groups.append(40)
    t.file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "N\n")
    vfio_class(t, sorted(set(vfio_groups)), group_major=243, iommufd_minor=124)


def desktop() -> None:
    t = Tree(WORK / "desktop-5.15-legacy")
    cpus(t, packages=1, cores=4, smt=2, hostname="gaming-desktop")
    local = "0-7\n"
    bridge = 0x060400
    # the CPU's x16 root port shares IOMMU group 1 with the GPU (no ACS on that port)
    Pci(t, "pci0000:00/0000:00:01.0", 0x8086, 0x1901, bridge, -1, local, "pcieport", 1)
    Pci(t, "pci0000:00/0000:00:01.0/0000:01:00.0", 0x10DE, 0x1B06, 0x030000, -1, local,
        "vfio-pci", 1, [(0, (0xDE00_0000, 16 << 20, 0x0004_0200)),
                        (1, (0xC000_0000, 256 << 20, 0x0014_220C))], ("8.0 GT/s PCIe", 16))
    Pci(t, "pci0000:00/0000:00:01.0/0000:01:00.1", 0x10DE, 0x10EF, 0x040300, -1, local,
        "snd_hda_intel", 1, [(0, (0xDF08_0000, 16 << 10, 0x0004_0200))], ("8.0 GT/s PCIe", 16))
    # an NVMe drive behind a chipset port, on vfio-pci in its own group
    Pci(t, "pci0000:00/0000:00:1d.0", 0x8086, 0xA330, bridge, -1, local, "pcieport", 12)
    Pci(t, "pci0000:00/0000:00:1d.0/0000:03:00.0", 0x144D, 0xA808, 0x010802, -1, local,
        "vfio-pci", 13, [(0, (0xDF00_0000, 16 << 10, 0x0014_0204))], ("8.0 GT/s PCIe", 4))
    Pci(t, "pci0000:00/0000:00:02.0", 0x8086, 0x3E98, 0x030000, -1, local, "i915", 0,
        [(0, (0xDD00_0000, 16 << 20, 0x0014_0204))])
    # Linux 5.15: vfio groups and the container, no cdevs, no iommufd
    vfio_class(t, [1, 13], group_major=242, iommufd_minor=None)


def vmd() -> None:
    """Intel Volume Management Device (drivers/pci/controller/vmd.c): the VMD endpoint owns
    a PCI domain numbered from 0x10000 (`vmd_find_free_domain`), so its devices are named
    `10000:BB:DD.F` (five hex digits: `%04x`) and sit below `pci10000:BB` under the
    endpoint. They have no `iommu_group` (the VT-d driver keeps VMD child devices from
    being remapping targets: they reach the IOMMU with the endpoint's requester ID), so
    VFIO cannot take them."""
    t = Tree(WORK / "server-vmd")
    cpus(t, packages=1, cores=4, smt=2, hostname="vmd-server")
    local = "0-7\n"
    bridge = 0x060400
    vmd_ep = "pci0000:64/0000:64:00.5"
    Pci(t, vmd_ep, 0x8086, 0x28C0, 0x010400, 0, local, "vmd", 30,
        [(0, (0x2_0000_0000, 32 << 20, 0x0014_220C)), (2, (0xC500_0000, 32 << 20, 0x0004_0200))])
    for port, bus, dev in [(0x02, 0xE1, 0xA80A), (0x03, 0xE2, 0xA80A)]:
        rp = f"{vmd_ep}/pci10000:e0/10000:e0:{port:02x}.0"
        Pci(t, rp, 0x8086, 0x347A, bridge, 0, local, "pcieport", None)
        Pci(t, f"{rp}/10000:{bus:02x}:00.0", 0x144D, dev, 0x010802, 0, local, "nvme", None,
            [(0, (0xC500_0000 + (bus - 0xE1) * 0x10_0000, 16 << 10, 0x0014_0204))],
            ("16.0 GT/s PCIe", 4))
    # a GPU outside the VMD domain, on vfio-pci
    Pci(t, "pci0000:17/0000:17:01.0", 0x8086, 0x352A, bridge, 0, local, "pcieport", 12)
    gpu = Pci(t, "pci0000:17/0000:17:01.0/0000:18:00.0", 0x10DE, 0x26B9, 0x030200, 0, local,
              "vfio-pci", 13, [(0, (0xD800_0000, 16 << 20, 0x0004_0200)),
                               (1, (0x3_0000_0000_00, 64 << 30, 0x0014_220C))],
              ("32.0 GT/s PCIe", 16))
    gpu.cdev(0, 511)
    t.file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "N\n")
    vfio_class(t, [13], group_major=243, iommufd_minor=124)


def desktop_pcie(name: str, healthy: bool) -> None:
    """A Linux 6.8 Ryzen desktop on a PCIe Gen 4 board with two GPUs on vfio-pci: an RTX 5090
    (Gen 5 x16 card) in the CPU's x16 slot and an RTX 4090 in the second x16 slot (CPU
    lanes); an NVMe drive behind the chipset (root port, chipset switch upstream and
    downstream port). Every port reports its link too, as the kernel shows it for both ends.
    Downgraded: the 5090 trained at 2.5 GT/s of the 16 GT/s its slot can do (the r/VFIO
    study's card that "looked like Gen 2"), the 4090 at x4 of x16. Healthy: both at 16 GT/s
    x16 (the 5090's 32 GT/s is more than the board's port can do: not a downgrade)."""
    t = Tree(WORK / name)
    cpus(t, packages=1, cores=8, smt=2, hostname="vfio-desktop")
    local = "0-15\n"
    bridge = 0x060400
    gen4, gen5 = "16.0 GT/s PCIe", "32.0 GT/s PCIe"
    idle = ("2.5 GT/s PCIe", 16) if not healthy else (gen4, 16)
    narrow = (gen4, 4) if not healthy else (gen4, 16)
    # the CPU's GPP bridges (AMD 1022:14db), one IOMMU group each with what is below
    rp1 = "pci0000:00/0000:00:01.1"
    Pci(t, rp1, 0x1022, 0x14DB, bridge, -1, local, "pcieport", 10, (), idle, (gen4, 16))
    Pci(t, f"{rp1}/0000:01:00.0", 0x10DE, 0x2B85, 0x030000, -1, local, "vfio-pci", 10,
        [(0, (0xF000_0000, 64 << 20, 0x0004_0200)),
         (1, (0x78_0000_0000, 32 << 30, 0x0014_220C))], idle, (gen5, 16))
    Pci(t, f"{rp1}/0000:01:00.1", 0x10DE, 0x22E8, 0x040300, -1, local, "vfio-pci", 10,
        [(0, (0xF408_0000, 16 << 10, 0x0004_0200))], idle, (gen5, 16))
    rp2 = "pci0000:00/0000:00:01.2"
    Pci(t, rp2, 0x1022, 0x14DB, bridge, -1, local, "pcieport", 11, (), narrow, (gen4, 16))
    Pci(t, f"{rp2}/0000:02:00.0", 0x10DE, 0x2684, 0x030000, -1, local, "vfio-pci", 11,
        [(0, (0xF200_0000, 16 << 20, 0x0004_0200)),
         (1, (0x70_0000_0000, 32 << 30, 0x0014_220C))], narrow, (gen4, 16))
    Pci(t, f"{rp2}/0000:02:00.1", 0x10DE, 0x22BA, 0x040300, -1, local, "vfio-pci", 11,
        [(0, (0xF308_0000, 16 << 10, 0x0004_0200))], narrow, (gen4, 16))
    # chipset: root port -> upstream port -> downstream port -> NVMe, all healthy
    rp3 = "pci0000:00/0000:00:02.1"
    up = f"{rp3}/0000:03:00.0"
    down = f"{up}/0000:04:08.0"
    Pci(t, rp3, 0x1022, 0x14DD, bridge, -1, local, "pcieport", 12, (), (gen4, 4), (gen4, 4))
    Pci(t, up, 0x1022, 0x43F4, bridge, -1, local, "pcieport", 12, (), (gen4, 4), (gen4, 4))
    Pci(t, down, 0x1022, 0x43F5, bridge, -1, local, "pcieport", 12, (), (gen4, 4), (gen4, 4))
    Pci(t, f"{down}/0000:05:00.0", 0x144D, 0xA80C, 0x010802, -1, local, "nvme", 12,
        [(0, (0xF500_0000, 16 << 10, 0x0014_0204))], (gen4, 4), (gen4, 4))
    t.file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "N\n")
    vfio_class(t, [10, 11], group_major=243, iommufd_minor=124)


def pack(name: str) -> None:
    """`name/` from the work dir as HERE/name.tar.gz, deterministically."""
    root = WORK / name
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        paths = [root] + sorted(root.rglob("*"), key=lambda p: str(p.relative_to(root)))
        for p in paths:
            rel = name if p == root else f"{name}/{p.relative_to(root)}"
            info = tar.gettarinfo(str(p), arcname=rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o777 if info.issym() else (0o755 if info.isdir() else 0o444)
            if info.isfile():
                with open(p, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    data = gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)
    (HERE / f"{name}.tar.gz").write_bytes(data)


if __name__ == "__main__":
    hgx()
    desktop()
    vmd()
    desktop_pcie("desktop-pcie-downgraded", healthy=False)
    desktop_pcie("desktop-pcie-healthy", healthy=True)
    names = ["hgx-h100-vfio", "desktop-5.15-legacy", "server-vmd", "desktop-pcie-downgraded",
             "desktop-pcie-healthy"]
    for n in names:
        pack(n)
    shutil.rmtree(WORK)

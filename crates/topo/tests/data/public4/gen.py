#!/usr/bin/env python3
"""Writes the fourth collection of public host topologies (see README.md) as hwloc XML.

Each fixture follows the shape of a public lstopo/hwloc export — the same tree of packages,
groups, dies, NUMA nodes, caches, cores and PUs, the same PU numbering, the same PCI devices
under the same objects, the same distance and cpukind elements, in the format (v1, v2, v3) the
README names — written here from a short description, with values of our own where they do not
matter (bridge ids, link speeds, info strings). The expected model of each file is in README.md
and in tests/public_topologies_r4.rs; nothing here is read by the tests.

    python3 gen.py            # rewrites every r4-*.xml beside this script
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


# --- objects -----------------------------------------------------------------------------
class O:
    def __init__(self, type, kids=(), mem=(), os=None, attrs=None, infos=()):
        self.type, self.kids, self.mem, self.os = type, list(kids), list(mem), os
        self.attrs = dict(attrs or {})
        self.infos = list(infos)


def pu(i):
    return O("PU", os=i)


def core(os, pus, caches=()):
    """A core with its PUs, wrapped (innermost first) in private caches [(type, size, ...)]."""
    c = O("Core", [pu(p) for p in pus], os=os)
    for cache in caches:
        c = cache_obj(cache, [c])
    return c


def cache_obj(spec, kids):
    t, size = spec[0], spec[1]
    depth = {"L1Cache": 1, "L1iCache": 1, "L2Cache": 2, "L3Cache": 3}[t]
    ctype = {"L1Cache": 1, "L1iCache": 2}.get(t, 0)
    a = {"cache_size": size, "depth": depth, "cache_linesize": 64,
         "cache_associativity": spec[2] if len(spec) > 2 else 8, "cache_type": ctype}
    if len(spec) > 3:
        a["subtype"] = spec[3]
    return O(t, kids, attrs=a)


def cache(t, size, kids, mem=(), subtype=None):
    o = cache_obj((t, size, 16) + ((subtype,) if subtype else ()), kids)
    o.mem = list(mem)
    return o


def numa(os, memory=None, subtype=None, pages=True):
    a = {}
    if subtype:
        a["subtype"] = subtype
    if memory:
        a["local_memory"] = memory
    n = O("NUMANode", os=os, attrs=a)
    n.pages = pages and memory
    return n


def hostbridge(dom, lo, hi, kids):
    return O("Bridge", kids, attrs={"bridge_type": "0-1", "depth": 0,
                                    "bridge_pci": f"{dom:04x}:[{lo:02x}-{hi:02x}]"})


def pcibridge(busid, lo, hi, kids, ids="8086:3c04"):
    dom = busid.split(":")[0]
    return O("Bridge", kids, attrs={"bridge_type": "1-1", "depth": 1,
                                    "bridge_pci": f"{dom}:[{lo:02x}-{hi:02x}]",
                                    "pci_busid": busid,
                                    "pci_type": f"0604 [{ids}] [{ids}] 07",
                                    "pci_link_speed": "8.000000"})


def pcidev(busid, cls, ids, sub="0000:0000", rev="a1", osdevs=()):
    kids = [O("OSDev", attrs={"name": n, "osdev_type": t}) for n, t in osdevs]
    return O("PCIDev", kids, attrs={"pci_busid": busid,
                                    "pci_type": f"{cls} [{ids}] [{sub}] {rev}",
                                    "pci_link_speed": "15.753846"})


# --- bitmaps as hwloc prints them ---------------------------------------------------------
def bitmap(bits):
    """hwloc_bitmap_snprintf: 32-bit words, most significant first; zero words after the first
    are left empty, but the last word is always written ("0xffffff00,,0x0")."""
    bits = set(bits)
    if not bits:
        return "0x0"
    words = max(bits) // 32 + 1
    out = []
    for w in range(words - 1, -1, -1):
        v = sum(1 << (b - 32 * w) for b in bits if 32 * w <= b < 32 * w + 32)
        if w == words - 1:
            out.append(f"0x{v:08x}")
        elif v == 0 and w != 0:
            out.append("")
        else:
            out.append(f"0x{v:08x}" if v else "0x0")
    return ",".join(out)


def pus_of(o):
    if o.type == "PU":
        return {o.os}
    s = set()
    for k in o.kids:
        s |= pus_of(k)
    return s


def nodes_of(o, v1):
    s = set()
    if o.type == "NUMANode":
        s.add(o.os)
    for k in o.kids + o.mem:
        s |= nodes_of(k, v1)
    return s


IO = {"Bridge", "PCIDev", "OSDev"}


class Writer:
    def __init__(self, version):
        self.version = version  # "1", "2.0" or "3.0"
        self.lines = []
        self.gp = 0

    def obj(self, o, ind, parent_cpus, parent_nodes):
        v1 = self.version == "1"
        a = {"type": o.type}
        if o.os is not None:
            a["os_index"] = o.os
        if o.type not in IO:
            cpus = pus_of(o) if (o.type != "NUMANode" or v1) else parent_cpus
            nodes = nodes_of(o, v1) or parent_nodes
            if o.type == "NUMANode":
                nodes = {o.os}
            bm, nm = bitmap(cpus), bitmap(nodes)
            a.update({"cpuset": bm, "complete_cpuset": bm})
            if v1:
                a.update({"online_cpuset": bm, "allowed_cpuset": bm})
            a.update({"nodeset": nm, "complete_nodeset": nm})
            if v1:
                a["allowed_nodeset"] = nm
        else:
            cpus, nodes = parent_cpus, parent_nodes
        if self.version != "1" and "gp_index" not in o.attrs:
            self.gp += 1
            a["gp_index"] = self.gp
            if self.version == "3.0":
                a["id"] = f"obj{self.gp}"

        a.update(o.attrs)
        if o.type == "OSDev" and self.version == "3.0":
            # v3: osdev_type is a bitmask (storage 1, GPU 2?, network 16, coproc 4/8 ...)
            a["osdev_type"] = {"0": 1, "1": 2, "2": 16, "3": 32, "5": 12}.get(str(a["osdev_type"]), 0)
        attrs = " ".join(f'{k}="{v}"' for k, v in a.items())
        body = [("info", i) for i in o.infos]
        if getattr(o, "pages", None) and self.version != "3.0":
            body.append(("page", None))
        kids = (o.mem + o.kids) if not v1 else o.kids
        if not body and not kids and not getattr(o, "v1_extra", None):
            self.lines.append(f"{ind}<object {attrs}/>")
            return
        self.lines.append(f"{ind}<object {attrs}>")
        for what, i in body:
            if what == "info":
                self.lines.append(f'{ind}  <info name="{i[0]}" value="{i[1]}"/>')
            else:
                self.lines.append(f'{ind}  <page_type size="4096" count="0"/>')
                self.lines.append(f'{ind}  <page_type size="2097152" count="0"/>')
                self.lines.append(f'{ind}  <page_type size="1073741824" count="0"/>')
        # v1: the Machine's <distances> come after its infos, before its children
        for extra in getattr(o, "v1_extra", []):
            self.lines.append(ind + "  " + extra)
        for k in kids:
            self.obj(k, ind + "  ", cpus, nodes)
        self.lines.append(f"{ind}</object>")


def v1_numa(os, memory, kids):
    n = numa(os, memory)
    n.kids = kids
    return n


def write(name, version, root, after=(), v1_distances=None):
    w = Writer(version)
    dtd = "hwloc.dtd" if version == "1" else "hwloc2.dtd"
    w.lines.append('<?xml version="1.0" encoding="UTF-8"?>')
    w.lines.append(f'<!DOCTYPE topology SYSTEM "{dtd}">')
    w.lines.append("<topology>" if version == "1" else f'<topology version="{version}">')
    if v1_distances:
        root.v1_extra = v1_distances
    w.obj(root, "  ", set(), set())
    for line in after:
        w.lines.append("  " + line)
    w.lines.append("</topology>")
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(w.lines) + "\n")


def distances2(type_, indexes, matrix, name="NUMALatency", indexing="os"):
    idx = " ".join(str(i) for i in indexes) + " "
    vals = [str(v) for row in matrix for v in row]
    out = [f'<distances2 type="{type_}" nbobjs="{len(indexes)}" kind="5"'
           + (f' name="{name}"' if name else "") + f' indexing="{indexing}">',
           f'  <indexes length="{len(idx)}">{idx}</indexes>']
    for i in range(0, len(vals), 10):  # hwloc writes ten values a line
        chunk = " ".join(vals[i:i + 10]) + " "
        out.append(f'  <u64values length="{len(chunk)}">{chunk}</u64values>')
    out.append("</distances2>")
    return out


def v1_distances(matrix, base=10):
    out = [f'<distances nbobjs="{len(matrix)}" relative_depth="1" latency_base="{base:.6f}">']
    out += [f'  <latency value="{v / base:.6f}"/>' for row in matrix for v in row]
    out.append("</distances>")
    return out


def cpukind(bits, infos, eff=None):
    a = f' forced_efficiency="{eff}"' if eff is not None else ""
    out = [f'<cpukind cpuset="{bitmap(bits)}"{a}>']
    out += [f'  <info name="{k}" value="{v}"/>' for k, v in infos]
    out.append("</cpukind>")
    return out


def machine(kids, infos=(), mem=()):
    return O("Machine", kids, mem=mem, os=0, infos=list(infos))


X86 = [("Backend", "Linux"), ("OSName", "Linux"), ("Architecture", "x86_64")]
L1 = [("L1iCache", 32768), ("L1Cache", 32768)]


def l2l1(l2, l1=32768):
    return [("L1iCache", 32768), ("L1Cache", l1), ("L2Cache", l2)]


# --- the fixtures --------------------------------------------------------------------------
def dgx_spark_gb10():
    """hwloc tests/hwloc/linux/nvidia-dgx-gb10.xml (v3): one package (P#36), one NUMA node,
    two L3 of 10 cores (8 MiB, 16 MiB), five Cortex-A725 (512 KiB L2) then five Cortex-X925
    (2 MiB L2) in each, no SMT; two cpukinds by LinuxCapacity."""
    def l3(size, first):
        cores = [core(i, [i], [("L1iCache", 65536), ("L1Cache", 65536),
                               ("L2Cache", 524288 if i - first < 5 else 2097152)])
                 for i in range(first, first + 10)]
        return cache("L3Cache", size, cores)
    pkg = O("Package", [l3(8 << 20, 0), l3(16 << 20, 10)], mem=[numa(0, 128520671232)], os=36,
            infos=[("CPUImplementer", "0x41"), ("CPUArchitecture", "8")])
    little = [*range(0, 5), *range(10, 15)]
    big = [*range(5, 10), *range(15, 20)]
    after = (cpukind(little, [("LinuxCapacity", "718"), ("CPUPart", "0xd87")], 718)
             + cpukind(big, [("LinuxCapacity", "997"), ("CPUPart", "0xd85")], 997)
             + ['<info name="Backend" value="Linux"/>', '<info name="OSName" value="Linux"/>',
                '<info name="HostName" value="spark-r4"/>',
                '<info name="Architecture" value="aarch64"/>'])
    write("r4-dgx-spark-gb10.v3.xml", "3.0",
          machine([pkg], [("DMIProductName", "NVIDIA_DGX_Spark")]), after)


def power8_nvlink():
    """hwloc tests/hwloc/xml/power8gpudistances.xml: 2 POWER8NVL packages, one NUMA node each,
    4 cores each with 2 of 8 threads online (PUs 0-1, 8-9, ...; 80-81, ...), an L3 per core,
    2 P100-SXM2 (10de:15f9) per package on their own PCI domains, NUMALatency 10/40 and an
    NVLinkBandwidth distances2hetero between the GPUs and the packages."""
    def package(os, first, node, mem, gpus):
        cores = []
        for k in range(4):
            p0 = first + 8 * k
            c = core(p0, [p0, p0 + 1], [("L1iCache", 32768), ("L1Cache", 65536),
                                         ("L2Cache", 524288)])
            cores.append(cache("L3Cache", 8 << 20, [c]))
        io = [hostbridge(d, 1, 1, [pcidev(f"{d:04x}:01:00.0", "0302", "10de:15f9",
                                          "10de:116b", osdevs=[(f"cuda{g}", 5),
                                                               (f"nvml{g}", 1)])])
              for g, d in gpus]
        return O("Package", cores + io, mem=[numa(node, mem)], os=os,
                 attrs={"gp_index": 1000 + os},
                 infos=[("CPUModel", "POWER8NVL, altivec supported")])
    m = machine([package(0, 0, 0, 68556816384, [(0, 2), (1, 3)]),
                 package(1, 80, 1, 68450713600, [(2, 10), (3, 11)])],
                [("PlatformName", "PowerNV"), ("Backend", "Linux"), ("OSName", "Linux"),
                 ("HostName", "p8-r4"), ("Architecture", "ppc64le")])
    after = distances2("NUMANode", [0, 1], [[10, 40], [40, 10]])
    # between the two packages' gp indexes (the real one also lists the GPUs' OSDevs)
    idx, vals = "Package:1000 Package:1001 ", "1000000 40000 40000 1000000 "
    after += ['<distances2hetero nbobjs="2" kind="25" name="NVLinkBandwidth">',
              f'  <indexes length="{len(idx)}">{idx}</indexes>',
              f'  <u64values length="{len(vals)}">{vals}</u64values>',
              '</distances2hetero>']
    write("r4-power8-nvlink.xml", "2.0", m, after)


OPTERON_NODES = [1, 0, 2, 5, 4, 3, 6, 7]  # NUMA os_index of packages 0..7


def opteron_8n_4distances():
    """hwloc tests/hwloc/xml/16amd64-4distances.xml: 8 dual-core Opteron 865 packages in two
    Groups of four, one NUMA node per package whose os_index is not the package's (1,0,2,5 |
    4,3,6,7), no L3, four distance matrices (NUMANode by os index in that order, Package and
    Core by gp index, PU by os index). Latencies are ours: 10 local, 16 within a group, 22."""
    groups = []
    for g in range(2):
        pkgs = []
        for p in range(4 * g, 4 * g + 4):
            cores = [core(2 * p + k, [2 * p + k], [("L1Cache", 65536), ("L2Cache", 1 << 20)])
                     for k in range(2)]
            pkgs.append(O("Package", cores, mem=[numa(OPTERON_NODES[p], 8 << 30)], os=p,
                          infos=[("CPUModel", "Dual Core AMD Opteron(tm) Processor 865")]))
        groups.append(O("Group", pkgs, attrs={"kind": 1, "subkind": 0}))
    def lat(a, b):
        pa, pb = OPTERON_NODES.index(a), OPTERON_NODES.index(b)
        return 10 if a == b else (16 if pa // 4 == pb // 4 else 22)
    after = distances2("NUMANode", OPTERON_NODES,
                       [[lat(a, b) for b in OPTERON_NODES] for a in OPTERON_NODES])
    after += distances2("PU", [0, 1, 2, 3], [[10, 20, 40, 80]] * 4, name=None)
    write("r4-opteron-8n-4distances.xml", "2.0", machine(groups, X86), after)


def westmere_sl390s():
    """hwloc tests/hwloc/xml/24em64t-2n6c2t-pci.xml: HP ProLiant SL390s G7, 2x Xeon (Westmere,
    6 cores, SMT2), PUs interleaved between the packages (package 0 the even ones, siblings
    P#n and P#n+12), one NUMA node and one 12 MiB L3 per package; Tesla M2070-class GPUs
    (10de:06d2) one on node 0 and two on node 1, the onboard ATI ES1000 VGA, 82576 NICs and a
    ConnectX on node 0."""
    def package(os, node, mem, io):
        firsts = [os + 2 * k for k in range(6)]
        cores = [core(k, [f, f + 12], [("L1Cache", 32768), ("L2Cache", 262144)])
                 for k, f in zip([0, 1, 2, 8, 9, 10], firsts)]
        return O("Package", [cache("L3Cache", 12 << 20, cores)] + io,
                 mem=[numa(node, mem)], os=os,
                 infos=[("CPUModel", "Intel(R) Xeon(R) CPU X5650 @ 2.67GHz")])
    io0 = [hostbridge(0, 0, 6, [
        pcidev("0000:00:1f.2", "0101", "8086:3a20", rev="00", osdevs=[("sda", 0)]),
        pcibridge("0000:00:1e.0", 1, 1, [pcidev("0000:01:03.0", "0300", "1002:515e",
                                                "103c:31fb", rev="02")]),
        pcibridge("0000:00:01.0", 4, 4, [
            pcidev("0000:04:00.0", "0200", "8086:10c9", rev="01", osdevs=[("eth0", 2)]),
            pcidev("0000:04:00.1", "0200", "8086:10c9", rev="01", osdevs=[("eth1", 2)])]),
        pcibridge("0000:00:03.0", 5, 5, [pcidev("0000:05:00.0", "0c06", "15b3:6746",
                                                rev="a0", osdevs=[("ib0", 2),
                                                                  ("mlx4_0", 3)])]),
        pcibridge("0000:00:07.0", 6, 6, [pcidev("0000:06:00.0", "0302", "10de:06d2")])])]
    io1 = [hostbridge(0, 0x10, 0x14, [
        pcibridge("0000:10:03.0", 0x11, 0x11, [pcidev("0000:11:00.0", "0302", "10de:06d2")]),
        pcibridge("0000:10:07.0", 0x14, 0x14, [pcidev("0000:14:00.0", "0302", "10de:06d2")])])]
    m = machine([package(0, 0, 0x47f5e1000, io0), package(1, 1, 0x4800b5000, io1)],
                [("DMIProductName", "ProLiant SL390s G7"), ("HostName", "sl390-r4")] + X86)
    write("r4-westmere-sl390s.xml", "2.0", m, distances2("NUMANode", [0, 1], [[10, 20], [20, 10]]))


def dunnington_16p_4n():
    """hwloc tests/hwloc/xml/96em64t-4n4d3ca2co-pci.xml: 16 six-core Xeon (Dunnington)
    packages, four per NUMA node, each node a Group with its node attached; in each package
    one 16 MiB L3, three 3 MiB L2 of two cores each; PUs strided across the packages of a node
    (package P#1 holds 0,4,8,...); the onboard ES1000, BCM5709 NICs and a SAS HBA on node 0."""
    groups = []
    order = [[1, 0, 2, 3]] + [[4 * g + k for k in range(4)] for g in range(1, 4)]
    cid = 0
    for g in range(4):
        pkgs = []
        for slot, p in enumerate(order[g]):
            pus = [24 * g + slot + 4 * k for k in range(6)]
            l2s = []
            for j in range(3):
                cores = []
                for k in range(2):
                    cores.append(core(cid % 6, [pus[2 * j + k]], [("L1Cache", 32768)]))
                    cid += 1
                l2s.append(cache("L2Cache", 3 << 20, cores))
            pkgs.append(O("Package", [cache("L3Cache", 16 << 20, l2s)], os=p,
                          infos=[("CPUModel", "Intel(R) Xeon(R) CPU E7450 @ 2.40GHz")]))
        io = []
        if g == 0:
            io = [hostbridge(0, 0, 4, [
                pcidev("0000:00:1f.2", "0101", "8086:27c0", rev="01", osdevs=[("sr0", 0)]),
                pcibridge("0000:00:1e.0", 1, 1, [pcidev("0000:01:00.0", "0300", "1002:515e",
                                                        rev="02", osdevs=[("card0", 1)])]),
                pcibridge("0000:00:02.0", 2, 2, [
                    pcidev("0000:02:00.0", "0200", "14e4:1639", rev="20", osdevs=[("eth0", 2)]),
                    pcidev("0000:02:00.1", "0200", "14e4:1639", rev="20", osdevs=[("eth1", 2)])]),
                pcibridge("0000:00:04.0", 4, 4, [pcidev("0000:04:00.0", "0104", "1000:0062",
                                                        rev="04", osdevs=[("sda", 0)])])])]
        groups.append(O("Group", pkgs + io, mem=[numa(g, 51271172096 - (g == 0) * 1240064)],
                        attrs={"kind": 1001, "subkind": 0}))
    m = machine(groups, [("HostName", "dunnington-r4")] + X86)
    write("r4-dunnington-16p-4n.xml", "2.0", m)


def knl_heteromem():
    """hwloc tests/hwloc/xml/64intel64-heteromem.xml: one Xeon Phi-like package in SNC4
    hybrid mode, trimmed to 16 cores of 4 threads (siblings P#n, n+16, n+32, n+48); each
    quadrant is an L3Cache of subtype MemorySideCache (the MCDRAM cache, 2 GiB) holding a
    1 GiB DRAM node (P#0-3) and a 2 GiB HBM node (P#7,4,5,6) and two 4 MiB L2 of two cores."""
    quads = []
    hbm = [7, 4, 5, 6]
    for q in range(4):
        l2s = []
        for j in range(2):
            cores = [core(c, [c, c + 16, c + 32, c + 48], [("L1Cache", 32768)])
                     for c in (4 * q + 2 * j, 4 * q + 2 * j + 1)]
            l2s.append(cache("L2Cache", 4 << 20, cores))
        quads.append(cache("L3Cache", 2 << 30, l2s,
                           mem=[numa(q, 1 << 30, "DRAM"), numa(hbm[q], 2 << 30, "HBM")],
                           subtype="MemorySideCache"))
    pkg = O("Package", quads, os=0, infos=[("CPUModel", "Intel(R) Xeon Phi(TM) CPU 7230")])
    dram, hbmn = list(range(4)), hbm
    idx = dram + hbmn
    def lat(a, b):
        if a == b:
            return 10
        qa = a if a < 4 else hbm.index(a)
        qb = b if b < 4 else hbm.index(b)
        return 31 if qa == qb else 41
    write("r4-knl-heteromem.xml", "2.0", machine([pkg], [("HostName", "knl-r4")] + X86),
          distances2("NUMANode", idx, [[lat(a, b) for b in idx] for a in idx]))


def arrowlake_225u():
    """hwloc tests/hwloc/x86/Intel-ArrowLake-CoreUltra5-225U.xml (CPUID dump, v3): 2 P-cores
    with SMT2 (PUs 0-3), two clusters of 4 E-cores sharing an L2 (PUs 4-11), all under one
    12 MiB L3; 2 low-power E-cores (PUs 12-13) with their own L2 and no L3; three cpukinds
    (IntelLowPower, IntelAtom, IntelCore); one NUMA node without memory size."""
    p = [core(k, [2 * k, 2 * k + 1], [("L1iCache", 65536), ("L1Cache", 49152),
                                      ("L2Cache", 2 << 20)]) for k in range(2)]
    def ecluster(first, cid):
        return cache("L2Cache", 2 << 20, [core(cid + i, [first + i], [("L1iCache", 65536),
                                                                      ("L1Cache", 32768)])
                                          for i in range(4)])
    e = [ecluster(4, 8), ecluster(8, 16)]
    lp = cache("L2Cache", 2 << 20, [core(32 + i, [12 + i], L1) for i in range(2)])
    pkg = O("Package", [cache("L3Cache", 12 << 20, p + e), lp], mem=[numa(0)], os=0,
            infos=[("CPUModel", "Intel(R) Core(TM) Ultra 5 225U")])
    after = (cpukind([12, 13], [("CoreType", "IntelLowPower")], 0)
             + cpukind(range(4, 12), [("CoreType", "IntelAtom")], 1)
             + cpukind(range(0, 4), [("CoreType", "IntelCore")], 2))
    write("r4-arrowlake-225u.xml", "2.0", machine([pkg], [("Backend", "x86")]), after)


def zhaoxin_kh40000():
    """hwloc tests/hwloc/x86/Zhaoxin-2xCentaurHauls-KaiSheng-KH-40000.xml (CPUID dump): 2
    packages of 2 Dies of 4 L3 groups (8 MiB) of 4 cores, no SMT, 64 cores; the one NUMA node
    is attached to the Machine (CPUID knows no memory)."""
    pkgs = []
    for p in range(2):
        dies = []
        for d in range(2):
            l3s = []
            for g in range(4):
                first = 32 * p + 16 * d + 4 * g
                l3s.append(cache("L3Cache", 8 << 20, [
                    core(first + i - 32 * p, [first + i], l2l1(262144)) for i in range(4)]))
            dies.append(O("Die", l3s, os=d))
        pkgs.append(O("Package", dies, os=p,
                      infos=[("CPUModel", "ZHAOXIN KaiSheng KH-40000/32@2GHz")]))
    write("r4-zhaoxin-kh40000.xml", "2.0",
          machine(pkgs, [("Backend", "x86")], mem=[numa(0)]))


def knc_se10p():
    """hwloc tests/hwloc/x86/Intel-KnightsCorner-XeonPhi-SE10P.xml (CPUID dump): 61 cores of 4
    threads with a 512 KiB L2 each, no L3; core P#60 holds PU 0 and PUs 241-243, core P#k
    (k < 60) PUs 4k+1..4k+4."""
    cores = [core(60, [0, 241, 242, 243], l2l1(524288))]
    cores += [core(k, [4 * k + 1 + t for t in range(4)], l2l1(524288)) for k in range(60)]
    pkg = O("Package", cores, mem=[numa(0)], os=0)
    write("r4-knc-se10p.xml", "2.0", machine([pkg], [("Backend", "x86")]))


def lassen_ac922():
    """LLNL/mpibind topo-xml/coral-lassen.xml: IBM AC922 (Lassen), 2 POWER9 packages P#0 and
    P#8 with NUMA nodes P#0 and P#8, 20 cores of 4 threads each online (PUs 8-87, 96-175:
    the first two cores of each chip are kept back), a 10 MiB L3 per pair of cores, 2 V100-SXM2
    (10de:1db1) and a ConnectX-5 (0207) per node, NVMe, ASPEED VGA and BCM5719 on node 0."""
    def package(os, first, node, mem, io):
        l3s = []
        for pair in range(10):
            cores = []
            for k in range(2):
                p0 = first + 8 * pair + 4 * k
                cores.append(core(p0, range(p0, p0 + 4), [("L1iCache", 32768),
                                                          ("L1Cache", 32768)]))
            l3s.append(cache("L3Cache", 10 << 20, [cache("L2Cache", 512 << 10, cores)]))
        return O("Package", l3s + io, mem=[numa(node, mem)], os=os,
                 infos=[("CPUModel", "POWER9, altivec supported")])
    cx5 = lambda dom, n: hostbridge(dom, 1, 1, [  # noqa: E731
        pcidev(f"{dom:04x}:01:00.0", "0207", "15b3:1019", "1014:0617", "00",
               [(f"hsi{n}", 2), (f"mlx5_{n}", 3)]),
        pcidev(f"{dom:04x}:01:00.1", "0207", "15b3:1019", "1014:0617", "00",
               [(f"hsi{n + 1}", 2), (f"mlx5_{n + 1}", 3)])])
    v100 = lambda dom, bus, g: pcidev(f"{dom:04x}:{bus:02x}:00.0", "0302", "10de:1db1",  # noqa
                                      "10de:1212", osdevs=[(f"cuda{g}", 5), (f"nvml{g}", 1)])
    io0 = [hostbridge(0, 1, 1, [pcidev("0000:01:00.0", "0108", "144d:a822", "1014:0621", "01",
                                       [("nvme0n1", 0)])]),
           hostbridge(2, 1, 2, [pcibridge("0002:01:00.0", 2, 2,
                                          [pcidev("0002:02:00.0", "0300", "1a03:2000",
                                                  "1a03:2000", "41")], "1a03:1150")]),
           cx5(3, 0),
           hostbridge(4, 1, 5, [pcibridge("0004:01:00.0", 2, 5, [
               pcibridge("0004:02:04.0", 4, 4, [v100(4, 4, 0)], "10b5:8725"),
               pcibridge("0004:02:05.0", 5, 5, [v100(4, 5, 1)], "10b5:8725")], "10b5:8725")]),
           hostbridge(5, 1, 1, [pcidev("0005:01:00.0", "0200", "14e4:1657", "14e4:1981", "01",
                                       [("enP5p1s0f0", 2)])])]
    io1 = [cx5(0x33, 2),
           hostbridge(0x35, 1, 4, [pcibridge("0035:01:00.0", 2, 4, [
               pcibridge("0035:02:04.0", 3, 3, [v100(0x35, 3, 2)], "10b5:8725"),
               pcibridge("0035:02:05.0", 4, 4, [v100(0x35, 4, 3)], "10b5:8725")],
               "10b5:8725")])]
    m = machine([package(0, 8, 0, 137100066816, io0), package(8, 96, 8, 137166913536, io1)],
                [("PlatformName", "PowerNV"), ("Backend", "Linux"), ("OSName", "Linux"),
                 ("HostName", "lassen-r4"), ("Architecture", "ppc64le")])
    write("r4-lassen-ac922.xml", "2.0", m, distances2("NUMANode", [0, 8], [[10, 40], [40, 10]]))


def thunderx2_apollo70():
    """LLNL/mpibind topo-xml/arm64-ulna-hwloc1.xml (hwloc 1.11, v1): HPE Apollo 70, 2 Cavium
    ThunderX2 packages (P#36, P#3612) of 32 cores with 4 threads (siblings P#n, n+32, n+64,
    n+96 within each package's 128), each package inside its NUMA node with one 32 MiB L3;
    a Radeon (1002:67a0, class 0380) and a ConnectX-5 (0207) per node, ASPEED on node 0;
    v1 distances 1.0/2.0 x 10."""
    def node(os, pkg_os, first, mem, io):
        cores = [core(k, [first + k + 32 * t for t in range(4)],
                      [("L1iCache", 32768), ("L1Cache", 32768), ("L2Cache", 262144)])
                 for k in range(32)]
        l3 = cache_obj(("L3Cache", 32 << 20, 16), cores)
        pkg = O("Package", [l3], os=pkg_os, infos=[("CPUModel", "Cavium ThunderX2(R) CPU CN9980 v2.1 @ 2.20GHz")])
        return v1_numa(os, mem, [pkg] + io)
    radeon = lambda bdf, n: pcidev(bdf, "0380", "1002:67a0", "1002:0735", "00",  # noqa: E731
                                   [(f"card{n}", 1), (f"renderD{127 + n}", 1)])
    cx = lambda bdf, n: pcidev(bdf, "0207", "15b3:1017", "15b3:0025", "00",  # noqa: E731
                               [(f"hsi{n}", 2), (f"mlx5_{n}", 3)])
    io0 = [hostbridge(0, 1, 0x1e, [
        pcibridge("0000:00:01.0", 2, 2, [radeon("0000:02:00.0", 1)]),
        pcibridge("0000:00:02.0", 0xa, 0xa, [cx("0000:0a:00.0", 0)]),
        pcibridge("0000:00:03.0", 0x1e, 0x1e, [pcidev("0000:1e:00.0", "0300", "1a03:2000",
                                                      "1a03:2000", "41", [("card0", 1)])])])]
    io1 = [hostbridge(0, 0x81, 0x92, [
        pcibridge("0000:80:01.0", 0x82, 0x82, [radeon("0000:82:00.0", 2)]),
        pcibridge("0000:80:02.0", 0x92, 0x92, [cx("0000:92:00.0", 1)])])]
    m = machine([node(0, 36, 0, 136754298880, io0), node(1, 3612, 128, 137274458112, io1)],
                [("DMIProductName", "Apollo 70"), ("Backend", "Linux"), ("OSName", "Linux"),
                 ("HostName", "apollo70-r4"), ("Architecture", "aarch64")])
    write("r4-thunderx2-apollo70.v1.xml", "1", m,
          v1_distances=v1_distances([[10, 20], [20, 10]]))


def xeon_v1(name, host, model, l3, cores_per, node_mem, io_by_node, io_machine, dist, dmi):
    """A two-socket Xeon exported by hwloc 1.11 (v1): NUMANode > Package > L3 > cores with
    SMT2, siblings P#n and P#n+2*cores_per, node 1 the second half of each."""
    nodes = []
    for n in range(2):
        cores = [core(k, [n * cores_per + k, (2 + n) * cores_per + k], l2l1(1 << 20))
                 for k in range(cores_per)]
        pkg = O("Package", [cache_obj(("L3Cache", l3, 11), cores)], os=n,
                infos=[("CPUModel", model)])
        nodes.append(v1_numa(n, node_mem[n], [pkg] + io_by_node[n]))
    m = machine(nodes + io_machine, [("DMIProductName", dmi), ("Backend", "Linux"),
                                     ("OSName", "Linux"), ("HostName", host)] + X86[2:])
    write(name, "1", m, v1_distances=v1_distances(dist))


def juropa3_j3c053():
    """ParaStation/psmgmt tests/hwloc/topo.j3c053.xml (hwloc 1.x, v1): 2x Xeon E5-2650, 2 NUMA
    nodes, 8 cores SMT2 each (node 0: PUs 0-7,16-23); both host bridges hang from the Machine,
    so the two K20-class GPUs (10de:1021), the ConnectX-3 (15b3:1003, class 0280) and the I350
    NICs are local to the whole machine."""
    io = [hostbridge(0, 0, 8, [
        pcibridge("0000:00:02.0", 1, 1, [pcidev("0000:01:00.0", "0302", "10de:1021", "10de:097d")]),
        pcibridge("0000:00:03.0", 2, 2, [pcidev("0000:02:00.0", "0280", "15b3:1003", "15b3:0030",
                                                "00", [("ib0", 2), ("mlx4_0", 3)])]),
        pcibridge("0000:00:1c.0", 4, 5, [
            pcidev("0000:04:00.0", "0200", "8086:1521", "8086:0001", "01", [("enp4s0f0", 2)]),
            pcidev("0000:04:00.1", "0200", "8086:1521", "8086:0001", "01", [("enp4s0f1", 2)])])]),
        hostbridge(0, 0x80, 0x82, [pcibridge("0000:80:02.0", 0x82, 0x82, [
            pcidev("0000:82:00.0", "0302", "10de:1021", "10de:097d")])])]
    xeon_v1("r4-juropa3-j3c053.v1.xml", "j3c053-r4", "Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz",
            20 << 20, 8, [33539543040, 33819648000], [[], []], io, [[10, 21], [21, 10]],
            "S2600WTT")


def deep_dam01():
    """ParaStation/psmgmt tests/hwloc/topo.dp-dam01.xml (hwloc 1.x, v1): DEEP-EST DAM node
    (Supermicro SYS-6029U-TR4T), 2x Xeon Platinum 8260M, 24 cores SMT2 per node (node 0: PUs
    0-23,48-71); node 0: X710 NICs, two Optane SSDs, an Intel FPGA PAC (8086:0b2b, class
    1200), an EXTOLL NIC (1cad:0011, class 0280), ASPEED VGA; node 1: a V100-PCIE-32GB
    (10de:1db6) and a ConnectX-4; v1 distances 1.0/2.1."""
    io0 = [hostbridge(0, 0x18, 0x18, [pcibridge("0000:17:00.0", 0x18, 0x18, [
               pcidev(f"0000:18:00.{f}", "0200", "8086:1589", "15d9:0929", "02",
                      [(f"eno{f + 1}", 2)]) for f in range(4)])]),
           hostbridge(0, 0x19, 0x1a, [
               pcibridge("0000:17:02.0", 0x19, 0x19, [pcidev("0000:19:00.0", "0108", "8086:2701",
                                                             "8086:3905", "00")]),
               pcibridge("0000:17:03.0", 0x1a, 0x1a, [pcidev("0000:1a:00.0", "0108", "8086:2701",
                                                             "8086:3905", "00")])]),
           hostbridge(0, 0x3b, 0x3b, [pcibridge("0000:3a:00.0", 0x3b, 0x3b, [
               pcidev("0000:3b:00.0", "1200", "8086:0b2b", "8086:0000", "01")])]),
           hostbridge(0, 0x5e, 0x5e, [pcibridge("0000:5d:00.0", 0x5e, 0x5e, [
               pcidev("0000:5e:00.0", "0280", "1cad:0011", "1cad:0000", "01")])])]
    io1 = [hostbridge(0, 0xaf, 0xaf, [pcibridge("0000:ae:00.0", 0xaf, 0xaf, [
               pcidev("0000:af:00.0", "0302", "10de:1db6", "10de:124a")])]),
           hostbridge(0, 0xd8, 0xd8, [pcibridge("0000:d7:00.0", 0xd8, 0xd8, [
               pcidev("0000:d8:00.0", "0200", "15b3:1015", "15b3:0005", "00",
                      [("enp216s0", 2), ("mlx5_0", 3)])])])]
    xeon_v1("r4-deep-dam01.v1.xml", "dam01-r4", "Intel(R) Xeon(R) Platinum 8260M CPU @ 2.40GHz",
            37486592, 24, [204720848896, 204547817472], [io0, io1], [], [[10, 21], [21, 10]],
            "SYS-6029U-TR4T")


if __name__ == "__main__":
    for f in [dgx_spark_gb10, power8_nvlink, opteron_8n_4distances, westmere_sl390s,
              dunnington_16p_4n, knl_heteromem, arrowlake_225u, zhaoxin_kh40000, knc_se10p,
              lassen_ac922, thunderx2_apollo70, juropa3_j3c053, deep_dam01]:
        f()

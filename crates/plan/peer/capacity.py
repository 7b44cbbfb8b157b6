#!/usr/bin/env python3
"""How many VMs of each size fit on each topology: vmtune vs the kubelet CPU Manager.

For every topology in testdata/topologies/hwloc (or TOPOLOGIES=glob,glob) and every size in
SIZES, vmtune plans VMs one after another (`vmtune plan --json`, each plan a --tenant of the
next) until one is refused; the kubelet harness (../shared/peers/kubelet, real k8s v1.37.2
code) admits pods of the same size in order until one is refused, in the yardstick's K-snn
and K-l3 configurations, without and with one extra whole core per pod for the emulator
("+E", the footprint of a vmtune VM with an emulator core of its own). vmtune's count also
says how many VMs got an emulator core of their own (the rest share the housekeeping CPUs)
and whether the housekeeping ever moved (it must not).

Run from the project root, after `cargo build --release` and building the harness:
    KHARNESS=/tmp/kharness PEER=../shared/peers/kubelet python3 crates/plan/peer/capacity.py --out /tmp/cap
Writes OUT/capacity.json and prints a markdown table.
"""
import argparse, glob, json, os, subprocess, sys, time

PEER = os.environ.get("PEER", "../shared/peers/kubelet")
sys.path.insert(0, PEER)
import compare  # noqa: E402  (the yardstick's Topo, vmtune_plan and kubelet helpers)

SIZES = [int(x) for x in os.environ.get("SIZES", "4,8,16,32").split(",")]
PEERS = ["K-snn", "K-l3"]


def vmtune_chain(t, n, work):
    """plan n-vCPU VMs until refused: (count, own emulator cores, housekeeping moves, secs)"""
    d = os.path.join(work, "cap_%s_%d" % (t.name, n))
    os.makedirs(d, exist_ok=True)
    files, host, own_emu, moved = [], None, 0, 0
    t0 = time.perf_counter()
    for i in range(len(t.pu) // n + 2):
        f = os.path.join(d, "t%03d.json" % i)
        p = compare.vmtune_plan(t, n, tenants=files, out=f)
        if p["refused"]:
            break
        host = host or p["host"]
        moved += p["host"] != host
        own_emu += bool(p["emu"]) and set(p["emu"]) != set(p["host"])
        files.append(f)
    return len(files), own_emu, moved, time.perf_counter() - t0


def kubelet_fit(t, cfg, host, per_pod, count):
    k = compare.kubelet(t, cfg, host, [{"cpus": per_pod, "gpu_numa": []}] * count)
    if k.get("error"):
        return None
    return sum(1 for r in k["results"] if r["admitted"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    paths = []
    for g in compare.TOPO_GLOBS:
        paths += sorted(glob.glob(g))
    if a.only:
        paths = [p for p in paths if a.only in p]
    rows = []
    for path in paths:
        t = compare.Topo(path, a.out)
        print("==", t.name, file=sys.stderr)
        base = compare.vmtune_plan(t, 1)
        host = base.get("host", [])
        row = {"name": t.name, "pus": len(t.pu), "host": host, "sizes": {}}
        for n in SIZES:
            if n > len(t.pu) - len(host):
                continue
            fit, own, moved, secs = vmtune_chain(t, n, a.out)
            cell = {"vmtune": fit, "own_emulator": own, "host_moved": moved, "vmtune_secs": round(secs, 2)}
            count = len(t.pu) // n + 1
            for p in PEERS:
                cell[p] = kubelet_fit(t, compare.CONFIGS[p], host, n, count)
                cell[p + "+E"] = kubelet_fit(t, compare.CONFIGS[p], host, n + t.smt, count)
            row["sizes"][n] = cell
        rows.append(row)
    json.dump(rows, open(os.path.join(a.out, "capacity.json"), "w"), indent=1)
    fmt = lambda v: "n/a" if v is None else str(v)
    print("| topology | PUs | " + " | ".join("%d vCPUs" % n for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for r in rows:
        cells = []
        for n in SIZES:
            c = r["sizes"].get(n) or r["sizes"].get(str(n))
            if not c:
                cells.append("—")
                continue
            cells.append("**%d** (%d own) · %s/%s · %s/%s%s" % (
                c["vmtune"], c["own_emulator"], fmt(c["K-snn"]), fmt(c["K-snn+E"]), fmt(c["K-l3"]), fmt(c["K-l3+E"]),
                " MOVED %d" % c["host_moved"] if c["host_moved"] else ""))
        print("| %s | %d | %s |" % (r["name"].replace(".lstopo-2.9.0", ""), r["pus"], " | ".join(cells)))
    bad = [(r["name"], n, c) for r in rows for n, c in r["sizes"].items()
           if any(c.get(p + "+E") is not None and c["vmtune"] < c[p + "+E"] for p in PEERS) or c["host_moved"]]
    print("\n%d case(s) where vmtune fits fewer than a kubelet configuration with an emulator core per pod, or moved the housekeeping" % len(bad))
    for name, n, c in bad:
        print("  %s %s vCPUs: %s" % (name, n, c))


if __name__ == "__main__":
    main()

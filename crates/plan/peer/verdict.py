#!/usr/bin/env python3
"""vmtune vs every kubelet configuration, from the yardstick's results.json.

The kubelet yardstick (../shared/peers/kubelet/compare.py, run from the project root) writes
results.json and one topo_<name>.json per topology into its --out folder. This script reads
them and says, per topology, where vmtune is worse than a kubelet configuration on a metric
the yardstick scores:

- single requests: NUMA nodes and L3 groups spanned, L3 groups shared with the host, SMT
  cores split, share of vCPUs on the GPU's node; against K-snn, K-l3, K-pk and K-dist; a
  refusal where the peer admits loses;
- the 16-tenant sequence: tenants that fit against the configurations that give each pod an
  emulator core too (K-snn+E, K-l3+E), and, over the tenants both sides placed (the first k),
  the sums of the same metrics, recomputed among those k tenants only (the yardstick's own
  per-tenant figures also count tenants placed later, which penalizes whoever fits more).

Usage: verdict.py OUT_DIR [--markdown]
"""
import json, os, sys

SINGLE_PEERS = ["K-snn", "K-l3", "K-pk", "K-dist"]
SEQ_PEERS = ["K-snn", "K-l3", "K-pk", "K-dist", "K-snn+E", "K-l3+E"]
FIT_PEERS = ["K-snn+E", "K-l3+E"]
KEYS = ["numa", "l3", "l3_shared", "smt_split"]


class Topo:
    """The yardstick's metrics, from `vmtune topo --json` (same rules as compare.py)."""

    def __init__(self, path):
        d = json.load(open(path))
        self.pu = {p["os_index"]: p for p in d["pus"]}
        self.core_pus, self.l3_pus = {}, {}
        for p in d["pus"]:
            self.core_pus.setdefault(p["core"], set()).add(p["os_index"])
            self.l3_pus.setdefault(self.l3(p["os_index"]), set()).add(p["os_index"])

    def l3(self, cpu):
        p = self.pu[cpu]
        return p["l3"] if p["l3"] is not None else ("pkg", p["package"])

    def metrics(self, s, others, host):
        s = set(s)
        occ = set(host).union(*others) if others else set(host)
        l3s = {self.l3(c) for c in s}
        return {
            "numa": len({self.pu[c]["numa"] for c in s}),
            "l3": len(l3s),
            "l3_shared": sum(1 for g in l3s if self.l3_pus[g] & occ),
            "smt_split": sum(1 for ps in self.core_pus.values() if (ps & s) and (ps - s)),
        }


def worse_single(a, b):
    """metrics where vmtune (a) is worse than the peer (b); a refusal loses"""
    if a == "n/a" or b == "n/a":
        return None
    if a is None:
        return [] if b is None else ["refused"]
    if b is None:
        return []
    w = [k for k in KEYS if a[k] > b[k]]
    if "gpu_local" in a and a["gpu_local"] < b.get("gpu_local", 0):
        w.append("gpu_local")
    return w


def better_single(a, b):
    if a in (None, "n/a") or b in (None, "n/a"):
        return a not in (None, "n/a") and b is None
    return any(a[k] < b[k] for k in KEYS) or ("gpu_local" in a and a["gpu_local"] > b.get("gpu_local", 0))


def prefix_sums(t, sets, host, k):
    """sums of the metrics of the first k footprints (vCPUs; others' footprints as occupied)"""
    vs, fps = sets
    out = {key: 0 for key in KEYS}
    for i in range(k):
        m = t.metrics(vs[i], fps[:i] + fps[i + 1:k], host)
        for key in KEYS:
            out[key] += m[key]
    return out


def main():
    out_dir = sys.argv[1]
    md = "--markdown" in sys.argv
    results = json.load(open(os.path.join(out_dir, "results.json")))
    problems, rows = [], []
    totals = {p: [0, 0, 0] for p in SINGLE_PEERS}  # better, equal, worse-or-mixed
    for r in results:
        t = Topo(os.path.join(out_dir, "topo_%s.json" % r["name"]))
        for row in r["single"]:
            for p in SINGLE_PEERS:
                w = worse_single(row["vmtune"], row.get(p))
                if w is None:
                    continue
                if w:
                    totals[p][2] += 1
                    problems.append("%s: %d vCPUs%s vs %s: worse on %s (vmtune %s, %s %s)" % (
                        r["name"], row["n"], " +GPU" if row["gpu"] else "", p, ",".join(w),
                        row["vmtune"], p, row.get(p)))
                elif better_single(row["vmtune"], row.get(p)):
                    totals[p][0] += 1
                else:
                    totals[p][1] += 1
        s = r["seq"]
        host = s["host"]
        vm_v = [set(x) for x in s.get("vmtune_vcpus", [])]
        vm_fp = [set(v) | set(e) for v, e in zip(s.get("vmtune_vcpus", []), s.get("vmtune_emu", []))]
        fit = len(vm_v)
        cells = {"fit": fit, "moved": s.get("vmtune_host_moved", 0)}
        for p in SEQ_PEERS:
            k = s.get(p)
            if not k or "error" in k:
                cells[p] = None
                continue
            kc = [set(x) for x in k["cpus"]]
            n = min(fit, len(kc))
            mine = prefix_sums(t, (vm_v, vm_fp), host, n)
            theirs = prefix_sums(t, (kc, kc), host, n)
            cells[p] = (len(kc), n, mine, theirs)
            w = [key for key in KEYS if mine[key] > theirs[key]]
            if p in FIT_PEERS and fit < len(kc):
                w.append("fit %d < %d" % (fit, len(kc)))
            if w:
                problems.append("%s: sequence vs %s: worse on %s (first %d tenants: vmtune %s, %s %s)" % (
                    r["name"], p, ", ".join(w), n, mine, p, theirs))
        if cells["moved"]:
            problems.append("%s: the housekeeping moved in %d plans" % (r["name"], cells["moved"]))
        rows.append((r["name"], r["pus"], cells))
    if md:
        print("| topology | PUs | fit: vmtune / K-snn+E / K-l3+E | L3 shared over the common tenants: vmtune vs K-snn+E, vs K-l3+E |")
        print("|---|---|---|---|")
        for name, pus, c in rows:
            def fitc(p):
                return "n/a" if c[p] is None else str(c[p][0])
            def sh(p):
                return "n/a" if c[p] is None else "%d vs %d (%d)" % (c[p][2]["l3_shared"], c[p][3]["l3_shared"], c[p][1])
            print("| %s | %d | %d / %s / %s | %s; %s |" % (name.replace(".lstopo-2.9.0", ""), pus, c["fit"], fitc("K-snn+E"), fitc("K-l3+E"), sh("K-snn+E"), sh("K-l3+E")))
        print()
    for p, (b, e, w) in totals.items():
        print("single requests vs %s: better %d, equal %d, worse or mixed %d" % (p, b, e, w))
    print("%d case(s) where vmtune is worse on some metric:" % len(problems))
    for x in problems:
        print("  " + x)


if __name__ == "__main__":
    main()

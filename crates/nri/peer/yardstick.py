#!/usr/bin/env python3
"""The NRI agent's placements against the kubelet's static CPU manager, on the kubelet
yardstick's own requests (../shared/peers/kubelet/compare.py), scored by the same code.

The yardstick asks vmtune for single requests (4/8/16/32 CPUs, with and without a GPU) and a
sequence of 16 tenants of 8 CPUs on every topology in testdata/topologies/hwloc. Here every
request is a Guaranteed Kubernetes container (the kubelet's cgroup parent, shares and quota;
a GPU as a CDI device name) run through `vmtune nri replay`: the agent's own code, its own
housekeeping, its refusals. A sequence is one replay of all its creates in order, so each
tenant is placed among the ones before it as on a node. Then crates/plan/peer/verdict.py says
where the agent is worse than a kubelet configuration on any metric.

Then the capacity chains: Kata pods of 3 CPUs (a 4-vCPU VM with Kata's default_vcpus, and an
emulator core) on every topology, against `vmtune plan`'s chain of 4-vCPU VMs
(crates/plan/peer/capacity.py's count), and plain 4-CPU containers against the kubelet's
K-snn / K-l3.

Run from the project root after `cargo build --release` and building the harness:
    T=$(mktemp -d); (cd ../shared/peers/kubelet && go build -o "$T/kharness" .)
    KHARNESS=$T/kharness PEER=../shared/peers/kubelet python3 crates/nri/peer/yardstick.py --out $T/nri
Writes OUT/results.json (the yardstick's shape), OUT/capacity.json and prints the verdict.
"""
import argparse, glob, json, os, subprocess, sys, time

PEER = os.environ.get("PEER", "../shared/peers/kubelet")
sys.path.insert(0, PEER)
import compare  # noqa: E402

VM = os.environ.get("VMTUNE", "target/release/vmtune")
MEM = 2 << 30


def container(i, cpus, gpu=None, kata=False):
    """the pod and container the kubelet (cgroupfs driver) makes of a Guaranteed request"""
    uid = "00000000-0000-4000-8000-%012d" % i
    parent = "/kubepods/pod" + uid
    pod = {"id": "pod%04d" % i, "name": "p%d" % i, "namespace": "default", "uid": uid,
           "cgroup_parent": parent, "runtime_handler": "kata-qemu" if kata else ""}
    c = {"id": "ctr%04d" % i, "pod_id": pod["id"], "name": "main", "cpu_shares": cpus * 1024,
         "cpu_quota": cpus * 100000, "cpu_period": 100000, "memory_limit": MEM,
         "cgroups_path": "%s/ctr%04d" % (parent, i)}
    if gpu:
        c["cdi_devices"] = ["vmtune.io/vfio=" + gpu]
    return [{"event": "run_pod", "pod": pod}, {"event": "create", "pod": pod, "container": c}]


def replay(t, requests, host_cpus=None, kata=False):
    """run the creates; per request: (exclusive, cpus, emulator), and the housekeeping"""
    lines = []
    for i, (n, gpu) in enumerate(requests):
        lines += container(i, n, gpu, kata)
    path = os.path.join(WORK, "events_%s.jsonl" % t.name)
    with open(path, "w") as f:
        for ev in lines:
            f.write(json.dumps(ev) + "\n")
    cmd = [VM, "nri", "replay", path, "--topology", t.xml, "--json", "--cdi-dir", "/nonexistent"]
    if host_cpus:
        cmd += ["--reserved-cpus", ",".join(map(str, host_cpus))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: %s" % (" ".join(cmd), r.stderr))
    d = json.loads(r.stdout)
    out = []
    for s in d["steps"]:
        if s["event"] != "create":
            continue
        cpus = parse_list(s.get("cpus") or "")
        out.append((bool(s.get("exclusive")), cpus, parse_list(s.get("emulator_cpus") or ""), s["log"]))
    return out, d["status"]["housekeeping"], cmd


def parse_list(s):
    out = []
    for part in filter(None, s.split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def agent_plan(t, n, gpu=None, tenants=(), out=None, host_cpus=None):
    """compare.vmtune_plan's contract, answered by the agent: tenants are earlier answers"""
    reqs = [json.load(open(f))["request"] for f in tenants] + [[n, gpu]]
    t0 = time.perf_counter()
    steps, host, cmd = replay(t, reqs, host_cpus)
    dt = time.perf_counter() - t0
    excl, cpus, emu, log = steps[-1]
    if not excl:
        return {"refused": True, "error": " ".join(log)[:400], "secs": dt, "cmd": cmd}
    res = {"refused": False, "vcpus": sorted(cpus), "emu": sorted(emu), "host": sorted(host),
           "mem_nodes": [], "warnings": [], "secs": dt, "cmd": cmd, "request": [n, gpu]}
    if out:
        json.dump(res, open(out, "w"))
    return res


def chain(t, n, kata, host_cpus, limit):
    steps, host, _ = replay(t, [(n, None)] * limit, host_cpus, kata)
    fit = 0
    for excl, _, _, _ in steps:
        if not excl:
            break
        fit += 1
    return fit, host


def main():
    global WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    WORK = a.out
    os.makedirs(a.out, exist_ok=True)
    compare.vmtune_plan = agent_plan
    paths = []
    for g in compare.TOPO_GLOBS:
        paths += sorted(glob.glob(g))
    if a.only:
        paths = [p for p in paths if a.only in p]
    results, caps = [], []
    for p in paths:
        t = compare.Topo(p, a.out)
        print("==", t.name, file=sys.stderr)
        results.append(compare.run_topo(t, a.out))
        host = results[-1]["host"]
        cap = {"name": t.name, "pus": len(t.pu)}
        limit = len(t.pu) // 4 + 2
        cap["kata_4vcpu_vms"], _ = chain(t, 3, True, None, limit)
        cap["containers_4cpu"], _ = chain(t, 4, False, None, limit)
        for cname in ("K-snn", "K-l3"):
            k = compare.kubelet(t, compare.CONFIGS[cname], host, [{"cpus": 4, "gpu_numa": []}] * limit)
            cap[cname] = None if k.get("error") else sum(1 for r in k["results"] if r["admitted"])
        caps.append(cap)
    json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    json.dump(caps, open(os.path.join(a.out, "capacity.json"), "w"), indent=1)
    verdict = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../plan/peer/verdict.py")
    subprocess.run([sys.executable, verdict, a.out, "--markdown"], check=True)
    print("\n| topology | PUs | Kata 4-vCPU VMs (agent) | 4-CPU containers: agent / K-snn / K-l3 |")
    print("|---|---|---|---|")
    worse = []
    for c in caps:
        fmt = lambda v: "n/a" if v is None else str(v)
        print("| %s | %d | %d | %d / %s / %s |" % (c["name"].replace(".lstopo-2.9.0", ""), c["pus"], c["kata_4vcpu_vms"],
                                                   c["containers_4cpu"], fmt(c["K-snn"]), fmt(c["K-l3"])))
        for k in ("K-snn", "K-l3"):
            if c[k] is not None and c["containers_4cpu"] < c[k]:
                worse.append("%s: %d 4-CPU containers against %s's %d" % (c["name"], c["containers_4cpu"], k, c[k]))
    print("\n%d case(s) where the agent fits fewer 4-CPU containers than a kubelet configuration" % len(worse))
    for w in worse:
        print("  " + w)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Build bootprof's test fixtures from the Kata GPU boot study's log excerpts.

Lines marked (verbatim) are copied from the seed; the others fill gaps in the seed's
excerpts following the same format and cadence (documented in tests/fixtures/README.md).
Run: python3 scripts/make-fixtures.py tests/fixtures
"""
import json, os, sys, datetime as dt

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
os.makedirs(out, exist_ok=True)

def agent(msg, ts, subsystem="rpc", level="INFO", **extra):
    d = {"msg": msg, "level": level, "ts": ts, "version": "0.1.0", "name": "kata-agent",
         "subsystem": subsystem, "source": "agent", "pid": "1"}
    d.update(extra)
    return json.dumps(d, separators=(",", ":"))

def uevent(action, devpath, subsystem, seq):
    return f'Uevent {{ action: "{action}", devpath: "{devpath}", devname: "", subsystem: "{subsystem}", seqnum: "{seq}", interface: "" }}'

def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}" + "123Z"

GPUS_RUN1 = [("02", 3.201931), ("06", 7.329101), ("05", 8.159058), ("04", 8.165639),
             ("03", 8.170375), ("08", 8.177573), ("07", 8.182313)]
ENABLE_RUN1 = [("02", 11.721284), ("06", 15.137841), ("05", 18.534911), ("04", 22.032357),
               ("03", 25.719357), ("08", 28.918995), ("07", 32.130338)]
FBHUB = [35.757629, 37.904920, 40.019364, 42.144963, 44.272692, 46.396907, 48.518811]
ROOT = {"02": "05", "03": "06", "04": "07", "05": "08", "06": "09", "07": "0a", "08": "0b"}
CDI_DEVS = "nvidia.com/gpu=3, nvidia.com/gpu=1, nvidia.com/gpu=4, nvidia.com/gpu=6, nvidia.com/gpu=5, nvidia.com/gpu=2, nvidia.com/gpu=0"

# ---------------------------------------------------------------- run 1: vmconsole.txt (jq -r)
r1 = []
k = lambda t, s: r1.append((t, f"[{t:12.6f}] {s}"))
boot1 = dt.datetime(2025, 11, 20, 16, 5, 7, 518000)  # guest t=0 on the host axis
def a1(t_host, line):
    r1.append(((t_host - boot1).total_seconds(), line))
k(0.437005, "brd: module loaded")
k(0.443558, "loop: module loaded")
k(0.443819, "virtio_scsi virtio1: 1/0/0 default/read/poll queues")
S = '{"msg":"\\"proc\\" is already mounted at \\"/proc\\"","level":"INFO","ts":"2025-11-20T16:05:09.356676179Z","pid":"1","version":"0.1.0","subsystem":"baremount","name":"kata-agent","source":"agent"}'
r1.append((1.8387, S))  # verbatim
r1.append((1.8389, '{"msg":"\\"sysfs\\" is already mounted at \\"/sys\\"","level":"INFO","ts":"2025-11-20T16:05:09.356699617Z","pid":"1","version":"0.1.0","subsystem":"baremount","source":"agent","name":"kata-agent"}'))
r1.append((1.8391, '{"msg":"\\"dev\\" is already mounted at \\"/dev\\"","level":"INFO","ts":"2025-11-20T16:05:09.356718292Z","name":"kata-agent","version":"0.1.0","pid":"1","subsystem":"baremount","source":"agent"}'))
r1.append((1.8416, '{"msg":"Initdata check device `ptmx`","level":"DEBG","ts":"2025-11-20T16:05:09.359571917Z","source":"agent","name":"kata-agent","version":"0.1.0","subsystem":"initdata","pid":"1"}'))
r1.append((1.8417, '{"msg":"Initdata check device `pts`","level":"DEBG","ts":"2025-11-20T16:05:09.359640437Z","subsystem":"initdata","name":"kata-agent","pid":"1","version":"0.1.0","source":"agent"}'))
r1.append((1.8418, '{"msg":"Initdata check device `shm`","level":"DEBG","ts":"2025-11-20T16:05:09.3596694Z","version":"0.1.0","name":"kata-agent","pid":"1","subsystem":"initdata","source":"agent"}'))
r1.append((1.8564, '{"msg":"rpc call from shim to agent: \\"create_sandbox\\"","level":"INFO","ts":"2025-11-20T16:05:09.374408769Z","source":"agent","subsystem":"rpc","version":"0.1.0","name":"kata-agent","pid":"1"}'))
for bdf, t in GPUS_RUN1:
    k(t, f"pci 0000:{bdf}:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint")
    k(t + 0.000468, f"pci 0000:{bdf}:00.0: BAR 0 [mem 0x00000000-0x00ffffff 64bit pref]")
    k(t + 0.000620, f"pci 0000:{bdf}:00.0: BAR 2 [mem 0x00000000-0x1fffffffff 64bit pref]")
    k(t + 0.000795, f"pci 0000:{bdf}:00.0: BAR 4 [mem 0x00000000-0x01ffffff 64bit pref]")
    k(t + 0.001031, f"pci 0000:{bdf}:00.0: Max Payload Size set to 128 (was 256, max 256)")
    k(t + 0.001416, f"pci 0000:{bdf}:00.0: Enabling HDA controller")
k(4.858791, "pci 0000:02:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at 0000:00:05.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)")
k(5.681204, "pci 0000:02:00.0: BAR 2 [mem 0x3a4000000000-0x3a5fffffffff 64bit pref]: assigned")
k(5.681521, "pci 0000:02:00.0: BAR 4 [mem 0x3a6000000000-0x3a6001ffffff 64bit pref]: assigned")
k(5.681842, "pci 0000:02:00.0: BAR 0 [mem 0x3a6002000000-0x3a6002ffffff 64bit pref]: assigned")
k(6.505076, "pci 0000:02:00.0: nv_msi_ht_cap_quirk_leaf+0x0/0x20 took 803659 usecs")
k(8.186969, "pci 0000:07:00.0: BAR 2 [mem 0x390000000000-0x391fffffffff 64bit pref]: assigned")
k(8.187249, "pci 0000:07:00.0: BAR 4 [mem 0x392000000000-0x392001ffffff 64bit pref]: assigned")
k(8.187528, "pci 0000:07:00.0: BAR 0 [mem 0x392002000000-0x392002ffffff 64bit pref]: assigned")
r1.append((8.1830, '{"msg":"Waiting for PciMatcher { devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\" }","level":"INFO","ts":"2025-11-20T16:05:15.701000961Z","version":"0.1.0","name":"kata-agent","subsystem":"uevent","pid":"1","source":"agent"}'))
r1.append((8.1831, '{"msg":"Waiting for PciMatcher { devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\" }: waiting on channel","level":"INFO","ts":"2025-11-20T16:05:15.701021912Z","subsystem":"uevent","source":"agent","pid":"1","version":"0.1.0","name":"kata-agent"}'))
r1.append((8.1944, '{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T16:05:15.71233274Z","subsystem":"uevent","pid":"1","version":"0.1.0","source":"agent","name":"kata-agent","event":"Uevent { action: \\"add\\", devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\", devname: \\"\\", subsystem: \\"pci\\", seqnum: \\"1379\\", interface: \\"\\" }"}'))
r1.append((8.1945, '{"msg":"Waiting for PciMatcher { devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\" }: found Uevent { action: \\"add\\", devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\", devname: \\"\\", subsystem: \\"pci\\", seqnum: \\"1379\\", interface: \\"\\" } on channel","level":"INFO","ts":"2025-11-20T16:05:15.712365772Z","version":"0.1.0","subsystem":"uevent","source":"agent","name":"kata-agent","pid":"1"}'))
r1.append((8.1946, '{"msg":"waiting for CDI spec(s) to be generated (0 of 100 max tries) \\"unresolvable CDI devices nvidia.com/gpu=3, nvidia.com/gpu=1, nvidia.com/gpu=4, nvidia.com/gpu=6, nvidia.com/gpu=5, nvidia.com/gpu=2, nvidia.com/gpu=0\\"","level":"INFO","ts":"2025-11-20T16:05:15.71245172Z","source":"agent","name":"kata-agent","version":"0.1.0","subsystem":"rpc","pid":"1"}'))
r1.append((8.1947, "[...]"))
for bdf, t in ENABLE_RUN1:
    k(t, f"nvidia 0000:{bdf}:00.0: enabling device (0140 -> 0142)")
r1.append((35.4439, '{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T16:05:42.96188988Z","pid":"1","subsystem":"uevent","source":"agent","name":"kata-agent","version":"0.1.0","event":"Uevent { action: \\"bind\\", devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\", devname: \\"\\", subsystem: \\"pci\\", seqnum: \\"1387\\", interface: \\"\\" }"}'))
r1.append((35.4440, '{"msg":"ignoring event","level":"DEBG","ts":"2025-11-20T16:05:42.961921263Z","name":"kata-agent","source":"agent","pid":"1","version":"0.1.0","subsystem":"uevent","uevent":"Uevent { action: \\"bind\\", devpath: \\"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\\", devname: \\"\\", subsystem: \\"pci\\", seqnum: \\"1387\\", interface: \\"\\" }"}'))
for t in FBHUB:
    k(t, "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.")
r1.append((89.9, "[...]"))
r1.append((89.94, '{"msg":"waiting for CDI spec(s) to be generated (39 of 100 max tries) \\"unresolvable CDI devices nvidia.com/gpu=3, nvidia.com/gpu=1, nvidia.com/gpu=4, nvidia.com/gpu=6, nvidia.com/gpu=5, nvidia.com/gpu=2, nvidia.com/gpu=0\\"","level":"INFO","ts":"2025-11-20T16:06:37.462492776Z","name":"kata-agent","subsystem":"rpc","pid":"1","version":"0.1.0","source":"agent"}'))
r1.sort(key=lambda x: x[0])
with open(f"{out}/run1-vmconsole.txt", "w") as f:
    f.write("\n".join(l for _, l in r1) + "\n")

# ---------------------------------------------------------------- run 2: containerd journal
SB = "c9f7bf13c1911810fa49a6be9a9d1efe0872d4088a008ac9eddd5bece6e56889"
boot2 = dt.datetime(2025, 11, 20, 17, 55, 58, 490000)
events = []  # (host datetime, kind, payload)
def kern(t, s, delay=0.004):
    events.append((boot2 + dt.timedelta(seconds=t + delay), "c", f"[{t:12.6f}] {s}"))
def ag(host, line):
    events.append((host, "c", line))
def hostmsg(host, msg):
    events.append((host, "m", msg))
H = lambda s: boot2 + dt.timedelta(seconds=s)
hostmsg(H(-20.0), "Creating sandbox")
hostmsg(H(-19.5), "Starting VM")
hostmsg(H(-0.5), "VM started")
kern(0.000000, "Linux version 6.12.47-166-nvidia-gpu (root@kata) #1 SMP")
kern(0.437005, "brd: module loaded")
kern(0.443558, "loop: module loaded")
kern(0.443819, "virtio_scsi virtio1: 1/0/0 default/read/poll queues")
kern(1.102, "Run /init as init process")
ag(dt.datetime(2025, 11, 20, 17, 55, 59, 692656), agent("\"proc\" is already mounted at \"/proc\"", "2025-11-20T17:55:59.692656146Z", "baremount"))
ag(dt.datetime(2025, 11, 20, 17, 56, 0, 118714), agent("rpc call from shim to agent: \"create_sandbox\"", "2025-11-20T17:56:00.118714278Z"))
gpu2 = [("02", 12.582377), ("06", 12.870), ("05", 13.168), ("04", 13.466), ("03", 13.764), ("08", 14.062), ("07", 14.360)]
seq = 1370
for bdf, t in gpu2:
    kern(t, f"pci 0000:{bdf}:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint")
    kern(t + 0.000620, f"pci 0000:{bdf}:00.0: BAR 2 [mem 0x00000000-0x1fffffffff 64bit pref]")
    kern(t + 0.0046, f"pci 0000:{bdf}:00.0: BAR 2 [mem 0x{0x3a4000000000 + seq * 0x2000000000:x}-0x{0x3a4000000000 + seq * 0x2000000000 + 0x1fffffffff:x} 64bit pref]: assigned")
    dp = f"/devices/pci0000:00/0000:00:{ROOT[bdf]}.0/0000:{bdf}:00.0"
    host = H(t + 0.92)
    ag(host, agent("got uevent message", iso(host - dt.timedelta(milliseconds=15)), "uevent", event=uevent("add", dp, "pci", seq)))
    seq += 1
# CDI waits: try 5 at 17:56:21.93953012 and 40 at 17:57:37.23937483 (verbatim), cadence between
t5 = dt.datetime(2025, 11, 20, 17, 56, 21, 939530)
t40 = dt.datetime(2025, 11, 20, 17, 57, 37, 239374)
step = (t40 - t5) / 35
for i in range(0, 41):
    t = t5 + step * (i - 5)
    ts = {5: "2025-11-20T17:56:21.93953012Z", 40: "2025-11-20T17:57:37.23937483Z"}.get(i, iso(t))
    ag(t + dt.timedelta(milliseconds=6), agent(f"waiting for CDI spec(s) to be generated ({i} of 100 max tries) \"unresolvable CDI devices nvidia.com/gpu=2, nvidia.com/gpu=0, nvidia.com/gpu=1, nvidia.com/gpu=6, nvidia.com/gpu=5, nvidia.com/gpu=3, nvidia.com/gpu=4\"", ts))
# enabling: 02 at 21.101954, 07 at 24.322027 (verbatim); the rest at the seed's ftrace pin durations
pins_ms = [3390, 3461, 3542, 3749, 3174, 3288, 3359]  # seed ftrace, in us/1000
order = ["02", "07", "06", "05", "04", "03", "08"]
t = 21.101954
bp = []
vaddrs = [0x786c40000000, 0x784c00000000, 0x7832c0000000 - 0x4000000000, 0x7812c0000000, 0x77f2c0000000, 0x77d2c0000000, 0x77b2c0000000]
for i, bdf in enumerate(order):
    if i == 1:
        t = 24.322027
    kern(t, f"nvidia 0000:{bdf}:00.0: enabling device (0140 -> 0142)")
    start = H(t + 0.120)
    bp.append((start, f"{iso(start)}: vfio_pin_pages_remote(): vaddr=0x{vaddrs[i]:x} npage=33554432 size=137438953472B limit=2048 pid=3454228"))
    end = start + dt.timedelta(milliseconds=pins_ms[i])
    bp.append((end, f"{iso(end)}: vfio_pin_pages_remote took {pins_ms[i]} ms"))
    dp = f"/devices/pci0000:00/0000:00:{ROOT[bdf]}.0/0000:{bdf}:00.0"
    bind = end + dt.timedelta(milliseconds=80)
    ag(bind, agent("got uevent message", iso(bind - dt.timedelta(milliseconds=10)), "uevent", event=uevent("bind", dp, "pci", seq)))
    seq += 1
    t = t + pins_ms[i] / 1000 + 0.10
for i, ft in enumerate(FBHUB):
    kern(ft - 35.757629 + t + 0.6, "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.")
ag(dt.datetime(2025, 11, 20, 17, 57, 37, 775940), '{"msg":"handling signal","level":"INFO","ts":"2025-11-20T17:57:37.775940382Z","subsystem":"signals","version":"0.1.0","pid":"1","name":"kata-agent","source":"agent","signal":"SIGCHLD"}')
ag(dt.datetime(2025, 11, 20, 17, 57, 37, 775999), '{"msg":"child exited unexpectedly","level":"INFO","ts":"2025-11-20T17:57:37.775999136Z","pid":"1","child-pid":"139","source":"agent","subsystem":"signals","name":"kata-agent","version":"0.1.0"}')
ag(dt.datetime(2025, 11, 20, 17, 57, 40, 52488), agent("all devices injected successfully, modified CDI container spec: Spec { version: \"1.1.0\", linux: Some(Linux { devices: Some([7 devices]) }) }", "2025-11-20T17:57:40.052488828Z"))
ag(dt.datetime(2025, 11, 20, 17, 57, 40, 60000), agent("rpc call from shim to agent: \"create_container\"", "2025-11-20T17:57:40.060000000Z"))
# memory hotplug pins (host) 17:57:56.948 .. 17:58:13.178
bp.append((dt.datetime(2025, 11, 20, 17, 57, 56, 948647), "2025-11-20T17:57:56.948647354Z: vfio_pin_pages_remote(): vaddr=0x7832c0000000 npage=26214400 size=107374182400B limit=2048 pid=3454228"))
bp.append((dt.datetime(2025, 11, 20, 17, 57, 56, 948648), "2025-11-20T17:57:56.437252192Z: vfio_pin_pages_remote took 488 ms"))
tt = dt.datetime(2025, 11, 20, 17, 57, 57, 500000)
for i in range(24):
    bp.append((tt, f"{iso(tt)}: vfio_pin_pages_remote(): vaddr=0x{0x7842c0000000 + i * 0x100000000:x} npage=1048576 size=4294967296B limit=2048 pid=3454228"))
    e = tt + dt.timedelta(milliseconds=495 + (i % 5) * 3)
    bp.append((e, f"{iso(e)}: vfio_pin_pages_remote took {495 + (i % 5) * 3} ms"))
    tt = e + dt.timedelta(milliseconds=130)
bp.append((dt.datetime(2025, 11, 20, 17, 58, 12, 678281), "025-11-20T17:58:12.678281961Z: vfio_pin_pages_remote(): vaddr=0x784ac0000000 npage=1048576 size=4294967296B limit=2048 pid=3454228"))
bp.append((dt.datetime(2025, 11, 20, 17, 58, 13, 178330), "2025-11-20T17:58:13.178330994Z: vfio_pin_pages_remote took 500 ms"))
ag(dt.datetime(2025, 11, 20, 17, 58, 13, 487517), '{"msg":"rpc call from shim to agent: \\"online_cpu_mem\\"","level":"INFO","ts":"2025-11-20T17:58:13.487517854Z","pid":"1","source":"agent","name":"kata-agent","version":"0.1.0","subsystem":"rpc"}')
mt = dt.datetime(2025, 11, 20, 17, 58, 13, 502834)
for n in range(176, 928):
    ts = mt + dt.timedelta(microseconds=(n - 176) * 67)
    ag(ts, agent("got uevent message", iso(ts), "uevent", event=uevent("add", f"/devices/system/memory/memory{n}", "memory", 1400 + n - 176)))
ag(dt.datetime(2025, 11, 20, 17, 58, 14, 200000), agent("rpc call from shim to agent: \"start_container\"", "2025-11-20T17:58:14.200000000Z"))
events.sort(key=lambda e: e[0])
def gq(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
lines = []
noise_units = ["kubelet[2211]: I1120 {t} 2211 kubelet.go:2453] \"SyncLoop (PLEG): event for pod\" pod=\"default/nginx\"",
               "systemd[1]: Started session-1234.scope - Session 1234 of User root."]
for n, (host, kind, payload) in enumerate(events):
    pre = host.strftime("%b %d %H:%M:%S") + " dal03-sgpu-160 "
    tm = host.strftime("%Y-%m-%dT%H:%M:%S.") + f"{host.microsecond:06d}" + "781Z"
    if kind == "c":
        lines.append(pre + f"containerd[2771108]: time=\"{tm}\" level=debug msg=\"reading guest console\" console-protocol=unix console-url=/run/vc/vm/{SB}/console.sock name=containerd-shim-v2 pid=3454180 sandbox={SB} source=virtcontainers subsystem=sandbox vmconsole={gq(payload)}")
    else:
        lines.append(pre + f"containerd[2771108]: time=\"{tm}\" level=info msg={gq(payload)} name=containerd-shim-v2 pid=3454180 sandbox={SB} source=virtcontainers subsystem=sandbox")
    if n % 40 == 0:
        lines.append(pre + noise_units[n % 2].replace("{t}", host.strftime("%H:%M:%S.%f")))
# another sandbox's line (the seed's first example, verbatim)
lines.insert(3, r'''Nov 20 17:55:32 dal03-sgpu-160 containerd[2771108]: time="2025-11-20T17:55:32.996810781Z" level=debug msg="reading guest console" console-protocol=unix console-url=/run/vc/vm/38f55c4a058a0f7227e64edd75f2aed134bee7db4b211f071be84fb44d17b0bb/console.sock name=containerd-shim-v2 pid=3426175 sandbox=38f55c4a058a0f7227e64edd75f2aed134bee7db4b211f071be84fb44d17b0bb source=virtcontainers subsystem=sandbox vmconsole="{\"msg\":\"policy check: StatsContainerRequest\",\"level\":\"DEBG\",\"ts\":\"2025-11-20T17:55:33.010026353Z\",\"version\":\"0.1.0\",\"name\":\"kata-agent\",\"subsystem\":\"rpc\",\"source\":\"agent\",\"pid\":\"1\"}"''')
with open(f"{out}/run2-containerd.journal", "w") as f:
    f.write("\n".join(lines) + "\n")
bp.sort(key=lambda e: e[0])
HIST = """@hist:
[0]                   89 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1]                    2 |@                                                   |
[2, 4)                 8 |@@@@                                                |
[4, 8)                 0 |                                                    |
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               1 |                                                    |
[64, 128)              0 |                                                    |
[128, 256)             0 |                                                    |
[256, 512)             0 |                                                    |
[512, 1K)              0 |                                                    |
[1K, 2K)               0 |                                                    |
[2K, 4K)               7 |@@@@                                                |
[4K, 8K)               0 |                                                    |
[8K, 16K)              0 |                                                    |
[16K, 32K)             1 |                                                    |
"""
with open(f"{out}/run2-bpftrace.txt", "w") as f:
    f.write("Attaching 2 probes...\n" + "\n".join(l for _, l in bp) + "\n\n\n" + HIST)

//! `vmtune nri` on a NUMA machine: containerd 2.4.2 with NRI, runc, crictl and the agent inside
//! a QEMU guest (TCG) with 16 vCPUs — two sockets, each a NUMA node with 4 cores of 2 SMT threads
//! — booted from an initramfs this test builds (the CI's guest kernel, busybox, the runtime of
//! crates/nri/tests/e2e/build-runtime.sh, the agent). Inside, pods made as the kubelet makes
//! them — Guaranteed with 2 and 4 CPUs, Guaranteed with 1, BestEffort — are run with crictl;
//! then the 2-CPU one is removed. What the guest reads back from each container's cgroup (v2)
//! and /proc/PID/status, and the agent's status file, come back over a serial port of their own
//! (the kernel keeps the console).
//!
//! Checked: each exclusive container runs on exactly the CPUs the agent gave it, whole SMT
//! cores of one NUMA node (the 1-CPU container's sibling kept idle, off the pool), with
//! cpuset.mems that node; no CPU is two containers' and none is a
//! housekeeping CPU; the BestEffort container runs on the pool, and follows it when the 2-CPU
//! container goes. The 2-CPU machine this project's tests run on cannot show any of that.
//!
//! Needs qemu-system-x86_64, a guest kernel ($VMTUNE_GUEST_KERNEL, as `.ci/run` sets it),
//! the runtime, a static busybox; no root (TCG). Skips by name otherwise.

#[path = "../../nri/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{PodSpec, Runtime};
use topo::CpuSet;

const BIN: &str = env!("CARGO_BIN_EXE_vmtune");

/// What the guest read for one container: its id, its CPUs from the cgroup and from /proc, its
/// memory nodes from both.
type Seen = (String, [CpuSet; 2], [String; 2]);
const TEST: &str = "nri_places_pods_on_a_two_node_guest";

/// Files a binary needs (`ldd`), as (path in the guest, bytes).
fn libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// The binary stripped of its debug information (a debug vmtune is ~200 MB).
fn stripped(bin: &Path, dir: &Path) -> Vec<u8> {
    let out = dir.join("vmtune.stripped");
    let ok = Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(bin)
        .status()
        .is_ok_and(|s| s.success());
    std::fs::read(if ok { &out } else { bin }).expect("read the vmtune binary")
}

fn image(rt: &Runtime, name: &str, out: &Path, sh: bool) {
    let mut cmd = Command::new(&rt.oci_image);
    cmd.args([
        "--name",
        name,
        "--entrypoint",
        r#"["/bin/sleep","2147483647"]"#,
    ])
    .arg("--file")
    .arg(format!("{}:/bin/busybox", rt.busybox.display()))
    .args(["--symlink", "/bin/sleep=busybox"]);
    if sh {
        cmd.args(["--symlink", "/bin/sh=busybox"]);
    }
    let st = cmd.arg("--out").arg(out).output().expect("oci-image.sh");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

const CONTAINERD_CONFIG: &str = r#"version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.internal.v1.opt']
  path = "/var/lib/opt"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "/run/nri/nri.sock"
  plugin_path = "/run/nri/plugins"
  plugin_config_path = "/run/nri/conf.d"
  plugin_registration_timeout = "60s"
  plugin_request_timeout = "60s"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "native"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "vmtune.local/pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/run/cni/bin"]
    conf_dir = "/run/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/local/bin/runc"
        SystemdCgroup = false
        NoPivotRoot = true
"#;

/// The guest's /init: bring up cgroup v2, containerd and the agent; run the pods; report.
/// Every line for the test starts with `T `; the rest is the guest's own chatter.
const INIT: &str = r#"#!/bin/sh
export PATH=/usr/local/bin:/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
# the test's lines on a port of their own: a kernel message (an RCU stall on a loaded host)
# cannot land inside one
exec > /dev/ttyS1 2>&1
mount -t tmpfs tmp /run; mount -t tmpfs tmp /tmp; mount -t tmpfs tmp /var
mkdir -p /sys/fs/cgroup /run/nri/plugins /run/nri/conf.d /run/cni/bin /run/cni/net.d /var/lib/opt /var/log/pods
mount -t cgroup2 none /sys/fs/cgroup
echo "+cpuset +cpu +memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
ip link set lo up
echo "127.0.0.1 localhost" > /etc/hosts; : > /etc/resolv.conf; echo guest > /etc/hostname; hostname guest
echo "root:x:0:0:root:/:/bin/sh" > /etc/passwd; echo "root:x:0:" > /etc/group
cri() { crictl --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 60s "$@"; }
fail() { echo "T FAIL $*"; tail -20 /tmp/containerd.log; tail -20 /tmp/agent.log; poweroff -f; }
containerd --config /etc/containerd/config.toml > /tmp/containerd.log 2>&1 &
for i in $(seq 120); do [ -S /run/nri/nri.sock ] && break; sleep 1; done
[ -S /run/nri/nri.sock ] || fail "containerd did not start"
ctr -a /run/containerd/containerd.sock -n k8s.io images import /images/pause.tar >/dev/null || fail import
ctr -a /run/containerd/containerd.sock -n k8s.io images import /images/busybox.tar >/dev/null || fail import
vmtune nri --socket /run/nri/nri.sock --state-dir /run/agent > /tmp/agent.log 2>&1 &
for i in $(seq 60); do grep -q '"connected": true' /run/agent/status.json 2>/dev/null && break; sleep 1; done
grep -q '"connected": true' /run/agent/status.json 2>/dev/null || fail "the agent did not connect"
report() {
  for name in $NAMES; do
    eval cid=\$C_$name
    pid=$(cri inspect -o go-template --template '{{.info.pid}}' $cid)
    cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$pid/cgroup)
    echo "T C $1 $name $cid $(cat $cg/cpuset.cpus.effective) $(cat $cg/cpuset.mems.effective) $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/status) $(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/$pid/status)"
  done
  echo "T S $1 $(tr -d '\n' < /run/agent/status.json)"
}
NAMES=""
for name in $(cat /cri/order); do
  pod=$(cri runp /cri/$name.pod.json) || fail "runp $name"
  cid=$(cri create $pod /cri/$name.ctr.json /cri/$name.pod.json) || fail "create $name"
  cri start $cid >/dev/null || fail "start $name"
  eval C_$name=$cid
  eval P_$name=$pod
  NAMES="$NAMES $name"
done
sleep 1
grep 'vmtune nri:' /tmp/agent.log | sed 's/^/T L /'
vmtune topo | sed 's/^/T Y /'
report all
be_cpus() {
  pid=$(cri inspect -o go-template --template '{{.info.pid}}' $C_be)
  cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$pid/cgroup)/cpuset.cpus.effective
}
before=$(be_cpus)
cri stopp $P_g2 >/dev/null; cri rmp $P_g2 >/dev/null
NAMES=$(echo $NAMES | sed 's/g2//')
# the pool grows by the CPUs g2 gave back: wait for the BestEffort container to follow (a
# minute at most; the test then says where it runs)
for i in $(seq 60); do [ "$(be_cpus)" != "$before" ] && break; sleep 1; done
report without-g2
grep 'vmtune nri:' /tmp/agent.log | sed 's/^/T L /'
vmtune topo | sed 's/^/T Y /'
echo "T DONE"
poweroff -f
"#;

#[test]
fn nri_places_pods_on_a_two_node_guest() {
    let Some(qemu) = testkit::which("qemu-system-x86_64") else {
        testkit::skip(TEST, "no qemu-system-x86_64 (Debian: qemu-system-x86)");
        return;
    };
    let kernel = match testkit::guest_kernel() {
        Ok(k) => k,
        Err(why) => return testkit::skip(TEST, why),
    };
    let rt = match Runtime::locate() {
        Ok(rt) => rt,
        Err(why) => return testkit::skip(TEST, why),
    };
    let tmp = tempfile::tempdir().expect("temp dir");

    let mut c = bench::guest::Cpio::new();
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "run",
        "tmp",
        "var",
        "usr",
        "usr/local",
        "usr/local/bin",
        "etc",
        "etc/containerd",
        "images",
        "cri",
    ] {
        c.dir(d);
    }
    c.file("bin/busybox", 0o755, &std::fs::read(&rt.busybox).unwrap());
    c.symlink("bin/sh", "busybox");
    c.file("init", 0o755, INIT.as_bytes());
    c.file(
        "etc/containerd/config.toml",
        0o644,
        CONTAINERD_CONFIG.as_bytes(),
    );
    for (name, path) in [
        ("containerd", &rt.containerd),
        ("containerd-shim-runc-v2", &rt.shim),
        ("ctr", &rt.ctr),
        ("runc", &rt.runc),
        ("crictl", &rt.crictl),
    ] {
        c.file(
            &format!("usr/local/bin/{name}"),
            0o755,
            &std::fs::read(path).unwrap(),
        );
    }
    c.file(
        "usr/local/bin/vmtune",
        0o755,
        &stripped(Path::new(BIN), tmp.path()),
    );
    let mut made = std::collections::BTreeSet::new();
    for lib in libraries(&rt.runc)
        .into_iter()
        .chain(libraries(Path::new(BIN)))
    {
        let rel = lib.to_string_lossy().trim_start_matches('/').to_string();
        let mut acc = String::new();
        for part in Path::new(&rel).parent().into_iter().flat_map(|p| p.iter()) {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(&part.to_string_lossy());
            if made.insert(acc.clone()) && !["usr"].contains(&acc.as_str()) {
                c.dir(&acc);
            }
        }
        if made.insert(rel.clone()) {
            c.file(&rel, 0o755, &std::fs::read(&lib).unwrap());
        }
    }
    for (name, file, sh) in [
        ("vmtune.local/pause:1", "pause.tar", false),
        ("vmtune.local/busybox:1", "busybox.tar", true),
    ] {
        let out = tmp.path().join(file);
        image(&rt, name, &out, sh);
        c.file(
            &format!("images/{file}"),
            0o644,
            &std::fs::read(&out).unwrap(),
        );
    }
    let pods = [
        ("g2", PodSpec::guaranteed("g2", 2, 64 << 20)),
        ("g4", PodSpec::guaranteed("g4", 4, 64 << 20)),
        ("g1", PodSpec::guaranteed("g1", 1, 64 << 20)),
        ("be", PodSpec::best_effort("be")),
    ];
    let logs = Path::new("/var/log/pods");
    let mut order = String::new();
    for (name, pod) in &pods {
        c.file(
            &format!("cri/{name}.pod.json"),
            0o644,
            pod.to_json(logs).to_string().as_bytes(),
        );
        let ctr = pod.container("main").to_json(pod);
        c.file(
            &format!("cri/{name}.ctr.json"),
            0o644,
            ctr.to_string().as_bytes(),
        );
        order.push_str(name);
        order.push(' ');
    }
    c.file("cri/order", 0o644, order.as_bytes());
    let initrd = tmp.path().join("initrd.cpio");
    std::fs::write(&initrd, c.finish()).unwrap();

    let console = tmp.path().join("console.log");
    let results = tmp.path().join("results.log");
    let mut q = Command::new(&qemu);
    q.args([
        "-accel",
        "tcg,thread=multi",
        "-m",
        "3G",
        "-cpu",
        "max,vendor=GenuineIntel",
    ])
    .args(["-smp", "16,sockets=2,cores=4,threads=2"])
    .args(["-object", "memory-backend-ram,size=1536M,id=m0"])
    .args(["-object", "memory-backend-ram,size=1536M,id=m1"])
    .args(["-numa", "node,nodeid=0,cpus=0-7,memdev=m0"])
    .args(["-numa", "node,nodeid=1,cpus=8-15,memdev=m1"])
    .arg("-kernel")
    .arg(&kernel)
    .arg("-initrd")
    .arg(&initrd)
    .args([
        "-append",
        "console=ttyS0 panic=-1 quiet rdinit=/init no_timer_check",
    ])
    .args(["-display", "none", "-no-reboot", "-monitor", "none"])
    .arg("-serial")
    .arg(format!("file:{}", console.display()))
    .arg("-serial")
    .arg(format!("file:{}", results.display()));
    let mut child = q.spawn().expect("start qemu");
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the guest did not finish in 10 min:\n{}\n--- its kernel ---\n{}",
                std::fs::read_to_string(&results).unwrap_or_default(),
                std::fs::read_to_string(&console).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(&results).unwrap_or_default();
    eprintln!(
        "--- the guest's kernel ---\n{}",
        std::fs::read_to_string(&console).unwrap_or_default()
    );
    let lines: Vec<&str> = log
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("T "))
        .collect();
    assert!(lines.contains(&"DONE"), "the guest did not finish:\n{log}");
    assert!(!lines.iter().any(|l| l.starts_with("FAIL")), "{log}");

    // the agent's decisions and what the containers run on, per phase
    let mut status: BTreeMap<&str, Value> = BTreeMap::new();
    let mut seen: BTreeMap<(&str, &str), Seen> = BTreeMap::new();
    for l in &lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"S") => {
                status.insert(
                    f[1],
                    l.find('{')
                        .and_then(|i| serde_json::from_str(&l[i..]).ok())
                        .unwrap_or_else(|| panic!("not a status line: {l}\n{log}")),
                );
            }
            Some(&"C") => {
                assert!(f.len() >= 8, "a short container line: {l}\n{log}");
                let cpus = |s: &str| CpuSet::parse_list(s).unwrap_or_else(|e| panic!("{e}: {l}"));
                seen.insert(
                    (f[1], f[2]),
                    (
                        f[3].to_string(),
                        [cpus(f[4]), cpus(f[6])],
                        [f[5].to_string(), f[7].to_string()],
                    ),
                );
            }
            _ => {}
        }
    }
    eprintln!("--- the agent in the guest ---");
    for l in lines
        .iter()
        .filter(|l| l.starts_with("L ") || l.starts_with("Y "))
    {
        eprintln!("{}", &l[2..]);
    }
    let cpus_of = |v: &Value| -> CpuSet { serde_json::from_value(v.clone()).unwrap() };
    for phase in ["all", "without-g2"] {
        let st = status
            .get(phase)
            .unwrap_or_else(|| panic!("no status for {phase}:\n{log}"));
        let pool = cpus_of(&st["pool"]);
        let hk = cpus_of(&st["housekeeping"]);
        let allocs = st["allocations"].as_array().unwrap();
        let mut taken = CpuSet::new();
        for a in allocs {
            let name = a["name"]
                .as_str()
                .unwrap()
                .split('/')
                .nth(1)
                .unwrap()
                .to_string();
            let cpus = cpus_of(&a["cpus"]);
            let mems: Vec<u64> = a["mems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_u64().unwrap())
                .collect();
            assert!(
                !cpus.intersects(&taken) && !cpus.intersects(&hk) && !cpus.intersects(&pool),
                "{phase}: {st}"
            );
            taken = taken.union(&cpus);
            // this guest: node n holds CPUs 8n..8n+7, SMT siblings 2k, 2k+1
            let nodes: std::collections::BTreeSet<u32> = cpus.iter().map(|c| c / 8).collect();
            assert_eq!(nodes.len(), 1, "{phase}: {name} spans nodes: {cpus}");
            // whole cores: an odd container's last sibling stays idle, off the pool
            assert!(
                cpus.iter()
                    .all(|c| cpus.contains(c ^ 1) || !pool.contains(c ^ 1)),
                "{phase}: {name} shares a core with the pool: {cpus}, pool {pool}"
            );
            assert_eq!(
                mems,
                vec![u64::from(*nodes.iter().next().unwrap())],
                "{phase}: {name}"
            );
            let (_, [cg, proc_], [cgm, procm]) = seen
                .get(&(phase, name.as_str()))
                .unwrap_or_else(|| panic!("{phase}: nothing read for {name}:\n{log}"));
            assert_eq!(
                (cg, proc_),
                (&cpus, &cpus),
                "{phase}: {name} runs elsewhere than the agent says"
            );
            assert_eq!(
                (cgm.as_str(), procm.as_str()),
                (mems[0].to_string().as_str(), mems[0].to_string().as_str()),
                "{phase}: {name} memory"
            );
        }
        let want: usize = if phase == "all" { 3 } else { 2 };
        assert_eq!(allocs.len(), want, "{phase}: {st}");
        let (_, [cg, proc_], _) = seen
            .get(&(phase, "be"))
            .unwrap_or_else(|| panic!("{phase}: nothing read for be:\n{log}"));
        assert_eq!(
            (cg, proc_),
            (&pool, &pool),
            "{phase}: the BestEffort container is not on the pool"
        );
    }
    // the 2-CPU container's CPUs went back to the pool, and the BestEffort container followed
    let before = cpus_of(&status["all"]["pool"]);
    let after = cpus_of(&status["without-g2"]["pool"]);
    assert_eq!(after.len(), before.len() + 2, "{before} -> {after}");
}

//! vmtune's DRA driver against a real control plane: etcd, kube-apiserver, kube-scheduler
//! and kube-controller-manager (its resourceclaim-controller) v1.37.2, built from the Go
//! module proxy by `deploy/check/build-apiserver.sh --control-plane`, started by the test on
//! 127.0.0.1 (support/mod.rs). No kubelet: the Nodes are API objects, so a bound pod stays
//! Pending with its node set, which is what is observed.
//!
//! - `every_shared_topologys_slices_pass_the_servers_dry_run`: `vmtune dra slices` of every
//!   shared topology (both GPU selections, both CPU groupings) and `vmtune dra classes` are
//!   accepted by the API server's dry run (`kubectl apply --dry-run=server
//!   --validate=strict`), and a broken slice is refused.
//! - `the_scheduler_binds_gpu_pods_where_they_align`: two Nodes backed by two host models
//!   (node-a: the two-socket cts1-pascal hwloc export, both GPUs on NUMA node 0; node-b: the
//!   one-socket desktop sysfs snapshot with two GPUs on vfio-pci), each with a
//!   `vmtune dra publish` process writing its slices with a ServiceAccount token bound to a
//!   pod on its node (deploy/kubernetes-dra's RBAC and admission policy: node-a's token
//!   cannot write node-b's slices). A real NRI agent (`nri::Agent`) on node-a places an
//!   exclusive GPU container outside DRA: node-a's published slices lose its CPUs and GPU.
//!   Pods whose claims (ResourceClaimTemplates, so the controller makes one per pod) ask for
//!   a GPU and 8 CPUs on one NUMA node are then bound to the node that can align them,
//!   though the scheduler's scoring prefers the other; one is unschedulable where no node
//!   can; the same claim without the constraint lands misaligned (the constraint is what
//!   aligns); when a pod goes its claim is freed and the waiting pod gets its devices; when
//!   the exclusive container goes, the slices follow and the last waiting pod is bound.
//!
//! Skips by name when the binaries are not built.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{k8s_check_dir, vmtune_binary, wait_for, workspace_root, ControlPlane};

const FIVE: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kubectl",
    "kube-scheduler",
    "kube-controller-manager",
];

fn testdata(rel: &str) -> PathBuf {
    workspace_root().join("testdata").join(rel)
}

fn vmtune(bin: &Path, args: &[&str]) -> support::Ran {
    support::run(Command::new(bin).args(args), None, Duration::from_secs(120))
}

// ------------------------------------------------------------------------------------------
// the dry run

#[test]
fn every_shared_topologys_slices_pass_the_servers_dry_run() {
    let test = "every_shared_topologys_slices_pass_the_servers_dry_run";
    let bin = match k8s_check_dir(&FIVE[..3]) {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    let vmtune_bin = match vmtune_binary() {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    let cp = ControlPlane::start(&bin, false);
    let mut docs = vec![vmtune(&vmtune_bin, &["dra", "classes", "--json"])];
    let mut checked = 0;
    for dir in ["topologies/hwloc", "topologies/sysfs", "vfio"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(testdata(dir))
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e != "md" && e != "py" && e != "txt")
            })
            .collect();
        paths.sort();
        for p in paths {
            for extra in [
                &["--gpus", "all"][..],
                &["--gpus", "vfio", "--cpu-groups", "l3"][..],
            ] {
                let mut args = vec!["dra", "slices", "--node-name", "node-1", "--topology"];
                let path = p.to_string_lossy().into_owned();
                args.push(&path);
                args.extend_from_slice(extra);
                let out = vmtune(&vmtune_bin, &args);
                if !out.success() && out.stderr.contains("lists no L3") {
                    continue; // a host without an L3 has no L3 groups to publish
                }
                assert!(out.success(), "{out}");
                docs.push(out);
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked} topologies' slices");
    for out in &docs {
        let list: Value = support::json(out);
        if list["items"].as_array().is_none_or(|i| i.is_empty()) {
            continue;
        }
        let r = cp.kubectl_in(
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            Some(&out.stdout),
        );
        assert!(
            r.success() && !r.stderr.contains("Warning"),
            "{}: the server refused it: {r}",
            out.line
        );
    }
    // and a broken one is refused: a device name that is not a DNS label
    let out = vmtune(
        &vmtune_bin,
        &["dra", "slices", "--node-name", "n", "--topology", "builtin"],
    );
    let broken = out.stdout.replacen("\"numa0\"", "\"NUMA_0\"", 1);
    assert_ne!(broken, out.stdout, "the builtin host has a numa0 group");
    let r = cp.kubectl_in(
        &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
        Some(&broken),
    );
    assert!(!r.success() && r.stderr.contains("NUMA_0"), "{r}");
}

// ------------------------------------------------------------------------------------------
// the scheduler

struct NodeUnderTest {
    name: &'static str,
    topology: PathBuf,
    gpus: &'static str,
    host: topo::Host,
}

/// A `vmtune dra publish` process, stopped when dropped.
struct Publisher(Child, PathBuf);

impl Drop for Publisher {
    fn drop(&mut self) {
        support::stop(&mut self.0);
    }
}

fn start_publisher(
    cp: &ControlPlane,
    vmtune_bin: &Path,
    n: &NodeUnderTest,
    token: &Path,
    state_dir: Option<&Path>,
) -> Publisher {
    let log = cp.dir.path().join(format!("publish-{}.log", n.name));
    let f = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(vmtune_bin);
    cmd.args(["dra", "publish", "--node-name", n.name, "--gpus", n.gpus])
        .arg("--topology")
        .arg(&n.topology)
        .arg("--server")
        .arg(&cp.server)
        .arg("--token-file")
        .arg(token)
        .arg("--ca-file")
        .arg(&cp.ca)
        .args(["--poll", "0.2", "--resync", "5"]);
    if let Some(d) = state_dir {
        cmd.arg("--status-file").arg(d.join("status.json"));
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .expect("vmtune dra publish");
    Publisher(child, log)
}

/// A token of the vmtune-dra ServiceAccount bound to a pod on `node` (so it carries the
/// node's name, which the admission policy checks).
fn node_token(cp: &ControlPlane, node: &str) -> PathBuf {
    let pod = format!("vmtune-dra-{node}");
    cp.apply(&format!(
        r#"{{"apiVersion": "v1", "kind": "Pod",
            "metadata": {{"name": "{pod}", "namespace": "vmtune-system"}},
            "spec": {{"nodeName": "{node}", "serviceAccountName": "vmtune-dra",
                     "containers": [{{"name": "publisher", "image": "vmtune.local/vmtune:0.1.0"}}]}}}}"#
    ));
    let out = cp.ok(&[
        "create",
        "token",
        "vmtune-dra",
        "-n",
        "vmtune-system",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        &pod,
        "--duration",
        "1h",
    ]);
    let path = cp.dir.path().join(format!("{node}.token"));
    std::fs::write(&path, out.stdout.trim()).unwrap();
    path
}

/// Until a server-side dry-run create of a slice on `node` by `token`'s bearer is refused
/// by the admission policy (it never lets one through: nothing is stored on a dry run).
fn wait_policy_enforced(cp: &ControlPlane, token: &Path, node: &str) {
    let slice = format!(
        r#"{{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {{"name": "policy-probe-{node}"}},
            "spec": {{"driver": "cpu.vmtune.io", "nodeName": "{node}",
                     "pool": {{"name": "{node}", "generation": 1, "resourceSliceCount": 1}},
                     "devices": []}}}}"#
    );
    wait_for(
        &format!("the admission policy refuses {node}'s slices to another node"),
        Duration::from_secs(60),
        || {
            let r = cp.kubectl_as(
                token,
                &["create", "--dry-run=server", "-f", "-"],
                Some(&slice),
            );
            (!r.success() && r.stderr.contains("may write only that node's")).then_some(())
        },
    );
}

/// The node's slices in the API server, by driver.
fn node_slices(cp: &ControlPlane, node: &str) -> BTreeMap<String, Value> {
    let list = cp.get_json(&["resourceslices"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["spec"]["nodeName"] == node)
        .map(|s| (s["spec"]["driver"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// `spec` without the generation (what `vmtune dra slices` and the server agree on).
fn spec_of(slice: &Value) -> Value {
    let mut s = slice["spec"].clone();
    s["pool"]["generation"] = Value::Null;
    s
}

/// What `vmtune dra slices` prints for the node, with CPUs/devices taken.
fn expected_slices(n: &NodeUnderTest, taken: &dra::Taken) -> BTreeMap<String, Value> {
    let mut opts = dra::Options::new(n.name);
    opts.gpus = if n.gpus == "all" {
        dra::GpuSelect::All
    } else {
        dra::GpuSelect::Vfio
    };
    opts.taken = taken.clone();
    dra::slices(&n.host, &opts)
        .unwrap()
        .slices
        .into_iter()
        .map(|s| (s.spec.driver.clone(), serde_json::to_value(&s).unwrap()))
        .collect()
}

/// Waits until the node's slices in the server are `want` (their specs), and answers the CPU
/// pool's generation.
fn wait_slices(
    cp: &ControlPlane,
    n: &NodeUnderTest,
    want: &BTreeMap<String, Value>,
    p: &Publisher,
) -> i64 {
    let mut last = BTreeMap::new();
    let ok = (0..300).find_map(|_| {
        last = node_slices(cp, n.name);
        let same = last.len() == want.len()
            && want
                .iter()
                .all(|(d, w)| last.get(d).is_some_and(|h| spec_of(h) == spec_of(w)));
        if same {
            return last[dra::CPU_DRIVER]["spec"]["pool"]["generation"].as_i64();
        }
        std::thread::sleep(Duration::from_millis(100));
        None
    });
    ok.unwrap_or_else(|| {
        panic!(
            "{}'s slices are not what `vmtune dra slices` says within 30 s:\nhave {}\nwant {}\npublisher log:\n{}",
            n.name,
            serde_json::to_string_pretty(&last).unwrap(),
            serde_json::to_string_pretty(want).unwrap(),
            std::fs::read_to_string(&p.1).unwrap_or_default()
        )
    })
}

/// A ResourceClaimTemplate for a GPU and `cpus` CPUs, on one NUMA node when `aligned`, and a
/// Guaranteed pod using it.
fn claim_pod(name: &str, cpus: u32, aligned: bool) -> String {
    let constraints = if aligned {
        r#", "constraints": [{"requests": ["gpu", "cpus"], "matchAttribute": "resource.kubernetes.io/numaNode"}]"#
    } else {
        ""
    };
    format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
          {{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {{"name": "{name}", "namespace": "default"}},
            "spec": {{"spec": {{"devices": {{
              "requests": [
                {{"name": "gpu", "exactly": {{"deviceClassName": "vfio.vmtune.io", "count": 1}}}},
                {{"name": "cpus", "exactly": {{"deviceClassName": "cpu.vmtune.io",
                  "capacity": {{"requests": {{"cpu.vmtune.io/cpus": "{cpus}"}}}}}}}}
              ]{constraints}}}}}}}}},
          {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "default"}},
            "spec": {{
              "resourceClaims": [{{"name": "devices", "resourceClaimTemplateName": "{name}"}}],
              "containers": [{{"name": "work", "image": "registry.k8s.io/pause:3.10",
                "resources": {{"requests": {{"cpu": "{cpus}", "memory": "1Gi"}},
                              "limits": {{"cpu": "{cpus}", "memory": "1Gi"}},
                              "claims": [{{"name": "devices"}}]}}}}]}}}}]}}"#
    )
}

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Bound: the node, and the (request, device) pairs of its claim's allocation.
    Bound(String, Value),
    Unschedulable(String),
}

/// Waits until the scheduler has decided about the pod.
fn decision(cp: &ControlPlane, pod: &str) -> Outcome {
    wait_for(
        &format!("a decision on pod {pod}"),
        Duration::from_secs(60),
        || {
            let p = cp.get_json(&["pod", pod, "-n", "default"]);
            if let Some(node) = p["spec"]["nodeName"].as_str() {
                let claim =
                    p["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str()?;
                let c = cp.get_json(&["resourceclaim", claim, "-n", "default"]);
                let results = c["status"]["allocation"]["devices"]["results"].clone();
                return Some(Outcome::Bound(node.to_string(), results));
            }
            let cond = p["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")?
                .clone();
            Some(Outcome::Unschedulable(
                cond["message"].as_str()?.to_string(),
            ))
        },
    )
}

/// The published device `device` of `driver` on `node`.
fn device(cp: &ControlPlane, node: &str, driver: &str, device: &str) -> Value {
    let s = node_slices(cp, node);
    s[driver]["spec"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == device)
        .cloned()
        .unwrap_or_else(|| panic!("{driver}/{node}/{device} is not published"))
}

/// The NUMA nodes of a bound pod's GPU and CPU group, and the CPUs it consumed.
fn placement(cp: &ControlPlane, node: &str, results: &Value) -> (i64, i64, String) {
    let mut gpu_numa = None;
    let mut cpu_numa = None;
    let mut consumed = String::new();
    for r in results.as_array().expect("allocation results") {
        assert_eq!(r["pool"], node);
        let d = device(
            cp,
            node,
            r["driver"].as_str().unwrap(),
            r["device"].as_str().unwrap(),
        );
        let numa = d["attributes"][dra::NUMA_NODE]["int"]
            .as_i64()
            .expect("numaNode");
        match r["request"].as_str() {
            Some("gpu") => gpu_numa = Some(numa),
            Some("cpus") => {
                cpu_numa = Some(numa);
                consumed = r["consumedCapacity"][dra::CPUS]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
            }
            other => panic!("request {other:?}"),
        }
    }
    (gpu_numa.unwrap(), cpu_numa.unwrap(), consumed)
}

fn bound(cp: &ControlPlane, pod: &str) -> (String, i64, i64, String) {
    match decision(cp, pod) {
        Outcome::Bound(node, results) => {
            let (g, c, consumed) = placement(cp, &node, &results);
            (node, g, c, consumed)
        }
        Outcome::Unschedulable(why) => panic!(
            "{pod} is unschedulable: {why}\nscheduler:\n{}",
            cp.log_tail("kube-scheduler", 40)
        ),
    }
}

fn unschedulable(cp: &ControlPlane, pod: &str) -> String {
    match decision(cp, pod) {
        Outcome::Unschedulable(why) => why,
        Outcome::Bound(node, r) => panic!("{pod} was bound to {node}: {r}"),
    }
}

fn delete_pod(cp: &ControlPlane, pod: &str) {
    let p = cp.get_json(&["pod", pod, "-n", "default"]);
    let claim = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .map(str::to_string);
    cp.ok(&[
        "delete",
        "pod",
        pod,
        "-n",
        "default",
        "--force",
        "--grace-period=0",
    ]);
    // the resourceclaim controller takes the pod off the claim it made for it and the claim
    // is deallocated (the garbage collector, not run here, would then delete it)
    if let Some(c) = claim {
        wait_for(&format!("claim {c} freed"), Duration::from_secs(60), || {
            let r = cp.kubectl(&["get", "resourceclaim", &c, "-n", "default", "-o", "json"]);
            if !r.success() {
                return r.stderr.contains("NotFound").then_some(());
            }
            let v: Value = serde_json::from_str(&r.stdout).ok()?;
            v["status"]["allocation"].is_null().then_some(())
        });
    }
}

#[test]
fn the_scheduler_binds_gpu_pods_where_they_align() {
    let test = "the_scheduler_binds_gpu_pods_where_they_align";
    let bin = match k8s_check_dir(&FIVE) {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    let vmtune_bin = match vmtune_binary() {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    let a = NodeUnderTest {
        name: "node-a",
        topology: testdata("topologies/hwloc/cts1-pascal.xml"),
        gpus: "all",
        host: topo::load_path(&testdata("topologies/hwloc/cts1-pascal.xml")).unwrap(),
    };
    let b = NodeUnderTest {
        name: "node-b",
        topology: testdata("vfio/desktop-pcie-healthy.tar.gz"),
        gpus: "vfio",
        host: topo::load_path(&testdata("vfio/desktop-pcie-healthy.tar.gz")).unwrap(),
    };
    let cp = ControlPlane::start(&bin, true);
    for n in [&a, &b] {
        cp.add_node(n.name, n.host.pus.len());
    }
    // what deploy/kubernetes-dra installs: the namespace, the publisher's ServiceAccount, its
    // RBAC and admission policy, the DeviceClasses
    let deploy = workspace_root().join("deploy");
    for f in [
        "kubernetes/namespace.yaml",
        "kubernetes-dra/serviceaccount.yaml",
        "kubernetes-dra/rbac.yaml",
        "kubernetes-dra/deviceclasses.yaml",
    ] {
        cp.ok(&["apply", "-f", &deploy.join(f).to_string_lossy()]);
    }
    let (token_a, token_b) = (node_token(&cp, a.name), node_token(&cp, b.name));
    let state_a = cp.dir.path().join("nri-state-a");
    std::fs::create_dir(&state_a).unwrap();
    let pub_a = start_publisher(&cp, &vmtune_bin, &a, &token_a, Some(&state_a));
    let pub_b = start_publisher(&cp, &vmtune_bin, &b, &token_b, None);
    let none = dra::Taken::default();
    let gen0 = wait_slices(&cp, &a, &expected_slices(&a, &none), &pub_a);
    wait_slices(&cp, &b, &expected_slices(&b, &none), &pub_b);

    // node-a's token cannot write node-b's slices (the admission policy of rbac.yaml). The
    // API server enforces a new policy a moment after it is created: wait for that with
    // server-side dry runs (admission runs, nothing is stored), then write for real.
    wait_policy_enforced(&cp, &token_a, b.name);
    let bt = b.topology.to_string_lossy().into_owned();
    let (ts, ca) = (
        token_a.to_string_lossy().into_owned(),
        cp.ca.to_string_lossy().into_owned(),
    );
    let out = vmtune(
        &vmtune_bin,
        &[
            "dra",
            "publish",
            "--once",
            "--node-name",
            "node-b",
            "--topology",
            &bt,
            "--taken-cpus",
            "2-3",
            "--server",
            &cp.server,
            "--token-file",
            &ts,
            "--ca-file",
            &ca,
        ],
    );
    assert!(
        !out.success() && out.stderr.contains("may write only that node's"),
        "{out}"
    );

    // the NRI agent on node-a places a Guaranteed container with node-a's first GPU and 32
    // CPUs, outside DRA: they go on the GPU's NUMA node, and the slices follow
    let gpu0 = a.host.gpus().next().unwrap().bdf.clone();
    let mut agent = nri::Agent::new(
        a.host.clone(),
        nri::Settings::default(),
        nri::devices::CdiRegistry::default(),
    )
    .unwrap();
    let mut shape = nri::replay::PodShape::guaranteed(32);
    shape.cdi_devices = vec![format!("vmtune.io/vfio={gpu0}")];
    let (xpod, xc) = nri::replay::generated(0, &shape);
    let placed = agent.create(&xpod, &xc).adjust.expect("placed").cpus;
    nri::report::write(&state_a, &nri::report::Status::of(&agent, true)).unwrap();
    let taken = dra::taken_outside_dra(&nri::report::Status::of(&agent, true));
    assert_eq!(taken.cpus, placed);
    assert!(taken.devices.contains(&gpu0), "{taken:?}");
    let want = expected_slices(&a, &taken);
    let gen1 = wait_slices(&cp, &a, &want, &pub_a);
    assert!(
        gen1 > gen0,
        "the pool's generation went up: {gen0} -> {gen1}"
    );
    let numa0 = |slices: &BTreeMap<String, Value>| -> i64 {
        slices[dra::CPU_DRIVER]["spec"]["devices"][0]["capacity"][dra::CPUS]["value"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = numa0(&expected_slices(&a, &none));
    let on_numa0 = placed
        .iter()
        .filter(|c| a.host.pu(*c).and_then(|p| p.numa) == Some(0))
        .count() as i64;
    assert_eq!(on_numa0, 32, "the container sits on its GPU's node");
    assert_eq!(numa0(&node_slices(&cp, a.name)), before - 32);
    assert!(before - 32 < 8, "node-a's GPU node keeps fewer than 8 CPUs");
    let gpus_now: Vec<String> = node_slices(&cp, a.name)[dra::GPU_DRIVER]["spec"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            d["attributes"][dra::PCI_BUS_ID]["string"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(gpus_now.len(), 1, "{gpus_now:?}");
    assert!(
        !gpus_now.contains(&gpu0),
        "the container's GPU is no longer offered"
    );

    // p1: a GPU and 8 CPUs on one NUMA node. node-a (72 CPUs, the scheduler's favourite) has
    // a GPU on node 0 but too few CPUs there: node-b (16 CPUs, 14 offered)
    cp.apply(&claim_pod("p1", 8, true));
    let (node, g, c, consumed) = bound(&cp, "p1");
    assert_eq!(
        (node.as_str(), g, c, consumed.as_str()),
        ("node-b", 0, 0, "8")
    );
    // p2: the same; node-b's CPUs are spent, node-a cannot align: unschedulable
    cp.apply(&claim_pod("p2", 8, true));
    let why = unschedulable(&cp, "p2");
    assert!(why.contains("cannot allocate all claims"), "{why}");
    // c1: the same claim without the constraint fits node-a, misaligned
    cp.apply(&claim_pod("c1", 8, false));
    let (node, g, c, _) = bound(&cp, "c1");
    assert_eq!(
        (node.as_str(), g, c),
        ("node-a", 0, 1),
        "GPU on node 0, CPUs on node 1"
    );
    delete_pod(&cp, "c1");
    // p1 goes: its claim is freed and p2 gets its devices
    let p1_devices = match decision(&cp, "p1") {
        Outcome::Bound(_, r) => r,
        o => panic!("{o:?}"),
    };
    delete_pod(&cp, "p1");
    let (node, g, c, _) = bound(&cp, "p2");
    assert_eq!((node.as_str(), g, c), ("node-b", 0, 0));
    let p2_devices = match decision(&cp, "p2") {
        Outcome::Bound(_, r) => r,
        o => panic!("{o:?}"),
    };
    let devs = |r: &Value| -> Vec<String> {
        r.as_array()
            .unwrap()
            .iter()
            .map(|x| x["device"].as_str().unwrap().to_string())
            .collect()
    };
    // node-b has two GPUs; p2 holds one and CPUs from the group p1 had
    assert!(devs(&p2_devices)
        .iter()
        .any(|d| devs(&p1_devices).contains(d)));
    // p3: nowhere to go until the exclusive container on node-a goes
    cp.apply(&claim_pod("p3", 8, true));
    unschedulable(&cp, "p3");
    agent.release(&xc, "remove", true);
    agent.remove_pod(&xpod);
    nri::report::write(&state_a, &nri::report::Status::of(&agent, true)).unwrap();
    let gen2 = wait_slices(&cp, &a, &expected_slices(&a, &none), &pub_a);
    assert!(gen2 > gen1);
    let (node, g, c, _) = bound(&cp, "p3");
    assert_eq!((node.as_str(), g, c), ("node-a", 0, 0));
    drop(pub_a);
    drop(pub_b);
}

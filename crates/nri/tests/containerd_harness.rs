//! The end-to-end harness alone (no NRI plugin connected): a real containerd in a temporary
//! directory runs a BestEffort busybox pod through CRI, the container's CPUs read back from its
//! cgroup and `/proc` are the whole machine's, containerd survives a restart with the container
//! still running, a Guaranteed pod's request reaches the OCI spec as the kubelet asks (with a
//! CDI device injected), and the teardown leaves no mount, process or cgroup behind. Also,
//! without root: the request builders against the kubelet's rules, and `deploy/oci-image.sh`.
//!
//! Needs root and the runtime built by `crates/nri/tests/e2e/build-runtime.sh`; skips by name
//! otherwise.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{ContainerSpec, Containerd, ContainerdOpts, PodSpec, Qos, Resources, BUSYBOX_IMAGE};

#[test]
fn requests_are_the_kubelets() {
    // cgroupfs parents by QoS class
    let g = PodSpec::guaranteed("g", 2, 256 << 20).uid("u1");
    assert_eq!(g.qos, Qos::Guaranteed);
    assert_eq!(g.cgroup_parent(), "/kubepods/podu1");
    let b = PodSpec::burstable("b", 500, Some(1500), None).uid("u2");
    assert_eq!(b.qos, Qos::Burstable);
    assert_eq!(b.cgroup_parent(), "/kubepods/burstable/podu2");
    let e = PodSpec::best_effort("e").uid("u3");
    assert_eq!(e.qos, Qos::BestEffort);
    assert_eq!(e.cgroup_parent(), "/kubepods/besteffort/podu3");

    // container resources
    let c = g.container("main").to_json(&g);
    let r = &c["linux"]["resources"];
    assert_eq!(r["cpu_period"], 100_000);
    assert_eq!(r["cpu_quota"], 200_000);
    assert_eq!(r["cpu_shares"], 2048);
    assert_eq!(r["memory_limit_in_bytes"], 256 << 20);
    assert_eq!(r["oom_score_adj"], -997);
    assert!(r.get("cpuset_cpus").is_none(), "{r}");
    let c = b.container("main").to_json(&b);
    let r = &c["linux"]["resources"];
    assert_eq!(
        (&r["cpu_shares"], &r["cpu_quota"]),
        (&512.into(), &150_000.into())
    );
    assert!(r.get("memory_limit_in_bytes").is_none());
    assert_eq!(
        r["oom_score_adj"], 999,
        "no memory request: 1000 - 0, at most 999"
    );
    let c = e.container("main").to_json(&e);
    let r = &c["linux"]["resources"];
    assert_eq!((&r["cpu_shares"], &r["cpu_quota"]), (&2.into(), &0.into()));
    assert_eq!(r["oom_score_adj"], 1000);
    assert_eq!(c["image"]["image"], BUSYBOX_IMAGE);
    assert_eq!(c["labels"]["io.kubernetes.container.name"], "main");
    assert_eq!(c["labels"]["io.kubernetes.pod.uid"], "u3");

    // shares and quota at their edges (MilliCPUToShares, milliCPUToQuota)
    let tiny = Resources::burstable(1, Some(5), None);
    assert_eq!((tiny.cpu_shares(), tiny.cpu_quota()), (2, 1000));
    let limit_only = Resources {
        cpu_limit_milli: Some(1500),
        memory_limit: Some(1 << 20),
        ..Resources::default()
    };
    assert_eq!(
        limit_only.qos(),
        Qos::Guaranteed,
        "requests default to limits"
    );
    assert_eq!(limit_only.cpu_shares(), 1536);

    // a pod's sandbox resources are its containers' sums
    let two = PodSpec::with_containers(
        "two",
        &[
            Resources::guaranteed(1, 1 << 20),
            Resources::guaranteed(2, 1 << 20),
        ],
    );
    assert_eq!(two.qos, Qos::Guaranteed);
    let p = two.to_json(Path::new("/logs"));
    assert_eq!(p["linux"]["resources"]["cpu_quota"], 300_000);
    assert_eq!(p["linux"]["resources"]["cpu_shares"], 3072);
    let mixed = PodSpec::with_containers(
        "mixed",
        &[Resources::guaranteed(1, 1 << 20), Resources::best_effort()],
    );
    assert_eq!(mixed.qos, Qos::Burstable);

    // host network: NODE namespaces in sandbox and container, no hostname
    let p = e.to_json(Path::new("/logs"));
    assert_eq!(
        p["linux"]["security_context"]["namespace_options"]["network"],
        2
    );
    assert!(p.get("hostname").is_none());
    assert_eq!(p["log_directory"], "/logs/default_e_u3");
    let c = e.container("main").to_json(&e);
    assert_eq!(
        c["linux"]["security_context"]["namespace_options"]["network"],
        2
    );
    let p = e.clone().host_network(false).to_json(Path::new("/logs"));
    assert_eq!(
        p["linux"]["security_context"]["namespace_options"]["network"],
        0
    );
    assert_eq!(p["hostname"], "e");

    // annotations, handler, CDI devices under the CRI's field name
    let a = PodSpec::best_effort("a")
        .annotation("vmtune.io/cpus", "2")
        .runtime_handler("kata");
    assert_eq!(
        a.to_json(Path::new("/l"))["annotations"]["vmtune.io/cpus"],
        "2"
    );
    assert_eq!(a.runtime_handler.as_deref(), Some("kata"));
    let c = ContainerSpec::new("gpu")
        .cdi_device("vendor.com/gpu=0")
        .annotation("k", "v")
        .to_json(&a);
    assert_eq!(c["CDI_devices"][0]["name"], "vendor.com/gpu=0");
    assert_eq!(c["annotations"]["k"], "v");
}

#[test]
fn oci_images_are_reproducible_and_importable_shapes() {
    let test = "oci_images_are_reproducible_and_importable_shapes";
    for tool in ["bash", "tar", "gzip", "sha256sum", "jq"] {
        if testkit::which(tool).is_none() {
            return testkit::skip(test, format!("no {tool} on PATH"));
        }
    }
    let script = support::workspace_root().join("deploy/oci-image.sh");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let payload = tmp.path().join("agent");
    std::fs::write(&payload, "#!/bin/sh\necho hi\n").expect("write the payload");
    let conf = tmp.path().join("conf.json");
    std::fs::write(&conf, "{}\n").expect("write the config file");
    let build = |out: &Path| {
        let o = Command::new("bash")
            .arg(&script)
            .args(["--name", "vmtune.local/agent:0.1.0"])
            .args(["--entrypoint", r#"["/usr/bin/agent","run"]"#])
            .arg("--file")
            .arg(format!("{}:/usr/bin/agent:0755", payload.display()))
            .arg("--file")
            .arg(format!("{}:/etc/vmtune/conf.json", conf.display()))
            .args([
                "--symlink",
                "/bin/agent=../usr/bin/agent",
                "--env",
                "RUST_LOG=info",
            ])
            .arg("--out")
            .arg(out)
            .output()
            .expect("run deploy/oci-image.sh");
        assert!(
            o.status.success(),
            "oci-image.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let (a, b) = (tmp.path().join("a.tar"), tmp.path().join("b.tar"));
    build(&a);
    // a later mtime of the inputs must not change a byte
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&conf, "{}\n").expect("rewrite the config file");
    build(&b);
    let (ba, bb) = (
        std::fs::read(&a).expect("a.tar"),
        std::fs::read(&b).expect("b.tar"),
    );
    assert!(ba == bb, "two builds of the same inputs differ");

    let x = tmp.path().join("x");
    std::fs::create_dir(&x).expect("mkdir x");
    let ok = Command::new("tar")
        .arg("-xf")
        .arg(&a)
        .arg("-C")
        .arg(&x)
        .status()
        .expect("tar");
    assert!(ok.success());
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(x.join("index.json")).expect("index.json"))
            .expect("index.json is JSON");
    let m = &index["manifests"][0];
    assert_eq!(
        m["annotations"]["io.containerd.image.name"],
        "vmtune.local/agent:0.1.0"
    );
    assert_eq!(
        m["annotations"]["org.opencontainers.image.ref.name"],
        "0.1.0"
    );
    let blob = |digest: &serde_json::Value| {
        let d = digest.as_str().expect("a digest string");
        let hex = d.strip_prefix("sha256:").expect("a sha256 digest");
        x.join("blobs/sha256").join(hex)
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blob(&m["digest"])).expect("the manifest blob"))
            .expect("the manifest is JSON");
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(blob(&manifest["config"]["digest"])).expect("the config blob"),
    )
    .expect("the config is JSON");
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/bin/agent");
    assert_eq!(config["os"], "linux");
    let listing = Command::new("tar")
        .arg("-tvzf")
        .arg(blob(&manifest["layers"][0]["digest"]))
        .output()
        .expect("tar -t");
    let listing = String::from_utf8_lossy(&listing.stdout);
    let lines: Vec<&str> = listing.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("-rwxr-xr-x 0/0") && l.ends_with("usr/bin/agent")),
        "{listing}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("bin/agent -> ../usr/bin/agent")),
        "{listing}"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("-rw-r--r-- 0/0") && l.ends_with("etc/vmtune/conf.json")));
    assert!(
        lines.iter().all(|l| l.contains("1970-01-01 00:00")),
        "{listing}"
    );
}

#[test]
fn runs_a_best_effort_pod_restarts_and_cleans_up() {
    let test = "runs_a_best_effort_pod_restarts_and_cleans_up";
    let Some(rt) = support::runtime_or_skip(test) else {
        return;
    };
    let _host = testkit::host_lock();
    let tmp = tempfile::Builder::new()
        .prefix("vmtune-nri-")
        .tempdir_in("/tmp")
        .expect("a temporary directory");
    let dir = tmp.path().canonicalize().expect("the temporary directory");
    let online = support::online_cpus().expect("the online CPUs");

    let t = Instant::now();
    let mut ctd =
        Containerd::start(&rt, &dir, ContainerdOpts::default()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "containerd up with both images in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        ctd.nri_socket().exists(),
        "no NRI socket at {}",
        ctd.nri_socket().display()
    );
    assert!(
        std::fs::read_to_string(ctd.log_path())
            .unwrap_or_default()
            .contains("created NRI interface"),
        "containerd's log does not say NRI is up:\n{}",
        ctd.log_tail(20)
    );

    let pod = PodSpec::best_effort("harness");
    let t = Instant::now();
    let pod_id = ctd.run_pod(&pod).unwrap_or_else(|e| panic!("{e}"));
    let sleeper = pod.container("sleep");
    let c1 = ctd
        .run_container(&pod_id, &sleeper, &pod)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "pod and container running in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let cs = ctd.cpuset_of(&c1).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cs:#?}");
    assert_eq!(
        cs.cgroups_path,
        format!("{}/{c1}", pod.cgroup_parent()),
        "the cgroupfs driver's path is the pod's cgroup parent and the container id"
    );
    let v1 = cs.v1.as_ref();
    let v2 = cs.v2.as_ref();
    assert!(
        v1.is_some() || v2.is_some(),
        "no cgroup hierarchy found: {cs:?}"
    );
    if let Some(v1) = v1 {
        assert!(
            v1.dir.ends_with(cs.cgroups_path.trim_start_matches('/')),
            "{} is not the cgroups path {}",
            v1.dir.display(),
            cs.cgroups_path
        );
    }
    let cpus = cs.agreed().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpus, online, "a BestEffort container may run on every CPU");
    assert_eq!(ctd.pid(&c1).unwrap_or_else(|e| panic!("{e}")), cs.pid);

    // a restart keeps the container running, and CRI works again afterwards
    let t = Instant::now();
    ctd.restart().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("containerd restarted in {:.2} s", t.elapsed().as_secs_f64());
    assert!(ctd.nri_socket().exists());
    assert_eq!(
        ctd.pid(&c1).unwrap_or_else(|e| panic!("{e}")),
        cs.pid,
        "the container survived"
    );
    let c2 = ctd
        .run_container(&pod_id, &pod.container("second"), &pod)
        .unwrap_or_else(|e| panic!("{e}"));
    let cs2 = ctd.cpuset_of(&c2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cs2.agreed().unwrap_or_else(|e| panic!("{e}")), online);
    assert_eq!(
        ctd.containers().unwrap_or_else(|e| panic!("{e}")).len(),
        2,
        "both containers listed"
    );

    // a Guaranteed pod: its cgroup parent and CFS values reach the OCI spec as the kubelet
    // asks, its CPUs (no plugin) are still all of them; a CDI device named in the container's
    // CDI_devices is injected from the spec directory
    let cdi_spec = serde_json::json!({
        "cdiVersion": "0.6.0",
        "kind": "vmtune.test/dev",
        "devices": [{"name": "a", "containerEdits": {"env": ["VMTUNE_CDI=a"]}}],
    });
    let spec_file = ctd.cdi_spec_dir().join("vmtune-test.json");
    std::fs::write(&spec_file, cdi_spec.to_string()).expect("write the CDI spec");
    let gpod = PodSpec::guaranteed("guaranteed", 1, 64 << 20);
    let gpod_id = ctd.run_pod(&gpod).unwrap_or_else(|e| panic!("{e}"));
    let g = ctd
        .run_container(
            &gpod_id,
            &gpod.container("main").cdi_device("vmtune.test/dev=a"),
            &gpod,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = ctd.inspect(&g).unwrap_or_else(|e| panic!("{e}"));
    let linux = &spec["info"]["runtimeSpec"]["linux"];
    assert_eq!(
        linux["cgroupsPath"],
        format!("/kubepods/pod{}/{g}", gpod.uid)
    );
    assert_eq!(linux["resources"]["cpu"]["quota"], 100_000, "{linux}");
    assert_eq!(linux["resources"]["cpu"]["period"], 100_000);
    assert_eq!(linux["resources"]["cpu"]["shares"], 1024);
    assert_eq!(linux["resources"]["memory"]["limit"], 64 << 20);
    let env = spec["info"]["runtimeSpec"]["process"]["env"].to_string();
    assert!(
        env.contains("VMTUNE_CDI=a"),
        "the CDI device was not injected: {env}"
    );
    let gcs = ctd.cpuset_of(&g).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gcs.agreed().unwrap_or_else(|e| panic!("{e}")), online);

    // the CRI teardown the kubelet does
    let t = Instant::now();
    for c in [&c1, &c2, &g] {
        ctd.stop_container(c).unwrap_or_else(|e| panic!("{e}"));
        ctd.remove_container(c).unwrap_or_else(|e| panic!("{e}"));
    }
    for p in [&pod_id, &gpod_id] {
        ctd.stop_pod(p).unwrap_or_else(|e| panic!("{e}"));
        ctd.remove_pod(p).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(ctd.pods().unwrap_or_else(|e| panic!("{e}")).is_empty());
    let t_stop = Instant::now();
    ctd.stop().unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "pods removed in {:.2} s, containerd stopped in {:.2} s",
        (t_stop - t).as_secs_f64(),
        t_stop.elapsed().as_secs_f64()
    );

    // nothing left: mounts, shims, pod cgroups; the directory removes cleanly
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(dir.to_string_lossy().as_ref()))
        .map(str::to_string)
        .collect();
    assert!(mounts.is_empty(), "still mounted: {mounts:#?}");
    let sock = ctd.grpc_socket().display().to_string();
    let shims: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("containerd-shim") && c.contains(&sock))
        .collect();
    assert!(shims.is_empty(), "shims left: {shims:#?}");
    for parent in [pod.cgroup_parent(), gpod.cgroup_parent()] {
        for h in ["cpuset", "memory", "cpu", "pids", "unified", ""] {
            let d = Path::new("/sys/fs/cgroup")
                .join(h)
                .join(parent.trim_start_matches('/'));
            assert!(!d.exists(), "{} is left", d.display());
        }
    }
    drop(ctd);
    tmp.close().expect("the temporary root removes cleanly");
}

//! The agent's Kubernetes deployment (`deploy/kubernetes`) and its image (`deploy/image.sh`):
//!
//! - without anything: the manifests read as the agent's settings say (every host directory
//!   the DaemonSet mounts is one the agent's config names or documents, and each one the
//!   config names is mounted, at the same path), the ConfigMap's `nri.toml` is accepted by
//!   the agent (`vmtune nri replay /dev/null --config ...`, and a misspelt key is not), and
//!   the pod runs as the comments say (root without capabilities, read-only root, no token);
//! - a real kube-apiserver accepts them (`deploy/check/dry-run.sh`, with the binaries built
//!   by `deploy/check/build-apiserver.sh`) and rejects a broken copy;
//! - as root, with the runtime of `crates/nri/tests/e2e/build-runtime.sh`: the image that
//!   `deploy/image.sh` makes imports into containerd (`ctr images import`, seen by CRI under
//!   the DaemonSet's image name), its `vmtune --version` runs, and the agent in it, run with
//!   the DaemonSet's command, config, mounts and confinement (root without capabilities, a
//!   read-only root, seccomp, containerd's default masked paths as the kubelet asks for them:
//!   `/proc/interrupts` is an empty file in the container), connects to containerd's NRI
//!   socket, sees the host vmtune sees outside it, and stops on SIGTERM within the grace
//!   period.
//!
//! The vmtune binary is built with `cargo build -p vmtune` (a no-op when it is up to date),
//! or taken from `$VMTUNE_BIN`; the image is made of it stripped of its debug information.
//! Skips by name what cannot run here.

mod support;

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{workspace_root, Containerd, ContainerdOpts, Runtime};

/// The environment variable naming the directory of etcd, kube-apiserver and kubectl (what
/// `deploy/check/build-apiserver.sh DIR` built).
const K8S_CHECK_ENV: &str = "VMTUNE_K8S_CHECK";
/// A vmtune binary to use instead of building one.
const VMTUNE_BIN_ENV: &str = "VMTUNE_BIN";

// ------------------------------------------------------------------------------------------
// the static checks

#[test]
fn kustomization_lists_every_manifest() {
    let mut listed = resources();
    listed.sort();
    let mut files: Vec<String> = std::fs::read_dir(deploy_dir())
        .expect("deploy/kubernetes")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    assert_eq!(listed, files, "kustomization.yaml's resources");
    for o in manifests() {
        let kind = o["kind"].as_str().unwrap_or("?");
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"], "vmtune",
            "{kind} is labelled"
        );
        if kind != "Namespace" {
            assert_eq!(
                o["metadata"]["namespace"], "vmtune-system",
                "{kind}'s namespace"
            );
        }
    }
    // the pods mount host directories: the namespace must allow it whatever the cluster's
    // Pod Security defaults
    let ns = object("Namespace");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
}

#[test]
fn config_keys_are_the_agents() {
    let text = config_text();
    let file = nri::config::FileConfig::parse(&text).expect("the ConfigMap's nri.toml");
    assert_eq!(
        file.socket.as_deref(),
        Some(Path::new("/var/run/nri/nri.sock"))
    );
    assert_eq!(file.name.as_deref(), Some("vmtune"));
    assert_eq!(file.index.as_deref(), Some("90"));
    assert_eq!(
        file.state_dir.as_deref(),
        Some(Path::new("/var/run/vmtune-nri"))
    );
    assert_eq!(
        file.cdi_dirs,
        Some(vec![
            PathBuf::from("/etc/cdi"),
            PathBuf::from("/var/run/cdi")
        ])
    );
    // the live host, through the node's /sys and /proc files mounted under /host (the
    // container's own /proc/interrupts is masked)
    assert_eq!(file.topology.as_deref(), Some(Path::new("/host")));
    // per node type: left to the user, and said so
    assert_eq!(file.reserved_cpus, None);
    assert!(
        text.contains("# reserved_cpus =") && text.contains("--reserved-cpus"),
        "nri.toml explains reserved_cpus:\n{text}"
    );
    // what the agent checks only when it connects
    nri_proto::conn::Options::new(
        file.socket.as_deref().unwrap_or(Path::new("")),
        file.name.as_deref().unwrap_or(""),
        file.index.as_deref().unwrap_or(""),
    )
    .check()
    .expect("name and index as the runtime wants them");
}

#[test]
fn the_agent_accepts_the_configmap() {
    let test = "the_agent_accepts_the_configmap";
    let vmtune = match vmtune_binary() {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let config = tmp.path().join("nri.toml");
    std::fs::write(&config, config_text()).expect("write nri.toml");
    let replay = |config: &Path| {
        let mut cmd = Command::new(&vmtune);
        cmd.args([
            "nri",
            "replay",
            "/dev/null",
            "--topology",
            "builtin",
            "--config",
        ])
        .arg(config);
        run(&mut cmd, Duration::from_secs(60))
    };
    let out = replay(&config);
    assert!(
        out.success(),
        "vmtune nri replay --config <the ConfigMap's nri.toml>: {out}"
    );
    assert!(out.stdout.contains("shared pool"), "{out}");

    // the same check refuses a misspelt key and a bad size
    for (bad, named) in [
        ("stirct = true\n", "stirct"),
        ("kata_default_memory = \"2X\"\n", "kata_default_memory"),
    ] {
        let text = config_text();
        let text = match bad.split_once(" = ") {
            Some((key, _)) if text.contains(&format!("\n{key} = ")) => text
                .lines()
                .map(|l| {
                    if l.starts_with(key) {
                        bad.trim_end()
                    } else {
                        l
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => format!("{text}{bad}"),
        };
        let broken = tmp.path().join("broken.toml");
        std::fs::write(&broken, text).expect("write broken.toml");
        let out = replay(&broken);
        assert!(
            !out.success() && out.stderr.contains(named),
            "{bad:?} is refused, naming {named}: {out}"
        );
    }
}

#[test]
fn host_paths_are_the_configs() {
    let text = config_text();
    let file = nri::config::FileConfig::parse(&text).expect("nri.toml");
    let ds = object("DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    let c = &containers[0];

    // what the config names (the container's paths: the host's own, mounted where they are)
    let socket_dir = file
        .socket
        .as_deref()
        .and_then(Path::parent)
        .expect("socket")
        .to_path_buf();
    let mut named: Vec<(PathBuf, bool, &str)> = vec![
        (socket_dir, true, "socket"),
        (
            file.state_dir.clone().expect("state_dir"),
            true,
            "state_dir",
        ),
    ];
    let cdi_dirs = file.cdi_dirs.clone().expect("cdi_dirs");
    named.extend(cdi_dirs.into_iter().map(|d| (d, false, "cdi_dirs")));
    // the topology: unset, the container's own /sys and /proc; a directory, the host's
    // sysfs and procfs files mounted under it, each at its own path below it
    let topology_root = match &file.topology {
        None => {
            named.push((
                PathBuf::from("/sys"),
                false,
                "topology (unset: the live host)",
            ));
            None
        }
        Some(t) => {
            assert!(
                t.extension().is_none(),
                "topology {} is a file: mount it and update this test",
                t.display()
            );
            Some(t.clone())
        }
    };

    let mounts = c["volumeMounts"].as_array().expect("volumeMounts");
    let mount_of = |volume: &str| -> &Value {
        mounts
            .iter()
            .find(|m| m["name"] == volume)
            .unwrap_or_else(|| panic!("volume {volume} is not mounted"))
    };
    let mut mounted = Vec::new();
    for v in spec["volumes"].as_array().expect("volumes") {
        let name = v["name"].as_str().expect("a volume's name");
        let m = mount_of(name);
        let at = PathBuf::from(m["mountPath"].as_str().expect("mountPath"));
        let read_only = m["readOnly"] == true;
        if let Some(path) = v["hostPath"]["path"].as_str() {
            let under_topology = topology_root
                .as_deref()
                .and_then(|root| at.strip_prefix(root).ok())
                .map(|rel| Path::new("/").join(rel));
            if let Some((_, writable, key)) = named.iter().find(|(p, _, _)| *p == at) {
                // the same path inside and outside, so the config's paths mean the same in
                // both, and `vmtune nri status` on the node finds the state directory
                assert_eq!(
                    Path::new(path),
                    at,
                    "volume {name} ({key}) is mounted where it is"
                );
                assert_eq!(
                    read_only,
                    !writable,
                    "{path} ({key}) is mounted {}",
                    if *writable { "read-write" } else { "read-only" }
                );
            } else if let Some(host) = under_topology {
                assert_eq!(
                    Path::new(path),
                    host,
                    "volume {name}: the host's {path} under the topology root is at its own path"
                );
                assert!(read_only, "{path} (topology) is mounted read-only");
                assert!(
                    path.starts_with("/sys") || path.starts_with("/proc/"),
                    "{path}: the topology loader reads sysfs and procfs"
                );
                assert!(
                    text.contains(&at.display().to_string()),
                    "nri.toml names {} where it sets topology:\n{text}",
                    at.display()
                );
            } else {
                panic!(
                    "hostPath {path} (volume {name}, at {}) is none of the config's: {named:?}",
                    at.display()
                );
            }
            mounted.push(at);
        } else if let Some(cm) = v["configMap"]["name"].as_str() {
            let configmap = object("ConfigMap");
            assert_eq!(configmap["metadata"]["name"], cm, "the ConfigMap's name");
            assert!(read_only, "the config is mounted read-only");
            let items: Vec<(String, String)> = v["configMap"]["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|i| (i["key"].to_string(), i["path"].to_string()))
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                items.is_empty() || items == [("\"nri.toml\"".into(), "\"nri.toml\"".into())],
                "the ConfigMap's nri.toml keeps its name: {items:?}"
            );
            let command = strings(&c["command"]);
            let arg = command
                .iter()
                .position(|a| a == "--config")
                .expect("--config");
            assert_eq!(
                Path::new(&command[arg + 1]),
                at.join("nri.toml"),
                "--config is the ConfigMap's nri.toml"
            );
        } else {
            panic!("volume {name} is neither a hostPath nor the ConfigMap: {v}");
        }
    }
    for (p, _, key) in &named {
        assert!(
            mounted.contains(p),
            "{} ({key} in nri.toml) is not mounted from the host",
            p.display()
        );
    }
    if let Some(root) = &topology_root {
        assert!(
            mounted.contains(&root.join("sys")),
            "the topology root {} has the host's /sys",
            root.display()
        );
    }
}

#[test]
fn the_pod_runs_as_the_comments_say() {
    let ds = object("DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    let version = workspace_version();
    assert_eq!(c["image"], format!("vmtune.local/vmtune:{version}"));
    assert_eq!(c["imagePullPolicy"], "Never", "imported with ctr");
    assert_eq!(
        strings(&c["command"]),
        ["/usr/bin/vmtune", "nri", "--config", "/etc/vmtune/nri.toml"]
    );
    let sc = &c["securityContext"];
    assert_eq!(
        sc["runAsUser"], 0,
        "root: the NRI socket's directory is 0700 root"
    );
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert!(sc["capabilities"]["add"].is_null(), "no capability added");
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        assert!(
            c[probe].is_null(),
            "{probe}: see the comment in daemonset.yaml on why the agent has none"
        );
    }
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert!(c["resources"]["limits"]["cpu"].is_null(), "no CPU limit");
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["priorityClassName"], "system-node-critical");
    assert_eq!(spec["tolerations"][0]["operator"], "Exists");
    assert!(spec["tolerations"][0]["key"].is_null(), "every taint");
    assert_eq!(spec["nodeSelector"]["vmtune.io/nri"], "true");
    let sa = object("ServiceAccount");
    assert_eq!(spec["serviceAccountName"], sa["metadata"]["name"]);
    assert_eq!(sa["automountServiceAccountToken"], false);
    let update = &ds["spec"]["updateStrategy"];
    assert_eq!(update["type"], "RollingUpdate");
    assert_eq!(update["rollingUpdate"]["maxUnavailable"], 1);
    assert_eq!(
        update["rollingUpdate"]["maxSurge"], 0,
        "never two agents on a node"
    );
    for o in manifests() {
        let kind = o["kind"].as_str().unwrap_or("?");
        assert!(
            !kind.contains("Role"),
            "{kind}: the agent never talks to the API server, RBAC grants it nothing"
        );
    }
}

// ------------------------------------------------------------------------------------------
// a real API server

#[test]
fn a_real_api_server_accepts_the_manifests() {
    let test = "a_real_api_server_accepts_the_manifests";
    let bin = match k8s_check_dir() {
        Ok(d) => d,
        Err(why) => return testkit::skip(test, why),
    };
    let mut cmd = Command::new("bash");
    cmd.arg(workspace_root().join("deploy/check/dry-run.sh"))
        .arg("--bin")
        .arg(&bin);
    let out = run(&mut cmd, Duration::from_secs(300));
    assert!(out.success(), "deploy/check/dry-run.sh: {out}");
    for expect in [
        "namespace/vmtune-system created (server dry run)",
        "serviceaccount/vmtune-nri created (server dry run)",
        "configmap/vmtune-nri created (server dry run)",
        "daemonset.apps/vmtune-nri created (server dry run)",
        "pod/vmtune-nri-template created (server dry run)",
        "OK: every object was accepted by kube-apiserver, and every broken copy rejected",
    ] {
        assert!(out.stdout.contains(expect), "no {expect:?} in: {out}");
    }
    assert!(!out.stdout.contains("Warning:"), "{out}");
}

/// The manifests read here as kubectl reads them: serde_yaml_ng reads YAML 1.2, kubectl
/// YAML 1.1, where `yes`, `on` or a mode like `0644` are not what they are in 1.2.
#[test]
fn the_yaml_reader_reads_as_kubectl_does() {
    let test = "the_yaml_reader_reads_as_kubectl_does";
    let bin = match k8s_check_dir() {
        Ok(d) => d,
        Err(why) => return testkit::skip(test, why),
    };
    const MARK: &str = "vmtune.io/yaml-check";
    for f in resources() {
        let path = deploy_dir().join(&f);
        // --local: the YAML as kubectl reads it, as JSON, with one annotation added
        let mut cmd = Command::new(bin.join("kubectl"));
        cmd.env("HOME", "/nonexistent")
            .args(["annotate", "--local", "-o", "json", "-f"])
            .arg(&path)
            .arg(format!("{MARK}=1"));
        let out = run(&mut cmd, Duration::from_secs(60));
        assert!(out.success(), "kubectl annotate --local: {out}");
        let mut theirs: Value = serde_json::from_str(&out.stdout).expect("kubectl's JSON");
        let meta = theirs["metadata"].as_object_mut().expect("metadata");
        let notes = meta["annotations"].as_object_mut().expect("annotations");
        notes.remove(MARK);
        if notes.is_empty() {
            meta.remove("annotations");
        }
        let mine = yaml_documents(&path).remove(0);
        assert_eq!(
            mine, theirs,
            "{f}: serde_yaml_ng's reading against kubectl's"
        );
    }
}

#[test]
fn a_real_api_server_rejects_a_broken_copy() {
    let test = "a_real_api_server_rejects_a_broken_copy";
    let bin = match k8s_check_dir() {
        Ok(d) => d,
        Err(why) => return testkit::skip(test, why),
    };
    // the manifests with one field the API does not have: a misspelt readOnly
    let tmp = tempfile::tempdir().expect("a temporary directory");
    for e in std::fs::read_dir(deploy_dir()).expect("deploy/kubernetes") {
        let e = e.expect("an entry");
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).expect("copy");
    }
    let ds = tmp.path().join("daemonset.yaml");
    let text = std::fs::read_to_string(&ds).expect("daemonset.yaml");
    assert!(text.contains("              readOnly: true\n"));
    std::fs::write(
        &ds,
        text.replacen(
            "              readOnly: true\n",
            "              readonly: true\n",
            1,
        ),
    )
    .expect("write");
    let mut cmd = Command::new("bash");
    cmd.arg(workspace_root().join("deploy/check/dry-run.sh"))
        .args(["--no-negative", "--bin"])
        .arg(&bin)
        .arg(tmp.path());
    let out = run(&mut cmd, Duration::from_secs(300));
    assert_eq!(out.code(), Some(1), "rejected (exit 1): {out}");
    assert!(
        out.stdout.contains("unknown field") && out.stdout.contains("readonly"),
        "the server names the field: {out}"
    );
    assert!(out.stdout.contains("FAILED"), "{out}");
}

// ------------------------------------------------------------------------------------------
// the image in containerd

#[test]
fn the_image_imports_and_runs_the_agent() {
    let test = "the_image_imports_and_runs_the_agent";
    if !testkit::is_root() {
        return testkit::skip(test, "needs root: runs containerd");
    }
    let rt = match Runtime::locate() {
        Ok(rt) => rt,
        Err(why) => return testkit::skip(test, why),
    };
    let vmtune = match vmtune_binary() {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    if testkit::which("ldd").is_none() {
        return testkit::skip(test, "no ldd: deploy/image.sh lists the libraries with it");
    }
    let _host = testkit::host_lock();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let ctd_dir = tempfile::tempdir().expect("a temporary directory");
    let version = workspace_version();
    let image = format!("vmtune.local/vmtune:{version}");

    // the image, from the debug binary stripped of its debug information
    let tar = tmp.path().join("vmtune.tar");
    let mut cmd = Command::new("bash");
    cmd.arg(workspace_root().join("deploy/image.sh"))
        .arg("--binary")
        .arg(&vmtune)
        .args(["--strip", "--out"])
        .arg(&tar);
    let t0 = Instant::now();
    let out = run(&mut cmd, Duration::from_secs(300));
    assert!(out.success(), "deploy/image.sh: {out}");
    assert!(out.stdout.contains(&image), "{out}");
    eprintln!(
        "deploy/image.sh: {} bytes in {:.1} s",
        std::fs::metadata(&tar).map_or(0, |m| m.len()),
        t0.elapsed().as_secs_f64()
    );

    let mut ctd =
        Containerd::start(&rt, ctd_dir.path(), ContainerdOpts::default()).expect("containerd");
    let sock = ctd.grpc_socket();
    let ctr = |args: &[&str]| {
        let mut cmd = Command::new(&rt.ctr);
        cmd.arg("-a").arg(&sock).args(["-n", "k8s.io"]).args(args);
        cmd
    };

    // import, as on a node; CRI (the kubelet's view) finds it by the DaemonSet's name
    let t0 = Instant::now();
    let out = run(
        ctr(&["images", "import"]).arg(&tar),
        Duration::from_secs(120),
    );
    assert!(out.success(), "ctr images import: {out}");
    eprintln!("ctr images import: {:.1} s", t0.elapsed().as_secs_f64());
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = ctd.crictl(&["inspecti", image.as_str()]) {
        assert!(Instant::now() < deadline, "CRI does not see {image}: {e}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let runc_root = ctd.dir().join("runc");
    let runc = |cmd: &mut Command| {
        cmd.arg("--runc-binary")
            .arg(&rt.runc)
            .arg("--runc-root")
            .arg(&runc_root);
    };
    // a cgroup of its own under the root, which runc removes with the container
    let cgroup = |id: &str| format!("/vmtune-deploy-test-{}-{id}", std::process::id());

    // the binary runs in it: the loader and libraries ldd listed are all it needs
    let mut cmd = ctr(&["run", "--rm", "--cgroup", &cgroup("version")]);
    runc(&mut cmd);
    cmd.args([&image, "vmtune-version", "/usr/bin/vmtune", "--version"]);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.success(), "ctr run {image} vmtune --version: {out}");
    assert_eq!(out.stdout.trim(), format!("vmtune {version}"), "{out}");

    // the agent as the DaemonSet runs it: its command, its config and its mounts (the NRI
    // socket's directory is this containerd's; the state and CDI directories temporary ones;
    // the host's files as they are, all read-only), root without capabilities, a read-only
    // root, the runtime's default seccomp profile; and containerd's default masked paths, as
    // the kubelet asks for them (/proc/interrupts among them)
    let ds = object("DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    let command = strings(&c["command"]);
    let file = nri::config::FileConfig::parse(&config_text()).expect("nri.toml");
    let etc = tmp.path().join("etc-vmtune");
    let state = tmp.path().join("state");
    let cdi = tmp.path().join("cdi");
    for d in [&etc, &state, &cdi] {
        std::fs::create_dir(d).expect("mkdir");
    }
    std::fs::write(etc.join("nri.toml"), config_text()).expect("nri.toml");
    let nri_dir = ctd.nri_socket().parent().expect("nri dir").to_path_buf();
    let mut binds = Vec::new();
    for m in c["volumeMounts"].as_array().expect("volumeMounts") {
        let v = spec["volumes"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["name"] == m["name"]))
            .expect("the mount's volume");
        let dst = m["mountPath"].as_str().expect("mountPath");
        let ro = m["readOnly"] == true;
        let src = if let Some(p) = v["hostPath"]["path"].as_str().map(Path::new) {
            if Some(p) == file.socket.as_deref().and_then(Path::parent) {
                nri_dir.clone()
            } else if Some(p) == file.state_dir.as_deref() {
                state.clone()
            } else if file.cdi_dirs.iter().flatten().any(|d| d == p) {
                cdi.clone()
            } else {
                assert!(
                    ro,
                    "{}: the test mounts the host's paths read-only only",
                    p.display()
                );
                p.to_path_buf()
            }
        } else {
            assert!(v["configMap"].is_object(), "{v}");
            etc.clone()
        };
        binds.push(format!(
            "type=bind,src={},dst={dst},options=rbind:{}",
            src.display(),
            if ro { "ro" } else { "rw" }
        ));
    }
    let log = tmp.path().join("agent.log");
    let mut cmd = ctr(&["run", "-d", "--read-only", "--seccomp", "-u", "0:0"]);
    runc(&mut cmd);
    cmd.args(["--cgroup", &cgroup("agent")])
        .arg("--log-uri")
        .arg(format!("file://{}", log.display()));
    for cap in DEFAULT_CAPS {
        cmd.args(["--cap-drop", cap]);
    }
    for b in &binds {
        cmd.arg("--mount").arg(b);
    }
    cmd.args([&image, "vmtune-agent"]).args(&command);
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.success(), "ctr run -d {image} {command:?}: {out}");
    let agent_log = || std::fs::read_to_string(&log).unwrap_or_default();

    let task = |ctr_args: &[&str]| run(&mut ctr(ctr_args), Duration::from_secs(30));
    let task_line = || {
        let out = task(&["task", "ls"]);
        out.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some("vmtune-agent"))
            .map(str::to_string)
    };
    // connected: status.json, written into the state directory through the mount
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let s = std::fs::read_to_string(state.join("status.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if let Some(s) = s.filter(|s| s["connected"] == true) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not connect within 30 s ({:?}); its log:\n{}",
            task_line(),
            agent_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // the host the agent sees in its container is the one vmtune sees on the host
    // (the same settings, the topology read at / instead of the mounts under /host)
    let mut cmd = Command::new(&vmtune);
    cmd.args(["nri", "replay", "/dev/null", "--json", "--topology", "/"])
        .arg("--config")
        .arg(etc.join("nri.toml"));
    let out = run(&mut cmd, Duration::from_secs(60));
    assert!(out.success(), "vmtune nri replay on the host: {out}");
    let here: Value = serde_json::from_str(&out.stdout).expect("replay's JSON");
    for key in ["housekeeping", "pool"] {
        assert_eq!(
            status[key], here["status"][key],
            "{key}: in the container ({}) and on the host ({})",
            status["host_source"], here["status"]["host_source"]
        );
    }
    assert!(state.join("metrics.prom").is_file(), "metrics.prom");
    let line = task_line().expect("the agent's task");
    let pid: u32 = line
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        proc_status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("?")
            .to_string()
    };
    assert_eq!(field("CapEff:"), "0000000000000000", "no capability");
    assert_eq!(field("CapPrm:"), "0000000000000000", "no capability");
    assert_eq!(field("Uid:").split_whitespace().next(), Some("0"), "root");

    // SIGTERM, as the kubelet stops it: gone within terminationGracePeriodSeconds
    let grace = Duration::from_secs(
        spec["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("terminationGracePeriodSeconds"),
    );
    let t0 = Instant::now();
    let out = task(&["task", "kill", "-s", "SIGTERM", "vmtune-agent"]);
    assert!(out.success(), "ctr task kill: {out}");
    while task_line().is_some_and(|l| l.contains("RUNNING")) {
        assert!(
            t0.elapsed() < grace,
            "the agent did not stop within {} s of SIGTERM; its log:\n{}",
            grace.as_secs(),
            agent_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "the agent stopped {:.2} s after SIGTERM",
        t0.elapsed().as_secs_f64()
    );
    let out = task(&["task", "delete", "vmtune-agent"]);
    assert!(out.success(), "ctr task delete: {out}");
    let out = task(&["container", "delete", "vmtune-agent"]);
    assert!(out.success(), "ctr container delete: {out}");
    let text = agent_log();
    assert!(
        text.contains("registered as 90-vmtune on /var/run/nri/nri.sock")
            && text.contains("stopped"),
        "the agent's log:\n{text}"
    );
    ctd.stop().expect("clean stop");
}

/// The capabilities containerd gives a container by default (its `oci` package's list): the
/// DaemonSet drops them all.
const DEFAULT_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

// ------------------------------------------------------------------------------------------
// helpers

fn deploy_dir() -> PathBuf {
    workspace_root().join("deploy/kubernetes")
}

/// The YAML documents of the file at `path` (`---` between them), as JSON values; an empty
/// document is none.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// The files the kustomization lists.
fn resources() -> Vec<String> {
    let k = yaml_documents(&deploy_dir().join("kustomization.yaml")).remove(0);
    strings(&k["resources"])
}

/// Every object of the kustomization, in its order.
fn manifests() -> Vec<Value> {
    resources()
        .iter()
        .flat_map(|f| yaml_documents(&deploy_dir().join(f)))
        .collect()
}

/// The one object of `kind`.
fn object(kind: &str) -> Value {
    let mut all: Vec<Value> = manifests()
        .into_iter()
        .filter(|o| o["kind"] == kind)
        .collect();
    assert_eq!(all.len(), 1, "one {kind}");
    all.remove(0)
}

/// The ConfigMap's `nri.toml`.
fn config_text() -> String {
    object("ConfigMap")["data"]["nri.toml"]
        .as_str()
        .expect("the ConfigMap has nri.toml")
        .to_string()
}

/// An array of strings (anything else is a test failure).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

/// `[workspace.package] version` of the workspace's Cargo.toml.
fn workspace_version() -> String {
    let text = std::fs::read_to_string(workspace_root().join("Cargo.toml")).expect("Cargo.toml");
    let doc: toml::Table = toml::from_str(&text).expect("Cargo.toml parses");
    doc["workspace"]["package"]["version"]
        .as_str()
        .expect("[workspace.package] version")
        .to_string()
}

/// The vmtune binary: `$VMTUNE_BIN`, else what `cargo build -p vmtune --bin vmtune` makes in
/// this build's target directory and profile (a no-op when it is up to date; cargo says where
/// the binary is). `Err` is a reason to skip with.
fn vmtune_binary() -> Result<PathBuf, String> {
    if let Some(b) = std::env::var_os(VMTUNE_BIN_ENV).filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(b));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(workspace_root()).args([
        "build",
        "-p",
        "vmtune",
        "--bin",
        "vmtune",
        "--message-format=json-render-diagnostics",
    ]);
    // the profile this test was built with: TARGET/PROFILE/deps/NAME-HASH
    let profile = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?.parent()?;
        dir.file_name()?.to_str().map(str::to_string)
    });
    if profile.as_deref() == Some("release") {
        cmd.arg("--release");
    }
    let out = run(&mut cmd, Duration::from_secs(1800));
    if out.code().is_none() && out.stderr.contains("cannot run") {
        return Err(format!(
            "no cargo to build vmtune with ({}); or set {VMTUNE_BIN_ENV}",
            out.stderr.trim()
        ));
    }
    assert!(out.success(), "cargo build -p vmtune: {out}");
    let exe = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "vmtune")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo build named no vmtune executable: {out}"));
    Ok(exe)
}

/// The directory of etcd, kube-apiserver and kubectl: `$VMTUNE_K8S_CHECK`, else `k8s-check`
/// in the cargo target directory. `Err` is a reason to skip with.
fn k8s_check_dir() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(d) = std::env::var_os(K8S_CHECK_ENV).filter(|d| !d.is_empty()) {
        tried.push(PathBuf::from(d));
    } else {
        if let Some(t) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
            tried.push(workspace_root().join(t).join("k8s-check"));
        }
        if let Ok(exe) = std::env::current_exe() {
            for up in exe.ancestors().skip(3).take(2) {
                tried.push(up.join("k8s-check"));
            }
        }
        tried.push(workspace_root().join("target/k8s-check"));
    }
    let complete = |d: &Path| {
        ["etcd", "kube-apiserver", "kubectl"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(d) = tried.iter().find(|d| complete(d)) {
        for tool in ["bash", "openssl", "jq"] {
            if testkit::which(tool).is_none() {
                return Err(format!(
                    "no {tool} on PATH: deploy/check/dry-run.sh needs it"
                ));
            }
        }
        return Ok(d.clone());
    }
    Err(format!(
        "etcd, kube-apiserver and kubectl are not built (looked in {}): run \
         deploy/check/build-apiserver.sh, or set {K8S_CHECK_ENV}",
        tried
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

use testkit::process::Ran;

/// Run `cmd` to completion, killed after `timeout` ([`testkit::process::run`]).
fn run(cmd: &mut Command, timeout: Duration) -> Ran {
    testkit::process::run(cmd, None, timeout)
}

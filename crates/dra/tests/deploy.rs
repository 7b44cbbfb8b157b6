//! deploy/kubernetes-dra: the publisher's DaemonSet, ServiceAccount, RBAC and admission
//! policy, the DeviceClasses, and example/'s pod with a claim for a GPU and 8 aligned CPUs.
//!
//! - without anything: the kustomization lists every manifest, each object is labelled, the
//!   DeviceClasses are `vmtune dra classes`' own, the DaemonSet reads the agent's ConfigMap
//!   and status.json where the agent's DaemonSet puts them, and the admission policy names
//!   the ServiceAccount the DaemonSet runs as;
//! - a real kube-apiserver (deploy/check/dry-run.sh) accepts the agent's and the driver's
//!   manifests rendered together, and the example.
//!
//! Skips by name what cannot run here. (That the RBAC and the policy let a node's publisher
//! write its own node's slices and no other's is seen in tests/scheduler.rs.)

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use support::{k8s_check_dir, run, workspace_root};

fn dir() -> PathBuf {
    workspace_root().join("deploy/kubernetes-dra")
}

fn docs(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

fn resources() -> Vec<String> {
    let k = &docs(&dir().join("kustomization.yaml"))[0];
    k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

fn manifests() -> Vec<Value> {
    resources()
        .iter()
        .flat_map(|r| docs(&dir().join(r)))
        .collect()
}

fn object(kind: &str) -> Value {
    let all: Vec<Value> = manifests()
        .into_iter()
        .filter(|o| o["kind"] == kind)
        .collect();
    assert_eq!(all.len(), 1, "one {kind}");
    all[0].clone()
}

#[test]
fn kustomization_lists_every_manifest_and_each_is_labelled() {
    let mut listed = resources();
    listed.sort();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    assert_eq!(listed, files);
    for o in manifests() {
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"], "vmtune",
            "{o}"
        );
        let cluster_scoped = ["ClusterRole", "ClusterRoleBinding", "DeviceClass"]
            .contains(&o["kind"].as_str().unwrap())
            || o["kind"]
                .as_str()
                .unwrap()
                .starts_with("ValidatingAdmissionPolicy");
        if !cluster_scoped {
            assert_eq!(o["metadata"]["namespace"], "vmtune-system", "{o}");
        }
    }
}

#[test]
fn the_device_classes_are_the_clis() {
    let mut have: Vec<dra::DeviceClass> = manifests()
        .into_iter()
        .filter(|o| o["kind"] == "DeviceClass")
        .map(|o| serde_json::from_value(o).unwrap())
        .collect();
    have.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut want = dra::classes();
    want.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    assert_eq!(have, want);
}

#[test]
fn the_publisher_reads_what_the_agent_writes() {
    let ds = object("DaemonSet");
    let spec = &ds["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    let cmd: Vec<&str> = c["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(&cmd[..3], ["/usr/bin/vmtune", "dra", "publish"]);
    let at = |flag: &str| cmd.iter().position(|a| *a == flag).map(|i| cmd[i + 1]);
    assert_eq!(at("--node-name"), Some("$(NODE_NAME)"));
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    // the agent's ConfigMap, mounted where --nri-config looks
    let config = at("--nri-config").expect("--nri-config");
    let mount = |path: &str| -> Value {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .cloned()
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    let m = mount(config);
    let vol = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == m["name"])
        .unwrap();
    assert_eq!(vol["configMap"]["name"], "vmtune-nri");
    // its state_dir (status.json) and topology, read-only
    let base = docs(&workspace_root().join("deploy/kubernetes/configmap.yaml"));
    let toml = base[0]["data"]["nri.toml"].as_str().unwrap();
    let file = nri::config::FileConfig::parse(toml).unwrap();
    let state = file.state_dir.unwrap();
    let m = mount(&state.to_string_lossy());
    assert_eq!(m["readOnly"], true);
    let vol = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == m["name"])
        .unwrap();
    assert_eq!(vol["hostPath"]["path"], state.to_string_lossy().as_ref());
    let topology = file.topology.unwrap();
    assert_eq!(
        mount(&topology.join("sys").to_string_lossy())["readOnly"],
        true
    );
    // the token is mounted (it writes slices), and the policy confines that ServiceAccount
    assert_ne!(spec["automountServiceAccountToken"], false);
    let sa = spec["serviceAccountName"].as_str().unwrap();
    let vap = object("ValidatingAdmissionPolicy");
    let cond = vap["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        cond.contains(&format!("system:serviceaccount:vmtune-system:{sa}")),
        "{cond}"
    );
    let binding = object("ClusterRoleBinding");
    assert_eq!(binding["subjects"][0]["name"], sa);
    // least RBAC: one rule, ResourceSlices only
    let role = object("ClusterRole");
    assert_eq!(role["rules"].as_array().unwrap().len(), 1);
    assert_eq!(
        role["rules"][0]["resources"],
        serde_json::json!(["resourceslices"])
    );
}

#[test]
fn a_real_api_server_accepts_the_manifests_and_the_example() {
    let test = "a_real_api_server_accepts_the_manifests_and_the_example";
    let bin = match k8s_check_dir(&["etcd", "kube-apiserver", "kubectl"]) {
        Ok(b) => b,
        Err(why) => return testkit::skip(test, why),
    };
    if testkit::which("jq").is_none() || testkit::which("bash").is_none() {
        return testkit::skip(
            test,
            "no jq or bash on PATH: deploy/check/dry-run.sh needs them",
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut all = String::new();
    for d in ["deploy/kubernetes", "deploy/kubernetes-dra"] {
        let out = run(
            Command::new(bin.join("kubectl"))
                .arg("kustomize")
                .arg(workspace_root().join(d)),
            None,
            Duration::from_secs(60),
        );
        assert!(out.success(), "{out}");
        all.push_str(&out.stdout);
        all.push_str("\n---\n");
    }
    let rendered = tmp.path().join("agent-and-dra.yaml");
    std::fs::write(&rendered, all).unwrap();
    let check = |args: &[&str], file: &std::path::Path| {
        let mut cmd = Command::new("bash");
        cmd.arg(workspace_root().join("deploy/check/dry-run.sh"))
            .arg("--bin")
            .arg(&bin)
            .args(args)
            .arg(file);
        let out = run(&mut cmd, None, Duration::from_secs(300));
        assert!(out.success(), "{out}");
        out
    };
    let out = check(&[], &rendered);
    for name in [
        "daemonset.apps/vmtune-dra",
        "validatingadmissionpolicy",
        "deviceclass.resource.k8s.io/cpu.vmtune.io",
    ] {
        assert!(out.stdout.contains(name), "{name}: {}", out.stdout);
    }
    let out = check(
        &["--no-negative"],
        &dir().join("example/gpu-and-8-cpus.yaml"),
    );
    assert!(
        out.stdout
            .contains("resourceclaimtemplate.resource.k8s.io/gpu-and-8-cpus created"),
        "{}",
        out.stdout
    );
}

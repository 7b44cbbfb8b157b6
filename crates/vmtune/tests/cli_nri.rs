//! `vmtune nri` against a real containerd 2.4 with NRI: the agent process connects to the
//! socket of a containerd started in a temporary root (crates/nri/tests/support), and CRI pods
//! made as the kubelet makes them — BestEffort, Burstable, Guaranteed with 1 and 2 CPUs, one
//! with a VFIO device named through a CDI spec from `vmtune cdi` — are created, started and
//! removed. After every step each container's cpuset, read back from its cgroup (v1 and v2
//! paths, where they have one) and from /proc/PID/status, equals the agent's decision in its
//! status file; shared containers follow the pool as exclusive ones come and go; a SIGKILL and
//! restart of the agent, and a restart of containerd, lose no allocation and double-book
//! nothing; a hung agent does not block a pod (containerd drops it after its request timeout
//! and the agent connects again); with --strict a container that cannot be placed is refused.
//!
//! This machine has 2 CPUs: the planner keeps one for the host, so one CPU can be a
//! container's own and a 2-CPU Guaranteed container finds no placement (it starts in the
//! shared pool, and is refused with --strict). Placement quality on large hosts is tested
//! without containerd (crates/nri/tests/agent.rs, replays on the shared topologies).
//!
//! Needs root and the runtime built by crates/nri/tests/e2e/build-runtime.sh (`.ci/run`
//! builds it); skips by name otherwise.

#[path = "../../nri/tests/support/mod.rs"]
mod support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Containerd, ContainerdOpts, PodSpec};
use topo::CpuSet;

const BIN: &str = env!("CARGO_BIN_EXE_vmtune");

/// The agent as a child process, its stderr in a file.
struct Agent {
    child: Option<Child>,
    state: PathBuf,
    log: PathBuf,
    args: Vec<String>,
}

impl Agent {
    fn start(dir: &Path, ctd: &Containerd, extra: &[&str]) -> Agent {
        let state = dir.join("agent");
        std::fs::create_dir_all(&state).expect("agent state dir");
        let mut args: Vec<String> = vec![
            "nri".into(),
            "--socket".into(),
            ctd.nri_socket().display().to_string(),
            "--state-dir".into(),
            state.display().to_string(),
            "--record".into(),
            dir.join("events.jsonl").display().to_string(),
            "--cdi-dir".into(),
            ctd.cdi_spec_dir().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut a = Agent {
            child: None,
            state,
            log: dir.join("agent.log"),
            args,
        };
        a.spawn();
        a
    }

    fn spawn(&mut self) {
        let _ = std::fs::remove_file(self.state.join("status.json"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("agent log");
        let child = Command::new(BIN)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start vmtune nri");
        self.child = Some(child);
        self.wait_connected(Duration::from_secs(20));
    }

    fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn status(&self) -> Value {
        let text = std::fs::read_to_string(self.state.join("status.json"))
            .unwrap_or_else(|e| panic!("status.json: {e}\nagent log:\n{}", self.log()));
        serde_json::from_str(&text).expect("status.json is JSON")
    }

    /// Waits until the agent has registered and synchronized (its status says connected).
    fn wait_connected(&self, limit: Duration) {
        let t = Instant::now();
        while t.elapsed() < limit {
            let ok = std::fs::read_to_string(self.state.join("status.json"))
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .is_some_and(|v| v["connected"] == true && self.log().contains("synchronize:"));
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the agent did not connect within {limit:?}:\n{}",
            self.log()
        );
    }

    /// Sends `sig` to the agent, if it runs (never to pid 0: that is our whole group).
    fn signal(&self, sig: i32) {
        let Some(pid) = self
            .child
            .as_ref()
            .map(|c| c.id() as i32)
            .filter(|&p| p > 0)
        else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid
        unsafe { libc::kill(pid, sig) };
    }

    fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
        if let Some(mut c) = self.child.take() {
            let t = Instant::now();
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "the agent did not stop on SIGTERM:\n{}",
                    self.log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The CPUs the agent gave `id` of its own, if it did.
    fn own(&self, id: &str) -> Option<CpuSet> {
        self.status()["allocations"]
            .as_array()?
            .iter()
            .find(|a| a["container_id"] == id)
            .map(|a| cpus(&a["cpus"]))
    }

    fn pool(&self) -> CpuSet {
        cpus(&self.status()["pool"])
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A CPU set as the status file has it (an array of CPU numbers).
fn cpus(v: &Value) -> CpuSet {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v} is not a CPU set: {e}"))
}

/// The container's cpuset as its cgroup and /proc show it, all readings agreeing.
fn actual(ctd: &Containerd, id: &str) -> CpuSet {
    let c = ctd.cpuset_of(id).expect("cpuset of the container");
    c.agreed()
        .unwrap_or_else(|e| panic!("{id}: its cgroup and /proc disagree: {e:?}"))
}

/// Waits until `id`'s cpuset is `want` (updates outside an event are asynchronous).
fn expect_cpus(ctd: &Containerd, agent: &Agent, id: &str, want: &CpuSet, what: &str) {
    let t = Instant::now();
    loop {
        let got = actual(ctd, id);
        if &got == want {
            return;
        }
        if t.elapsed() > Duration::from_secs(10) {
            panic!(
                "{what}: container {id} runs on {got}, the agent decided {want}\nagent log:\n{}",
                agent.log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every exclusive allocation is disjoint from the others, from the pool and from the
/// housekeeping CPUs, and each container runs where the agent says.
fn check_all(ctd: &Containerd, agent: &Agent, shared: &[&str], own: &[&str], what: &str) {
    let st = agent.status();
    let pool = cpus(&st["pool"]);
    let hk = cpus(&st["housekeeping"]);
    let mut seen = CpuSet::new();
    for a in st["allocations"].as_array().expect("allocations") {
        let c = cpus(&a["cpus"]);
        assert!(!c.intersects(&seen), "{what}: double-booked {c}: {st:#}");
        assert!(
            !c.intersects(&pool),
            "{what}: {c} is also in the pool {pool}"
        );
        assert!(
            !c.intersects(&hk),
            "{what}: {c} holds housekeeping CPUs {hk}"
        );
        seen = seen.union(&c);
    }
    for id in own {
        let want = agent
            .own(id)
            .unwrap_or_else(|| panic!("{what}: {id} holds no CPUs of its own: {st:#}"));
        expect_cpus(ctd, agent, id, &want, what);
    }
    for id in shared {
        assert!(
            agent.own(id).is_none(),
            "{what}: {id} should share the pool"
        );
        expect_cpus(ctd, agent, id, &pool, what);
    }
}

fn vfio_snapshot() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vfio/desktop-5.15-legacy.tar.gz")
}

#[test]
fn places_cri_pods_through_nri_and_survives_restarts() {
    let test = "places_cri_pods_through_nri_and_survives_restarts";
    let Some(rt) = support::runtime_or_skip(test) else {
        return;
    };
    let _host = testkit::host_lock();
    let tmp = tempfile::Builder::new()
        .prefix("nri")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let opts = ContainerdOpts {
        nri_request_timeout: Duration::from_secs(2),
        ..ContainerdOpts::default()
    };
    let mut ctd = Containerd::start(&rt, tmp.path(), opts).expect("containerd");

    // a CDI spec for a VFIO GPU, written by `vmtune cdi` (from a snapshot: this machine has none)
    let spec = ctd.cdi_spec_dir().join("vmtune.io-vfio.json");
    let out = Command::new(BIN)
        .args(["cdi", "--topology"])
        .arg(vfio_snapshot())
        .arg("--output")
        .arg(&spec)
        .output()
        .expect("vmtune cdi");
    assert!(
        out.status.success(),
        "vmtune cdi: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spec_json: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let gpu_name = format!(
        "{}={}",
        spec_json["kind"].as_str().unwrap(),
        spec_json["devices"][0]["name"].as_str().unwrap()
    );

    let mut agent = Agent::start(tmp.path(), &ctd, &[]);
    let all = support::online_cpus().expect("online CPUs");
    assert_eq!(agent.pool(), all, "no container holds CPUs yet");

    // BestEffort: the shared pool
    let be = PodSpec::best_effort("be");
    let be_pod = ctd.run_pod(&be).expect("BestEffort pod");
    let be_c = ctd
        .run_container(&be_pod, &be.container("main"), &be)
        .expect("BestEffort container");
    check_all(&ctd, &agent, &[&be_c], &[], "BestEffort");

    // Guaranteed, 1 CPU: a CPU of its own; the BestEffort container leaves it
    let g1 = PodSpec::guaranteed("g1", 1, 64 << 20);
    let g1_pod = ctd.run_pod(&g1).expect("Guaranteed pod");
    let g1_c = ctd
        .run_container(&g1_pod, &g1.container("main"), &g1)
        .expect("Guaranteed container");
    check_all(&ctd, &agent, &[&be_c], &[&g1_c], "Guaranteed 1 CPU");
    assert_eq!(agent.own(&g1_c).map(|c| c.len()), Some(1));
    assert!(agent.log().contains("placed CPUs"), "{}", agent.log());

    // Burstable: the pool
    let bu = PodSpec::burstable("bu", 250, Some(1000), None);
    let bu_pod = ctd.run_pod(&bu).expect("Burstable pod");
    let bu_c = ctd
        .run_container(&bu_pod, &bu.container("main"), &bu)
        .expect("Burstable container");
    check_all(&ctd, &agent, &[&be_c, &bu_c], &[&g1_c], "Burstable");

    // Guaranteed, 2 CPUs: no placement left on 2 CPUs; it starts in the pool, and says why
    let g2 = PodSpec::guaranteed("g2", 2, 64 << 20);
    let g2_pod = ctd.run_pod(&g2).expect("Guaranteed-2 pod");
    let g2_c = ctd
        .run_container(&g2_pod, &g2.container("main"), &g2)
        .expect("Guaranteed-2 container");
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c],
        &[&g1_c],
        "Guaranteed 2 CPUs",
    );
    assert!(
        agent.log().contains("no placement for its 2 CPUs"),
        "{}",
        agent.log()
    );

    // SIGKILL the agent and start it again: it adopts what it gave (its annotation), nothing moves
    let before = agent.status()["allocations"].clone();
    agent.kill9();
    agent.spawn();
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c],
        &[&g1_c],
        "after the agent's restart",
    );
    let after = agent.status();
    assert_eq!(
        after["allocations"].as_array().map(Vec::len),
        before.as_array().map(Vec::len)
    );
    assert_eq!(after["allocations"][0]["how"], "adopted", "{after:#}");
    assert_eq!(after["allocations"][0]["cpus"], before[0]["cpus"]);

    // restart containerd: the agent connects again and synchronizes; nothing lost or doubled
    ctd.restart().expect("containerd restart");
    agent.wait_connected(Duration::from_secs(30));
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c],
        &[&g1_c],
        "after containerd's restart",
    );
    assert!(agent.log().contains("disconnected"), "{}", agent.log());

    // the 1-CPU container stops and goes: its CPU back to the pool, shared containers follow
    ctd.stop_container(&g1_c).expect("stop");
    ctd.remove_container(&g1_c).expect("remove");
    ctd.stop_pod(&g1_pod).expect("stop pod");
    ctd.remove_pod(&g1_pod).expect("remove pod");
    assert_eq!(agent.pool(), all);
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c],
        &[],
        "after the 1-CPU container went",
    );

    // Guaranteed 1 CPU with a VFIO GPU named through the CDI spec: placed, the device named
    let gv = PodSpec::guaranteed("gv", 1, 64 << 20);
    let gv_pod = ctd.run_pod(&gv).expect("GPU pod");
    let gv_c = ctd
        .run_container(&gv_pod, &gv.container("main").cdi_device(&gpu_name), &gv)
        .expect("GPU container");
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c],
        &[&gv_c],
        "Guaranteed with a CDI device",
    );
    assert!(
        agent.log().contains(&format!("CDI device {gpu_name}")),
        "the decision names the container's CDI device:\n{}",
        agent.log()
    );
    let recorded =
        std::fs::read_to_string(tmp.path().join("events.jsonl")).expect("recorded events");
    assert!(
        recorded.contains(&gpu_name),
        "the recorded create carries the CDI device"
    );
    // crates/nri/tests/data/containerd-2.4.2.jsonl is such a recording (see its README)
    if let Some(to) = std::env::var_os("VMTUNE_NRI_KEEP_RECORDING") {
        std::fs::write(to, &recorded).expect("copy the recording");
    }

    // a hung agent does not block a pod: containerd drops it after its request timeout, the
    // container starts without it, and the agent connects again and puts it in the pool
    agent.signal(libc::SIGSTOP);
    let t = Instant::now();
    let late = PodSpec::best_effort("late");
    let late_pod = ctd.run_pod(&late).expect("pod while the agent hangs");
    let late_c = ctd
        .run_container(&late_pod, &late.container("main"), &late)
        .expect("container while the agent hangs");
    let blocked = t.elapsed();
    assert!(
        blocked < Duration::from_secs(15),
        "the pod waited {blocked:?}"
    );
    agent.signal(libc::SIGCONT);
    agent.wait_connected(Duration::from_secs(30));
    check_all(
        &ctd,
        &agent,
        &[&be_c, &bu_c, &g2_c, &late_c],
        &[&gv_c],
        "after the agent hung",
    );

    // --strict: a container that cannot be placed is refused, with the planner's reason
    agent.terminate();
    let mut strict = Agent::start(tmp.path(), &ctd, &["--strict"]);
    let g3 = PodSpec::guaranteed("g3", 2, 64 << 20);
    let g3_pod = ctd.run_pod(&g3).expect("pod");
    let err = ctd
        .create(&g3_pod, &g3.container("main"), &g3)
        .expect_err("--strict refuses a container with no placement");
    assert!(err.to_string().contains("vmtune nri (--strict)"), "{err}");
    check_all(
        &ctd,
        &strict,
        &[&be_c, &bu_c, &g2_c, &late_c],
        &[&gv_c],
        "with --strict",
    );

    strict.terminate();
    assert!(strict.log().contains("stopped"), "{}", strict.log());
    // for the reader of a --nocapture run: what the agent said
    eprintln!("--- the agent's log ---\n{}", strict.log());

    // the way back: --release-all puts every container on every CPU and exits
    let out = Command::new(BIN)
        .args(["nri", "--release-all", "--socket"])
        .arg(ctd.nri_socket())
        .output()
        .expect("vmtune nri --release-all");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("release-all: 5 of 5 containers back on every CPU"),
        "{said}"
    );
    for id in [&be_c, &bu_c, &g2_c, &late_c, &gv_c] {
        assert_eq!(actual(&ctd, id), all, "{id} after --release-all");
    }
    ctd.stop().expect("containerd stops cleanly");
}

/// Not a test: what the agent adds to containerd's create of a container, measured here with
/// containerd itself as the baseline. Rounds alternate between no plugin and the agent
/// connected; each round creates and starts BestEffort and 1-CPU Guaranteed containers
/// through crictl (the create's own time, crictl's process start included on both sides). Also
/// the agent's resident memory. `cargo test --release -p vmtune --test cli_nri -- --ignored
/// bench --nocapture`; the figures are in the README's performance section.
#[test]
#[ignore]
fn bench_create_with_and_without_the_agent() {
    let Some(rt) = support::runtime_or_skip("bench_create_with_and_without_the_agent") else {
        return;
    };
    let _host = testkit::host_lock();
    let tmp = tempfile::Builder::new()
        .prefix("nrib")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let mut ctd =
        Containerd::start(&rt, tmp.path(), ContainerdOpts::default()).expect("containerd");
    let mut agent: Option<Agent> = None;
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut n = 0;
    // round 0 warms containerd up and is not counted; then plugin-less and agent rounds alternate
    for round in 0..11 {
        let connected = round % 2 == 0 && round > 0;
        if connected && agent.is_none() {
            agent = Some(Agent::start(tmp.path(), &ctd, &[]));
        }
        if !connected {
            if let Some(mut a) = agent.take() {
                a.terminate();
            }
        }
        for _ in 0..2 {
            for spec in [
                PodSpec::best_effort(&format!("b{n}")),
                PodSpec::guaranteed(&format!("g{n}"), 1, 32 << 20),
            ] {
                n += 1;
                let pod = ctd.run_pod(&spec).expect("pod");
                let t = Instant::now();
                let id = ctd
                    .create(&pod, &spec.container("main"), &spec)
                    .expect("create");
                let dt = t.elapsed().as_secs_f64() * 1000.0;
                ctd.start_container(&id).expect("start");
                match (round, connected) {
                    (0, _) => {}
                    (_, true) => with.push(dt),
                    (_, false) => without.push(dt),
                }
                ctd.stop_container(&id).expect("stop");
                ctd.remove_container(&id).expect("remove");
                ctd.stop_pod(&pod).expect("stop pod");
                ctd.remove_pod(&pod).expect("remove pod");
            }
        }
    }
    let mut a = Agent::start(tmp.path(), &ctd, &[]);
    let pid = a.child.as_ref().map(|c| c.id()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mem: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
        .collect();
    a.terminate();
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.total_cmp(y));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (w, wlo, whi) = stats(&mut with);
    let (wo, wolo, wohi) = stats(&mut without);
    eprintln!(
        "crictl create, median [min-max] of {} each: {wo:.1} ms [{wolo:.1}-{wohi:.1}] without a plugin, {w:.1} ms [{wlo:.1}-{whi:.1}] with vmtune nri: {:.3}x; agent {}",
        with.len(),
        w / wo,
        mem.join(", ")
    );
    ctd.stop().expect("clean stop");
}

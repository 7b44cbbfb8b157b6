//! The agent's state and its answer to every event: a pure state machine over [`Pod`] and
//! [`Container`] values (no socket, no clock), so the service, the replay command, the tests
//! and the benchmarks drive the same code.
//!
//! ```text
//! synchronize ─► every container known; allocations adopted or placed; shared pool updated
//! create      ─► ask (QoS, CPUs) ─► exclusive: policy::place ─► cpuset.cpus/mems + reasons
//!                                   shared:    the pool
//!             └► updates for shared containers (the pool shrank)
//! update      ─► the container keeps its cpuset whatever the kubelet sends
//! stop/remove ─► CPUs back to the pool ─► updates for shared containers
//! ```
//!
//! Two creates never get the same CPUs: the service holds one lock around each event, and a
//! placement sees every allocation made before it as a tenant of the planner.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use topo::{CpuSet, Host};

use crate::ask::{ask, Ask};
use crate::devices::{resolve, CdiRegistry};
use crate::model::{Container, Pod, State};
use crate::policy::{self, Want};

/// Annotation the agent puts on a container it gave CPUs of its own: the CPUs. Read back at
/// synchronization to tell its own allocations from cpusets set by someone else.
pub const CPUS_ANNOTATION: &str = "vmtune.io/cpus";
/// Annotation with a Kata VM's emulator core kept beside its vCPUs.
pub const EMULATOR_ANNOTATION: &str = "vmtune.io/emulator-cpus";
/// Annotation on a container that asked for CPUs of its own and was started in the shared pool
/// because no placement fitted: the planner's reason. A restarted agent keeps it there, as the
/// running one does, instead of moving a running container when room has appeared since.
pub const SHARED_ANNOTATION: &str = "vmtune.io/shared-pool";

/// How the agent behaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Housekeeping CPUs (the kubelet's `--reserved-cpus`); `None`: the planner's choice.
    pub reserved_cpus: Option<CpuSet>,
    /// Fail the container's creation when no placement fits, instead of starting it in the
    /// shared pool.
    pub strict: bool,
    /// Runtime handlers starting with this are Kata Containers VMs.
    pub kata_runtime_prefix: String,
    /// Kata's `default_vcpus`: vCPUs a Kata VM has beside its containers' CPU limits.
    pub kata_default_vcpus: u32,
    /// Kata's `default_memory` in MiB: memory a Kata VM has beside its containers' limits.
    pub kata_default_memory_mib: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            reserved_cpus: None,
            strict: false,
            kata_runtime_prefix: "kata".into(),
            kata_default_vcpus: 1,
            kata_default_memory_mib: 2048,
        }
    }
}

/// CPUs given to one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub container_id: String,
    pub pod_id: String,
    /// `namespace/pod/container`.
    pub name: String,
    pub cpus: CpuSet,
    pub mems: Vec<u32>,
    /// A Kata VM's emulator core kept free for it.
    #[serde(default)]
    pub emulator_cpus: CpuSet,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    pub kata: bool,
    /// Of `cpus`, how many are the Kata VM's `default_vcpus` (the pod's first container holds
    /// them; 0 for every other container).
    #[serde(default)]
    pub default_vcpus: u32,
    /// `placed` (by this agent run), `adopted` (found at synchronization).
    pub how: String,
    pub reasons: Vec<String>,
}

/// A cpuset change for a container that already exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    pub container_id: String,
    pub cpus: CpuSet,
    pub mems: Option<Vec<u32>>,
}

/// What the container being created gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adjust {
    pub cpus: CpuSet,
    pub mems: Option<Vec<u32>>,
    pub annotations: BTreeMap<String, String>,
}

/// The agent's answer to one event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub adjust: Option<Adjust>,
    pub updates: Vec<Update>,
    /// Log lines, one per decision.
    pub log: Vec<String>,
    /// `--strict` and nothing fits: the container's creation fails with this.
    pub error: Option<String>,
}

/// How decisions ended, for the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub placed: u64,
    pub adopted: u64,
    pub shared: u64,
    pub released: u64,
    pub refused: BTreeMap<String, u64>,
    pub synchronizations: u64,
    pub updates_sent: u64,
}

/// One recent decision, for `vmtune nri status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub event: String,
    pub container: String,
    pub line: String,
}

#[derive(Debug, Clone)]
struct Tracked {
    container: Container,
    ask: Ask,
    /// The cpuset the container has now, as far as the agent knows.
    cpus: Option<CpuSet>,
}

/// The agent: host model, settings, and what containerd has told it.
#[derive(Clone)]
pub struct Agent {
    host: Host,
    settings: Settings,
    cdi: CdiRegistry,
    housekeeping: CpuSet,
    pods: BTreeMap<String, Pod>,
    containers: BTreeMap<String, Tracked>,
    allocations: BTreeMap<String, Allocation>,
    counters: Counters,
    recent: VecDeque<Decision>,
}

const RECENT: usize = 64;

impl Agent {
    /// An agent for `host`; fails when the housekeeping CPUs cannot be decided (a reserved
    /// set the host does not have, a host too small to keep any).
    pub fn new(host: Host, settings: Settings, cdi: CdiRegistry) -> Result<Agent, String> {
        let housekeeping = policy::housekeeping(&host, settings.reserved_cpus.as_ref())
            .map_err(|e| format!("cannot decide the housekeeping CPUs: {e}"))?;
        Ok(Agent {
            host,
            settings,
            cdi,
            housekeeping,
            pods: BTreeMap::new(),
            containers: BTreeMap::new(),
            allocations: BTreeMap::new(),
            counters: Counters::default(),
            recent: VecDeque::new(),
        })
    }

    pub fn host(&self) -> &Host {
        &self.host
    }
    pub fn housekeeping(&self) -> &CpuSet {
        &self.housekeeping
    }
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.allocations.values()
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn recent(&self) -> impl Iterator<Item = &Decision> {
        self.recent.iter()
    }
    pub fn cdi_problems(&self) -> &[String] {
        &self.cdi.problems
    }

    /// Every CPU no exclusive container or Kata emulator holds: what shared containers run on.
    pub fn pool(&self) -> CpuSet {
        let mut taken = CpuSet::new();
        for a in self.allocations.values() {
            taken = taken.union(&a.cpus).union(&a.emulator_cpus);
        }
        self.host.all_cpus().difference(&self.whole_cores(&taken))
    }

    /// Every PU of the cores `cpus` touch: a container of an odd number of CPUs on an SMT host
    /// holds its last core whole, the sibling idle (the planner's whole-core rule: it never
    /// puts anyone on it either), so shared containers stay off it.
    pub fn whole_cores(&self, cpus: &CpuSet) -> CpuSet {
        let cores: std::collections::BTreeSet<u32> = cpus
            .iter()
            .filter_map(|c| self.host.pu(c).map(|p| p.core))
            .collect();
        self.host
            .pus
            .iter()
            .filter(|p| cores.contains(&p.core))
            .map(|p| p.os_index)
            .collect::<CpuSet>()
            .union(cpus)
    }

    /// Containers that share the pool (not stopped, no CPUs of their own), by id.
    pub fn shared_containers(&self) -> impl Iterator<Item = &str> {
        self.containers
            .iter()
            .filter(|(id, t)| {
                t.container.state != State::Stopped && !self.allocations.contains_key(*id)
            })
            .map(|(id, _)| id.as_str())
    }

    fn name(&self, c: &Container) -> String {
        let pod = self.pods.get(&c.pod_id);
        let ns = pod
            .map(|p| p.namespace.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("-");
        let pn = pod
            .map(|p| p.name.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or(&c.pod_id);
        let cn = if c.name.is_empty() { &c.id } else { &c.name };
        format!("{ns}/{pn}/{cn}")
    }

    fn note(&mut self, event: &str, container: &str, line: String, out: &mut Outcome) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(Decision {
            event: event.into(),
            container: container.into(),
            line: line.clone(),
        });
        out.log.push(line);
    }

    fn tenants(&self) -> Vec<plan::Tenant> {
        self.allocations
            .values()
            .map(|a| plan::Tenant {
                name: a.name.clone(),
                cpus: a.cpus.union(&a.emulator_cpus),
                emulator_cpus: a.emulator_cpus.clone(),
                host_cpus: Some(self.housekeeping.clone()),
                devices: a.devices.clone(),
                hugepages: vec![],
                notes: vec![],
            })
            .collect()
    }

    /// Shared containers whose cpuset is not the pool get the pool; one log line says so.
    fn pool_updates(&mut self, skip: Option<&str>, event: &str, out: &mut Outcome) -> Vec<Update> {
        let pool = self.pool();
        let ids: Vec<String> = self.shared_containers().map(String::from).collect();
        let mut ups = Vec::new();
        for id in ids {
            if Some(id.as_str()) == skip {
                continue;
            }
            let Some(t) = self.containers.get_mut(&id) else {
                continue;
            };
            if t.cpus.as_ref() != Some(&pool) {
                t.cpus = Some(pool.clone());
                ups.push(Update {
                    container_id: id,
                    cpus: pool.clone(),
                    mems: None,
                });
            }
        }
        if !ups.is_empty() {
            let line = format!(
                "{event}: shared pool {pool}: {} shared container{} moved to it",
                ups.len(),
                if ups.len() == 1 { "" } else { "s" }
            );
            self.note(event, "", line, out);
        }
        self.counters.updates_sent += ups.len() as u64;
        ups
    }

    /// Places an exclusive container; `Err` is the planner's refusal.
    fn place(&mut self, c: &Container, a: &Ask, n: u32) -> Result<Allocation, String> {
        let name = self.name(c);
        let devices = resolve(&self.host, &self.cdi, &c.cdi_devices, &c.devices);
        let pod_has_vm = self
            .allocations
            .values()
            .any(|x| x.pod_id == c.pod_id && x.kata);
        let first_of_vm = a.kata && !pod_has_vm;
        let (cpus, workload, memory) = if first_of_vm {
            (
                n + self.settings.kata_default_vcpus,
                plan::Workload::Vm,
                a.memory_bytes.unwrap_or(0) + (self.settings.kata_default_memory_mib << 20),
            )
        } else {
            (n, plan::Workload::Container, a.memory_bytes.unwrap_or(0))
        };
        let want = Want {
            name: &name,
            cpus,
            memory_bytes: memory,
            devices: &devices.bdfs,
            workload,
        };
        let p = policy::place(&self.host, &want, &self.tenants(), Some(&self.housekeeping))
            .map_err(|e| e.to_string())?;
        let mut reasons = Vec::new();
        if first_of_vm {
            reasons.push(format!(
                "Kata VM: {n} CPUs of the container and default_vcpus {} (Kata sizes the VM to their sum and pins vCPU i to the i-th CPU of the cpuset when the counts are equal)",
                self.settings.kata_default_vcpus
            ));
        } else if a.kata {
            reasons.push(format!("Kata VM: {n} more vCPU CPUs for the pod's VM"));
        }
        reasons.extend(
            devices
                .unresolved
                .iter()
                .map(|u| format!("{u}: placed without it")),
        );
        reasons.extend(p.reasons);
        Ok(Allocation {
            container_id: c.id.clone(),
            pod_id: c.pod_id.clone(),
            name,
            cpus: p.cpus,
            mems: p.mems,
            emulator_cpus: if first_of_vm {
                p.emulator_cpus
            } else {
                CpuSet::new()
            },
            devices: devices.bdfs,
            kata: a.kata,
            default_vcpus: if first_of_vm {
                self.settings.kata_default_vcpus
            } else {
                0
            },
            how: "placed".into(),
            reasons,
        })
    }

    fn refuse(&mut self, why: &str) {
        // the planner's refusal names the numbers; count by its first words
        let key = why
            .split(':')
            .next()
            .unwrap_or(why)
            .split_whitespace()
            .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
            .collect::<Vec<_>>()
            .join(" ");
        *self.counters.refused.entry(key).or_default() += 1;
    }

    fn adjust_for(a: &Allocation) -> Adjust {
        let mut annotations = BTreeMap::new();
        annotations.insert(CPUS_ANNOTATION.to_string(), a.cpus.to_list_string());
        if !a.emulator_cpus.is_empty() {
            annotations.insert(
                EMULATOR_ANNOTATION.to_string(),
                a.emulator_cpus.to_list_string(),
            );
        }
        Adjust {
            cpus: a.cpus.clone(),
            mems: (!a.mems.is_empty()).then(|| a.mems.clone()),
            annotations,
        }
    }

    fn decision_line(event: &str, al: &Allocation, ask: &Ask) -> String {
        let mems = if al.mems.is_empty() {
            "memory nodes unknown".to_string()
        } else {
            format!("mems {}", plan::memory::list(&al.mems))
        };
        let emu = if al.emulator_cpus.is_empty() {
            String::new()
        } else {
            format!(", emulator core {} kept free", al.emulator_cpus)
        };
        format!(
            "{event} {}: {} CPUs {}, {mems}{emu} ({}) — {}",
            al.name,
            al.how,
            al.cpus,
            ask.why,
            al.reasons.join("; ")
        )
    }

    /// A container is being created: what it gets, and the updates the pool change brings.
    pub fn create(&mut self, pod: &Pod, c: &Container) -> Outcome {
        let mut out = Outcome::default();
        self.pods
            .entry(pod.id.clone())
            .or_insert_with(|| pod.clone());
        // a create retried for the same id starts over
        self.allocations.remove(&c.id);
        let a = ask(pod, c, &self.settings.kata_runtime_prefix);
        let name = self.name(c);
        let mut track = Tracked {
            container: c.clone(),
            ask: a.clone(),
            cpus: None,
        };
        let mut refused = None;
        if let Some(n) = a.exclusive {
            match self.place(c, &a, n) {
                Ok(al) => {
                    self.counters.placed += 1;
                    let line = Self::decision_line("create", &al, &a);
                    self.note("create", &c.id, line, &mut out);
                    out.adjust = Some(Self::adjust_for(&al));
                    track.cpus = Some(al.cpus.clone());
                    self.allocations.insert(c.id.clone(), al);
                    self.containers.insert(c.id.clone(), track);
                    out.updates = self.pool_updates(Some(&c.id), "create", &mut out);
                    return out;
                }
                Err(why) => {
                    self.refuse(&why);
                    if self.settings.strict {
                        let line = format!("create {name}: refused ({}): {why}", a.why);
                        self.note("create", &c.id, line.clone(), &mut out);
                        out.error = Some(format!("vmtune nri (--strict): {name}: {why}"));
                        return out;
                    }
                    let line = format!(
                        "create {name}: shared pool {} — no placement for its {n} CPUs: {why}",
                        self.pool()
                    );
                    self.note("create", &c.id, line, &mut out);
                    refused = Some((SHARED_ANNOTATION.to_string(), why));
                }
            }
        } else {
            let line = format!("create {name}: shared pool {} ({})", self.pool(), a.why);
            self.note("create", &c.id, line, &mut out);
        }
        self.counters.shared += 1;
        let pool = self.pool();
        track.cpus = Some(pool.clone());
        self.containers.insert(c.id.clone(), track);
        out.adjust = Some(Adjust {
            cpus: pool,
            mems: None,
            annotations: refused.into_iter().collect(),
        });
        out
    }

    /// The kubelet (or anyone) updates a container's resources: it keeps the cpuset the agent
    /// gave it. `None`: nothing to say (a container the agent does not know).
    pub fn update(&mut self, c: &Container) -> Outcome {
        let mut out = Outcome::default();
        let Some(t) = self.containers.get(&c.id) else {
            return out;
        };
        let (cpus, mems) = match self.allocations.get(&c.id) {
            Some(al) => (
                al.cpus.clone(),
                (!al.mems.is_empty()).then(|| al.mems.clone()),
            ),
            None => match &t.cpus {
                Some(p) => (p.clone(), None),
                None => return out,
            },
        };
        out.updates.push(Update {
            container_id: c.id.clone(),
            cpus,
            mems,
        });
        out
    }

    /// A container stopped (or was removed): its CPUs go back to the pool, and the shared
    /// containers follow the pool.
    pub fn release(&mut self, c: &Container, event: &str, forget: bool) -> Outcome {
        let mut out = Outcome::default();
        if self.release_one(&c.id, event, forget, &mut out) {
            out.updates = self.pool_updates(None, event, &mut out);
        }
        out
    }

    /// Marks `id` stopped (or forgets it) and frees its CPUs; whether it held any.
    fn release_one(&mut self, id: &str, event: &str, forget: bool, out: &mut Outcome) -> bool {
        if let Some(t) = self.containers.get_mut(id) {
            t.container.state = State::Stopped;
        }
        if forget {
            self.containers.remove(id);
        }
        let Some(al) = self.allocations.remove(id) else {
            return false;
        };
        self.counters.released += 1;
        let mut line = format!("{event} {}: CPUs {} back to the pool", al.name, al.cpus);
        if !al.emulator_cpus.is_empty() {
            line.push_str(&format!(
                " with its VM's emulator core {}",
                al.emulator_cpus
            ));
        }
        self.note(event, id, line, out);
        // a Kata pod's later containers keep their CPUs; the VM's emulator core moves to one
        // of them if the first container goes before the pod
        self.rehome_emulator(&al);
        true
    }

    fn rehome_emulator(&mut self, gone: &Allocation) {
        if gone.emulator_cpus.is_empty() {
            return;
        }
        if let Some(next) = self
            .allocations
            .values_mut()
            .find(|x| x.pod_id == gone.pod_id && x.kata)
        {
            next.emulator_cpus = gone.emulator_cpus.clone();
        }
    }

    /// A container started: its state and pid, for the status.
    pub fn started(&mut self, c: &Container) {
        if let Some(t) = self.containers.get_mut(&c.id) {
            t.container.state = State::Running;
            t.container.pid = c.pid;
        }
    }

    pub fn run_pod(&mut self, pod: &Pod) {
        self.pods.insert(pod.id.clone(), pod.clone());
    }

    /// A pod is removed: its containers and their CPUs go.
    pub fn remove_pod(&mut self, pod: &Pod) -> Outcome {
        let ids: Vec<String> = self
            .containers
            .iter()
            .filter(|(_, t)| t.container.pod_id == pod.id)
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Outcome::default();
        for id in ids {
            self.release_one(&id, "remove-pod", true, &mut out);
        }
        self.pods.remove(&pod.id);
        out.updates = self.pool_updates(None, "remove-pod", &mut out);
        out
    }

    /// The way back: every running container on every CPU (and every memory node), the
    /// agent's allocations dropped. `vmtune nri --release-all` answers one Synchronize with
    /// this and exits, so that removing the agent leaves no container pinned.
    pub fn release_all(&mut self, containers: &[Container]) -> Outcome {
        let mut out = Outcome::default();
        let all = self.host.all_cpus();
        let mems: Vec<u32> = self.host.numa_nodes.iter().map(|n| n.os_index).collect();
        for c in containers.iter().filter(|c| c.state != State::Stopped) {
            if CpuSet::parse_list(&c.cpuset_cpus).is_ok_and(|s| s == all) {
                continue;
            }
            out.updates.push(Update {
                container_id: c.id.clone(),
                cpus: all.clone(),
                mems: (!mems.is_empty()).then(|| mems.clone()),
            });
        }
        self.allocations.clear();
        self.containers.clear();
        let line = format!(
            "release-all: {} of {} containers back on every CPU {all}",
            out.updates.len(),
            containers.len()
        );
        self.note("release-all", "", line, &mut out);
        self.counters.updates_sent += out.updates.len() as u64;
        out
    }

    /// Containerd's view after (re)connecting: every pod and container. Exclusive containers
    /// keep the CPUs they have when they are this agent's (its annotation matches their
    /// cpuset) or otherwise whole, free and off the housekeeping; the rest are placed now, and
    /// shared containers get the pool.
    pub fn synchronize(&mut self, pods: &[Pod], containers: &[Container]) -> Outcome {
        self.counters.synchronizations += 1;
        self.pods = pods.iter().map(|p| (p.id.clone(), p.clone())).collect();
        self.containers.clear();
        self.allocations.clear();
        let mut out = Outcome::default();
        let mut to_place = Vec::new();
        // adopt first (this agent's own allocations before anyone else's), then place
        let mut order: Vec<&Container> = containers
            .iter()
            .filter(|c| c.state != State::Stopped)
            .collect();
        order.sort_by_key(|c| (!c.annotations.contains_key(CPUS_ANNOTATION), c.id.clone()));
        for c in order {
            let pod = self.pods.get(&c.pod_id).cloned().unwrap_or_else(|| Pod {
                id: c.pod_id.clone(),
                ..Pod::default()
            });
            let a = ask(&pod, c, &self.settings.kata_runtime_prefix);
            let current = topo::CpuSet::parse_list(&c.cpuset_cpus)
                .ok()
                .filter(|s| !s.is_empty());
            self.containers.insert(
                c.id.clone(),
                Tracked {
                    container: c.clone(),
                    ask: a.clone(),
                    cpus: current.clone(),
                },
            );
            let Some(n) = a.exclusive else { continue };
            if let Some(why) = c
                .annotations
                .get(SHARED_ANNOTATION)
                .filter(|_| !c.annotations.contains_key(CPUS_ANNOTATION))
            {
                // refused at creation: it stays where it was started
                let line = format!(
                    "synchronize {}: kept in the shared pool — no placement for its {n} CPUs when it was created: {why}",
                    self.name(c)
                );
                self.note("synchronize", &c.id, line, &mut out);
                continue;
            }
            match current
                .as_ref()
                .and_then(|cur| self.adoptable(c, &a, n, cur))
            {
                Some(al) => {
                    self.counters.adopted += 1;
                    let line = Self::decision_line("synchronize", &al, &a);
                    self.note("synchronize", &c.id, line, &mut out);
                    self.allocations.insert(c.id.clone(), al);
                }
                None => to_place.push(c.clone()),
            }
        }
        for c in to_place {
            let Some(t) = self.containers.get(&c.id).cloned() else {
                continue;
            };
            let Some(n) = t.ask.exclusive else { continue };
            match self.place(&c, &t.ask, n) {
                Ok(al) => {
                    self.counters.placed += 1;
                    let line = Self::decision_line("synchronize", &al, &t.ask);
                    self.note("synchronize", &c.id, line, &mut out);
                    out.updates.push(Update {
                        container_id: c.id.clone(),
                        cpus: al.cpus.clone(),
                        mems: (!al.mems.is_empty()).then(|| al.mems.clone()),
                    });
                    if let Some(t) = self.containers.get_mut(&c.id) {
                        t.cpus = Some(al.cpus.clone());
                    }
                    self.allocations.insert(c.id.clone(), al);
                }
                Err(why) => {
                    self.refuse(&why);
                    let line = format!(
                        "synchronize {}: shared pool — no placement for its {n} CPUs: {why}",
                        self.name(&c)
                    );
                    self.note("synchronize", &c.id, line, &mut out);
                }
            }
        }
        self.counters.updates_sent += out.updates.len() as u64;
        let shared = self.pool_updates(None, "synchronize", &mut out);
        out.updates.extend(shared);
        out
    }

    /// The allocation a running exclusive container already has, if it can keep it: this
    /// agent's (the annotation names exactly its cpuset), or one of the right size that is
    /// free and off the housekeeping CPUs.
    fn adoptable(&self, c: &Container, a: &Ask, n: u32, cur: &CpuSet) -> Option<Allocation> {
        let ours = c
            .annotations
            .get(CPUS_ANNOTATION)
            .and_then(|s| CpuSet::parse_list(s).ok())
            .is_some_and(|s| &s == cur);
        let emulator = c
            .annotations
            .get(EMULATOR_ANNOTATION)
            .and_then(|s| CpuSet::parse_list(s).ok())
            .filter(|_| ours)
            .unwrap_or_default();
        let taken = self.allocations.values().fold(CpuSet::new(), |acc, x| {
            acc.union(&x.cpus).union(&x.emulator_cpus)
        });
        // a Kata VM's first container holds its own CPUs and the VM's default_vcpus
        let vm_size = if a.kata {
            n + self.settings.kata_default_vcpus
        } else {
            n
        };
        let fits = cur.is_subset(&self.host.all_cpus())
            && !cur.intersects(&taken)
            && !emulator.intersects(&taken)
            && !cur.intersects(&self.housekeeping)
            && (ours || cur.len() == n as usize || cur.len() == vm_size as usize);
        if !fits {
            return None;
        }
        let mems = CpuSet::parse_list(&c.cpuset_mems)
            .map(|m| m.to_vec())
            .unwrap_or_default();
        let devices = resolve(&self.host, &self.cdi, &c.cdi_devices, &c.devices);
        Some(Allocation {
            container_id: c.id.clone(),
            pod_id: c.pod_id.clone(),
            name: self.name(c),
            cpus: cur.clone(),
            mems,
            emulator_cpus: emulator,
            devices: devices.bdfs,
            kata: a.kata,
            default_vcpus: if a.kata && cur.len() == vm_size as usize {
                self.settings.kata_default_vcpus
            } else {
                0
            },
            how: "adopted".into(),
            reasons: vec![if ours {
                "its cpuset is the one this agent gave it (annotation vmtune.io/cpus)".into()
            } else {
                format!("its cpuset holds {n} free CPUs off the housekeeping CPUs: kept as it is")
            }],
        })
    }
}

//! The publisher: keeps one node's ResourceSlices in the API server. HTTPS with a bearer
//! token (the pod's ServiceAccount token, re-read before every sync since the kubelet rotates
//! it) through `ureq`; the API is `resource.k8s.io/v1` `resourceslices`: list the node's,
//! create the missing, replace the changed (their pool generation one above the old), delete
//! the ones no longer made. A slice already as wanted is not written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::objects::{ResourceSlice, ResourceSliceList};
use crate::{DraError, Republisher, CPU_DRIVER, GPU_DRIVER};

/// Where a pod finds its ServiceAccount's token and the cluster's CA.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `https://host:port`.
    pub server: String,
    /// A file holding the bearer token.
    pub token_file: PathBuf,
    /// PEM CA bundle the server's certificate must chain to.
    pub ca_file: PathBuf,
}

impl ClientConfig {
    /// The in-cluster configuration: `KUBERNETES_SERVICE_HOST`/`_PORT` and the mounted
    /// ServiceAccount token and CA.
    pub fn in_cluster() -> Result<ClientConfig, DraError> {
        let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
            DraError::Config(
                "KUBERNETES_SERVICE_HOST is not set: not in a pod (give --server, --token-file and --ca-file)"
                    .into(),
            )
        })?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let dir = Path::new(SERVICE_ACCOUNT_DIR);
        Ok(ClientConfig {
            server: format!("https://{host}:{port}"),
            token_file: dir.join("token"),
            ca_file: dir.join("ca.crt"),
        })
    }
}

/// An API server client.
pub struct Client {
    server: String,
    token_file: PathBuf,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(cfg: &ClientConfig) -> Result<Client, DraError> {
        let server = cfg.server.trim_end_matches('/').to_string();
        if !server.starts_with("https://") {
            return Err(DraError::Config(format!(
                "server {server:?} is not an https:// address"
            )));
        }
        let pem = std::fs::read(&cfg.ca_file)
            .map_err(|e| DraError::Config(format!("{}: {e}", cfg.ca_file.display())))?;
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.to_owned()),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(DraError::Config(format!(
                "{}: no PEM certificate in it",
                cfg.ca_file.display()
            )));
        }
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)))
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(Client {
            server,
            token_file: cfg.token_file.clone(),
            agent,
        })
    }

    fn token(&self) -> Result<String, DraError> {
        let t = std::fs::read_to_string(&self.token_file)
            .map_err(|e| DraError::Config(format!("{}: {e}", self.token_file.display())))?;
        let t = t.trim();
        if t.is_empty() {
            return Err(DraError::Config(format!(
                "{}: the token file is empty",
                self.token_file.display()
            )));
        }
        Ok(t.to_string())
    }

    /// One request; the body is JSON. Answers the status and the body read as `T` (2xx), or
    /// the API server's message.
    fn request<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<T, DraError> {
        let url = format!("{}{path}", self.server);
        let auth = format!("Bearer {}", self.token()?);
        let http = |e: ureq::Error| DraError::Http(format!("{method} {url}: {e}"));
        let mut resp = match (method, body) {
            ("GET", _) => self.agent.get(&url).header("Authorization", &auth).call(),
            ("DELETE", _) => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            ("POST", Some(b)) => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(b),
            ("PUT", Some(b)) => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(b),
            _ => return Err(DraError::Http(format!("{method} {url}: no body"))),
        }
        .map_err(http)?;
        let code = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().map_err(http)?;
        if !(200..300).contains(&code) {
            return Err(DraError::Api {
                method: method.into(),
                path: path.into(),
                code,
                message: api_message(&text),
            });
        }
        serde_json::from_str(&text)
            .map_err(|e| DraError::Http(format!("{method} {url}: unreadable answer: {e}")))
    }

    /// The node's slices of vmtune's drivers.
    pub fn node_slices(&self, node: &str) -> Result<Vec<ResourceSlice>, DraError> {
        let list: ResourceSliceList = self.request(
            "GET",
            &format!("{SLICES}?fieldSelector=spec.nodeName%3D{node}"),
            None,
        )?;
        Ok(list
            .items
            .into_iter()
            .filter(|s| s.spec.driver == GPU_DRIVER || s.spec.driver == CPU_DRIVER)
            .collect())
    }
}

/// The `message` of a Kubernetes `Status` answer, else the body itself (shortened).
fn api_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(300).collect())
        .replace('\n', " ")
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub created: Vec<String>,
    pub replaced: Vec<String>,
    pub deleted: Vec<String>,
    pub unchanged: Vec<String>,
    /// The pool generation of each driver's slices in the API server now.
    pub generations: BTreeMap<String, i64>,
}

impl SyncReport {
    pub fn wrote(&self) -> bool {
        !(self.created.is_empty() && self.replaced.is_empty() && self.deleted.is_empty())
    }

    pub fn line(&self) -> String {
        let gens: Vec<String> = self
            .generations
            .iter()
            .map(|(d, g)| format!("{d} generation {g}"))
            .collect();
        format!(
            "created {:?}, replaced {:?}, deleted {:?}, unchanged {:?} ({})",
            self.created,
            self.replaced,
            self.deleted,
            self.unchanged,
            gens.join(", ")
        )
    }
}

fn without_generation(s: &ResourceSlice) -> crate::objects::ResourceSliceSpec {
    let mut spec = s.spec.clone();
    spec.pool.generation = 0;
    spec
}

/// Makes the node's slices in the API server `want` (all of one node). A pool that changed
/// is written at one generation above the newest the server has (or `want`'s, if higher).
pub fn sync(client: &Client, node: &str, want: &[ResourceSlice]) -> Result<SyncReport, DraError> {
    let have = client.node_slices(node)?;
    let mut report = SyncReport::default();
    for driver in [GPU_DRIVER, CPU_DRIVER] {
        let have: Vec<&ResourceSlice> = have.iter().filter(|s| s.spec.driver == driver).collect();
        let want: Vec<&ResourceSlice> = want.iter().filter(|s| s.spec.driver == driver).collect();
        sync_pool(client, &have, &want, driver, &mut report)?;
    }
    Ok(report)
}

fn sync_pool(
    client: &Client,
    have: &[&ResourceSlice],
    want: &[&ResourceSlice],
    driver: &str,
    report: &mut SyncReport,
) -> Result<(), DraError> {
    let old_gen = have.iter().map(|s| s.spec.pool.generation).max();
    let same = have.len() == want.len()
        && want.iter().all(|w| {
            have.iter().any(|h| {
                h.metadata.name == w.metadata.name && without_generation(h) == without_generation(w)
            })
        });
    if same {
        report
            .unchanged
            .extend(want.iter().map(|w| w.metadata.name.clone()));
        if let Some(g) = old_gen {
            report.generations.insert(driver.into(), g);
        }
        return Ok(());
    }
    let want_gen = want
        .iter()
        .map(|s| s.spec.pool.generation)
        .max()
        .unwrap_or(1);
    let generation = old_gen.map_or(want_gen, |g| want_gen.max(g + 1));
    for w in want {
        let mut s = (*w).clone();
        s.spec.pool.generation = generation;
        let name = s.metadata.name.clone();
        let body = |s: &ResourceSlice| serde_json::to_string(s).unwrap_or_default();
        match have.iter().find(|h| h.metadata.name == name) {
            Some(h) => {
                s.metadata.resource_version = h.metadata.resource_version.clone();
                let _: serde_json::Value =
                    client.request("PUT", &format!("{SLICES}/{name}"), Some(body(&s)))?;
                report.replaced.push(name);
            }
            None => {
                let _: serde_json::Value = client.request("POST", SLICES, Some(body(&s)))?;
                report.created.push(name);
            }
        }
    }
    for h in have {
        if !want.iter().any(|w| w.metadata.name == h.metadata.name) {
            let name = &h.metadata.name;
            let _: serde_json::Value =
                client.request("DELETE", &format!("{SLICES}/{name}"), None)?;
            report.deleted.push(name.clone());
        }
    }
    if !want.is_empty() {
        report.generations.insert(driver.into(), generation);
    }
    Ok(())
}

/// How the publisher runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The NRI agent's `status.json`; `None`: no CPU is taken outside DRA.
    pub status_file: Option<PathBuf>,
    /// How often the status file is read.
    pub poll: Duration,
    /// How often the slices are checked against the API server even when nothing changed
    /// (a deleted or edited slice is put back).
    pub resync: Duration,
    /// One sync, then return.
    pub once: bool,
}

/// Publishes the republisher's slices, then follows the NRI agent's exclusive CPUs until
/// `stop` is set. A failed sync is logged and retried at the next poll; with `once`, it is
/// the error returned.
pub fn serve(
    client: &Client,
    mut rep: Republisher,
    opts: &ServeOptions,
    stop: &AtomicBool,
    mut log: impl FnMut(&str),
) -> Result<(), DraError> {
    let node = rep.node_name().to_string();
    let mut dirty = true;
    let mut last_sync: Option<Instant> = None;
    loop {
        if let Some(path) = &opts.status_file {
            match crate::taken_from_status_file(path) {
                Ok(taken) => {
                    if rep.taken_changed(&taken).is_some() {
                        log(&format!(
                            "taken outside DRA now: CPUs {}, devices {:?}: republishing",
                            taken.cpus, taken.devices
                        ));
                        dirty = true;
                    }
                }
                Err(e) if opts.once => return Err(e),
                Err(e) => log(&format!("{e}")),
            }
        }
        let due = last_sync.is_none_or(|t| t.elapsed() >= opts.resync);
        if dirty || due {
            match sync(client, &node, rep.current()) {
                Ok(r) => {
                    if let Some(g) = r.generations.values().max() {
                        rep.resume_from(*g);
                    }
                    if r.wrote() || last_sync.is_none() {
                        log(&format!("{node}: {}", r.line()));
                    }
                    dirty = false;
                    last_sync = Some(Instant::now());
                }
                Err(e) if opts.once => return Err(e),
                Err(e) => log(&format!("sync failed (retrying): {e}")),
            }
        }
        if opts.once {
            return Ok(());
        }
        let until = Instant::now() + opts.poll;
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100).min(opts.poll));
        }
    }
}

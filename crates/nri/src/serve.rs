//! The long-running agent: connect to the runtime's NRI socket, serve, and connect again
//! whenever the connection ends — containerd restarts, or drops a plugin that timed out —
//! until told to stop. Each new connection starts with a Synchronize, from which the agent
//! rebuilds its state; nothing of it needs to survive a restart of the agent.
//!
//! Updates that cannot go in an event's reply (after RemoveContainer) are sent by a thread of
//! their own once the handler has returned: the runtime holds its NRI lock for the whole event.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nri_proto::conn::{Closer, ConnError, Options, Session};
use nri_proto::nri as api;

use crate::agent::{Agent, Update};
use crate::convert;
use crate::replay::Event;
use crate::report::{self, Status};
use crate::service::{Service, Sink};

/// How to run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub conn: Options,
    /// Where `status.json` and `metrics.prom` go (`None`: nowhere).
    pub state_dir: Option<PathBuf>,
    /// Connect once and return when the connection ends (tests); otherwise reconnect.
    pub once: bool,
    /// How long to wait between tries while the socket is missing.
    pub retry: Duration,
    /// Move every container back to every CPU at the first Synchronize, then return.
    pub release_all: bool,
}

/// Logs to stderr and writes the state files.
pub struct StderrSink {
    pub state_dir: Option<PathBuf>,
    /// Where `--record` appends every event, one JSON line each.
    record: Option<Mutex<std::fs::File>>,
    pub connected: AtomicBool,
    /// Whether the last write of the state files failed (said once, not on every event).
    write_failed: AtomicBool,
}

impl StderrSink {
    pub fn new(state_dir: Option<PathBuf>, record: Option<std::fs::File>) -> StderrSink {
        StderrSink {
            state_dir,
            record: record.map(Mutex::new),
            connected: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
        }
    }
}

impl Sink for StderrSink {
    fn log(&self, line: &str) {
        eprintln!("vmtune nri: {line}");
    }

    fn record(&self, event: &Event) {
        let Some(f) = &self.record else { return };
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        if let Ok(mut f) = f.lock() {
            use std::io::Write as _;
            if writeln!(f, "{line}").is_err() {
                drop(f);
                self.log("cannot append to the --record file; recording stops");
            }
        }
    }

    fn changed(&self, agent: &Agent) {
        let Some(dir) = &self.state_dir else { return };
        let status = Status::of(agent, self.connected.load(Ordering::Relaxed));
        match report::write(dir, &status) {
            Ok(()) => self.write_failed.store(false, Ordering::Relaxed),
            Err(e) => {
                if !self.write_failed.swap(true, Ordering::Relaxed) {
                    self.log(&format!(
                        "cannot write the state files in {}: {e}",
                        dir.display()
                    ));
                }
            }
        }
    }
}

/// A stop request, from a signal or a test.
#[derive(Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    closer: Arc<Mutex<Option<Closer>>>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// The flag a signal handler sets (`signal_hook::flag::register`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Ok(c) = self.closer.lock() {
            if let Some(c) = c.as_ref() {
                c.close("stopping");
            }
        }
    }

    pub fn stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    fn set(&self, c: Option<Closer>) {
        if let Ok(mut slot) = self.closer.lock() {
            *slot = c;
        }
    }
}

/// Serves until stopped (or, with `once`, until the first connection ends). Returns the
/// reason the last connection ended.
pub fn serve(
    agent: Agent,
    opts: &ServeOptions,
    stop: &Stop,
    sink: Arc<StderrSink>,
) -> Result<(), String> {
    opts.conn.check().map_err(|e| e.to_string())?;
    let agent = Arc::new(Mutex::new(agent));
    // a signal only sets the flag: watch it and close the session from here
    let watcher = {
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.stopped() {
                thread::sleep(Duration::from_millis(50));
            }
            stop.stop();
        })
    };
    let mut waiting_since: Option<Instant> = None;
    let mut last_error: Option<ConnError> = None;
    while !stop.stopped() {
        let (tx, rx) = mpsc::channel::<Vec<Update>>();
        let sink_dyn: Arc<dyn Sink> = sink.clone();
        let mut svc = Service::new(agent.clone(), sink_dyn, tx);
        svc.release_all = opts.release_all;
        let service = Arc::new(svc);
        let session = match Session::connect(&opts.conn, service.clone()) {
            Ok(s) => s,
            Err(e @ ConnError::Connect { .. }) if !opts.once => {
                if waiting_since.is_none() {
                    sink.log(&format!(
                        "{e}; trying again every {} ms",
                        opts.retry.as_millis()
                    ));
                    waiting_since = Some(Instant::now());
                }
                sleep_unless_stopped(stop, opts.retry);
                continue;
            }
            Err(e) => {
                if opts.once {
                    return Err(e.to_string());
                }
                sink.log(&format!("registration failed: {e}; trying again"));
                sleep_unless_stopped(stop, opts.retry);
                continue;
            }
        };
        if let Some(t) = waiting_since.take() {
            sink.log(&format!(
                "the socket is back after {:.1} s",
                t.elapsed().as_secs_f64()
            ));
        }
        sink.log(&format!(
            "registered as {}-{} on {}",
            opts.conn.index,
            opts.conn.name,
            opts.conn.socket.display()
        ));
        sink.connected.store(true, Ordering::Relaxed);
        if let Ok(a) = agent.lock() {
            sink.changed(&a);
        }
        stop.set(Some(session.closer()));
        if stop.stopped() {
            session.closer().close("stopping");
        }
        let updater = {
            let caller = session.caller();
            let sink = sink.clone();
            thread::spawn(move || {
                for batch in rx {
                    let mut req = api::UpdateContainersRequest::new();
                    req.update = convert::updates(&batch);
                    match caller.update_containers(&req) {
                        Ok(r) if !r.failed.is_empty() => sink.log(&format!(
                            "the runtime could not update {} of {} containers",
                            r.failed.len(),
                            batch.len()
                        )),
                        Ok(_) => {}
                        Err(e) => {
                            sink.log(&format!("updating {} shared containers: {e}", batch.len()))
                        }
                    }
                }
            })
        };
        if opts.release_all {
            // the runtime applies the sync's updates once the answer is in: give it a moment
            let t = Instant::now();
            while !service.synced.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(10) {
                thread::sleep(Duration::from_millis(20));
            }
            thread::sleep(Duration::from_millis(500));
            session.closer().close("released");
            let _ = session.wait();
            drop(service);
            let _ = updater.join();
            stop.stop();
            let _ = watcher.join();
            sink.log("released: every container is back on every CPU; exiting");
            return Ok(());
        }
        drop(service);
        let why = session.wait();
        stop.set(None);
        sink.connected.store(false, Ordering::Relaxed);
        if let Ok(a) = agent.lock() {
            sink.changed(&a);
        }
        // the service (and with it the updater's channel) is gone with the session
        let _ = updater.join();
        if stop.stopped() {
            sink.log("stopped");
            break;
        }
        sink.log(&format!("disconnected: {why}; connecting again"));
        last_error = Some(why);
        if opts.once {
            break;
        }
        sleep_unless_stopped(stop, opts.retry.min(Duration::from_millis(200)));
    }
    stop.stop();
    let _ = watcher.join();
    match (opts.once, last_error) {
        (true, Some(e)) => Err(e.to_string()),
        _ => Ok(()),
    }
}

fn sleep_unless_stopped(stop: &Stop, d: Duration) {
    let end = Instant::now() + d;
    while !stop.stopped() && Instant::now() < end {
        thread::sleep(Duration::from_millis(20));
    }
}

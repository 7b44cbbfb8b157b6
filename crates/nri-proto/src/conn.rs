//! A plugin's session with the runtime over NRI's socket: register, serve the Plugin service,
//! call the Runtime service.
//!
//! Three threads: the *reader* splits the socket into frames and ttrpc messages — requests of
//! connection 1 go to the dispatcher, responses of connection 2 to the call waiting for them;
//! the *dispatcher* runs each request through the generated handlers
//! ([`crate::nri_ttrpc::create_plugin`]) one at a time, in arrival order, and writes the
//! response; the caller's thread registers ([`Session::connect`]) and waits
//! ([`Session::wait`]). The runtime may send `Configure` before it answers `RegisterPlugin`,
//! so the dispatcher runs before registration begins.
//!
//! Calls to the Runtime service ([`Caller::update_containers`]) must not be made from inside a
//! handler: the runtime holds its NRI lock for the whole event, and the call would wait out its
//! timeout and get the plugin dropped. Return updates in the event's reply instead, or call
//! from another thread once the handler has returned.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use thiserror::Error;
use ttrpc::proto::{Code, Codec, MessageHeader, Request, Response};

use crate::mux::{self, PLUGIN_CONN, RUNTIME_CONN};
use crate::nri::{Empty, RegisterPluginRequest, UpdateContainersRequest, UpdateContainersResponse};
use crate::nri_ttrpc::Plugin;
use crate::wire::{self, Message, StreamDecoder, TYPE_REQUEST, TYPE_RESPONSE};
use crate::{NRI_VERSION, PLUGIN_SERVICE, RUNTIME_SERVICE};

/// Why a session could not start, or ended.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConnError {
    #[error("cannot connect to the NRI socket {path}: {why}")]
    Connect { path: PathBuf, why: String },
    #[error("the NRI socket closed{0}")]
    Closed(String),
    #[error("{0}")]
    Mux(#[from] mux::MuxError),
    #[error("{0}")]
    Wire(#[from] wire::WireError),
    #[error("the runtime did not answer {method} within {ms} ms")]
    Timeout { method: String, ms: u128 },
    #[error("the runtime refused {method}: {message} (ttrpc code {code})")]
    Refused {
        method: String,
        code: i32,
        message: String,
    },
    #[error("invalid plugin {what} {value:?}: {why}")]
    Invalid {
        what: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("writing to the NRI socket: {0}")]
    Write(String),
}

/// How to reach the runtime and who we are.
#[derive(Debug, Clone)]
pub struct Options {
    pub socket: PathBuf,
    /// Letters, digits and `_ . + -`, as the runtime checks it.
    pub name: String,
    /// Exactly two digits: plugins are called in ascending order of their index.
    pub index: String,
    /// How long `RegisterPlugin` may take (the runtime's own default is 5 s).
    pub registration_timeout: Duration,
    /// How long a later call to the runtime may take.
    pub call_timeout: Duration,
}

impl Options {
    pub fn new(socket: impl AsRef<Path>, name: &str, index: &str) -> Options {
        Options {
            socket: socket.as_ref().to_path_buf(),
            name: name.to_string(),
            index: index.to_string(),
            registration_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(2),
        }
    }

    /// The runtime's own checks of a plugin's name and index (`CheckPluginName`,
    /// `CheckPluginIndex` in NRI v0.12.3), made before connecting so a bad flag is one clear
    /// line rather than a refused registration.
    pub fn check(&self) -> Result<(), ConnError> {
        let ok = |c: char| c.is_ascii_alphanumeric() || "_.+-".contains(c);
        if self.name.is_empty() || !self.name.chars().all(ok) {
            return Err(ConnError::Invalid {
                what: "name",
                value: self.name.clone(),
                why: "use letters, digits and _ . + - only",
            });
        }
        if self.index.len() != 2 || !self.index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ConnError::Invalid {
                what: "index",
                value: self.index.clone(),
                why: "two digits, 00 to 99",
            });
        }
        Ok(())
    }
}

type Pending = HashMap<u32, mpsc::Sender<Result<Response, ConnError>>>;

struct Shared {
    writer: Mutex<UnixStream>,
    pending: Mutex<Pending>,
    closed: Mutex<Option<ConnError>>,
    next_stream: AtomicU32,
    /// Frames for connections other than 1 and 2, dropped as the runtime drops them.
    stray_frames: AtomicU64,
}

impl Shared {
    /// Writes one ttrpc message on `conn`, all its frames under one lock so that two messages
    /// of the same connection never interleave.
    fn send(&self, conn: u32, msg: &Message) -> Result<(), ConnError> {
        let mut bytes = Vec::new();
        mux::encode(conn, &msg.encode(), &mut bytes);
        let mut w = self
            .writer
            .lock()
            .map_err(|_| ConnError::Write("writer lock poisoned".into()))?;
        w.write_all(&bytes)
            .map_err(|e| ConnError::Write(e.to_string()))
    }

    fn close(&self, why: ConnError) {
        if let Ok(mut c) = self.closed.lock() {
            if c.is_none() {
                *c = Some(why.clone());
            }
        }
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
        if let Ok(mut p) = self.pending.lock() {
            for (_, tx) in p.drain() {
                let _ = tx.send(Err(why.clone()));
            }
        }
    }

    fn closed(&self) -> Option<ConnError> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }
}

/// A registered plugin's live session.
pub struct Session {
    shared: Arc<Shared>,
    options: Options,
    reader: Option<thread::JoinHandle<()>>,
    dispatcher: Option<thread::JoinHandle<()>>,
}

impl Session {
    /// Connects to the runtime's socket, starts serving `plugin`, and registers. Returns once
    /// the runtime has accepted the registration; `Configure` and `Synchronize` may already
    /// be under way on the dispatcher.
    pub fn connect(
        options: &Options,
        plugin: Arc<dyn Plugin + Send + Sync>,
    ) -> Result<Session, ConnError> {
        options.check()?;
        let stream = UnixStream::connect(&options.socket).map_err(|e| ConnError::Connect {
            path: options.socket.clone(),
            why: e.to_string(),
        })?;
        Session::start(stream, options, plugin)
    }

    /// [`Session::connect`] over a socket already connected (a test's socketpair, or the fd
    /// a runtime that launched the plugin passes in `NRI_PLUGIN_SOCKET`).
    pub fn start(
        stream: UnixStream,
        options: &Options,
        plugin: Arc<dyn Plugin + Send + Sync>,
    ) -> Result<Session, ConnError> {
        options.check()?;
        let read_half = stream
            .try_clone()
            .map_err(|e| ConnError::Write(e.to_string()))?;
        let fd = stream.as_raw_fd();
        let shared = Arc::new(Shared {
            writer: Mutex::new(stream),
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            next_stream: AtomicU32::new(1),
            stray_frames: AtomicU64::new(0),
        });
        let (req_tx, req_rx) = mpsc::channel::<Message>();
        let reader = {
            let shared = shared.clone();
            thread::Builder::new()
                .name("nri-reader".into())
                .spawn(move || read_loop(read_half, &shared, req_tx))
                .map_err(|e| ConnError::Write(e.to_string()))?
        };
        let dispatcher = {
            let shared = shared.clone();
            let methods = crate::nri_ttrpc::create_plugin(plugin);
            thread::Builder::new()
                .name("nri-dispatch".into())
                .spawn(move || dispatch_loop(fd, &shared, &methods, req_rx))
                .map_err(|e| ConnError::Write(e.to_string()))?
        };
        let session = Session {
            shared,
            options: options.clone(),
            reader: Some(reader),
            dispatcher: Some(dispatcher),
        };
        let mut reg = RegisterPluginRequest::new();
        reg.plugin_name = options.name.clone();
        reg.plugin_idx = options.index.clone();
        reg.NRI_version = NRI_VERSION.to_string();
        let _: Empty =
            session
                .caller()
                .call("RegisterPlugin", &reg, options.registration_timeout)?;
        Ok(session)
    }

    /// A handle for calls to the runtime from another thread while [`Session::wait`] blocks.
    pub fn caller(&self) -> Caller {
        Caller {
            shared: self.shared.clone(),
            call_timeout: self.options.call_timeout,
        }
    }

    /// A handle that can close the session from another thread (a signal handler's thread).
    pub fn closer(&self) -> Closer {
        Closer(self.shared.clone())
    }

    /// Frames received for connections other than 1 and 2 (dropped).
    pub fn stray_frames(&self) -> u64 {
        self.shared.stray_frames.load(Ordering::Relaxed)
    }

    /// Blocks until the session ends; returns why.
    pub fn wait(mut self) -> ConnError {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        self.shared
            .closed()
            .unwrap_or_else(|| ConnError::Closed(String::new()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared
            .close(ConnError::Closed(" (the plugin closed it)".into()));
    }
}

/// Calls the Runtime service of a session, from any thread.
#[derive(Clone)]
pub struct Caller {
    shared: Arc<Shared>,
    call_timeout: Duration,
}

impl Caller {
    /// Calls a Runtime service method and waits for its answer.
    pub fn call<Req: protobuf::Message, Resp: protobuf::Message>(
        &self,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, ConnError> {
        let shared = &self.shared;
        if let Some(why) = shared.closed() {
            return Err(why);
        }
        let payload = req.write_to_bytes().map_err(|e| wire::WireError::Encode {
            what: "request",
            why: e.to_string(),
        })?;
        let stream = shared.next_stream.fetch_add(2, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        if let Ok(mut p) = shared.pending.lock() {
            p.insert(stream, tx);
        }
        let forget = || {
            if let Ok(mut p) = shared.pending.lock() {
                p.remove(&stream);
            }
        };
        let msg = Message::request(
            stream,
            RUNTIME_SERVICE,
            method,
            payload,
            timeout.as_nanos().min(i64::MAX as u128) as i64,
        )?;
        if let Err(e) = shared.send(RUNTIME_CONN, &msg) {
            forget();
            return Err(e);
        }
        let res = match rx.recv_timeout(timeout) {
            Ok(r) => r?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                forget();
                return Err(ConnError::Timeout {
                    method: method.to_string(),
                    ms: timeout.as_millis(),
                });
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(shared
                    .closed()
                    .unwrap_or_else(|| ConnError::Closed(String::new())))
            }
        };
        if let Some(status) = res.status.as_ref() {
            let code = status.code.value();
            if code != Code::OK as i32 {
                return Err(ConnError::Refused {
                    method: method.to_string(),
                    code,
                    message: status.message.clone(),
                });
            }
        }
        Resp::parse_from_bytes(&res.payload).map_err(|e| {
            wire::WireError::Decode {
                what: "response",
                stream,
                why: e.to_string(),
            }
            .into()
        })
    }

    /// Asks the runtime to update containers outside any event (never from a handler).
    pub fn update_containers(
        &self,
        req: &UpdateContainersRequest,
    ) -> Result<UpdateContainersResponse, ConnError> {
        self.call("UpdateContainers", req, self.call_timeout)
    }
}

/// Closes a session from another thread.
#[derive(Clone)]
pub struct Closer(Arc<Shared>);

impl Closer {
    pub fn close(&self, why: &str) {
        self.0.close(ConnError::Closed(format!(" ({why})")));
    }
}

fn read_loop(mut sock: UnixStream, shared: &Shared, requests: mpsc::Sender<Message>) {
    let mut frames = mux::Decoder::new();
    let mut plugin_conn = StreamDecoder::new();
    let mut runtime_conn = StreamDecoder::new();
    let mut buf = vec![0u8; 64 << 10];
    let why = loop {
        let n = match sock.read(&mut buf) {
            Ok(0) => break ConnError::Closed(" by the runtime".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break ConnError::Closed(format!(": {e}")),
        };
        frames.push(&buf[..n]);
        match route(
            &mut frames,
            &mut plugin_conn,
            &mut runtime_conn,
            shared,
            &requests,
        ) {
            Ok(()) => {}
            Err(e) => break e,
        }
    };
    shared.close(why);
}

/// Every whole frame and message received so far, to where it goes.
fn route(
    frames: &mut mux::Decoder,
    plugin_conn: &mut StreamDecoder,
    runtime_conn: &mut StreamDecoder,
    shared: &Shared,
    requests: &mpsc::Sender<Message>,
) -> Result<(), ConnError> {
    while let Some(frame) = frames.next_frame()? {
        match frame.conn {
            PLUGIN_CONN => {
                plugin_conn.push(&frame.payload);
                while let Some(msg) = plugin_conn.next_message()? {
                    if msg.kind == TYPE_REQUEST && requests.send(msg).is_err() {
                        return Err(ConnError::Closed(" (dispatcher ended)".into()));
                    }
                }
            }
            RUNTIME_CONN => {
                runtime_conn.push(&frame.payload);
                while let Some(msg) = runtime_conn.next_message()? {
                    if msg.kind != TYPE_RESPONSE {
                        continue;
                    }
                    let waiter = shared
                        .pending
                        .lock()
                        .ok()
                        .and_then(|mut p| p.remove(&msg.stream));
                    if let Some(tx) = waiter {
                        let _ = tx.send(msg.as_response().map_err(ConnError::from));
                    }
                }
            }
            _ => {
                shared.stray_frames.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

type Methods = HashMap<String, Box<dyn ttrpc::MethodHandler + Send + Sync>>;

fn dispatch_loop(fd: i32, shared: &Shared, methods: &Methods, requests: mpsc::Receiver<Message>) {
    let (res_tx, res_rx) = mpsc::channel::<(MessageHeader, Vec<u8>)>();
    // never signalled: a request is cancelled by the runtime's timeout, not by us
    let (_cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(1);
    let conn_ctx = Arc::new(ttrpc::ConnectionContext::default());
    for msg in requests {
        let answer = handle(fd, methods, &msg, &res_tx, &res_rx, &cancel_rx, &conn_ctx);
        let reply = Message {
            stream: msg.stream,
            kind: TYPE_RESPONSE,
            flags: 0,
            payload: answer,
        };
        if let Err(e) = shared.send(PLUGIN_CONN, &reply) {
            shared.close(e);
            return;
        }
    }
}

/// One request through its generated handler; the response's bytes. A request that does not
/// decode or names no method we serve is answered with a ttrpc error status, as the runtime's
/// own ttrpc server would.
fn handle(
    fd: i32,
    methods: &Methods,
    msg: &Message,
    res_tx: &mpsc::Sender<(MessageHeader, Vec<u8>)>,
    res_rx: &mpsc::Receiver<(MessageHeader, Vec<u8>)>,
    cancel_rx: &crossbeam_channel::Receiver<()>,
    conn_ctx: &Arc<ttrpc::ConnectionContext>,
) -> Vec<u8> {
    let req: Request = match msg.as_request() {
        Ok(r) => r,
        Err(e) => return status(Code::INVALID_ARGUMENT, &e.to_string()),
    };
    let path = format!("/{}/{}", req.service, req.method);
    let Some(handler) = methods.get(&path) else {
        let what = if req.service == PLUGIN_SERVICE {
            "method"
        } else {
            "service"
        };
        return status(Code::UNIMPLEMENTED, &format!("{path}: unknown {what}"));
    };
    let mut metadata: HashMap<String, Vec<String>> = HashMap::new();
    for kv in &req.metadata {
        metadata
            .entry(kv.key.clone())
            .or_default()
            .push(kv.value.clone());
    }
    let ctx = ttrpc::TtrpcContext {
        fd,
        cancel_rx: cancel_rx.clone(),
        mh: MessageHeader {
            length: msg.payload.len() as u32,
            stream_id: msg.stream,
            type_: TYPE_REQUEST,
            flags: msg.flags,
        },
        res_tx: res_tx.clone(),
        metadata,
        timeout_nano: req.timeout_nano,
        conn_ctx: conn_ctx.clone(),
    };
    let handled = handler.handler(ctx, req);
    let mut answer = None;
    while let Ok((_, bytes)) = res_rx.try_recv() {
        answer = Some(bytes);
    }
    match (handled, answer) {
        (_, Some(bytes)) => bytes,
        (Err(e), None) => status(Code::INVALID_ARGUMENT, &e.to_string()),
        (Ok(()), None) => status(
            Code::INTERNAL,
            &format!("{path}: the handler sent no answer"),
        ),
    }
}

/// An encoded `ttrpc.Response` carrying only an error status.
fn status(code: Code, message: &str) -> Vec<u8> {
    let mut res = Response::new();
    res.set_status(ttrpc::get_status(code, message));
    res.encode().unwrap_or_default()
}

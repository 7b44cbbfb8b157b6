//! A plugin session against a runtime played by the test over a socketpair, byte for byte as
//! NRI v0.12.3 speaks (the containerd end-to-end test runs the real one): registration on
//! connection 2 with `Configure` arriving before its answer, requests split across frames of
//! any size, replies cut into frames of at most 4096 bytes, unknown methods answered
//! UNIMPLEMENTED, a call to the Runtime service, and a malformed frame that ends the session
//! with a clear error instead of a panic.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_proto::conn::{ConnError, Options, Session};
use nri_proto::mux::{self, PLUGIN_CONN, RUNTIME_CONN, SEND_FRAME_MAX};
use nri_proto::nri as api;
use nri_proto::nri_ttrpc::Plugin;
use nri_proto::wire::{Message, StreamDecoder, TYPE_RESPONSE};
use nri_proto::Message as _;
use ttrpc::proto::Codec;

/// A plugin that answers Configure with a mask and CreateContainer with a cpuset.
struct Fake {
    seen: Mutex<Vec<String>>,
}

impl Plugin for Fake {
    fn configure(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("configure {}", req.runtime_name));
        let mut r = api::ConfigureResponse::new();
        r.events = 0b1000;
        Ok(r)
    }

    fn create_container(
        &self,
        _: &ttrpc::TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("create {}", req.container.id));
        let mut cpu = api::LinuxCPU::new();
        cpu.cpus = "2-3".into();
        let mut res = api::LinuxResources::new();
        res.cpu = nri_proto::MessageField::some(cpu);
        let mut linux = api::LinuxContainerAdjustment::new();
        linux.resources = nri_proto::MessageField::some(res);
        let mut adj = api::ContainerAdjustment::new();
        adj.linux = nri_proto::MessageField::some(linux);
        // long enough to need several frames
        adj.annotations
            .insert("vmtune.io/note".into(), "x".repeat(10_000));
        let mut r = api::CreateContainerResponse::new();
        r.adjust = nri_proto::MessageField::some(adj);
        Ok(r)
    }
}

/// The runtime's end: frames in, messages per connection out.
struct Runtime {
    sock: UnixStream,
    frames: mux::Decoder,
    conns: [StreamDecoder; 3],
    frame_sizes: Vec<usize>,
}

impl Runtime {
    fn new(sock: UnixStream) -> Runtime {
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Runtime {
            sock,
            frames: mux::Decoder::new(),
            conns: [
                StreamDecoder::new(),
                StreamDecoder::new(),
                StreamDecoder::new(),
            ],
            frame_sizes: Vec::new(),
        }
    }

    /// The next message the plugin sends, and its connection.
    fn recv(&mut self) -> (u32, Message) {
        loop {
            for conn in [PLUGIN_CONN, RUNTIME_CONN] {
                if let Some(m) = self.conns[conn as usize].next_message().unwrap() {
                    return (conn, m);
                }
            }
            if let Some(f) = self.frames.next_frame().unwrap() {
                self.frame_sizes.push(f.payload.len());
                self.conns[f.conn as usize].push(&f.payload);
                continue;
            }
            let mut buf = [0u8; 8192];
            let n = self.sock.read(&mut buf).expect("the plugin answers");
            assert!(n > 0, "the plugin closed the socket");
            self.frames.push(&buf[..n]);
        }
    }

    /// Sends one message on `conn`, cut into frames of `chunk` bytes.
    fn send(&mut self, conn: u32, m: &Message, chunk: usize) {
        let bytes = m.encode();
        for part in bytes.chunks(chunk) {
            let mut f = Vec::new();
            f.extend_from_slice(&conn.to_be_bytes());
            f.extend_from_slice(&(part.len() as u32).to_be_bytes());
            f.extend_from_slice(part);
            self.sock.write_all(&f).unwrap();
        }
    }

    fn request<M: protobuf::Message>(&mut self, stream: u32, method: &str, req: &M, chunk: usize) {
        let m = Message::request(
            stream,
            nri_proto::PLUGIN_SERVICE,
            method,
            req.write_to_bytes().unwrap(),
            0,
        )
        .unwrap();
        self.send(PLUGIN_CONN, &m, chunk);
    }

    fn respond<M: protobuf::Message>(&mut self, stream: u32, resp: &M) {
        let mut r = ttrpc::proto::Response::new();
        r.payload = resp.write_to_bytes().unwrap();
        let m = Message {
            stream,
            kind: TYPE_RESPONSE,
            flags: 0,
            payload: r.encode().unwrap(),
        };
        self.send(RUNTIME_CONN, &m, 4096);
    }
}

fn options() -> Options {
    let mut o = Options::new("/unused", "test", "42");
    o.registration_timeout = Duration::from_secs(5);
    o
}

#[test]
fn registers_serves_and_calls() {
    let (plugin_end, runtime_end) = UnixStream::pair().unwrap();
    let fake = Arc::new(Fake {
        seen: Mutex::new(Vec::new()),
    });
    let handle = {
        let fake = fake.clone();
        std::thread::spawn(move || Session::start(plugin_end, &options(), fake))
    };
    let mut rt = Runtime::new(runtime_end);

    // RegisterPlugin on connection 2
    let (conn, reg) = rt.recv();
    assert_eq!(conn, RUNTIME_CONN);
    let req = reg.as_request().unwrap();
    assert_eq!(
        (req.service.as_str(), req.method.as_str()),
        (nri_proto::RUNTIME_SERVICE, "RegisterPlugin")
    );
    assert_eq!(reg.stream % 2, 1, "client streams are odd");
    let r = api::RegisterPluginRequest::parse_from_bytes(&req.payload).unwrap();
    assert_eq!(
        (r.plugin_name.as_str(), r.plugin_idx.as_str()),
        ("test", "42")
    );

    // Configure arrives before the registration's answer, in frames of 7 bytes
    let mut cfg = api::ConfigureRequest::new();
    cfg.runtime_name = "fake-containerd".into();
    rt.request(1, "Configure", &cfg, 7);
    let (conn, answer) = rt.recv();
    assert_eq!(
        (conn, answer.kind, answer.stream),
        (PLUGIN_CONN, TYPE_RESPONSE, 1)
    );
    let res = answer.as_response().unwrap();
    assert_eq!(
        api::ConfigureResponse::parse_from_bytes(&res.payload)
            .unwrap()
            .events,
        0b1000
    );
    rt.respond(reg.stream, &api::Empty::new());
    let session = handle.join().unwrap().expect("registered");

    // CreateContainer in one frame; the answer comes back in frames of at most 4096 bytes
    let mut create = api::CreateContainerRequest::new();
    let mut c = api::Container::new();
    c.id = "ctr1".into();
    create.container = nri_proto::MessageField::some(c);
    rt.frame_sizes.clear();
    rt.request(3, "CreateContainer", &create, 1 << 20);
    let (_, answer) = rt.recv();
    let res = answer.as_response().unwrap();
    let r = api::CreateContainerResponse::parse_from_bytes(&res.payload).unwrap();
    assert_eq!(r.adjust.linux.resources.cpu.cpus, "2-3");
    assert!(rt.frame_sizes.len() >= 3, "{:?}", rt.frame_sizes);
    assert!(
        rt.frame_sizes.iter().all(|&n| n <= SEND_FRAME_MAX),
        "{:?}",
        rt.frame_sizes
    );

    // a method the plugin does not serve: UNIMPLEMENTED, the session goes on
    rt.request(5, "NoSuchMethod", &api::Empty::new(), 4096);
    let (_, answer) = rt.recv();
    let status = answer.as_response().unwrap().status.unwrap();
    assert_eq!(
        status.code.value(),
        ttrpc::Code::UNIMPLEMENTED as i32,
        "{}",
        status.message
    );

    // the plugin calls UpdateContainers on connection 2 from another thread
    let caller = session.caller();
    let call =
        std::thread::spawn(move || caller.update_containers(&api::UpdateContainersRequest::new()));
    let (conn, upd) = rt.recv();
    assert_eq!(conn, RUNTIME_CONN);
    assert_eq!(upd.as_request().unwrap().method, "UpdateContainers");
    rt.respond(upd.stream, &api::UpdateContainersResponse::new());
    assert!(call.join().unwrap().is_ok());

    // a frame for another connection is dropped, as the runtime drops it
    rt.send(
        7,
        &Message {
            stream: 1,
            kind: 1,
            flags: 0,
            payload: vec![],
        },
        64,
    );

    // a frame claiming 4 GiB: the session ends with the reason, no panic, no allocation
    rt.sock
        .write_all(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])
        .unwrap();
    let why = session.wait();
    assert!(
        matches!(why, ConnError::Mux(mux::MuxError::TooLong { .. })),
        "{why}"
    );
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            "configure fake-containerd".to_string(),
            "create ctr1".into()
        ]
    );
}

#[test]
fn registration_refused_or_unanswered() {
    let (plugin_end, runtime_end) = UnixStream::pair().unwrap();
    let fake = Arc::new(Fake {
        seen: Mutex::new(Vec::new()),
    });
    let mut o = options();
    o.registration_timeout = Duration::from_millis(300);
    let t = std::time::Instant::now();
    let err = Session::start(plugin_end, &o, fake.clone())
        .err()
        .expect("no answer: an error");
    assert!(matches!(err, ConnError::Timeout { .. }), "{err}");
    assert!(t.elapsed() < Duration::from_secs(3));
    drop(runtime_end);

    // a refusal carries the runtime's message
    let (plugin_end, runtime_end) = UnixStream::pair().unwrap();
    let h = std::thread::spawn(move || Session::start(plugin_end, &options(), fake));
    let mut rt = Runtime::new(runtime_end);
    let (_, reg) = rt.recv();
    let mut r = ttrpc::proto::Response::new();
    r.set_status(ttrpc::get_status(
        ttrpc::Code::INVALID_ARGUMENT,
        "invalid plugin index \"4\"",
    ));
    let m = Message {
        stream: reg.stream,
        kind: TYPE_RESPONSE,
        flags: 0,
        payload: r.encode().unwrap(),
    };
    rt.send(RUNTIME_CONN, &m, 4096);
    let err = h.join().unwrap().err().expect("refused");
    assert!(err.to_string().contains("invalid plugin index"), "{err}");

    // bad names and indexes never reach the socket
    let mut o = options();
    o.index = "4".into();
    assert!(o.check().is_err());
    o.index = "04".into();
    o.name = "a b".into();
    assert!(o.check().is_err());
}

#![no_main]
//! The NRI socket as the runtime could send it: any bytes through the frame decoder, each
//! connection's ttrpc messages, each request's payload decoded as the message its method
//! names, converted to the agent's model and run through an agent (the built-in host), as
//! the plugin's dispatcher would. Also the agent's own text inputs: a replay file, a CDI spec,
//! the config file. Nothing may panic.
//!
//! An input whose first byte is odd is taken as a method (second byte) and a request payload
//! (the rest), framed the way the runtime frames it, so the fuzzer spends its time in the
//! messages and the agent rather than in finding a valid frame header.
use libfuzzer_sys::fuzz_target;
use nri_proto::nri as api;
use nri_proto::Message as _;

fn agent() -> nri::Agent {
    nri::Agent::new(
        topo::builtin::default_host(),
        nri::Settings::default(),
        nri::devices::CdiRegistry::default(),
    )
    .expect("the built-in host has room for housekeeping")
}

const METHODS: [&str; 6] = [
    "Synchronize",
    "CreateContainer",
    "UpdateContainer",
    "StopContainer",
    "RemovePodSandbox",
    "Configure",
];

/// `payload` as a request for `method` in frames of connection 1.
fn framed(method: &str, payload: &[u8]) -> Vec<u8> {
    let Ok(m) = nri_proto::wire::Message::request(1, nri_proto::PLUGIN_SERVICE, method, payload.to_vec(), 0) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    nri_proto::mux::encode(nri_proto::mux::PLUGIN_CONN, &m.encode(), &mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let mut frames = nri_proto::mux::Decoder::new();
    match data {
        [mode, which, payload @ ..] if mode % 2 == 1 => {
            frames.push(&framed(METHODS[*which as usize % METHODS.len()], payload))
        }
        _ => frames.push(data),
    }
    let mut conns = [
        nri_proto::wire::StreamDecoder::new(),
        nri_proto::wire::StreamDecoder::new(),
    ];
    let mut a = agent();
    while let Ok(Some(f)) = frames.next_frame() {
        let Some(conn) = conns.get_mut((f.conn as usize).wrapping_sub(1)) else { continue };
        conn.push(&f.payload);
        while let Ok(Some(m)) = conn.next_message() {
            let _ = m.as_response();
            let Ok(req) = m.as_request() else { continue };
            let p = &req.payload;
            match req.method.as_str() {
                "Synchronize" => {
                    if let Ok(r) = api::SynchronizeRequest::parse_from_bytes(p) {
                        let pods: Vec<_> = r.pods.iter().map(nri::convert::pod).collect();
                        let cs: Vec<_> = r.containers.iter().map(nri::convert::container).collect();
                        let out = a.synchronize(&pods, &cs);
                        let _ = nri::convert::updates(&out.updates);
                    }
                }
                "CreateContainer" => {
                    if let Ok(r) = api::CreateContainerRequest::parse_from_bytes(p) {
                        let out = a.create(&nri::convert::pod(&r.pod), &nri::convert::container(&r.container));
                        if let Some(adj) = &out.adjust {
                            let _ = nri::convert::adjustment(adj).write_to_bytes();
                        }
                    }
                }
                "UpdateContainer" => {
                    if let Ok(r) = api::UpdateContainerRequest::parse_from_bytes(p) {
                        let _ = a.update(&nri::convert::container(&r.container));
                    }
                }
                "StopContainer" | "RemoveContainer" => {
                    if let Ok(r) = api::StopContainerRequest::parse_from_bytes(p) {
                        let _ = a.release(&nri::convert::container(&r.container), "stop", true);
                    }
                }
                "RemovePodSandbox" => {
                    if let Ok(r) = api::RemovePodSandboxRequest::parse_from_bytes(p) {
                        let _ = a.remove_pod(&nri::convert::pod(&r.pod));
                    }
                }
                _ => {
                    let _ = api::ConfigureRequest::parse_from_bytes(p);
                    let _ = api::RegisterPluginRequest::parse_from_bytes(p);
                }
            }
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(events) = nri::replay::parse(&text) {
        let _ = nri::replay::run(&mut agent(), &events);
    }
    let _ = nri::devices::CdiRegistry::default().add_json(&text);
    let _ = nri::config::FileConfig::parse(&text);
});

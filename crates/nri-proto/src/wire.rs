//! ttrpc messages inside one multiplexed connection.
//!
//! A message is a 10-byte header — payload length (`u32` BE), stream id (`u32` BE), type
//! (`u8`: 1 request, 2 response, 3 data) and flags (`u8`) — and a protobuf payload: a
//! `ttrpc.Request` {service, method, payload, timeout_nano, metadata} or a `ttrpc.Response`
//! {status, payload} (containerd/ttrpc v1.2.9, the version containerd 2.4.2 builds with).
//! Clients number their streams with odd ids from 1.

use thiserror::Error;
use ttrpc::proto::{Codec, Request, Response};

/// Bytes in a ttrpc message header.
pub const HEADER_LEN: usize = 10;
/// ttrpc's largest message payload.
pub const MESSAGE_MAX: usize = 4 << 20;
pub const TYPE_REQUEST: u8 = 1;
pub const TYPE_RESPONSE: u8 = 2;
pub const TYPE_DATA: u8 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error(
        "ttrpc message on stream {stream} says {len} bytes, over ttrpc's {MESSAGE_MAX}-byte limit"
    )]
    TooLong { stream: u32, len: u32 },
    #[error("ttrpc {what} on stream {stream} does not decode: {why}")]
    Decode {
        what: &'static str,
        stream: u32,
        why: String,
    },
    #[error("ttrpc {what} does not encode: {why}")]
    Encode { what: &'static str, why: String },
}

/// One ttrpc message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub stream: u32,
    pub kind: u8,
    pub flags: u8,
    pub payload: Vec<u8>,
}

impl Message {
    /// The header and payload as they go on the connection.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        out.extend_from_slice(&(self.payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.stream.to_be_bytes());
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&self.payload);
        out
    }

    /// A request message for `service`/`method` carrying `payload` (an encoded protobuf).
    pub fn request(
        stream: u32,
        service: &str,
        method: &str,
        payload: Vec<u8>,
        timeout_nano: i64,
    ) -> Result<Message, WireError> {
        let mut req = Request::new();
        req.service = service.to_string();
        req.method = method.to_string();
        req.payload = payload;
        req.timeout_nano = timeout_nano;
        Ok(Message {
            stream,
            kind: TYPE_REQUEST,
            flags: 0,
            payload: req.encode().map_err(|e| WireError::Encode {
                what: "request",
                why: e.to_string(),
            })?,
        })
    }

    /// This message's payload as a `ttrpc.Request`.
    pub fn as_request(&self) -> Result<Request, WireError> {
        Request::decode(&self.payload).map_err(|e| WireError::Decode {
            what: "request",
            stream: self.stream,
            why: e.to_string(),
        })
    }

    /// This message's payload as a `ttrpc.Response`.
    pub fn as_response(&self) -> Result<Response, WireError> {
        Response::decode(&self.payload).map_err(|e| WireError::Decode {
            what: "response",
            stream: self.stream,
            why: e.to_string(),
        })
    }
}

/// Reads ttrpc messages out of one connection's bytes, as frames deliver them.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    buf: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message, `None` until one has arrived; after an error the connection is
    /// out of step and is closed by the caller.
    pub fn next_message(&mut self) -> Result<Option<Message>, WireError> {
        let Some((head, body)) = self.buf.split_first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let stream = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len as usize > MESSAGE_MAX {
            return Err(WireError::TooLong { stream, len });
        }
        let Some(payload) = body.get(..len as usize) else {
            return Ok(None);
        };
        let msg = Message {
            stream,
            kind: head[8],
            flags: head[9],
            payload: payload.to_vec(),
        };
        self.buf.drain(..HEADER_LEN + len as usize);
        Ok(Some(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_request_round_trips() {
        let m = Message::request(3, "svc", "Method", vec![1, 2, 3], 2_000_000_000).unwrap();
        let mut d = StreamDecoder::new();
        let bytes = m.encode();
        d.push(&bytes[..7]);
        assert_eq!(d.next_message().unwrap(), None);
        d.push(&bytes[7..]);
        let got = d.next_message().unwrap().unwrap();
        assert_eq!(got, m);
        let req = got.as_request().unwrap();
        assert_eq!(
            (req.service.as_str(), req.method.as_str()),
            ("svc", "Method")
        );
        assert_eq!(req.payload, vec![1, 2, 3]);
        assert_eq!(req.timeout_nano, 2_000_000_000);
    }

    #[test]
    fn an_oversized_length_is_refused() {
        let mut d = StreamDecoder::new();
        d.push(&[0x7f, 0, 0, 0, 0, 0, 0, 1, 1, 0]);
        assert!(matches!(
            d.next_message(),
            Err(WireError::TooLong { stream: 1, .. })
        ));
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut d = StreamDecoder::new();
            d.push(&bytes);
            while let Ok(Some(m)) = d.next_message() {
                let _ = m.as_request();
                let _ = m.as_response();
            }
        }
    }
}

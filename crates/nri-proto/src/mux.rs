//! NRI's socket multiplexer: several byte streams ("connections") over one unix socket.
//!
//! Each frame is an 8-byte header — the connection id and the payload's length, both
//! big-endian `u32` — followed by the payload (NRI v0.12.3, `pkg/net/multiplex`). Connection 1
//! carries the Plugin service (the runtime calls the plugin), connection 2 the Runtime service
//! (the plugin calls the runtime); 0 is reserved. A connection is a byte stream: a frame may
//! hold part of a ttrpc message or the end of one and the start of the next.
//!
//! What we send is cut into frames of at most [`SEND_FRAME_MAX`] bytes: the Go peer reads each
//! connection through a 4096-byte `bufio.Reader`, and a frame longer than the buffer that runs
//! past the end of a ttrpc message makes its read fail (ENOMEM) and the runtime drop the
//! plugin. What we receive may be as long as [`RECV_FRAME_MAX`] (a ttrpc message of 4 MiB and
//! its header in one frame); a longer length is an error, not an allocation.

use thiserror::Error;

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 8;
/// The connection carrying the Plugin service (served by the plugin).
pub const PLUGIN_CONN: u32 = 1;
/// The connection carrying the Runtime service (served by the runtime).
pub const RUNTIME_CONN: u32 = 2;
/// The longest payload we put in one frame.
pub const SEND_FRAME_MAX: usize = 4096;
/// The longest payload we accept in one frame: ttrpc's 4 MiB message limit and its 10-byte
/// header, the runtime's own `maxPayloadSize`.
pub const RECV_FRAME_MAX: usize = (4 << 20) + 10;

/// A frame that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MuxError {
    #[error("NRI socket frame for connection {conn} says {len} bytes, over the {RECV_FRAME_MAX}-byte limit")]
    TooLong { conn: u32, len: u32 },
    #[error("NRI socket frame for the reserved connection 0 ({len} bytes)")]
    ReservedConn { len: u32 },
}

/// One received frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub conn: u32,
    pub payload: Vec<u8>,
}

/// Appends the frames that carry `data` on connection `conn` to `out`.
pub fn encode(conn: u32, data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(SEND_FRAME_MAX) {
        out.extend_from_slice(&conn.to_be_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
    }
}

/// Reads frames out of the bytes of the socket, as they arrive in pieces of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Where the unread bytes of `buf` start.
    start: usize,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Adds bytes read from the socket.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `None` until one has arrived. After an error the stream is not
    /// in sync any more: the caller closes the socket.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, MuxError> {
        let rest = &self.buf[self.start..];
        let Some((head, body)) = rest.split_first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let conn = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len as usize > RECV_FRAME_MAX {
            return Err(MuxError::TooLong { conn, len });
        }
        if conn == 0 {
            return Err(MuxError::ReservedConn { len });
        }
        let Some(payload) = body.get(..len as usize) else {
            return Ok(None);
        };
        let frame = Frame {
            conn,
            payload: payload.to_vec(),
        };
        self.start += HEADER_LEN + len as usize;
        if self.start > 64 << 10 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(frame))
    }

    /// Bytes received but not yet returned as a frame.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frames_round_trip_in_chunks_of_at_most_4096() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        encode(PLUGIN_CONN, &data, &mut wire);
        assert_eq!(wire.len(), data.len() + 3 * HEADER_LEN);
        let mut d = Decoder::new();
        d.push(&wire);
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while let Some(f) = d.next_frame().unwrap() {
            assert_eq!(f.conn, PLUGIN_CONN);
            sizes.push(f.payload.len());
            got.extend(f.payload);
        }
        assert_eq!(sizes, vec![4096, 4096, 1808]);
        assert_eq!(got, data);
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn a_length_over_the_limit_is_an_error_not_an_allocation() {
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            d.next_frame(),
            Err(MuxError::TooLong {
                conn: 1,
                len: u32::MAX
            })
        );
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 0, 0, 0, 0, 1, 7]);
        assert_eq!(d.next_frame(), Err(MuxError::ReservedConn { len: 1 }));
    }

    proptest! {
        /// Frames of two connections, cut into arbitrary pieces, come back whole and in order.
        #[test]
        fn any_split_of_the_stream_gives_the_same_frames(
            msgs in proptest::collection::vec((1u32..4, proptest::collection::vec(any::<u8>(), 0..9000)), 0..6),
            cuts in proptest::collection::vec(1usize..5000, 1..20),
        ) {
            let mut wire = Vec::new();
            let mut want: Vec<(u32, Vec<u8>)> = Vec::new();
            for (conn, data) in &msgs {
                encode(*conn, data, &mut wire);
                for chunk in data.chunks(SEND_FRAME_MAX) {
                    want.push((*conn, chunk.to_vec()));
                }
            }
            let mut d = Decoder::new();
            let mut got = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < wire.len() {
                let n = cuts[i % cuts.len()].min(wire.len() - at);
                d.push(&wire[at..at + n]);
                at += n;
                i += 1;
                while let Some(f) = d.next_frame().unwrap() {
                    got.push((f.conn, f.payload));
                }
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(d.pending(), 0);
        }

        /// Any bytes: frames or an error, never a panic.
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut d = Decoder::new();
            d.push(&bytes);
            while let Ok(Some(_)) = d.next_frame() {}
        }
    }
}

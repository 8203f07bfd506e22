//! The wire format between `fieldstore server` and the remote frontend (docs/protocol.md).
//!
//! Everything here is sans-I/O or generic over `Read`/`Write`, so the decoder can be fuzzed and
//! unit-tested on byte slices. The decoder is total: whatever the bytes, it returns a typed error
//! and allocates at most what the peer actually sent, never what a header merely announces.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use super::error::RemoteError;
use crate::api::subscribe::{Cursor, Notice, Position, Start};
use crate::api::{ControlAction, ControlIdentifier, ListElement, Location, Operation};
use crate::checksum::{crc32c, crc32c_append, crc32c_combine, Crc32c};
use crate::error_kind::ErrorKind;
use crate::model::request::Request;
use crate::model::schema::SplitKey;
use crate::model::Key;

pub const MAGIC: [u8; 4] = *b"FSTO";
pub const END_MARKER: [u8; 4] = *b"FEND";
/// Versions this build speaks; the handshake picks the highest both sides know.
/// Frame headers of versions `VERSION_MIN..=VERSION_MAX` are read (a hello is always sent with
/// version 1, so an older peer can read it and answer with a clear refusal).
pub const VERSION_MIN: u16 = 1;
pub const VERSION_MAX: u16 = 3;
/// The oldest version a session may use: version 1 answered maintenance requests (where, wipe,
/// stats...) with text lines, which this build no longer makes; version 2 carries typed
/// elements and error kinds; version 3 announces a retrieve's fields (keys, lengths) before
/// its bytes, which the client's reader needs for its size and seeks.
pub const SESSION_VERSION_MIN: u16 = 3;
pub const HEADER_LEN: usize = 24;
pub const TRAILER_LEN: usize = 8;
/// Bytes a frame adds around its payload.
pub const FRAME_OVERHEAD: u64 = (HEADER_LEN + TRAILER_LEN) as u64;
/// Payload limit before the handshake: a hello is a few hundred bytes.
pub const HANDSHAKE_MAX_PAYLOAD: u64 = 64 << 10;
/// Default payload limit once authenticated: the largest GRIB field one archive frame may carry.
pub const DEFAULT_MAX_PAYLOAD: u64 = 1 << 30;
/// Default size of the chunks retrieve and list stream back in.
pub const DEFAULT_CHUNK_SIZE: usize = 10 << 20;

/// A subscription with nothing to say sends an empty `Notices` frame this often, so either side
/// finds a vanished peer; a client hearing nothing for three times this reconnects.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// First allocation for a payload; it doubles only as bytes actually arrive.
const FIRST_STEP: usize = 256 << 10;

/// What a frame carries. The numbers are the wire values and never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MsgType {
    Hello = 1,
    Welcome = 2,
    Error = 3,
    Archive = 16,
    Flush = 17,
    Retrieve = 18,
    List = 19,
    Axes = 20,
    Where = 21,
    Dump = 22,
    Stats = 23,
    Wipe = 24,
    Purge = 25,
    Control = 26,
    Compact = 27,
    Explain = 28,
    /// Follow fields as flushes make them visible (docs/subscribe.md).
    Subscribe = 29,
    /// The full keys a retrieve names, without their data (`Fdb::wanted_fields`).
    Expand = 30,
    /// Values at ranges of grid points, extracted where the data is (`Fdb::extract`).
    Extract = 31,
    Reply = 32,
    Data = 33,
    Entries = 34,
    End = 35,
    /// A retrieve's fields, before its data (version 3).
    Fields = 36,
    /// A subscription's notices, or its start position (docs/subscribe.md).
    Notices = 37,
    /// One notice with its field's bytes (a subscription asked for data).
    NoticeData = 38,
    /// An archived field handed over in a sealed memory file (a Unix connection).
    ArchiveHandover = 39,
    /// One notice with its field handed over in a sealed memory file (a Unix connection).
    NoticeHandover = 40,
}

impl MsgType {
    pub const ALL: [MsgType; 28] = [
        MsgType::Hello,
        MsgType::Welcome,
        MsgType::Error,
        MsgType::Archive,
        MsgType::Flush,
        MsgType::Retrieve,
        MsgType::List,
        MsgType::Axes,
        MsgType::Where,
        MsgType::Dump,
        MsgType::Stats,
        MsgType::Wipe,
        MsgType::Purge,
        MsgType::Control,
        MsgType::Compact,
        MsgType::Explain,
        MsgType::Subscribe,
        MsgType::Expand,
        MsgType::Extract,
        MsgType::Reply,
        MsgType::Data,
        MsgType::Entries,
        MsgType::End,
        MsgType::Fields,
        MsgType::Notices,
        MsgType::NoticeData,
        MsgType::ArchiveHandover,
        MsgType::NoticeHandover,
    ];

    pub fn from_u16(v: u16) -> Option<MsgType> {
        Self::ALL.into_iter().find(|t| *t as u16 == v)
    }

    /// The API operation a request type stands for; `None` for handshake and reply frames.
    pub fn operation(self) -> Option<Operation> {
        Some(match self {
            MsgType::Archive | MsgType::ArchiveHandover => Operation::Archive,
            MsgType::Flush => Operation::Flush,
            MsgType::Retrieve => Operation::Retrieve,
            MsgType::List => Operation::List,
            MsgType::Axes => Operation::Axes,
            MsgType::Where => Operation::Where,
            MsgType::Dump => Operation::Dump,
            MsgType::Stats => Operation::Stats,
            MsgType::Wipe => Operation::Wipe,
            MsgType::Purge => Operation::Purge,
            MsgType::Control => Operation::Control,
            MsgType::Compact => Operation::Compact,
            MsgType::Explain => Operation::Explain,
            MsgType::Subscribe => Operation::Subscribe,
            // The first half of a `retrieve --wait`: locked and counted as a retrieve.
            MsgType::Expand => Operation::Retrieve,
            // Reads fields' values: locked and counted as a retrieve.
            MsgType::Extract => Operation::Retrieve,
            MsgType::Hello
            | MsgType::Welcome
            | MsgType::Error
            | MsgType::Reply
            | MsgType::Data
            | MsgType::Entries
            | MsgType::End
            | MsgType::Fields
            | MsgType::Notices
            | MsgType::NoticeData
            | MsgType::NoticeHandover => return None,
        })
    }

    /// The request frame asking for an operation: every operation has one.
    pub fn request(op: Operation) -> MsgType {
        match op {
            Operation::Archive => MsgType::Archive,
            Operation::Flush => MsgType::Flush,
            Operation::Retrieve => MsgType::Retrieve,
            Operation::List => MsgType::List,
            Operation::Axes => MsgType::Axes,
            Operation::Where => MsgType::Where,
            Operation::Dump => MsgType::Dump,
            Operation::Stats => MsgType::Stats,
            Operation::Wipe => MsgType::Wipe,
            Operation::Purge => MsgType::Purge,
            Operation::Control => MsgType::Control,
            Operation::Compact => MsgType::Compact,
            Operation::Explain => MsgType::Explain,
            Operation::Subscribe => MsgType::Subscribe,
        }
    }

    /// A name for logs and messages: the operation's for a request.
    pub fn op_name(self) -> &'static str {
        if self == MsgType::Expand {
            return "expand";
        }
        if self == MsgType::Extract {
            return "extract";
        }
        if let Some(op) = self.operation() {
            return op.name();
        }
        match self {
            MsgType::Hello => "hello",
            MsgType::Welcome => "welcome",
            MsgType::Error => "error",
            MsgType::Reply => "reply",
            MsgType::Data => "data",
            MsgType::Entries => "entries",
            MsgType::Fields => "fields",
            MsgType::Notices => "notices",
            MsgType::NoticeData => "notice-data",
            MsgType::NoticeHandover => "notice-handover",
            _ => "end",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub version: u16,
    pub kind: MsgType,
    pub request: u64,
    pub length: u64,
}

/// Validates a header before anything is allocated for its payload.
pub fn parse_header(h: &[u8; HEADER_LEN], max_payload: u64) -> Result<FrameHeader, RemoteError> {
    let magic = [h[0], h[1], h[2], h[3]];
    if magic != MAGIC {
        return Err(RemoteError::BadMagic { found: magic });
    }
    let version = u16::from_be_bytes([h[4], h[5]]);
    if !(VERSION_MIN..=VERSION_MAX).contains(&version) {
        return Err(RemoteError::UnsupportedVersion {
            found: version,
            min: VERSION_MIN,
            max: VERSION_MAX,
        });
    }
    let raw_kind = u16::from_be_bytes([h[6], h[7]]);
    let kind = MsgType::from_u16(raw_kind).ok_or(RemoteError::UnknownType(raw_kind))?;
    let mut r = [0u8; 8];
    r.copy_from_slice(&h[8..16]);
    let request = u64::from_be_bytes(r);
    r.copy_from_slice(&h[16..24]);
    let length = u64::from_be_bytes(r);
    if length > max_payload {
        return Err(RemoteError::TooLarge {
            length,
            max: max_payload,
        });
    }
    Ok(FrameHeader {
        version,
        kind,
        request,
        length,
    })
}

fn encode_header(version: u16, kind: MsgType, request: u64, length: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&version.to_be_bytes());
    h[6..8].copy_from_slice(&(kind as u16).to_be_bytes());
    h[8..16].copy_from_slice(&request.to_be_bytes());
    h[16..24].copy_from_slice(&length.to_be_bytes());
    h
}

/// Checks the trailer of a frame whose header and payload are known.
fn check_trailer(
    header: &[u8; HEADER_LEN],
    payload: &[u8],
    trailer: &[u8; TRAILER_LEN],
) -> Result<(), RemoteError> {
    check_summed_trailer(crc32c_append(crc32c(header), payload), trailer)
}

/// Checks a trailer against the checksum computed over the header and payload as they came.
fn check_summed_trailer(computed: u32, trailer: &[u8; TRAILER_LEN]) -> Result<(), RemoteError> {
    let end = [trailer[4], trailer[5], trailer[6], trailer[7]];
    if end != END_MARKER {
        return Err(RemoteError::BadEndMarker { found: end });
    }
    let found = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if computed != found {
        return Err(RemoteError::Checksum { computed, found });
    }
    Ok(())
}

/// Writes one frame whose payload is the concatenation of `parts` (so a field's bytes are sent
/// without being copied behind its metadata). Returns the bytes written. Large parts are written
/// and checksummed in pieces, each summed right after the socket copy read it, while it is still
/// in the CPU's cache, instead of in a second pass over memory.
pub fn write_frame<W: Write + ?Sized>(
    w: &mut W,
    version: u16,
    kind: MsgType,
    request: u64,
    parts: &[&[u8]],
) -> io::Result<u64> {
    let length: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let header = encode_header(version, kind, request, length);
    let mut crc = Crc32c::new();
    crc.update(&header);
    w.write_all(&header)?;
    for piece in parts.iter().flat_map(|p| p.chunks(PIECE)) {
        w.write_all(piece)?;
        crc.update(piece);
    }
    write_trailer(w, crc.value())?;
    Ok(length + FRAME_OVERHEAD)
}

/// Small enough to stay in a core's cache between the copy and the checksum.
const PIECE: usize = 1 << 20;

/// Payloads from this size on are written past the buffer ([`write_frame_direct`]).
pub const DIRECT_FROM: usize = 64 << 10;

/// As [`write_frame`], for a frame with a large part (a field): what `w` buffered goes first,
/// then the frame goes straight to the writer beneath in vectored writes, header, payload
/// pieces and trailer together, so no byte of the payload is copied into a buffer and a field
/// of up to 1 MiB goes in one system call. Each piece is summed just before the socket copy
/// reads it, while it is in the CPU's cache.
///
/// With `last_crc`, the CRC-32C of the last part (a stored field's, checked when it was read),
/// that part is not summed again: the frame's checksum is derived from it.
pub fn write_frame_direct<W: Write>(
    w: &mut io::BufWriter<W>,
    version: u16,
    kind: MsgType,
    request: u64,
    parts: &[&[u8]],
    last_crc: Option<u32>,
) -> io::Result<u64> {
    let length: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let header = encode_header(version, kind, request, length);
    let mut crc = Crc32c::new();
    crc.update(&header);
    let summed = match (last_crc, parts.split_last()) {
        (Some(last), Some((tail, rest))) => {
            for p in rest {
                crc.update(p);
            }
            crc = Crc32c::resume(crc32c_combine(crc.value(), last, tail.len() as u64));
            true
        }
        _ => false,
    };
    w.flush()?;
    let w = w.get_mut();
    let mut batch: Vec<io::IoSlice<'_>> = vec![io::IoSlice::new(&header)];
    let mut batched = 0usize;
    for piece in parts.iter().flat_map(|p| p.chunks(PIECE)) {
        if !summed {
            crc.update(piece);
        }
        batch.push(io::IoSlice::new(piece));
        batched += piece.len();
        if batched >= PIECE {
            write_all_vectored(w, &mut batch)?;
            batch.clear();
            batched = 0;
        }
    }
    let trailer = encode_trailer(crc.value());
    batch.push(io::IoSlice::new(&trailer));
    write_all_vectored(w, &mut batch)?;
    Ok(length + FRAME_OVERHEAD)
}

/// Writes every byte of `bufs`, however many calls the writer takes.
fn write_all_vectored<W: Write>(w: &mut W, bufs: &mut [io::IoSlice<'_>]) -> io::Result<()> {
    let mut bufs = bufs;
    io::IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn encode_trailer(crc: u32) -> [u8; TRAILER_LEN] {
    let mut trailer = [0u8; TRAILER_LEN];
    trailer[0..4].copy_from_slice(&crc.to_be_bytes());
    trailer[4..8].copy_from_slice(&END_MARKER);
    trailer
}

fn write_trailer<W: Write + ?Sized>(w: &mut W, crc: u32) -> io::Result<()> {
    w.write_all(&encode_trailer(crc))
}

/// Reads until `buf` is full; `Ok(false)` if the stream ended before the first byte.
fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<bool, RemoteError> {
    fill_summing(r, buf, None)
}

/// As `fill`, adding each piece to the running checksum `crc` as it arrives, while it is still
/// in the CPU's cache: no second pass over a large payload.
fn fill_summing<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    mut crc: Option<&mut Crc32c>,
) -> Result<bool, RemoteError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(RemoteError::Truncated),
            Ok(n) => {
                if let Some(c) = crc.as_deref_mut() {
                    c.update(&buf[got..got + n]);
                }
                got += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RemoteError::Io(e)),
        }
    }
    Ok(true)
}

/// Reads one frame into `payload` (reused between frames). A stream that ends cleanly between
/// frames is `RemoteError::Closed`.
pub fn read_frame<R: Read>(
    r: &mut R,
    max_payload: u64,
    payload: &mut Vec<u8>,
) -> Result<FrameHeader, RemoteError> {
    read_frame_to(r, max_payload, &mut [], payload).map(|(h, _)| h)
}

/// As `read_frame`, but a non-empty payload that fits in `direct` is read straight into it
/// (`true`), sparing the copy out of `payload`; any other goes to `payload` (`false`).
pub fn read_frame_to<R: Read>(
    r: &mut R,
    max_payload: u64,
    direct: &mut [u8],
    payload: &mut Vec<u8>,
) -> Result<(FrameHeader, bool), RemoteError> {
    let (h, mut crc) = read_header(r, max_payload)?;
    let length = usize::try_from(h.length).map_err(|_| RemoteError::Truncated)?;
    let into_direct = length > 0 && length <= direct.len();
    if into_direct {
        if !fill_summing(r, &mut direct[..length], Some(&mut crc))? {
            return Err(RemoteError::Truncated);
        }
    } else {
        read_payload(r, length, payload, &mut crc)?;
    }
    read_trailer(r, &crc)?;
    Ok((h, into_direct))
}

/// Reads and validates one frame header; the checksum it returns runs over the header, for the
/// payload's pieces to be added to as they are read ([`read_piece`]). A stream that ends cleanly
/// between frames is `RemoteError::Closed`. Lets a receiver take a large payload in pieces
/// instead of whole.
pub(crate) fn read_header<R: Read>(
    r: &mut R,
    max_payload: u64,
) -> Result<(FrameHeader, Crc32c), RemoteError> {
    let mut header = [0u8; HEADER_LEN];
    if !fill(r, &mut header)? {
        return Err(RemoteError::Closed);
    }
    let h = parse_header(&header, max_payload)?;
    let mut crc = Crc32c::new();
    crc.update(&header);
    Ok((h, crc))
}

/// Fills `buf` with the next bytes of a payload, adding them to its checksum.
pub(crate) fn read_piece<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    crc: &mut Crc32c,
) -> Result<(), RemoteError> {
    if buf.is_empty() || fill_summing(r, buf, Some(crc))? {
        Ok(())
    } else {
        Err(RemoteError::Truncated)
    }
}

/// Reads the payload of a frame whose header [`read_header`] read into `payload` (reused
/// between frames), and checks its trailer.
pub(crate) fn read_rest<R: Read>(
    r: &mut R,
    h: &FrameHeader,
    mut crc: Crc32c,
    payload: &mut Vec<u8>,
) -> Result<(), RemoteError> {
    let length = usize::try_from(h.length).map_err(|_| RemoteError::Truncated)?;
    read_payload(r, length, payload, &mut crc)?;
    read_trailer(r, &crc)
}

/// Reads a frame's trailer once its whole payload went through `crc`, and checks it.
pub(crate) fn read_trailer<R: Read>(r: &mut R, crc: &Crc32c) -> Result<(), RemoteError> {
    let mut trailer = [0u8; TRAILER_LEN];
    if !fill(r, &mut trailer)? {
        return Err(RemoteError::Truncated);
    }
    check_summed_trailer(crc.value(), &trailer)
}

/// Grown as bytes arrive (doubling from 256 KiB), so a huge announced length costs nothing up
/// front. The reused buffer only ever grows, so after the first large frame nothing is zeroed,
/// and bytes are read straight into it: one copy out of the socket.
fn read_payload<R: Read>(
    r: &mut R,
    length: usize,
    payload: &mut Vec<u8>,
    crc: &mut Crc32c,
) -> Result<(), RemoteError> {
    let mut have = 0usize;
    while have < length {
        let upto = have + (length - have).min(have.max(FIRST_STEP));
        if payload.len() < upto {
            payload.resize(upto, 0);
        }
        if !fill_summing(r, &mut payload[have..upto], Some(crc))? {
            return Err(RemoteError::Truncated);
        }
        have = upto;
    }
    payload.truncate(length);
    Ok(())
}

/// Decodes the first frame of a byte slice: its header, payload and the bytes it used.
pub fn decode_frame(
    bytes: &[u8],
    max_payload: u64,
) -> Result<(FrameHeader, &[u8], usize), RemoteError> {
    let Some(hb) = bytes.get(..HEADER_LEN) else {
        return Err(RemoteError::Truncated);
    };
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(hb);
    let h = parse_header(&header, max_payload)?;
    // `length <= max_payload` does not make it fit in usize on every target, nor in the slice.
    let end = usize::try_from(h.length)
        .ok()
        .and_then(|l| l.checked_add(HEADER_LEN))
        .ok_or(RemoteError::Truncated)?;
    let total = end.checked_add(TRAILER_LEN).ok_or(RemoteError::Truncated)?;
    let (Some(payload), Some(tb)) = (bytes.get(HEADER_LEN..end), bytes.get(end..total)) else {
        return Err(RemoteError::Truncated);
    };
    let mut trailer = [0u8; TRAILER_LEN];
    trailer.copy_from_slice(tb);
    check_trailer(&header, payload, &trailer)?;
    Ok((h, payload, total))
}

// ---- payloads ----

/// Which stream a connection carries: requests with replies, or archived fields and flushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Control,
    Archive,
}

/// The first frame a client sends (always with header version 1, which every server reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub versions: Vec<u16>,
    pub token: Option<String>,
    pub role: Role,
    pub client: String,
    /// The client can hand fields over and take them in sealed memory files (it connected
    /// through a Unix socket).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handover: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u16,
    pub server: String,
    pub chunk_size: u64,
    /// Fields may be handed over on this connection (`ArchiveHandover`, `NoticeHandover`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handover: bool,
}

/// An error frame: a stable `kind` programs can match on (what went wrong with the request, see
/// [`kinds`]), a message for people, and since version 2 the [`ErrorKind`] of the server-side
/// error, so a client's error has the kind the server's had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
}

impl ErrorReply {
    pub fn new(kind: &str, message: &str, error_kind: ErrorKind) -> ErrorReply {
        ErrorReply {
            kind: kind.into(),
            message: message.into(),
            error_kind: Some(error_kind.as_str().into()),
        }
    }

    /// The kind of the error the server met: as it said, else (an older server, or a kind this
    /// build does not know) from the protocol kind.
    pub fn error_kind(&self) -> ErrorKind {
        if let Some(k) = self.error_kind.as_deref().and_then(|k| k.parse().ok()) {
            return k;
        }
        kinds::error_kind(&self.kind)
    }
}

pub mod kinds {
    use crate::error_kind::ErrorKind;

    pub const AUTH: &str = "auth";
    /// The client is known, but its identity may not do this (docs/authorization.md).
    pub const FORBIDDEN: &str = "forbidden";
    pub const VERSION: &str = "version";
    pub const BUSY: &str = "busy";
    pub const FRAME: &str = "frame";
    pub const BAD_REQUEST: &str = "bad_request";
    pub const NOTHING_MATCHED: &str = "nothing_matched";
    pub const FAILED: &str = "failed";
    pub const SHUTDOWN: &str = "shutdown";

    /// The error kind a protocol kind stands for, when the reply does not say.
    pub fn error_kind(kind: &str) -> ErrorKind {
        match kind {
            AUTH | FORBIDDEN => ErrorKind::Permission,
            VERSION => ErrorKind::Unsupported,
            FRAME | BAD_REQUEST => ErrorKind::BadRequest,
            NOTHING_MATCHED => ErrorKind::NotFound,
            _ => ErrorKind::Remote,
        }
    }
}

/// A MARS request as sent: verb and keywords in order, each with its values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRequest {
    pub verb: Option<String>,
    pub params: Vec<(String, Vec<String>)>,
}

impl From<&Request> for WireRequest {
    fn from(r: &Request) -> Self {
        WireRequest {
            verb: r.verb().map(str::to_string),
            params: r.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect(),
        }
    }
}

impl WireRequest {
    pub fn to_request(&self) -> Request {
        let mut r = Request::new(self.verb.as_deref());
        for (k, v) in &self.params {
            r.set(k, v.clone());
        }
        r
    }
}

/// The payload of every request other than archive and flush; the frame type names the operation
/// and says which of the optional fields it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    pub request: WireRequest,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u8,
    #[serde(default, skip_serializing_if = "is_false")]
    pub include_masked: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub doit: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub identifiers: Vec<String>,
    /// An extraction's grid-point ranges, `[lo, hi)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<(u64, u64)>,
}

/// One field of an extraction on the wire: values `null` where missing (JSON has no NaN; a
/// finite f64 goes through serde_json's shortest round-trip form, so values arrive bit-exact).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireExtraction {
    pub key: Vec<(String, String)>,
    pub ranges: Vec<WireRange>,
    pub bytes_read: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_md5: Option<[u8; 16]>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireRange {
    pub values: Vec<Option<f64>>,
    pub mask: Vec<u64>,
}

impl WireExtraction {
    pub fn from_api(e: &crate::api::Extraction) -> WireExtraction {
        WireExtraction {
            key: e
                .key
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ranges: e
                .ranges
                .iter()
                .map(|r| WireRange {
                    values: r
                        .values
                        .iter()
                        .map(|v| v.is_finite().then_some(*v))
                        .collect(),
                    mask: r.mask.clone(),
                })
                .collect(),
            bytes_read: e.bytes_read,
            grid_md5: e.grid_md5,
        }
    }

    pub fn into_api(self) -> crate::api::Extraction {
        crate::api::Extraction {
            key: crate::model::Key::from_pairs(self.key),
            ranges: self
                .ranges
                .into_iter()
                .map(|r| crate::extract::RangeValues {
                    values: r
                        .values
                        .into_iter()
                        .map(|v| v.unwrap_or(f64::NAN))
                        .collect(),
                    mask: r.mask,
                })
                .collect(),
            bytes_read: self.bytes_read,
            grid_md5: self.grid_md5,
        }
    }
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Query {
    pub fn new(request: &Request) -> Query {
        Query {
            request: request.into(),
            depth: 0,
            include_masked: false,
            doit: false,
            action: None,
            identifiers: Vec::new(),
            ranges: Vec::new(),
        }
    }
}

pub fn action_name(a: ControlAction) -> &'static str {
    match a {
        ControlAction::Lock => "lock",
        ControlAction::Unlock => "unlock",
        ControlAction::Status => "status",
    }
}

pub fn parse_action(s: &str) -> Option<ControlAction> {
    match s {
        "lock" => Some(ControlAction::Lock),
        "unlock" => Some(ControlAction::Unlock),
        "status" => Some(ControlAction::Status),
        _ => None,
    }
}

pub fn parse_identifier(s: &str) -> Option<ControlIdentifier> {
    s.parse::<Operation>()
        .ok()
        .filter(|op| op.is_controllable())
}

pub(crate) fn key_pairs(k: &Key) -> Vec<(String, String)> {
    k.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// What precedes a field's bytes in an archive frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveMeta {
    /// `None`: the server reads the key from the GRIB message.
    pub key: Option<Vec<(String, String)>>,
    /// The key was read from the GRIB by the client (`archive_grib`), not given by the caller.
    #[serde(default, skip_serializing_if = "is_false")]
    pub grib: bool,
}

/// The part of an archive payload before the field's bytes: a u32 length and the metadata.
pub fn encode_archive_prefix(key: Option<&Key>, grib: bool) -> Vec<u8> {
    let meta = ArchiveMeta {
        key: key.map(key_pairs),
        grib,
    };
    // Serialising plain strings and bools cannot fail.
    let json = serde_json::to_vec(&meta).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out
}

/// The metadata of an archive payload (the JSON after its u32 length): the key, if given,
/// and whether the client read it from the GRIB.
pub fn decode_archive_meta(json: &[u8]) -> Result<(Option<Key>, bool), RemoteError> {
    let meta: ArchiveMeta =
        serde_json::from_slice(json).map_err(|e| RemoteError::payload("archive", e))?;
    Ok((meta.key.map(Key::from_pairs), meta.grib))
}

pub fn decode_archive(payload: &[u8]) -> Result<(Option<Key>, bool, &[u8]), RemoteError> {
    let Some(lb) = payload.get(..4) else {
        return Err(RemoteError::payload(
            "archive",
            "shorter than its length prefix",
        ));
    };
    let len = u32::from_be_bytes([lb[0], lb[1], lb[2], lb[3]]) as usize;
    let Some(json) = payload.get(4..4 + len) else {
        return Err(RemoteError::payload(
            "archive",
            format!("metadata length {len} runs past the payload"),
        ));
    };
    let meta: ArchiveMeta =
        serde_json::from_slice(json).map_err(|e| RemoteError::payload("archive", e))?;
    Ok((
        meta.key.map(Key::from_pairs),
        meta.grib,
        &payload[4 + len..],
    ))
}

/// One listed element, as streamed in `Entries` frames (a JSON array of these per frame).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireListElement {
    pub db: Vec<(String, String)>,
    pub index: Vec<(String, String)>,
    pub datum: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<(String, u64, u64)>,
    pub timestamp: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub masked: bool,
}

impl From<&ListElement> for WireListElement {
    fn from(e: &ListElement) -> Self {
        WireListElement {
            db: key_pairs(&e.key.db),
            index: key_pairs(&e.key.index),
            datum: key_pairs(&e.key.datum),
            location: e
                .location
                .as_ref()
                .map(|l| (l.uri.clone(), l.offset, l.length)),
            timestamp: e.timestamp,
            masked: e.masked,
        }
    }
}

impl From<WireListElement> for ListElement {
    fn from(w: WireListElement) -> Self {
        ListElement {
            key: SplitKey {
                db: Key::from_pairs(w.db),
                index: Key::from_pairs(w.index),
                datum: Key::from_pairs(w.datum),
            },
            location: w.location.map(|(uri, offset, length)| Location {
                uri,
                offset,
                length,
            }),
            timestamp: w.timestamp,
            masked: w.masked,
        }
    }
}

/// A `Subscribe` payload: the query (its `request` only) and where to start: `"now"`,
/// `"beginning"` or `{"at": POSITION}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeQuery {
    pub request: WireRequest,
    pub start: Start,
    /// Send each notice with its field's bytes (`NoticeData` frames).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub data: bool,
}

/// The tail of an `ArchiveHandover` payload after its archive prefix, or of a `NoticeHandover`
/// payload after its notice: the field's length in its memory file, and (notices only) the
/// field's CRC-32C.
pub fn handover_tail(length: u64, checksum: Option<u32>) -> Vec<u8> {
    let mut out = length.to_be_bytes().to_vec();
    if let Some(c) = checksum {
        out.extend_from_slice(&c.to_be_bytes());
    }
    out
}

/// An `ArchiveHandover` payload: the archive metadata, and the length of the field in the
/// memory file that came with the frame.
pub fn decode_archive_handover(payload: &[u8]) -> Result<(Option<Key>, bool, u64), RemoteError> {
    let (key, grib, rest) = decode_archive(payload)?;
    let length = <[u8; 8]>::try_from(rest).map_err(|_| {
        RemoteError::payload("archive-handover", "the field's length is not 8 bytes")
    })?;
    Ok((key, grib, u64::from_be_bytes(length)))
}

/// A `NoticeHandover` payload: u32 *m*, *m* bytes of a [`WireNotice`], the field's length (u64)
/// and CRC-32C (u32).
pub fn split_notice_handover(payload: &[u8]) -> Option<(&[u8], u64, u32)> {
    let (notice, rest) = split_notice_data(payload)?;
    let rest: &[u8; 12] = rest.try_into().ok()?;
    let length = u64::from_be_bytes(rest[..8].try_into().ok()?);
    let crc = u32::from_be_bytes(rest[8..].try_into().ok()?);
    Some((notice, length, crc))
}

/// Splits a `NoticeData` payload (u32 *m* big-endian, *m* bytes of a [`WireNotice`], then the
/// field's bytes) into its notice and its field.
pub fn split_notice_data(payload: &[u8]) -> Option<(&[u8], &[u8])> {
    let m = u32::from_be_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let notice = payload.get(4..4usize.checked_add(m)?)?;
    Some((notice, &payload[4 + m..]))
}

/// A `Notices` payload: the first of a subscription carries its resolved start position, the
/// others a batch of notices; one without notices is a keep-alive, carrying the position after
/// everything sent before it (so a subscriber whose request matched nothing for a while still
/// moves on, and a resume does not ask for history long gone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireNotices {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Position>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<WireNotice>,
}

/// One notice: the element as `Entries` frames carry it, its stream and the cursor after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireNotice {
    #[serde(flatten)]
    pub element: WireListElement,
    pub stream: String,
    pub cursor: Cursor,
}

impl From<&Notice> for WireNotice {
    fn from(n: &Notice) -> Self {
        WireNotice {
            element: WireListElement::from(&n.element),
            stream: n.stream.clone(),
            cursor: n.cursor.clone(),
        }
    }
}

impl From<WireNotice> for Notice {
    fn from(w: WireNotice) -> Self {
        Notice {
            element: w.element.into(),
            stream: w.stream,
            cursor: w.cursor,
            data: None,
            checksum: None,
        }
    }
}

/// One field of a retrieve, as announced in `Fields` frames (a JSON array of these per frame)
/// before the data: the client's reader knows its size and field boundaries from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireField {
    pub db: Vec<(String, String)>,
    pub index: Vec<(String, String)>,
    pub datum: Vec<(String, String)>,
    pub length: u64,
    /// The field's archived CRC-32C, when the store keeps one (absent from older v3 servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<u32>,
}

impl WireField {
    pub fn from_span(f: &crate::api::FieldSpan) -> WireField {
        WireField {
            db: key_pairs(&f.key.db),
            index: key_pairs(&f.key.index),
            datum: key_pairs(&f.key.datum),
            length: f.length,
            checksum: f.checksum,
        }
    }

    /// The field as a span starting at `offset`.
    pub fn into_span(self, offset: u64) -> crate::api::FieldSpan {
        crate::api::FieldSpan {
            key: SplitKey {
                db: Key::from_pairs(self.db),
                index: Key::from_pairs(self.index),
                datum: Key::from_pairs(self.datum),
            },
            offset,
            length: self.length,
            checksum: self.checksum,
        }
    }
}

/// The `End` frame of a stream: how much it carried, so a truncated stream is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamEnd {
    pub bytes: u64,
    pub items: u64,
}

pub fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    // Our payload types hold strings, numbers and maps with string keys: serialising cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

pub fn from_json<'a, T: Deserialize<'a>>(
    what: &'static str,
    payload: &'a [u8],
) -> Result<T, RemoteError> {
    serde_json::from_slice(payload).map_err(|e| RemoteError::payload(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: MsgType, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame(&mut v, 1, kind, 7, &[payload]).unwrap();
        v
    }

    #[test]
    fn a_frame_written_in_pieces_checks_out() {
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut framed = Vec::new();
        write_frame(&mut framed, 1, MsgType::Archive, 9, &[b"meta", &body, b""]).unwrap();
        let (h, payload, used) = decode_frame(&framed, 1 << 30).unwrap();
        assert_eq!((h.request, used), (9, framed.len()));
        assert_eq!(&payload[..4], b"meta");
        assert_eq!(&payload[4..], &body[..]);
    }

    /// Takes at most 100 000 bytes a call, so vectored writes are resumed mid-slice.
    struct Stingy(Vec<u8>);

    impl Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(100_000);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(100_000 - n);
                self.0.extend_from_slice(&b[..k]);
                n += k;
                if n == 100_000 {
                    break;
                }
            }
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_written_past_the_buffer_is_the_same_frame() {
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut buffered = Vec::new();
        write_frame(&mut buffered, 1, MsgType::NoticeData, 9, &[b"meta", &body]).unwrap();
        for last_crc in [None, Some(crc32c(&body))] {
            let mut w = io::BufWriter::new(Stingy(Vec::new()));
            // Something buffered before it goes first.
            w.write_all(b"before").unwrap();
            let n = write_frame_direct(
                &mut w,
                1,
                MsgType::NoticeData,
                9,
                &[b"meta", &body],
                last_crc,
            )
            .unwrap();
            w.flush().unwrap();
            let out = w.into_inner().map_err(|_| "flush").unwrap().0;
            assert_eq!(&out[..6], b"before");
            assert_eq!(&out[6..], &buffered[..], "{last_crc:?}");
            assert_eq!(n, buffered.len() as u64);
        }
        // A field whose stored checksum no longer matches its bytes fails the receiver's check.
        let mut w = io::BufWriter::new(Stingy(Vec::new()));
        let wrong = Some(crc32c(&body) ^ 1);
        write_frame_direct(&mut w, 1, MsgType::NoticeData, 9, &[b"meta", &body], wrong).unwrap();
        let out = w.into_inner().map_err(|_| "flush").unwrap().0;
        assert!(matches!(
            decode_frame(&out, 1 << 30),
            Err(RemoteError::Checksum { .. })
        ));
    }

    #[test]
    fn payloads_land_directly_only_when_they_fit_and_are_checked_there_too() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let f = frame(MsgType::Data, &data);
        let (mut direct, mut payload) = (vec![0u8; 200_000], vec![9u8; 5]);
        let (h, landed) = read_frame_to(&mut &f[..], 1 << 20, &mut direct, &mut payload).unwrap();
        assert!(landed);
        assert_eq!(&direct[..h.length as usize], &data[..]);
        let mut small = vec![0u8; 99_999];
        let (_, landed) = read_frame_to(&mut &f[..], 1 << 20, &mut small, &mut payload).unwrap();
        assert!(!landed);
        assert_eq!(payload, data);
        // A reused, longer buffer holds exactly the new payload.
        let short = frame(MsgType::Data, b"abc");
        read_frame_to(&mut &short[..], 1 << 20, &mut [], &mut payload).unwrap();
        assert_eq!(payload, b"abc");
        let mut bad = f.clone();
        bad[HEADER_LEN + 500] ^= 1;
        let e = read_frame_to(&mut &bad[..], 1 << 20, &mut direct, &mut payload).unwrap_err();
        assert!(matches!(e, RemoteError::Checksum { .. }), "{e}");
    }

    #[test]
    fn round_trip_through_slice_and_reader() {
        let f = frame(MsgType::Data, b"hello world");
        let (h, p, used) = decode_frame(&f, 1024).unwrap();
        assert_eq!(
            (h.kind, h.request, p, used),
            (MsgType::Data, 7, &b"hello world"[..], f.len())
        );
        let mut buf = Vec::new();
        let mut r = &f[..];
        let h2 = read_frame(&mut r, 1024, &mut buf).unwrap();
        assert_eq!((h2, buf.as_slice()), (h, &b"hello world"[..]));
        assert!(matches!(
            read_frame(&mut r, 1024, &mut buf),
            Err(RemoteError::Closed)
        ));
    }

    #[test]
    fn split_parts_checksum_like_one_payload() {
        let mut a = Vec::new();
        write_frame(&mut a, 1, MsgType::Archive, 1, &[b"ab", b"", b"cd"]).unwrap();
        let mut b = Vec::new();
        write_frame(&mut b, 1, MsgType::Archive, 1, &[b"abcd"]).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn every_corruption_is_a_typed_error() {
        let good = frame(MsgType::Reply, b"{}");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut f = good.clone();
                    f[0] = b'X';
                    f
                },
                "magic",
            ),
            (
                {
                    let mut f = good.clone();
                    f[5] = 9;
                    f
                },
                "version 9",
            ),
            (
                {
                    let mut f = good.clone();
                    f[7] = 200;
                    f
                },
                "unknown message type 200",
            ),
            (
                {
                    let mut f = good.clone();
                    f[16..24].copy_from_slice(&(1u64 << 60).to_be_bytes());
                    f
                },
                "1152921504606846976 payload bytes",
            ),
            (
                {
                    let mut f = good.clone();
                    f[HEADER_LEN] = b'[';
                    f
                },
                "checksum",
            ),
            (
                {
                    let mut f = good.clone();
                    let n = f.len();
                    f[n - 1] = 0;
                    f
                },
                "end marker",
            ),
            (good[..good.len() - 1].to_vec(), "middle of a frame"),
            (good[..10].to_vec(), "middle of a frame"),
        ];
        for (bytes, want) in cases {
            let e = decode_frame(&bytes, 1 << 20).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
            let mut buf = Vec::new();
            let e = read_frame(&mut &bytes[..], 1 << 20, &mut buf)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e} lacks {want}");
            assert!(
                buf.capacity() < 1 << 20,
                "no allocation for announced bytes"
            );
        }
    }

    #[test]
    fn a_huge_length_allocates_nothing_even_under_a_huge_limit() {
        let mut f = frame(MsgType::Data, b"");
        f.truncate(HEADER_LEN);
        f[16..24].copy_from_slice(&(1u64 << 40).to_be_bytes());
        let mut buf = Vec::new();
        let e = read_frame(&mut &f[..], u64::MAX, &mut buf).unwrap_err();
        assert!(matches!(e, RemoteError::Truncated), "{e}");
        assert!(buf.capacity() <= FIRST_STEP);
    }

    #[test]
    fn requests_keys_and_list_elements_survive_the_wire() {
        let r = crate::model::request::parse_request(
            "retrieve,class=od,param=t/u,step=0/to/12/by/6,grid='1/1'",
        )
        .unwrap();
        let w: WireRequest = from_json("q", &to_json(&WireRequest::from(&r))).unwrap();
        assert_eq!(w.to_request().to_string(), r.to_string());

        let k = Key::parse("{class=od,expver=0001,levelist=}").unwrap();
        let mut p = encode_archive_prefix(Some(&k), true);
        p.extend_from_slice(b"GRIB...7777");
        let (k2, grib, data) = decode_archive(&p).unwrap();
        assert_eq!(
            (k2, grib, data),
            (Some(k.clone()), true, &b"GRIB...7777"[..])
        );
        assert!(decode_archive(&p[..3]).is_err());
        assert!(decode_archive(&[0, 0, 1, 0, b'{']).is_err());

        let e = ListElement {
            key: SplitKey {
                db: k.clone(),
                index: Key::new(),
                datum: k,
            },
            location: Some(Location {
                uri: "file:///x".into(),
                offset: 3,
                length: 9,
            }),
            timestamp: 42,
            masked: true,
        };
        let w: WireListElement = from_json("e", &to_json(&WireListElement::from(&e))).unwrap();
        assert_eq!(ListElement::from(w), e);
    }

    #[test]
    fn extractions_cross_the_wire_bit_exact_with_missing_values() {
        let e = crate::api::Extraction {
            key: Key::from_pairs([("class", "od"), ("step", "6")]),
            ranges: vec![crate::extract::RangeValues {
                values: vec![0.1 + 0.2, f64::NAN, -1e-300, 273.15000000000003],
                mask: vec![0b1101],
            }],
            bytes_read: 42,
            grid_md5: Some([7; 16]),
        };
        let w: WireExtraction = from_json("e", &to_json(&vec![WireExtraction::from_api(&e)]))
            .map(|mut v: Vec<WireExtraction>| v.remove(0))
            .unwrap();
        let back = w.into_api();
        assert_eq!(back.key, e.key);
        assert_eq!(back.bytes_read, 42);
        assert_eq!(back.grid_md5, e.grid_md5);
        let (got, want) = (&back.ranges[0], &e.ranges[0]);
        assert_eq!(got.mask, want.mask);
        for (g, w) in got.values.iter().zip(&want.values) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{g} {w}"
            );
        }
    }

    #[test]
    fn request_types_and_operations_map_both_ways() {
        for op in Operation::ALL {
            let t = MsgType::request(op);
            assert_eq!(t.operation(), Some(op));
            assert_eq!(t.op_name(), op.name());
        }
        let requests = MsgType::ALL
            .iter()
            .filter(|t| t.operation().is_some())
            .count();
        // Every operation's, expand (a retrieve's first half), extract (a partial retrieve) and
        // an archive handed over in shared memory.
        assert_eq!(requests, Operation::ALL.len() + 3);
        assert_eq!(MsgType::from_u16(39), Some(MsgType::ArchiveHandover));
        assert_eq!(
            MsgType::ArchiveHandover.operation(),
            Some(Operation::Archive)
        );
        assert_eq!(MsgType::from_u16(40), Some(MsgType::NoticeHandover));
        assert_eq!(MsgType::NoticeHandover.operation(), None);
        assert_eq!(MsgType::from_u16(30), Some(MsgType::Expand));
        assert_eq!(MsgType::Expand.op_name(), "expand");
        assert_eq!(MsgType::from_u16(31), Some(MsgType::Extract));
        assert_eq!(MsgType::Extract.op_name(), "extract");
        assert_eq!(MsgType::Extract.operation(), Some(Operation::Retrieve));
        assert_eq!(MsgType::Reply.operation(), None);
        // Wire codes never move.
        assert_eq!(MsgType::request(Operation::Wipe) as u16, 24);
        assert_eq!(MsgType::request(Operation::Explain) as u16, 28);
    }

    #[test]
    fn subscribe_queries_and_notices_round_trip() {
        let q = SubscribeQuery {
            request: (&crate::model::request::parse_request("class=od").unwrap()).into(),
            start: Start::Now,
            data: false,
        };
        let text = String::from_utf8(to_json(&q)).unwrap();
        assert!(text.contains("\"start\":\"now\""), "{text}");
        // Older clients send no `data`, and asking for none sends none.
        assert!(!text.contains("data"), "{text}");
        assert_eq!(
            from_json::<SubscribeQuery>("s", text.as_bytes()).unwrap(),
            q
        );
        let at: SubscribeQuery = from_json(
            "s",
            br#"{"request":{"params":[]},"start":{"at":{"streams":{"x":{"epoch":"e","at":3}}}}}"#,
        )
        .unwrap();
        let Start::At(p) = at.start else {
            panic!("not a position: {:?}", at.start)
        };
        assert_eq!(p.streams["x"].at, 3);
        let n = Notice {
            element: ListElement {
                key: SplitKey {
                    db: Key::parse("class=od").unwrap(),
                    index: Key::parse("type=fc").unwrap(),
                    datum: Key::parse("step=6").unwrap(),
                },
                location: None,
                timestamp: 5,
                masked: false,
            },
            stream: "class=od".into(),
            cursor: Cursor {
                epoch: "e".into(),
                at: 4,
                within: 1,
            },
            data: None,
            checksum: None,
        };
        let batch = WireNotices {
            notices: vec![WireNotice::from(&n)],
            ..WireNotices::default()
        };
        let back: WireNotices = from_json("n", &to_json(&batch)).unwrap();
        assert_eq!(Notice::from(back.notices[0].clone()), n);
        assert_eq!(to_json(&WireNotices::default()), b"{}");
        // A notice with its field: u32 length, the notice, the bytes.
        let notice = to_json(&WireNotice::from(&n));
        let mut payload = (notice.len() as u32).to_be_bytes().to_vec();
        payload.extend_from_slice(&notice);
        payload.extend_from_slice(b"GRIB..7777");
        let (w, field) = split_notice_data(&payload).unwrap();
        assert_eq!(Notice::from(from_json::<WireNotice>("n", w).unwrap()), n);
        assert_eq!(field, b"GRIB..7777");
        assert!(split_notice_data(&payload[..3]).is_none());
        assert!(split_notice_data(&[0, 0, 1, 0, b'x']).is_none());
    }

    #[test]
    fn error_replies_carry_the_kind_and_older_ones_still_map() {
        let r = ErrorReply::new(kinds::FAILED, "locked", ErrorKind::Locked);
        let back: ErrorReply = from_json("error", &to_json(&r)).unwrap();
        assert_eq!(back.error_kind(), ErrorKind::Locked);
        let old: ErrorReply =
            from_json("error", br#"{"kind":"nothing_matched","message":"m"}"#).unwrap();
        assert_eq!(old.error_kind(), ErrorKind::NotFound);
        let newer: ErrorReply = from_json(
            "error",
            br#"{"kind":"failed","message":"m","error_kind":"later"}"#,
        )
        .unwrap();
        assert_eq!(newer.error_kind(), ErrorKind::Remote);
        assert_eq!(parse_identifier("wipe"), Some(Operation::Wipe));
        assert_eq!(parse_identifier("flush"), None);
    }
}

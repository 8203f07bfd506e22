//! Reading frames under the memory budget: a frame's header first, then its payload only once
//! the budget has room for it (a connection without room is not read: TCP holds its client
//! back), or read past when it will not be kept.

use std::io::BufRead;

use super::budget::{Lease, Refusal, Share};
use super::connection::Connection;
use super::*;
use crate::checksum::Crc32c;

/// Frames other than requests and archives (a flush) carry a few bytes at most.
pub(super) const SMALL_FRAME: u64 = p::HANDSHAKE_MAX_PAYLOAD;
/// A request on a control connection is a query (JSON): far below this.
const REQUEST_MAX: u64 = 1 << 20;
/// The kind of a wait for memory that ran out: sent with the wire kind `busy`.
pub(super) const BUSY: ErrorKind = ErrorKind::Timeout;

impl Connection<'_> {
    /// The next request on a control connection, its payload in `self.payload` and held under
    /// the budget while served; `None` when the connection ends. A request is a query: larger
    /// than `REQUEST_MAX` is a frame error.
    pub(super) fn next_request<'s>(
        &mut self,
        share: &'s Share,
    ) -> Result<Option<(FrameHeader, Lease<'s>)>, Broken>
    where
        Self: 's,
    {
        let shared: &'s Shared = self.shared;
        loop {
            let Some((h, crc)) = self.next_header(shared.opts.max_payload.min(REQUEST_MAX))? else {
                return Ok(None);
            };
            // What a large request left behind is given back before the next is read.
            if self.payload.capacity() > SMALL_FRAME as usize {
                self.payload = Vec::new();
            }
            let lease = match shared.budget.take(share, h.length, &shared.stopping) {
                Ok(l) => l,
                Err(Refusal::Stopping) => return Ok(None),
                Err(Refusal::Busy(msg)) => {
                    if !self.discard(h.length, crc)? {
                        return Ok(None);
                    }
                    self.send_error_of(h.request, kinds::BUSY, &msg, BUSY)?;
                    continue;
                }
            };
            return Ok(self.read_upto(h, crc, REQUEST_MAX)?.then_some((h, lease)));
        }
    }

    /// The next frame's header; `None` when the client closed between frames or the server is
    /// stopping.
    pub(super) fn next_header(
        &mut self,
        max: u64,
    ) -> Result<Option<(FrameHeader, Crc32c)>, Broken> {
        if self.reader.buffer().is_empty() {
            self.reader.get_mut().at_boundary = true;
        }
        match p::read_header(&mut self.reader, max) {
            Ok((h, crc)) => {
                self.shared
                    .metrics
                    .bytes_in
                    .fetch_add(h.length + p::FRAME_OVERHEAD, Ordering::Relaxed);
                Ok(Some((h, crc)))
            }
            Err(RemoteError::Closed) => Ok(None),
            Err(e) => self.frame_failed(e).map(|()| None),
        }
    }

    /// A frame that went wrong: nothing to do if the client left or the server is stopping;
    /// otherwise an undecodable frame gets an error frame and closes the connection.
    pub(super) fn frame_failed(&mut self, e: RemoteError) -> Result<(), Broken> {
        match e {
            RemoteError::Closed => Ok(()),
            _ if self.reader.get_ref().stopped => Ok(()),
            e @ (RemoteError::Io(_) | RemoteError::Truncated) => Err(e),
            e => {
                self.shared
                    .metrics
                    .frame_errors
                    .fetch_add(1, Ordering::Relaxed);
                warn!("invalid frame, closing the connection: {e}");
                let _ = write_error(&mut self.writer, 0, kinds::FRAME, &e.to_string());
                Err(e)
            }
        }
    }

    /// The next memory file the client sent with a frame, if one came.
    pub(super) fn take_descriptor(&self) -> Option<std::os::fd::OwnedFd> {
        self.reader.get_ref().stream.local()?.take_descriptor()
    }

    /// Reads a small frame's payload into `self.payload` and checks its trailer; `false`: the
    /// connection ends.
    pub(super) fn read_small(&mut self, h: FrameHeader, crc: Crc32c) -> Result<bool, Broken> {
        self.read_upto(h, crc, SMALL_FRAME)
    }

    /// As `read_small`, for frames up to `limit`.
    pub(super) fn read_upto(
        &mut self,
        h: FrameHeader,
        mut crc: Crc32c,
        limit: u64,
    ) -> Result<bool, Broken> {
        if h.length > limit {
            self.frame_failed(RemoteError::TooLarge {
                length: h.length,
                max: limit,
            })?;
            return Ok(false);
        }
        self.payload.resize(h.length as usize, 0);
        let read = p::read_piece(&mut self.reader, &mut self.payload, &mut crc)
            .and_then(|()| p::read_trailer(&mut self.reader, &crc));
        match read {
            Ok(()) => Ok(true),
            Err(e) => self.frame_failed(e).map(|()| false),
        }
    }

    /// Reads past the rest of a frame whose field will not be stored, holding nothing, and
    /// checks its trailer (a damaged frame still closes the connection). `false`: the
    /// connection ends.
    pub(super) fn discard(&mut self, mut left: u64, mut crc: Crc32c) -> Result<bool, Broken> {
        while left > 0 {
            let n = match self.reader.fill_buf() {
                Ok([]) => return self.frame_failed(RemoteError::Truncated).map(|()| false),
                Ok(b) => {
                    let n = (b.len() as u64).min(left) as usize;
                    crc.update(&b[..n]);
                    n
                }
                Err(e) => return self.frame_failed(RemoteError::Io(e)).map(|()| false),
            };
            self.reader.consume(n);
            left -= n as u64;
        }
        match p::read_trailer(&mut self.reader, &crc) {
            Ok(()) => Ok(true),
            Err(e) => self.frame_failed(e).map(|()| false),
        }
    }
}

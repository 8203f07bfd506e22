//! The streaming replies: retrieve, list and subscriptions.

use super::authorize::{request_text, Kept};
use super::budget::{Lease, Refusal, Share};
use super::connection::Connection;
use super::*;

impl Connection<'_> {
    /// Serves a subscription on this connection until the client goes, the subscription fails
    /// or the server stops (the client then resumes elsewhere from its position). Writes block:
    /// a slow subscriber is held back by TCP flow control, holding one batch here, and slows
    /// nobody else. A keep-alive every few seconds finds a vanished client and tells the client
    /// where it stands (commits that matched nothing move it on too).
    pub(super) fn subscribe(&mut self, request: u64) -> Result<bool, Broken> {
        let q = match p::from_json::<p::SubscribeQuery>("subscribe", &self.payload) {
            Ok(q) => q,
            Err(e) => {
                self.send_error(request, kinds::BAD_REQUEST, &e.to_string())?;
                return Ok(false);
            }
        };
        let shared = self.shared;
        let everywhere = self.who.may_everywhere(AuthOp::Retrieve);
        if !everywhere && !self.may_read(request, AuthOp::Retrieve, &q.request.to_request())? {
            return Ok(false);
        }
        let subscribed = if q.data {
            shared
                .fdb
                .subscribe_with_data(&q.request.to_request(), &q.start)
        } else {
            shared.fdb.subscribe(&q.request.to_request(), &q.start)
        };
        let mut sub = match subscribed {
            Ok(s) => s,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let metrics = &shared.metrics;
        metrics.subscriptions_open.fetch_add(1, Ordering::Relaxed);
        struct Open<'a>(&'a Metrics);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                self.0.subscriptions_open.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _open = Open(metrics);
        let first = p::WireNotices {
            start: Some(sub.position()),
            ..p::WireNotices::default()
        };
        self.send(MsgType::Notices, request, &[&p::to_json(&first)])?;
        self.writer.flush()?;
        let chunk = shared.opts.chunk_size.clamp(1, NOTICE_BATCH_BYTES);
        let share = Share::default();
        let mut last_sent = Instant::now();
        loop {
            if shared.stopping.load(Ordering::SeqCst) {
                return Ok(true);
            }
            let mut batch = Vec::with_capacity(1024);
            let mut count = 0u64;
            let mut wait = POLL;
            loop {
                // A field's bytes are read only with memory from the budget for them.
                let (mut lease, mut refused) = (None, false);
                let next = if q.data {
                    sub.next_admitted(wait, &mut |size| {
                        lease = shared.budget.try_take(&share, size);
                        refused = lease.is_none();
                        !refused
                    })
                } else {
                    sub.next_within(wait)
                };
                match next {
                    // Outside the grants: passed over, as if it matched nothing.
                    Ok(Some(n))
                        if !everywhere && !self.sees(AuthOp::Retrieve, &n.element.key.db) =>
                    {
                        wait = Duration::ZERO;
                    }
                    Ok(Some(n)) if q.data => {
                        self.send_notice_data(request, n, Admitted { lease, refused }, &share)?;
                        last_sent = Instant::now();
                        wait = Duration::ZERO;
                    }
                    Ok(Some(n)) => {
                        batch.push(if count == 0 { b'[' } else { b',' });
                        batch.extend_from_slice(&p::to_json(&p::WireNotice::from(&n)));
                        count += 1;
                        // Take what is ready now, up to a batch.
                        wait = Duration::ZERO;
                        if batch.len() >= chunk {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // The notices already taken go first: they are the client's.
                        if count > 0 {
                            self.send_notices(request, &mut batch, count)?;
                        }
                        self.send_api_error(request, &e)?;
                        return Ok(false);
                    }
                }
            }
            if count > 0 {
                self.send_notices(request, &mut batch, count)?;
                last_sent = Instant::now();
            } else if self.client_closed() {
                // Its subscription ended: free what it holds now, not at the next keep-alive.
                return Ok(true);
            } else if last_sent.elapsed() >= p::KEEPALIVE {
                // Everything taken was sent: this is where the client stands once it read it.
                let alive = p::WireNotices {
                    position: Some(sub.position()),
                    ..p::WireNotices::default()
                };
                self.send(MsgType::Notices, request, &[&p::to_json(&alive)])?;
                self.writer.flush()?;
                last_sent = Instant::now();
            }
        }
    }

    /// One notice with its field's bytes: those the subscription read, else retrieved here (a
    /// composed store's subscription carries none). A field gone meanwhile goes as a plain
    /// notice: the client's own retrieve then says what happened to it. So does a field the
    /// memory budget has no room for now (`Budget::try_take`): a subscriber that stops reading
    /// holds its field while the write blocks, so unbudgeted, 200 such subscribers of 1 GiB
    /// fields would hold 200 GiB. The client's retrieve then fetches it in budgeted chunks.
    pub(super) fn send_notice_data(
        &mut self,
        request: u64,
        mut n: Notice,
        admitted: Admitted<'_>,
        share: &Share,
    ) -> Result<(), Broken> {
        let shared = self.shared;
        let withheld = || {
            shared
                .metrics
                .notices_without_data
                .fetch_add(1, Ordering::Relaxed);
        };
        let checksum = n.checksum.take();
        let (data, _lease) = match n.data.take() {
            Some(d) => (Some(d), admitted.lease),
            None if admitted.refused => {
                withheld();
                (None, None)
            }
            // Not carried: retrieved here, if where it is (so its size) is known.
            None => match n.element.location.as_ref().map(|l| l.length) {
                None => (None, None),
                Some(size) => match shared.budget.try_take(share, size) {
                    Some(lease) => (
                        self.retrieve_noticed(&n).map(bytes::Bytes::from),
                        Some(lease),
                    ),
                    None => {
                        withheld();
                        (None, None)
                    }
                },
            },
        };
        let notice = p::to_json(&p::WireNotice::from(&n));
        let mapping = data
            .as_ref()
            .filter(|_| self.handover)
            .and_then(crate::remote::handover::mapping_of);
        if let (Some(m), Some(d)) = (mapping, &data) {
            let checksum = checksum.unwrap_or_else(|| crate::checksum::crc32c(d));
            let len = (notice.len() as u32).to_be_bytes();
            let tail = p::handover_tail(d.len() as u64, Some(checksum));
            self.writer.flush()?;
            let mut frame = Vec::with_capacity(notice.len() + 64);
            let n = p::write_frame(
                &mut frame,
                self.version,
                MsgType::NoticeHandover,
                request,
                &[&len, &notice, &tail],
            )?;
            if let Some(local) = self.writer.get_ref().stream.local() {
                local.send_with_descriptor(&[&frame], m.fd())?;
            }
            let metrics = &shared.metrics;
            metrics.bytes_out.fetch_add(n, Ordering::Relaxed);
            metrics.notices_sent.fetch_add(1, Ordering::Relaxed);
            metrics.handed_over_out.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        match data {
            Some(d) => {
                let len = (notice.len() as u32).to_be_bytes();
                // Sent from the stored buffer, framed with the checksum its read checked: a
                // field damaged since fails the subscriber's frame check.
                self.send_summed(MsgType::NoticeData, request, &[&len, &notice, &d], checksum)?;
                self.writer.flush()?;
                shared.metrics.notices_sent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            None => {
                let mut batch = vec![b'['];
                batch.extend_from_slice(&notice);
                self.send_notices(request, &mut batch, 1)
            }
        }
    }

    pub(super) fn retrieve_noticed(&self, n: &Notice) -> Option<Vec<u8>> {
        let mut r = Request::new(Some("retrieve"));
        let k = &n.element.key;
        for (kw, v) in k.db.iter().chain(k.index.iter()).chain(k.datum.iter()) {
            if !v.is_empty() {
                r.set(kw, vec![v.to_string()]);
            }
        }
        let mut reader = self.shared.fdb.retrieve(&r).ok()?;
        let want = n.element.location.as_ref().map(|l| l.length);
        let fields = reader.fields();
        if fields.len() != 1 || want.is_some_and(|w| fields[0].length != w) {
            return None;
        }
        let mut buf = Vec::with_capacity(usize::try_from(fields[0].length).ok()?);
        reader.read_to_end(&mut buf).ok()?;
        Some(buf)
    }

    /// Whether the client closed its end (a subscriber's client sends nothing once subscribed).
    pub(super) fn client_closed(&self) -> bool {
        let s = &self.reader.get_ref().stream;
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let r = s.peek(&mut [0u8; 1]);
        let _ = s.set_nonblocking(false);
        match r {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        }
    }

    pub(super) fn send_notices(
        &mut self,
        request: u64,
        batch: &mut Vec<u8>,
        count: u64,
    ) -> Result<(), Broken> {
        batch.push(b']');
        let mut body = Vec::with_capacity(batch.len() + 16);
        body.extend_from_slice(b"{\"notices\":");
        body.extend_from_slice(batch);
        body.push(b'}');
        self.send(MsgType::Notices, request, &[&body])?;
        self.writer.flush()?;
        self.shared
            .metrics
            .notices_sent
            .fetch_add(count, Ordering::Relaxed);
        Ok(())
    }

    /// Streams the fields in `Data` frames. A reader thread fills chunks from the store while
    /// this one writes the previous chunk: a channel of one chunk, and two spare buffers cycling
    /// back, bound the memory to three chunks however slow the client.
    /// Extraction where the data is: only the values travel.
    pub(super) fn extract(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let req = q.request.to_request();
        let everywhere = self.who.may_everywhere(AuthOp::Retrieve);
        if !everywhere && !self.may_read(request, AuthOp::Retrieve, &req)? {
            return Ok(false);
        }
        let ranges: Vec<std::ops::Range<u64>> = q.ranges.iter().map(|&(a, b)| a..b).collect();
        match self.shared.fdb.extract(&req, &ranges) {
            Ok(mut fields) => {
                if !everywhere {
                    // A grant names database keywords, which every field's full key holds.
                    let before = fields.len();
                    fields.retain(|f| self.who.may(AuthOp::Retrieve, &f.key));
                    if before > 0 && fields.is_empty() {
                        let msg = format!(
                            "identity '{}' may not retrieve {}: its grants cover none of the {before} fields it names ({})",
                            self.who.name,
                            request_text(&req),
                            self.who.grants_for(AuthOp::Retrieve)
                        );
                        self.refuse(request, AuthOp::Retrieve, None, &msg)?;
                        return Ok(false);
                    }
                }
                let wire: Vec<p::WireExtraction> =
                    fields.iter().map(p::WireExtraction::from_api).collect();
                self.send(MsgType::Reply, request, &[&p::to_json(&wire)])?;
                self.writer.flush()?;
                Ok(true)
            }
            Err(e) => {
                self.send_api_error(request, &e)?;
                Ok(false)
            }
        }
    }

    pub(super) fn retrieve(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let shared = self.shared;
        let req = q.request.to_request();
        let everywhere = self.who.may_everywhere(AuthOp::Retrieve);
        if !everywhere && !self.may_read(request, AuthOp::Retrieve, &req)? {
            return Ok(false);
        }
        let stream = match shared.fdb.retrieve(&req) {
            Ok(s) => s,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let stream = if everywhere {
            stream
        } else {
            let who = self.who.clone();
            let (kept, dropped) = Kept::wrap(stream, |f| who.may(AuthOp::Retrieve, &f.key.db));
            if dropped > 0 && kept.fields().is_empty() {
                let msg = format!(
                    "identity '{}' may not retrieve {}: its grants cover none of the {dropped} fields it names ({})",
                    self.who.name,
                    request_text(&req),
                    self.who.grants_for(AuthOp::Retrieve)
                );
                self.refuse(request, AuthOp::Retrieve, None, &msg)?;
                return Ok(false);
            }
            kept
        };
        // No chunk larger than what is retrieved: a small retrieve holds little.
        let total: u64 = stream.fields().iter().map(|f| f.length).sum();
        let chunk = shared
            .opts
            .chunk_size
            .min(usize::try_from(total).unwrap_or(usize::MAX))
            .max(1);
        // Three chunks in flight (see above), from the memory budget.
        let share = Share::default();
        let Some(_lease) = self.memory(request, &share, 3 * chunk as u64)? else {
            return Ok(false);
        };
        // The fields first, in frames of about a chunk: the client's reader has its size and
        // field boundaries before the first byte.
        let mut batch = Vec::with_capacity(chunk.min(1 << 20) + 1024);
        let fields = stream.fields();
        for (i, f) in fields.iter().enumerate() {
            batch.push(if batch.is_empty() { b'[' } else { b',' });
            // Serialising strings and numbers cannot fail.
            let _ = serde_json::to_writer(&mut batch, &p::WireField::from_span(f));
            if batch.len() >= chunk || i + 1 == fields.len() {
                batch.push(b']');
                self.send(MsgType::Fields, request, &[&batch])?;
                batch.clear();
            }
        }
        let (full_tx, full_rx) = sync_channel::<io::Result<Vec<u8>>>(1);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(2);
        std::thread::scope(|s| {
            // Owned here, so that leaving the scope early (a write failed) drops it before the
            // scope joins the reader, whose blocked send then fails instead of waiting forever.
            let full_rx = full_rx;
            s.spawn(move || produce(stream, chunk, full_tx, empty_rx));
            let (mut bytes, mut items) = (0u64, 0u64);
            for filled in full_rx.iter() {
                match filled {
                    Ok(buf) => {
                        // A write error ends the scope; dropping the receiver stops the reader.
                        self.send(MsgType::Data, request, &[&buf])?;
                        bytes += buf.len() as u64;
                        items += 1;
                        let _ = empty_tx.try_send(buf);
                    }
                    Err(e) => {
                        let msg =
                            format!("retrieve failed after {bytes} bytes: {}", error_chain(&e));
                        // The store's error travels inside the I/O error of its stream.
                        let kind = e
                            .get_ref()
                            .and_then(|inner| inner.downcast_ref::<ApiError>())
                            .map_or(ErrorKind::Io, ApiError::kind);
                        self.send_error_of(request, kinds::FAILED, &msg, kind)?;
                        return Ok(false);
                    }
                }
            }
            let end = p::to_json(&StreamEnd { bytes, items });
            self.send(MsgType::End, request, &[&end])?;
            self.writer.flush()?;
            Ok(true)
        })
    }

    pub(super) fn list(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let options = ListOptions {
            include_masked: q.include_masked,
            depth: if q.depth == 0 { 3 } else { q.depth.clamp(1, 3) },
        };
        let shared = self.shared;
        let req = q.request.to_request();
        let everywhere = self.who.may_everywhere(AuthOp::List);
        if !everywhere && !self.may_read(request, AuthOp::List, &req)? {
            return Ok(false);
        }
        let iter = match shared.fdb.list(&req, options) {
            Ok(i) => i,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let chunk = shared.opts.chunk_size.max(1);
        // A batch grows to a chunk (and one element more).
        let share = Share::default();
        let Some(_lease) = self.memory(request, &share, chunk as u64 + (64 << 10))? else {
            return Ok(false);
        };
        let mut batch = Vec::with_capacity(chunk.min(1 << 20) + 1024);
        let (mut in_batch, mut items, mut bytes) = (0u64, 0u64, 0u64);
        for el in iter {
            let el = match el {
                Ok(el) if !everywhere && !self.sees(AuthOp::List, &el.key.db) => continue,
                Ok(el) => el,
                Err(e) => {
                    self.send_api_error(request, &e)?;
                    return Ok(false);
                }
            };
            batch.push(if in_batch == 0 { b'[' } else { b',' });
            batch.extend_from_slice(&p::to_json(&WireListElement::from(&el)));
            in_batch += 1;
            items += 1;
            if batch.len() >= chunk {
                batch.push(b']');
                self.send(MsgType::Entries, request, &[&batch])?;
                bytes += batch.len() as u64;
                batch.clear();
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            batch.push(b']');
            self.send(MsgType::Entries, request, &[&batch])?;
            bytes += batch.len() as u64;
        }
        let end = p::to_json(&StreamEnd { bytes, items });
        self.send(MsgType::End, request, &[&end])?;
        self.writer.flush()?;
        Ok(true)
    }
}

/// What the budget said of a subscriber's field before its bytes were read.
pub(super) struct Admitted<'a> {
    /// Memory for the bytes read, held until they are sent.
    lease: Option<Lease<'a>>,
    /// The budget had no room: the bytes were not read.
    refused: bool,
}

impl Connection<'_> {
    /// Memory for a streamed reply from the budget, waiting for it; `None` once the request
    /// was answered with why there is none.
    fn memory<'s>(
        &mut self,
        request: u64,
        share: &'s Share,
        bytes: u64,
    ) -> Result<Option<Lease<'s>>, Broken>
    where
        Self: 's,
    {
        let shared: &'s Shared = self.shared;
        match shared.budget.take(share, bytes, &shared.stopping) {
            Ok(l) => Ok(Some(l)),
            Err(Refusal::Busy(msg)) => {
                self.send_error_of(request, kinds::BUSY, &msg, ErrorKind::Timeout)?;
                Ok(None)
            }
            Err(Refusal::Stopping) => {
                let msg = "the server is shutting down; retry on another";
                self.send_error(request, kinds::SHUTDOWN, msg)?;
                Ok(None)
            }
        }
    }
}

/// Fills chunks from the store's stream until it ends or the writer goes away.
fn produce(
    mut stream: Box<dyn crate::api::DataReader>,
    chunk: usize,
    full: SyncSender<io::Result<Vec<u8>>>,
    empty: Receiver<Vec<u8>>,
) {
    loop {
        // A recycled buffer is resized, not cleared: only growth is zeroed.
        let mut buf = empty.try_recv().unwrap_or_default();
        buf.resize(chunk, 0);
        match crate::fill::read_full(&mut *stream, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                buf.truncate(n);
                if full.send(Ok(buf)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = full.send(Err(e));
                return;
            }
        }
    }
}

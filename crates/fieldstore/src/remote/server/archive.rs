//! Archive connections: fields stored as they arrive, a flush answers for the batch.

use super::connection::Connection;
use super::*;

impl Connection<'_> {
    /// Archive frames are applied as they arrive, without replies; a flush answers for all of
    /// them. After an archive error the rest of the batch is skipped, and the flush reports the
    /// error and discards the batch, so a failed batch leaves nothing half-visible.
    ///
    /// Receiving and storing overlap: this thread reads the next frame while an archiver thread
    /// stores the previous one (at most two fields in flight, buffers recycled), so a large
    /// field's copy off the socket and its write to the store do not wait for each other.
    pub(super) fn archive_loop(&mut self) -> Result<(), Broken> {
        let shared = self.shared;
        let max = shared.opts.max_payload;
        let (jobs, inbox) = sync_channel::<Job>(2);
        let (recycle, spare) = sync_channel::<Vec<u8>>(4);
        std::thread::scope(|scope| {
            // The archiver logs under this connection's span, like the rest of it.
            let span = tracing::Span::current();
            let who = self.who.clone();
            let archiver = scope.spawn(move || {
                let _entered = span.enter();
                archiver(shared, &who, inbox, recycle)
            });
            let result = loop {
                let h = match self.next_frame(max) {
                    Ok(Some(h)) => h,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                match h.kind {
                    MsgType::Archive => {
                        let next = spare.try_recv().unwrap_or_default();
                        let field = std::mem::replace(&mut self.payload, next);
                        if jobs.send(Job::Field(field)).is_err() {
                            break Ok(());
                        }
                    }
                    MsgType::Flush => {
                        let started = Instant::now();
                        let (tx, rx) = sync_channel(1);
                        let outcome = match jobs.send(Job::Flush(tx)) {
                            Ok(()) => rx.recv().unwrap_or_else(|_| Err((0, archiver_stopped()))),
                            Err(_) => Err((0, archiver_stopped())),
                        };
                        let sent = match &outcome {
                            Ok(pending) => {
                                info!(fields = pending, elapsed = ?started.elapsed(), "flushed");
                                self.reply(h.request, &p::to_json(pending))
                            }
                            Err((pending, (kind, msg))) => {
                                warn!(fields = pending, "flush failed, batch discarded: {msg}");
                                self.send_error_of(
                                    h.request,
                                    kinds::FAILED,
                                    &format!(
                                        "{msg} (nothing archived since the last flush was stored)"
                                    ),
                                    *kind,
                                )
                            }
                        };
                        shared
                            .metrics
                            .record(h.kind, started.elapsed(), outcome.is_ok());
                        if let Err(e) = sent {
                            break Err(e);
                        }
                    }
                    other => {
                        let msg = format!(
                            "a {} frame on an archive connection (only archive and flush go here)",
                            other.op_name()
                        );
                        if let Err(e) = self.send_error(h.request, kinds::BAD_REQUEST, &msg) {
                            break Err(e);
                        }
                    }
                }
            };
            // No more jobs: the archiver discards what was not flushed and ends.
            drop(jobs);
            let _ = archiver.join();
            result
        })
    }
}

/// What the receiving thread hands the archiver.
enum Job {
    /// One archive frame's payload.
    Field(Vec<u8>),
    /// Make the batch durable and visible; answers with how many fields it held, or why not.
    Flush(SyncSender<Result<u64, (u64, Failure)>>),
}

/// Why a batch failed: the kind of the first error, and its message.
type Failure = (ErrorKind, String);

fn archiver_stopped() -> Failure {
    (ErrorKind::Internal, "the archiver stopped".to_string())
}

/// Stores the fields of one archive connection in order and answers its flushes. When the jobs
/// end without a flush (the client went away), the batch is dropped unflushed: never visible.
fn archiver(shared: &Shared, who: &Identity, inbox: Receiver<Job>, recycle: SyncSender<Vec<u8>>) {
    let mut fdb: Option<Box<dyn Fdb>> = None;
    let mut pending = 0u64;
    let mut failed: Option<Failure> = None;
    for job in inbox {
        match job {
            Job::Field(payload) => {
                let started = Instant::now();
                pending += 1;
                if failed.is_none() {
                    if let Err((kind, e)) = archive_one(shared, who, &mut fdb, &payload) {
                        failed = Some((kind, format!("field {pending} since the last flush: {e}")));
                    }
                }
                shared
                    .metrics
                    .record(MsgType::Archive, started.elapsed(), failed.is_none());
                let _ = recycle.try_send(payload);
            }
            Job::Flush(answer) => {
                let outcome = match failed.take() {
                    Some(msg) => Err(msg),
                    None => match &fdb {
                        Some(f) => f.flush().map_err(|e| (e.kind(), error_chain(&e))),
                        None => Ok(()),
                    },
                };
                let outcome = match outcome {
                    Ok(()) => Ok(pending),
                    Err(msg) => {
                        // Whatever state the handle is in, the batch must not become visible.
                        fdb = None;
                        shared
                            .metrics
                            .discarded_fields
                            .fetch_add(pending, Ordering::Relaxed);
                        Err((pending, msg))
                    }
                };
                pending = 0;
                let _ = answer.send(outcome);
            }
        }
    }
    if pending > 0 {
        shared
            .metrics
            .discarded_fields
            .fetch_add(pending, Ordering::Relaxed);
        warn!(
            fields = pending,
            "client went away without flushing; its unflushed fields are discarded"
        );
    }
}

fn archive_one(
    shared: &Shared,
    who: &Identity,
    fdb: &mut Option<Box<dyn Fdb>>,
    payload: &[u8],
) -> Result<(), Failure> {
    let (key, grib, data) =
        p::decode_archive(payload).map_err(|e| (ErrorKind::BadRequest, e.to_string()))?;
    super::authorize::may_archive(shared, who, key.as_ref())?;
    let f = match fdb {
        Some(f) => f,
        None => fdb.insert(
            (shared.factory)(who.records_creator.then_some(who.name.as_str()))
                .map_err(|e| (e.kind(), error_chain(&e)))?,
        ),
    };
    let r = match (key, grib) {
        (Some(k), true) => f.archive_grib(&k, data),
        (k, _) => f.archive(k.as_ref(), data),
    };
    r.map_err(|e| (e.kind(), error_chain(&e)))
}

//! What the connection's identity may see and change (docs/authorization.md): refusals counted,
//! logged and answered; changes checked on every database they touch before any is done; reads
//! narrowed to what the grants cover.

use super::connection::Connection;
use super::*;
use crate::api::{AxesMap, DataReader, FieldSpan};
use crate::model::Key;

impl Connection<'_> {
    /// Counts, logs and answers a refusal.
    pub(super) fn refuse(
        &mut self,
        request: u64,
        op: AuthOp,
        db: Option<&Key>,
        message: &str,
    ) -> Result<(), Broken> {
        self.shared.metrics.count_refusal(&self.who.name, op);
        let db = db.map(super::super::auth::key_text).unwrap_or_default();
        warn!(identity = %self.who.name, op = %op, db = %db, "refused: {message}");
        self.send_error(request, kinds::FORBIDDEN, message)
    }

    /// Refuses a read the identity's grants for `op` cannot reach at all; `Ok(false)` once
    /// answered.
    pub(super) fn may_read(
        &mut self,
        request: u64,
        op: AuthOp,
        req: &Request,
    ) -> Result<bool, Broken> {
        if self.who.may_reach(op, req) {
            return Ok(true);
        }
        let msg = format!(
            "identity '{}' may not {op} {}: its grants cover none of the databases it names ({})",
            self.who.name,
            request_text(req),
            self.who.grants_for(op)
        );
        self.refuse(request, op, None, &msg)?;
        Ok(false)
    }

    /// Checks a change (wipe, purge, compact, control lock/unlock) against every database it
    /// touches before anything is done, so a refused request changes nothing. `Ok(false)` once
    /// answered. A database created between this check and the change is not covered: the
    /// change works on the databases that exist when it runs, as any wipe does.
    pub(super) fn may_change(
        &mut self,
        request: u64,
        op: AuthOp,
        req: &Request,
    ) -> Result<bool, Broken> {
        if self.who.is_operator() {
            return Ok(true);
        }
        let dbs = match self.shared.fdb.where_(req) {
            Ok(d) => d,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        for d in &dbs {
            if let Some(why) = self.who.refusal(op, &d.db, d.creator.as_deref()) {
                self.refuse(request, op, Some(&d.db), &why)?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether the identity may do `op` on this database.
    pub(super) fn sees(&self, op: AuthOp, db: &Key) -> bool {
        self.who.may(op, db)
    }

    /// The axes of the databases the identity may list, merged.
    pub(super) fn covered_axes(&self, req: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        covered_axes(&*self.shared.fdb, &self.who, req, depth)
    }
}

/// The axes of the databases `who` may list, merged (for a server's connection of any kind).
pub(crate) fn covered_axes(
    fdb: &dyn Fdb,
    who: &Identity,
    req: &Request,
    depth: u8,
) -> Result<AxesMap, ApiError> {
    let mut merged = AxesMap::new();
    for d in fdb.where_(req)? {
        if !who.may(AuthOp::List, &d.db) {
            continue;
        }
        for (kw, values) in fdb.axes(&narrowed(req, &d.db), depth)? {
            merged.entry(kw).or_default().extend(values);
        }
    }
    Ok(merged)
}

/// Refuses (counted and logged) a field outside the identity's archive grants: the archiver
/// then fails the batch, as for any archive error. A field sent without its key would be
/// decoded here only to check it: an identity limited to some databases must send keys (the
/// `fieldstore` client always does).
pub(super) fn may_archive(
    shared: &Shared,
    who: &Identity,
    key: Option<&Key>,
) -> Result<(), (ErrorKind, String)> {
    if who.may_everywhere(AuthOp::Archive) {
        return Ok(());
    }
    let why = match key {
        Some(k) if who.may(AuthOp::Archive, k) => return Ok(()),
        Some(k) => format!(
            "identity '{}' may not archive {}: its grants do not cover it ({})",
            who.name,
            super::super::auth::key_text(k),
            who.grants_for(AuthOp::Archive)
        ),
        None => format!(
            "identity '{}' may archive only into some databases, and sent a field without its key",
            who.name
        ),
    };
    shared.metrics.count_refusal(&who.name, AuthOp::Archive);
    let db = key.map(super::super::auth::key_text).unwrap_or_default();
    warn!(identity = %who.name, op = %AuthOp::Archive, db = %db, "refused: {why}");
    Err((ErrorKind::Permission, why))
}

/// The request restricted to one database.
fn narrowed(req: &Request, db: &Key) -> Request {
    let mut r = req.clone();
    for (kw, v) in db.iter() {
        r.set(kw, vec![v.to_string()]);
    }
    r
}

/// A request as users write it, for messages.
pub(crate) fn request_text(req: &Request) -> String {
    req.iter()
        .map(|(k, v)| format!("{k}={}", v.join("/")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A retrieve's stream with the fields outside the identity's grants skipped: their bytes are
/// never read, and the client is told only of the others.
pub(crate) struct Kept {
    inner: Box<dyn DataReader>,
    /// Each field's length and whether it is kept, in stream order.
    spans: Vec<(u64, bool)>,
    next: usize,
    left: u64,
    fields: Vec<FieldSpan>,
}

impl Kept {
    /// The stream with the fields `keep` refuses left out, and how many were left out (the
    /// stream itself, untouched, when none is).
    pub(crate) fn wrap(
        inner: Box<dyn DataReader>,
        keep: impl Fn(&FieldSpan) -> bool,
    ) -> (Box<dyn DataReader>, usize) {
        let spans: Vec<(u64, bool)> = inner.fields().iter().map(|f| (f.length, keep(f))).collect();
        let dropped = spans.iter().filter(|s| !s.1).count();
        if dropped == 0 {
            return (inner, 0);
        }
        let mut offset = 0;
        let fields = inner
            .fields()
            .iter()
            .zip(&spans)
            .filter(|(_, s)| s.1)
            .map(|(f, _)| {
                let mut f = f.clone();
                f.offset = offset;
                offset += f.length;
                f
            })
            .collect();
        let kept = Kept {
            inner,
            spans,
            next: 0,
            left: 0,
            fields,
        };
        (Box::new(kept), dropped)
    }
}

impl Read for Kept {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.left == 0 {
            let Some(&(len, keep)) = self.spans.get(self.next) else {
                return Ok(0);
            };
            self.next += 1;
            if keep {
                self.left = len;
            } else {
                let at = self.inner.tell();
                if self.inner.skip(len)? != at + len {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the store's stream ended inside a field",
                    ));
                }
            }
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the store's stream ended inside a field",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

impl io::Seek for Kept {
    fn seek(&mut self, _: io::SeekFrom) -> io::Result<u64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the server streams a narrowed retrieve once, front to back",
        ))
    }
}

impl DataReader for Kept {
    fn size(&self) -> u64 {
        self.fields.iter().map(|f| f.length).sum()
    }

    fn tell(&self) -> u64 {
        let done: u64 = self.spans[..self.next]
            .iter()
            .filter(|s| s.1)
            .map(|s| s.0)
            .sum();
        done - self.left
    }

    fn fields(&self) -> &[FieldSpan] {
        &self.fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schema::SplitKey;
    use std::io::Cursor;

    /// Fields laid end to end in memory.
    struct Bytes {
        data: Cursor<Vec<u8>>,
        fields: Vec<FieldSpan>,
    }

    impl Read for Bytes {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.data.read(buf)
        }
    }

    impl io::Seek for Bytes {
        fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
            self.data.seek(to)
        }
    }

    impl DataReader for Bytes {
        fn size(&self) -> u64 {
            self.data.get_ref().len() as u64
        }
        fn tell(&self) -> u64 {
            self.data.position()
        }
        fn fields(&self) -> &[FieldSpan] {
            &self.fields
        }
    }

    fn stream(parts: &[(&str, &str)]) -> Box<dyn DataReader> {
        let (mut data, mut fields) = (Vec::new(), Vec::new());
        for (db, bytes) in parts {
            fields.push(FieldSpan {
                key: SplitKey {
                    db: Key::from_pairs([("class", *db)]),
                    index: Key::new(),
                    datum: Key::new(),
                },
                offset: data.len() as u64,
                length: bytes.len() as u64,
                checksum: None,
            });
            data.extend_from_slice(bytes.as_bytes());
        }
        Box::new(Bytes {
            data: Cursor::new(data),
            fields,
        })
    }

    #[test]
    fn a_narrowed_retrieve_streams_only_the_kept_fields() {
        let keep = |f: &FieldSpan| f.key.db.get("class") == Some("od");
        let s = stream(&[("od", "aaa"), ("rd", "bb"), ("od", "cccc"), ("rd", "d")]);
        let (mut kept, dropped) = Kept::wrap(s, keep);
        assert_eq!(dropped, 2);
        assert_eq!(kept.size(), 7);
        let offsets: Vec<u64> = kept.fields().iter().map(|f| f.offset).collect();
        assert_eq!(offsets, [0, 3]);
        let mut small = [0u8; 2];
        let mut out = Vec::new();
        loop {
            let n = kept.read(&mut small).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&small[..n]);
            assert_eq!(kept.tell(), out.len() as u64);
        }
        assert_eq!(out, b"aaacccc");

        // Nothing left out: the stream itself.
        let (whole, dropped) = Kept::wrap(stream(&[("od", "x")]), keep);
        assert_eq!((dropped, whole.size()), (0, 1));
        // Everything left out: no fields, no bytes.
        let (mut none, dropped) = Kept::wrap(stream(&[("rd", "yy")]), keep);
        assert_eq!((dropped, none.fields().len()), (1, 0));
        assert_eq!(none.read(&mut small).unwrap(), 0);
    }
}

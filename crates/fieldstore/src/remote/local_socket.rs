//! A Unix-domain connection between a client and a server on one host, whose bytes may carry
//! file descriptors (`SCM_RIGHTS`): how fields are handed over (`super::handover`).
//!
//! Every read goes through `recvmsg`, because a plain `read` would make the kernel close any
//! descriptor that came with the bytes. Descriptors are queued in arrival order, which is the
//! order of the frames they came with; the protocol code takes one when it reads a frame that
//! says one came with it. A peer that sends descriptors no frame claims is cut off once a few
//! are queued, so it cannot make this process hold its descriptors.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// Descriptors one read may bring (a frame brings one).
const PER_READ: usize = 4;
/// Descriptors waiting for their frames beyond this end the connection.
const QUEUED_MAX: usize = 16;

pub struct LocalSocket {
    pub(super) stream: UnixStream,
    /// Shared by the clones of one connection (its read and write halves).
    received: Arc<Mutex<VecDeque<OwnedFd>>>,
}

impl LocalSocket {
    pub fn new(stream: UnixStream) -> LocalSocket {
        LocalSocket {
            stream,
            received: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    pub fn try_clone(&self) -> io::Result<LocalSocket> {
        Ok(LocalSocket {
            stream: self.stream.try_clone()?,
            received: self.received.clone(),
        })
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<OwnedFd>> {
        self.received.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The oldest descriptor received and not yet taken.
    pub fn take_descriptor(&self) -> Option<OwnedFd> {
        self.queue().pop_front()
    }

    /// Reads bytes into `buf` (which may be uninitialised), keeping any descriptors that came
    /// with them.
    pub fn recv(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // u64 elements keep the control buffer aligned for cmsghdr.
        let mut control = [0u64; 16];
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE((PER_READ * size_of::<RawFd>()) as u32) } as usize;
        debug_assert!(space <= size_of_val(&control));
        // SAFETY: a zeroed msghdr is a valid empty one; its fields are set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: recvmsg writes at most `buf.len()` bytes into the buffer and at most
        // `msg_controllen` into the control buffer; the socket's read timeout applies.
        let n = unsafe { libc::recvmsg(self.stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut got = Vec::new();
        // SAFETY: walking the control messages recvmsg filled in, within `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let bytes = (*c).cmsg_len as usize - (data as usize - c as usize);
                    for i in 0..bytes / size_of::<RawFd>() {
                        got.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer sent more descriptors at once than a frame may carry",
            ));
        }
        if !got.is_empty() {
            let mut q = self.queue();
            q.extend(got);
            if q.len() > QUEUED_MAX {
                q.clear();
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the peer sent descriptors that no frame claims",
                ));
            }
        }
        Ok(n as usize)
    }

    /// Writes `parts` whole, `fd` going with their first byte.
    pub fn send_with_descriptor(&self, parts: &[&[u8]], fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        let mut control = [0u64; 4];
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
        // SAFETY: a zeroed msghdr is a valid empty one; its fields are set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len();
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: one SCM_RIGHTS message with one descriptor, within the control buffer.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize;
            libc::CMSG_DATA(c)
                .cast::<RawFd>()
                .write_unaligned(fd.as_raw_fd());
        }
        let sent = loop {
            // SAFETY: the iovecs point into `parts`, alive for the call.
            let n = unsafe { libc::sendmsg(self.stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        // The descriptor went with the first byte; the rest follows as plain bytes.
        let mut skip = sent;
        let mut rest: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len());
        for p in parts {
            if skip >= p.len() {
                skip -= p.len();
            } else {
                rest.push(IoSlice::new(&p[skip..]));
                skip = 0;
            }
        }
        let mut rest = &mut rest[..];
        let mut stream = &self.stream;
        while !rest.is_empty() {
            match io::Write::write_vectored(&mut stream, rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    fn pair() -> (LocalSocket, LocalSocket) {
        let (a, b) = UnixStream::pair().expect("pair");
        (LocalSocket::new(a), LocalSocket::new(b))
    }

    struct Reader<'a>(&'a LocalSocket);
    impl Read for Reader<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            // SAFETY: initialised bytes are valid uninitialised ones.
            let b = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
            self.0.recv(b)
        }
    }

    #[test]
    fn descriptors_arrive_in_order_with_their_bytes() {
        let (a, b) = pair();
        let f1 = crate::remote::handover::seal(b"one").expect("seal");
        let f2 = crate::remote::handover::seal(b"second").expect("seal");
        a.send_with_descriptor(&[b"hea", b"der1"], f1.as_fd())
            .expect("send");
        a.send_with_descriptor(&[b"header2"], f2.as_fd())
            .expect("send");
        let mut got = vec![0u8; 14];
        Reader(&b).read_exact(&mut got).expect("read");
        assert_eq!(&got, b"header1header2");
        let first = b.take_descriptor().expect("first");
        let second = b.take_descriptor().expect("second");
        assert!(b.take_descriptor().is_none());
        let one = crate::remote::handover::take(first, 3, false).expect("one");
        let two = crate::remote::handover::take(second, 6, false).expect("two");
        assert_eq!((&one[..], &two[..]), (&b"one"[..], &b"second"[..]));
    }

    #[test]
    fn descriptors_no_frame_claims_end_the_connection() {
        let (a, b) = pair();
        let f = crate::remote::handover::seal(b"x").expect("seal");
        for _ in 0..=QUEUED_MAX {
            a.send_with_descriptor(&[b"y"], f.as_fd()).expect("send");
        }
        let mut buf = [0u8; 1];
        let mut r = Reader(&b);
        let mut failed = None;
        for _ in 0..=QUEUED_MAX {
            if let Err(e) = r.read(&mut buf) {
                failed = Some(e);
                break;
            }
        }
        let e = failed.expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(b.take_descriptor().is_none(), "the queue was dropped");
    }
}

//! Fields handed between processes of one host as sealed memory files, passed over a Unix socket
//! (docs/protocol.md, "Hand-over"): the producer writes a field's bytes once, into a `memfd`; the
//! server and every subscriber map that same memory. Nothing crosses a socket but the descriptor.
//!
//! The sender seals the file against writing and resizing before it lets go of it, and the
//! receiver refuses any descriptor not so sealed: a peer can then neither change a field after
//! its checksum was taken nor shrink the file under a mapping (which would fault the receiver
//! with SIGBUS). A process keeps a bounded number of mappings (descriptors and mappings are
//! limited per process); beyond that, fields are copied out of the file instead.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;

/// Fields smaller than this travel inside their frames: below it, creating, sealing and mapping
/// a file costs more than copying the bytes through the socket.
pub const HANDOVER_FROM: usize = 256 << 10;

/// What a handed-over file must be sealed against.
const REQUIRED_SEALS: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

/// Why a descriptor received from a peer cannot be taken as a field.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("the descriptor is not a sealed memory file (fcntl F_GET_SEALS: {0})")]
    NotSealable(io::Error),
    #[error("the memory file is not sealed against writing and resizing (seals {0:#x}); seal it with F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW before handing it over")]
    NotSealed(libc::c_int),
    #[error("the memory file holds {actual} bytes, the frame announced {announced}")]
    Length { actual: u64, announced: u64 },
    #[error("the memory file is empty")]
    Empty,
    #[error("cannot read the memory file: {0}")]
    Io(#[from] io::Error),
}

/// Writes `data` into a new memory file and seals it: what a sender passes.
pub fn seal(data: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: the name is a NUL-terminated string; the result is checked before use.
    let raw = unsafe {
        libc::memfd_create(
            c"fieldstore-field".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor just created and owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let file = File::from(fd);
    file.set_len(data.len() as u64)?;
    file.write_all_at(data, 0)?;
    let fd = OwnedFd::from(file);
    // SAFETY: fcntl on a descriptor we own.
    let r = unsafe {
        libc::fcntl(
            fd.as_raw_fd(),
            libc::F_ADD_SEALS,
            REQUIRED_SEALS | libc::F_SEAL_SEAL,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A read-only mapping of a sealed memory file, and the file (to pass it on).
pub struct Mapping {
    ptr: *const u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is read-only and the file sealed against writing: the memory never
// changes while mapped, so it may be read from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Out of the registry before the address can be mapped again.
        registry().remove(&(self.ptr as usize));
        HELD.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: `ptr`/`len` are the mapping made in `map`, unmapped once, here.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// What a `Bytes` of a mapping owns.
struct Held(Arc<Mapping>);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as `self`, is `len` bytes long and never changes.
        unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) }
    }
}

/// Mappings alive in this process, by address: how a server finds the file behind a stored
/// field's buffer when it sends the field on.
fn registry() -> std::sync::MutexGuard<'static, HashMap<usize, Weak<Mapping>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<usize, Weak<Mapping>>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

static HELD: AtomicUsize = AtomicUsize::new(0);

/// How many mappings a process keeps: half of what its descriptor limit and the kernel's map
/// count allow, so the rest of the process never runs short of either.
fn held_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct it is given.
        let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 {
            usize::try_from(rl.rlim_cur).unwrap_or(usize::MAX)
        } else {
            1024
        };
        let maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(65530);
        (files.min(maps) / 2).saturating_sub(64)
    })
}

/// The field in a received descriptor, `length` bytes: mapped (no copy), or copied out when
/// this process already holds as many mappings as it may. `populate`: map every page now (for
/// a reader about to read them all, as a server taking the checksum is); otherwise pages are
/// mapped as they are first read.
pub fn take(fd: OwnedFd, length: u64, populate: bool) -> Result<Bytes, HandoverError> {
    // SAFETY: fcntl on a descriptor we own.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(HandoverError::NotSealable(io::Error::last_os_error()));
    }
    if seals & REQUIRED_SEALS != REQUIRED_SEALS {
        return Err(HandoverError::NotSealed(seals));
    }
    let file = File::from(fd);
    let actual = file.metadata()?.len();
    if actual != length {
        return Err(HandoverError::Length {
            actual,
            announced: length,
        });
    }
    if length == 0 {
        return Err(HandoverError::Empty);
    }
    let len = usize::try_from(length).map_err(|_| HandoverError::Length {
        actual,
        announced: length,
    })?;
    if HELD.fetch_add(1, Ordering::Relaxed) >= held_limit() {
        HELD.fetch_sub(1, Ordering::Relaxed);
        let mut copy = vec![0u8; len];
        file.read_exact_at(&mut copy, 0)?;
        return Ok(Bytes::from(copy));
    }
    // SAFETY: a shared read-only mapping of a file sealed against writing and shrinking, of
    // the size fstat just gave: every byte stays mapped and unchanged until munmap.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            if populate {
                libc::MAP_SHARED | libc::MAP_POPULATE
            } else {
                libc::MAP_SHARED
            },
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        HELD.fetch_sub(1, Ordering::Relaxed);
        return Err(HandoverError::Io(io::Error::last_os_error()));
    }
    let mapping = Arc::new(Mapping {
        ptr: ptr as *const u8,
        len,
        fd: OwnedFd::from(file),
    });
    registry().insert(ptr as usize, Arc::downgrade(&mapping));
    Ok(Bytes::from_owner(Held(mapping)))
}

/// The mapping `b` is the whole of, if it is one: what can be handed on as it is.
pub fn mapping_of(b: &Bytes) -> Option<Arc<Mapping>> {
    let m = registry().get(&(b.as_ptr() as usize))?.upgrade()?;
    (m.len == b.len()).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsealed(data: &[u8]) -> OwnedFd {
        // SAFETY: as in `seal`.
        let raw = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: just created.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
        file.write_all_at(data, 0).expect("write");
        OwnedFd::from(file)
    }

    #[test]
    fn a_sealed_field_maps_whole_and_is_found_again() {
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let fd = seal(&data).expect("seal");
        let b = take(fd, data.len() as u64, true).expect("take");
        assert_eq!(&b[..], &data[..]);
        let m = mapping_of(&b).expect("the whole mapping is found");
        assert_eq!(m.len, data.len());
        assert!(
            mapping_of(&b.slice(1..)).is_none(),
            "a part is not the file"
        );
        let copy = Bytes::copy_from_slice(&data);
        assert!(mapping_of(&copy).is_none());
    }

    #[test]
    fn a_mapping_goes_with_its_last_buffer() {
        let fd = seal(b"abc").expect("seal");
        let b = take(fd, 3, false).expect("take");
        let addr = b.as_ptr() as usize;
        let c = b.clone();
        drop(b);
        assert!(registry().contains_key(&addr));
        drop(c);
        assert!(!registry().contains_key(&addr));
    }

    #[test]
    fn files_that_could_change_are_refused() {
        let e = take(unsealed(b"field"), 5, true).expect_err("unsealed");
        assert!(matches!(e, HandoverError::NotSealed(_)), "{e}");
        let tmp = tempfile::tempfile().expect("tmp");
        tmp.write_all_at(b"field", 0).expect("write");
        let e = take(OwnedFd::from(tmp), 5, true).expect_err("a plain file");
        assert!(matches!(e, HandoverError::NotSealable(_)), "{e}");
    }

    #[test]
    fn the_announced_length_must_be_the_file_s() {
        let e = take(seal(b"field").expect("seal"), 4, true).expect_err("short");
        assert!(
            matches!(
                e,
                HandoverError::Length {
                    actual: 5,
                    announced: 4
                }
            ),
            "{e}"
        );
        let e = take(seal(b"").expect("seal"), 0, true).expect_err("empty");
        assert!(matches!(e, HandoverError::Empty), "{e}");
    }
}

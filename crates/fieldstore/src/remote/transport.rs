//! The byte stream under the protocol: a plain TCP socket, or, with TLS, one end of a local
//! socket pair whose other end a pump thread carries through rustls to the TCP socket.
//!
//! The protocol code reads on one thread while it writes on another (split halves, read
//! timeouts to notice a shutdown, a peek to see whether an idle connection died). A rustls
//! session cannot be split, so rather than teach all of that about TLS, TLS connections look to
//! the protocol code exactly like plain ones: a socket with the same operations.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A connected socket, plain or carrying TLS through a pump.
pub enum Socket {
    Tcp(TcpStream),
    /// The local end of a TLS pump.
    Tls(UnixStream),
    /// A Unix-domain connection on this host, which may carry descriptors.
    Local(super::local_socket::LocalSocket),
}

impl Socket {
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Tls(s) => Socket::Tls(s.try_clone()?),
            Socket::Local(s) => Socket::Local(s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(t),
            Socket::Tls(s) => s.set_read_timeout(t),
            Socket::Local(s) => s.stream.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_write_timeout(t),
            Socket::Tls(s) => s.set_write_timeout(t),
            Socket::Local(s) => s.stream.set_write_timeout(t),
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(on),
            Socket::Tls(s) => s.set_nonblocking(on),
            Socket::Local(s) => s.stream.set_nonblocking(on),
        }
    }

    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.peek(buf),
            // SAFETY: recv with MSG_PEEK into a valid buffer of the given length.
            Socket::Tls(_) | Socket::Local(_) => {
                let n = unsafe {
                    libc::recv(
                        self.raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_PEEK,
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Tls(s) => s.shutdown(how),
            Socket::Local(s) => s.stream.shutdown(how),
        }
    }

    fn raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Tls(s) => s.as_raw_fd(),
            Socket::Local(s) => s.stream.as_raw_fd(),
        }
    }

    /// The Unix-domain connection, where fields may be handed over.
    pub fn local(&self) -> Option<&super::local_socket::LocalSocket> {
        match self {
            Socket::Local(s) => Some(s),
            _ => None,
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
            Socket::Local(s) => {
                // SAFETY: initialised bytes are valid uninitialised ones, and recv only
                // writes initialised bytes into them.
                let b = unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
                s.recv(b)
            }
        }
    }
}

impl super::landing::ReadUninit for Socket {
    fn read_uninit(&mut self, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
        let fd = match self {
            Socket::Local(s) => return s.recv(buf),
            other => other.raw_fd(),
        };
        // SAFETY: recv writes at most `buf.len()` bytes into the buffer and returns how many;
        // the socket's read timeout applies as for `read`.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
            Socket::Local(s) => (&s.stream).write(buf),
        }
    }

    /// One system call for a frame's header, payload and trailer, wherever they are in memory.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write_vectored(bufs),
            Socket::Tls(s) => s.write_vectored(bufs),
            Socket::Local(s) => (&s.stream).write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_error(context: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{context}: {e}"))
}

/// A server's TLS identity, loaded from PEM files, and whether it asks clients for certificates.
#[derive(Clone, Debug)]
pub struct TlsAcceptor {
    config: Arc<rustls::ServerConfig>,
    client_certificates: bool,
}

/// Which client certificates a server asks for (`--tls-client-ca`, `--tls-client-optional`).
#[derive(Clone, Debug)]
pub struct ClientCertificates {
    /// PEM file of the CA certificate(s) that sign client certificates.
    pub ca: std::path::PathBuf,
    /// Whether a client may connect without a certificate (it then proves itself with a token).
    pub optional: bool,
}

/// What the server learnt from a client's verified certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificate {
    /// The whole subject (`CN=reader-1, O=Example`), for messages and logs.
    pub subject: String,
    /// The subject's Common Name: what a tokens file's `certificate:` names. `None` when the
    /// subject has none, or more than one (then no identity can be meant unambiguously).
    pub common_name: Option<String>,
}

impl PeerCertificate {
    /// Reads the subject of a DER certificate. x509-parser (rusticata's, the one rcgen uses)
    /// does the ASN.1; the certificate was verified by rustls before it gets here.
    pub fn from_der(der: &[u8]) -> io::Result<PeerCertificate> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| tls_error("reading the client certificate", e))?;
        let subject = cert.subject();
        let names: Vec<_> = subject.iter_common_name().collect();
        let common_name = match names.as_slice() {
            [one] => one.as_str().ok().map(str::to_string),
            _ => None,
        };
        Ok(PeerCertificate {
            subject: subject.to_string(),
            common_name,
        })
    }
}

fn read_certificates(path: &Path, what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(&format!("reading {what} from {}", path.display()), e))?;
    if certs.is_empty() {
        return Err(tls_error(
            &format!("{}", path.display()),
            "no PEM certificate in it",
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| tls_error(&format!("reading a private key from {}", path.display()), e))
}

fn root_store(ca: &Path) -> io::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certificates(ca, "CA certificates")? {
        roots
            .add(c)
            .map_err(|e| tls_error(&format!("a CA certificate in {}", ca.display()), e))?;
    }
    Ok(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsAcceptor {
    pub fn from_pem_files(cert: &Path, key: &Path) -> io::Result<TlsAcceptor> {
        TlsAcceptor::new(cert, key, None)
    }

    /// With `clients`, the handshake asks for a client certificate signed by its CA (and fails
    /// without one unless it is optional).
    pub fn new(
        cert: &Path,
        key: &Path,
        clients: Option<&ClientCertificates>,
    ) -> io::Result<TlsAcceptor> {
        let certs = read_certificates(cert, "certificates")?;
        let key = read_key(key)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error("TLS setup", e))?;
        let builder = match clients {
            None => builder.with_no_client_auth(),
            Some(c) => {
                let roots = Arc::new(root_store(&c.ca)?);
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if c.optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| tls_error(&format!("client CA {}", c.ca.display()), e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| tls_error("the certificate and key do not make a TLS identity", e))?;
        Ok(TlsAcceptor {
            config: Arc::new(config),
            client_certificates: clients.is_some(),
        })
    }

    /// Whether clients may prove themselves with a certificate here (for refusal messages).
    pub fn asks_for_client_certificates(&self) -> bool {
        self.client_certificates
    }

    /// Completes the handshake (bounded by the socket's timeouts) and starts the pump. Returns
    /// the client's certificate too, when it presented one (rustls verified it against the CA).
    pub fn accept(&self, tcp: TcpStream) -> io::Result<(Socket, Option<PeerCertificate>)> {
        let conn = rustls::ServerConnection::new(self.config.clone())
            .map_err(|e| tls_error("TLS session", e))?;
        let mut conn = rustls::Connection::Server(conn);
        let mut tcp = tcp;
        handshake(&mut conn, &mut tcp)?;
        let peer = match conn.peer_certificates().and_then(|c| c.first()) {
            Some(der) => Some(PeerCertificate::from_der(der)?),
            None => None,
        };
        Ok((start(conn, tcp)?, peer))
    }
}

/// A client's trust: the CA certificates that may sign the server's, and the name to check.
#[derive(Clone, Debug)]
pub struct TlsConnector {
    config: Arc<rustls::ClientConfig>,
}

impl TlsConnector {
    pub fn from_ca_file(ca: &Path) -> io::Result<TlsConnector> {
        TlsConnector::new(ca, None)
    }

    /// With `identity` (certificate chain, key), the client presents that certificate when the
    /// server asks for one.
    pub fn new(ca: &Path, identity: Option<(&Path, &Path)>) -> io::Result<TlsConnector> {
        let roots = root_store(ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error("TLS setup", e))?
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => builder
                .with_client_auth_cert(read_certificates(cert, "certificates")?, read_key(key)?)
                .map_err(|e| {
                    tls_error(
                        &format!(
                            "{} and {} do not make a client certificate",
                            cert.display(),
                            key.display()
                        ),
                        e,
                    )
                })?,
        };
        Ok(TlsConnector {
            config: Arc::new(config),
        })
    }

    pub fn connect(&self, server_name: &str, tcp: TcpStream) -> io::Result<Socket> {
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|e| tls_error(&format!("server name '{server_name}'"), e))?;
        let conn = rustls::ClientConnection::new(self.config.clone(), name)
            .map_err(|e| tls_error("TLS session", e))?;
        let mut conn = rustls::Connection::Client(conn);
        let mut tcp = tcp;
        handshake(&mut conn, &mut tcp)?;
        start(conn, tcp)
    }
}

/// Plaintext waiting for the application side, at most this much before TCP reads pause.
const PENDING: usize = 1 << 20;
/// Bytes taken from either side per read.
const APP_READ: usize = 64 << 10;
/// How long a pump waits for the peer to close after the local side closed.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

fn handshake(conn: &mut rustls::Connection, tcp: &mut TcpStream) -> io::Result<()> {
    while conn.is_handshaking() {
        conn.complete_io(tcp)
            .map_err(|e| tls_error("TLS handshake", e))?;
    }
    Ok(())
}

fn start(conn: rustls::Connection, tcp: TcpStream) -> io::Result<Socket> {
    let (app, pump_end) = UnixStream::pair()?;
    std::thread::Builder::new()
        .name("tls-pump".into())
        .spawn(move || {
            if let Err(e) = pump(conn, tcp, pump_end) {
                tracing::debug!("TLS connection ended: {e}");
            }
        })?;
    Ok(Socket::Tls(app))
}

/// Moves bytes both ways between the TLS session on `tcp` and the local socket `app` until both
/// directions are closed. Non-blocking on both sides, so a peer that stops reading stalls only
/// its own direction.
fn pump(mut conn: rustls::Connection, tcp: TcpStream, app: UnixStream) -> io::Result<()> {
    // The session takes at most one read of `buf` at a time (only when it has sent everything),
    // so a limit above that size means `write_all` below never meets a full buffer.
    conn.set_buffer_limit(Some(4 * APP_READ));
    tcp.set_nonblocking(true)?;
    app.set_nonblocking(true)?;
    let (mut tcp_r, mut tcp_w) = (&tcp, &tcp);
    let (mut app_r, mut app_w) = (&app, &app);
    // Plaintext for the application: `to_app[sent..]` is still to be written.
    let mut to_app: Vec<u8> = Vec::new();
    let mut sent = 0usize;
    let mut buf = vec![0u8; APP_READ];
    let (mut tcp_eof, mut app_eof, mut app_shut) = (false, false, false);
    // Once our side has closed, the peer gets this long to close too; a peer that never does
    // must not keep the thread.
    let mut closed_at: Option<std::time::Instant> = None;
    loop {
        if closed_at.is_some_and(|t| t.elapsed() > CLOSE_GRACE) {
            return Ok(());
        }
        // Plaintext out of the session, towards the application.
        while to_app.len() - sent < PENDING {
            match conn.reader().read(&mut buf) {
                Ok(0) => {
                    tcp_eof = true;
                    break;
                }
                Ok(n) => to_app.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        while sent < to_app.len() {
            match app_w.write(&to_app[sent..]) {
                Ok(n) => {
                    sent += n;
                    if sent == to_app.len() {
                        to_app.clear();
                        sent = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The application closed its end: nothing more to deliver.
                Err(_) => return Ok(()),
            }
        }
        // Drop what was delivered once it is large, so a reader that never quite catches up
        // cannot make the buffer grow (amortised: one move per PENDING bytes).
        if sent >= PENDING {
            to_app.drain(..sent);
            sent = 0;
        }
        if tcp_eof && sent == to_app.len() && !app_shut {
            let _ = app.shutdown(Shutdown::Write);
            app_shut = true;
        }
        while conn.wants_write() {
            match conn.write_tls(&mut tcp_w) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if app_eof && !conn.wants_write() {
            if closed_at.is_none() {
                closed_at = Some(std::time::Instant::now());
                let _ = tcp.shutdown(Shutdown::Write);
            }
            if tcp_eof || app_shut {
                return Ok(());
            }
        }
        if tcp_eof && app_shut && app_eof {
            return Ok(());
        }
        let mut fds = [
            libc::pollfd {
                fd: tcp.as_raw_fd(),
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: app.as_raw_fd(),
                events: 0,
                revents: 0,
            },
        ];
        if !tcp_eof && to_app.len() - sent < PENDING {
            fds[0].events |= libc::POLLIN;
        }
        // A closed side would report hang-up forever: leave it out of the poll.
        if tcp_eof && !conn.wants_write() {
            fds[0].fd = -1;
        }
        if conn.wants_write() {
            fds[0].events |= libc::POLLOUT;
        }
        // Take more from the application only once the session has sent what it holds.
        if !app_eof && !conn.wants_write() {
            fds[1].events |= libc::POLLIN;
        }
        if sent < to_app.len() {
            fds[1].events |= libc::POLLOUT;
        }
        if app_eof && sent == to_app.len() {
            fds[1].fd = -1;
        }
        // SAFETY: two valid pollfd entries.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && !tcp_eof {
            match conn.read_tls(&mut tcp_r) {
                Ok(0) => tcp_eof = true,
                Ok(_) => {
                    if let Err(e) = conn.process_new_packets() {
                        // Tell the peer why, then give up on the connection.
                        let _ = conn.write_tls(&mut tcp_w);
                        return Err(tls_error("TLS", e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && !app_eof {
            match app_r.read(&mut buf) {
                Ok(0) => {
                    app_eof = true;
                    conn.send_close_notify();
                }
                Ok(n) => conn.writer().write_all(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    app_eof = true;
                    conn.send_close_notify();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn der(names: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["client.example".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in names {
            params.distinguished_name.push(t.clone(), *v);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_common_name_of_a_certificate_subject_is_read_with_the_subject() {
        let p = PeerCertificate::from_der(&der(&[
            (DnType::CommonName, "reader-1"),
            (DnType::OrganizationName, "ECMWF"),
        ]))
        .unwrap();
        assert_eq!(p.common_name.as_deref(), Some("reader-1"));
        assert_eq!(p.subject, "CN=reader-1, O=ECMWF");
        // No CN: no name to map (the SAN DNS name is not used instead).
        let p = PeerCertificate::from_der(&der(&[(DnType::OrganizationName, "ECMWF")])).unwrap();
        assert_eq!(p.common_name, None);
        assert_eq!(p.subject, "O=ECMWF");
        assert!(PeerCertificate::from_der(b"not a certificate").is_err());
    }
}

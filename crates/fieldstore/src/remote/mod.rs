//! The network edge: `fieldstore server` and the `remote` frontend, speaking the framed protocol
//! of docs/protocol.md. Above `api`: the server serves any `Fdb`, the client is one.

pub mod auth;
pub(crate) mod client;
pub(crate) mod error;
pub mod handover;
pub(crate) mod http;
pub(crate) mod landing;
pub mod local_socket;
pub mod metrics;
pub mod protocol;
pub(crate) mod recycle;
pub mod server;
mod subscription;
pub(crate) mod transport;

pub use client::RemoteFdb;
pub use error::RemoteError;
pub use server::{CreatorFdbFactory, FdbFactory, Server, ServerOptions, ShutdownHandle};
pub use transport::{ClientCertificates, PeerCertificate, TlsAcceptor, TlsConnector};

//! Every store the suite runs against. Adding one is one entry in [`ALL`].

use std::any::Any;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fieldstore::api::Fdb;
use fieldstore::model::config::from_yaml_str;
use fieldstore::remote::server::{FdbFactory, Server, ServerOptions, ShutdownHandle};
use fieldstore::remote::RemoteFdb;

use crate::minio::{fresh_bucket, Minio};

/// A store under test: how to build it in an empty directory, and how it may differ.
pub struct Backend {
    pub name: &'static str,
    pub open: fn(&Path) -> Instance,
    /// Legitimate differences from the local store; the cases that meet one say so.
    pub quirks: &'static [Quirk],
    /// `(case, "bug: ...")`: a real bug this backend has today; the case is reported, not run.
    pub known_bugs: &'static [(&'static str, &'static str)],
    /// Whether what the backend needs is here (a MinIO binary); when not it says `SKIP ...`
    /// and the cases skip it (under `CI=true` it panics instead).
    pub available: fn() -> bool,
}

fn always() -> bool {
    true
}

fn minio_built() -> bool {
    Minio::shared("conformance on MinIO").is_some()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quirk {
    /// Retrieve answers child by child (FDB5's select and dist do the same): the request's value
    /// order holds within one child, not across children, so the case checks the fields only.
    RetrieveOrderPerChild,
    /// A database's fields are spread over children (dist by field) and a flush commits child
    /// by child: atomic per child's share, so a reader may see part of a database's flush
    /// (never a field twice, never a count going down).
    FlushPerChild,
    /// A database's fields are spread over children by key, and a lock is kept by the children
    /// holding the database (FDB5's dist forwards control the same way): a new key placed on a
    /// child where the database does not exist yet is not refused. Keys that exist are.
    LocksWhereTheDatabaseIs,
}

/// One store built for one case; `handle()` gives a new, independent handle onto it.
pub struct Instance {
    handle: Box<dyn Fn() -> Arc<dyn Fdb> + Send + Sync>,
    /// Whatever must live as long as the store (a server thread).
    _keep: Option<Box<dyn Any + Send>>,
}

impl Instance {
    pub fn handle(&self) -> Arc<dyn Fdb> {
        (self.handle)()
    }
}

pub static ALL: &[Backend] = &[
    Backend {
        name: "local (toc + POSIX)",
        open: local,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "remote (in-process server over local)",
        open: remote,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "select (two local lanes, split by date)",
        open: select,
        quirks: &[Quirk::RetrieveOrderPerChild],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "dist (two local lanes)",
        open: dist,
        quirks: &[
            Quirk::RetrieveOrderPerChild,
            Quirk::FlushPerChild,
            Quirk::LocksWhereTheDatabaseIs,
        ],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "mirror (two local children)",
        open: mirror,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "filter (class=od over local)",
        open: filter,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "diagnostics (over local)",
        open: diagnostics,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "memory (engine: memory)",
        open: memory,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "toc + POSIX over the simulated file system",
        open: simulated,
        quirks: &[],
        known_bugs: &[],
        available: always,
    },
    Backend {
        name: "s3 (MinIO: engine s3, store s3)",
        open: s3,
        quirks: &[],
        known_bugs: &[],
        available: minio_built,
    },
    Backend {
        name: "toc + s3 store (MinIO)",
        open: toc_s3,
        quirks: &[],
        known_bugs: &[],
        available: minio_built,
    },
    Backend {
        name: "dist over two buckets (MinIO)",
        open: dist_s3,
        quirks: &[
            Quirk::RetrieveOrderPerChild,
            Quirk::FlushPerChild,
            Quirk::LocksWhereTheDatabaseIs,
        ],
        known_bugs: &[],
        available: minio_built,
    },
];

/// The `s3:` section for a fresh bucket of the process's shared MinIO (so cases never share).
fn s3_section(extra: &str) -> String {
    let m = Minio::shared("conformance on MinIO").expect("available() checked MinIO is built");
    format!(
        "{{endpoint: '{}', bucket: {}, access_key_id: '{}', secret_access_key: '{}'{extra}}}",
        m.endpoint,
        fresh_bucket("conformance"),
        m.access_key,
        m.secret_key
    )
}

/// Catalogue and data in one bucket (under a prefix, as operators share buckets).
fn s3(_dir: &Path) -> Instance {
    from_yaml(format!(
        "{{type: local, engine: s3, store: s3, s3: {}}}",
        s3_section(", prefix: ops/")
    ))
}

/// The toc catalogue on a POSIX root, the fields' bytes in S3.
fn toc_s3(dir: &Path) -> Instance {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("create a root");
    from_yaml(format!(
        "{{type: local, engine: toc, store: s3, spaces: [{{roots: [{{path: {}}}]}}], s3: {}}}",
        root.display(),
        s3_section("")
    ))
}

/// Two lanes, each a bucket of its own; no grace period, so wipe and purge delete at once.
fn dist_s3(_dir: &Path) -> Instance {
    let lane = |id: &str| {
        format!(
            "{{id: {id}, type: local, engine: s3, s3: {}}}",
            s3_section(", grace: 0s")
        )
    };
    from_yaml(format!(
        "type: dist\nlanes:\n- {}\n- {}\n",
        lane("a"),
        lane("b")
    ))
}

/// A local config's YAML (one root, created) for nesting under a frontend.
fn local_yaml(dir: &Path, sub: &str) -> String {
    let root = dir.join(sub);
    std::fs::create_dir_all(&root).expect("create a root");
    format!(
        "{{type: local, spaces: [{{roots: [{{path: {}}}]}}]}}",
        root.display()
    )
}

/// Every handle of a config-described store is a fresh `open` of the same YAML.
fn from_yaml(yaml: String) -> Instance {
    let open = move || -> Arc<dyn Fdb> {
        let config = from_yaml_str(&yaml, "conformance").expect("the suite's config parses");
        Arc::from(fieldstore::open(&config).expect("the suite's config opens"))
    };
    open();
    Instance {
        handle: Box::new(open),
        _keep: None,
    }
}

fn local(dir: &Path) -> Instance {
    from_yaml(local_yaml(dir, "root"))
}

fn select(dir: &Path) -> Instance {
    from_yaml(format!(
        "type: select\nfdbs:\n- {}\n- {}\n",
        local_yaml(dir, "a").replacen('{', "{select: date=20261122, ", 1),
        local_yaml(dir, "b").replacen('{', "{select: class=od, ", 1),
    ))
}

fn dist(dir: &Path) -> Instance {
    from_yaml(format!(
        "type: dist\nlanes:\n- {}\n- {}\n",
        local_yaml(dir, "a").replacen('{', "{id: a, ", 1),
        local_yaml(dir, "b").replacen('{', "{id: b, ", 1),
    ))
}

fn mirror(dir: &Path) -> Instance {
    from_yaml(format!(
        "type: mirror\nfdbs:\n- {}\n- {}\n",
        local_yaml(dir, "a"),
        local_yaml(dir, "b")
    ))
}

fn filter(dir: &Path) -> Instance {
    from_yaml(format!(
        "type: filter\nselect: class=od\nfdbs:\n- {}\n",
        local_yaml(dir, "a")
    ))
}

fn diagnostics(dir: &Path) -> Instance {
    from_yaml(format!(
        "type: diagnostics\nfdb: {}\n",
        local_yaml(dir, "a")
    ))
}

/// Handles share one named store; the name is the case's directory, so cases never share.
fn memory(dir: &Path) -> Instance {
    from_yaml(format!(
        "{{type: local, engine: memory, memory: {{name: '{}', capacity: 512MiB}}}}",
        dir.display()
    ))
}

/// The toc catalogue and POSIX store over one in-memory simulated file system (no crash here:
/// tests/crash_points.rs crashes it), so the suite checks that the fs layer changes nothing.
fn simulated(dir: &Path) -> Instance {
    let fs = Arc::new(fieldstore::storage::fs::SimFs::new());
    let root = dir.join("sim-root");
    fieldstore::storage::fs::FileSystem::create_dir_all(fs.as_ref(), &root)
        .expect("create the simulated root");
    let yaml = format!(
        "{{type: local, spaces: [{{roots: [{{path: {}}}]}}]}}",
        root.display()
    );
    let config = match from_yaml_str(&yaml, "conformance").expect("the suite's config parses") {
        fieldstore::model::config::FdbConfig::Local(l) => l,
        _ => unreachable!("a local config"),
    };
    let open = move || -> Arc<dyn Fdb> {
        Arc::new(
            fieldstore::api::LocalFdb::with_fs(config.clone(), fs.clone())
                .expect("a local store over the simulated fs opens"),
        )
    };
    open();
    Instance {
        handle: Box::new(open),
        _keep: None,
    }
}

/// Stops the server when the case is done with it.
struct Serving {
    stop: ShutdownHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn remote(dir: &Path) -> Instance {
    let yaml = local_yaml(dir, "root");
    let factory: Box<FdbFactory> = Box::new(move || {
        let config = from_yaml_str(&yaml, "conformance")
            .map_err(|e| fieldstore::api::ApiError::Config(e.to_string()))?;
        fieldstore::open(&config)
    });
    let options = ServerOptions {
        // Small chunks, so the bounded-memory case sees the stream's bound, not one chunk.
        chunk_size: 64 * 1024,
        grace: Duration::from_secs(2),
        ..ServerOptions::default()
    };
    let server = Server::bind("127.0.0.1:0", factory, options).expect("bind a server");
    let port = server.local_addr().port();
    let stop = server.shutdown_handle();
    let thread = std::thread::spawn(move || {
        if let Err(e) = server.run() {
            eprintln!("conformance: the in-process server failed: {e}");
        }
    });
    Instance {
        handle: Box::new(move || Arc::new(RemoteFdb::new("127.0.0.1", port, None)) as Arc<dyn Fdb>),
        _keep: Some(Box::new(Serving {
            stop,
            thread: Some(thread),
        })),
    }
}

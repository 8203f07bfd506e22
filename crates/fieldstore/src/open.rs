//! The composition root: builds the frontend tree a config describes.
//!
//! It sits above every layer (local, frontends, remote client) because a frontend's children may be
//! of any type; frontends themselves only ever see `Arc<dyn Fdb>`.

use std::sync::Arc;

use crate::api::frontends::{
    dist, select, DiagnosticsFdb, DistFdb, FilterFdb, MirrorFdb, SelectFdb, Selection,
};
use crate::api::{ApiError, Fdb, LocalFdb};
use crate::grib;
use crate::model::config::{DistHash, FdbConfig};
use crate::model::schema::Schema;
use crate::model::types::Context;
use crate::model::ModelError;
use crate::remote::{RemoteFdb, TlsConnector};

static RESOLVER: fn(&str) -> Option<String> = grib::params::resolver;

/// Where a remote config without `token:` takes its token from.
pub const TOKEN_ENV: &str = "FIELDSTORE_TOKEN";

/// Builds the store a config describes, recursively for frontends with children.
pub fn open(config: &FdbConfig) -> Result<Box<dyn Fdb>, ApiError> {
    match config {
        FdbConfig::Local(l) => Ok(Box::new(LocalFdb::new(l.clone())?)),
        FdbConfig::Select { lanes, .. } => {
            let lanes = lanes
                .iter()
                .map(|l| {
                    Ok(select::Lane {
                        select: Selection::parse(&l.select)?,
                        excludes: l
                            .excludes
                            .iter()
                            .map(|x| Selection::parse(x))
                            .collect::<Result<_, _>>()?,
                        fdb: open_shared(&l.config)?,
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            let select = SelectFdb::new(lanes);
            Ok(Box::new(match schema_of(config) {
                Some(p) => select.with_schema(&Schema::from_file(&p).map_err(ModelError::from)?),
                None => select,
            }))
        }
        FdbConfig::Dist { lanes, hash } => {
            // `hash: database` splits keys with the schema of the first lane that names one.
            let schema = match hash {
                DistHash::Field => None,
                DistHash::Database => Some(match lanes.iter().find_map(|l| schema_of(&l.config)) {
                    Some(p) => Schema::from_file(&p).map_err(ModelError::from)?,
                    None => Schema::default_schema(),
                }),
            };
            let lanes = lanes
                .iter()
                .map(|l| {
                    Ok(dist::DistLane {
                        id: l.id.clone(),
                        hash_id: l.hash_id.clone(),
                        fdb: open_shared(&l.config)?,
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            let cx = Context {
                params: Some(&RESOLVER),
                ..Context::default()
            };
            Ok(Box::new(DistFdb::new(lanes, *hash, schema, cx)?))
        }
        FdbConfig::Mirror { children, quorum } => {
            let children = children
                .iter()
                .map(open_shared)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Box::new(MirrorFdb::new(children, *quorum)?))
        }
        FdbConfig::Filter {
            select,
            excludes,
            children,
        } => {
            let child = one_or_mirror(children)?;
            let filter = FilterFdb::new(
                select.as_deref().map(Selection::parse).transpose()?,
                excludes
                    .iter()
                    .map(|x| Selection::parse(x))
                    .collect::<Result<_, _>>()?,
                child,
            );
            Ok(Box::new(match schema_of(config) {
                Some(p) => filter.with_schema(&Schema::from_file(&p).map_err(ModelError::from)?),
                None => filter,
            }))
        }
        FdbConfig::Diagnostics { report, children } => Ok(Box::new(DiagnosticsFdb::new(
            one_or_mirror(children)?,
            report.clone(),
        ))),
        FdbConfig::Remote {
            host,
            port,
            socket,
            token,
            tls,
        } => {
            let token = token
                .clone()
                .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()));
            let remote = RemoteFdb::new(host, *port, token);
            let remote = match socket {
                Some(path) => remote.with_socket(path.clone()),
                None => remote,
            };
            Ok(Box::new(match tls {
                None => remote,
                Some(t) => {
                    let connector = TlsConnector::new(
                        &t.ca,
                        t.client.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
                    )
                    .map_err(|e| ApiError::Invalid(format!("remote {host}:{port}: TLS: {e}")))?;
                    remote.with_tls(connector, t.server_name.clone())
                }
            }))
        }
    }
}

/// Several children behind one wrapper (filter, diagnostics) all receive what it passes on.
fn one_or_mirror(children: &[FdbConfig]) -> Result<Arc<dyn Fdb>, ApiError> {
    match children {
        [one] => open_shared(one),
        many => Ok(Arc::new(MirrorFdb::new(
            many.iter().map(open_shared).collect::<Result<_, _>>()?,
            None,
        )?)),
    }
}

fn open_shared(config: &FdbConfig) -> Result<Arc<dyn Fdb>, ApiError> {
    Ok(Arc::from(open(config)?))
}

/// The schema file a config names, looking through frontends to the first local one.
pub fn schema_of(config: &FdbConfig) -> Option<std::path::PathBuf> {
    match config {
        FdbConfig::Local(l) => l.schema.clone(),
        FdbConfig::Select { schema, lanes } => schema
            .clone()
            .or_else(|| lanes.iter().find_map(|l| schema_of(&l.config))),
        FdbConfig::Dist { lanes, .. } => lanes.iter().find_map(|l| schema_of(&l.config)),
        FdbConfig::Mirror { children, .. }
        | FdbConfig::Filter { children, .. }
        | FdbConfig::Diagnostics { children, .. } => children.iter().find_map(schema_of),
        FdbConfig::Remote { .. } => None,
    }
}

/// The schema archived keys can be checked against before anything is stored (all-or-nothing
/// archives in the bindings): the local store's, or `None` when a remote store decides (its
/// schema is the server's, not ours to read).
pub fn archive_schema(config: &FdbConfig) -> Result<Option<Schema>, ApiError> {
    fn has_remote(c: &FdbConfig) -> bool {
        match c {
            FdbConfig::Local(_) => false,
            FdbConfig::Remote { .. } => true,
            FdbConfig::Select { lanes, .. } => lanes.iter().any(|l| has_remote(&l.config)),
            FdbConfig::Dist { lanes, .. } => lanes.iter().any(|l| has_remote(&l.config)),
            FdbConfig::Mirror { children, .. }
            | FdbConfig::Filter { children, .. }
            | FdbConfig::Diagnostics { children, .. } => children.iter().any(has_remote),
        }
    }
    if has_remote(config) {
        return Ok(None);
    }
    Ok(Some(match schema_of(config) {
        Some(p) => Schema::from_file(&p).map_err(ModelError::from)?,
        None => Schema::default_schema(),
    }))
}

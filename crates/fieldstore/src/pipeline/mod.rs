//! Pipelines: MultIO plan files run unchanged in front of (or over) the store. A [`PlanSet`] is
//! built from a config ([`config`]) and fed [`Message`]s; its sinks write the results. Bad input
//! fails the one message in the one plan ([`PipelineError`]), and window state can be saved and
//! restored ([`PipelineState`]). docs/pipelines.md has the semantics and MultIO's differences.

pub mod average_rate;
pub mod config;
pub mod context;
pub mod encode;
pub mod error;
pub mod feed;
pub mod follow;
pub mod message;
pub mod metadata;
pub mod metadata_mapping;
pub mod node;
pub mod plan;
pub mod replay;
pub mod scale;
pub mod select;
pub mod sink;
pub mod statistics;
pub mod trigger;

pub use config::Side;
pub use context::Context;
pub use error::PipelineError;
pub use message::{Field, FlushKind, Message, Payload};
pub use metadata::{Metadata, Value};
pub use plan::{PipelineState, PlanSet};

//! The one error type of pipelines. Load-time errors name the file and line of the plan;
//! run-time errors name the plan, the action and the field, so a bad field fails alone.

use crate::error_kind::ErrorKind;

/// What failed, where a user can find it. `kind_name` is stable (bindings and logs key on it).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The plan file is not valid YAML, or an entry has the wrong shape.
    #[error("{origin}{}: {message}", line_suffix(*.line))]
    Config {
        origin: String,
        line: Option<u64>,
        message: String,
    },
    /// An action type nobody registered (MultIO's registry names listed).
    #[error("{origin}{}: unknown action type '{name}' (known: {known})", line_suffix(*.line))]
    UnknownAction {
        origin: String,
        line: Option<u64>,
        name: String,
        known: String,
    },
    /// A MultIO action that cannot run here, with the reason.
    #[error("{origin}{}: action '{name}' is not supported: {reason}", line_suffix(*.line))]
    Refused {
        origin: String,
        line: Option<u64>,
        name: String,
        reason: String,
    },
    /// One field could not be processed by one action: metadata missing or mistyped, values of
    /// the wrong size, a mapping without an entry. Other fields and plans go on.
    #[error("plan '{plan}', action '{action}': field {field}: {message}")]
    Field {
        plan: String,
        action: String,
        field: String,
        message: String,
    },
    /// A sink could not write (file system, store).
    #[error("plan '{plan}', sink '{sink}': {message}")]
    Sink {
        plan: String,
        sink: String,
        message: String,
    },
    /// Saved state that does not fit the plan set it is restored into, or the store a
    /// follower or replay reads failing: the message says which.
    #[error("{0}")]
    State(String),
}

fn line_suffix(line: Option<u64>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

impl PipelineError {
    /// The stable kind the CLI, C and Python map from.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PipelineError::Config { .. } | PipelineError::UnknownAction { .. } => ErrorKind::Config,
            PipelineError::Refused { .. } => ErrorKind::Unsupported,
            PipelineError::Field { .. } | PipelineError::State(_) => ErrorKind::BadRequest,
            PipelineError::Sink { .. } => ErrorKind::Io,
        }
    }

    /// A short stable name of the variant, for counting failures by cause.
    pub fn kind_name(&self) -> &'static str {
        match self {
            PipelineError::Config { .. } => "plan-config",
            PipelineError::UnknownAction { .. } => "unknown-action",
            PipelineError::Refused { .. } => "refused-action",
            PipelineError::Field { .. } => "field",
            PipelineError::Sink { .. } => "sink",
            PipelineError::State(_) => "state",
        }
    }
}

/// Where an action sits, so errors raised inside it can say so.
#[derive(Debug, Clone)]
pub struct Site {
    pub plan: String,
    pub action: String,
}

impl Site {
    pub(crate) fn field_error(&self, field: &str, message: impl Into<String>) -> PipelineError {
        PipelineError::Field {
            plan: self.plan.clone(),
            action: self.action.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn sink_error(&self, sink: &str, message: impl Into<String>) -> PipelineError {
        PipelineError::Sink {
            plan: self.plan.clone(),
            sink: sink.to_string(),
            message: message.into(),
        }
    }
}

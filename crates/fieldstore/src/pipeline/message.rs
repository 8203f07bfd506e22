//! What flows through a plan: fields, flushes and notifications (MultIO's message kinds that do
//! not need MPI domain maps).

use std::sync::Arc;

use super::metadata::{Metadata, Value};

/// A field's data: decoded values, or encoded bytes (GRIB from the model or from `encode`).
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Values in double precision; `misc-precision: single` fields are rounded to `f32` only
    /// where they are written raw, so statistics of single fields are computed in double.
    Values(Vec<f64>),
    /// Encoded bytes (`misc-format: grib`, or the output of `encode`).
    Encoded(Vec<u8>),
}

/// One field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub metadata: Metadata,
    pub payload: Payload,
    /// The GRIB message the values were decoded from, if any: `encode` may use it as the
    /// template (the natural one for a field that came from the store or a file).
    pub source_grib: Option<Arc<[u8]>>,
}

impl Field {
    /// A field of decoded values; `misc-precision` and `misc-format` are set as MultIO's
    /// `multio_write_field_double` does.
    pub fn values(mut metadata: Metadata, values: Vec<f64>) -> Field {
        if !metadata.contains("misc-precision") {
            metadata.set("misc-precision", "double");
        }
        metadata.set("misc-format", "raw");
        Field {
            metadata,
            payload: Payload::Values(values),
            source_grib: None,
        }
    }

    /// A pre-encoded GRIB field (`multio_write_grib_encoded`).
    pub fn grib(bytes: Vec<u8>) -> Field {
        let mut metadata = Metadata::new();
        metadata.set("misc-format", "grib");
        Field {
            metadata,
            payload: Payload::Encoded(bytes),
            source_grib: None,
        }
    }

    /// Whether `missingValue` marks missing points: only when `bitmapPresent` is true and a
    /// missing value is given, as in MultIO.
    pub fn missing_value(&self) -> Result<Option<f64>, String> {
        if self.metadata.boolean("bitmapPresent")? != Some(true) {
            return Ok(None);
        }
        self.metadata.number("missingValue")
    }
}

/// What a flush means (`flushKind`); MultIO sends it as a string or an int.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushKind {
    FirstStep,
    Default,
    StepAndRestart,
    LastStep,
    EndOfSimulation,
    CloseConnection,
}

impl FlushKind {
    /// The kind a flush's metadata names; absent means `default`. An int or string out of range
    /// is an error (MultIO's legacy statistics aborts on an int; we read both).
    pub fn of(metadata: &Metadata) -> Result<FlushKind, String> {
        let kind = match metadata.get("flushKind") {
            None => return Ok(FlushKind::Default),
            Some(Value::String(s)) => match s.as_str() {
                "first-step" => FlushKind::FirstStep,
                "default" => FlushKind::Default,
                "step-and-restart" => FlushKind::StepAndRestart,
                "last-step" => FlushKind::LastStep,
                "end-of-simulation" => FlushKind::EndOfSimulation,
                "close-connection" => FlushKind::CloseConnection,
                other => return Err(format!("unknown flushKind '{other}'")),
            },
            Some(Value::Int(i)) => match i {
                0 => FlushKind::FirstStep,
                1 => FlushKind::Default,
                2 => FlushKind::StepAndRestart,
                3 => FlushKind::LastStep,
                4 => FlushKind::EndOfSimulation,
                5 => FlushKind::CloseConnection,
                other => return Err(format!("unknown flushKind {other}")),
            },
            Some(other) => {
                return Err(format!(
                    "flushKind must be a string or an int, it is the {} {other}",
                    other.type_name()
                ))
            }
        };
        Ok(kind)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlushKind::FirstStep => "first-step",
            FlushKind::Default => "default",
            FlushKind::StepAndRestart => "step-and-restart",
            FlushKind::LastStep => "last-step",
            FlushKind::EndOfSimulation => "end-of-simulation",
            FlushKind::CloseConnection => "close-connection",
        }
    }
}

/// One message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Field(Field),
    /// A step is complete (or the run ends); sinks make their data durable.
    Flush(Metadata),
    /// Trigger events (`trigger: <key>`).
    Notification(Metadata),
}

impl Message {
    pub fn metadata(&self) -> &Metadata {
        match self {
            Message::Field(f) => &f.metadata,
            Message::Flush(m) | Message::Notification(m) => m,
        }
    }

    /// A flush of the given kind.
    pub fn flush(kind: FlushKind) -> Message {
        let mut m = Metadata::new();
        m.set("flushKind", kind.as_str());
        Message::Flush(m)
    }

    pub fn tag(&self) -> &'static str {
        match self {
            Message::Field(_) => "Field",
            Message::Flush(_) => "Flush",
            Message::Notification(_) => "Notification",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_kinds_as_strings_and_ints() {
        let mut m = Metadata::new();
        assert_eq!(FlushKind::of(&m).unwrap(), FlushKind::Default);
        m.set("flushKind", "last-step");
        assert_eq!(FlushKind::of(&m).unwrap(), FlushKind::LastStep);
        m.set("flushKind", 2i64);
        assert_eq!(FlushKind::of(&m).unwrap(), FlushKind::StepAndRestart);
        m.set("flushKind", 9i64);
        assert!(FlushKind::of(&m).is_err());
    }

    #[test]
    fn missing_values_need_the_bitmap_flag() {
        let mut m = Metadata::new();
        m.set("missingValue", 9999.0);
        let f = Field::values(m.clone(), vec![]);
        assert_eq!(f.missing_value().unwrap(), None);
        m.set("bitmapPresent", true);
        let f = Field::values(m, vec![]);
        assert_eq!(f.missing_value().unwrap(), Some(9999.0));
    }
}

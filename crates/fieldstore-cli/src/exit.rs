//! The exit status of a failed command, from the kind of the error behind it.

use fieldstore::api::{ApiError, ArchiveError};
use fieldstore::grib::GribError;
use fieldstore::model::ModelError;
use fieldstore::remote::RemoteError;
use fieldstore::storage::StorageError;
use fieldstore::ErrorKind;

/// The kind of the outermost typed error in the chain; `None` for the CLI's own errors
/// (arguments, files it opens itself).
pub fn error_kind(e: &anyhow::Error) -> Option<ErrorKind> {
    e.chain().find_map(|c| {
        c.downcast_ref::<ApiError>()
            .map(ApiError::kind)
            .or_else(|| c.downcast_ref::<ArchiveError>().map(ArchiveError::kind))
            .or_else(|| c.downcast_ref::<RemoteError>().map(RemoteError::kind))
            .or_else(|| c.downcast_ref::<StorageError>().map(StorageError::kind))
            .or_else(|| c.downcast_ref::<ModelError>().map(ModelError::kind))
            .or_else(|| c.downcast_ref::<GribError>().map(GribError::kind))
    })
}

/// Scripts have always seen 1 for every failure, so every kind maps to 1 today; a kind that
/// deserves a status of its own (say `full`, worth a retry later) gets an arm here and a line
/// in the README, never a silent change.
pub fn exit_code(kind: Option<ErrorKind>) -> u8 {
    match kind {
        Some(_) | None => 1,
    }
}

pub fn failure(e: &anyhow::Error) -> u8 {
    exit_code(error_kind(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_found_through_context_and_keep_status_one() {
        let e = anyhow::Error::new(ApiError::NothingMatched("no database matches x".into()))
            .context("wipe");
        assert_eq!(error_kind(&e), Some(ErrorKind::NotFound));
        let e = anyhow::Error::new(ApiError::Locked {
            db: "d".into(),
            action: "wipe".into(),
        });
        assert_eq!(error_kind(&e), Some(ErrorKind::Locked));
        assert_eq!(error_kind(&anyhow::anyhow!("bad argument")), None);
        for k in ErrorKind::ALL {
            assert_eq!(exit_code(Some(k)), 1, "{k}");
        }
        assert_eq!(exit_code(None), 1);
    }
}

//! The plugin's error: permanent (do not retry the same input) or transient
//! (retry with backoff).

use std::fmt;

/// Why a plugin could not produce an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Retrying the same input cannot help (e.g. an invalid spec). The host
    /// sets Ready=False with this reason and waits for the parent to change.
    Permanent { reason: String, message: String },
    /// A later attempt may succeed (e.g. a related object is not there yet).
    Transient { reason: String, message: String },
}

impl Error {
    /// A permanent error with a CamelCase `reason`.
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Permanent {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A transient error with a CamelCase `reason`.
    pub fn transient(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Transient {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Permanent `InvalidSpec` error naming the offending field, e.g.
    /// `invalid_spec("spec.replicas", "must be >= 0")`.
    pub fn invalid_spec(field: &str, problem: &str) -> Self {
        Error::permanent("InvalidSpec", format!("{field}: {problem}"))
    }

    /// The CamelCase reason.
    pub fn reason(&self) -> &str {
        match self {
            Error::Permanent { reason, .. } | Error::Transient { reason, .. } => reason,
        }
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        match self {
            Error::Permanent { message, .. } | Error::Transient { message, .. } => message,
        }
    }

    /// Whether this is a permanent error.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Error::Permanent { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_permanent() {
            "permanent"
        } else {
            "transient"
        };
        write!(f, "{kind} error {}: {}", self.reason(), self.message())
    }
}

impl std::error::Error for Error {}

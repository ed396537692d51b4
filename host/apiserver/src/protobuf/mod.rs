//! Kubernetes protobuf: the envelope (`k8s\0` + `runtime.Unknown`), a generic
//! converter between any built-in kind's JSON and its message, and content
//! negotiation. The server stores and reasons in JSON; protobuf exists only
//! at the wire, for the clients that send it (kubectl's typed generators,
//! client-go) and ask for it back.

mod convert;
mod envelope;
mod negotiate;
mod schema;
mod special;

pub use envelope::decode;
pub use negotiate::{Accept, WatchStream, respond};

/// A protobuf body that cannot be turned into JSON (or an object that cannot
/// be turned into protobuf).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PbError(String);

impl PbError {
    fn new(message: impl Into<String>) -> PbError {
        PbError(message.into())
    }

    /// An error at a field path (`spec.template.spec.containers[0].ports`).
    fn at(path: &str, message: impl std::fmt::Display) -> PbError {
        PbError::new(format!(
            "{}: {message}",
            if path.is_empty() { "<object>" } else { path }
        ))
    }
}

#[cfg(test)]
mod tests;

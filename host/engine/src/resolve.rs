//! Resolving the resources a WasmController names (apiVersion + plural or kind)
//! through API discovery, so CRDs installed after the host started work, and a
//! kind that does not exist yet is a retryable condition instead of a crash.

use kube::api::ApiResource;
use kube::core::GroupVersion;
use kube::discovery::{Scope, oneshot};

use crate::crd::ResourceRef;
use crate::errors::{ApiErrorClass, classify};

/// A resource as the engine uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Group, version, kind, plural.
    pub ar: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether `/status` is a subresource (status writes must go there).
    pub status_subresource: bool,
}

/// Why a resource could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The apiVersion is malformed.
    #[error("invalid apiVersion {0:?}")]
    InvalidApiVersion(String),
    /// Discovery works but does not list the resource (yet).
    #[error("{api_version} {name} is not served by the API server")]
    NotFound {
        /// apiVersion asked for.
        api_version: String,
        /// Plural or kind asked for.
        name: String,
    },
    /// Discovery failed (API server unreachable, ...).
    #[error("discovery of {api_version} failed: {source}")]
    Discovery {
        /// apiVersion asked for.
        api_version: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Resolves one resource reference.
pub async fn resolve(client: &kube::Client, r: &ResourceRef) -> Result<Resolved, ResolveError> {
    let gv: GroupVersion = r
        .api_version
        .parse()
        .map_err(|_| ResolveError::InvalidApiVersion(r.api_version.clone()))?;
    let wanted = r
        .resource
        .clone()
        .or_else(|| r.kind.clone())
        .unwrap_or_default();
    let not_found = || ResolveError::NotFound {
        api_version: r.api_version.clone(),
        name: wanted.clone(),
    };
    let group = match oneshot::pinned_group(client, &gv).await {
        Ok(g) => g,
        Err(e) if classify(&e) == ApiErrorClass::NotFound => return Err(not_found()),
        Err(kube::Error::Discovery(_)) => return Err(not_found()),
        Err(source) => {
            return Err(ResolveError::Discovery {
                api_version: r.api_version.clone(),
                source,
            });
        }
    };
    let found = group
        .versioned_resources(&gv.version)
        .into_iter()
        .find(|(ar, _)| match (&r.resource, &r.kind) {
            (Some(p), _) => &ar.plural == p,
            (None, Some(k)) => &ar.kind == k,
            (None, None) => false,
        });
    let (ar, caps) = found.ok_or_else(not_found)?;
    Ok(Resolved {
        status_subresource: caps.subresources.iter().any(|(s, _)| s.plural == "status"),
        namespaced: caps.scope == Scope::Namespaced,
        ar,
    })
}

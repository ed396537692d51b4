//! The API request log: how tests count writes "through the API server, not
//! by trusting the host". One record per resource request (discovery is not
//! logged), appended once the response code is known.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One API request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// HTTP status code of the response (0 when the connection was dropped).
    pub code: u16,
    pub field_manager: Option<String>,
    /// `json`, `merge`, `strategic`, `apply` for patches.
    pub patch_type: Option<String>,
    pub dry_run: bool,
    pub user_agent: Option<String>,
    /// The injected fault, if any (`conflict`, `commitThenDrop`, ...).
    pub fault: Option<String>,
}

impl RequestRecord {
    /// Writes that change (or try to change) stored state.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// A write that created an object: a successful POST, or a server-side
    /// apply (or other patch) answered 201 Created.
    pub fn created(&self) -> bool {
        match self.verb.as_str() {
            "create" => (200..300).contains(&self.code),
            "patch" => self.code == 201,
            _ => false,
        }
    }
}

/// Append-only log shared by all handlers.
#[derive(Debug, Default)]
pub struct RequestLog(Mutex<Vec<RequestRecord>>);

impl RequestLog {
    pub fn push(&self, r: RequestRecord) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    pub fn snapshot(&self) -> Vec<RequestRecord> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

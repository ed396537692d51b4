//! The static-site logic called natively (variants 2 and 3): the plugin
//! crate's own `StaticSite::reconcile`, the function the WASM component
//! exports, linked here as an ordinary Rust library.
//!
//! Types on the way in and out are the host's (`wr_runtime`), so the webhook
//! wire format is exactly the WIT contract in JSON (`ReconcileRequest` /
//! `ReconcileResponse`, camelCase), like Metacontroller's sync hook.

use serde::{Deserialize, Serialize};
use wr_plugin_sdk::Reconciler;
use wr_runtime::{
    Condition, ConditionStatus, Event, EventType, ReconcileRequest, ReconcileResponse,
};

/// A plugin verdict (the hook's 422 body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct LogicError {
    /// Retrying the same input cannot help.
    pub permanent: bool,
    /// CamelCase reason.
    pub reason: String,
    /// Detail.
    pub message: String,
}

/// Runs static-site on `req` (moved: no copies of the objects).
pub fn reconcile(req: ReconcileRequest) -> Result<ReconcileResponse, LogicError> {
    let sdk_req = wr_plugin_sdk::Request {
        parent: req.parent,
        children: req.children.into(),
        related: req
            .related
            .into_iter()
            .map(|g| wr_plugin_sdk::Related {
                name: g.name,
                objects: g.objects,
            })
            .collect(),
        finalizing: req.finalizing,
        config: req.config,
        now: req.now,
    };
    match static_site::StaticSite::reconcile(&sdk_req) {
        Ok(r) => Ok(to_host(r)),
        Err(e) => Err(LogicError {
            permanent: e.is_permanent(),
            reason: e.reason().to_string(),
            message: e.message().to_string(),
        }),
    }
}

fn to_host(r: wr_plugin_sdk::Response) -> ReconcileResponse {
    ReconcileResponse {
        children: r.children,
        conditions: r
            .conditions
            .into_iter()
            .map(|c| Condition {
                type_: c.type_,
                status: match c.status {
                    wr_plugin_sdk::ConditionStatus::True => ConditionStatus::True,
                    wr_plugin_sdk::ConditionStatus::False => ConditionStatus::False,
                    wr_plugin_sdk::ConditionStatus::Unknown => ConditionStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        status: r.status,
        requeue_after_seconds: r.requeue_after_seconds,
        events: r
            .events
            .into_iter()
            .map(|e| Event {
                type_: match e.type_ {
                    wr_plugin_sdk::EventType::Normal => EventType::Normal,
                    wr_plugin_sdk::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        finalized: r.finalized,
    }
}

/// The controller config every variant passes (as in engine_bench).
pub fn config() -> serde_json::Value {
    serde_json::json!({"clusterDomain": "cluster.local"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn native_logic_gives_three_children_and_a_status() {
        let req = ReconcileRequest {
            parent: json!({
                "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
                "metadata": {"name": "s", "namespace": "ns", "uid": "u1", "generation": 1},
                "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                         "content": {"index.html": "<h1>x</h1>"}}
            }),
            children: vec![],
            related: vec![],
            finalizing: false,
            config: Some(config()),
            now: "2026-11-30T00:00:00Z".into(),
        };
        let resp = reconcile(req).unwrap();
        let kinds: Vec<&str> = resp
            .children
            .iter()
            .map(|c| c["kind"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Deployment", "Service"]);
        assert_eq!(
            resp.status.as_ref().and_then(|s| s["url"].as_str()),
            Some("http://s.ns.svc.cluster.local:8080/")
        );
        // Round-trips through the webhook wire format unchanged.
        let wire = serde_json::to_vec(&resp).unwrap();
        let back: ReconcileResponse = serde_json::from_slice(&wire).unwrap();
        assert_eq!(back, resp);
    }

    #[test]
    fn bad_spec_is_a_permanent_verdict() {
        let req = ReconcileRequest {
            parent: json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": {}}),
            children: vec![],
            related: vec![],
            finalizing: false,
            config: None,
            now: "2026-11-30T00:00:00Z".into(),
        };
        let err = reconcile(req).unwrap_err();
        assert!(err.permanent, "{err:?}");
    }
}

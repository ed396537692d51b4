//! The engine's view of a plugin: something that answers a `ReconcileRequest`.
//!
//! A trait rather than `wr_runtime::Plugin` directly so the controller machinery
//! can be unit-tested with in-process fakes, and so tests can script plugin
//! behaviour (fail N times, permanent error, invalid output) without building a
//! component per scenario. Production code uses [`crate::wasm::WasmLoader`].

use std::sync::Arc;

use futures::future::BoxFuture;
use wr_runtime::{
    CallLimits, CustomizeRequest, FaultKind, ReconcileRequest, ReconcileResponse, RelatedSelector,
    RequestText,
};

/// Why a plugin call produced no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// Retrying the same input cannot help: Ready=False, no retry until the parent changes.
    #[error("permanent plugin error {reason}: {message}")]
    Permanent {
        /// CamelCase reason.
        reason: String,
        /// Detail.
        message: String,
    },
    /// May succeed later: per-key backoff.
    #[error("transient plugin error {reason}: {message}")]
    Transient {
        /// CamelCase reason.
        reason: String,
        /// Detail.
        message: String,
    },
    /// The sandbox stopped the call (trap, timeout, fuel, memory, malformed
    /// output): the runtime's own fault kind, carried as a type up to the
    /// metrics. Malformed output (`FaultKind::InvalidOutput`) is not retried,
    /// like output the host's validation rejects ([`crate::decide`]).
    #[error("plugin fault ({kind}): {message}")]
    Fault {
        /// Which limit or failure.
        kind: FaultKind,
        /// Detail.
        message: String,
    },
}

/// A loaded plugin.
pub trait ReconcilePlugin: Send + Sync {
    /// `sha256:<hex>` of the component.
    fn digest(&self) -> &str;
    /// The plugin contract version and world the component implements and
    /// what it declared at load (`None`: not a component, e.g. a test fake).
    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        None
    }
    /// One reconcile call.
    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>>;
    /// One reconcile call whose request the caller already serialised:
    /// `text` is [`RequestText::new`] of `req` (the engine made it once for
    /// its memo hash too). A plugin that runs a component hands `text` to the
    /// wire as it is, so the request is not serialised again; wrappers pass
    /// it on. The default (test fakes, which read the Values) drops it.
    fn reconcile_text<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        text: RequestText,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        drop(text);
        self.reconcile(req, limits)
    }
    /// One `customize` call: the related objects this parent asks for.
    /// `Ok(None)` (the default) when the plugin does not export `customize`:
    /// the controller's related rules apply unnarrowed.
    fn customize<'a>(
        &'a self,
        _req: &'a CustomizeRequest,
        _limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<Option<Vec<RelatedSelector>>, PluginError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Turns component bytes into a callable plugin.
pub trait PluginLoader: Send + Sync {
    /// Compiles/validates `bytes` (CPU heavy: implementations must not block the
    /// async runtime). The error message is shown in the `PluginLoaded` condition.
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::Epoch;
    use crate::rollout::{Judge, Judged};
    use serde_json::json;

    /// Answers with a condition reason saying which method it was called
    /// through, and whether the text it got is that of the request.
    struct Seen;

    fn answer(reason: &str) -> ReconcileResponse {
        ReconcileResponse {
            children: vec![],
            conditions: vec![wr_runtime::Condition {
                type_: "Seen".into(),
                status: wr_runtime::ConditionStatus::True,
                reason: reason.into(),
                message: String::new(),
            }],
            status: None,
            requeue_after_seconds: None,
            events: vec![],
            finalized: false,
        }
    }

    impl ReconcilePlugin for Seen {
        fn digest(&self) -> &str {
            "sha256:seen"
        }
        fn reconcile<'a>(
            &'a self,
            _req: &'a ReconcileRequest,
            _limits: &'a CallLimits,
        ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
            Box::pin(async { Ok(answer("Values")) })
        }
        fn reconcile_text<'a>(
            &'a self,
            req: &'a ReconcileRequest,
            text: RequestText,
            _limits: &'a CallLimits,
        ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
            let same = RequestText::new(req).ok() == Some(text);
            Box::pin(async move { Ok(answer(if same { "Text" } else { "OtherText" })) })
        }
    }

    fn reason(r: Result<ReconcileResponse, PluginError>) -> String {
        r.expect("an answer").conditions[0].reason.clone()
    }

    #[tokio::test]
    async fn the_production_wrappers_pass_the_request_text_on() {
        // The engine serialises a request once and hands the text down; a
        // wrapper that dropped it would make the component serialise again.
        let req = ReconcileRequest {
            parent: json!({"metadata": {"name": "p"}}),
            children: vec![json!({"data": {"a": "b"}})],
            related: vec![],
            finalizing: false,
            config: Some(json!({"k": 1})),
            now: "2026-01-01T00:00:00Z".into(),
        };
        let text = || RequestText::new(&req).expect("serialises");
        let limits = CallLimits::default();
        let (epoch, _gone) = Epoch::new(Arc::new(Seen));
        let policy = crate::crd::RollbackPolicy {
            reconciles: None,
            max_fault_percent: None,
        };
        let judge = Judge::new(&policy, Box::new(|| {}));
        let judged = Judged::new(epoch.clone(), judge);
        for p in [epoch as Arc<dyn ReconcilePlugin>, judged] {
            assert_eq!(
                reason(p.reconcile_text(&req, text(), &limits).await),
                "Text"
            );
            assert_eq!(reason(p.reconcile(&req, &limits).await), "Values");
        }
    }

    #[tokio::test]
    async fn a_plugin_without_its_own_text_call_is_given_the_values() {
        struct Plain;
        impl ReconcilePlugin for Plain {
            fn digest(&self) -> &str {
                "sha256:plain"
            }
            fn reconcile<'a>(
                &'a self,
                _req: &'a ReconcileRequest,
                _limits: &'a CallLimits,
            ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
                Box::pin(async { Ok(answer("Values")) })
            }
        }
        let req = ReconcileRequest {
            parent: json!({}),
            children: vec![],
            related: vec![],
            finalizing: false,
            config: None,
            now: String::new(),
        };
        let text = RequestText::new(&req).expect("serialises");
        let r = Plain
            .reconcile_text(&req, text, &CallLimits::default())
            .await;
        assert_eq!(reason(r), "Values");
    }
}

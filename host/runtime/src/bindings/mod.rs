//! Host bindings, one module per contract version (`bindgen!` each), and the
//! adapters between each version's generated types and the one host-side
//! shape in `types.rs`.
//!
//! The component model types a component's exports structurally: a record
//! with one more field is another type, so one `bindgen!` can only ever call
//! components of one contract version. Each version therefore has its own
//! generated module (`v0_1`, `v0_2`), and [`WorldPre`] is the one handle the
//! rest of the runtime uses, whichever version a component implements.

pub(crate) mod v0_1;
pub(crate) mod v0_2;

use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

use crate::contract::{ContractVersion, PluginInfo, World};
use crate::error::{CallError, FaultKind};
use crate::sandbox::HostState;
use crate::types as host;

/// A component pre-linked for the world it implements.
pub(crate) enum WorldPre {
    V0_1(v0_1::ReconcilerPre<HostState>),
    V0_2(v0_2::ReconcilerPre<HostState>),
    V0_2Customize(v0_2::customize::ReconcilerWithCustomizePre<HostState>),
}

impl WorldPre {
    pub(crate) fn engine(&self) -> &Engine {
        match self {
            WorldPre::V0_1(pre) => pre.engine(),
            WorldPre::V0_2(pre) => pre.engine(),
            WorldPre::V0_2Customize(pre) => pre.engine(),
        }
    }

    pub(crate) fn contract(&self) -> ContractVersion {
        match self {
            WorldPre::V0_1(_) => ContractVersion::V0_1,
            WorldPre::V0_2(_) | WorldPre::V0_2Customize(_) => ContractVersion::V0_2,
        }
    }

    pub(crate) fn world(&self) -> World {
        match self {
            WorldPre::V0_1(_) | WorldPre::V0_2(_) => World::Reconciler,
            WorldPre::V0_2Customize(_) => World::ReconcilerWithCustomize,
        }
    }

    /// A fresh instance in `store`.
    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<WorldInstance> {
        Ok(match self {
            WorldPre::V0_1(pre) => WorldInstance::V0_1(pre.instantiate_async(store).await?),
            WorldPre::V0_2(pre) => WorldInstance::V0_2(pre.instantiate_async(store).await?),
            WorldPre::V0_2Customize(pre) => {
                WorldInstance::V0_2Customize(pre.instantiate_async(store).await?)
            }
        })
    }
}

/// One instance of a component, whichever world it implements.
pub(crate) enum WorldInstance {
    V0_1(v0_1::Reconciler),
    V0_2(v0_2::Reconciler),
    V0_2Customize(v0_2::customize::ReconcilerWithCustomize),
}

/// What one call asks of an instance, already lowered to the version's
/// types (so a request that cannot be serialised fails before instantiating).
pub(crate) enum Op {
    Reconcile(WireRequest),
    Info,
    Customize(v0_2::wit::CustomizeRequest),
}

/// A reconcile request in the types of one contract version.
pub(crate) enum WireRequest {
    V0_1(v0_1::wit::ReconcileRequest),
    V0_2(v0_2::wit::ReconcileRequest),
}

/// What an instance answered, lifted into version-neutral types.
pub(crate) enum OpResult {
    Reconcile(Result<RawResponse, CallError>),
    Info(PluginInfo),
    Customize(Result<Vec<host::RelatedSelector>, CallError>),
}

impl WorldInstance {
    /// Runs `op`. An `Err` is a wasmtime failure (trap, interrupt, ...); the
    /// plugin's own error is inside the `OpResult`.
    pub(crate) async fn call(
        &self,
        store: &mut Store<HostState>,
        op: &Op,
    ) -> wasmtime::Result<OpResult> {
        match (self, op) {
            (WorldInstance::V0_1(i), Op::Reconcile(WireRequest::V0_1(req))) => {
                let out = i.call_reconcile(store, req).await?;
                Ok(OpResult::Reconcile(
                    out.map(v0_1::response).map_err(v0_1::error),
                ))
            }
            (WorldInstance::V0_2(i), Op::Reconcile(WireRequest::V0_2(req))) => {
                let out = i.call_reconcile(store, req).await?;
                Ok(OpResult::Reconcile(
                    out.map(v0_2::response).map_err(v0_2::error),
                ))
            }
            (WorldInstance::V0_2Customize(i), Op::Reconcile(WireRequest::V0_2(req))) => {
                let out = i.call_reconcile(store, req).await?;
                Ok(OpResult::Reconcile(
                    out.map(v0_2::response).map_err(v0_2::error),
                ))
            }
            (WorldInstance::V0_2(i), Op::Info) => {
                let info = i.call_info(store).await?;
                Ok(OpResult::Info(v0_2::info(info, World::Reconciler)))
            }
            (WorldInstance::V0_2Customize(i), Op::Info) => {
                let info = i.call_info(store).await?;
                Ok(OpResult::Info(v0_2::info(
                    info,
                    World::ReconcilerWithCustomize,
                )))
            }
            (WorldInstance::V0_2Customize(i), Op::Customize(req)) => {
                let out = i.call_customize(store, req).await?;
                Ok(OpResult::Customize(
                    out.map(|s| s.into_iter().map(v0_2::selector).collect())
                        .map_err(v0_2::error),
                ))
            }
            _ => Err(wasmtime::Error::msg(
                "internal error: call does not match the plugin's world",
            )),
        }
    }
}

/// Adds the host side of every supported version (the `log` import of each)
/// to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    v0_2::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    Ok(())
}

/// Lowers a request, its objects already JSON text, into the types of
/// `version`: the texts move into the wire request, nothing is serialised
/// or copied again.
pub(crate) fn wire_request(version: ContractVersion, req: host::RequestText) -> WireRequest {
    match version {
        ContractVersion::V0_1 => WireRequest::V0_1(v0_1::request(req)),
        ContractVersion::V0_2 => WireRequest::V0_2(v0_2::request(req)),
    }
}

/// A response lifted from any version, objects still JSON text: what the
/// response cap measures before anything is parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawResponse {
    pub(crate) children: Vec<String>,
    pub(crate) conditions: Vec<host::Condition>,
    pub(crate) status: Option<String>,
    pub(crate) requeue_after_seconds: Option<u32>,
    pub(crate) events: Vec<host::Event>,
    pub(crate) finalized: bool,
}

impl RawResponse {
    /// Total number of bytes of text; what the response cap measures.
    pub(crate) fn size(&self) -> usize {
        let conditions: usize = self
            .conditions
            .iter()
            .map(|c| c.type_.len() + c.reason.len() + c.message.len())
            .sum();
        let events: usize = self
            .events
            .iter()
            .map(|e| e.reason.len() + e.message.len())
            .sum();
        self.children.iter().map(String::len).sum::<usize>()
            + self.status.as_ref().map_or(0, String::len)
            + conditions
            + events
    }

    /// Parses the objects; any child or status that is not a JSON object is
    /// an `InvalidOutput` fault naming the offending item.
    pub(crate) fn parse(self) -> Result<host::ReconcileResponse, CallError> {
        let mut children = Vec::with_capacity(self.children.len());
        for (index, text) in self.children.iter().enumerate() {
            children.push(parse_object(text, || format!("children[{index}]"))?);
        }
        let status = self
            .status
            .as_deref()
            .map(|text| parse_object(text, || "status".into()))
            .transpose()?;
        Ok(host::ReconcileResponse {
            children,
            conditions: self.conditions,
            status,
            requeue_after_seconds: self.requeue_after_seconds,
            events: self.events,
            finalized: self.finalized,
        })
    }
}

/// Parses one object of the response; `what` names it in the error and is
/// only formatted on failure.
fn parse_object(text: &str, what: impl Fn() -> String) -> Result<Value, CallError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        CallError::fault(
            FaultKind::InvalidOutput,
            format!("response {} is not valid JSON: {e}", what()),
        )
    })?;
    if !value.is_object() {
        return Err(CallError::fault(
            FaultKind::InvalidOutput,
            format!("response {} is JSON but not an object", what()),
        ));
    }
    Ok(value)
}

/// The conversions whose WIT types are the same in every version (condition,
/// event, error, log level), written once for the `wit` module in scope at
/// the invocation (each version module does `use ... as wit`).
macro_rules! common_conversions {
    () => {
        /// Lifts a response into the version-neutral shape.
        pub(crate) fn response(r: wit::ReconcileResponse) -> $crate::bindings::RawResponse {
            $crate::bindings::RawResponse {
                children: r.children,
                conditions: r.conditions.into_iter().map(condition).collect(),
                status: r.status,
                requeue_after_seconds: r.requeue_after_seconds,
                events: r.events.into_iter().map(event).collect(),
                finalized: r.finalized,
            }
        }

        /// Maps the plugin's own error into the host error.
        pub(crate) fn error(err: wit::ReconcileError) -> $crate::error::CallError {
            use $crate::error::CallError;
            match err {
                wit::ReconcileError::Permanent(d) => CallError::Permanent {
                    reason: d.reason,
                    message: d.message,
                },
                wit::ReconcileError::Transient(d) => CallError::Transient {
                    reason: d.reason,
                    message: d.message,
                },
            }
        }

        fn condition(c: wit::Condition) -> $crate::types::Condition {
            use $crate::types::ConditionStatus as S;
            $crate::types::Condition {
                type_: c.type_,
                status: match c.status {
                    wit::ConditionStatus::True => S::True,
                    wit::ConditionStatus::False => S::False,
                    wit::ConditionStatus::Unknown => S::Unknown,
                },
                reason: c.reason,
                message: c.message,
            }
        }

        fn event(e: wit::Event) -> $crate::types::Event {
            $crate::types::Event {
                type_: match e.type_ {
                    wit::EventType::Normal => $crate::types::EventType::Normal,
                    wit::EventType::Warning => $crate::types::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            }
        }

        /// The `log` import of this version.
        impl host_iface::Host for $crate::sandbox::HostState {
            fn log(&mut self, level: wit::LogLevel, message: String) {
                let level = match level {
                    wit::LogLevel::Trace => $crate::sandbox::Level::Trace,
                    wit::LogLevel::Debug => $crate::sandbox::Level::Debug,
                    wit::LogLevel::Info => $crate::sandbox::Level::Info,
                    wit::LogLevel::Warn => $crate::sandbox::Level::Warn,
                    wit::LogLevel::Error => $crate::sandbox::Level::Error,
                };
                self.plugin_log(level, &message);
            }
        }

        impl wit::Host for $crate::sandbox::HostState {}
    };
}
pub(crate) use common_conversions;

#[cfg(test)]
mod tests {
    use super::*;

    fn response(children: Vec<&str>, status: Option<&str>) -> RawResponse {
        RawResponse {
            children: children.into_iter().map(String::from).collect(),
            conditions: vec![],
            status: status.map(String::from),
            requeue_after_seconds: None,
            events: vec![],
            finalized: false,
        }
    }

    #[test]
    fn non_json_child_is_invalid_output_naming_the_index() {
        let err = response(vec!["{}", "{nope"], None).parse().unwrap_err();
        match err {
            CallError::Fault { kind, message } => {
                assert_eq!(kind, FaultKind::InvalidOutput);
                assert!(message.contains("children[1]"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn status_must_be_an_object() {
        let err = response(vec![], Some("[1]")).parse().unwrap_err();
        assert!(err.to_string().contains("status"), "{err}");
    }

    fn request() -> host::ReconcileRequest {
        let mut related = Vec::new();
        host::RelatedObjects::group(&mut related, "secrets")
            .push(serde_json::json!({"data": {"k": "dsa\"\n\u{e9}"}}));
        host::RelatedObjects::group(&mut related, "empty");
        host::RelatedObjects::group(&mut related, "maps").extend([
            serde_json::json!({"b": 1, "a": [1.5, null]}),
            serde_json::json!({}),
        ]);
        host::ReconcileRequest {
            parent: serde_json::json!({"metadata": {"name": "p"}, "spec": {"z": 1, "a": "<h1>"}}),
            children: vec![
                serde_json::json!({"kind": "ConfigMap"}),
                serde_json::json!({}),
            ],
            related,
            finalizing: true,
            config: Some(serde_json::json!({"tier": "gold"})),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    fn json(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn the_wire_carries_each_object_as_its_serde_json_text() {
        // What a 0.2.0 plugin reads: byte for byte `serde_json::to_string`
        // of each value, groups in order, nothing re-serialised on the way.
        let req = request();
        let wire = v0_2::request(host::RequestText::new(&req).unwrap());
        assert_eq!(wire.parent, json(&req.parent));
        let children: Vec<String> = req.children.iter().map(json).collect();
        assert_eq!(wire.children, children);
        let related: Vec<(String, Vec<String>)> = req
            .related
            .iter()
            .map(|g| (g.name.clone(), g.objects.iter().map(json).collect()))
            .collect();
        let wired: Vec<(String, Vec<String>)> = wire
            .related
            .into_iter()
            .map(|g| (g.name, g.objects))
            .collect();
        assert_eq!(wired, related);
        assert_eq!(wire.config.as_deref(), Some(r#"{"tier":"gold"}"#));
        assert!(wire.finalizing);
        assert_eq!(wire.now, req.now);
    }

    #[test]
    fn a_0_1_plugin_gets_the_related_texts_flat_in_group_order() {
        let mut req = request();
        req.config = None;
        req.finalizing = false;
        let wire = v0_1::request(host::RequestText::new(&req).unwrap());
        let flat: Vec<String> = req.related_flat().map(json).collect();
        assert_eq!(flat.len(), 3);
        assert_eq!(wire.related, flat);
        assert_eq!(wire.parent, json(&req.parent));
        assert_eq!(
            wire.children,
            req.children.iter().map(json).collect::<Vec<_>>()
        );
        assert_eq!(wire.config, None);
        assert!(!wire.finalizing);
    }

    #[test]
    fn a_candidate_config_replaces_only_the_config_text() {
        let req = request();
        let mut text = host::RequestText::new(&req).unwrap();
        let before = text.clone();
        text.set_config(Some(&serde_json::json!({"tier": "canary"})))
            .unwrap();
        assert_eq!(text.config.as_deref(), Some(r#"{"tier":"canary"}"#));
        text.config = before.config.clone();
        assert_eq!(text, before);
        text.set_config(None).unwrap();
        assert_eq!(text.config, None);
    }

    #[test]
    fn size_counts_all_text() {
        let mut r = response(vec!["{}", "{\"a\":1}"], Some("{}"));
        r.events.push(host::Event {
            type_: host::EventType::Normal,
            reason: "R".into(),
            message: "mm".into(),
        });
        assert_eq!(r.size(), 2 + 7 + 2 + 3);
    }
}

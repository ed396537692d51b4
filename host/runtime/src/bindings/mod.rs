//! Host bindings generated from `wit/reconciler.wit`, and the conversions
//! between the generated WIT types and the host-side mirror in `types.rs`.

use serde_json::Value;

use crate::error::{CallError, FaultKind};
use crate::types as host;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "reconciler",
    exports: { default: async },
});

pub(crate) use self::wasm_reconciler::plugin::types as wit;

/// Serialises the host request into the WIT record (objects as JSON text).
pub(crate) fn to_wit_request(
    req: &host::ReconcileRequest,
) -> Result<wit::ReconcileRequest, CallError> {
    let text = |v: &Value| {
        serde_json::to_string(v).map_err(|e| {
            CallError::fault(
                FaultKind::Internal,
                format!("cannot serialise request: {e}"),
            )
        })
    };
    Ok(wit::ReconcileRequest {
        parent: text(&req.parent)?,
        children: req.children.iter().map(text).collect::<Result<_, _>>()?,
        related: req.related.iter().map(text).collect::<Result<_, _>>()?,
        finalizing: req.finalizing,
        config: req.config.as_ref().map(text).transpose()?,
        now: req.now.clone(),
    })
}

/// Total number of bytes of text in a response; what the response cap measures.
pub(crate) fn response_size(resp: &wit::ReconcileResponse) -> usize {
    let conditions: usize = resp
        .conditions
        .iter()
        .map(|c| c.type_.len() + c.reason.len() + c.message.len())
        .sum();
    let events: usize = resp
        .events
        .iter()
        .map(|e| e.reason.len() + e.message.len())
        .sum();
    resp.children.iter().map(String::len).sum::<usize>()
        + resp.status.as_ref().map_or(0, String::len)
        + conditions
        + events
}

/// Parses a plugin response; any child or status that is not a JSON object is
/// an `InvalidOutput` fault naming the offending item.
pub(crate) fn from_wit_response(
    resp: wit::ReconcileResponse,
) -> Result<host::ReconcileResponse, CallError> {
    let mut children = Vec::with_capacity(resp.children.len());
    for (index, text) in resp.children.iter().enumerate() {
        children.push(parse_object(text, || format!("children[{index}]"))?);
    }
    let status = resp
        .status
        .as_deref()
        .map(|text| parse_object(text, || "status".into()))
        .transpose()?;
    Ok(host::ReconcileResponse {
        children,
        conditions: resp.conditions.into_iter().map(condition).collect(),
        status,
        requeue_after_seconds: resp.requeue_after_seconds,
        events: resp.events.into_iter().map(event).collect(),
        finalized: resp.finalized,
    })
}

/// Maps the plugin's own error into the host error.
pub(crate) fn from_wit_error(err: wit::ReconcileError) -> CallError {
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

fn condition(c: wit::Condition) -> host::Condition {
    host::Condition {
        type_: c.type_,
        status: match c.status {
            wit::ConditionStatus::True => host::ConditionStatus::True,
            wit::ConditionStatus::False => host::ConditionStatus::False,
            wit::ConditionStatus::Unknown => host::ConditionStatus::Unknown,
        },
        reason: c.reason,
        message: c.message,
    }
}

fn event(e: wit::Event) -> host::Event {
    host::Event {
        type_: match e.type_ {
            wit::EventType::Normal => host::EventType::Normal,
            wit::EventType::Warning => host::EventType::Warning,
        },
        reason: e.reason,
        message: e.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(children: Vec<&str>, status: Option<&str>) -> wit::ReconcileResponse {
        wit::ReconcileResponse {
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
        let err = from_wit_response(response(vec!["{}", "{nope"], None)).unwrap_err();
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
        let err = from_wit_response(response(vec![], Some("[1]"))).unwrap_err();
        assert!(err.to_string().contains("status"), "{err}");
    }

    #[test]
    fn size_counts_all_text() {
        let mut r = response(vec!["{}", "{\"a\":1}"], Some("{}"));
        r.events.push(wit::Event {
            type_: wit::EventType::Normal,
            reason: "R".into(),
            message: "mm".into(),
        });
        assert_eq!(response_size(&r), 2 + 7 + 2 + 3);
    }
}

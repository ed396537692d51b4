//! Glue between the generated WIT bindings and the author-facing types.
//! Used by `export_reconciler!` and `export_reconciler_with_customize!`;
//! not a public API.

use serde_json::Value;

use crate::bindings::wasm_reconciler::plugin::types as wit;
use crate::{
    Children, ConditionStatus, Customize, CustomizeRequest, Error, EventType, Reconciler, Related,
    Request, Response,
};

/// The plugin's declarations, for the `info` export.
pub fn info<T: Reconciler>() -> wit::PluginInfo {
    wit::PluginInfo {
        reads_now: T::READS_NOW,
    }
}

/// Parses the customize request, runs the plugin's `customize`, lowers
/// the selectors.
pub fn dispatch_customize<T: Customize>(
    request: wit::CustomizeRequest,
) -> Result<Vec<wit::RelatedSelector>, wit::ReconcileError> {
    let request = CustomizeRequest {
        parent: parse(&request.parent, || "parent".into()).map_err(to_wit_error)?,
        config: request
            .config
            .as_deref()
            .map(|c| parse(c, || "config".into()))
            .transpose()
            .map_err(to_wit_error)?,
    };
    match T::customize(&request) {
        Ok(selectors) => Ok(selectors.into_iter().map(|s| s.into_wit()).collect()),
        Err(err) => Err(to_wit_error(err)),
    }
}

/// Parses the request, runs the plugin, serialises the response.
pub fn dispatch<T: Reconciler>(
    request: wit::ReconcileRequest,
) -> Result<wit::ReconcileResponse, wit::ReconcileError> {
    let request = parse_request(request).map_err(to_wit_error)?;
    let result = match T::reconcile(&request) {
        Ok(response) => Ok(to_wit_response(response)),
        Err(err) => Err(to_wit_error(err)),
    };
    discard(request);
    result
}

/// Drops `value`, except in a component with the bump allocator: there the
/// instance is thrown away after this one call and freeing gives nothing
/// back, so walking the JSON trees to free them block by block (about a
/// sixth of a static-site call) is skipped.
fn discard<T>(value: T) {
    if cfg!(all(target_arch = "wasm32", feature = "bump-allocator")) {
        std::mem::forget(value);
    } else {
        drop(value);
    }
}

/// Parses one object of the request; `what` names it in the error and is
/// only formatted on failure (no allocation per child on the happy path).
fn parse(text: &str, what: impl FnOnce() -> String) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| {
        Error::permanent(
            "InvalidRequest",
            format!("{} is not valid JSON: {e}", what()),
        )
    })
}

/// Converts the WIT request into a [`Request`]; exposed for tests of this crate.
pub fn parse_request(req: wit::ReconcileRequest) -> Result<Request, Error> {
    Ok(Request {
        parent: parse(&req.parent, || "parent".into())?,
        children: Children::from_texts(req.children).map_err(|(i, e)| {
            Error::permanent(
                "InvalidRequest",
                format!("children[{i}] is not valid JSON: {e}"),
            )
        })?,
        related: req
            .related
            .iter()
            .map(|group| {
                Ok(Related {
                    name: group.name.clone(),
                    objects: group
                        .objects
                        .iter()
                        .enumerate()
                        .map(|(i, c)| parse(c, || format!("related {:?}[{i}]", group.name)))
                        .collect::<Result<_, _>>()?,
                })
            })
            .collect::<Result<_, Error>>()?,
        finalizing: req.finalizing,
        config: req
            .config
            .as_deref()
            .map(|c| parse(c, || "config".into()))
            .transpose()?,
        now: req.now,
    })
}

fn to_wit_response(mut resp: Response) -> wit::ReconcileResponse {
    let children = std::mem::take(&mut resp.children);
    let status = resp.status.take();
    let out = wit::ReconcileResponse {
        children: children.iter().map(to_json).collect(),
        conditions: resp
            .conditions
            .into_iter()
            .map(|c| wit::Condition {
                type_: c.type_,
                status: match c.status {
                    ConditionStatus::True => wit::ConditionStatus::True,
                    ConditionStatus::False => wit::ConditionStatus::False,
                    ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        status: status.as_ref().map(to_json),
        requeue_after_seconds: resp.requeue_after_seconds,
        events: resp
            .events
            .into_iter()
            .map(|e| wit::Event {
                type_: match e.type_ {
                    EventType::Normal => wit::EventType::Normal,
                    EventType::Warning => wit::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        finalized: resp.finalized,
    };
    discard(children);
    discard(status);
    out
}

/// JSON text of `value`. `serde_json::to_string` writes straight into a
/// byte buffer, unlike `Value`'s `Display` (which goes through a
/// `fmt::Formatter` adapter, noticeably slower in wasm); same output.
fn to_json(value: &Value) -> String {
    // Serialising a `Value` cannot fail (all keys are strings); fall back to
    // `Display` rather than panic all the same.
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

pub(crate) fn to_wit_error(err: Error) -> wit::ReconcileError {
    match err {
        Error::Permanent { reason, message } => {
            wit::ReconcileError::Permanent(wit::ErrorDetail { reason, message })
        }
        Error::Transient { reason, message } => {
            wit::ReconcileError::Transient(wit::ErrorDetail { reason, message })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    struct Echo;
    impl Reconciler for Echo {
        fn reconcile(req: &Request) -> Result<Response, Error> {
            if req.finalizing {
                return Err(Error::transient("Later", "not yet"));
            }
            Ok(Response::new()
                .child(json!({"kind": "ConfigMap", "b": 1, "a": 2}))
                .status(json!({"seen": req.children.len()})))
        }
    }

    fn wit_request(parent: &str, finalizing: bool) -> wit::ReconcileRequest {
        wit::ReconcileRequest {
            parent: parent.into(),
            children: vec!["{}".into()],
            related: vec![wit::RelatedObjects {
                name: "secrets".into(),
                objects: vec![r#"{"kind":"Secret"}"#.into()],
            }],
            finalizing,
            config: None,
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn dispatch_round_trips_and_keeps_key_order() {
        let out = dispatch::<Echo>(wit_request("{}", false)).unwrap();
        assert_eq!(
            out.children,
            vec![r#"{"kind":"ConfigMap","b":1,"a":2}"#.to_string()]
        );
        assert_eq!(out.status.as_deref(), Some(r#"{"seen":1}"#));
    }

    #[test]
    fn related_keeps_its_groups_and_names_a_bad_object() {
        let req = parse_request(wit_request("{}", false)).unwrap();
        assert_eq!(req.related("secrets"), &[json!({"kind": "Secret"})]);
        assert!(req.related("configmaps").is_empty());
        let mut bad = wit_request("{}", false);
        bad.related[0].objects.push("{nope".into());
        let err = parse_request(bad).unwrap_err();
        assert!(
            err.message().contains(r#"related "secrets"[1]"#),
            "{}",
            err.message()
        );
    }

    struct Pure;
    impl Reconciler for Pure {
        const READS_NOW: bool = false;
        fn reconcile(_: &Request) -> Result<Response, Error> {
            Ok(Response::new())
        }
    }
    impl Customize for Pure {
        fn customize(req: &CustomizeRequest) -> Result<Vec<crate::RelatedSelector>, Error> {
            let team: String = req
                .config::<std::collections::BTreeMap<String, String>>()?
                .get("team")
                .cloned()
                .unwrap_or_default();
            Ok(vec![
                crate::RelatedSelector::new("secrets").label("team", team),
            ])
        }
    }

    #[test]
    fn info_reports_the_declaration_and_defaults_to_reading_now() {
        assert!(!info::<Pure>().reads_now);
        assert!(info::<Echo>().reads_now);
    }

    #[test]
    fn customize_round_trips() {
        let out = dispatch_customize::<Pure>(wit::CustomizeRequest {
            parent: "{}".into(),
            config: Some(r#"{"team":"a"}"#.into()),
        })
        .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "secrets");
        assert_eq!(
            out[0].match_labels,
            vec![("team".to_string(), "a".to_string())]
        );
        match dispatch_customize::<Pure>(wit::CustomizeRequest {
            parent: "{".into(),
            config: None,
        }) {
            Err(wit::ReconcileError::Permanent(d)) => assert_eq!(d.reason, "InvalidRequest"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn dispatch_maps_errors() {
        match dispatch::<Echo>(wit_request("{}", true)) {
            Err(wit::ReconcileError::Transient(d)) => assert_eq!(d.reason, "Later"),
            other => panic!("unexpected {other:?}"),
        }
        let mut bad_child = wit_request("{}", false);
        bad_child.children.push("{\"kind\": ".into());
        match dispatch::<Echo>(bad_child) {
            Err(wit::ReconcileError::Permanent(d)) => {
                assert_eq!(d.reason, "InvalidRequest");
                assert!(d.message.contains("children[1]"), "{}", d.message);
            }
            other => panic!("unexpected {other:?}"),
        }
        match dispatch::<Echo>(wit_request("{nope", false)) {
            Err(wit::ReconcileError::Permanent(d)) => {
                assert_eq!(d.reason, "InvalidRequest");
                assert!(d.message.contains("parent"), "{}", d.message);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

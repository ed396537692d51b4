//! {{name}}: the reconcile logic for `{{kind}}` objects.
//!
//! A pure function from the request to the desired state; unit tested
//! natively with `cargo test`, built to a component with `./build.sh`.

use wr_plugin_sdk::prelude::*;

/// The plugin.
pub struct Plugin;

impl Reconciler for Plugin {
    fn reconcile(req: &Request) -> Result<Response, Error> {
        let name = req.name()?;
        let message = match req.parent.pointer("/spec/message") {
            None | Some(Value::Null) => "hello",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(Error::invalid_spec("spec.message", "must be a string")),
        };
        let mut config_map = object("v1", "ConfigMap", req.namespace(), &format!("{name}-greeting"));
        label(&mut config_map, "app.kubernetes.io/managed-by", "wasm-reconciler");
        config_map["data"] = json!({ "message": message });
        Ok(Response::new()
            .child(config_map)
            .condition(Condition::is_true("Greeted", "ConfigMapRendered", ""))
            .status(json!({ "message": message })))
    }
}

wr_plugin_sdk::export_reconciler!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(spec: Value) -> Request {
        Request::new(json!({
            "apiVersion": "{{group}}/v1alpha1", "kind": "{{kind}}",
            "metadata": {"name": "a", "namespace": "ns"}, "spec": spec
        }))
    }

    #[test]
    fn one_config_map_with_the_message() {
        let resp = Plugin::reconcile(&parent(json!({"message": "hi"}))).unwrap();
        assert_eq!(resp.children.len(), 1);
        assert_eq!(resp.children[0]["metadata"]["name"], "a-greeting");
        assert_eq!(resp.children[0]["data"]["message"], "hi");
    }

    #[test]
    fn a_message_that_is_not_a_string_is_invalid() {
        let err = Plugin::reconcile(&parent(json!({"message": 1}))).unwrap_err();
        assert_eq!(err.reason(), "InvalidSpec");
    }
}

//! The request as the plugin sees it: parsed JSON plus typed accessors.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;
use crate::object::Meta;

/// Everything a plugin may know when it is called.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The parent object (apiVersion, kind, metadata, spec, status).
    pub parent: Value,
    /// Observed children controlled by the parent.
    pub children: Vec<Value>,
    /// Objects selected by the controller's `related` rules, one group per
    /// rule key, in the order the controller declares them. Read them with
    /// [`Request::related`].
    pub related: Vec<Related>,
    /// The parent is being deleted and the controller's finalizer is still on it.
    pub finalizing: bool,
    /// Per-controller settings (`spec.plugin.config` of the WasmController).
    pub config: Option<Value>,
    /// RFC 3339 UTC timestamp: the plugin's only clock.
    pub now: String,
}

/// The objects one related rule of the WasmController selected.
#[derive(Debug, Clone, PartialEq)]
pub struct Related {
    /// The rule's key: its `name` in `spec.related`, or its plural resource
    /// name (e.g. `secrets`) when it has none.
    pub name: String,
    /// The selected objects.
    pub objects: Vec<Value>,
}

impl Request {
    /// A request for `parent` with nothing else; handy in unit tests.
    pub fn new(parent: Value) -> Self {
        Request {
            parent,
            children: Vec::new(),
            related: Vec::new(),
            finalizing: false,
            config: None,
            now: "1970-01-01T00:00:00Z".into(),
        }
    }

    /// The parent's `metadata.name`; a permanent error if missing.
    pub fn name(&self) -> Result<&str, Error> {
        self.parent
            .name()
            .ok_or_else(|| Error::permanent("InvalidParent", "parent has no metadata.name"))
    }

    /// The parent's `metadata.namespace` (None for cluster-scoped parents).
    pub fn namespace(&self) -> Option<&str> {
        self.parent.namespace()
    }

    /// The parent's `spec` deserialised into `T`. A mismatch is a permanent
    /// `InvalidSpec` error whose message names the field (serde's wording).
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let spec = self.parent.get("spec").cloned().unwrap_or(Value::Null);
        serde_json::from_value(spec)
            .map_err(|e| Error::permanent("InvalidSpec", format!("spec: {e}")))
    }

    /// The controller config deserialised into `T` (`T::default()` when the
    /// controller gives none). A mismatch is a permanent `InvalidConfig` error.
    pub fn config<T: DeserializeOwned + Default>(&self) -> Result<T, Error> {
        match &self.config {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::permanent("InvalidConfig", format!("config: {e}"))),
        }
    }

    /// The related objects of the rule keyed `name` (empty when the
    /// controller has no such rule or it selected nothing).
    pub fn related(&self, name: &str) -> &[Value] {
        self.related
            .iter()
            .find(|group| group.name == name)
            .map_or(&[], |group| group.objects.as_slice())
    }

    /// Every related object, rule after rule.
    pub fn all_related(&self) -> impl Iterator<Item = &Value> {
        self.related.iter().flat_map(|group| group.objects.iter())
    }

    /// The observed child of `kind` named `name`, if any.
    pub fn child(&self, kind: &str, name: &str) -> Option<&Value> {
        crate::object::find(&self.children, kind, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Spec {
        image: String,
    }

    #[test]
    fn spec_errors_name_the_field() {
        let req = Request::new(json!({"metadata": {"name": "x"}, "spec": {}}));
        let err = req.spec::<Spec>().unwrap_err();
        assert!(err.is_permanent());
        assert_eq!(err.reason(), "InvalidSpec");
        assert!(err.message().contains("image"), "{}", err.message());
    }

    #[test]
    fn missing_config_is_default() {
        let req = Request::new(json!({}));
        let cfg: std::collections::BTreeMap<String, String> = req.config().unwrap();
        assert!(cfg.is_empty());
        assert!(req.name().is_err());
    }
}

//! `customize` (contract 0.2.0, world `reconciler-with-customize`): what the
//! plugin is given and the selectors it answers with.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::wasm_reconciler::plugin::types as wit;
use crate::error::Error;
use crate::object::Meta;

/// What `customize` is given: the parent and the controller's config.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomizeRequest {
    /// The parent object.
    pub parent: Value,
    /// Per-controller settings (`spec.plugin.config` of the WasmController).
    pub config: Option<Value>,
}

impl CustomizeRequest {
    /// The parent's `metadata.name`; a permanent error if missing.
    pub fn name(&self) -> Result<&str, Error> {
        self.parent
            .name()
            .ok_or_else(|| Error::permanent("InvalidParent", "parent has no metadata.name"))
    }

    /// The parent's `spec` deserialised into `T` (permanent `InvalidSpec` on a mismatch).
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let spec = self.parent.get("spec").cloned().unwrap_or(Value::Null);
        serde_json::from_value(spec)
            .map_err(|e| Error::permanent("InvalidSpec", format!("spec: {e}")))
    }

    /// The controller config deserialised into `T` (`T::default()` when none).
    pub fn config<T: DeserializeOwned + Default>(&self) -> Result<T, Error> {
        match &self.config {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::permanent("InvalidConfig", format!("config: {e}"))),
        }
    }
}

/// What one parent asks of one of the WasmController's related rules. A
/// selector narrows the rule (the rule fixes the resource and the scope);
/// the matching objects arrive in `request.related` under the same name.
///
/// ```
/// use wr_plugin_sdk::RelatedSelector;
/// let tls = RelatedSelector::new("secrets").names(["site-tls"]);
/// let team = RelatedSelector::new("configmaps").label("team", "web").exists("tier");
/// # let _ = (tls, team);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedSelector {
    name: String,
    match_labels: Vec<(String, String)>,
    match_expressions: Vec<(String, wit::SelectorOperator, Vec<String>)>,
    names: Vec<String>,
    namespace: Option<String>,
}

impl RelatedSelector {
    /// A selector for the related rule keyed `name` that narrows nothing yet.
    pub fn new(name: impl Into<String>) -> Self {
        RelatedSelector {
            name: name.into(),
            match_labels: Vec::new(),
            match_expressions: Vec::new(),
            names: Vec::new(),
            namespace: None,
        }
    }

    /// Only objects labelled `key=value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.match_labels.push((key.into(), value.into()));
        self
    }

    /// Only objects whose label `key` is one of `values`.
    pub fn label_in<I, S>(self, key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.expression(key, wit::SelectorOperator::In, values)
    }

    /// Only objects whose label `key` is none of `values` (or absent).
    pub fn label_not_in<I, S>(self, key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.expression(key, wit::SelectorOperator::NotIn, values)
    }

    /// Only objects that have the label `key`.
    pub fn exists(self, key: impl Into<String>) -> Self {
        self.expression(key, wit::SelectorOperator::Exists, Vec::<String>::new())
    }

    /// Only objects that do not have the label `key`.
    pub fn does_not_exist(self, key: impl Into<String>) -> Self {
        self.expression(
            key,
            wit::SelectorOperator::DoesNotExist,
            Vec::<String>::new(),
        )
    }

    /// Only objects with one of these names.
    pub fn names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.names.extend(names.into_iter().map(Into::into));
        self
    }

    /// For a rule of scope `Cluster`: only this namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    fn expression<I, S>(
        mut self,
        key: impl Into<String>,
        op: wit::SelectorOperator,
        values: I,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.match_expressions
            .push((key.into(), op, values.into_iter().map(Into::into).collect()));
        self
    }

    pub(crate) fn into_wit(self) -> wit::RelatedSelector {
        wit::RelatedSelector {
            name: self.name,
            match_labels: self.match_labels,
            match_expressions: self
                .match_expressions
                .into_iter()
                .map(|(key, operator, values)| wit::LabelRequirement {
                    key,
                    operator,
                    values,
                })
                .collect(),
            names: self.names,
            namespace: self.namespace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_lowers_every_part() {
        let s = RelatedSelector::new("secrets")
            .label("team", "web")
            .label_in("tier", ["a", "b"])
            .does_not_exist("legacy")
            .names(["x"])
            .namespace("shared")
            .into_wit();
        assert_eq!(s.name, "secrets");
        assert_eq!(s.match_labels, vec![("team".into(), "web".into())]);
        assert_eq!(s.match_expressions.len(), 2);
        assert_eq!(s.match_expressions[0].values, vec!["a", "b"]);
        assert!(matches!(
            s.match_expressions[1].operator,
            wit::SelectorOperator::DoesNotExist
        ));
        assert_eq!(s.names, vec!["x"]);
        assert_eq!(s.namespace.as_deref(), Some("shared"));
    }
}

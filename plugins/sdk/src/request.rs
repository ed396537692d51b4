//! The request as the plugin sees it: parsed JSON plus typed accessors.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;
use crate::object::Meta;

/// Everything a plugin may know when it is called.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The parent object (apiVersion, kind, metadata, spec, status).
    pub parent: Value,
    /// Observed children controlled by the parent, each parsed when the
    /// plugin first reads it (see [`Children`]). Find one with
    /// [`Request::child`]; set them in tests with `vec![...].into()`.
    pub children: Children,
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
            children: Children::default(),
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

    /// The observed child of `kind` named `name`, if any. Only that child
    /// is parsed.
    pub fn child(&self, kind: &str, name: &str) -> Option<&Value> {
        self.children.find(kind, name)
    }
}

/// The observed children of a request, parsed lazily.
///
/// Why: a plugin usually reads a few of its children (static-site reads 2
/// of the 10 in the runtime bench), and building a `Value` tree for each was
/// a large share of a call's instructions inside the sandbox (issue 15,
/// `docs/benchmarks.md`). On arrival each child's JSON text is checked and
/// only its `kind` and `metadata.name` are read (no tree is built); the
/// whole object is parsed the first time the plugin touches it ([`find`],
/// [`get`], [`iter`], indexing).
///
/// [`find`]: Children::find
/// [`get`]: Children::get
/// [`iter`]: Children::iter
#[derive(Clone, Default)]
pub struct Children {
    items: Vec<Child>,
}

#[derive(Clone)]
struct Child {
    /// `kind` and `metadata.name` read from the text; only consulted while
    /// the child is unparsed (once parsed, the value itself is read, so a
    /// test that edits a child through `IndexMut` is never out of date).
    kind: Option<String>,
    name: Option<String>,
    /// The JSON text, until parsed (empty for children built from values).
    text: String,
    value: OnceLock<Value>,
}

/// What is read of a child before it is parsed. Borrowed: no allocation
/// unless a string has escapes. Unknown fields are skipped by serde's
/// `IgnoredAny`, which still checks their syntax.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<HeadMeta<'a>>,
}

#[derive(serde::Deserialize)]
struct HeadMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

impl Child {
    fn parsed(value: Value) -> Child {
        Child {
            kind: None,
            name: None,
            text: String::new(),
            value: OnceLock::from(value),
        }
    }

    fn value(&self) -> &Value {
        // The text was checked to be JSON when the child arrived; a value
        // serde's checker accepts but cannot build (a number beyond f64) is
        // the only way this parse fails, and the host never sends one.
        self.value
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or(Value::Null))
    }

    fn is(&self, kind: &str, name: &str) -> bool {
        use crate::object::Meta;
        match self.value.get() {
            Some(value) => value.kind() == Some(kind) && value.name() == Some(name),
            None => self.kind.as_deref() == Some(kind) && self.name.as_deref() == Some(name),
        }
    }
}

impl Children {
    /// Children from their JSON texts (what the host sends). Each text is
    /// checked to be valid JSON now, so a bad child fails the call up front;
    /// the error carries the index of the first bad text.
    pub fn from_texts(texts: Vec<String>) -> Result<Children, (usize, serde_json::Error)> {
        let mut items = Vec::with_capacity(texts.len());
        for (index, text) in texts.into_iter().enumerate() {
            let child = match serde_json::from_str::<Head>(&text) {
                Ok(head) => Child {
                    kind: head.kind.map(Cow::into_owned),
                    name: head.metadata.and_then(|m| m.name).map(Cow::into_owned),
                    text,
                    value: OnceLock::new(),
                },
                // Not an object with a string `kind` and `metadata.name`
                // (or not JSON at all): parse it whole now, which either
                // gives the value or the precise error.
                Err(_) => Child::parsed(serde_json::from_str(&text).map_err(|e| (index, e))?),
            };
            items.push(child);
        }
        Ok(Children { items })
    }

    /// How many children there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The child at `index` (parsed now if it was not yet).
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.items.get(index).map(Child::value)
    }

    /// Every child in order (each parsed as the iterator reaches it).
    pub fn iter(&self) -> ChildrenIter<'_> {
        ChildrenIter(self.items.iter())
    }

    /// The child of `kind` named `metadata.name` = `name`, if any; only it
    /// is parsed.
    pub fn find(&self, kind: &str, name: &str) -> Option<&Value> {
        self.items
            .iter()
            .find(|c| c.is(kind, name))
            .map(Child::value)
    }

    /// Every child as a `Vec` of values (parses all of them).
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().cloned().collect()
    }
}

impl From<Vec<Value>> for Children {
    fn from(values: Vec<Value>) -> Children {
        Children {
            items: values.into_iter().map(Child::parsed).collect(),
        }
    }
}

impl FromIterator<Value> for Children {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Children {
        Children {
            items: iter.into_iter().map(Child::parsed).collect(),
        }
    }
}

impl std::ops::Index<usize> for Children {
    type Output = Value;
    fn index(&self, index: usize) -> &Value {
        self.items[index].value()
    }
}

impl std::ops::IndexMut<usize> for Children {
    fn index_mut(&mut self, index: usize) -> &mut Value {
        let child = &mut self.items[index];
        child.value();
        // Like indexing a `Vec`, this panics only on an index out of range:
        // the value was initialised on the line above.
        child.value.get_mut().expect("child parsed above")
    }
}

/// Iterator over [`Children`], parsing each as it is reached.
pub struct ChildrenIter<'a>(std::slice::Iter<'a, Child>);

impl<'a> Iterator for ChildrenIter<'a> {
    type Item = &'a Value;
    fn next(&mut self) -> Option<&'a Value> {
        self.0.next().map(Child::value)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for ChildrenIter<'_> {}

impl<'a> IntoIterator for &'a Children {
    type Item = &'a Value;
    type IntoIter = ChildrenIter<'a>;
    fn into_iter(self) -> ChildrenIter<'a> {
        self.iter()
    }
}

/// Equal when the parsed children are equal (whether or not they have been
/// parsed yet).
impl PartialEq for Children {
    fn eq(&self, other: &Children) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
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

    fn texts(values: &[Value]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn children_are_found_without_parsing_the_others() {
        let values = vec![
            json!({"kind": "Secret", "metadata": {"name": "a"}, "data": {"k": "v"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": [1, 2]}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "bé"}}),
        ];
        let mut texts = texts(&values);
        // An escaped name: borrowed names cannot be used here.
        texts[2] = r#"{"kind": "ConfigMap", "metadata": {"name": "b\u00e9"}}"#.into();
        let children = Children::from_texts(texts).unwrap();
        assert_eq!(children.find("ConfigMap", "a"), Some(&values[1]));
        // Only the child asked for was parsed.
        let parsed: Vec<bool> = children
            .items
            .iter()
            .map(|c| c.value.get().is_some())
            .collect();
        assert_eq!(parsed, [false, true, false]);
        // Escaped names are compared unescaped.
        assert_eq!(children.find("ConfigMap", "bé"), Some(&values[2]));
        assert_eq!(children.find("Secret", "b"), None);
        assert_eq!(children.len(), 3);
        assert_eq!(children.iter().cloned().collect::<Vec<_>>(), values);
        assert_eq!(children, Children::from(values.clone()));
        assert_eq!(children.get(0), Some(&values[0]));
        assert_eq!(format!("{children:?}"), format!("{values:?}"));
    }

    #[test]
    fn odd_children_are_parsed_whole_and_bad_ones_named() {
        // Not objects, or `kind` not a string: parsed on arrival, still found.
        let texts = vec![
            "[1, 2]".to_string(),
            r#"{"kind": 7, "metadata": {"name": "x"}}"#.to_string(),
            r#"{"kind": "Pod", "kind": "Service", "metadata": {"name": "s"}}"#.to_string(),
        ];
        let children = Children::from_texts(texts).unwrap();
        assert_eq!(children[0], json!([1, 2]));
        assert_eq!(
            children.find("Service", "s").map(|c| c["kind"].clone()),
            Some(json!("Service"))
        );
        let bad = vec![
            "{}".to_string(),
            r#"{"kind": "Pod", "spec": {"a": }}"#.to_string(),
        ];
        let (index, _) = Children::from_texts(bad).unwrap_err();
        assert_eq!(index, 1);
    }

    #[test]
    fn a_child_edited_in_place_is_found_by_its_new_name() {
        let mut children = Children::from_texts(texts(&[
            json!({"kind": "Pod", "metadata": {"name": "old"}}),
        ]))
        .unwrap();
        children[0]["metadata"]["name"] = json!("new");
        assert!(children.find("Pod", "old").is_none());
        assert_eq!(children.find("Pod", "new"), Some(&children[0]));
    }

    #[test]
    fn missing_config_is_default() {
        let req = Request::new(json!({}));
        let cfg: std::collections::BTreeMap<String, String> = req.config().unwrap();
        assert!(cfg.is_empty());
        assert!(req.name().is_err());
    }
}

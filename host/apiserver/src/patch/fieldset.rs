//! Sets of field paths and their `FieldsV1` encoding — the ownership records
//! of `metadata.managedFields`. Hand-written because no Rust crate implements
//! structured-merge-diff's `fieldpath.Set`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One step of a field path (structured-merge-diff's `PathElement`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathElement {
    /// A struct field or map key: `f:name`.
    Field(String),
    /// A list-map item by its keys, stored as compact JSON with sorted
    /// keys: `k:{"name":"web"}`.
    Key(String),
    /// A set item by value, stored as compact JSON: `v:"a"`.
    Value(String),
    /// A list item by index: `i:0` (only for lists without keys).
    Index(usize),
}

impl PathElement {
    fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Result<PathElement, String> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("missing colon: {s}"))?;
        match kind {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => {
                let v: Value =
                    serde_json::from_str(rest).map_err(|e| format!("bad key {rest}: {e}"))?;
                let obj = v
                    .as_object()
                    .ok_or_else(|| format!("key is not an object: {rest}"))?;
                Ok(PathElement::Key(canonical_key(obj)))
            }
            "v" => {
                let v: Value =
                    serde_json::from_str(rest).map_err(|e| format!("bad value {rest}: {e}"))?;
                Ok(PathElement::Value(v.to_string()))
            }
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|e| format!("bad index {rest}: {e}")),
            _ => Err(format!("unknown path element kind: {s}")),
        }
    }

    /// structured-merge-diff's `PathElement.String()`: `.name`,
    /// `[name="web"]`, `[="a"]`, `[0]`.
    fn display(&self, out: &mut String) {
        match self {
            PathElement::Field(f) => {
                let _ = write!(out, ".{f}");
            }
            PathElement::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(k) {
                    Ok(m) => m.iter().map(|(n, v)| format!("{n}={v}")).collect(),
                    Err(_) => vec![k.clone()],
                };
                let _ = write!(out, "[{}]", parts.join(","));
            }
            PathElement::Value(v) => {
                let _ = write!(out, "[={v}]");
            }
            PathElement::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
}

/// Compact JSON of a key object with its fields sorted by name, so equal
/// keys compare equal whatever order they arrived in.
pub(crate) fn canonical_key(fields: &Map<String, Value>) -> String {
    let mut sorted: Vec<(&String, &Value)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let m: Map<String, Value> = sorted
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(m).to_string()
}

/// A path rendered as kube-apiserver prints it in conflicts: `.spec.replicas`.
pub(crate) fn path_string(path: &[PathElement]) -> String {
    let mut s = String::new();
    for pe in path {
        pe.display(&mut s);
    }
    s
}

/// A set of field paths, as a trie. A node is a *member* when the path to it
/// is in the set; a node may be both a member and have children (`.` in
/// `FieldsV1`). Empty subtrees are never kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    pub(crate) fn insert(&mut self, path: &[PathElement]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub(crate) fn has(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    /// The subtree below `pe` (paths relative to it).
    pub(crate) fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in(other);
        out
    }

    fn union_in(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (pe, c) in &other.children {
            self.children.entry(pe.clone()).or_default().union_in(c);
        }
    }

    /// Members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// Members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Every member path, in sorted order.
    pub(crate) fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect(&mut prefix, &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Makes every field node that has descendants a member too
    /// (structured-merge-diff's `EnsureNamedFieldsAreMembers`, treating
    /// every field name as a named field), so pruning a parent that the
    /// applier owned only through its children removes the parent.
    pub(crate) fn with_fields_as_members(&self) -> FieldSet {
        let mut out = FieldSet {
            member: self.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let mut c2 = c.with_fields_as_members();
            if matches!(pe, PathElement::Field(_)) {
                c2.member = true;
            }
            out.children.insert(pe.clone(), c2);
        }
        out
    }

    /// The `FieldsV1` JSON encoding.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (pe, c) in &self.children {
            m.insert(pe.encode(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Decodes `FieldsV1` JSON.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let mut out = FieldSet::default();
        out.decode_into(v)?;
        Ok(out)
    }

    fn decode_into(&mut self, v: &Value) -> Result<(), String> {
        let obj = v
            .as_object()
            .ok_or_else(|| "fieldsV1 node is not an object".to_owned())?;
        for (k, child) in obj {
            if k == "." {
                self.member = true;
                continue;
            }
            let pe = PathElement::decode(k)?;
            let mut c = FieldSet::default();
            c.decode_into(child)?;
            if c.children.is_empty() {
                c.member = true;
            }
            self.children.insert(pe, c);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.to_owned())
    }

    #[test]
    fn fields_v1_round_trip_keeps_dot_for_members_with_children() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}
        });
        let s = FieldSet::from_fields_v1(&v).unwrap();
        assert!(s.has(&[f("metadata"), f("labels")]));
        assert!(s.has(&[f("metadata"), f("labels"), f("app")]));
        assert!(!s.has(&[f("metadata")]));
        let item = PathElement::Key("{\"name\":\"web\"}".into());
        assert!(s.has(&[f("spec"), f("containers"), item.clone()]));
        assert!(s.has(&[f("spec"), f("containers"), item, f("image")]));
        assert_eq!(s.to_fields_v1(), v);
    }

    #[test]
    fn key_elements_are_canonical_whatever_the_input_order() {
        let a = PathElement::decode("k:{\"protocol\":\"TCP\",\"containerPort\":80}").unwrap();
        let b = PathElement::decode("k:{\"containerPort\":80,\"protocol\":\"TCP\"}").unwrap();
        assert_eq!(a, b);
        assert_eq!(
            path_string(&[f("spec"), f("ports"), a]),
            ".spec.ports[containerPort=80,protocol=\"TCP\"]"
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::default();
        a.insert(&[f("spec"), f("replicas")]);
        a.insert(&[f("spec"), f("paused")]);
        let mut b = FieldSet::default();
        b.insert(&[f("spec"), f("replicas")]);
        assert_eq!(a.intersection(&b), b);
        let d = a.difference(&b);
        assert_eq!(d.paths(), vec![vec![f("spec"), f("paused")]]);
        assert!(b.difference(&a).is_empty());
        assert_eq!(d.union(&b), a);
    }

    #[test]
    fn garbage_fields_v1_is_rejected() {
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!([1])).is_err());
    }
}

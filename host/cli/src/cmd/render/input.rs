//! Reading `render`'s input files: YAML (multi-document) or JSON, with
//! errors that name the file, the document and the field.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// All non-empty documents of a YAML/JSON file, as (1-based document
/// number, value) pairs.
fn documents(path: &Path) -> anyhow::Result<Vec<(usize, Value)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut docs = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc).with_context(|| {
            format!(
                "{} document {}: not valid YAML/JSON",
                path.display(),
                index + 1
            )
        })?;
        if !value.is_null() {
            docs.push((index + 1, value));
        }
    }
    Ok(docs)
}

/// All non-empty documents of a YAML/JSON file.
pub fn documents_of(path: &Path) -> anyhow::Result<Vec<Value>> {
    Ok(documents(path)?.into_iter().map(|(_, v)| v).collect())
}

/// Checks that `value` is a Kubernetes object: a mapping with string
/// `apiVersion`, `kind` and `metadata.name`.
fn check_object(path: &Path, doc: usize, value: &Value) -> anyhow::Result<()> {
    let at = |field: &str| format!("{} document {doc}: {field}", path.display());
    if !value.is_object() {
        bail!("{}", at("not a mapping (expected a Kubernetes object)"));
    }
    for field in ["apiVersion", "kind"] {
        if !value.get(field).is_some_and(Value::is_string) {
            bail!("{}", at(&format!("missing or non-string field `{field}`")));
        }
    }
    if !value
        .pointer("/metadata/name")
        .is_some_and(Value::is_string)
    {
        bail!("{}", at("missing or non-string field `metadata.name`"));
    }
    Ok(())
}

/// Kubernetes objects from a file: every document, with `kind: List`
/// documents (as printed by `kubectl get -o yaml`) expanded into their items.
pub fn objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (doc_no, doc) in documents(path)? {
        let is_list = doc
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && doc.get("items").is_some();
        if is_list {
            let Some(items) = doc.get("items").and_then(Value::as_array) else {
                bail!(
                    "{} document {doc_no}: `items` is not a list",
                    path.display()
                );
            };
            for item in items {
                check_object(path, doc_no, item)?;
                out.push(item.clone());
            }
        } else {
            check_object(path, doc_no, &doc)?;
            out.push(doc);
        }
    }
    Ok(out)
}

/// Exactly one Kubernetes object from a file.
pub fn single_object(path: &Path) -> anyhow::Result<Value> {
    let mut objects = objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        0 => bail!(
            "{}: no object found (expected exactly one parent)",
            path.display()
        ),
        n => bail!(
            "{}: {n} objects found (expected exactly one parent)",
            path.display()
        ),
    }
}

/// The controller config: one JSON/YAML document of any shape.
pub fn config(path: &Path) -> anyhow::Result<Value> {
    let mut docs = documents(path)?;
    match docs.len() {
        1 => Ok(docs.remove(0).1),
        0 => Ok(Value::Null),
        n => bail!(
            "{}: {n} documents found (expected one config document)",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn multi_document_and_lists_are_expanded() {
        let f = file(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: b}}\n",
        );
        let objs = objects(f.path()).unwrap();
        let names: Vec<_> = objs
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["a", "b"]);
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let f = file(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
        );
        let err = format!("{:#}", objects(f.path()).unwrap_err());
        assert!(err.contains("document 2"), "{err}");
        assert!(err.contains("metadata.name"), "{err}");
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        assert!(single_object(f.path()).is_err());
    }
}

//! Reading a record store (see [`super`]) and telling what changed between
//! two requests or two outcomes: the offline side of `replay` and `explain`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{BLOBS_DIR, RECORDS_DIR, Record};

/// Path of a blob: zstd-compressed JSON, named by the sha256 of the JSON.
pub fn blob_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(BLOBS_DIR).join(format!("{id}.json.zst"))
}

/// The ids of every blob in the store.
pub fn blob_ids(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join(BLOBS_DIR))? {
        let name = entry?.file_name().to_string_lossy().to_string();
        if let Some(id) = name.strip_suffix(".json.zst") {
            out.push(id.to_string());
        }
    }
    Ok(out)
}

/// Path of a record.
pub fn record_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(RECORDS_DIR).join(format!("{seq:012}.json"))
}

/// Every record in the store, oldest first. Files that do not parse are
/// skipped with a warning (a record being written, or not ours).
pub fn read_records(dir: &Path) -> std::io::Result<Vec<(PathBuf, Record)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join(RECORDS_DIR))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        match std::fs::read(&path).map(|b| serde_json::from_slice::<Record>(&b)) {
            Ok(Ok(r)) => out.push((path, r)),
            Ok(Err(e)) => {
                tracing::warn!(path = %path.display(), error = %e, "skipping a record that does not parse")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "skipping a record that cannot be read")
            }
        }
    }
    out.sort_by_key(|(_, r)| r.seq);
    Ok(out)
}

/// The (decompressed) bytes of a blob.
pub fn read_blob(dir: &Path, id: &str) -> std::io::Result<Vec<u8>> {
    zstd::stream::decode_all(std::fs::File::open(blob_path(dir, id))?)
}

/// One field that differs; `path` is a JSON pointer into the normalised
/// value (children and objects keyed by `Kind namespace/name`, conditions by
/// type), so it names which child and which field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// JSON pointer, e.g. `/response/children/Deployment ns~1web/spec/replicas`.
    pub path: String,
    /// Before (absent: the field is new).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// After (absent: the field is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

fn object_key(o: &Value) -> Option<String> {
    let kind = o.get("kind")?.as_str()?;
    let name = o.pointer("/metadata/name")?.as_str()?;
    Some(
        match o.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        },
    )
}

/// Arrays of Kubernetes objects become maps keyed by [`object_key`], arrays
/// of conditions maps keyed by `type`, and related groups maps keyed by
/// `name`: so a diff names the object, not an index.
fn normalise(v: &Value) -> Value {
    match v {
        Value::Array(items) => {
            let key = |o: &Value| {
                object_key(o).or_else(|| {
                    let t = o.get("type").or_else(|| o.get("name"))?;
                    t.as_str().map(str::to_string)
                })
            };
            let keys: Option<Vec<String>> = items.iter().map(key).collect();
            match keys {
                Some(keys) if !items.is_empty() => {
                    let mut m = Map::new();
                    for (k, item) in keys.into_iter().zip(items) {
                        m.insert(k, normalise(item));
                    }
                    Value::Object(m)
                }
                _ => Value::Array(items.iter().map(normalise).collect()),
            }
        }
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalise(v))).collect())
        }
        other => other.clone(),
    }
}

/// The fields that differ between two values, at most `depth` levels deep
/// (deeper differences are reported at that level).
pub fn changes(old: &Value, new: &Value, depth: usize) -> Vec<Change> {
    let mut out = Vec::new();
    walk(
        Some(&normalise(old)),
        Some(&normalise(new)),
        "",
        depth,
        &mut out,
    );
    out
}

fn walk(old: Option<&Value>, new: Option<&Value>, path: &str, depth: usize, out: &mut Vec<Change>) {
    match (old, new) {
        (a, b) if a == b => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) if depth > 0 => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                walk(a.get(k), b.get(k), &p, depth - 1, out);
            }
        }
        (a, b) => out.push(Change {
            path: path.to_string(),
            old: a.cloned(),
            new: b.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_name_the_child_and_the_field() {
        let old = json!({"response": {"children": [
            {"kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 1}},
            {"kind": "Service", "metadata": {"name": "web", "namespace": "ns"}, "spec": {"port": 80}}
        ], "conditions": [{"type": "Available", "status": "True"}]}});
        let mut new = old.clone();
        new["response"]["children"][0]["spec"]["replicas"] = json!(2);
        new["response"]["conditions"][0]["status"] = json!("False");
        let c = changes(&old, &new, 64);
        let paths: Vec<&str> = c.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "/response/children/Deployment ns~1web/spec/replicas",
                "/response/conditions/Available/status"
            ]
        );
        assert_eq!(c[0].old, Some(json!(1)));
        assert_eq!(c[0].new, Some(json!(2)));
        assert!(changes(&old, &old, 64).is_empty());
        // Shallow: reported at the depth asked.
        let c = changes(&old, &new, 2);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].path, "/response/children");
    }
}

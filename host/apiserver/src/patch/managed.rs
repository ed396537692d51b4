//! `metadata.managedFields`: decoding, encoding, and the bookkeeping of
//! non-apply writes (`track_update`).

use serde_json::{Map, Value, json};

use super::fieldset::{FieldSet, PathElement};
use super::schema::Schema;
use super::walk::compare;

pub(crate) const APPLY: &str = "Apply";
pub(crate) const UPDATE: &str = "Update";

/// One `managedFields` entry with its decoded field set.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: Option<String>,
    pub(crate) subresource: Option<String>,
    pub(crate) set: FieldSet,
}

impl Entry {
    /// Whether this entry belongs to the given writer. Apply entries are one
    /// per (manager, subresource); Update entries one per (manager,
    /// apiVersion, subresource), as `BuildManagerIdentifier` keys them.
    pub(crate) fn is(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        sub: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == sub
            && (operation == APPLY || self.api_version == api_version)
    }
}

/// Decodes `metadata.managedFields` of `obj`. Entries that cannot be decoded
/// are dropped (kube-apiserver resets undecodable managedFields rather than
/// failing the write).
pub(crate) fn decode(obj: &Value) -> Vec<Entry> {
    let Some(list) = managed_fields(obj).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let set = match e.get("fieldsV1") {
                Some(v) => FieldSet::from_fields_v1(v).ok()?,
                None => FieldSet::default(),
            };
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
            Some(Entry {
                manager: s("manager").unwrap_or_default(),
                operation: s("operation")?,
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource").filter(|x| !x.is_empty()),
                set,
            })
        })
        .collect()
}

pub(crate) fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("managedFields")
}

/// The object without `metadata.managedFields`.
pub(crate) fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

/// Encodes entries in kube-apiserver's order (`sortEncodedManagedFields`:
/// operation, then time, then manager, apiVersion, subresource), dropping
/// entries that own nothing.
pub(crate) fn encode(mut entries: Vec<Entry>) -> Value {
    entries.retain(|e| !e.set.is_empty());
    cap_updaters(&mut entries);
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| seconds(a.time.as_deref()).cmp(&seconds(b.time.as_deref())))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if let Some(s) = e.subresource {
                    m.insert("subresource".into(), json!(s));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// At most this many Update entries are kept (kube-apiserver's
/// `DefaultMaxUpdateManagers`); older ones are merged into a per-apiVersion
/// `ancient-changes` entry so managedFields cannot grow without bound.
const MAX_UPDATERS: usize = 10;
const ANCIENT: &str = "ancient-changes";

fn cap_updaters(entries: &mut Vec<Entry>) {
    loop {
        let updaters = entries.iter().filter(|e| e.operation == UPDATE).count();
        if updaters <= MAX_UPDATERS {
            return;
        }
        let oldest = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.operation == UPDATE && e.manager != ANCIENT)
            .min_by(|(_, a), (_, b)| {
                seconds(a.time.as_deref())
                    .cmp(&seconds(b.time.as_deref()))
                    .then_with(|| a.manager.cmp(&b.manager))
            })
            .map(|(i, _)| i);
        let Some(i) = oldest else {
            return;
        };
        let e = entries.remove(i);
        let bucket = entries.iter_mut().find(|b| {
            b.manager == ANCIENT && b.operation == UPDATE && b.api_version == e.api_version
        });
        match bucket {
            Some(b) => {
                b.set = b.set.union(&e.set);
                if seconds(e.time.as_deref()) > seconds(b.time.as_deref()) {
                    b.time = e.time;
                }
            }
            None => entries.push(Entry {
                manager: ANCIENT.to_owned(),
                subresource: None,
                ..e
            }),
        }
    }
}

fn seconds(t: Option<&str>) -> i64 {
    t.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(0, |t| t.timestamp())
}

/// Fields nobody owns: identity and server-set metadata (kube-apiserver's
/// `stripMeta`). `metadata` itself is stripped as a member only, so fields
/// below it (labels...) stay owned.
pub(crate) fn stripped() -> FieldSet {
    let mut s = FieldSet::default();
    let f = |x: &str| PathElement::Field(x.to_owned());
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

fn api_version(obj: &Value) -> String {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Whether `managedFields` is the reset request `[{}]`: "overwriting them
/// with a list containing a single empty entry" strips all ownership.
fn is_reset_request(obj: &Value) -> bool {
    matches!(managed_fields(obj), Some(Value::Array(a)) if a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
}

/// Non-apply writes (create/update/patch): record the fields this manager
/// changed (operation "Update") and remove them from other managers' sets.
/// Returns the new managedFields array (`Value::Array`); an empty array
/// means the server should drop `metadata.managedFields`.
///
/// Ownership comes from `new` when the client sent managedFields that decode
/// to something (so clients can edit them), else from `old` (so clients that
/// do not know the field cannot erase it); `[{}]` resets ownership. On a
/// subresource the live record is always used. A write that changes nothing
/// leaves every entry, and its time, as it was.
pub fn track_update(
    old: Option<&Value>,
    new: &Value,
    schema: &Schema,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) -> Value {
    let mut entries = if is_reset_request(new) && subresource.is_none() {
        Vec::new()
    } else {
        let sent = if subresource.is_none() {
            decode(new)
        } else {
            Vec::new()
        };
        if sent.is_empty() {
            old.map(decode).unwrap_or_default()
        } else {
            sent
        }
    };
    // An existing object that tracks no fields stays untracked by updates
    // (kube-apiserver's skipNonAppliedManager); only an apply starts it.
    let existing = old
        .and_then(|o| o.pointer("/metadata/uid"))
        .and_then(Value::as_str)
        .is_some_and(|u| !u.is_empty());
    if entries.is_empty() && existing {
        return Value::Array(Vec::new());
    }
    let empty = Value::Object(Map::new());
    let old_clean = old.map_or(empty, without_managed_fields);
    let new_clean = without_managed_fields(new);
    let cmp = compare(&old_clean, &new_clean, &schema.root);
    let strip = stripped();
    let changed = cmp.changed().difference(&strip);
    let removed = cmp.removed.difference(&strip);
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    // Writes through `/scale` are recorded by kube-apiserver's ScaleHandler,
    // which keeps the times it had and sets none for its own entry.
    let time = (subresource != Some("scale")).then(|| now.to_owned());
    if !changed.is_empty() {
        let version = api_version(new);
        match entries
            .iter_mut()
            .find(|e| e.is(manager, UPDATE, &version, subresource))
        {
            Some(e) => {
                e.set = e.set.union(&changed);
                e.time = time;
            }
            None => entries.push(Entry {
                manager: manager.to_owned(),
                operation: UPDATE.to_owned(),
                api_version: version,
                time,
                subresource: subresource.map(str::to_owned),
                set: changed,
            }),
        }
    }
    encode(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";
    const T1: &str = "2024-01-01T00:01:00Z";

    fn cm(data: Value, mf: Option<Value>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d", "uid": "u", "resourceVersion": "5"},
            "data": data});
        if let Some(mf) = mf {
            v["metadata"]["managedFields"] = mf;
        }
        v
    }

    #[test]
    fn create_records_every_set_field_except_identity_metadata() {
        // `kubectl create configmap c --from-literal=a=1` leaves
        // f:data {.: {}, f:a: {}} owned by "kubectl-create", operation Update.
        let s = Schema::for_builtin("", "ConfigMap");
        let mf = track_update(
            None,
            &cm(json!({"a": "1"}), None),
            &s,
            "kubectl-create",
            None,
            T0,
        );
        assert_eq!(
            mf,
            json!([{
                "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": T0, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}}
            }])
        );
    }

    #[test]
    fn update_takes_changed_fields_from_other_managers() {
        let s = Schema::for_builtin("", "ConfigMap");
        let old_mf = track_update(
            None,
            &cm(json!({"a": "1", "b": "2"}), None),
            &s,
            "first",
            None,
            T0,
        );
        let old = cm(json!({"a": "1", "b": "2"}), Some(old_mf));
        let new = cm(json!({"a": "9", "b": "2"}), None);
        let mf = track_update(Some(&old), &new, &s, "second", None, T1);
        let entries = decode(&cm(json!({}), Some(mf)));
        let first = entries.iter().find(|e| e.manager == "first").unwrap();
        let second = entries.iter().find(|e| e.manager == "second").unwrap();
        let a = [
            PathElement::Field("data".into()),
            PathElement::Field("a".into()),
        ];
        let b = [
            PathElement::Field("data".into()),
            PathElement::Field("b".into()),
        ];
        assert!(!first.set.has(&a) && first.set.has(&b));
        assert!(second.set.has(&a) && !second.set.has(&b));
        assert_eq!(first.time.as_deref(), Some(T0));
    }

    #[test]
    fn no_op_update_changes_nothing_not_even_time() {
        let s = Schema::for_builtin("", "ConfigMap");
        let mf = track_update(None, &cm(json!({"a": "1"}), None), &s, "m", None, T0);
        let old = cm(json!({"a": "1"}), Some(mf.clone()));
        let again = track_update(Some(&old), &cm(json!({"a": "1"}), None), &s, "m", None, T1);
        assert_eq!(again, mf);
    }

    #[test]
    fn removing_a_field_removes_it_from_its_owner() {
        let s = Schema::for_builtin("", "ConfigMap");
        let mf = track_update(
            None,
            &cm(json!({"a": "1", "b": "2"}), None),
            &s,
            "m",
            None,
            T0,
        );
        let old = cm(json!({"a": "1", "b": "2"}), Some(mf));
        let mf = track_update(
            Some(&old),
            &cm(json!({"a": "1"}), None),
            &s,
            "other",
            None,
            T1,
        );
        assert_eq!(mf.as_array().unwrap().len(), 1);
        assert_eq!(mf[0]["manager"], "m");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));
    }

    #[test]
    fn reset_request_clears_ownership_then_records_this_write() {
        let s = Schema::for_builtin("", "ConfigMap");
        let mf = track_update(None, &cm(json!({"a": "1"}), None), &s, "m", None, T0);
        let old = cm(json!({"a": "1"}), Some(mf));
        let new = cm(json!({"a": "1"}), Some(json!([{}])));
        assert_eq!(track_update(Some(&old), &new, &s, "x", None, T1), json!([]));
    }

    #[test]
    fn an_existing_object_without_managed_fields_stays_untracked_by_updates() {
        // A ConfigMap created with `data: {}` owns nothing, so it has no
        // managedFields; kube-apiserver then skips tracking for updates.
        let s = Schema::for_builtin("", "ConfigMap");
        let old = cm(json!({}), None);
        let new = cm(json!({"x": "1"}), None);
        assert_eq!(track_update(Some(&old), &new, &s, "m", None, T1), json!([]));
        // A create (no live object) is tracked.
        let mf = track_update(None, &new, &s, "m", None, T1);
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {".": {}, "f:x": {}}}));
    }

    #[test]
    fn a_scale_write_records_its_entry_without_a_time() {
        // kube-apiserver v1.37.2, `PUT .../widgets/sc/scale`: the entry
        // {manager, subresource: scale} has no `time`.
        let s = Schema::for_builtin("", "ConfigMap");
        let old = cm(json!({"x": "1"}), None);
        let created = track_update(None, &old, &s, "m", None, T0);
        let mut old = old;
        old["metadata"]["managedFields"] = created;
        let new = cm(json!({"x": "2"}), None);
        let mf = track_update(Some(&old), &new, &s, "m", Some("scale"), T1);
        let e = mf
            .as_array()
            .and_then(|a| a.iter().find(|e| e["subresource"] == "scale"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(e["fieldsV1"], json!({"f:data": {"f:x": {}}}));
        assert!(e.get("time").is_none());
    }

    #[test]
    fn more_than_ten_updaters_fold_the_oldest_into_ancient_changes() {
        let s = Schema::for_builtin("", "ConfigMap");
        let mut obj = cm(json!({}), None);
        for i in 0..12 {
            let mut next = cm(json!({ format!("k{i}"): "v" }), None);
            next["data"] = obj["data"].clone();
            next["data"][format!("k{i}")] = json!("v");
            let now = format!("2024-01-01T00:{i:02}:00Z");
            // The first write is the create (an object without managedFields
            // is not tracked by later updates).
            let old = (i > 0).then_some(&obj);
            let mf = track_update(old, &next, &s, &format!("m{i:02}"), None, &now);
            next["metadata"]["managedFields"] = mf;
            obj = next;
        }
        let mf = obj["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 10);
        let ancient = mf
            .iter()
            .find(|e| e["manager"] == "ancient-changes")
            .unwrap();
        assert!(ancient["fieldsV1"]["f:data"]["f:k0"].is_object());
        assert!(ancient["fieldsV1"]["f:data"]["f:k2"].is_object());
        assert!(
            mf.iter()
                .all(|e| e["manager"] != "m00" && e["manager"] != "m02")
        );
        assert!(mf.iter().any(|e| e["manager"] == "m03"));
    }

    #[test]
    fn entries_sort_apply_first_then_by_time() {
        let mk = |m: &str, op: &str, t: &str| Entry {
            manager: m.into(),
            operation: op.into(),
            api_version: "v1".into(),
            time: Some(t.into()),
            subresource: None,
            set: {
                let mut s = FieldSet::default();
                s.insert(&[PathElement::Field("x".into())]);
                s
            },
        };
        let v = encode(vec![
            mk("z", UPDATE, T0),
            mk("b", APPLY, T1),
            mk("a", APPLY, T1),
            mk("y", UPDATE, T1),
        ]);
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "z", "y"]);
    }
}

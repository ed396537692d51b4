//! Server-side apply (`application/apply-patch+yaml`), after
//! structured-merge-diff's `Updater.Apply` as kube-apiserver wires it.

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, path_string};
use super::managed::{self, APPLY, Entry};
use super::merge::{merge, remove};
use super::schema::Schema;
use super::walk::{compare, field_set, validate};
use super::{FieldConflict, PatchError};

/// Who applies, and how.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// The `fieldManager` query parameter (required for apply).
    pub manager: &'a str,
    /// The `force` query parameter: take conflicting fields instead of failing.
    pub force: bool,
    /// `Some("status")` when applying through a subresource.
    pub subresource: Option<&'a str>,
    /// The current time, RFC3339 (`2024-01-01T00:00:00Z`), for managedFields.
    pub now: &'a str,
}

/// SSA. `current` None = create. Returns the merged object WITH updated
/// `metadata.managedFields`.
///
/// - Fields in `applied` are set and owned by `opts.manager` (shared with
///   any manager that already had the same value: no conflict).
/// - Fields this manager applied last time and omits now are removed from
///   the object, unless another manager (applier or updater) owns them.
/// - Changing a value another manager owns is a [`PatchError::Conflict`]
///   listing every such field, unless `force`, which moves ownership.
/// - Lists and maps merge by the [`Schema`] (keyed lists item by item,
///   sets value by value, atomic ones whole).
///
/// When nothing but ownership changes, the manager's entry keeps its old
/// time; when nothing at all changes the result equals `current` (compare
/// with `==` and skip the write, as kube-apiserver keeps resourceVersion).
pub fn server_side_apply(
    current: Option<&Value>,
    applied: &Value,
    schema: &Schema,
    opts: &ApplyOptions,
) -> Result<Value, PatchError> {
    let api_version = check_applied(applied, schema)?;
    let mut entries = current.map(managed::decode).unwrap_or_default();
    let live = current.map_or_else(
        || Value::Object(Map::new()),
        managed::without_managed_fields,
    );
    let mut config = managed::without_managed_fields(applied);
    reset_fields(&mut config, schema, opts.subresource);
    let config_set = field_set(&config, &schema.root);
    let mine = |e: &Entry| e.is(opts.manager, APPLY, "", opts.subresource);
    let last = entries.iter().position(mine).map(|i| entries.remove(i));

    let mut merged = merge(&live, &config, &schema.root);
    let strip = managed::stripped();
    if let Some(last) = &last {
        prune_last_applied(&mut merged, last, &entries, &config_set, &strip, schema);
    }
    if current.is_some() {
        keep_system_metadata(&mut merged, &live);
    }
    let cmp = compare(&live, &merged, &schema.root);
    let changed = cmp.changed().difference(&strip);
    let removed = cmp.removed.difference(&strip);
    if !opts.force {
        check_conflicts(&entries, &changed, &live, schema, opts)?;
    }
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&removed);
    }

    let object_changed = merged != live;
    // The time is only set when the object changed (kube-apiserver's
    // managedFieldsUpdater): a first apply that changes nothing gets none.
    let time = match &last {
        _ if object_changed => Some(opts.now.to_owned()),
        Some(l) => l.time.clone(),
        None => None,
    };
    entries.push(Entry {
        manager: opts.manager.to_owned(),
        operation: APPLY.to_owned(),
        api_version,
        time,
        subresource: opts.subresource.map(str::to_owned),
        set: config_set.difference(&strip),
    });
    // Outside ownership tracking, as kube-apiserver's outermost wrapper does it.
    if opts.manager == KUBECTL {
        sync_last_applied(&mut merged, &live, applied);
    }
    set_managed_fields(&mut merged, managed::encode(entries));
    Ok(merged)
}

/// An apply configuration must be an object without managedFields, with an
/// apiVersion (returned), that fits the schema.
fn check_applied(applied: &Value, schema: &Schema) -> Result<String, PatchError> {
    if !applied.is_object() {
        return Err(PatchError::BadRequest(
            "apply patch must be a JSON/YAML object".to_owned(),
        ));
    }
    if managed::managed_fields(applied).is_some_and(|m| !m.is_null()) {
        return Err(PatchError::BadRequest(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    let api_version = match applied.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => return Err(PatchError::BadRequest("apiVersion must be set".to_owned())),
    };
    validate(applied, &schema.root, &mut Vec::new())
        .map_err(|e| PatchError::Invalid(format!("failed to create typed patch object: {e}")))?;
    Ok(api_version)
}

/// Prunes what this manager applied last time and nobody claims now (not
/// this configuration, not another manager).
fn prune_last_applied(
    merged: &mut Value,
    last: &Entry,
    others: &[Entry],
    config_set: &FieldSet,
    strip: &FieldSet,
    schema: &Schema,
) {
    let claimed = others
        .iter()
        .fold(config_set.clone(), |acc, e| acc.union(&e.set))
        .with_fields_as_members();
    let prune = last
        .set
        .with_fields_as_members()
        .difference(&claimed)
        .difference(strip);
    if !prune.is_empty() {
        *merged = remove(merged, &prune, &schema.root).unwrap_or_else(|| Value::Object(Map::new()));
    }
}

/// Changing a value another manager owns is a conflict listing every such
/// field (sorted by manager, operation, apiVersion), except what kubectl's
/// last-applied annotation allows it to take.
fn check_conflicts(
    entries: &[Entry],
    changed: &FieldSet,
    live: &Value,
    schema: &Schema,
    opts: &ApplyOptions,
) -> Result<(), PatchError> {
    let mut conflicts = Vec::new();
    for e in entries {
        for path in e.set.intersection(changed).paths() {
            let conflict = FieldConflict {
                manager: e.manager.clone(),
                field: path_string(&path),
                operation: e.operation.clone(),
                api_version: e.api_version.clone(),
                subresource: e.subresource.clone(),
            };
            conflicts.push((path, conflict));
        }
    }
    if !conflicts.is_empty()
        && opts.manager == KUBECTL
        && let Some(allowed) = allowed_by_last_applied(live, schema)
    {
        conflicts.retain(|(path, _)| !allowed.has(path));
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    let mut conflicts: Vec<FieldConflict> = conflicts.into_iter().map(|(_, c)| c).collect();
    conflicts.sort_by(|a, b| {
        (
            a.manager.as_str(),
            a.operation.as_str(),
            a.api_version.as_str(),
        )
            .cmp(&(
                b.manager.as_str(),
                b.operation.as_str(),
                b.api_version.as_str(),
            ))
    });
    Err(PatchError::Conflict { conflicts })
}

/// Drops what this write may not set (kube-apiserver's reset fields): a
/// write to `/status` sets only `status`; a write to the main resource of a
/// kind with a status subresource ignores `status`. Dropped fields are then
/// neither changed nor owned.
fn reset_fields(config: &mut Value, schema: &Schema, subresource: Option<&str>) {
    let Some(obj) = config.as_object_mut() else {
        return;
    };
    match subresource {
        Some("status") => {
            obj.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        }
        None if schema.status_subresource => {
            obj.remove("status");
        }
        _ => {}
    }
}

/// Metadata the server owns; an apply configuration cannot change it.
/// `resourceVersion` is deliberately not here: a value in the configuration
/// stays in the result, so the server's optimistic-concurrency check (409
/// on a stale resourceVersion) sees it, as kube-apiserver treats it as a
/// precondition.
const SYSTEM_METADATA: [&str; 6] = [
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

fn keep_system_metadata(merged: &mut Value, live: &Value) {
    let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for k in SYSTEM_METADATA {
        match live.get("metadata").and_then(|m| m.get(k)) {
            Some(v) => {
                meta.insert(k.to_owned(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
}

/// The field manager `kubectl apply --server-side` uses.
const KUBECTL: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// kube-apiserver's `lastAppliedUpdater`: when `kubectl` server-side applies
/// to an object that carries the client-side-apply annotation, the
/// annotation is rewritten to this configuration, so a later client-side
/// `kubectl apply` computes its three-way diff from the right base.
fn sync_last_applied(merged: &mut Value, live: &Value, applied: &Value) {
    let has = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    if !has {
        return;
    }
    let mut cfg = applied.clone();
    if let Some(meta) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
        let now_empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
            Some(a) => {
                a.remove(LAST_APPLIED);
                a.is_empty()
            }
            None => false,
        };
        if now_empty {
            meta.remove("annotations");
        }
    }
    // Go's encoder sorts map keys and ends with a newline.
    let text = format!("{}\n", sorted_keys(&cfg));
    if let Some(a) = merged
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.insert(LAST_APPLIED.to_owned(), Value::String(text));
    }
}

/// kube-apiserver's `lastAppliedManager`: `kubectl` moving an object from
/// client-side to server-side apply may take, without `force`, the fields
/// its last client-side configuration set and that still hold that value.
fn allowed_by_last_applied(live: &Value, schema: &Schema) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() {
        return None;
    }
    let cmp = compare(&last, live, &schema.root);
    Some(
        field_set(&last, &schema.root)
            .difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// Stores `mf` as `metadata.managedFields`, or removes the field when empty.
fn set_managed_fields(obj: &mut Value, mf: Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        if mf.as_array().is_some_and(Vec::is_empty) {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".to_owned(), mf);
        }
    }
}

//! The write verbs (create, update, patch, apply, delete) with the metadata
//! semantics of kube-apiserver: uid, creationTimestamp, generation,
//! resourceVersion preconditions, status subresource, finalizers and
//! deletionTimestamp, dry-run, managedFields. Used by the HTTP handlers and
//! by the garbage collector alike.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::App;
use crate::errors::{ApiError, Cause};
use crate::kinds;
use crate::meta::{self, meta_mut};
use crate::patching::{self, PatchKind};
use crate::resources::ResourceDef;
use crate::store::{CommitError, Expect, obj_key, rv_of};

/// Who writes, where, and how.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub def: &'a Arc<ResourceDef>,
    pub version: &'a str,
    /// Path namespace (namespaced resources only).
    pub namespace: &'a str,
    pub subresource: Option<&'a str>,
    pub dry_run: bool,
    pub manager: &'a str,
    /// `fieldValidation` of the request, and the warnings decoding produced.
    pub decoding: &'a crate::validation::Decoding,
}

impl Target<'_> {
    fn key(&self, name: &str) -> String {
        obj_key(
            if self.def.namespaced {
                self.namespace
            } else {
                ""
            },
            name,
        )
    }

    fn api_version(&self) -> String {
        self.def.group_version(self.version)
    }
}

/// Outcome of a delete request.
#[derive(Debug)]
pub enum Deleted {
    /// Removed from storage.
    Gone(Arc<Value>),
    /// Deletion pending on finalizers (deletionTimestamp set).
    Pending(Arc<Value>),
}

/// Delete options from the query or a `DeleteOptions` body.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

fn invalid(t: &Target<'_>, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(&t.def.group, &t.def.kind, name, causes)
}

/// Check apiVersion/kind/namespace of a request body against the URL.
fn check_identity(t: &Target<'_>, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != t.def.kind
    {
        if t.def.custom {
            return Err(ApiError::bad_request(format!(
                "the kind in the body ({kind}) does not match the kind of the resource ({})",
                t.def.kind
            )));
        }
        // kube-apiserver's typed decoder: the body's kind cannot be
        // converted into the resource's internal type.
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let version = av.rsplit('/').next().unwrap_or(av);
        let internal = match t.def.group.as_str() {
            "" => "core",
            g => g.split('.').next().unwrap_or(g),
        };
        let want = &t.def.kind;
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {want}: converting ({version}.{kind}) to ({internal}.{want}): unknown conversion"
        )));
    }
    let gv = t.api_version();
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
        && av != gv
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({gv})"
        )));
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(gv));
        m.insert("kind".into(), json!(t.def.kind));
    }
    let m = meta_mut(obj);
    if t.def.namespaced {
        match m.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != t.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                m.insert("namespace".into(), json!(t.namespace));
            }
        }
    } else {
        m.remove("namespace");
    }
    Ok(())
}

fn check_namespace(app: &App, t: &Target<'_>, name: &str) -> Result<(), ApiError> {
    if !t.def.namespaced {
        return Ok(());
    }
    let ns_def = app
        .registry
        .lookup("", "v1", "namespaces")
        .ok_or_else(|| ApiError::internal("namespaces are not registered"))?;
    match app.store.get(&ns_def.key(), &obj_key("", t.namespace)) {
        None => Err(ApiError::not_found(ns_def.qualified(), t.namespace)),
        Some(ns) if meta::is_deleting(&ns) => {
            let mut e = ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                t.def.qualified(),
                t.namespace
            ));
            e.name = Some(name.to_string());
            e.kind = Some(t.def.resource.clone());
            e.causes = vec![Cause {
                reason: "NamespaceTerminating",
                message: format!("namespace {} is being terminated", t.namespace),
                field: "metadata.namespace".into(),
            }];
            Err(e)
        }
        Some(_) => Ok(()),
    }
}

/// Validation of the defaulted object (`old`: the stored one on updates).
fn validate(
    app: &App,
    t: &Target<'_>,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = crate::validation::validate(t.def, t.version, name, obj, old);
    if t.def.custom {
        causes.extend(crate::validation::scale_replicas_causes(
            &app.store, t.def, t.version, obj,
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(t, name, causes))
    }
}

/// Strip fields clients may not set.
fn scrub_system_metadata(obj: &mut Value) {
    let m = meta_mut(obj);
    for k in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "selfLink",
    ] {
        m.remove(k);
    }
}

/// Create an object. `managed` is true when managedFields were already
/// computed (server-side apply).
pub fn create(
    app: &App,
    t: &Target<'_>,
    mut obj: Value,
    managed: bool,
) -> Result<Arc<Value>, ApiError> {
    check_identity(t, &mut obj)?;
    crate::validation::decode(t.def, t.version, &mut obj, t.decoding)?;
    let name = name_for_create(t, &mut obj)?;
    check_namespace(app, t, &name)?;
    scrub_system_metadata(&mut obj);
    if !managed {
        meta_mut(&mut obj).remove("managedFields");
    }
    kinds::apply_defaults(t.def, &mut obj);
    crate::validation::written(t.def, t.version, &mut obj);
    let now = meta::now_rfc3339();
    if !managed {
        track_create(t, &mut obj, &now);
    }
    kinds::prepare_create(t.def, &mut obj)?;
    validate(app, t, &name, &obj, None)?;
    stamp_create(t, &mut obj, &now);
    crate::validation::check_storable(t.def, t.namespace, &name, &obj)?;
    if t.dry_run {
        return Ok(Arc::new(obj));
    }
    let key = t.key(&name);
    let committed = app
        .store
        .commit(&t.def.key(), &key, Expect::Absent, Some(obj))
        .map_err(|e| match e {
            CommitError::Exists => ApiError::already_exists(t.def.qualified(), &name),
            other => ApiError::internal(other.to_string()),
        })?;
    app.after_commit(t.def, &committed);
    Ok(committed)
}

/// The name of an object being created: `metadata.name`, else one generated
/// from `metadata.generateName` (written into the object), else a 422.
fn name_for_create(t: &Target<'_>, obj: &mut Value) -> Result<String, ApiError> {
    let m = meta_mut(obj);
    let given = |m: &serde_json::Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    if let Some(n) = given(m, "name") {
        return Ok(n);
    }
    match given(m, "generateName") {
        Some(prefix) => {
            let n = meta::generate_name(&prefix);
            m.insert("name".into(), json!(n));
            Ok(n)
        }
        None => Err(invalid(
            t,
            "",
            vec![Cause {
                reason: "FieldValueRequired",
                field: "metadata.name".into(),
                message: "Required value: name or generateName is required".into(),
            }],
        )),
    }
}

/// managedFields of a create: they record the decoded, defaulted request,
/// before what the registry does (status resets, allocated IPs and ports, a
/// Job's selector), as kube-apiserver's create handler runs its field manager.
fn track_create(t: &Target<'_>, obj: &mut Value, now: &str) {
    // Status is reset on create where it is a subresource, and never owned.
    let mut tracked = obj.clone();
    if t.def.status_subresource
        && let Some(m) = tracked.as_object_mut()
    {
        m.remove("status");
    }
    let mf = patching::track(
        None,
        &tracked,
        t.def,
        t.version,
        t.manager,
        t.subresource,
        now,
    );
    set_managed_fields(obj, mf);
}

/// The system metadata a create assigns: uid (unless the kind's preparation
/// already did), creationTimestamp, and generation 1 where the kind has one.
fn stamp_create(t: &Target<'_>, obj: &mut Value, now: &str) {
    let m = meta_mut(obj);
    // prepare_create may have assigned it (a Job's selector names it).
    if !m.contains_key("uid") {
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    }
    m.insert("creationTimestamp".into(), json!(now));
    if t.def.has_generation {
        m.insert("generation".into(), json!(1));
    }
}

fn set_managed_fields(obj: &mut Value, mf: Value) {
    let m = meta_mut(obj);
    match mf {
        Value::Array(a) if a.is_empty() => {
            m.remove("managedFields");
        }
        Value::Null => {
            m.remove("managedFields");
        }
        other => {
            m.insert("managedFields".into(), other);
        }
    }
}

/// Does `new` differ from `old` outside metadata (and status, when it is a
/// subresource)? Decides generation bumps.
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let skip = |k: &str| {
        k == "metadata"
            || k == "apiVersion"
            || k == "kind"
            || (k == "status" && def.status_subresource)
    };
    let empty = serde_json::Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    o.iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| n.get(k) != Some(v))
        || n.iter()
            .filter(|(k, _)| !skip(k))
            .any(|(k, _)| !o.contains_key(k))
}

/// A copy without `metadata.resourceVersion`.
fn without_resource_version(v: &Value) -> Value {
    let mut v = v.clone();
    meta_mut(&mut v).remove("resourceVersion");
    v
}

/// Whether a non-apply write sets managedFields other than the stored ones
/// (decodable entries, or the `[{}]` reset). kube-apiserver stores such a
/// write even when nothing else changes: its no-op check compares the
/// encoded object, managedFields included — how client-go's `csaupgrade`
/// (and the engine's take-over of Metacontroller's fields) moves ownership
/// with a patch of managedFields alone.
fn sends_managed_fields(old: &Value, new: &Value) -> bool {
    let mf = |v: &Value| {
        v.get("metadata")
            .and_then(|m| m.get("managedFields"))
            .cloned()
    };
    match mf(new) {
        Some(Value::Array(a)) if !a.is_empty() => mf(old) != Some(Value::Array(a)),
        _ => false,
    }
}

/// Equal apart from resourceVersion and managedFields (no-op write detection).
fn same_content(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        let m = meta_mut(&mut v);
        m.remove("resourceVersion");
        m.remove("managedFields");
        v
    };
    strip(old) == strip(new)
}

/// Write a new state over an existing object (update, patch, apply, status).
/// `strict_rv`: the client named a resourceVersion (a mismatch is a 409).
pub fn write_existing(
    app: &App,
    t: &Target<'_>,
    name: &str,
    old: &Arc<Value>,
    mut new: Value,
    strict_rv: bool,
    managed: bool,
) -> Result<Arc<Value>, ApiError> {
    check_identity(t, &mut new)?;
    crate::validation::decode(t.def, t.version, &mut new, t.decoding)?;
    check_name_and_version(t, name, old, &new)?;
    let mut new = scope_to_subresource(t, old, new, managed);
    keep_system_metadata(old, &mut new, managed);
    check_no_new_finalizers(t, name, old, &new)?;
    prepare_update(app, t, name, old, &mut new)?;
    if unchanged(old, &new, managed) {
        // No-op: kube-apiserver does not write (no new resourceVersion, no event).
        return Ok(old.clone());
    }
    if !managed {
        let now = meta::now_rfc3339();
        let mf = patching::track(
            Some(old),
            &new,
            t.def,
            t.version,
            t.manager,
            t.subresource,
            &now,
        );
        set_managed_fields(&mut new, mf);
    }
    crate::validation::check_storable(t.def, t.namespace, name, &new)?;
    if t.dry_run {
        return Ok(Arc::new(new));
    }
    commit_update(app, t, name, old, new, strict_rv)
}

/// The body's name must be the URL's, and a resourceVersion it names must be
/// the stored one (else 409).
fn check_name_and_version(
    t: &Target<'_>,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if let Some(n) = meta::name(new)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(rv) = meta::str_field(new, "resourceVersion").filter(|s| !s.is_empty())
        && rv.parse::<u64>().ok() != Some(rv_of(old))
    {
        return Err(ApiError::stale(t.def.qualified(), name));
    }
    Ok(())
}

/// Subresource rules: /status writes only status (the rest is the stored
/// object's); the main resource never writes status when status is a
/// subresource.
fn scope_to_subresource(t: &Target<'_>, old: &Value, mut new: Value, managed: bool) -> Value {
    if !t.def.status_subresource {
        return new;
    }
    if t.subresource == Some("status") {
        let status = new.get("status").cloned();
        let mf = meta::meta(&new)
            .and_then(|m| m.get("managedFields"))
            .cloned();
        let mut merged = old.clone();
        if let Some(m) = merged.as_object_mut() {
            match status {
                Some(s) => m.insert("status".into(), s),
                None => m.remove("status"),
            };
        }
        if managed && let Some(mf) = mf {
            meta_mut(&mut merged).insert("managedFields".into(), mf);
        }
        return merged;
    }
    if let Some(m) = new.as_object_mut() {
        match old.get("status") {
            Some(s) => m.insert("status".into(), s.clone()),
            None => m.remove("status"),
        };
    }
    new
}

/// Immutable system metadata comes from the stored object (and its
/// managedFields, when a plain write sends none).
fn keep_system_metadata(old: &Value, new: &mut Value, managed: bool) {
    let om = meta::meta(old).cloned().unwrap_or_default();
    let m = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ] {
        match om.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    m.remove("selfLink");
    m.insert("resourceVersion".into(), json!(rv_of(old).to_string()));
    if !managed
        && !m.contains_key("managedFields")
        && let Some(mf) = om.get("managedFields")
    {
        m.insert("managedFields".into(), mf.clone());
    }
}

/// An object being deleted takes no new finalizers (422 naming them).
fn check_no_new_finalizers(
    t: &Target<'_>,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if !meta::is_deleting(old) {
        return Ok(());
    }
    let before = meta::finalizers(old);
    let added: Vec<String> = meta::finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    let list = added
        .iter()
        .map(|f| format!("{f:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(invalid(
        t,
        name,
        vec![Cause {
            reason: "FieldValueForbidden",
            field: "metadata.finalizers".into(),
            message: format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
            ),
        }],
    ))
}

/// What the registry does to an update before storing it: defaults, the
/// kind's preparation, validation against the stored object, a CRD's
/// recorded conditions, and the generation bump on a spec change.
fn prepare_update(
    app: &App,
    t: &Target<'_>,
    name: &str,
    old: &Value,
    new: &mut Value,
) -> Result<(), ApiError> {
    kinds::apply_defaults(t.def, new);
    crate::validation::written(t.def, t.version, new);
    kinds::prepare_update(t.def, old, new);
    validate(app, t, name, new, Some(old))?;
    if t.def.key() == "apiextensions.k8s.io/customresourcedefinitions" && t.subresource.is_none() {
        let status = old.get("status").cloned();
        kinds::prepare_crd(new)?;
        if let (Some(s), Some(m)) = (status, new.as_object_mut()) {
            // Keep the recorded conditions (transition times) of an existing CRD.
            m.insert("status".into(), s);
        }
    }
    if t.def.has_generation && spec_changed(t.def, old, new) {
        let g = meta::generation(old) + 1;
        meta_mut(new).insert("generation".into(), json!(g));
    }
    Ok(())
}

/// Whether a write changes nothing kube-apiserver would store. An apply can
/// change only ownership (a second manager applying the same value, a
/// manager dropping a co-owned field): that is a real write, so on the apply
/// path managedFields take part in the comparison.
fn unchanged(old: &Value, new: &Value, managed: bool) -> bool {
    if managed {
        crate::patch::is_noop(
            &without_resource_version(old),
            &without_resource_version(new),
        )
    } else {
        same_content(old, new) && !sends_managed_fields(old, new)
    }
}

/// Stores an update over `old` (resourceVersion precondition) and, when it
/// removed the last finalizer of a deleting object, removes the object.
fn commit_update(
    app: &App,
    t: &Target<'_>,
    name: &str,
    old: &Value,
    new: Value,
    strict_rv: bool,
) -> Result<Arc<Value>, ApiError> {
    let q = t.def.qualified();
    let key = t.key(name);
    let finalize_now = meta::is_deleting(&new) && !meta::blocks_deletion(&new);
    let committed = app
        .store
        .commit(&t.def.key(), &key, Expect::Rv(rv_of(old)), Some(new))
        .map_err(|e| match e {
            CommitError::NotFound => ApiError::not_found(q, name),
            _ if strict_rv => ApiError::stale(q, name),
            _ => ApiError::new(409, "Conflict", "retry"),
        })?;
    app.after_commit(t.def, &committed);
    if finalize_now {
        // Last finalizer gone from a deleting object: it goes away now
        // (watchers see MODIFIED, then DELETED, as with kube-apiserver).
        if let Ok(gone) = app
            .store
            .commit(&t.def.key(), &key, Expect::Rv(rv_of(&committed)), None)
        {
            app.after_delete(t.def, &gone);
        }
    }
    Ok(committed)
}

fn is_retry(e: &ApiError) -> bool {
    e.code == 409 && e.message == "retry"
}

/// Replace an object (PUT).
pub fn update(app: &App, t: &Target<'_>, name: &str, obj: Value) -> Result<Arc<Value>, ApiError> {
    let strict = meta::str_field(&obj, "resourceVersion").is_some_and(|s| !s.is_empty());
    loop {
        let old = app
            .store
            .get(&t.def.key(), &t.key(name))
            .ok_or_else(|| ApiError::not_found(t.def.qualified(), name))?;
        match write_existing(app, t, name, &old, obj.clone(), strict, false) {
            Err(e) if is_retry(&e) => continue,
            other => return other,
        }
    }
}

/// Patch an object (PATCH); server-side apply creates when absent.
/// Returns the object and whether it was created.
pub fn patch(
    app: &App,
    t: &Target<'_>,
    name: &str,
    kind: PatchKind,
    body: &Value,
    force: bool,
) -> Result<(Arc<Value>, bool), ApiError> {
    let strict = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if kind == PatchKind::Apply && t.subresource.is_none() && !t.def.custom {
        check_apply_kind(t, body)?;
    }
    loop {
        let old = app.store.get(&t.def.key(), &t.key(name));
        let result = match (kind, old) {
            (PatchKind::Apply, None) => {
                return apply_create(app, t, name, body, force).map(|o| (o, true));
            }
            (_, None) => return Err(ApiError::not_found(t.def.qualified(), name)),
            (PatchKind::Apply, Some(old)) => {
                crate::validation::check_apply_config(t.def, t.version, name, body)?;
                let now = meta::now_rfc3339();
                let new = patching::apply(
                    Some(&old),
                    body,
                    t.def,
                    t.version,
                    t.manager,
                    force,
                    t.subresource,
                    &now,
                )?;
                write_existing(app, t, name, &old, new, strict, true)
            }
            (kind, Some(old)) => {
                if kind == PatchKind::Strategic && t.def.custom {
                    return Err(ApiError::unsupported_media(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                    ));
                }
                let new = patching::patch(kind, &old, body, t.def, t.version)?;
                write_existing(app, t, name, &old, new, strict, false)
            }
        };
        match result {
            Err(e) if is_retry(&e) => continue,
            other => return other.map(|o| (o, false)),
        }
    }
}

/// An apply configuration must name the resource's kind: kube-apiserver
/// refuses another (or none) before anything else.
fn check_apply_kind(t: &Target<'_>, body: &Value) -> Result<(), ApiError> {
    let k = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if k == t.def.kind {
        return Ok(());
    }
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let gv = if av.contains('/') {
        av.to_string()
    } else {
        format!("/{av}")
    };
    Err(ApiError::bad_request(format!(
        "invalid object type: {gv}, Kind={k}"
    )))
}

/// Server-side apply of an absent object: a create whose managedFields the
/// apply computed (not on a subresource: 404).
fn apply_create(
    app: &App,
    t: &Target<'_>,
    name: &str,
    body: &Value,
    force: bool,
) -> Result<Arc<Value>, ApiError> {
    if t.subresource.is_some() {
        return Err(ApiError::not_found(t.def.qualified(), name));
    }
    crate::validation::check_apply_config(t.def, t.version, name, body)?;
    let mut applied = body.clone();
    check_identity(t, &mut applied)?;
    if meta::name(&applied) != Some(name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta::name(&applied).unwrap_or_default()
        )));
    }
    let now = meta::now_rfc3339();
    let obj = patching::apply(
        None, &applied, t.def, t.version, t.manager, force, None, &now,
    )?;
    create(app, t, obj, true)
}

/// Delete an object, honouring preconditions, finalizers and propagation.
pub fn delete(
    app: &App,
    t: &Target<'_>,
    name: &str,
    opts: &DeleteOpts,
) -> Result<Deleted, ApiError> {
    let key = t.key(name);
    kinds::check_delete(t.def, name)?;
    loop {
        let old = app
            .store
            .get(&t.def.key(), &key)
            .ok_or_else(|| ApiError::not_found(t.def.qualified(), name))?;
        check_delete_preconditions(t, name, &old, opts)?;
        let finalizers = finalizers_for_delete(&old, opts.propagation.as_deref())?;
        let mut probe = (*old).clone();
        meta::set_finalizers(&mut probe, &finalizers);
        let done = if meta::blocks_deletion(&probe) {
            mark_deleting(app, t, name, old, &finalizers)?
        } else {
            remove(app, t, name, old)?
        };
        if let Some(d) = done {
            return Ok(d);
        }
    }
}

/// The `uid` and `resourceVersion` preconditions of a delete (409 on a
/// mismatch; the storage layer's errors name the kind, not the resource).
fn check_delete_preconditions(
    t: &Target<'_>,
    name: &str,
    old: &Value,
    opts: &DeleteOpts,
) -> Result<(), ApiError> {
    let by_kind = crate::errors::Qualified {
        group: &t.def.group,
        resource: &t.def.kind,
    };
    if let Some(uid) = &opts.uid {
        let have = meta::uid(old).unwrap_or_default();
        if uid != have {
            return Err(ApiError::conflict(
                by_kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let have = rv_of(old).to_string();
        if *rv != have {
            return Err(ApiError::conflict(
                by_kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                ),
            ));
        }
    }
    Ok(())
}

/// The object's finalizers once the propagation policy's own
/// (`foregroundDeletion`, `orphan`) are set.
fn finalizers_for_delete(old: &Value, propagation: Option<&str>) -> Result<Vec<String>, ApiError> {
    let mut finalizers = meta::finalizers(old);
    match propagation {
        None | Some("Background") => {}
        Some("Foreground") => {
            if !finalizers.iter().any(|f| f == "foregroundDeletion") {
                finalizers.push("foregroundDeletion".into());
            }
            finalizers.retain(|f| f != "orphan");
        }
        Some("Orphan") => {
            if !finalizers.iter().any(|f| f == "orphan") {
                finalizers.push("orphan".into());
            }
            finalizers.retain(|f| f != "foregroundDeletion");
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    }
    Ok(finalizers)
}

/// Removes an object nothing holds back. `Ok(None)`: it changed meanwhile,
/// try again.
fn remove(
    app: &App,
    t: &Target<'_>,
    name: &str,
    old: Arc<Value>,
) -> Result<Option<Deleted>, ApiError> {
    if t.dry_run {
        return Ok(Some(Deleted::Gone(old)));
    }
    match app
        .store
        .commit(&t.def.key(), &t.key(name), Expect::Rv(rv_of(&old)), None)
    {
        Ok(gone) => {
            app.after_delete(t.def, &gone);
            Ok(Some(Deleted::Gone(gone)))
        }
        Err(CommitError::NotFound) => Err(ApiError::not_found(t.def.qualified(), name)),
        Err(_) => Ok(None),
    }
}

/// Marks an object held by finalizers as being deleted (deletionTimestamp,
/// generation bump, a Namespace's or CRD's terminating state) with the
/// policy's finalizers. `Ok(None)`: it changed meanwhile, try again.
fn mark_deleting(
    app: &App,
    t: &Target<'_>,
    name: &str,
    old: Arc<Value>,
    finalizers: &[String],
) -> Result<Option<Deleted>, ApiError> {
    let already = meta::is_deleting(&old);
    if already && finalizers == meta::finalizers(&old).as_slice() {
        return Ok(Some(Deleted::Pending(old)));
    }
    let mut new = (*old).clone();
    meta::set_finalizers(&mut new, finalizers);
    if !already {
        let m = meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if t.def.has_generation {
            let g = meta::generation(&old) + 1;
            m.insert("generation".into(), json!(g));
        }
        if t.def.key() == "/namespaces"
            && let Some(s) = new.get_mut("status").and_then(Value::as_object_mut)
        {
            s.insert("phase".into(), json!("Terminating"));
        }
        if t.def.key() == "apiextensions.k8s.io/customresourcedefinitions" {
            kinds::mark_crd_terminating(&mut new);
        }
    }
    if t.dry_run {
        return Ok(Some(Deleted::Pending(Arc::new(new))));
    }
    match app.store.commit(
        &t.def.key(),
        &t.key(name),
        Expect::Rv(rv_of(&old)),
        Some(new),
    ) {
        Ok(obj) => {
            app.after_commit(t.def, &obj);
            Ok(Some(Deleted::Pending(obj)))
        }
        Err(CommitError::NotFound) => Err(ApiError::not_found(t.def.qualified(), name)),
        Err(_) => Ok(None),
    }
}

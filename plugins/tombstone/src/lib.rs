//! `tombstone`: an example of ordered, finalizer-driven teardown. A `Workspace`
//! parent owns a data ConfigMap and a "tombstone" ConfigMap recording who the
//! workspace belonged to; on deletion the data goes first, the tombstone is
//! kept for a configurable grace period, and only then is the parent
//! reported `finalized`. Behaviour is specified in README.md.

mod time;

use std::collections::BTreeMap;

use wr_plugin_sdk::prelude::*;

/// Per-controller settings.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Seconds the tombstone outlives the data after deletion starts
    /// (default 0: remove it as soon as the data is gone).
    #[serde(default)]
    pub grace_seconds: u32,
}

/// The plugin.
pub struct Tombstone;

impl Reconciler for Tombstone {
    // The requeue hint counts down to the expiry from `now`.
    const READS_NOW: bool = true;

    fn reconcile(req: &Request) -> Result<Response, Error> {
        let name = req.name()?;
        let namespace = req.namespace();
        let config: Config = req.config()?;
        let data_name = child_name(name, "data");
        let tombstone_name = child_name(name, "tombstone");
        let tombstone = tombstone_object(req, name, &tombstone_name)?;

        if !req.finalizing {
            let data = data_object(req, namespace, &data_name)?;
            return Ok(Response::new()
                .child(data)
                .child(tombstone)
                .status(json!({ "phase": "Active" })));
        }

        // Ordered teardown, one step per call; the host calls again when the
        // observed children change.
        let data_observed = req.child("ConfigMap", &data_name).is_some();
        let tombstone_observed = req.child("ConfigMap", &tombstone_name).is_some();
        if data_observed {
            return Ok(Response::new()
                .child(tombstone)
                .status(json!({ "phase": "Terminating", "step": "DeletingData" }))
                .event(Event::normal(
                    "DeletingData",
                    format!("deleting ConfigMap {data_name}"),
                )));
        }
        if tombstone_observed {
            let remaining = grace_remaining(req, config.grace_seconds)?;
            if remaining > 0 {
                return Ok(Response::new()
                    .child(tombstone)
                    .status(json!({ "phase": "Terminating", "step": "TombstoneGrace" }))
                    .requeue_after(remaining));
            }
            return Ok(Response::new()
                .status(json!({ "phase": "Terminating", "step": "DeletingTombstone" }))
                .event(Event::normal(
                    "DeletingTombstone",
                    format!("deleting ConfigMap {tombstone_name}"),
                )));
        }
        Ok(Response::new()
            .status(json!({ "phase": "Terminating", "step": "Finalized" }))
            .event(Event::normal("Finalized", "all children are gone"))
            .finalized(true))
    }
}

/// The data ConfigMap: `spec.data` (a map of strings) copied verbatim.
fn data_object(req: &Request, namespace: Option<&str>, name: &str) -> Result<Value, Error> {
    let data: BTreeMap<String, String> = match req.parent.pointer("/spec/data") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|_| Error::invalid_spec("spec.data", "must be a map of strings"))?,
    };
    let mut cm = object("v1", "ConfigMap", namespace, name);
    label(
        &mut cm,
        "tombstone.examples.wasm-reconciler.dev/role",
        "data",
    );
    cm["data"] = json!(data);
    Ok(cm)
}

/// The tombstone ConfigMap: who owned the workspace and since when.
fn tombstone_object(req: &Request, parent_name: &str, name: &str) -> Result<Value, Error> {
    let owner = match req.parent.pointer("/spec/owner") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(Error::invalid_spec("spec.owner", "required")),
    };
    let created = req
        .parent
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("");
    let uid = req
        .parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut cm = object("v1", "ConfigMap", req.namespace(), name);
    label(
        &mut cm,
        "tombstone.examples.wasm-reconciler.dev/role",
        "tombstone",
    );
    cm["data"] = json!({
        "workspace": parent_name,
        "uid": uid,
        "owner": owner,
        "createdAt": created,
    });
    Ok(cm)
}

/// Seconds until `deletionTimestamp + grace` (0 when passed or no grace).
fn grace_remaining(req: &Request, grace: u32) -> Result<u32, Error> {
    if grace == 0 {
        return Ok(0);
    }
    let deleted = req
        .parent
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Error::permanent(
                "InvalidParent",
                "finalizing without metadata.deletionTimestamp",
            )
        })?;
    let deleted = time::parse_rfc3339(deleted).ok_or_else(|| {
        Error::permanent(
            "InvalidParent",
            format!("bad deletionTimestamp {deleted:?}"),
        )
    })?;
    let now = time::parse_rfc3339(&req.now)
        .ok_or_else(|| Error::permanent("InvalidRequest", format!("bad now {:?}", req.now)))?;
    let due = deleted + i64::from(grace);
    Ok(u32::try_from((due - now).max(0)).unwrap_or(u32::MAX))
}

wr_plugin_sdk::export_reconciler!(Tombstone);

#[cfg(test)]
mod tests;

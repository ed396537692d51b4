//! Patch and apply semantics: JSON patch, JSON merge patch, strategic merge
//! patch, and server-side apply with managedFields — the write paths whose
//! fidelity `kubectl` and `kube::Client` judge this server by.
//!
//! The server calls:
//! - [`apply_json_patch`], [`apply_merge_patch`], [`apply_strategic_merge_patch`]
//!   to compute the new object of a PATCH, then [`track_update`] for its
//!   managedFields (as for create and update);
//! - [`server_side_apply`] for `application/apply-patch+yaml`, which returns
//!   the object with its managedFields already set.
//!
//! After any of them, if the result equals the stored object
//! ([`is_noop`]), kube-apiserver writes nothing and keeps resourceVersion.

mod apply;
mod builtin;
mod error;
mod fieldset;
mod json;
mod managed;
mod merge;
mod schema;
mod strategic;
mod walk;

pub use apply::{ApplyOptions, server_side_apply};
pub use error::{FieldConflict, PatchError};
pub use json::{apply_json_patch, apply_merge_patch};
pub use managed::track_update;
pub(crate) use schema::Node;
pub use schema::Schema;
pub use strategic::apply_strategic_merge_patch;

use serde_json::Value;

/// How structured-merge-diff names item `index` of the list at `list` in an
/// error path: `[name="c"]` (keyed), `[="a"]` (set), `[3]` (atomic). `None`
/// when the item has no key (the apply reports that itself).
pub(crate) fn item_path(list: &Node, item: &Value, index: usize) -> Option<String> {
    walk::item_element(list, item, index)
        .ok()
        .map(|pe| fieldset::path_string(std::slice::from_ref(&pe)))
}

/// Whether a write that produced `new` from `current` changed nothing, so
/// the server must skip it (no new resourceVersion, no watch event). JSON
/// equality, key order ignored; managedFields included, because a change of
/// ownership alone is a real write in kube-apiserver.
pub fn is_noop(current: &Value, new: &Value) -> bool {
    current == new
}

#[cfg(test)]
mod apply_tests;

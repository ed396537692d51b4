//! Which caches a sharded replica narrows to its shard buckets (issue 19).
//!
//! A kind is narrowed when every controller uses it in one role: only as
//! parents (labelled with their own bucket by [`crate::shard_label`]) or only
//! as children (labelled with their parent's bucket at apply,
//! [`crate::shard_bucket::label_child`]). A kind used as related objects, as
//! WasmControllers, or as parents of one controller and children of another
//! (whose label would then mean two different things) is watched whole: the
//! decision is sticky for the process, so a cache only ever widens, never
//! loses objects a controller relies on.

use std::collections::HashMap;
use std::sync::Arc;

use crate::admission::Admission;

/// How a controller uses a cached kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The controller's parents.
    Parent,
    /// One of its child kinds.
    Child,
    /// Anything else (related objects, WasmControllers).
    Other,
}

/// The roles a kind has had in this process.
#[derive(Debug, Default, Clone, Copy)]
struct Roles {
    parent: bool,
    child: bool,
    other: bool,
}

impl Roles {
    fn narrowable(self) -> bool {
        !self.other && (self.parent != self.child)
    }
}

/// The narrowing state of one registry.
pub struct Narrowing {
    /// The selector narrowed caches watch with (no bucket until the first map).
    pub(super) selector: String,
    roles: HashMap<(String, String, String), Roles>,
    admission: Arc<dyn Admission>,
}

impl Narrowing {
    /// Narrowing that starts with no bucket and labels the parents
    /// `admission` admits.
    pub(super) fn new(admission: Arc<dyn Admission>) -> Self {
        Narrowing {
            selector: crate::shard_bucket::selector(&[]),
            roles: HashMap::new(),
            admission,
        }
    }

    /// Records that kind `id` is used as `role`; the selector its cache
    /// should watch with (`None`: everything).
    pub(super) fn register(&mut self, id: &(String, String, String), role: Use) -> Option<String> {
        let r = self.roles.entry(id.clone()).or_default();
        match role {
            Use::Parent => r.parent = true,
            Use::Child => r.child = true,
            Use::Other => r.other = true,
        }
        r.narrowable().then(|| self.selector.clone())
    }

    /// The admission a new cache's labeller works under: parents only.
    pub(super) fn labeller(&self, role: Use) -> Option<Arc<dyn Admission>> {
        (role == Use::Parent).then(|| self.admission.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::ObjectKey;

    struct All;
    impl Admission for All {
        fn enter(&self, _: &str, _: &ObjectKey) -> Option<crate::admission::Ticket> {
            Some(Box::new(()))
        }
    }

    fn id(plural: &str) -> (String, String, String) {
        (String::new(), "v1".into(), plural.into())
    }

    #[test]
    fn only_single_role_parent_or_child_kinds_narrow_and_widening_sticks() {
        let mut n = Narrowing::new(Arc::new(All));
        assert!(n.register(&id("sites"), Use::Parent).is_some());
        assert!(n.register(&id("deployments"), Use::Child).is_some());
        assert!(n.register(&id("deployments"), Use::Child).is_some());
        assert!(n.register(&id("secrets"), Use::Other).is_none());
        // ConfigMaps: children of one controller, related of another.
        assert!(n.register(&id("configmaps"), Use::Child).is_some());
        assert!(n.register(&id("configmaps"), Use::Other).is_none());
        assert!(n.register(&id("configmaps"), Use::Child).is_none());
        // A parent kind that is another controller's child kind.
        assert!(n.register(&id("sites"), Use::Child).is_none());
        assert!(n.labeller(Use::Parent).is_some());
        assert!(n.labeller(Use::Child).is_none());
    }
}

//! The cluster state a plan reads: one LIST per resource kind the controller
//! names (parents, each child kind, each related kind), indexed the way the
//! engine's caches are (by namespace/name, and children by controller owner
//! uid). Plain LISTs rather than the engine's watch-backed caches: a plan is a
//! one-shot read, and its only API traffic is GET and LIST.
//!
//! Objects keep their `managedFields` here (the field diff reads the host's
//! own apply entry); they are stripped before anything reaches the plugin,
//! as the caches strip them.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};

use super::PlanError;
use crate::apply::controller_uid;
use crate::decide::Source;
use crate::queue::ObjectKey;
use crate::target::Target;

/// Objects of one kind, indexed.
#[derive(Default)]
struct Indexed {
    by_key: HashMap<ObjectKey, Arc<DynamicObject>>,
    by_owner: HashMap<String, Vec<ObjectKey>>,
}

impl Indexed {
    fn new(objects: Vec<DynamicObject>) -> Self {
        let mut ix = Indexed::default();
        for o in objects {
            let key = key_of(&o);
            if let Some(uid) = controller_uid(&o) {
                ix.by_owner
                    .entry(uid.to_string())
                    .or_default()
                    .push(key.clone());
            }
            ix.by_key.insert(key, Arc::new(o));
        }
        for keys in ix.by_owner.values_mut() {
            keys.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        ix
    }
}

/// Live parents, children and related objects of one controller.
pub struct Snapshot {
    parents: Vec<DynamicObject>,
    children: Vec<Indexed>,
    related: Vec<Vec<Arc<DynamicObject>>>,
}

impl Snapshot {
    /// A snapshot of given objects (tests; `children[i]`/`related[i]` follow
    /// the target's declared order).
    pub fn from_objects(
        mut parents: Vec<DynamicObject>,
        children: Vec<Vec<DynamicObject>>,
        related: Vec<Vec<DynamicObject>>,
    ) -> Self {
        parents.sort_by_key(key_of);
        Snapshot {
            parents,
            children: children.into_iter().map(Indexed::new).collect(),
            related: related
                .into_iter()
                .map(|l| l.into_iter().map(Arc::new).collect())
                .collect(),
        }
    }

    /// Lists everything `target` needs.
    pub async fn take(client: &kube::Client, target: &Target) -> Result<Self, PlanError> {
        let parents = list(client, &target.parent.ar).await?;
        let mut children = Vec::new();
        for c in &target.children {
            children.push(list(client, &c.resolved.ar).await?);
        }
        let mut related = Vec::new();
        for r in &target.related {
            related.push(list(client, &r.resolved.ar).await?);
        }
        Ok(Self::from_objects(parents, children, related))
    }

    /// Parents, ordered by namespace and name.
    pub fn parents(&self) -> &[DynamicObject] {
        &self.parents
    }
}

impl Source for Snapshot {
    fn child(&self, kind: usize, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        self.children.get(kind)?.by_key.get(key).cloned()
    }

    fn owned_by(&self, kind: usize, uid: &str) -> Vec<Arc<DynamicObject>> {
        let Some(ix) = self.children.get(kind) else {
            return Vec::new();
        };
        ix.by_owner
            .get(uid)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| ix.by_key.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn related_in(&self, i: usize, ns: Option<&str>) -> Vec<Arc<DynamicObject>> {
        self.related
            .get(i)
            .map(|l| {
                l.iter()
                    .filter(|o| ns.is_none() || o.metadata.namespace.as_deref() == ns)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The key of an object (as the caches key it).
pub(crate) fn key_of(obj: &DynamicObject) -> ObjectKey {
    ObjectKey {
        namespace: obj.metadata.namespace.clone(),
        name: obj.metadata.name.clone().unwrap_or_default(),
    }
}

async fn list(
    client: &kube::Client,
    ar: &kube::api::ApiResource,
) -> Result<Vec<DynamicObject>, PlanError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = api.list(&lp).await.map_err(|source| PlanError::Api {
            what: format!("listing {}", ar.plural),
            source,
        })?;
        // A real API server leaves apiVersion/kind out of list items (the
        // list carries them); the plan compares and hands out whole objects.
        out.extend(page.items.into_iter().map(|mut o| {
            if o.types.is_none() {
                o.types = Some(kube::api::TypeMeta {
                    api_version: ar.api_version.clone(),
                    kind: ar.kind.clone(),
                });
            }
            o
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(out),
        }
    }
}

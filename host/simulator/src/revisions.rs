//! ControllerRevisions of StatefulSets and DaemonSets: the history `kubectl
//! rollout history` lists and `kubectl rollout undo` applies. One revision
//! per pod template, named `<owner>-<hash>`, labelled with the hash
//! (`controller.kubernetes.io/hash`) and the owner's selector labels, holding
//! the template as a patch (`{"spec": {"template": {…, "$patch": "replace"}}}`)
//! and a revision number that grows each time a template becomes current.

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::{Value, json};

use crate::pass::Cx;
use crate::template::owner_ref;
use crate::world::{self, i64_at};
use crate::write::CONTROLLER_MANAGER;

const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Make sure `owner`'s current template has its revision, the newest one;
/// `hash` is the template's hash (the revision is `<owner>-<hash>`).
pub async fn ensure(cx: &mut Cx<'_>, owner: &Value, hash: &str) {
    let (ns, name) = (world::namespace(owner), world::name(owner));
    let rev_name = format!("{name}-{hash}");
    let mine = world::World::owned(&cx.world.revisions, owner);
    let newest = mine
        .iter()
        .filter_map(|r| i64_at(r, "/revision"))
        .max()
        .unwrap_or(0);
    let what = format!("ControllerRevision {ns}/{rev_name}");
    match mine.iter().find(|r| world::name(r) == rev_name) {
        Some(r) if i64_at(r, "/revision") == Some(newest) => {}
        Some(_) => {
            // An earlier template is current again (a rollback): renumber it.
            let patch = json!({"revision": newest + 1});
            if let Err(e) = cx
                .writer
                .merge::<ControllerRevision>(ns, &rev_name, patch, false, CONTROLLER_MANAGER)
                .await
            {
                cx.failed(&what, e);
            }
        }
        None => {
            let mut template = owner
                .pointer("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            template["$patch"] = json!("replace");
            let mut labels = owner
                .pointer("/spec/selector/matchLabels")
                .cloned()
                .unwrap_or_else(|| json!({}));
            labels[HASH_LABEL] = json!(hash);
            let body = json!({
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": rev_name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [owner_ref(owner)],
                },
                "data": {"spec": {"template": template}},
                "revision": newest + 1,
            });
            match cx.writer.create::<ControllerRevision>(ns, body).await {
                Ok(_) => {}
                Err(e) if e.code() == Some(409) => {}
                Err(e) => cx.failed(&what, e),
            }
        }
    }
}

/// Delete the oldest revisions beyond `revisionHistoryLimit` that no
/// current pod uses (`in_use` holds the hashes pods carry).
pub async fn prune(cx: &mut Cx<'_>, owner: &Value, in_use: &[String]) {
    let limit = i64_at(owner, "/spec/revisionHistoryLimit")
        .unwrap_or(10)
        .max(0) as usize;
    let mut old: Vec<&Value> = world::World::owned(&cx.world.revisions, owner)
        .into_iter()
        .filter(|r| {
            world::label(r, HASH_LABEL).is_none_or(|h| !in_use.iter().any(|u| u == h))
                && !in_use.iter().any(|u| u == world::name(r))
        })
        .collect();
    // The newest revision is the current one: never pruned.
    old.sort_by_key(|r| i64_at(r, "/revision").unwrap_or(0));
    old.pop();
    if old.len() <= limit {
        return;
    }
    let extra = old.len() - limit;
    for r in old.into_iter().take(extra) {
        let (ns, name) = (world::namespace(r), world::name(r));
        if let Err(e) = cx
            .writer
            .delete::<ControllerRevision>(ns, name, false)
            .await
        {
            cx.failed(&format!("ControllerRevision {ns}/{name}"), e);
        }
    }
}

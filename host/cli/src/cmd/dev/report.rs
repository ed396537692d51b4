//! What `dev` tells its user: the banner with the exact kubectl commands, and
//! one log line per change of a parent's Ready condition, so the terminal
//! shows the outcome of reconciles, not only their steps (those come from the
//! engine's own info logs).

use std::collections::HashMap;
use std::path::Path;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

/// The text printed once the dev cluster is up.
pub fn banner(url: &str, kubeconfig: &Path, data_dir: Option<&Path>) -> String {
    let kc = kubeconfig.display();
    let k = format!("kubectl --kubeconfig {kc}");
    let state = match data_dir {
        Some(d) => format!(
            "objects are kept in {} across restarts",
            super::absolute(d).display()
        ),
        None => "objects live in memory (use --data-dir to keep them)".to_string(),
    };
    format!(
        "\nwasm-reconciler dev: API server {url}, {state}\n\
         kubeconfig written to {kc}\n\n\
         Look around:\n  \
         {k} get wasmcontrollers\n  \
         {k} get staticsites,deployments,services,configmaps\n  \
         {k} get workspaces,configmaps\n  \
         {k} get events\n\n\
         Change a parent and watch the children follow:\n  \
         {k} patch staticsite web --type merge -p '{{\"spec\":{{\"replicas\":3}}}}'\n  \
         {k} get deployment web -o jsonpath='{{.spec.replicas}}'\n\n\
         Rebuild a plugin (plugins/build.sh) and it is hot-reloaded.\n\
         Press Ctrl-C to stop.\n\n"
    )
}

/// The Ready condition of a parent: (status, reason, observedGeneration).
pub fn ready_of(obj: &DynamicObject) -> Option<(String, String, i64)> {
    let conds = obj.data.pointer("/status/conditions")?.as_array()?;
    let c = conds
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    Some((
        c.get("status")?.as_str()?.to_string(),
        c.get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        c.get("observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    ))
}

/// Follows every example parent kind until `stop` turns true.
pub async fn follow_parents(client: Client, stop: tokio::sync::watch::Receiver<bool>) {
    let kinds = match super::seed::parent_resources() {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!(error = %e, "cannot follow parents");
            return;
        }
    };
    let tasks: Vec<_> = kinds
        .into_iter()
        .map(|ar| tokio::spawn(follow(client.clone(), ar, stop.clone())))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

async fn follow(client: Client, ar: ApiResource, mut stop: tokio::sync::watch::Receiver<bool>) {
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut last: HashMap<(String, String), (String, String, i64)> = HashMap::new();
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            _ = stop.changed() => return,
        };
        let obj = match ev {
            Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
            Some(Ok(watcher::Event::Delete(o))) => {
                let key = key(&o);
                last.remove(&key);
                tracing::info!(kind = %ar.kind, namespace = %key.0, name = %key.1, "parent deleted");
                continue;
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::debug!(kind = %ar.kind, error = %e, "watch error; the watcher retries");
                continue;
            }
            None => return,
        };
        let Some(ready) = ready_of(&obj) else {
            continue;
        };
        let key = key(&obj);
        if last.get(&key) == Some(&ready) {
            continue;
        }
        let (status, reason, generation) = ready.clone();
        last.insert(key.clone(), ready);
        if status == "True" {
            tracing::info!(kind = %ar.kind, namespace = %key.0, name = %key.1, generation, "parent Ready");
        } else {
            tracing::warn!(kind = %ar.kind, namespace = %key.0, name = %key.1, generation, ready = %status, reason = %reason, "parent not Ready");
        }
    }
}

fn key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_names_the_kubeconfig_in_every_kubectl_command() {
        let b = banner("http://127.0.0.1:1", Path::new("/tmp/x.kubeconfig"), None);
        let kubectl_lines: Vec<&str> = b.lines().filter(|l| l.contains("kubectl")).collect();
        assert!(kubectl_lines.len() >= 4);
        for l in kubectl_lines {
            assert!(l.contains("--kubeconfig /tmp/x.kubeconfig"), "{l}");
        }
        assert!(b.contains("get staticsites,deployments"));
    }

    #[test]
    fn ready_of_reads_the_ready_condition_only() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "status": {"conditions": [
                {"type": "Available", "status": "False", "reason": "R"},
                {"type": "Ready", "status": "True", "reason": "Reconciled", "observedGeneration": 3}
            ]}
        }))
        .unwrap();
        assert_eq!(ready_of(&o), Some(("True".into(), "Reconciled".into(), 3)));
    }
}

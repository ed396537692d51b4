//! What `dev` tells its user: the banner with the exact kubectl commands, and
//! one log line per change of a parent's Ready condition, so the terminal
//! shows the outcome of reconciles, not only their steps (those come from the
//! engine's own info logs).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

/// What `dev` installed, for the banner: it shows only commands that work.
pub struct Installed<'a> {
    /// The example controllers installed (their component was found).
    pub examples: &'a [String],
    /// Whether the sample parents were created (`--no-samples` off).
    pub samples: bool,
}

/// The text printed once the dev cluster is up: the kubectl commands that
/// work against what was installed. Without the examples (a `--plugin-dir` of
/// your own, as `wasm-reconciler new` projects use) it shows how to apply your
/// own controller instead of commands on kinds with no controller.
pub fn banner(
    url: &str,
    kubeconfig: &Path,
    data_dir: Option<&Path>,
    installed: &Installed,
) -> String {
    let kc = kubeconfig.display();
    let k = format!("kubectl --kubeconfig {kc}");
    let state = match data_dir {
        Some(d) => format!(
            "objects are kept in {} across restarts",
            super::absolute(d).display()
        ),
        None => "objects live in memory (use --data-dir to keep them)".to_string(),
    };
    let has = |name: &str| installed.examples.iter().any(|e| e == name);
    let mut look = vec![format!("{k} get wasmcontrollers")];
    if has("static-site") {
        look.push(format!(
            "{k} get staticsites,deployments,services,configmaps"
        ));
    }
    if has("tombstone") {
        look.push(format!("{k} get workspaces,configmaps"));
    }
    look.push(format!("{k} get events"));
    let mut text = format!(
        "\nwasm-reconciler dev: API server {url}, {state}\n\
         kubeconfig written to {kc}\n\nLook around:\n  {}\n\n",
        look.join("\n  ")
    );
    if has("static-site") && installed.samples {
        text.push_str(&format!(
            "Change a parent and watch the children follow:\n  \
             {k} patch staticsite web --type merge -p '{{\"spec\":{{\"replicas\":3}}}}'\n  \
             {k} get deployment web -o jsonpath='{{.spec.replicas}}'\n\n"
        ));
    }
    if installed.examples.is_empty() {
        text.push_str(&format!(
            "Run your own plugin (spec.plugin.path is relative to this directory):\n  \
             {k} apply -f controller.yaml\n  \
             {k} apply -f example.yaml     # once controller.yaml's CRD is served\n  \
             {k} describe wasmcontroller NAME\n\n"
        ));
    }
    text.push_str(
        "Rebuild a plugin (./build.sh in a project of `wasm-reconciler new`, \
         plugins/build.sh in the wasm-reconciler repository) and it is hot-reloaded.\nPress Ctrl-C to stop.\n\n",
    );
    text
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

/// Follows the parents of every WasmController (the examples' and the
/// user's own, applied with kubectl while `dev` runs) until `stop` turns
/// true: one watch per distinct parent resource (named by plural or kind,
/// or a decorator's resource), started when a WasmController naming it
/// first appears and its resource is served.
pub async fn follow_parents(client: Client, mut stop: tokio::sync::watch::Receiver<bool>) {
    let api: Api<wr_engine::WasmController> = Api::all(client.clone());
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut followed: HashSet<(String, String)> = HashSet::new();
    let mut tasks = Vec::new();
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            _ = stop.changed() => break,
        };
        let wc = match ev {
            Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "WasmController watch error; the watcher retries");
                continue;
            }
            None => break,
        };
        let r = wc.spec.parent_ref().clone();
        let name = r
            .resource
            .clone()
            .or_else(|| r.kind.clone())
            .unwrap_or_default();
        if followed.insert((r.api_version.clone(), name)) {
            tasks.push(tokio::spawn(resolve_and_follow(
                client.clone(),
                r,
                stop.clone(),
            )));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Resolves `r` through discovery, retrying (1 s doubling to 10 s) while its
/// CRD is not served yet — a WasmController may be applied before its parent
/// CRD — then follows its objects.
async fn resolve_and_follow(
    client: Client,
    r: wr_engine::crd::ResourceRef,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut wait = Duration::from_secs(1);
    let ar = loop {
        match wr_engine::resolve::resolve(&client, &r).await {
            Ok(resolved) => break resolved.ar,
            Err(e) => {
                tracing::debug!(api_version = %r.api_version, error = %e, "parent resource not served yet; retrying");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        wait = (wait * 2).min(Duration::from_secs(10));
    };
    follow(client, ar, stop).await;
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
        let examples = ["static-site".to_string(), "tombstone".to_string()];
        let installed = Installed {
            examples: &examples,
            samples: true,
        };
        let b = banner(
            "http://127.0.0.1:1",
            Path::new("/tmp/x.kubeconfig"),
            None,
            &installed,
        );
        let kubectl_lines: Vec<&str> = b.lines().filter(|l| l.contains("kubectl")).collect();
        assert!(kubectl_lines.len() >= 4);
        for l in kubectl_lines {
            assert!(l.contains("--kubeconfig /tmp/x.kubeconfig"), "{l}");
        }
        assert!(b.contains("get staticsites,deployments"));
        assert!(b.contains("patch staticsite web"));
    }

    #[test]
    fn banner_without_examples_shows_only_commands_that_work() {
        let installed = Installed {
            examples: &[],
            samples: true,
        };
        let b = banner(
            "http://127.0.0.1:1",
            Path::new("/tmp/x.kubeconfig"),
            None,
            &installed,
        );
        for absent in ["staticsite", "workspaces", "deployment web"] {
            assert!(!b.contains(absent), "{absent} in:\n{b}");
        }
        assert!(b.contains("apply -f controller.yaml\n"), "{b}");
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

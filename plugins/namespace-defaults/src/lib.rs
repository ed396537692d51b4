//! Example decorator plugin (`spec.decorate`, see
//! `examples/namespace-defaults/controller.yaml`): the host hands it each
//! Namespace the decorator selects (labelled `team`) as the parent, and it
//! answers with one ConfigMap `team-defaults` inside that Namespace holding
//! the controller's `config.defaults` plus the Namespace's team. The host owns
//! everything else: the owner reference to the Namespace, deleting the
//! ConfigMap when the label goes, never touching the Namespace itself.

use std::collections::BTreeMap;

use serde::Deserialize;
use wr_plugin_sdk::prelude::*;

/// The label that selects a Namespace and names its team.
pub const TEAM_LABEL: &str = "team";
/// Name of the ConfigMap put into every selected Namespace.
pub const CHILD: &str = "team-defaults";

/// `spec.plugin.config`.
#[derive(Deserialize, Default)]
struct Config {
    #[serde(default)]
    defaults: BTreeMap<String, String>,
}

/// The plugin.
pub struct NamespaceDefaults;

impl Reconciler for NamespaceDefaults {
    const READS_NOW: bool = false;

    fn reconcile(req: &Request) -> Result<Response, Error> {
        let namespace = req.name()?;
        let config: Config = req.config()?;
        let team = req
            .parent
            .pointer("/metadata/labels")
            .and_then(|l| l.get(TEAM_LABEL))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut data = config.defaults;
        data.insert("team".into(), team.to_string());
        let mut child = object("v1", "ConfigMap", Some(namespace), CHILD);
        child["data"] = json!(data);
        Ok(Response::new().child(child))
    }
}

wr_plugin_sdk::export_reconciler!(NamespaceDefaults);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_configmap_in_the_namespace_with_defaults_and_team() {
        let mut req = Request::new(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "labels": {"team": "web"}}}));
        req.config = Some(json!({"defaults": {"logLevel": "info"}}));
        let resp = NamespaceDefaults::reconcile(&req).unwrap();
        assert_eq!(resp.children.len(), 1);
        let cm = &resp.children[0];
        assert_eq!(cm["metadata"]["namespace"], "shop");
        assert_eq!(cm["metadata"]["name"], CHILD);
        assert_eq!(cm["data"], json!({"logLevel": "info", "team": "web"}));
    }
}

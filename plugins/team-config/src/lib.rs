//! Example plugin of world `reconciler-with-customize` (contract 0.2.0):
//! each parent asks, through `customize`, for the ConfigMaps of its own team
//! only, and gets one child ConfigMap merging their data.
//!
//! Parent spec: `{ "team": "web" }`. The WasmController declares a related
//! rule named `team-configs` for ConfigMaps; `customize` narrows it to the
//! ones labelled `team=<spec.team>` (the engine's use of the selectors is
//! later work: until then the host hands over the whole rule, and
//! `reconcile` filters by the label itself, so the answer is the same).

use std::collections::BTreeMap;

use serde::Deserialize;
use wr_plugin_sdk::prelude::*;

/// The key of the related rule this plugin reads.
pub const RULE: &str = "team-configs";
/// The label that names a ConfigMap's team.
pub const TEAM_LABEL: &str = "team";

#[derive(Deserialize)]
struct Spec {
    team: String,
}

/// The plugin.
pub struct TeamConfig;

impl Reconciler for TeamConfig {
    const READS_NOW: bool = false;

    fn reconcile(req: &Request) -> Result<Response, Error> {
        let name = req.name()?;
        let spec: Spec = req.spec()?;
        let mut data = BTreeMap::new();
        let mut sources = Vec::new();
        for cm in req.related(RULE) {
            let labels = cm.pointer("/metadata/labels").and_then(Value::as_object);
            let team = labels
                .and_then(|l| l.get(TEAM_LABEL))
                .and_then(Value::as_str);
            if team != Some(spec.team.as_str()) {
                continue;
            }
            sources.push(cm.name().unwrap_or_default().to_string());
            if let Some(entries) = cm.get("data").and_then(Value::as_object) {
                for (k, v) in entries {
                    data.insert(k.clone(), v.clone());
                }
            }
        }
        sources.sort();
        let child_name = child_name(name, "team");
        let mut child = object("v1", "ConfigMap", req.namespace(), &child_name);
        child["data"] = json!(data);
        Ok(Response::new()
            .child(child)
            .status(json!({ "team": spec.team, "sources": sources })))
    }
}

impl Customize for TeamConfig {
    fn customize(req: &CustomizeRequest) -> Result<Vec<RelatedSelector>, Error> {
        let spec: Spec = req.spec()?;
        Ok(vec![
            RelatedSelector::new(RULE).label(TEAM_LABEL, spec.team),
        ])
    }
}

wr_plugin_sdk::export_reconciler_with_customize!(TeamConfig);

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(team: &str) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Team", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"team": team}})
    }

    fn cm(name: &str, team: &str, key: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"team": team}}, "data": {key: name}})
    }

    #[test]
    fn customize_asks_for_its_team() {
        let req = CustomizeRequest {
            parent: parent("web"),
            config: None,
        };
        let got = TeamConfig::customize(&req).unwrap();
        assert_eq!(got, vec![RelatedSelector::new(RULE).label("team", "web")]);
    }

    #[test]
    fn reconcile_merges_only_its_team() {
        let mut req = Request::new(parent("web"));
        req.related = vec![Related {
            name: RULE.into(),
            objects: vec![cm("a", "web", "x"), cm("b", "db", "y")],
        }];
        let resp = TeamConfig::reconcile(&req).unwrap();
        assert_eq!(resp.children[0]["data"], json!({"x": "a"}));
        assert_eq!(resp.status, Some(json!({"team": "web", "sources": ["a"]})));
    }
}

//! Example plugin of world `reconciler-with-customize` (contract 0.2.0):
//! each parent asks, through `customize`, for the ConfigMaps of its own team
//! only, and gets one child ConfigMap merging their data.
//!
//! Parent spec: `{ "team": "web" }`. The WasmController declares a related
//! rule named `team-configs` for ConfigMaps; `customize` narrows it to the
//! ones labelled `team=<spec.team>`. The host hands each parent only what it
//! asked for, so `reconcile` takes the group as it comes (and reports the
//! names it got in `status.sources`, which is how the end-to-end test sees
//! what each parent received: `tests/tests/engine_related.rs`).

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
    fn reconcile_merges_what_its_rule_hands_it() {
        let mut req = Request::new(parent("web"));
        req.related = vec![
            Related {
                name: RULE.into(),
                objects: vec![cm("b", "web", "y"), cm("a", "web", "x")],
            },
            Related {
                name: "other".into(),
                objects: vec![cm("o", "web", "z")],
            },
        ];
        let resp = TeamConfig::reconcile(&req).unwrap();
        assert_eq!(resp.children[0]["data"], json!({"x": "a", "y": "b"}));
        assert_eq!(
            resp.status,
            Some(json!({"team": "web", "sources": ["a", "b"]}))
        );
    }
}

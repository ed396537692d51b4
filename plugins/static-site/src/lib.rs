//! `static-site`: serves files from a `StaticSite` parent with a Deployment,
//! a Service and a ConfigMap. Behaviour is specified in README.md.

mod spec;

use wr_plugin_sdk::prelude::*;

pub use spec::{Config, SiteSpec};

/// Pod-template annotation carrying the content hash: changing the content
/// changes the template, which rolls the Deployment.
pub const CONTENT_HASH_ANNOTATION: &str = "static-site.examples.wasm-reconciler.dev/content-hash";
/// Where nginx serves files from.
const HTML_DIR: &str = "/usr/share/nginx/html";

/// The plugin.
pub struct StaticSite;

impl Reconciler for StaticSite {
    // The site is a function of the spec and config alone: the host may skip
    // a call whose inputs did not change.
    const READS_NOW: bool = false;

    fn reconcile(req: &Request) -> Result<Response, Error> {
        let name = req.name()?;
        let namespace = req.namespace();
        let site = SiteSpec::parse(&req.parent)?;
        let config: Config = req.config()?;
        let hash = site.content_hash();

        let labels = json!({
            "app.kubernetes.io/name": "static-site",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/managed-by": "wasm-reconciler",
        });
        let selector = json!({
            "app.kubernetes.io/name": "static-site",
            "app.kubernetes.io/instance": name,
        });
        let content_name = child_name(name, "content");
        let app_name = child_name(name, "");

        let mut config_map = object("v1", "ConfigMap", namespace, &content_name);
        config_map["metadata"]["labels"] = labels.clone();
        annotate(&mut config_map, CONTENT_HASH_ANNOTATION, &hash);
        config_map["data"] = json!(site.content);

        let mut deployment = object("apps/v1", "Deployment", namespace, &app_name);
        deployment["metadata"]["labels"] = labels.clone();
        deployment["spec"] = json!({
            "replicas": site.replicas,
            "selector": { "matchLabels": selector },
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": { CONTENT_HASH_ANNOTATION: hash },
                },
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": site.image,
                        "ports": [{ "name": "http", "containerPort": site.port }],
                        "volumeMounts": [{ "name": "content", "mountPath": HTML_DIR, "readOnly": true }],
                    }],
                    "volumes": [{ "name": "content", "configMap": { "name": content_name } }],
                },
            },
        });

        let mut service = object("v1", "Service", namespace, &app_name);
        service["metadata"]["labels"] = labels;
        service["spec"] = json!({
            "selector": selector,
            "ports": [{ "name": "http", "port": site.port, "targetPort": "http" }],
        });

        let available = observed_available(req, &app_name);
        let mut response = Response::new()
            .child(config_map)
            .child(deployment)
            .child(service)
            .condition(availability(available, site.replicas))
            .status(json!({
                "url": site_url(name, namespace, &config.cluster_domain, site.port),
                "contentHash": hash,
                "replicas": site.replicas,
                "availableReplicas": available.unwrap_or(0),
            }));
        if let Some(previous) = req
            .child("ConfigMap", &content_name)
            .and_then(|cm| cm.annotation(CONTENT_HASH_ANNOTATION))
            && previous != hash
        {
            response = response.event(Event::normal(
                "ContentChanged",
                format!("content changed, rolling Deployment {app_name}"),
            ));
        }
        Ok(response)
    }
}

/// `status.availableReplicas` of the observed Deployment; None when the
/// Deployment has not been observed yet.
fn observed_available(req: &Request, deployment_name: &str) -> Option<i64> {
    let deployment = req.child("Deployment", deployment_name)?;
    Some(
        deployment
            .get("status")
            .and_then(|status| status.get("availableReplicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0),
    )
}

fn availability(available: Option<i64>, replicas: i64) -> Condition {
    match available {
        None => Condition::unknown(
            "Available",
            "DeploymentPending",
            "the Deployment has not been observed yet",
        ),
        Some(_) if replicas == 0 => {
            Condition::is_true("Available", "ScaledToZero", "0 replicas requested")
        }
        Some(n) if n >= replicas => Condition::is_true(
            "Available",
            "ReplicasAvailable",
            format!("{n}/{replicas} replicas available"),
        ),
        Some(n) => Condition::is_false(
            "Available",
            "ReplicasUnavailable",
            format!("{n}/{replicas} replicas available"),
        ),
    }
}

fn site_url(name: &str, namespace: Option<&str>, domain: &str, port: i64) -> String {
    let host = match namespace {
        Some(ns) => format!("{name}.{ns}.svc.{domain}"),
        None => format!("{name}.svc.{domain}"),
    };
    if port == 80 {
        format!("http://{host}/")
    } else {
        format!("http://{host}:{port}/")
    }
}

wr_plugin_sdk::export_reconciler!(StaticSite);

#[cfg(test)]
mod tests;

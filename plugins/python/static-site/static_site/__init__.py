"""static-site: serves files from a ``StaticSite`` parent with a ConfigMap, a
Deployment and a Service. A port of plugins/static-site (Rust) with the same
output for the same request; see that plugin's README for the behaviour."""

from __future__ import annotations

from typing import Optional

from wr_plugin import Condition, Event, Request, Response, annotate, annotation_of, as_i64, child_name, get, new_object

from .spec import parse_config, parse_spec

#: Pod-template annotation carrying the content hash (a change rolls the Deployment).
CONTENT_HASH_ANNOTATION = "static-site.examples.wasm-reconciler.dev/content-hash"
_HTML_DIR = "/usr/share/nginx/html"


def reconcile(req: Request) -> Response:
    """Request -> Response (raises PluginError)."""
    name = req.name()
    namespace = req.namespace()
    site = parse_spec(req.parent)
    cluster_domain = parse_config(req.config)
    digest = site.content_hash()

    def labels() -> dict:
        return {
            "app.kubernetes.io/name": "static-site",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/managed-by": "wasm-reconciler",
        }

    def selector() -> dict:
        return {"app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": name}

    content_name = child_name(name, "content")
    app_name = child_name(name, "")

    config_map = new_object("v1", "ConfigMap", namespace, content_name)
    config_map["metadata"]["labels"] = labels()
    annotate(config_map, CONTENT_HASH_ANNOTATION, digest)
    config_map["data"] = dict(site.content)

    deployment = new_object("apps/v1", "Deployment", namespace, app_name)
    deployment["metadata"]["labels"] = labels()
    deployment["spec"] = {
        "replicas": site.replicas,
        "selector": {"matchLabels": selector()},
        "template": {
            "metadata": {"labels": labels(), "annotations": {CONTENT_HASH_ANNOTATION: digest}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": site.image,
                        "ports": [{"name": "http", "containerPort": site.port}],
                        "volumeMounts": [{"name": "content", "mountPath": _HTML_DIR, "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "content", "configMap": {"name": content_name}}],
            },
        },
    }

    service = new_object("v1", "Service", namespace, app_name)
    service["metadata"]["labels"] = labels()
    service["spec"] = {"selector": selector(), "ports": [{"name": "http", "port": site.port, "targetPort": "http"}]}

    available = _observed_available(req, app_name)
    response = (
        Response()
        .child(config_map)
        .child(deployment)
        .child(service)
        .condition(_availability(available, site.replicas))
        .set_status(
            {
                "url": _site_url(name, namespace, cluster_domain, site.port),
                "contentHash": digest,
                "replicas": site.replicas,
                "availableReplicas": 0 if available is None else available,
            }
        )
    )
    previous = annotation_of(req.child("ConfigMap", content_name), CONTENT_HASH_ANNOTATION)
    if previous is not None and previous != digest:
        response.event(Event.normal("ContentChanged", f"content changed, rolling Deployment {app_name}"))
    return response


def _observed_available(req: Request, deployment_name: str) -> Optional[int]:
    # status.availableReplicas of the observed Deployment (0 when absent);
    # None when the Deployment has not been observed yet.
    deployment = req.child("Deployment", deployment_name)
    if deployment is None:
        return None
    n = as_i64(get(get(deployment, "status"), "availableReplicas"))
    return 0 if n is None else n


def _availability(available: Optional[int], replicas: int) -> Condition:
    if available is None:
        return Condition.unknown("Available", "DeploymentPending", "the Deployment has not been observed yet")
    if replicas == 0:
        return Condition.true("Available", "ScaledToZero", "0 replicas requested")
    message = f"{available}/{replicas} replicas available"
    if available >= replicas:
        return Condition.true("Available", "ReplicasAvailable", message)
    return Condition.false("Available", "ReplicasUnavailable", message)


def _site_url(name: str, namespace: Optional[str], domain: str, port: int) -> str:
    host = f"{name}.{namespace}.svc.{domain}" if namespace is not None else f"{name}.svc.{domain}"
    return f"http://{host}/" if port == 80 else f"http://{host}:{port}/"

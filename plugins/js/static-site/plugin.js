// static-site: serves files from a `StaticSite` parent with a ConfigMap, a
// Deployment and a Service. A port of plugins/static-site (Rust) with the
// same output for the same request; see its README for the behaviour.

import { Condition, Event, Response, annotate, annotationOf, childName, get, object } from "../sdk/index.js";
import { asI64 } from "../sdk/index.js";
import { parseConfig, parseSpec, siteContentHash } from "./spec.js";

/** Pod-template annotation carrying the content hash (a change rolls the Deployment). */
export const CONTENT_HASH_ANNOTATION = "static-site.examples.wasm-reconciler.dev/content-hash";
const HTML_DIR = "/usr/share/nginx/html";

/** The reconcile function: Request -> Response (throws PluginError). */
export function staticSite(req) {
  const name = req.name();
  const namespace = req.namespace();
  const site = parseSpec(req.parent);
  const config = parseConfig(req.config);
  const hash = siteContentHash(site.content);

  const labels = () => ({
    "app.kubernetes.io/name": "static-site",
    "app.kubernetes.io/instance": name,
    "app.kubernetes.io/managed-by": "wasm-reconciler",
  });
  const selector = () => ({ "app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": name });
  const contentName = childName(name, "content");
  const appName = childName(name, "");

  const configMap = object("v1", "ConfigMap", namespace, contentName);
  configMap.metadata.labels = labels();
  annotate(configMap, CONTENT_HASH_ANNOTATION, hash);
  configMap.data = Object.fromEntries(site.content);

  const deployment = object("apps/v1", "Deployment", namespace, appName);
  deployment.metadata.labels = labels();
  deployment.spec = {
    replicas: site.replicas,
    selector: { matchLabels: selector() },
    template: {
      metadata: { labels: labels(), annotations: { [CONTENT_HASH_ANNOTATION]: hash } },
      spec: {
        containers: [
          {
            name: "web",
            image: site.image,
            ports: [{ name: "http", containerPort: site.port }],
            volumeMounts: [{ name: "content", mountPath: HTML_DIR, readOnly: true }],
          },
        ],
        volumes: [{ name: "content", configMap: { name: contentName } }],
      },
    },
  };

  const service = object("v1", "Service", namespace, appName);
  service.metadata.labels = labels();
  service.spec = { selector: selector(), ports: [{ name: "http", port: site.port, targetPort: "http" }] };

  const available = observedAvailable(req, appName);
  const response = new Response()
    .child(configMap)
    .child(deployment)
    .child(service)
    .condition(availability(available, site.replicas))
    .setStatus({
      url: siteUrl(name, namespace, config.clusterDomain, site.port),
      contentHash: hash,
      replicas: site.replicas,
      availableReplicas: available ?? 0,
    });
  const previous = annotationOf(req.child("ConfigMap", contentName), CONTENT_HASH_ANNOTATION);
  if (previous !== undefined && previous !== hash) {
    response.event(Event.normal("ContentChanged", `content changed, rolling Deployment ${appName}`));
  }
  return response;
}

// `status.availableReplicas` of the observed Deployment (0 when absent);
// undefined when the Deployment has not been observed yet.
function observedAvailable(req, deploymentName) {
  const deployment = req.child("Deployment", deploymentName);
  if (deployment === undefined) return undefined;
  return asI64(get(get(deployment, "status"), "availableReplicas")) ?? 0;
}

function availability(available, replicas) {
  if (available === undefined) {
    return Condition.unknown("Available", "DeploymentPending", "the Deployment has not been observed yet");
  }
  if (replicas === 0) return Condition.true("Available", "ScaledToZero", "0 replicas requested");
  const message = `${available}/${replicas} replicas available`;
  return available >= replicas
    ? Condition.true("Available", "ReplicasAvailable", message)
    : Condition.false("Available", "ReplicasUnavailable", message);
}

function siteUrl(name, namespace, domain, port) {
  const host = namespace !== undefined ? `${name}.${namespace}.svc.${domain}` : `${name}.svc.${domain}`;
  return port === 80 ? `http://${host}/` : `http://${host}:${port}/`;
}

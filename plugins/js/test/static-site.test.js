// Unit tests of the static-site port, the same cases as
// plugins/static-site/src/tests.rs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Request, PluginError } from "../sdk/index.js";
import { staticSite, CONTENT_HASH_ANNOTATION } from "../static-site/plugin.js";
import { parseSpec, siteContentHash } from "../static-site/spec.js";

const parent = (spec) => ({
  apiVersion: "examples.wasm-reconciler.dev/v1alpha1",
  kind: "StaticSite",
  metadata: { name: "web", namespace: "demo", generation: 1 },
  spec,
});
const run = (req) => staticSite(req);
const failure = (req) => {
  try {
    run(req);
  } catch (e) {
    assert.ok(e instanceof PluginError, String(e));
    return e;
  }
  assert.fail("expected an error");
};

test("yields a ConfigMap, a Deployment and a Service", () => {
  const resp = run(new Request({ parent: parent({ image: "nginx:1.27", content: { "index.html": "hi" } }) }));
  assert.deepEqual(
    resp.children.map((c) => [c.kind, c.metadata.name]),
    [["ConfigMap", "web-content"], ["Deployment", "web"], ["Service", "web"]],
  );
  const deployment = resp.children[1];
  assert.equal(deployment.spec.replicas, 1);
  assert.equal(deployment.spec.template.spec.containers[0].ports[0].containerPort, 80);
  assert.deepEqual(resp.children[0].data, { "index.html": "hi" });
  assert.equal(resp.children[0].metadata.namespace, "demo");
  assert.equal(resp.status.url, "http://web.demo.svc.cluster.local/");
  assert.equal(resp.conditions[0].status, "unknown");
});

test("a content change changes the pod template and emits an event", () => {
  const a = run(new Request({ parent: parent({ image: "x", content: { "a.html": "1" } }) }));
  const req = new Request({ parent: parent({ image: "x", content: { "a.html": "2" } }), children: [a.children[0]] });
  const b = run(req);
  const hash = (r) => r.children[1].spec.template.metadata.annotations[CONTENT_HASH_ANNOTATION];
  assert.notEqual(hash(a), hash(b));
  assert.equal(b.events.length, 1);
  assert.equal(b.events[0].reason, "ContentChanged");
  req.children = [b.children[0]];
  assert.equal(run(req).events.length, 0);
});

test("availability follows the observed Deployment", () => {
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, status: { availableReplicas: 1 } };
  const req = new Request({ parent: parent({ image: "x", replicas: 2 }), children: [deployment] });
  let resp = run(req);
  assert.equal(resp.conditions[0].status, "false");
  assert.equal(resp.conditions[0].message, "1/2 replicas available");
  deployment.status.availableReplicas = 2;
  resp = run(req);
  assert.equal(resp.conditions[0].status, "true");
  assert.equal(resp.status.availableReplicas, 2);
  assert.equal(run(new Request({ parent: parent({ image: "x", replicas: 0 }), children: [deployment] })).conditions[0].reason, "ScaledToZero");
});

test("invalid specs are permanent errors naming the field", () => {
  const cases = [
    [{}, "spec.image"],
    [{ image: "  " }, "spec.image"],
    [{ image: 3 }, "spec.image"],
    [{ image: "x", replicas: -1 }, "spec.replicas"],
    [{ image: "x", replicas: "two" }, "spec.replicas"],
    [{ image: "x", replicas: 1.5 }, "spec.replicas"],
    [{ image: "x", port: 0 }, "spec.port"],
    [{ image: "x", content: { "a/b": "" } }, 'spec.content["a/b"]'],
    [{ image: "x", content: { "a.html": 1 } }, 'spec.content["a.html"]'],
    [{ image: "x", content: [] }, "spec.content"],
  ];
  for (const [spec, field] of cases) {
    const err = failure(new Request({ parent: parent(spec) }));
    assert.ok(err.isPermanent, JSON.stringify(spec));
    assert.equal(err.reason, "InvalidSpec");
    assert.ok(err.detail.startsWith(field), `${JSON.stringify(spec)}: ${err.detail}`);
  }
  assert.equal(failure(new Request({ parent: parent({ image: "x", replicas: -1 }) })).detail, "spec.replicas: must be >= 0, got -1");
});

test("content over the ConfigMap limit is rejected, counted in UTF-8 bytes", () => {
  // 349,526 three-byte characters (1,048,578 bytes) plus the 6-byte name: over 1 MiB - 4096.
  const err = failure(new Request({ parent: parent({ image: "x", content: { "a.html": "€".repeat(349526) } }) }));
  assert.equal(err.detail, "spec.content: 1048584 bytes is over the limit of 1044480");
});

test("the config sets the cluster domain and rejects unknown fields", () => {
  const req = new Request({ parent: parent({ image: "x", port: 8080 }), config: { clusterDomain: "example.internal" } });
  assert.equal(run(req).status.url, "http://web.demo.svc.example.internal:8080/");
  req.config = { nope: 1 };
  const err = failure(req);
  assert.equal(err.reason, "InvalidConfig");
  assert.equal(err.detail, "config: unknown field `nope`, expected `clusterDomain`");
  req.config = { clusterDomain: 5 };
  assert.equal(failure(req).detail, "config: invalid type: integer `5`, expected a string");
});

test("the content hash matches the documented formula", () => {
  const spec = parseSpec(parent({ image: "x", content: { "index.html": "hi" } }));
  // printf 'index.html\0hi\0' | sha256sum
  assert.equal(siteContentHash(spec.content), "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939");
});

test("a parent without a name is a permanent error", () => {
  const err = failure(new Request({ parent: { spec: { image: "x" } } }));
  assert.equal(err.reason, "InvalidParent");
});

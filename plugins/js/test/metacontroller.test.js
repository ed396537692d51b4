// The Metacontroller hook wrapper maps every field both ways: the host's
// request to the sync-hook request (controller, parent, children and related
// keyed by Kind.apiVersion then name / namespace/name, finalizing) and the
// hook's response to the host's (children, status, status.conditions,
// resyncAfterSeconds -> requeue, finalized); plus the noticeboard example
// hook run through it. Expected values are written by hand.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Request, PluginError, metacontrollerHook, toHookRequest, fromHookResponse, objectKey } from "../sdk/index.js";
import { sync, finalize } from "../noticeboard/hook.js";

const cm = (ns, name, data = {}) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: ns ? { name, namespace: ns } : { name }, data });
const deploy = (ns, name) => ({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name, namespace: ns } });
const controller = { apiVersion: "metacontroller.k8s.io/v1alpha1", kind: "CompositeController", metadata: { name: "boards" } };
const parent = (ns) => ({ apiVersion: "example.com/v1", kind: "Notice", metadata: ns ? { name: "hello", namespace: ns } : { name: "hello" }, spec: {} });
const config = (version, childTypes = ["ConfigMap.v1", "Deployment.apps/v1", "Secret.v1"]) => ({ metacontroller: { hookVersion: version, childTypes, controller } });

test("request: children and related grouped by Kind.apiVersion, keyed by name (v1)", () => {
  const req = new Request({
    parent: parent("ns1"),
    children: [cm("ns1", "a"), deploy("ns1", "web")],
    related: [cm("ns1", "defaults"), cm("other", "shared")],
    finalizing: true,
    config: config("v1"),
  });
  const h = toHookRequest(req);
  assert.deepEqual(h.controller, controller);
  assert.equal(h.parent, req.parent);
  assert.equal(h.finalizing, true);
  assert.deepEqual(Object.keys(h.children).sort(), ["ConfigMap.v1", "Deployment.apps/v1", "Secret.v1"]);
  assert.equal(h.children["ConfigMap.v1"].a, req.children[0]);
  assert.equal(h.children["Deployment.apps/v1"].web, req.children[1]);
  assert.deepEqual(h.children["Secret.v1"], {}, "a declared type with no child has an empty entry");
  assert.deepEqual(Object.keys(h.related), ["ConfigMap.v1"]);
  assert.equal(h.related["ConfigMap.v1"].defaults, req.related[0]);
  assert.equal(h.related["ConfigMap.v1"]["other/shared"], req.related[1], "another namespace is namespace/name");
});

test("request: v2 keys namespaced objects by namespace/name; v1 under a cluster-scoped parent too", () => {
  const v2 = toHookRequest(new Request({ parent: parent("ns1"), children: [cm("ns1", "a")], config: config("v2") }));
  assert.deepEqual(Object.keys(v2.children["ConfigMap.v1"]), ["ns1/a"]);
  const cluster = toHookRequest(new Request({ parent: parent(undefined), children: [cm("ns2", "a"), cm(undefined, "x")], config: config("v1") }));
  assert.deepEqual(Object.keys(cluster.children["ConfigMap.v1"]).sort(), ["ns2/a", "x"]);
  assert.equal(objectKey(cm("ns1", "a"), "v2", "ns1"), "ns1/a");
  assert.equal(objectKey(cm(undefined, "n"), "v2", "ns1"), "n");
});

test("request: defaults without config, bad config is a permanent error", () => {
  const h = toHookRequest(new Request({ parent: parent("ns"), children: [cm("ns", "a")] }));
  assert.deepEqual(h.controller, {});
  assert.deepEqual(Object.keys(h.children), ["ConfigMap.v1"]);
  assert.equal(h.finalizing, false);
  assert.throws(
    () => toHookRequest(new Request({ parent: parent("ns"), config: { metacontroller: { hookVersion: "v3" } } })),
    (e) => e instanceof PluginError && e.reason === "InvalidConfig" && e.detail.includes("hookVersion"),
  );
});

test("response: children, status, conditions, resync and finalized map to the host's", () => {
  const child = cm(undefined, "c");
  const r = fromHookResponse({
    children: [child],
    status: { phase: "Up", conditions: [{ type: "Posted", status: "False", reason: "Pending", message: "1/2", lastTransitionTime: "x" }, { type: "Seen", status: "Unknown" }] },
    resyncAfterSeconds: 1.2,
    finalized: true,
  }).toWit();
  assert.deepEqual(r.children, [JSON.stringify(child)]);
  assert.equal(r.status, '{"phase":"Up"}');
  assert.deepEqual(r.conditions, [
    { type: "Posted", status: "false", reason: "Pending", message: "1/2" },
    { type: "Seen", status: "unknown", reason: "Unspecified", message: "" },
  ]);
  assert.equal(r.requeueAfterSeconds, 2, "fractions round up");
  assert.equal(r.finalized, true);

  const empty = fromHookResponse({}).toWit();
  assert.deepEqual(empty.children, []);
  assert.equal(empty.status, null);
  assert.equal(empty.requeueAfterSeconds, null);
  assert.equal(empty.finalized, false);
  assert.equal(fromHookResponse({ resyncAfterSeconds: 0 }).toWit().requeueAfterSeconds, null);
  assert.equal(fromHookResponse({ resyncAfterSeconds: 30 }).toWit().requeueAfterSeconds, 30);
});

test("response: malformed answers are permanent errors naming the field", () => {
  const reason = (resp) => {
    try {
      fromHookResponse(resp);
    } catch (e) {
      assert.ok(e instanceof PluginError && e.isPermanent);
      return e.detail;
    }
    assert.fail("no error");
  };
  assert.match(reason(undefined), /must return an object/);
  assert.match(reason({ children: {} }), /^children:/);
  assert.match(reason({ status: [] }), /^status:/);
  assert.match(reason({ status: { conditions: [{ type: "Ready", status: "True" }] } }), /status.conditions\[0\]: type Ready is owned by the host/);
  assert.match(reason({ status: { conditions: [{ type: "X", status: "yes" }] } }), /status.conditions\[0\].status/);
  assert.match(reason({ resyncAfterSeconds: "5" }), /^resyncAfterSeconds:/);
  assert.match(reason({ finalized: "true" }), /^finalized:/);
});

test("finalize hook is called instead of sync when the parent is being deleted", () => {
  const calls = [];
  const reconcile = metacontrollerHook(
    (r) => (calls.push(["sync", r.finalizing]), {}),
    { finalize: (r) => (calls.push(["finalize", r.finalizing]), { finalized: true }) },
  );
  assert.equal(reconcile(new Request({ parent: parent("n") })).finalized, false);
  assert.equal(reconcile(new Request({ parent: parent("n"), finalizing: true })).finalized, true);
  assert.deepEqual(calls, [["sync", false], ["finalize", true]]);
  const shared = metacontrollerHook((r) => ({ finalized: r.finalizing }));
  assert.equal(shared(new Request({ parent: parent("n"), finalizing: true })).finalized, true);
});

test("noticeboard through the wrapper: posts copies, reports, tears down in order", () => {
  const reconcile = metacontrollerHook(sync, { finalize });
  const notice = { ...parent("ns"), spec: { copies: 2 } };
  const cfg = { metacontroller: { hookVersion: "v1", childTypes: ["ConfigMap.v1"], controller: { metadata: { name: "boards" }, spec: {} } } };
  const first = reconcile(new Request({ parent: notice, related: [cm("ns", "noticeboard-defaults", { message: "hi" })], config: cfg })).toWit();
  assert.deepEqual(first.children.map((c) => JSON.parse(c).metadata.name), ["hello-0", "hello-1"]);
  assert.equal(JSON.parse(first.children[1]).data.message, "hi");
  assert.equal(JSON.parse(first.children[0]).metadata.labels["noticeboard.example.com/controller"], "boards");
  assert.equal(first.status, '{"observedCopies":0,"upToDate":0}');
  assert.deepEqual(first.conditions, [{ type: "Posted", status: "false", reason: "CopiesPending", message: "0/2 copies posted" }]);
  assert.equal(first.requeueAfterSeconds, 2);

  const posted = [cm("ns", "hello-0", { message: "hi", index: "0" }), cm("ns", "hello-1", { message: "hi", index: "1" })];
  const done = reconcile(new Request({ parent: { ...notice, spec: { copies: 2, message: "hi" } }, children: posted, config: cfg })).toWit();
  assert.equal(done.status, '{"observedCopies":2,"upToDate":2}');
  assert.equal(done.conditions[0].status, "true");
  assert.equal(done.requeueAfterSeconds, null);

  const tearing = reconcile(new Request({ parent: notice, children: posted, finalizing: true, config: cfg })).toWit();
  assert.deepEqual(tearing.children.map((c) => JSON.parse(c).metadata.name), ["hello-0"]);
  assert.equal(tearing.finalized, false);
  const gone = reconcile(new Request({ parent: notice, finalizing: true, config: cfg })).toWit();
  assert.deepEqual(gone.children, []);
  assert.equal(gone.finalized, true);
  assert.equal(gone.status, '{"observedCopies":0,"tearingDown":true}');
});

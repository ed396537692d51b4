import { test } from "node:test";
import assert from "node:assert/strict";
import { PluginError, Request } from "../sdk/index.js";
import { reconcile } from "./plugin.js";

const parent = (spec) => ({
  apiVersion: "{{group}}/v1alpha1",
  kind: "{{kind}}",
  metadata: { name: "a", namespace: "ns" },
  spec,
});

test("one ConfigMap with the message", () => {
  const resp = reconcile(new Request({ parent: parent({ message: "hi" }) }));
  assert.equal(resp.children.length, 1);
  assert.equal(resp.children[0].metadata.name, "a-greeting");
  assert.equal(resp.children[0].data.message, "hi");
});

test("a message that is not a string is invalid", () => {
  assert.throws(() => reconcile(new Request({ parent: parent({ message: 1 }) })), (e) => e instanceof PluginError && e.reason === "InvalidSpec");
});

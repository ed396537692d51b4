// Unit tests of the JavaScript SDK (node --test). Expected values come from
// independent sources: sha256sum, and the Rust SDK's documented names.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Request,
  Response,
  Condition,
  PluginError,
  childName,
  contentHash,
  debugQuote,
  exportReconciler,
  isBlank,
  isDns1123Label,
  object,
  label,
  annotate,
  find,
  utf8Length,
  invalidSpec,
} from "../sdk/index.js";

test("sha256 matches known vectors", () => {
  // FIPS 180-4 examples.
  assert.equal(contentHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(contentHash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(
    contentHash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
  );
  // `printf 'index.html\0hi\0' | sha256sum`
  assert.equal(
    contentHash([..."index.html"].map((c) => c.charCodeAt(0)).concat([0, 104, 105, 0])),
    "91060b282a73cb28480f87cd3654ce9941bfee159fc0068c853984453bfc1939",
  );
  // Multi-block and non-ASCII input (`printf 'é%.0s' {1..100} | sha256sum`).
  assert.equal(utf8Length("é".repeat(100)), 200);
  assert.equal(contentHash("é".repeat(100)), "f42ec48e1e4b487e590e0b3d4e58437c8327efa855d769709f4942a4f73a7eb6");
});

test("child names are joined, sanitised and hashed like the Rust SDK", () => {
  assert.equal(childName("web", "config"), "web-config");
  assert.equal(childName("web", ""), "web");
  const long = childName("a".repeat(70), "svc");
  assert.equal(long.length, 63);
  assert.ok(long.startsWith("a".repeat(52) + "-"));
  assert.ok(isDns1123Label(long));
  assert.notEqual(long, childName("a".repeat(70), "cfg"));
  const odd = childName("My.Site", "web");
  assert.ok(odd.startsWith("my-site-web-"), odd);
  assert.equal(odd.length, "my-site-web-".length + 10);
  assert.equal(childName("my-site", "web"), "my-site-web");
  // Only a hash is left when nothing valid remains.
  assert.match(childName("---", ""), /^[0-9a-f]{10}$/);
});

test("label validation", () => {
  assert.ok(isDns1123Label("a-1"));
  assert.ok(!isDns1123Label("-a"));
  assert.ok(!isDns1123Label("A"));
  assert.ok(!isDns1123Label("a".repeat(64)));
});

test("objects are built and found", () => {
  const cm = object("v1", "ConfigMap", "ns", "c");
  label(cm, "app", "web");
  annotate(cm, "a", "b");
  assert.deepEqual(cm, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "c", namespace: "ns", labels: { app: "web" }, annotations: { a: "b" } },
  });
  assert.equal(object("v1", "Service", undefined, "c").metadata.namespace, undefined);
  assert.equal(find([cm], "ConfigMap", "c"), cm);
  assert.equal(find([cm], "Secret", "c"), undefined);
});

test("rust-compatible helpers", () => {
  assert.ok(isBlank(" \t\n\u3000"));
  assert.ok(!isBlank("\ufeff"), "U+FEFF is not whitespace in Rust");
  assert.equal(debugQuote('a/b"\n\u001b'), '"a/b\\"\\n\\u{1b}"');
});

test("exportReconciler maps responses, plugin errors and bugs", () => {
  const logs = [];
  const wit = (parent, finalizing = false) => ({ parent, children: ["{}"], related: [], finalizing, config: null, now: "x" });
  const reconcile = exportReconciler((req) => {
    if (req.finalizing) throw new PluginError("transient", "Later", "not yet");
    if (req.parent.boom) throw new TypeError("bug");
    return new Response()
      .child({ kind: "ConfigMap", b: 1 })
      .condition(Condition.false("Available", "Nope", "m"))
      .setStatus({ seen: req.children.length });
  }, (level, message) => logs.push([level, message]));

  const out = reconcile(wit("{}"));
  assert.deepEqual(out.children, ['{"kind":"ConfigMap","b":1}']);
  assert.equal(out.status, '{"seen":1}');
  assert.equal(out.requeueAfterSeconds, null);
  assert.deepEqual(out.conditions, [{ type: "Available", status: "false", reason: "Nope", message: "m" }]);
  assert.throws(() => reconcile(wit("{}", true)), (e) => e.tag === "transient" && e.val.reason === "Later");
  assert.throws(() => reconcile(wit("{nope")), (e) => e.tag === "permanent" && e.val.reason === "InvalidRequest");
  assert.throws(() => reconcile(wit('{"boom":1}')), TypeError);
  assert.equal(logs.length, 1);
  assert.equal(logs[0][0], "error");
});

test("request accessors", () => {
  const req = new Request({ parent: { metadata: { namespace: "n" } } });
  assert.throws(() => req.name(), (e) => e instanceof PluginError && e.reason === "InvalidParent");
  assert.equal(req.namespace(), "n");
  const err = invalidSpec("spec.x", "bad");
  assert.equal(err.detail, "spec.x: bad");
  assert.ok(err.isPermanent);
});

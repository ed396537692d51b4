#!/usr/bin/env python3
"""Runs the validation fidelity cases (cases.json) against an API server and
prints each case's answer as JSON: the status code, the Status reason, message
and causes of an error, the compared fields of a success, and Warning headers.

  run_cases.py URL [TOKEN] > answers.json

Used to record the real kube-apiserver's answers (real-answers.json), which
host/apiserver/tests/validation.rs compares the embedded server with.
"""
import json, os, ssl, sys, urllib.request, urllib.error

HERE = os.path.dirname(os.path.abspath(__file__))


def request(base, token, step):
    if step["method"] == "SLEEP":
        # A new CRD is served after a moment on a real cluster.
        import time
        time.sleep(step["seconds"])
        return 200, [], b"{}"
    body = step.get("body")
    ct = step.get("ct", "application/json")
    data = None
    if body is not None:
        if isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(expand(body)).encode()
    req = urllib.request.Request(base + step["path"], data=data, method=step["method"])
    req.add_header("Content-Type", ct)
    req.add_header("Accept", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    ctx = ssl._create_unverified_context()
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, r.headers.get_all("Warning") or [], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_all("Warning") or [], e.read()


def expand(v):
    """{"$repeat": [s, n]} becomes s*n (big payloads stay small in the file)."""
    if isinstance(v, dict):
        if set(v) == {"$repeat"}:
            s, n = v["$repeat"]
            return s * n
        return {k: expand(x) for k, x in v.items()}
    if isinstance(v, list):
        return [expand(x) for x in v]
    return v


def pointer(obj, p):
    cur = obj
    for part in p.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                return "<absent>"
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return "<absent>"
    return cur


def answer(code, warnings, raw, compare):
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    out = {"code": code}
    if warnings:
        out["warnings"] = [w.split(" - ", 1)[-1] for w in warnings]
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("status") == "Failure":
        out["reason"] = body.get("reason")
        out["message"] = body.get("message")
        causes = (body.get("details") or {}).get("causes") or []
        out["causes"] = sorted(
            "%s|%s|%s" % (c.get("reason", ""), c.get("field", ""), c.get("message", "")) for c in causes
        )
    else:
        for p in compare:
            if p.startswith("?"):
                out[p] = "<present>" if pointer(body, p[1:]) != "<absent>" else "<absent>"
            else:
                out[p] = pointer(body, p)
    return out


def main():
    base = sys.argv[1].rstrip("/")
    token = sys.argv[2] if len(sys.argv) > 2 else ""
    with open(os.path.join(HERE, "cases.json")) as f:
        cases = json.load(f)
    for s in cases["setup"]:
        request(base, token, s)
    answers = {}
    for c in cases["cases"]:
        last = None
        for step in c["steps"]:
            last = request(base, token, step)
        answers[c["name"]] = answer(*last, c.get("compare", []))
    for s in cases["teardown"]:
        request(base, token, s)
    json.dump(answers, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()

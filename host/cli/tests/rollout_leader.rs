//! Acceptance (issue 17, canary): "kill the leader mid-rollout and the new
//! leader continues at the same step". Two `wasm-reconciler run
//! --leader-elect` processes over one Lease, a canary rollout of the
//! static-site component in three steps; once the rollout is at step 2 the
//! leader gets SIGKILL (nothing is released, nothing flushed), and the
//! standby, once the Lease expires, must go on from step 2 — same step,
//! same step start, same parents on the candidate — and finish the rollout.
//!
//! The two versions are the same component with a different digest (a
//! custom section appended) and a different `config`: the active one
//! renders `status.url` under `stable.local`, the candidate under
//! `canary.local`, so every parent's status says which version reconciled it.
//!
//! The referee of "the new leader continued" is a `kubectl get --watch` on
//! the WasmController: every status version the store committed, in order.
//! After the kill only the new leader writes, so every version after the
//! last one the old leader wrote is the new leader's. Runs on the embedded
//! API server and, with `WR_TEST_CLUSTER=real`, on a real kube-apiserver.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::request_log::*;
use crate::run_common::*;
use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const CONTROLLER: &str = "site-canary";

/// Step 2's pause: the kill, the Lease expiry and the new leader's start
/// must fit in it for the step to be observed continuing rather than ending.
const STEP2_PAUSE: i64 = 60;

/// A short Lease so the standby takes over a few seconds after the kill.
const LEASE: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=6",
    "--renew-deadline-seconds=4",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=5",
];

/// Parents and the step (1-based, as `status.rollout.step`) that moves each
/// to the candidate (None: only the promotion does).
const PARENTS: &[(&str, Option<u32>)] = &[
    ("s1", Some(1)),
    ("s2", Some(1)),
    ("s3", Some(2)),
    ("s4", Some(2)),
    ("s5", None),
    ("s6", None),
];

/// `status.rollout` of one version of the WasmController.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    resource_version: String,
    phase: String,
    step: u64,
    started: String,
}

fn seen(wc: &Value) -> Option<Seen> {
    let r = wc.pointer("/status/rollout")?;
    Some(Seen {
        resource_version: wc
            .pointer("/metadata/resourceVersion")?
            .as_str()?
            .to_string(),
        phase: r.get("phase")?.as_str()?.to_string(),
        step: r.get("step")?.as_u64()?,
        started: r
            .get("stepStartedAt")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

fn get_wc(kc: &Path) -> Option<Value> {
    let out = kubectl(kc, &["get", "wasmcontroller", CONTROLLER, "-o", "json"]).ok()?;
    serde_json::from_str(&out).ok()
}

fn rollout(kc: &Path) -> Option<Seen> {
    seen(&get_wc(kc)?)
}

/// `(status.url, status.replicas)` of parent `name`.
fn parent_status(kc: &Path, name: &str) -> Option<(String, i64)> {
    let out = kubectl(
        kc,
        &["-n", &test_ns(), "get", SITE_RESOURCE, name, "-o", "json"],
    )
    .ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    Some((
        v.pointer("/status/url")?.as_str()?.to_string(),
        v.pointer("/status/replicas")?.as_i64()?,
    ))
}

/// The version `status.url` says reconciled a parent last.
fn version_of(url: &str) -> &'static str {
    if url.contains(".svc.canary.local") {
        "candidate"
    } else if url.contains(".svc.stable.local") {
        "active"
    } else {
        "unknown"
    }
}

/// Every parent's version when the rollout is at `step` (or promoted, `None`).
fn expected(step: Option<u32>) -> Vec<(String, &'static str)> {
    PARENTS
        .iter()
        .map(|(p, moved_at)| {
            let on = match (step, moved_at) {
                (None, _) => true,
                (Some(s), Some(m)) => *m <= s,
                (Some(_), None) => false,
            };
            (p.to_string(), if on { "candidate" } else { "active" })
        })
        .collect()
}

/// Every parent's version, if each has been reconciled at `replicas`.
fn versions_at(kc: &Path, replicas: i64) -> Option<Vec<(String, &'static str)>> {
    PARENTS
        .iter()
        .map(|(p, _)| {
            let (url, r) = parent_status(kc, p)?;
            (r == replicas).then(|| (p.to_string(), version_of(&url)))
        })
        .collect()
}

fn set_all_replicas(kc: &Path, n: i64) -> Result<()> {
    for (p, _) in PARENTS {
        kubectl(
            kc,
            &[
                "-n",
                &test_ns(),
                "patch",
                SITE_RESOURCE,
                p,
                "--type=merge",
                "-p",
                &json!({"spec": {"replicas": n}}).to_string(),
            ],
        )?;
    }
    Ok(())
}

/// The static-site CRD, the WasmController with its candidate and rollout,
/// and the parents (s1, s2 labelled `wave=one`, s3, s4 `wave=two`).
fn install(kc: &Path, dir: &Path) -> Result<()> {
    install_wc_crd(kc, dir)?;
    let root = wr_tests::plugins::workspace_root();
    let crd = root.join("examples/static-site/crd.yaml");
    kubectl(
        kc,
        &["apply", "--server-side", "-f", &crd.display().to_string()],
    )?;
    let active = wr_tests::plugins::plugin_path("static-site");
    let bytes = std::fs::read(&active).context("reading the static-site component")?;
    // The same code under another digest: a custom section appended.
    let candidate = dir.join("static_site_next.wasm");
    std::fs::write(
        &candidate,
        wr_tests::reload::inflate_component(&bytes, bytes.len() + 256),
    )?;
    let wc = json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": CONTROLLER},
        "spec": {
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1",
                               "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}
            ],
            "plugin": {
                "path": active.display().to_string(),
                "config": {"clusterDomain": "stable.local"},
                "candidate": {
                    "path": candidate.display().to_string(),
                    "config": {"clusterDomain": "canary.local"},
                    "shadow": false
                }
            },
            "rollout": {
                "steps": [
                    {"selector": {"matchLabels": {"wave": "one"}}, "pauseSeconds": 3},
                    {"selector": {"matchLabels": {"wave": "two"}}, "pauseSeconds": STEP2_PAUSE},
                    {"percent": 100, "pauseSeconds": 3}
                ],
                "gates": {"readyPercent": 100, "readyWithinSeconds": 120}
            },
            "resyncPeriodSeconds": 600,
            "limits": {"timeoutMillis": 5000, "memoryMib": 64}
        }
    });
    let mut objects = vec![wc];
    for (p, moved_at) in PARENTS {
        let labels = match moved_at {
            Some(1) => json!({"wave": "one"}),
            Some(_) => json!({"wave": "two"}),
            None => json!({}),
        };
        objects.push(json!({
            "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
            "metadata": {"name": p, "namespace": test_ns(), "labels": labels},
            "spec": {"image": "nginx:1.27", "replicas": 1, "port": 8080,
                     "content": {"index.html": format!("<h1>{p}</h1>")}}
        }));
    }
    let file = dir.join("objects.json");
    std::fs::write(
        &file,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": objects}))?,
    )?;
    kubectl(
        kc,
        &["apply", "--server-side", "-f", &file.display().to_string()],
    )?;
    Ok(())
}

/// `kubectl get wasmcontroller --watch -o json` into `out`, killed on drop.
fn watch_controller(kc: &Path, out: &Path) -> Result<Proc> {
    let file = std::fs::File::create(out)?;
    let child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["get", "wasmcontroller", CONTROLLER, "--watch", "-o", "json"])
        .stdout(Stdio::from(file))
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting kubectl get --watch")?;
    Ok(Proc {
        child,
        name: "controller watch".into(),
    })
}

/// The rollout states a watch wrote so far, in commit order, one per version.
fn watched(file: &Path) -> Vec<Seen> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: Vec<Seen> = Vec::new();
    for v in serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map_while(|v| v.ok())
    {
        if let Some(s) = seen(&v)
            && out
                .last()
                .is_none_or(|l| l.resource_version != s.resource_version)
        {
            out.push(s);
        }
    }
    out
}

fn parse_time(s: &str) -> Result<Timestamp> {
    s.parse()
        .with_context(|| format!("stepStartedAt {s:?} is no RFC 3339 time"))
}

#[test]
fn a_new_leader_continues_a_canary_rollout_at_the_step_the_killed_leader_reached() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = cluster_with_log(dir.path())?;
    let kc = cluster.kubeconfig.clone();
    install(&kc, dir.path())?;

    let (mut a, _a_url) = run(&kc, "run-a", LEASE)?;
    eventually("run-a to lead", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-a_"))
    })?;
    let (_b, b_url) = run(&kc, "run-b", LEASE)?;
    eventually("run-b ready as a standby", 60, || {
        get(&b_url, "/readyz").ok().filter(|(c, _)| *c == 200)
    })?;
    let watch_file = dir.path().join("controller-watch.json");
    let _watch = watch_controller(&kc, &watch_file)?;

    // Step 1, then step 2: the wave=one parents, then also wave=two, on the candidate.
    eventually(
        "the rollout at step 1, wave one on the candidate",
        120,
        || {
            let r = rollout(&kc)?;
            (r.step == 1 && versions_at(&kc, 1)? == expected(Some(1))).then_some(())
        },
    )?;
    let at_step2 = eventually(
        "the rollout at step 2, both waves on the candidate",
        120,
        || {
            let r = rollout(&kc)?;
            (r.step == 2 && r.phase == "Progressing" && versions_at(&kc, 1)? == expected(Some(2)))
                .then_some(r)
        },
    )?;
    ensure!(
        lease_holder(&kc).is_some_and(|h| h.starts_with("run-a_")),
        "run-a must still lead when it is killed"
    );

    // SIGKILL: no release, no last write. After it only run-b writes, so the
    // versions after the last one run-a wrote are run-b's.
    a.signal("KILL")?;
    let _ = a.wait_exit(10)?;
    let killed_at = Timestamp::now();
    // A request run-a sent just before it died may still be committing;
    // run-b cannot lead before the 6 s Lease expires.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let last_of_a = get_wc(&kc)
        .and_then(|v| seen(&v))
        .context("the WasmController after the kill")?;
    eventually("run-b to take over the expired Lease", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-b_"))
    })?;

    // run-b reconciles every parent (a spec change) with the version step 2 routes it to.
    set_all_replicas(&kc, 2)?;
    let after = eventually("run-b to reconcile every parent", 120, || {
        versions_at(&kc, 2)
    })?;
    let now_rollout = rollout(&kc).context("status.rollout after the takeover")?;
    let step2_started = parse_time(&at_step2.started)?;
    let elapsed = Timestamp::now().duration_since(step2_started);
    ensure!(
        elapsed < SignedDuration::from_secs(STEP2_PAUSE),
        "the takeover and the reconciles took {elapsed:?} since step 2 started \
         (killed at {killed_at}); this check needs them inside the step's {STEP2_PAUSE} s pause"
    );
    ensure!(
        (
            now_rollout.step,
            now_rollout.phase.as_str(),
            now_rollout.started.as_str()
        ) == (2, "Progressing", at_step2.started.as_str()),
        "the new leader must continue step 2 as it was: {now_rollout:?}, before the kill {at_step2:?}"
    );
    ensure!(
        after == expected(Some(2)),
        "the new leader must run each parent on its step-2 version: {after:?}"
    );
    let mut log = requests_of(&cluster.log)?;
    ensure!(
        log.iter().any(
            |r| host_identity(r).is_some_and(|h| h.starts_with("run-b_"))
                && r.resource == "staticsites"
                && r.is_write()
        ),
        "run-b wrote no parent status"
    );

    // run-b finishes the rollout: step 3 after step 2's pause, then promotion.
    eventually("the rollout promoted", 180, || {
        let r = rollout(&kc)?;
        (r.phase == "Promoted").then_some(())
    })?;
    eventually("every parent on the candidate", 120, || {
        (versions_at(&kc, 2)? == expected(None)).then_some(())
    })?;

    // The committed history: steps in order, none repeated or skipped, and
    // run-b's versions continue run-a's step 2 with its start.
    let history = eventually("the watch to show the promotion", 30, || {
        let h = watched(&watch_file);
        h.last().is_some_and(|s| s.phase == "Promoted").then_some(h)
    })?;
    let cut = history
        .iter()
        .position(|s| s.resource_version == last_of_a.resource_version)
        .with_context(|| format!("the watch missed run-a's last version: {history:#?}"))?;
    let steps: Vec<(u64, &str)> = history
        .iter()
        .map(|s| (s.step, s.started.as_str()))
        .collect();
    let mut distinct = steps.clone();
    distinct.dedup();
    ensure!(
        distinct.iter().map(|s| s.0).collect::<Vec<_>>() == vec![1, 2, 3],
        "each step once, in order: {history:#?}"
    );
    ensure!(
        history.iter().all(|s| s.phase != "RolledBack"),
        "{history:#?}"
    );
    let b_part = &history[cut + 1..];
    ensure!(
        b_part
            .first()
            .is_some_and(|s| s.step == 2 && s.started == at_step2.started),
        "run-b's first version must be step 2 as run-a left it: {b_part:#?}"
    );
    let step3 = b_part
        .iter()
        .find(|s| s.step == 3)
        .context("run-b never started step 3")?;
    ensure!(
        parse_time(&step3.started)?.duration_since(step2_started)
            >= SignedDuration::from_secs(STEP2_PAUSE),
        "step 3 started before step 2's pause was over: {step3:?} after {at_step2:?}"
    );
    // ... and those versions are indeed run-b's: run-a wrote nothing after its kill.
    log = requests_of(&cluster.log)?;
    let b_status_writes = log
        .iter()
        .filter(|r| {
            host_identity(r).is_some_and(|h| h.starts_with("run-b_"))
                && r.resource == "wasmcontrollers"
                && r.is_write()
                && (200..300).contains(&r.code)
        })
        .count();
    ensure!(b_status_writes > 0, "run-b wrote no WasmController status");
    Ok(())
}

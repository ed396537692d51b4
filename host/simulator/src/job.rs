//! The Job controller (and the TTL-after-finished controller): up to
//! `parallelism` pods at a time until `completions` have succeeded (every
//! simulated pod of a Job exits 0), `Indexed` completion mode with its
//! index annotation, label and hostname, `suspend`, and the status of
//! kube-controller-manager: `active`/`ready`/`succeeded`, `startTime`,
//! `completionTime`, and the `SuccessCriteriaMet` then `Complete`
//! conditions. Failures, retries and pod failure policies are not simulated.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::conditions;
use crate::pass::Cx;
use crate::template;
use crate::world::{self, i64_at, str_at};
use crate::write::CONTROLLER_MANAGER;

const INDEX: &str = "batch.kubernetes.io/job-completion-index";

fn index_of(pod: &Value) -> Option<i64> {
    world::annotation(pod, INDEX).and_then(|i| i.parse().ok())
}

/// `1,3-5` as the Job's `completedIndexes` spells a set of indexes.
fn ranges(mut idx: Vec<i64>) -> String {
    idx.sort_unstable();
    idx.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let start = idx[i];
        let mut end = start;
        while i + 1 < idx.len() && idx[i + 1] == end + 1 {
            i += 1;
            end = idx[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

fn finished(job: &Value) -> bool {
    ["Complete", "Failed"]
        .iter()
        .any(|t| world::condition(job, t).is_some_and(|c| c["status"] == "True"))
}

/// Delete a finished Job once `ttlSecondsAfterFinished` has passed.
async fn expire(cx: &mut Cx<'_>, job: &Value) {
    let Some(ttl) = i64_at(job, "/spec/ttlSecondsAfterFinished") else {
        return;
    };
    let Some(done) = job
        .pointer("/status/completionTime")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return;
    };
    let at = done.with_timezone(&chrono::Utc) + chrono::Duration::seconds(ttl);
    if at > chrono::Utc::now() {
        cx.due.at_utc(at);
        return;
    }
    let (ns, name) = (world::namespace(job), world::name(job));
    if let Err(e) = cx.writer.delete::<Job>(ns, name, false).await {
        cx.failed(&format!("Job {ns}/{name}"), e);
    }
}

pub async fn sync(cx: &mut Cx<'_>) {
    let world = cx.world;
    for job in &world.jobs {
        if world::is_deleting(job) {
            continue;
        }
        let (ns, name) = (world::namespace(job), world::name(job));
        let what = format!("Job {ns}/{name}");
        if finished(job) {
            expire(cx, job).await;
            continue;
        }
        let pods = template::owned_pods(cx, job);
        let indexed = str_at(job, "/spec/completionMode") == "Indexed";
        let completions = i64_at(job, "/spec/completions");
        let parallelism = i64_at(job, "/spec/parallelism").unwrap_or(1);
        let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
        let active: Vec<&Value> = pods
            .iter()
            .copied()
            .filter(|p| world::pod_active(p))
            .collect();
        let succeeded_pods: Vec<&Value> = pods
            .iter()
            .copied()
            .filter(|p| world::pod_phase(p) == "Succeeded")
            .collect();
        let done_indexes: Vec<i64> = succeeded_pods.iter().filter_map(|p| index_of(p)).collect();
        let succeeded = if indexed {
            ranges_len(&done_indexes)
        } else {
            succeeded_pods.len() as i64
        }
        .max(i64_at(job, "/status/succeeded").unwrap_or(0));
        // Without completions, the Job is done once one pod succeeded and none runs.
        let complete = match completions {
            Some(n) => succeeded >= n,
            None => succeeded > 0 && active.is_empty(),
        };
        let want = if suspended || complete || (completions.is_none() && succeeded > 0) {
            0
        } else {
            let left = completions.map_or(parallelism, |n| n - succeeded);
            parallelism.min(left).max(0)
        };
        let have = active.len() as i64;
        let template = job.pointer("/spec/template").cloned().unwrap_or_default();
        if have < want {
            let busy: Vec<i64> = active.iter().filter_map(|p| index_of(p)).collect();
            let mut free = (0..completions.unwrap_or(0))
                .filter(|i| !busy.contains(i) && !done_indexes.contains(i));
            for _ in have..want {
                let mut t = template.clone();
                let prefix = if indexed {
                    let Some(i) = free.next() else { break };
                    t["metadata"]["annotations"][INDEX] = json!(i.to_string());
                    t["metadata"]["labels"][INDEX] = json!(i.to_string());
                    if t.pointer("/spec/hostname").is_none() {
                        t["spec"]["hostname"] = json!(format!("{name}-{i}"));
                    }
                    format!("{name}-{i}-")
                } else {
                    format!("{name}-")
                };
                let mut pod = template::pod(job, &t, None, &prefix);
                template::place(cx, &mut pod);
                if let Err(e) = cx.writer.create::<Pod>(ns, pod).await {
                    cx.failed(&what, e);
                    break;
                }
            }
        } else if have > want {
            let mut surplus = active.clone();
            surplus.sort_by_key(|p| crate::replicaset::deletion_rank(p));
            for p in surplus.iter().take((have - want) as usize) {
                if let Err(e) = cx.writer.delete::<Pod>(ns, world::name(p), false).await {
                    cx.failed(&what, e);
                }
            }
        }
        let now = conditions::now();
        let mut conds = conditions::of(job);
        let mut fields = vec![];
        if suspended {
            conditions::set(
                &mut conds,
                conditions::job("Suspended", "True", "JobSuspended", "Job suspended"),
            );
        } else {
            if world::condition(job, "Suspended").is_some() {
                conditions::set(
                    &mut conds,
                    conditions::job("Suspended", "False", "JobResumed", "Job resumed"),
                );
            }
            let start = job
                .pointer("/status/startTime")
                .cloned()
                .unwrap_or_else(|| json!(now));
            fields.push(("startTime", start));
        }
        if complete {
            for ty in ["SuccessCriteriaMet", "Complete"] {
                conditions::set(
                    &mut conds,
                    conditions::job(
                        ty,
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                );
            }
            fields.push(("completionTime", json!(now)));
        }
        let ready = active.iter().filter(|p| world::pod_ready(p)).count() as i64;
        fields.extend([
            ("active", world::omit_zero(if complete { 0 } else { have })),
            ("ready", Value::from(if complete { 0 } else { ready })),
            ("succeeded", world::omit_zero(succeeded)),
            ("terminating", Value::from(0)),
            ("uncountedTerminatedPods", json!({})),
            (
                "conditions",
                if conds.is_empty() {
                    Value::Null
                } else {
                    Value::from(conds)
                },
            ),
        ]);
        if indexed && !done_indexes.is_empty() {
            fields.push(("completedIndexes", json!(ranges(done_indexes))));
        }
        if let Some(patch) = world::status_patch(job, fields)
            && let Err(e) = cx
                .writer
                .merge::<Job>(ns, name, patch, true, CONTROLLER_MANAGER)
                .await
        {
            cx.failed(&what, e);
        }
    }
}

fn ranges_len(idx: &[i64]) -> i64 {
    let mut v = idx.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len() as i64
}

#[cfg(test)]
mod tests {
    #[test]
    fn completed_indexes_are_spelled_as_ranges() {
        assert_eq!(super::ranges(vec![3, 0, 1, 2, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(super::ranges(vec![]), "");
    }
}

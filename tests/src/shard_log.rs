//! "Never two owners", judged on an API server's request log (issue 19):
//! used by the sharded `run` acceptance test and the chaos suite's sharded
//! profile. Each `run` request carries `User-Agent: wasm-reconciler/VERSION
//! (run; IDENTITY)`, IDENTITY = `$POD_NAME_<random>`; the process is
//! IDENTITY's prefix.
//!
//! For every parent (its own writes and its children's, attributed by the
//! caller), when the writer changes from A (last write at position i) to B
//! (first write at j), both must hold:
//! - a new shard map was written (Lease `<group>-shards`) since the parent's
//!   previous writer change (a parent moves at most once per map), and
//! - A acknowledged after i — a write to its member Lease in (i, j) — or A
//!   was dead by j: no request of A after j.
//!
//! Two replicas reconciling one parent at once would interleave their writes
//! without either, which is what the check catches. Its limit: positions are
//! completion order, and a member-Lease write is any renewal, not only the
//! acknowledgement (the log has no bodies), so the second rule is necessary
//! rather than sufficient; the first rule is exact.

use std::collections::BTreeMap;

use anyhow::{Result, ensure};
use wr_apiserver::RequestRecord;

/// The `run` process (`$POD_NAME`) that made `r`, from its User-Agent.
pub fn process_of(r: &RequestRecord) -> Option<&str> {
    r.user_agent
        .as_deref()?
        .strip_prefix("wasm-reconciler/")?
        .split_once(" (run; ")?
        .1
        .strip_suffix(')')?
        .split('_')
        .next()
}

/// The parent a write belongs to when parents are named without `-` and
/// their children `PARENT` or `PARENT-SUFFIX`: `namespace/PARENT` for writes
/// to `resources`, else `None`. Events are best left out: they are written
/// by detached tasks after the reconcile.
pub fn parent_by_name_prefix(r: &RequestRecord, resources: &[&str]) -> Option<String> {
    if !r.is_write() || !resources.contains(&r.resource.as_str()) {
        return None;
    }
    let name = r.name.as_deref()?.split('-').next()?;
    Some(format!("{}/{name}", r.namespace.as_deref().unwrap_or("")))
}

/// What the log showed.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Handovers {
    /// Parent writes per process.
    pub writes: BTreeMap<String, usize>,
    /// Writer changes over all parents.
    pub switches: usize,
    /// Parents written by more than one process over the run.
    pub parents_moved: usize,
    /// Shard maps written.
    pub maps: usize,
    /// Writer changes that broke a rule, described (empty: the invariant held).
    pub violations: Vec<String>,
}

/// Checks the log; see the module doc. `parent_of` attributes a request to a
/// parent key (or `None`: not a parent write).
pub fn handovers(
    log: &[RequestRecord],
    group: &str,
    parent_of: impl Fn(&RequestRecord) -> Option<String>,
) -> Handovers {
    let map_name = format!("{group}-shards");
    let member_prefix = format!("{group}-member-");
    // A write whose response was dropped after the commit still happened.
    let landed = |r: &RequestRecord| {
        r.is_write()
            && ((200..300).contains(&r.code) || r.fault.as_deref() == Some("commitThenDrop"))
    };
    let maps: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.resource == "leases" && landed(r) && r.name.as_deref() == Some(&map_name)
        })
        .map(|(i, _)| i)
        .collect();
    let mut member_writes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut last_request: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_parent: BTreeMap<String, Vec<(usize, &str)>> = BTreeMap::new();
    let mut out = Handovers {
        maps: maps.len(),
        ..Handovers::default()
    };
    for (i, r) in log.iter().enumerate() {
        let Some(p) = process_of(r) else { continue };
        last_request.insert(p, i);
        if r.resource == "leases"
            && landed(r)
            && r.name
                .as_deref()
                .is_some_and(|n| n.starts_with(&member_prefix))
        {
            member_writes.entry(p).or_default().push(i);
        }
        if let Some(parent) = parent_of(r) {
            per_parent.entry(parent).or_default().push((i, p));
            *out.writes.entry(p.to_string()).or_default() += 1;
        }
    }
    for (parent, writes) in &per_parent {
        let mut since = 0;
        let mut moved = false;
        for w in writes.windows(2) {
            let ((i, a), (j, b)) = (w[0], w[1]);
            if a == b {
                continue;
            }
            moved = true;
            out.switches += 1;
            if !maps.iter().any(|m| (since..j).contains(m)) {
                out.violations.push(format!(
                    "{parent}: {b} took over from {a} at #{j} with no new shard map since #{since}"
                ));
            }
            let acked = member_writes
                .get(a)
                .is_some_and(|ws| ws.iter().any(|x| (i + 1..j).contains(x)));
            let dead = last_request.get(a).is_some_and(|l| *l < j);
            if !acked && !dead {
                out.violations.push(format!(
                    "{parent}: {b} wrote at #{j} while {a} (last write #{i}) neither acknowledged nor died"
                ));
            }
            since = j;
        }
        out.parents_moved += usize::from(moved);
    }
    out
}

/// [`handovers`], as an error naming the first violations.
pub fn handovers_are_clean(
    log: &[RequestRecord],
    group: &str,
    parent_of: impl Fn(&RequestRecord) -> Option<String>,
) -> Result<Handovers> {
    let h = handovers(log, group, parent_of);
    ensure!(
        h.violations.is_empty(),
        "{} writer changes broke the handover rules, e.g.:\n{}",
        h.violations.len(),
        h.violations
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(who: &str, verb: &str, resource: &str, name: &str) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: None,
            namespace: Some("default".into()),
            name: Some(name.into()),
            code: 200,
            field_manager: None,
            patch_type: None,
            dry_run: false,
            user_agent: Some(format!("wasm-reconciler/0.1.0 (run; {who}_0123)")),
            fault: None,
        }
    }

    fn check(log: &[RequestRecord]) -> Result<Handovers> {
        handovers_are_clean(log, "g", |r| {
            parent_by_name_prefix(r, &["configmaps", "deployments", "staticsites"])
        })
    }

    fn good() -> Vec<RequestRecord> {
        vec![
            rec("a", "patch", "configmaps", "s001-content"),
            rec("a", "update", "leases", "g-shards"),
            rec("a", "patch", "staticsites", "s001"),
            rec("a", "update", "leases", "g-member-a-1"),
            rec("b", "patch", "deployments", "s001"),
            rec("b", "patch", "staticsites", "s001"),
        ]
    }

    #[test]
    fn a_clean_handover_passes() {
        let stats = check(&good()).unwrap();
        assert_eq!((stats.switches, stats.parents_moved), (1, 1));
        assert_eq!(stats.writes.get("a"), Some(&2));
    }

    #[test]
    fn a_takeover_without_the_old_writers_acknowledgement_fails() {
        let mut log = good();
        log.remove(3);
        log.push(rec("a", "get", "leases", "g-shards"));
        assert!(check(&log).is_err());
    }

    #[test]
    fn a_takeover_without_a_new_map_fails() {
        let mut log = good();
        log.remove(1);
        assert!(check(&log).is_err());
    }

    #[test]
    fn going_back_and_forth_under_one_map_fails() {
        let mut log = good();
        log.push(rec("a", "update", "leases", "g-member-a-1"));
        log.push(rec("b", "update", "leases", "g-member-b-1"));
        log.push(rec("a", "patch", "staticsites", "s001"));
        assert!(check(&log).is_err());
    }

    #[test]
    fn a_dead_writer_needs_no_acknowledgement() {
        let mut log = good();
        log.remove(3);
        assert!(
            check(&log).is_ok(),
            "a made no request after b's first write"
        );
    }
}

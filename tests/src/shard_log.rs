//! "Never two owners", judged on an API server's request log (issue 19):
//! used by the sharded `run` acceptance test and the chaos suite's sharded
//! profile. Each `run` request carries `User-Agent: wasm-reconciler/VERSION
//! (run; IDENTITY)`, IDENTITY = `$POD_NAME_<random>`; the process is
//! IDENTITY's prefix.
//!
//! For every parent (its own writes and its children's, attributed by the
//! caller), when the writer changes from A (last write at position i) to B
//! (first write at j), both must hold:
//! - a shard map of its own moved the parent: the writers of one parent work
//!   under maps of increasing number (one map has one owner per parent, and
//!   B gains a parent only under a map newer than the one A worked under),
//!   so the k-th writer change needs the k-th map in a chain of maps, each
//!   written before the change's first write (Lease `<group>-shards`; the
//!   earliest unused one is taken). The map need not come after A's first
//!   write: a replica that gained a parent may first write it after the
//!   next map was written and before it read that map (chaos sharded, seed
//!   3: host0 gained six parents under one map, wrote them only after the
//!   next map gave them to a joiner, and stopped before acknowledging it);
//! - A acknowledged that map after its last write — a write to its member
//!   Lease after both i and the map, before j — or A was dead by j: no
//!   request of A after j.
//!
//! Two replicas reconciling one parent at once would interleave their writes
//! without either, which is what the check catches. Its limits: positions are
//! completion order, a member-Lease write is any renewal, not only the
//! acknowledgement, and which map a write was made under is not in the log
//! (it has no bodies), so both rules are necessary rather than sufficient:
//! a short overlap can pass when enough maps were written before it, a
//! lasting one runs out of maps.

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
        // The next map a writer change may use (index into `maps`).
        let mut next = 0;
        let mut moved = false;
        for w in writes.windows(2) {
            let ((i, a), (j, b)) = (w[0], w[1]);
            if a == b {
                continue;
            }
            moved = true;
            out.switches += 1;
            let map = maps.get(next).copied().filter(|m| *m < j);
            match map {
                Some(_) => next += 1,
                None => out.violations.push(format!(
                    "{parent}: {b} took over from {a} at #{j} with no shard map of its own (the {next} maps before it moved the parent already)"
                )),
            }
            let after = i.max(map.unwrap_or(0)) + 1;
            let acked = member_writes
                .get(a)
                .is_some_and(|ws| ws.iter().any(|x| (after..j).contains(x)));
            let dead = last_request.get(a).is_some_and(|l| *l < j);
            if !acked && !dead {
                out.violations.push(format!(
                    "{parent}: {b} wrote at #{j} while {a} (last write #{i}) neither acknowledged the map nor died"
                ));
            }
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

    /// Chaos sharded, seed 3: a gained a parent under map 1 and first wrote
    /// it after map 2 (which gives it to b) was written, then acknowledged.
    #[test]
    fn a_writer_may_start_after_the_map_that_moves_the_parent_on() {
        let log = vec![
            rec("c", "patch", "staticsites", "s001"),
            rec("a", "update", "leases", "g-shards"),
            rec("a", "update", "leases", "g-shards"),
            rec("a", "patch", "staticsites", "s001"),
            rec("a", "update", "leases", "g-member-a-1"),
            rec("b", "patch", "staticsites", "s001"),
        ];
        let stats = check(&log).unwrap();
        assert_eq!(stats.switches, 2);
        // The same writes with one map: two moves need two maps.
        let mut one = log.clone();
        one.remove(2);
        assert!(check(&one).is_err());
    }

    #[test]
    fn an_acknowledgement_before_the_map_does_not_count() {
        let log = vec![
            rec("a", "patch", "staticsites", "s001"),
            rec("a", "update", "leases", "g-member-a-1"),
            rec("a", "update", "leases", "g-shards"),
            rec("b", "patch", "staticsites", "s001"),
            rec("a", "get", "leases", "g-shards"),
        ];
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

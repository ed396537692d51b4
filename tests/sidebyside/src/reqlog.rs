//! Classifying the API server's request log (`/_wr/admin/requests`).
//!
//! Every client in the bench sets its own User-Agent, so the controller's
//! requests are told apart from the bench's own (parent creates, tampering,
//! its watches) without subtracting guessed counts.

use std::collections::BTreeMap;

use wr_apiserver::RequestRecord;

/// User-Agent of the controller processes (all three variants).
pub const CONTROLLER_AGENT: &str = "sidebyside-controller";
/// User-Agent of the bench's own client.
pub const BENCH_AGENT: &str = "sidebyside-bench";

/// Requests of one client, by verb and by write kind.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// All requests.
    pub total: u64,
    /// Writes (create, update, patch, delete).
    pub writes: u64,
    /// By verb (`get`, `list`, `watch`, `create`, `patch`, ...).
    pub by_verb: BTreeMap<String, u64>,
    /// Writes by `verb resource[/subresource]`, e.g. `patch staticsites/status`.
    pub writes_by_kind: BTreeMap<String, u64>,
    /// Writes answered 409 Conflict (stale resourceVersion or field conflict).
    #[serde(default)]
    pub conflicts: u64,
}

/// `verb resource[/subresource]`.
pub fn kind_of(r: &RequestRecord) -> String {
    match &r.subresource {
        Some(s) => format!("{} {}/{}", r.verb, r.resource, s),
        None => format!("{} {}", r.verb, r.resource),
    }
}

/// Counts the requests whose User-Agent starts with `agent`.
pub fn count(log: &[RequestRecord], agent: &str) -> Counts {
    let mut c = Counts::default();
    for r in log.iter().filter(|r| {
        r.user_agent
            .as_deref()
            .is_some_and(|a| a.starts_with(agent))
    }) {
        c.total += 1;
        *c.by_verb.entry(r.verb.clone()).or_default() += 1;
        if r.is_write() {
            c.writes += 1;
            c.conflicts += u64::from(r.code == 409);
            *c.writes_by_kind.entry(kind_of(r)).or_default() += 1;
        }
    }
    c
}

/// `later` minus `earlier` (a log snapshot taken later holds the earlier one).
pub fn minus(later: &Counts, earlier: &Counts) -> Counts {
    let sub = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| {
        a.iter()
            .map(|(k, v)| (k.clone(), v.saturating_sub(b.get(k).copied().unwrap_or(0))))
            .filter(|(_, v)| *v > 0)
            .collect()
    };
    Counts {
        total: later.total.saturating_sub(earlier.total),
        writes: later.writes.saturating_sub(earlier.writes),
        conflicts: later.conflicts.saturating_sub(earlier.conflicts),
        by_verb: sub(&later.by_verb, &earlier.by_verb),
        writes_by_kind: sub(&later.writes_by_kind, &earlier.writes_by_kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(verb: &str, resource: &str, sub: Option<&str>, agent: Option<&str>) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.map(Into::into),
            namespace: Some("bench".into()),
            name: None,
            code: 200,
            field_manager: None,
            patch_type: None,
            dry_run: false,
            user_agent: agent.map(Into::into),
            fault: None,
        }
    }

    #[test]
    fn counts_only_the_agent_and_splits_writes() {
        let log = vec![
            rec("create", "configmaps", None, Some(CONTROLLER_AGENT)),
            rec(
                "patch",
                "staticsites",
                Some("status"),
                Some(CONTROLLER_AGENT),
            ),
            rec("watch", "deployments", None, Some(CONTROLLER_AGENT)),
            rec("list", "staticsites", None, Some(BENCH_AGENT)),
            rec("patch", "deployments", None, Some(BENCH_AGENT)),
            rec("get", "staticsites", None, None),
        ];
        let mut log = log;
        log[1].code = 409;
        let c = count(&log, CONTROLLER_AGENT);
        assert_eq!(c.conflicts, 1);
        assert_eq!(c.total, 3);
        assert_eq!(c.writes, 2);
        assert_eq!(c.by_verb.get("watch"), Some(&1));
        assert_eq!(c.writes_by_kind.get("patch staticsites/status"), Some(&1));
        assert_eq!(c.writes_by_kind.get("create configmaps"), Some(&1));
        let b = count(&log, BENCH_AGENT);
        assert_eq!((b.total, b.writes), (2, 1));
    }

    #[test]
    fn later_minus_earlier() {
        let early = vec![rec("create", "configmaps", None, Some(CONTROLLER_AGENT))];
        let mut late = early.clone();
        late.push(rec("create", "configmaps", None, Some(CONTROLLER_AGENT)));
        late.push(rec("get", "configmaps", None, Some(CONTROLLER_AGENT)));
        let d = minus(
            &count(&late, CONTROLLER_AGENT),
            &count(&early, CONTROLLER_AGENT),
        );
        assert_eq!((d.total, d.writes), (2, 1));
        assert_eq!(d.by_verb.get("get"), Some(&1));
        assert_eq!(d.writes_by_kind.get("create configmaps"), Some(&1));
    }
}

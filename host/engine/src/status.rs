//! The parent's status as the host writes it: a host-owned `Ready` condition plus
//! the plugin's conditions, each with `observedGeneration`, `lastTransitionTime`
//! kept while the status value does not change, and the plugin's `status` object
//! merged in ([`StatusMode::Merge`]) or, when the plugin answered, taking the
//! place of everything but the host's fields ([`StatusMode::Replace`]).
//! [`next_status`] returns `None` when nothing would change, so the
//! caller never writes an identical status (writes trigger more reconciles and
//! noisy API traffic).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;
use wr_runtime::{Condition, ConditionStatus};

pub use crate::crd::StatusMode;
use crate::queue::ObjectKey;

/// One condition the host wants on the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredCondition {
    /// CamelCase type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

impl DesiredCondition {
    /// The host's `Ready` condition.
    pub fn ready(ok: bool, reason: &str, message: &str) -> Self {
        Self {
            type_: "Ready".into(),
            status: if ok { "True" } else { "False" },
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Converts a plugin condition.
    pub fn from_plugin(c: &Condition) -> Self {
        Self {
            type_: c.type_.clone(),
            status: match c.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                ConditionStatus::Unknown => "Unknown",
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
        }
    }
}

/// What one reconcile wants the status to say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusUpdate {
    /// Conditions to set (Ready first).
    pub conditions: Vec<DesiredCondition>,
    /// When true, conditions not in `conditions` are dropped (the plugin answered,
    /// so its list is complete); when false they are kept (the plugin failed and
    /// said nothing about them).
    pub replace_conditions: bool,
    /// The plugin's status object, merged in (JSON merge patch; `conditions` and
    /// `observedGeneration` are host-owned and ignored).
    pub plugin_status: Option<Value>,
}

/// Computes the parent's next `.status`, or `None` if it would not change.
///
/// With [`StatusMode::Replace`] and a plugin that answered
/// (`replace_conditions`), the status starts from the host's fields only, so
/// what the plugin no longer sets disappears; when the plugin failed, nothing
/// of its last status is dropped.
pub fn next_status(
    current: Option<&Value>,
    generation: Option<i64>,
    update: &StatusUpdate,
    mode: StatusMode,
    now: &str,
) -> Option<Value> {
    let mut status = match current {
        Some(Value::Object(m)) if mode == StatusMode::Replace && update.replace_conditions => {
            let mut host_owned = Map::new();
            for key in ["conditions", "observedGeneration"] {
                if let Some(v) = m.get(key) {
                    host_owned.insert(key.to_string(), v.clone());
                }
            }
            Value::Object(host_owned)
        }
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => Value::Object(Map::new()),
    };
    if let Some(Value::Object(patch)) = &update.plugin_status {
        let mut patch = patch.clone();
        patch.remove("conditions");
        patch.remove("observedGeneration");
        json_patch::merge(&mut status, &Value::Object(patch));
    }
    let existing: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let conditions = merge_conditions(&existing, update, generation, now);
    let obj = status.as_object_mut()?;
    obj.insert("conditions".into(), Value::Array(conditions));
    if let Some(g) = generation {
        obj.insert("observedGeneration".into(), json!(g));
    }
    if current == Some(&status) {
        None
    } else {
        Some(status)
    }
}

fn merge_conditions(
    existing: &[Value],
    update: &StatusUpdate,
    generation: Option<i64>,
    now: &str,
) -> Vec<Value> {
    let type_of = |c: &Value| c.get("type").and_then(Value::as_str).map(str::to_string);
    let mut out: Vec<Value> = Vec::new();
    for old in existing {
        let Some(t) = type_of(old) else { continue };
        if let Some(d) = update.conditions.iter().find(|d| d.type_ == t) {
            out.push(render(d, Some(old), generation, now));
        } else if !update.replace_conditions {
            out.push(old.clone());
        }
    }
    for d in &update.conditions {
        if !out
            .iter()
            .any(|c| type_of(c).as_deref() == Some(d.type_.as_str()))
        {
            out.push(render(d, None, generation, now));
        }
    }
    out
}

fn render(d: &DesiredCondition, old: Option<&Value>, generation: Option<i64>, now: &str) -> Value {
    let ltt = old
        .filter(|o| o.get("status").and_then(Value::as_str) == Some(d.status))
        .and_then(|o| o.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_string()));
    let mut c = json!({
        "type": d.type_,
        "status": d.status,
        "reason": d.reason,
        "message": d.message,
        "lastTransitionTime": ltt,
    });
    if let (Some(g), Some(m)) = (generation, c.as_object_mut()) {
        m.insert("observedGeneration".into(), json!(g));
    }
    c
}

/// A fingerprint of a parent's `.status` (object keys sorted), so the host can
/// remember the status it last wrote (or found right) for a parent in 8 bytes
/// and tell a status change made by someone else from the echo of its own write.
pub fn fingerprint(status: Option<&Value>) -> u64 {
    let h = crate::diff::stable_hash(status.unwrap_or(&Value::Null));
    u64::from_str_radix(h.get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

/// The JSON merge patch (RFC 7386) that turns `current` into `new`: `new` itself
/// plus an explicit `null` for every key of `current` that `new` lacks (at any
/// depth where both sides are objects). Sending `new` alone would leave such keys
/// on the server, so the stored status would never equal the computed one and
/// every pass would write it again.
pub fn merge_patch(current: Option<&Value>, new: &Value) -> Value {
    match (current, new) {
        (Some(Value::Object(cur)), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, v) in n {
                out.insert(k.clone(), merge_patch(cur.get(k), v));
            }
            for k in cur.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

/// First pause before restoring a status again when another writer keeps
/// changing it back ([`StatusMemory::restore_wait`]); doubles per round.
pub const FIGHT_BASE: Duration = Duration::from_millis(50);
/// A restore this long (plus twice the current pause) after the previous one
/// starts a new streak: an occasional overwrite is restored at once.
pub const FIGHT_QUIET: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Seen {
    fingerprint: u64,
    /// Restores in the current streak.
    restores: u32,
    last_restore: Option<Instant>,
    pause: Duration,
    deferred_until: Option<Instant>,
}

/// Per parent: the fingerprint of the status this host last wrote or found
/// right, and how often it recently had to restore a status that someone else
/// changed. The fingerprint lets a status change made by someone else trigger a
/// reconcile while the echo of the host's own write does not; the restore
/// streak keeps two writers that disagree about a status (say two controllers
/// for one parent kind) from ping-ponging at full speed.
#[derive(Debug, Default)]
pub struct StatusMemory {
    seen: Mutex<HashMap<ObjectKey, Seen>>,
}

impl StatusMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `status` as written (or judged right) for `key`.
    pub fn remember(&self, key: &ObjectKey, status: Option<&Value>) {
        self.lock().entry(key.clone()).or_default().fingerprint = fingerprint(status);
    }

    /// The fingerprint remembered for `key`, to put back with
    /// [`StatusMemory::reset`] when a write it was remembered for fails.
    pub fn recall(&self, key: &ObjectKey) -> Option<u64> {
        self.lock().get(key).map(|s| s.fingerprint)
    }

    /// Puts back a fingerprint from [`StatusMemory::recall`].
    pub fn reset(&self, key: &ObjectKey, fingerprint: Option<u64>) {
        let mut map = self.lock();
        match fingerprint {
            Some(f) => map.entry(key.clone()).or_default().fingerprint = f,
            None => {
                map.remove(key);
            }
        }
    }

    /// Forgets `key` (parent gone).
    pub fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    /// Whether `status` is what was remembered for `key` (`None`: nothing is).
    pub fn matches(&self, key: &ObjectKey, status: Option<&Value>) -> Option<bool> {
        self.lock()
            .get(key)
            .map(|s| s.fingerprint == fingerprint(status))
    }

    /// Called before the host overwrites a status someone else changed: `None`
    /// to write now, or how long to wait first. While the host's last
    /// successful restore ([`StatusMemory::restored`]) is recent (within
    /// [`FIGHT_QUIET`] plus twice the current pause), each further restore waits
    /// twice as long as the last, from [`FIGHT_BASE`] up to `cap`; an occasional
    /// overwrite is restored at once.
    pub fn restore_wait(&self, key: &ObjectKey, now: Instant, cap: Duration) -> Option<Duration> {
        let mut map = self.lock();
        let s = map.entry(key.clone()).or_default();
        if let Some(until) = s.deferred_until {
            if now < until {
                return Some(until - now);
            }
            s.deferred_until = None;
            return None;
        }
        if !in_streak(s, now) {
            return None;
        }
        let backoff = crate::backoff::Backoff {
            base: FIGHT_BASE,
            cap,
        };
        s.pause = backoff.delay(s.restores.max(1));
        s.deferred_until = Some(now + s.pause);
        Some(s.pause)
    }

    /// Records a successful write that overwrote someone else's status. Only
    /// these count towards a streak: a "restore" computed from a stale cache
    /// fails its resourceVersion precondition and is not a fight.
    pub fn restored(&self, key: &ObjectKey, now: Instant) {
        let mut map = self.lock();
        let s = map.entry(key.clone()).or_default();
        if in_streak(s, now) {
            s.restores = s.restores.saturating_add(1);
        } else {
            s.restores = 1;
            s.pause = Duration::ZERO;
        }
        s.last_restore = Some(now);
    }
}

fn in_streak(s: &Seen, now: Instant) -> bool {
    s.last_restore
        .is_some_and(|t| now.saturating_duration_since(t) < FIGHT_QUIET + s.pause * 2)
}

/// The `Ready` condition's status in a parent's `.status`, if any.
pub fn ready_status(status: Option<&Value>) -> Option<&str> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?
        .get("status")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(ok: bool, reason: &str) -> StatusUpdate {
        StatusUpdate {
            conditions: vec![DesiredCondition::ready(ok, reason, "m")],
            replace_conditions: true,
            plugin_status: None,
        }
    }

    #[test]
    fn first_status_gets_conditions_with_generation() {
        let s = next_status(
            None,
            Some(3),
            &upd(true, "Reconciled"),
            StatusMode::Merge,
            "T1",
        )
        .unwrap();
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["type"], "Ready");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "T1");
    }

    #[test]
    fn unchanged_status_is_not_written_even_at_a_later_time() {
        let s = next_status(
            None,
            Some(3),
            &upd(true, "Reconciled"),
            StatusMode::Merge,
            "T1",
        )
        .unwrap();
        assert_eq!(
            next_status(
                Some(&s),
                Some(3),
                &upd(true, "Reconciled"),
                StatusMode::Merge,
                "T2"
            ),
            None
        );
    }

    #[test]
    fn transition_time_moves_only_when_status_value_changes() {
        let s1 = next_status(None, Some(1), &upd(true, "A"), StatusMode::Merge, "T1").unwrap();
        let s2 = next_status(Some(&s1), Some(2), &upd(true, "B"), StatusMode::Merge, "T2").unwrap();
        assert_eq!(s2["conditions"][0]["lastTransitionTime"], "T1");
        assert_eq!(s2["conditions"][0]["observedGeneration"], 2);
        assert_eq!(s2["conditions"][0]["reason"], "B");
        let s3 = next_status(
            Some(&s2),
            Some(2),
            &upd(false, "B"),
            StatusMode::Merge,
            "T3",
        )
        .unwrap();
        assert_eq!(s3["conditions"][0]["lastTransitionTime"], "T3");
    }

    #[test]
    fn plugin_status_is_merged_but_cannot_touch_host_fields() {
        let cur = json!({"phase": "Old", "keep": 1});
        let u = StatusUpdate {
            conditions: vec![DesiredCondition::ready(true, "R", "")],
            replace_conditions: true,
            plugin_status: Some(
                json!({"phase": "New", "observedGeneration": 99, "conditions": []}),
            ),
        };
        let s = next_status(Some(&cur), Some(4), &u, StatusMode::Merge, "T").unwrap();
        assert_eq!(s["phase"], "New");
        assert_eq!(s["keep"], 1);
        assert_eq!(s["observedGeneration"], 4);
        assert_eq!(s["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn replace_drops_what_the_plugin_stopped_setting_and_merge_keeps_it() {
        let answered = |status: Value| StatusUpdate {
            conditions: vec![DesiredCondition::ready(true, "R", "")],
            replace_conditions: true,
            plugin_status: Some(status),
        };
        let first = answered(json!({"active": {"n": 1}, "phase": "Up"}));
        let s1 = next_status(None, Some(2), &first, StatusMode::Replace, "T1").unwrap();
        assert_eq!(s1["active"], json!({"n": 1}));
        let later = answered(json!({"phase": "Done", "observedGeneration": 9}));
        let replaced = next_status(Some(&s1), Some(2), &later, StatusMode::Replace, "T2").unwrap();
        assert_eq!(
            replaced,
            json!({"phase": "Done", "conditions": s1["conditions"], "observedGeneration": 2})
        );
        let merged = next_status(Some(&s1), Some(2), &later, StatusMode::Merge, "T2").unwrap();
        assert_eq!(merged["active"], json!({"n": 1}));
        assert_eq!(merged["phase"], "Done");
        // No status at all from a plugin that answered: only the host's fields stay.
        let none = StatusUpdate {
            plugin_status: None,
            ..answered(json!({}))
        };
        let bare = next_status(Some(&s1), Some(2), &none, StatusMode::Replace, "T2").unwrap();
        assert_eq!(bare.as_object().unwrap().len(), 2, "{bare}");
    }

    #[test]
    fn replace_keeps_the_last_status_when_the_plugin_failed() {
        let cur = json!({"phase": "Up", "conditions": [], "observedGeneration": 1});
        let failed = StatusUpdate {
            conditions: vec![DesiredCondition::ready(false, "Boom", "")],
            replace_conditions: false,
            plugin_status: None,
        };
        let s = next_status(Some(&cur), Some(1), &failed, StatusMode::Replace, "T").unwrap();
        assert_eq!(s["phase"], "Up");
        assert_eq!(ready_status(Some(&s)), Some("False"));
    }

    #[test]
    fn fingerprint_ignores_key_order_and_sees_any_change() {
        let a = json!({"phase": "Up", "conditions": [{"type": "Ready", "status": "True"}]});
        let b = json!({"conditions": [{"status": "True", "type": "Ready"}], "phase": "Up"});
        let c = json!({"phase": "Up", "conditions": [{"type": "Ready", "status": "False"}]});
        assert_eq!(fingerprint(Some(&a)), fingerprint(Some(&b)));
        assert_ne!(fingerprint(Some(&a)), fingerprint(Some(&c)));
        assert_ne!(fingerprint(Some(&a)), fingerprint(None));
    }

    #[test]
    fn memory_matches_only_the_remembered_status() {
        let m = StatusMemory::default();
        let k = ObjectKey::new(Some("ns"), "w");
        let s1 = json!({"phase": "Up"});
        assert_eq!(m.matches(&k, Some(&s1)), None);
        m.remember(&k, Some(&s1));
        assert_eq!(m.matches(&k, Some(&s1)), Some(true));
        assert_eq!(m.matches(&k, Some(&json!({"phase": "Down"}))), Some(false));
        let before = m.recall(&k);
        m.remember(&k, Some(&json!({"phase": "Next"})));
        m.reset(&k, before);
        assert_eq!(m.matches(&k, Some(&s1)), Some(true));
        m.forget(&k);
        assert_eq!(m.matches(&k, Some(&s1)), None);
        m.reset(&k, None);
        assert_eq!(m.recall(&k), None);
    }

    #[test]
    fn repeated_restores_back_off_and_a_quiet_spell_resets() {
        let m = StatusMemory::default();
        let k = ObjectKey::new(Some("ns"), "w");
        let cap = Duration::from_secs(1);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // No restore yet (or only failed ones): at once.
        assert_eq!(m.restore_wait(&k, t0, cap), None);
        assert_eq!(m.restore_wait(&k, t0, cap), None);
        m.restored(&k, t0);
        // Overwritten again right away: wait 50 ms (jittered up to 100 ms);
        // asking early says the rest.
        let w1 = m.restore_wait(&k, t0 + ms(1), cap).expect("in a fight");
        assert!(w1 >= ms(50) && w1 <= ms(100), "{w1:?}");
        assert_eq!(m.restore_wait(&k, t0 + ms(21), cap), Some(w1 - ms(20)));
        // After the pause: write.
        let mut t = t0 + ms(1) + w1;
        assert_eq!(m.restore_wait(&k, t, cap), None);
        m.restored(&k, t);
        // And again: 100 ms, then 200 ms, ... (each jittered), up to the cap.
        let mut nominal = ms(100);
        for _ in 0..10 {
            t += ms(1);
            let w = m.restore_wait(&k, t, cap).expect("in a fight");
            let low = nominal.min(cap / 2);
            assert!(w >= low && w <= (low * 2).min(cap), "{w:?} for {nominal:?}");
            nominal *= 2;
            t += w;
            assert_eq!(m.restore_wait(&k, t, cap), None);
            m.restored(&k, t);
        }
        // A quiet spell ends the streak: the next restore is immediate.
        let later = t + FIGHT_QUIET + cap * 2 + ms(1);
        assert_eq!(m.restore_wait(&k, later, cap), None);
    }

    #[test]
    fn merge_patch_removes_keys_the_new_status_dropped() {
        let cur = json!({"phase": "Old", "gone": 1, "nested": {"keep": 1, "drop": 2}});
        let new = json!({"phase": "New", "nested": {"keep": 1}, "added": true});
        let p = merge_patch(Some(&cur), &new);
        assert_eq!(
            p,
            json!({"phase": "New", "gone": null, "nested": {"keep": 1, "drop": null}, "added": true})
        );
        let mut applied = cur.clone();
        json_patch::merge(&mut applied, &p);
        assert_eq!(applied, new);
        assert_eq!(merge_patch(None, &new), new);
    }

    #[test]
    fn plugin_conditions_are_kept_when_plugin_failed_and_dropped_when_it_answered() {
        let avail = DesiredCondition {
            type_: "Available".into(),
            status: "True",
            reason: "Up".into(),
            message: String::new(),
        };
        let u = StatusUpdate {
            conditions: vec![DesiredCondition::ready(true, "R", ""), avail],
            replace_conditions: true,
            plugin_status: None,
        };
        let s = next_status(None, Some(1), &u, StatusMode::Merge, "T").unwrap();
        let failed = StatusUpdate {
            conditions: vec![DesiredCondition::ready(false, "Boom", "")],
            replace_conditions: false,
            plugin_status: None,
        };
        let s2 = next_status(Some(&s), Some(1), &failed, StatusMode::Merge, "T").unwrap();
        assert_eq!(s2["conditions"].as_array().unwrap().len(), 2);
        assert_eq!(ready_status(Some(&s2)), Some("False"));
        let s3 = next_status(Some(&s2), Some(1), &upd(true, "R"), StatusMode::Merge, "T").unwrap();
        assert_eq!(s3["conditions"].as_array().unwrap().len(), 1);
    }
}

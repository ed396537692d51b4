//! Memoisation of pure plugins (rule 13 of `docs/reconciliation-rules.md`):
//! whether a reconcile may skip the plugin call and every write because its
//! inputs are exactly those of the last call that found the cluster already
//! converged.
//!
//! A plugin is a pure function of its request: the sandbox gives it no clock,
//! randomness, files or network, so the only input besides the request is the
//! component itself. Skipping is therefore sound when
//!
//! 1. the plugin does not read `request.now` (it said so through the 0.2.0
//!    contract's `info()`, or the WasmController opts a 0.1.0 plugin in), so
//!    a skipped call cannot hide an answer that changes with time;
//! 2. the [`InputsHash`] — plugin digest plus every other request field
//!    (parent with its metadata and status, observed children, related
//!    objects, finalizing, config) — equals the one recorded for this parent;
//! 3. that hash was recorded by a pass whose answer needed no write at all
//!    ([`quiet`]): every child unchanged, nothing to delete, no collision, no
//!    status write, not deleting. Since the observed children and the parent
//!    (with their resourceVersions) are inside the hash, the same hash means
//!    the cluster still is what that pass found converged: a tampered,
//!    deleted or orphaned child changes the observed children, a rewritten
//!    status changes the parent, so either misses and the plugin is called.
//!
//! 4. a pass whose *only* write is the parent's status cannot record its
//!    inputs (the status is one of them, and it just changed), and the echo
//!    of the host's own status write triggers no pass by itself. So such a
//!    pass ([`awaits_echo`]) has its echo queue one more pass, which calls the
//!    plugin on the status as written — the plugin is really asked, nothing
//!    is assumed about whether it reads its status — and records its inputs
//!    if it needs no write. Without it a parent whose last pass wrote only
//!    the status (typically the pass rule 14 left the status to) stays
//!    unmemoised until the next resync, which then calls the plugin. At most
//!    `crate::memo::MAX_ECHO_PASSES` such writes in a row per parent.
//!
//! Pure functions only; the per-parent table lives in `crate::memo`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use wr_runtime::{ContractVersion, PluginInfo, RequestText};

use crate::apply::ChildAction;

use super::Answer;

/// `spec.plugin.memoize`: whether the host may skip a plugin call whose
/// inputs did not change (see the module docs for the rule).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum Memoize {
    /// Skip only when the plugin declared (contract 0.2.0 `info()`) that it
    /// does not read `now`. A 0.1.0 plugin cannot declare it and is called
    /// every time.
    #[default]
    Auto,
    /// Also skip for a plugin that could not declare whether it reads `now`
    /// (contract 0.1.0): the WasmController's author vouches that its answer
    /// does not depend on time. A plugin that declares it reads `now` is still
    /// called every time.
    Always,
    /// Never skip: every reconcile calls the plugin.
    Never,
}

impl Memoize {
    /// True for the default (kept out of serialised specs).
    pub fn is_auto(&self) -> bool {
        *self == Memoize::Auto
    }
}

/// Rule 13.1: may calls of a plugin with `info` be skipped under `policy`?
/// `info` is `None` for a plugin that is not a component (a test fake), which
/// declares nothing, like a 0.1.0 plugin.
pub fn memoisable(policy: Memoize, info: Option<&PluginInfo>) -> bool {
    let declared_pure = info.is_some_and(|i| i.contract != ContractVersion::V0_1 && !i.reads_now);
    let undeclared = info.is_none_or(|i| i.contract == ContractVersion::V0_1);
    match policy {
        Memoize::Never => false,
        Memoize::Auto => declared_pure,
        Memoize::Always => declared_pure || undeclared,
    }
}

/// SHA-256 of everything a call of a plugin that does not read `now` depends
/// on. 256 bits so that two different inputs colliding is not a practical
/// concern (a 64-bit hash would make the skip only probably sound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputsHash(pub [u8; 32]);

/// Rule 13.2: the hash of `req`'s inputs for the plugin with `digest`, `now`
/// left out (only ever used for plugins that do not read it). The request is
/// hashed as the exact JSON text the plugin receives ([`RequestText`], made
/// once per pass and then handed to the call): the same objects from the same
/// caches serialise to the same bytes; a different serialisation of equal
/// objects only costs a miss, never a wrong skip.
///
/// The byte stream is the one the Values gave when they were serialised for
/// the hash itself (before session 9): each field after a separator, lists as
/// JSON arrays — a JSON array's text is its elements' texts joined by commas
/// in brackets, and every text is one complete JSON value — so no two
/// requests share a stream, and the tag did not change.
pub fn inputs_hash(digest: &str, req: &RequestText) -> InputsHash {
    let mut h = Sha256::new();
    {
        // Buffered: the separators are tiny pieces, SHA-256 costs per call.
        let mut w = crate::diff::hash_buffer(&mut h);
        // Field by field with separators, so no two requests share a byte stream.
        put(&mut w, b"wasm-reconciler memo v1\0");
        put(&mut w, digest.as_bytes());
        put(&mut w, b"\0parent\0");
        put(&mut w, req.parent.as_bytes());
        put(&mut w, b"\0children\0");
        put_array(&mut w, &req.children, |w, child| put(w, child.as_bytes()));
        put(&mut w, b"\0related\0");
        put_array(&mut w, &req.related, |w, group| {
            // `RelatedObjects`' serde shape: {"name":…,"objects":[…]}.
            put(w, b"{\"name\":");
            if serde_json::to_writer(&mut *w, &group.name).is_err() {
                put(w, b"\0unserialisable\0");
            }
            put(w, b",\"objects\":");
            put_array(w, &group.objects, |w, o| put(w, o.as_bytes()));
            put(w, b"}");
        });
        put(&mut w, if req.finalizing { b"\0f1" } else { b"\0f0" });
        put(&mut w, b"\0config\0");
        put(&mut w, req.config.as_deref().unwrap_or("null").as_bytes());
        // Flushing into a hasher cannot fail.
        let _ = w.flush();
    }
    InputsHash(h.finalize().into())
}

fn put(w: &mut impl Write, bytes: &[u8]) {
    // Writing into a buffer in front of a hasher cannot fail.
    let _ = w.write_all(bytes);
}

/// `items` as a JSON array: `[`, each one written by `item`, commas, `]`.
fn put_array<W: Write, T>(w: &mut W, items: &[T], item: impl Fn(&mut W, &T)) {
    put(w, b"[");
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            put(w, b",");
        }
        item(w, x);
    }
    put(w, b"]");
}

/// Rule 13.3: the answer needs no write at all — every desired child is
/// already as desired (or left alone by OnDelete), nothing is deleted, no
/// collision, the parent is not being deleted, and `status_unchanged` (the
/// executor found the status already right). Only such a pass records its
/// inputs for a later skip.
pub fn quiet(answer: &Answer, status_unchanged: bool) -> bool {
    status_unchanged
        && !answer.deleting
        && answer.deletes.is_empty()
        && answer
            .children
            .iter()
            .all(|c| matches!(c.action, ChildAction::Unchanged | ChildAction::Left))
}

/// Rule 13.4: a pass of a memoisable plugin (`memo` is [`MemoCheck::Call`])
/// that met no problem and would be quiet but for its status write: the echo
/// of that write should queue one more pass, which may record the memo.
pub fn awaits_echo(memo: MemoCheck, answer: &Answer, no_problems: bool) -> bool {
    matches!(memo, MemoCheck::Call(_)) && no_problems && quiet(answer, true)
}

/// What the reconcile does about memoisation, decided before the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoCheck {
    /// The plugin may not be memoised (policy, or it reads `now`).
    Off,
    /// Inputs equal the last quiet pass's: skip the call and all writes.
    Skip,
    /// Call the plugin; record this hash if the pass turns out quiet.
    Call(InputsHash),
}

/// Rules 13.1–13.2 together: given whether the plugin is memoisable, the
/// hash of this request's inputs (computed only when memoisable) and the hash
/// the last quiet pass recorded for the parent.
pub fn check(
    memoisable: bool,
    inputs: impl FnOnce() -> InputsHash,
    last: Option<InputsHash>,
) -> MemoCheck {
    if !memoisable {
        return MemoCheck::Off;
    }
    let now = inputs();
    if last == Some(now) {
        MemoCheck::Skip
    } else {
        MemoCheck::Call(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::ChildStep;
    use serde_json::json;
    use wr_runtime::{ReconcileRequest, World};

    fn info(contract: ContractVersion, reads_now: bool) -> PluginInfo {
        PluginInfo {
            contract,
            world: World::Reconciler,
            reads_now,
        }
    }

    fn req() -> ReconcileRequest {
        ReconcileRequest {
            parent: json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": {"v": 1}}),
            children: vec![json!({"metadata": {"name": "c", "resourceVersion": "7"}})],
            related: vec![],
            finalizing: false,
            config: Some(json!({"k": "v"})),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn rule13_1_only_a_plugin_that_does_not_read_now_is_memoised() {
        let v1 = info(ContractVersion::V0_1, true);
        let pure = info(ContractVersion::V0_2, false);
        let clock = info(ContractVersion::V0_2, true);
        use Memoize::*;
        for (policy, info, want) in [
            (Auto, Some(&pure), true),
            (Auto, Some(&clock), false),
            (Auto, Some(&v1), false),
            (Auto, None, false),
            (Always, Some(&pure), true),
            (Always, Some(&v1), true),
            (Always, None, true),
            // Always never overrides a plugin's own "I read now".
            (Always, Some(&clock), false),
            (Never, Some(&pure), false),
            (Never, None, false),
        ] {
            assert_eq!(memoisable(policy, info), want, "{policy:?} {info:?}");
        }
    }

    /// What the engine hashes: the request's texts, as the plugin gets them.
    fn hash(digest: &str, r: &ReconcileRequest) -> InputsHash {
        inputs_hash(
            digest,
            &RequestText::new(r).expect("a JSON request serialises"),
        )
    }

    #[test]
    fn rule13_2_every_input_but_now_changes_the_hash() {
        let base = hash("sha256:a", &req());
        let mut later = req();
        later.now = "2026-06-01T00:00:00Z".into();
        assert_eq!(hash("sha256:a", &later), base, "now is not an input");
        assert_ne!(hash("sha256:b", &req()), base, "plugin version");
        type Change = Box<dyn Fn(&mut ReconcileRequest)>;
        let changes: Vec<Change> = vec![
            Box::new(|r| r.parent["spec"]["v"] = json!(2)),
            Box::new(|r| r.parent["metadata"]["resourceVersion"] = json!("6")),
            Box::new(|r| r.parent["status"] = json!({"x": 1})),
            Box::new(|r| r.children[0]["metadata"]["resourceVersion"] = json!("8")),
            Box::new(|r| r.children.clear()),
            Box::new(|r| {
                wr_runtime::RelatedObjects::group(&mut r.related, "secrets").push(json!({}))
            }),
            Box::new(|r| {
                wr_runtime::RelatedObjects::group(&mut r.related, "secrets");
            }),
            Box::new(|r| r.finalizing = true),
            Box::new(|r| r.config = Some(json!({"k": "w"}))),
            Box::new(|r| r.config = None),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut r = req();
            change(&mut r);
            assert_ne!(hash("sha256:a", &r), base, "change {i}");
        }
    }

    #[test]
    fn rule13_2_objects_are_framed_so_moving_bytes_between_them_changes_the_hash() {
        // The same bytes split differently between the fields must differ:
        // one child `[1,2]` against two children `1` and `2`, a related
        // object against a child, a group's name against its objects.
        let mut one = req();
        one.children = vec![json!([1, 2])];
        let mut two = req();
        two.children = vec![json!(1), json!(2)];
        assert_ne!(hash("sha256:a", &one), hash("sha256:a", &two));
        let mut child = req();
        child.children.push(json!({"x": 1}));
        let mut related = req();
        wr_runtime::RelatedObjects::group(&mut related.related, "r").push(json!({"x": 1}));
        assert_ne!(hash("sha256:a", &child), hash("sha256:a", &related));
        let mut a = req();
        wr_runtime::RelatedObjects::group(&mut a.related, "a,b");
        let mut b = req();
        wr_runtime::RelatedObjects::group(&mut b.related, "a");
        wr_runtime::RelatedObjects::group(&mut b.related, "b");
        assert_ne!(hash("sha256:a", &a), hash("sha256:a", &b));
    }

    /// The stream the hash was defined by before the request was serialised
    /// once: each field of the request's Values through serde_json.
    fn stream_of_values(digest: &str, r: &ReconcileRequest) -> Vec<u8> {
        let mut text = b"wasm-reconciler memo v1\0".to_vec();
        text.extend(digest.as_bytes());
        text.extend(b"\0parent\0");
        text.extend(serde_json::to_vec(&r.parent).unwrap());
        text.extend(b"\0children\0");
        text.extend(serde_json::to_vec(&r.children).unwrap());
        text.extend(b"\0related\0");
        text.extend(serde_json::to_vec(&r.related).unwrap());
        text.extend(if r.finalizing { b"\0f1" } else { b"\0f0" });
        text.extend(b"\0config\0");
        text.extend(serde_json::to_vec(&r.config).unwrap());
        text
    }

    #[test]
    fn rule13_2_the_hash_of_the_texts_is_the_hash_of_the_values_byte_stream() {
        // Hashing the wire texts changes the cost, not the bytes: the hash is
        // that of the stream serde_json gives for the Values, in one piece
        // (the buffer in front of SHA-256 included; a child larger than the
        // buffer, strings that need escaping, groups, no config, finalizing).
        let mut big = req();
        big.children
            .push(json!({"data": {"big": "x\"y\u{e9}\n".repeat(5000)}}));
        let mut grouped = req();
        wr_runtime::RelatedObjects::group(&mut grouped.related, "se\"crets").push(json!({"a": 1}));
        wr_runtime::RelatedObjects::group(&mut grouped.related, "empty");
        wr_runtime::RelatedObjects::group(&mut grouped.related, "more")
            .extend([json!(1), json!({})]);
        grouped.finalizing = true;
        grouped.config = None;
        let mut bare = req();
        bare.children.clear();
        for (i, r) in [req(), big, grouped, bare].iter().enumerate() {
            let whole: [u8; 32] = Sha256::digest(stream_of_values("sha256:a", r)).into();
            assert_eq!(hash("sha256:a", r), InputsHash(whole), "request {i}");
        }
    }

    fn answer(actions: Vec<ChildAction>) -> Answer {
        Answer {
            children: actions
                .into_iter()
                .map(|action| ChildStep {
                    kind: 0,
                    namespace: None,
                    name: "c".into(),
                    object: json!({}),
                    action,
                    existing_uid: None,
                    label: "ConfigMap c".into(),
                })
                .collect(),
            deletes: vec![],
            conditions: vec![],
            plugin_status: None,
            events: vec![],
            deleting: false,
            finalized: false,
            requeue_after: None,
            rollout: None,
        }
    }

    #[test]
    fn rule13_3_only_a_pass_that_writes_nothing_is_recorded() {
        use ChildAction::*;
        assert!(quiet(&answer(vec![Unchanged, Left]), true));
        assert!(!quiet(&answer(vec![Unchanged]), false), "status written");
        for a in [
            Create,
            Apply,
            Wait,
            Recreate { uid: "u".into() },
            Collision("other".into()),
        ] {
            assert!(!quiet(&answer(vec![Unchanged, a.clone()]), true), "{a:?}");
        }
        let mut deleting = answer(vec![]);
        deleting.deleting = true;
        assert!(!quiet(&deleting, true), "finalizing");
        let mut deletes = answer(vec![]);
        deletes.deletes.push(crate::decide::DeleteStep {
            kind: 0,
            namespace: None,
            name: "old".into(),
            uid: "u".into(),
            label: "ConfigMap old".into(),
        });
        assert!(!quiet(&deletes, true), "a child to delete");
    }

    #[test]
    fn rule13_4_only_a_status_only_write_of_a_memoisable_plugin_awaits_its_echo() {
        use ChildAction::*;
        let call = MemoCheck::Call(hash("sha256:a", &req()));
        let status_only = answer(vec![Unchanged, Left]);
        assert!(awaits_echo(call, &status_only, true));
        assert!(
            !awaits_echo(MemoCheck::Off, &status_only, true),
            "not memoisable: nothing to record"
        );
        assert!(!awaits_echo(call, &status_only, false), "a problem");
        assert!(
            !awaits_echo(call, &answer(vec![Unchanged, Apply]), true),
            "a child write: its own watch event brings the next pass"
        );
        let mut deleting = answer(vec![Unchanged]);
        deleting.deleting = true;
        assert!(!awaits_echo(call, &deleting, true), "finalizing");
    }

    #[test]
    fn rule13_skips_only_on_the_recorded_hash_of_a_memoisable_plugin() {
        let h = hash("sha256:a", &req());
        let other = hash("sha256:b", &req());
        assert_eq!(check(true, || h, Some(h)), MemoCheck::Skip);
        assert_eq!(check(true, || h, Some(other)), MemoCheck::Call(h));
        assert_eq!(check(true, || h, None), MemoCheck::Call(h));
        assert_eq!(check(false, || h, Some(h)), MemoCheck::Off);
    }
}

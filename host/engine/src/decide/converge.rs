//! Rule 14 of `docs/reconciliation-rules.md`: one status write when a parent
//! converges.
//!
//! A pass that creates, changes or deletes children computes its status from
//! what it observed *before* those writes: a plugin reporting readiness from
//! its observed children (`Available=False, Progressing` while they are
//! missing) would have its status written now and rewritten by the next pass,
//! which the children's own watch events trigger and which sees them. When
//! such a pass is certain to follow, the status write is left to it: one
//! write instead of two, with the condition the observed children justify.
//!
//! Only when it is certain: every child write went through (no problem to
//! report now), at least one write changed an object on the server (its watch
//! event will come), and the parent is not being deleted. The executor also
//! defers at most `MAX_DEFERRALS` (3) times per parent generation
//! (`MemoTable::may_defer`), so a child that keeps being changed by someone
//! else cannot keep the status from being written.
//!
//! The pass the echoes trigger judges the status only once the child caches
//! show every write of the deferring pass (`crate::own_writes`: the
//! resourceVersion each write returned, or the deleted uid gone; given up on
//! after `own_writes::SHOWN_WITHIN`), so it does not see a just-created child
//! as missing and write a `Progressing` status after all.

use super::Answer;

/// Whether the status write of a pass that met `no_problems` and made
/// `echoes` server-side changes to children can be left to the pass their
/// watch events trigger.
pub fn defer_status(answer: &Answer, no_problems: bool, echoes: usize) -> bool {
    no_problems && echoes > 0 && !answer.deleting
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(deleting: bool) -> Answer {
        Answer {
            children: vec![],
            deletes: vec![],
            conditions: vec![],
            plugin_status: None,
            events: vec![],
            deleting,
            finalized: false,
            requeue_after: None,
            rollout: None,
        }
    }

    #[test]
    fn rule14_the_status_waits_only_for_a_pass_that_is_certain_to_come() {
        assert!(defer_status(&answer(false), true, 2), "children created");
        assert!(
            !defer_status(&answer(false), true, 0),
            "no child changed: nothing will trigger another pass"
        );
        assert!(
            !defer_status(&answer(false), false, 1),
            "a problem is reported now"
        );
        assert!(!defer_status(&answer(true), true, 1), "being deleted");
    }
}

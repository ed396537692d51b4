//! The host side of a shard group: which parents the engine may reconcile
//! ([`ShardGate`], the engine's [`Admission`]) and the handover that follows
//! the membership's view ([`follow`]): on a new map, refuse what is lost at
//! once, wait for the reconciles of lost parents still in flight (they
//! finish; none is cancelled half-way through its writes), then acknowledge;
//! once the map settles, re-enqueue the parents gained ([`Gained`]): those not
//! admitted without a break since the previous settled map. What was kept saw
//! every event and needs no pass, so a join or leave reconciles ≈ 1/N of the
//! parents, not all of them.
//!
//! Ownership is checked once per reconcile, when a worker takes the key, and
//! the ticket is held until the reconcile (its writes included) has ended;
//! a handover waits for that ticket before acknowledging, so a re-check
//! before each write batch would never see a parent lost mid-reconcile. The
//! one case a ticket outlives ownership is fencing (the member Lease could
//! not be renewed): `run` then admits nothing and waits for those tickets
//! at most the margin between renew deadline and lease duration ([`ShardGate::drained`]),
//! then rejoins as a new member — or exits 1 if they outlast the margin,
//! like a leader that lost its Lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use wr_engine::admission::{Admission, Ticket};
use wr_engine::queue::ObjectKey;

use super::ShardView;
use super::member::Acknowledger;
use super::metrics::ShardMetrics;

/// The string a parent is assigned by: `namespace/name` (or `name`). The
/// controller is not part of it: a parent object has one owner, whichever
/// controllers reconcile it.
pub fn shard_key(key: &ObjectKey) -> String {
    key.to_string()
}

/// Admits a key when the current [`ShardView`] owns it and counts the
/// admitted reconciles in flight per key.
#[derive(Clone)]
pub struct ShardGate {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    ended: Notify,
}

struct State {
    view: ShardView,
    in_flight: HashMap<String, usize>,
    /// Every distinct view worked under since the last settled one (that one
    /// first): a key admitted by all of them was never refused since.
    since_settled: Vec<ShardView>,
}

/// Beyond this many views between two settled maps the gate stops tracking
/// them and counts every owned key as gained (safe: one extra pass each).
const MAX_TRACKED_VIEWS: usize = 64;

/// The parents a settled map gave this replica: owned now, but refused at
/// some point since the previous settled map (or never owned), so events for
/// them may have been dropped and they need a pass.
#[derive(Debug, Clone)]
pub struct Gained {
    now: ShardView,
    /// The views since the previous settled one, the current one last.
    before: Vec<ShardView>,
}

impl Gained {
    /// True when `key` is owned now and was not admitted throughout.
    pub fn contains(&self, key: &ObjectKey) -> bool {
        let k = shard_key(key);
        self.now.owns(&k) && !self.before.iter().all(|v| v.owns(&k))
    }
}

/// Held by the engine while an admitted reconcile runs.
struct Held {
    shared: Arc<Shared>,
    key: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if let Some(n) = st.in_flight.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                st.in_flight.remove(&self.key);
            }
        }
        drop(st);
        self.shared.ended.notify_waiters();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ShardGate {
    /// A gate for `identity` that admits nothing until a view arrives.
    pub fn new(identity: impl Into<String>) -> Self {
        let view = ShardView::new(identity);
        ShardGate {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    since_settled: vec![view.clone()],
                    view,
                    in_flight: HashMap::new(),
                }),
                ended: Notify::new(),
            }),
        }
    }

    /// Works under `view` from now on: nothing it does not own is admitted.
    pub fn set_view(&self, view: ShardView) {
        let mut st = self.shared.lock();
        if st.since_settled.last() != Some(&view) {
            if st.since_settled.len() >= MAX_TRACKED_VIEWS {
                // Owns nothing: everything owned later counts as gained.
                st.since_settled = vec![ShardView::new(view.identity.clone())];
            }
            st.since_settled.push(view.clone());
        }
        st.view = view;
    }

    /// What the current (settled) view gained since the previous settled
    /// one; starts tracking anew from the current view.
    pub fn take_gained(&self) -> Gained {
        let mut st = self.shared.lock();
        let now = st.view.clone();
        let before = std::mem::replace(&mut st.since_settled, vec![now.clone()]);
        Gained { now, before }
    }

    /// True when the current view owns `key`.
    pub fn owns(&self, key: &ObjectKey) -> bool {
        self.shared.lock().view.owns(&shard_key(key))
    }

    /// Reconciles in flight on keys the current view does not own.
    pub fn lost_in_flight(&self) -> usize {
        let st = self.shared.lock();
        st.in_flight.keys().filter(|k| !st.view.owns(k)).count()
    }

    /// Resolves once no reconcile of a key the current view does not own is
    /// in flight.
    pub async fn drained(&self) {
        loop {
            let ended = self.shared.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.lost_in_flight() == 0 {
                return;
            }
            ended.await;
        }
    }
}

impl Admission for ShardGate {
    fn enter(&self, _scope: &str, key: &ObjectKey) -> Option<Ticket> {
        let key = shard_key(key);
        let mut st = self.shared.lock();
        if !st.view.owns(&key) {
            return None;
        }
        *st.in_flight.entry(key.clone()).or_default() += 1;
        drop(st);
        Some(Box::new(Held {
            shared: self.shared.clone(),
            key,
        }))
    }
}

/// Follows the membership's views until their sender is gone: sets each on
/// `gate`, drains every new map, narrows the caches to the map's buckets
/// (`narrow`: resolves once the buckets gained are listed and the lost ones
/// have left), then acknowledges it, and calls `settled` when a map settles
/// with what it gained (the caller re-enqueues those parents). `fenced`
/// mirrors the view's fence for the caller.
pub async fn follow<N: Future<Output = ()>>(
    gate: ShardGate,
    mut views: watch::Receiver<ShardView>,
    ack: Acknowledger,
    narrow: impl Fn(Vec<u32>) -> N,
    settled: impl Fn(Gained),
    metrics: Option<ShardMetrics>,
    fenced: watch::Sender<bool>,
) {
    let mut epoch = 0;
    let mut read_at = Instant::now();
    let mut was_settled = false;
    loop {
        let view = views.borrow_and_update().clone();
        if view.current.number != epoch {
            epoch = view.current.number;
            read_at = Instant::now();
            was_settled = false;
        }
        gate.set_view(view.clone());
        if let Some(m) = &metrics {
            m.view(&view);
        }
        fenced.send_if_modified(|f| std::mem::replace(f, view.fenced) != view.fenced);
        if let Some(n) = view.pending_ack()
            && !view.fenced
        {
            let waiting = gate.lost_in_flight();
            let buckets = view.watched_buckets();
            let watched = buckets.len();
            let handover = async {
                gate.drained().await;
                // Nothing of a lost bucket runs now, so its objects may
                // leave the caches; what the map gives is in them before
                // the ack.
                narrow(buckets).await;
            };
            // A list can wait as long as the API server is unreachable, and
            // so can the renewals: a fence that comes meanwhile must reach
            // the gate at once (it admits nothing), not after the list.
            let fenced_meanwhile = tokio::select! {
                () = handover => false,
                r = views.wait_for(|v| v.fenced) => match r {
                    Ok(_) => true,
                    Err(_) => return,
                },
            };
            if fenced_meanwhile {
                continue;
            }
            ack.acknowledge(n);
            tracing::info!(
                epoch = n,
                waited_for = waiting,
                buckets = watched,
                "drained and listed the map's buckets; acknowledged the shard map"
            );
        }
        if view.settled && !was_settled {
            was_settled = true;
            let took = read_at.elapsed();
            tracing::info!(
                epoch = view.current.number,
                members = view.current.members.len(),
                handover_ms = took.as_millis() as u64,
                "shard map settled; working on the parents gained"
            );
            if let Some(m) = &metrics {
                m.handover(took);
            }
            settled(gate.take_gained());
        }
        if views.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Epoch;

    fn view(id: &str, number: u64, members: &[&str], settled: bool) -> ShardView {
        let mut v = ShardView::new(id);
        v.fenced = false;
        v.read(Epoch {
            number,
            members: members.iter().map(|m| m.to_string()).collect(),
        });
        v.acknowledge(number);
        if settled {
            v.observe_acks(|_| Some(number));
        }
        v
    }

    fn keys() -> Vec<ObjectKey> {
        (0..200)
            .map(|i| ObjectKey::new(Some("ns"), &format!("p-{i}")))
            .collect()
    }

    #[test]
    fn a_settled_map_gains_only_what_was_not_admitted_throughout() {
        let gate = ShardGate::new("a");
        // The first settled map: everything owned is gained.
        gate.set_view(view("a", 1, &["a"], true));
        let first = gate.take_gained();
        assert!(keys().iter().all(|k| first.contains(k)));

        // b joins (2), then leaves again (3) before anyone else noticed: a
        // refused b's share while 2 was current, so it must run it again;
        // what it kept throughout it must not.
        let mut v = gate.shared.lock().view.clone();
        v.read(Epoch {
            number: 2,
            members: vec!["a".into(), "b".into()],
        });
        v.acknowledge(2);
        gate.set_view(v.clone());
        let refused: Vec<_> = keys().into_iter().filter(|k| !gate.owns(k)).collect();
        let kept: Vec<_> = keys().into_iter().filter(|k| gate.owns(k)).collect();
        assert!(!refused.is_empty() && !kept.is_empty());
        gate.set_view(view("a", 3, &["a"], true));
        let gained = gate.take_gained();
        assert!(
            refused.iter().all(|k| gained.contains(k)),
            "refused keys not gained"
        );
        assert!(kept.iter().all(|k| !gained.contains(k)), "kept keys re-run");

        // A map settling with no change in between gains nothing.
        gate.set_view(view("a", 3, &["a"], true));
        let none = gate.take_gained();
        assert!(keys().iter().all(|k| !none.contains(k)));
    }

    #[tokio::test]
    async fn a_new_map_is_acknowledged_only_after_its_buckets_are_listed() {
        let gate = ShardGate::new("a");
        let mut first = ShardView::new("a");
        first.fenced = false;
        first.read(Epoch {
            number: 1,
            members: vec!["a".into(), "b".into()],
        });
        let (views_tx, views) = watch::channel(first.clone());
        let (ack_tx, mut acks) = watch::channel(0u64);
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
        let listed_rx = std::sync::Mutex::new(Some(listed_rx));
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let asked2 = asked.clone();
        let (fenced, _f) = watch::channel(true);
        let following = tokio::spawn(follow(
            gate,
            views,
            Acknowledger::to(ack_tx),
            move |buckets: Vec<u32>| {
                asked2.lock().unwrap().push(buckets);
                let rx = listed_rx.lock().unwrap().take();
                async move {
                    if let Some(rx) = rx {
                        let _ = rx.await;
                    }
                }
            },
            |_| {},
            None,
            fenced,
        ));
        // The caches are asked for exactly this member's buckets of map 1 …
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while asked.lock().unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("follow narrows the caches");
        assert_eq!(asked.lock().unwrap()[0], first.watched_buckets());
        assert!(!first.watched_buckets().is_empty());
        // … and map 1 is not acknowledged while that list is running.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(
            *acks.borrow(),
            0,
            "acknowledged before the buckets were listed"
        );
        listed_tx.send(()).expect("narrowing waits");
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            acks.wait_for(|n| *n == 1),
        )
        .await
        .expect("acknowledged once listed")
        .expect("ack channel");
        drop(views_tx);
        let _ = following.await;
    }

    #[tokio::test]
    async fn a_fence_while_listing_reaches_the_caller_and_nothing_is_acknowledged() {
        let mut first = ShardView::new("a");
        first.fenced = false;
        first.read(Epoch {
            number: 1,
            members: vec!["a".into()],
        });
        let (views_tx, views) = watch::channel(first.clone());
        let (ack_tx, acks) = watch::channel(0u64);
        let (fenced_tx, mut fenced) = watch::channel(true);
        let following = tokio::spawn(follow(
            ShardGate::new("a"),
            views,
            Acknowledger::to(ack_tx),
            // The list never completes (an unreachable API server).
            |_: Vec<u32>| std::future::pending::<()>(),
            |_| {},
            None,
            fenced_tx,
        ));
        let within = std::time::Duration::from_secs(5);
        tokio::time::timeout(within, fenced.wait_for(|f| !*f))
            .await
            .expect("unfenced first")
            .expect("fence channel");
        let mut cut_off = first.clone();
        cut_off.fenced = true;
        views_tx.send_replace(cut_off);
        tokio::time::timeout(within, fenced.wait_for(|f| *f))
            .await
            .expect("the fence is not held up by the list")
            .expect("fence channel");
        assert_eq!(*acks.borrow(), 0, "acknowledged a map it never listed");
        following.abort();
    }

    #[tokio::test]
    async fn a_lost_key_in_flight_holds_the_drain_until_its_reconcile_ends() {
        let gate = ShardGate::new("a");
        assert!(gate.enter("c", &keys()[0]).is_none(), "fenced: nothing");
        gate.set_view(view("a", 1, &["a"], true));
        let tickets: Vec<_> = keys().iter().map(|k| gate.enter("c", k)).collect();
        assert!(tickets.iter().all(Option::is_some));
        // A newer map with b: a loses about half and must not admit them.
        let mut next = gate.shared.lock().view.clone();
        next.read(Epoch {
            number: 2,
            members: vec!["a".into(), "b".into()],
        });
        gate.set_view(next);
        let lost: Vec<_> = keys().into_iter().filter(|k| !gate.owns(k)).collect();
        assert!(!lost.is_empty());
        assert!(lost.iter().all(|k| gate.enter("c", k).is_none()));
        assert_eq!(gate.lost_in_flight(), lost.len());
        let drained = tokio::spawn({
            let g = gate.clone();
            async move { g.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!drained.is_finished(), "drained with lost keys in flight");
        drop(tickets);
        tokio::time::timeout(std::time::Duration::from_secs(5), drained)
            .await
            .expect("the drain ends once the reconciles ended")
            .expect("drain task");
        assert_eq!(gate.lost_in_flight(), 0);
    }
}

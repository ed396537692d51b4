//! The shard bucket of a parent (issue 19): a fixed number in `0..BUCKETS`
//! that a sharded `run` writes as the label [`LABEL`] on every parent and on
//! every child it applies, so that a replica can watch only the buckets the
//! shard map gives it (`labelSelector: LABEL in (…)`) instead of caching every
//! object of the group.
//!
//! The bucket is a function of the parent's key (`namespace/name`), the same
//! string the shard gate admits by: it never changes for the object's
//! lifetime, so a rebalance writes nothing (the map moves buckets, not
//! parents), and the gate can tell a key's bucket without the object — a
//! key whose parent is gone from the cache has one too. (The design note
//! said `hash(uid)`; a uid is not in the queue's key, and a name-derived
//! bucket is just as fixed: a parent deleted and re-created under its name
//! lands in the same bucket, which is harmless.)
//!
//! SHA-256 like the rendezvous weights of `wr_operator::shard::assign`:
//! specified forever, so two host versions in one group agree.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::queue::ObjectKey;

/// The label carrying the bucket on parents and children.
pub const LABEL: &str = "wasm-reconciler.dev/shard-bucket";

/// Number of buckets: enough that 64 spread evenly over a handful of
/// replicas, few enough that `in (…)` stays a short selector.
pub const BUCKETS: u32 = 64;

/// The bucket of the parent with shard key `key` (`namespace/name`).
pub fn bucket_of(key: &str) -> u32 {
    let digest = Sha256::new_with_prefix(b"shard-bucket\0")
        .chain_update(key.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(BUCKETS)) as u32
}

/// The bucket of a parent by its queue key.
pub fn bucket_of_key(key: &ObjectKey) -> u32 {
    bucket_of(&key.to_string())
}

/// The label value of `bucket` (its decimal number).
pub fn label_value(bucket: u32) -> String {
    bucket.to_string()
}

/// The label selector of a watch narrowed to `buckets`. An empty set
/// selects nothing (`in (none)`: a value no bucket has), since `in ()` is
/// not valid selector syntax.
pub fn selector(buckets: &[u32]) -> String {
    if buckets.is_empty() {
        return format!("{LABEL} in (none)");
    }
    let values: Vec<String> = buckets.iter().map(|b| label_value(*b)).collect();
    format!("{LABEL} in ({})", values.join(","))
}

/// The selector of the objects no narrowed watch sees: no bucket label, or
/// one that is not a bucket number (`notin` also matches a missing label).
pub fn outside_selector() -> String {
    let all: Vec<u32> = (0..BUCKETS).collect();
    selector(&all).replacen(" in (", " notin (", 1)
}

/// The bucket an object's label says, if it is a valid bucket number.
pub fn labelled_bucket(labels: Option<&std::collections::BTreeMap<String, String>>) -> Option<u32> {
    labels?
        .get(LABEL)?
        .parse::<u32>()
        .ok()
        .filter(|b| *b < BUCKETS)
}

/// Puts the bucket label of the parent `parent` on a child manifest (the
/// host owns its children's labels under its field manager).
pub fn label_child(child: &mut Value, parent: &ObjectKey) {
    let Some(meta) = child.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(l) = labels.as_object_mut() {
        l.insert(
            LABEL.into(),
            Value::String(label_value(bucket_of_key(parent))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn buckets_are_fixed_in_range_and_spread() {
        let mut counts = [0usize; BUCKETS as usize];
        for i in 0..6400 {
            let k = format!("ns/p-{i}");
            let b = bucket_of(&k);
            assert_eq!(b, bucket_of(&k));
            counts[b as usize] += 1;
        }
        // 100 expected per bucket.
        assert!(counts.iter().all(|c| (50..=150).contains(c)), "{counts:?}");
    }

    #[test]
    fn selectors_name_the_buckets_and_the_rest() {
        assert_eq!(selector(&[3, 17]), format!("{LABEL} in (3,17)"));
        assert_eq!(selector(&[]), format!("{LABEL} in (none)"));
        let out = outside_selector();
        assert!(out.starts_with(&format!("{LABEL} notin (0,1,")), "{out}");
        assert!(out.ends_with(",63)"), "{out}");
    }

    #[test]
    fn only_valid_bucket_numbers_count_as_labelled() {
        let l = |v: &str| [(LABEL.to_string(), v.to_string())].into_iter().collect();
        assert_eq!(labelled_bucket(Some(&l("7"))), Some(7));
        assert_eq!(labelled_bucket(Some(&l("64"))), None);
        assert_eq!(labelled_bucket(Some(&l("x"))), None);
        assert_eq!(labelled_bucket(None), None);
    }

    #[test]
    fn a_child_gets_its_parents_bucket_and_keeps_its_labels() {
        let parent = ObjectKey::new(Some("ns"), "web");
        let mut child = json!({"metadata": {"name": "web", "labels": {"app": "web"}}});
        label_child(&mut child, &parent);
        assert_eq!(child["metadata"]["labels"]["app"], "web");
        assert_eq!(
            child["metadata"]["labels"][LABEL],
            label_value(bucket_of("ns/web"))
        );
    }
}

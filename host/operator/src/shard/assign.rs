//! Which replica owns a parent: rendezvous (highest-random-weight) hashing of
//! the parent's shard bucket ([`bucket_key`]) over the members.
//!
//! Every replica computes the same owner from the same member list without
//! talking to the others, and a join or a leave moves only the keys of the
//! member that came or went (≈ 1/N of them), which a modulo hash would not.
//! The weight is SHA-256 of `member \0 key`, truncated: slow next to a
//! non-cryptographic hash, but specified forever, so replicas built from
//! different versions of this host (a rolling upgrade) still agree.
//! Ten thousand parents over four members cost ~40,000 hashes (a few ms), once
//! per membership change.

use sha2::{Digest, Sha256};

/// The weight of `key` for `member`.
pub fn weight(member: &str, key: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(member.as_bytes());
    h.update([0u8]);
    h.update(key.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The string a bucket is assigned by (the map divides the
/// [`wr_engine::shard_bucket`] buckets, not the parents, among its members).
pub fn bucket_key(bucket: u32) -> String {
    format!("bucket-{bucket}")
}

/// The member with the highest weight for `key` (ties, which need a SHA-256
/// prefix collision, go to the smaller name); `None` when there are no members.
pub fn owner<'a>(members: &'a [String], key: &str) -> Option<&'a str> {
    members
        .iter()
        .map(|m| (weight(m, key), std::cmp::Reverse(m.as_str())))
        .max()
        .map(|(_, std::cmp::Reverse(m))| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    fn keys() -> Vec<String> {
        (0..4000)
            .map(|i| format!("ns-{}/parent-{i}", i % 7))
            .collect()
    }

    #[test]
    fn no_members_no_owner_and_one_member_owns_everything() {
        assert_eq!(owner(&[], "a/b"), None);
        let one = members(1);
        assert!(keys().iter().all(|k| owner(&one, k) == Some("replica-0")));
    }

    #[test]
    fn the_owner_does_not_depend_on_the_order_of_the_members() {
        let m = members(5);
        let mut rev = m.clone();
        rev.reverse();
        assert!(keys().iter().all(|k| owner(&m, k) == owner(&rev, k)));
    }

    #[test]
    fn keys_spread_evenly() {
        let m = members(4);
        let mut counts = [0usize; 4];
        for k in keys() {
            let o = owner(&m, &k).unwrap_or_default();
            let i = m.iter().position(|x| x == o).unwrap_or_default();
            counts[i] += 1;
        }
        // 1,000 expected each; SHA-256 is uniform, so ±15 % is wide.
        for c in counts {
            assert!((850..=1150).contains(&c), "uneven spread: {counts:?}");
        }
    }

    #[test]
    fn a_join_moves_only_keys_to_the_newcomer_about_one_in_n() {
        let before = members(3);
        let after = members(4);
        let mut moved = 0;
        for k in keys() {
            let (b, a) = (owner(&before, &k), owner(&after, &k));
            if a != b {
                assert_eq!(a, Some("replica-3"), "{k} moved between old members");
                moved += 1;
            }
        }
        // 1/4 of 4,000 = 1,000.
        assert!((850..=1150).contains(&moved), "{moved} keys moved");
    }

    #[test]
    fn a_leave_moves_only_the_leavers_keys() {
        let before = members(4);
        let after: Vec<String> = before
            .iter()
            .filter(|m| *m != "replica-1")
            .cloned()
            .collect();
        for k in keys() {
            let (b, a) = (owner(&before, &k), owner(&after, &k));
            if b != Some("replica-1") {
                assert_eq!(a, b, "{k} moved though its owner stayed");
            }
        }
    }
}

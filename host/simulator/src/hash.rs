//! Names derived from a pod template, as the Deployment, StatefulSet and
//! DaemonSet controllers derive theirs: an FNV-32a hash of the template
//! (plus the collision count), printed in decimal and re-spelled with the
//! alphabet of `k8s.io/apimachinery/pkg/util/rand.SafeEncodeString` (no
//! vowels, no digits that read as letters), so names look like the real ones
//! (`web-7bd8c5d9b4`). Hashed over the template's JSON rather than Go's
//! struct dump, the values differ from a real cluster's.

use serde_json::Value;

const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn fnv32a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The `pod-template-hash` / revision hash of a template.
pub fn template_hash(template: &Value, collision_count: i64) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if collision_count > 0 {
        bytes.extend_from_slice(&collision_count.to_le_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_template_same_hash_and_a_change_changes_it() {
        let a = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
        let b = json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert_eq!(template_hash(&a, 0), template_hash(&a.clone(), 0));
        assert_ne!(template_hash(&a, 0), template_hash(&b, 0));
        assert_ne!(template_hash(&a, 0), template_hash(&a, 1));
        let h = template_hash(&a, 0);
        assert!(h.bytes().all(|c| ALPHANUMS.contains(&c)), "{h}");
    }
}

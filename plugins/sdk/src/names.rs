//! Deterministic, valid Kubernetes names for children.

use sha2::{Digest, Sha256};

/// Longest DNS-1123 label (names of Services, and a safe bound for all kinds).
pub const MAX_LABEL_LEN: usize = 63;

/// Hex characters of the hash appended when a name has to be shortened.
const HASH_LEN: usize = 10;

/// Name for a child of `parent` with the given `suffix`, e.g.
/// `child_name("web", "config") == "web-config"`.
///
/// Always a valid DNS-1123 label (lowercase alphanumerics and `-`, starts and
/// ends alphanumeric, at most 63 characters), so it is valid for every kind,
/// Services included. Invalid characters become `-`. When the name would be
/// too long it is cut and `-<10 hex chars of sha256(parent/suffix)>` is
/// appended, so distinct inputs still give distinct names and the same input
/// always gives the same name.
pub fn child_name(parent: &str, suffix: &str) -> String {
    let raw = if suffix.is_empty() {
        parent.to_string()
    } else {
        format!("{parent}-{suffix}")
    };
    let clean = sanitize(&raw);
    if clean.len() <= MAX_LABEL_LEN && clean == raw && !clean.is_empty() {
        return clean;
    }
    // Changed or too long: make it unique with a hash of the exact input.
    let hash = &content_hash(format!("{parent}/{suffix}").as_bytes())[..HASH_LEN];
    let keep = MAX_LABEL_LEN - HASH_LEN - 1;
    let prefix = clean[..clean.len().min(keep)].trim_end_matches('-');
    if prefix.is_empty() {
        // Only a hash is left; a label may start with a digit.
        return hash.to_string();
    }
    format!("{prefix}-{hash}")
}

/// Lowercase hex SHA-256 of `bytes`; use it for content-hash annotations so a
/// change of content rolls the pods that use it.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `name` is a valid DNS-1123 label.
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

fn sanitize(raw: &str) -> String {
    let mapped: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    mapped.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_joined() {
        assert_eq!(child_name("web", "config"), "web-config");
        assert_eq!(child_name("web", ""), "web");
    }

    #[test]
    fn long_names_are_cut_and_hashed_deterministically() {
        let parent = "a".repeat(70);
        let name = child_name(&parent, "svc");
        assert_eq!(name.len(), 63);
        assert!(is_dns1123_label(&name), "{name}");
        assert_eq!(name, child_name(&parent, "svc"));
        assert_ne!(name, child_name(&parent, "cfg"));
        // 52 'a's, '-', 10 hex chars.
        assert!(name.starts_with(&"a".repeat(52)));
    }

    #[test]
    fn invalid_characters_are_replaced_and_made_unique() {
        let a = child_name("My.Site", "web");
        let b = child_name("my-site", "web");
        assert!(is_dns1123_label(&a), "{a}");
        assert!(a.starts_with("my-site-web-"), "{a}");
        assert_eq!(b, "my-site-web");
        assert_ne!(a, b);
    }

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn label_validation() {
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("A"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}

//! Signed plugins: an ed25519 signature over a component's digest, stored
//! beside the component (`data["signature.json"]` of the ConfigMap a
//! WasmController references, whether it holds the component or a chunk
//! manifest), checked against the public keys the WasmController trusts
//! (`spec.plugin.signature.trustedKeys`) before the component is compiled.
//!
//! Why ed25519 and not a Sigstore bundle: the host hot-loads code from
//! ConfigMaps inside the cluster, often without network access to a
//! transparency log or a Fulcio CA; a bare key pair is verifiable offline,
//! fits in a ConfigMap, and `openssl genpkey -algorithm ed25519` makes one.
//! `ed25519-dalek` (RustCrypto family, like `sha2`) does the curve work.
//!
//! The signed message is a fixed domain prefix plus the component's
//! `sha256:<hex>` digest, so a signature made for something else can never
//! pass as a plugin signature.

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::crd::{PluginSource, SignaturePolicy};

/// Key of the signature in the referenced ConfigMap's `data`.
pub const SIGNATURE_KEY: &str = "signature.json";
/// `format` of a signature this host understands.
pub const SIGNATURE_FORMAT: &str = "wasm-reconciler.dev/signature/v1";
/// Domain separation: the signed message is this prefix plus the digest.
const MESSAGE_PREFIX: &[u8] = b"wasm-reconciler.dev/plugin-signature/v1\n";

/// What `publish --sign` stores in `data["signature.json"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// Always [`SIGNATURE_FORMAT`].
    pub format: String,
    /// Always `ed25519`.
    pub algorithm: String,
    /// `sha256:<hex>` of the decoded component that was signed.
    pub digest: String,
    /// [`key_id`] of the signing key (diagnostics: which key signed).
    pub key_id: String,
    /// Base64 (standard) of the 64-byte ed25519 signature.
    pub signature: String,
}

/// Why a key or a signature is not usable.
///
/// Each message names what is wrong and carries the underlying error's text;
/// the underlying error is also the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The private key text is neither PKCS#8 PEM nor a base64 32-byte seed.
    #[error("private key: {0}")]
    PrivateKey(#[source] KeyError),
    /// A trusted key does not parse.
    #[error("spec.plugin.signature.trustedKeys[{index}]: not an ed25519 public key: {source}")]
    TrustedKey {
        /// Position in `trustedKeys`.
        index: usize,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// The WasmController requires a signature and the source has none.
    #[error(
        "{SIGNATURE_KEY} is missing: component {digest} is not signed, and spec.plugin.signature requires a signature; it is refused"
    )]
    Unsigned {
        /// The component's digest.
        digest: String,
    },
    /// The signature does not parse.
    #[error("{SIGNATURE_KEY} does not parse: {0}")]
    Malformed(#[source] MalformedError),
    /// The signature is for other bytes.
    #[error("{SIGNATURE_KEY} signs {signed}, but the component is {actual}; it is refused")]
    OtherDigest {
        /// Digest named in the signature.
        signed: String,
        /// Digest of the component.
        actual: String,
    },
    /// No trusted key verifies it.
    #[error(
        "{SIGNATURE_KEY}: the signature by key {key_id} over {digest} does not verify with any of the {trusted} key(s) in spec.plugin.signature.trustedKeys; it is refused"
    )]
    Untrusted {
        /// Key id the signature claims.
        key_id: String,
        /// The component's digest.
        digest: String,
        /// How many keys were tried.
        trusted: usize,
    },
}

/// Why the text of a key is not an ed25519 key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A private key's PKCS#8 PEM does not decode (or encode).
    #[error(transparent)]
    Pkcs8(ed25519_dalek::pkcs8::Error),
    /// A public key's SPKI PEM does not decode (or encode).
    #[error(transparent)]
    Spki(ed25519_dalek::pkcs8::spki::Error),
    /// A private key that is neither PEM nor base64.
    #[error("neither PKCS#8 PEM nor base64: {0}")]
    NotPemOrBase64(#[source] base64::DecodeError),
    /// A public key that is not PEM and not base64.
    #[error("not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    /// A raw private key (seed) of the wrong length.
    #[error("a raw seed has 32 bytes, this has {0}")]
    SeedLength(usize),
    /// A raw public key of the wrong length.
    #[error("an ed25519 key has 32 bytes, this has {0}")]
    KeyLength(usize),
    /// 32 bytes that are not a point of the curve.
    #[error(transparent)]
    NotOnCurve(ed25519_dalek::SignatureError),
}

/// Why the text of `signature.json` is not a signature this host reads.
#[derive(Debug, thiserror::Error)]
pub enum MalformedError {
    /// Not the JSON of a [`Signature`].
    #[error(transparent)]
    Json(serde_json::Error),
    /// Another format or algorithm.
    #[error(
        "unknown format {format:?} / algorithm {algorithm:?} (expected {SIGNATURE_FORMAT:?} / \"ed25519\")"
    )]
    UnknownFormat {
        /// `format` of the signature.
        format: String,
        /// `algorithm` of the signature.
        algorithm: String,
    },
    /// The signature field is not base64.
    #[error("signature: not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    /// The signature field has the wrong length.
    #[error("signature: an ed25519 signature has 64 bytes, this has {0}")]
    Length(usize),
}

impl SigningError {
    /// CamelCase reason for the `PluginLoaded` condition and the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            SigningError::Unsigned { .. } => "Unsigned",
            SigningError::TrustedKey { .. } | SigningError::PrivateKey(_) => "TrustedKeyInvalid",
            _ => "SignatureInvalid",
        }
    }

    /// The message for a condition or an Event: a problem with the
    /// signature names where it was read (`location`, see
    /// [`signature_location`]); a bad trusted key names its field of the
    /// WasmController already.
    pub fn message_at(&self, location: &str) -> String {
        if self.reason() == "TrustedKeyInvalid" {
            self.to_string()
        } else {
            format!("{location}: {self}")
        }
    }
}

/// Where `source` keeps its signature, for messages that must name the
/// object it came from: `ConfigMap NS/NAME` (the referenced ConfigMap,
/// whether it holds the component or a chunk manifest; the signature is its
/// `data["signature.json"]`), or `file PATH.signature.json` beside a path
/// source.
pub fn signature_location(source: &PluginSource) -> String {
    match (&source.config_map, &source.path) {
        (Some(cm), _) => format!("ConfigMap {}/{}", cm.namespace, cm.name),
        (None, Some(path)) => format!("file {path}.{SIGNATURE_KEY}"),
        (None, None) => SIGNATURE_KEY.to_string(),
    }
}

fn message(digest: &str) -> Vec<u8> {
    let mut m = MESSAGE_PREFIX.to_vec();
    m.extend_from_slice(digest.as_bytes());
    m
}

/// Short, stable name of a public key: `ed25519:` and the first 16 hex
/// digits of the sha256 of its 32 raw bytes.
pub fn key_id(key: &VerifyingKey) -> String {
    let h = hex::encode(Sha256::digest(key.as_bytes()));
    format!("ed25519:{}", &h[..16])
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// Reads a private key: PKCS#8 PEM (`openssl genpkey -algorithm ed25519`,
/// `wasm-reconciler keygen`) or the base64 of the 32-byte seed.
pub fn parse_private_key(text: &str) -> Result<SigningKey, SigningError> {
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return SigningKey::from_pkcs8_pem(t)
            .map_err(|e| SigningError::PrivateKey(KeyError::Pkcs8(e)));
    }
    use base64::Engine;
    let raw = b64()
        .decode(t)
        .map_err(|e| SigningError::PrivateKey(KeyError::NotPemOrBase64(e)))?;
    let seed: [u8; 32] = raw
        .try_into()
        .map_err(|v: Vec<u8>| SigningError::PrivateKey(KeyError::SeedLength(v.len())))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Reads a public key: SPKI PEM (`openssl pkey -pubout`) or the base64 of
/// its 32 raw bytes (what `keygen` prints for `trustedKeys`).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(t).map_err(KeyError::Spki);
    }
    use base64::Engine;
    let raw = b64().decode(t).map_err(KeyError::NotBase64)?;
    let bytes: [u8; 32] = raw
        .try_into()
        .map_err(|v: Vec<u8>| KeyError::KeyLength(v.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(KeyError::NotOnCurve)
}

/// The base64 form of a public key, as `trustedKeys` takes it.
pub fn public_key_base64(key: &VerifyingKey) -> String {
    use base64::Engine;
    b64().encode(key.as_bytes())
}

/// A new key pair from 32 random bytes: (PKCS#8 PEM private key, SPKI PEM
/// public key, base64 public key).
pub fn generate(seed: [u8; 32]) -> Result<(String, String, String), SigningError> {
    let key = SigningKey::from_bytes(&seed);
    let private = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| SigningError::PrivateKey(KeyError::Pkcs8(e)))?
        .to_string();
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| SigningError::PrivateKey(KeyError::Spki(e)))?;
    Ok((private, public, public_key_base64(&key.verifying_key())))
}

/// Signs a component digest (`sha256:<hex>`).
pub fn sign(key: &SigningKey, digest: &str) -> Signature {
    use base64::Engine;
    Signature {
        format: SIGNATURE_FORMAT.to_string(),
        algorithm: "ed25519".to_string(),
        digest: digest.to_string(),
        key_id: key_id(&key.verifying_key()),
        signature: b64().encode(key.sign(&message(digest)).to_bytes()),
    }
}

/// Checks a component against the WasmController's signature policy: no
/// policy accepts anything; with one, `signature` (the text of
/// `signature.json`) must be a signature over `digest` by a trusted key.
pub fn verify(
    policy: Option<&SignaturePolicy>,
    digest: &str,
    signature: Option<&str>,
) -> Result<(), SigningError> {
    let Some(policy) = policy else {
        return Ok(());
    };
    let keys = policy
        .trusted_keys
        .iter()
        .enumerate()
        .map(|(index, k)| {
            parse_public_key(k).map_err(|source| SigningError::TrustedKey { index, source })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(text) = signature else {
        return Err(SigningError::Unsigned {
            digest: digest.to_string(),
        });
    };
    let sig: Signature =
        serde_json::from_str(text).map_err(|e| SigningError::Malformed(MalformedError::Json(e)))?;
    if sig.format != SIGNATURE_FORMAT || sig.algorithm != "ed25519" {
        return Err(SigningError::Malformed(MalformedError::UnknownFormat {
            format: sig.format,
            algorithm: sig.algorithm,
        }));
    }
    if sig.digest != digest {
        return Err(SigningError::OtherDigest {
            signed: sig.digest,
            actual: digest.to_string(),
        });
    }
    use base64::Engine;
    let raw = b64()
        .decode(&sig.signature)
        .map_err(|e| SigningError::Malformed(MalformedError::NotBase64(e)))?;
    let bytes: [u8; 64] = raw
        .try_into()
        .map_err(|v: Vec<u8>| SigningError::Malformed(MalformedError::Length(v.len())))?;
    let s = ed25519_dalek::Signature::from_bytes(&bytes);
    let msg = message(digest);
    if keys.iter().any(|k| k.verify(&msg, &s).is_ok()) {
        return Ok(());
    }
    Err(SigningError::Untrusted {
        key_id: sig.key_id,
        digest: digest.to_string(),
        trusted: keys.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(keys: &[&SigningKey]) -> SignaturePolicy {
        SignaturePolicy {
            trusted_keys: keys
                .iter()
                .map(|k| public_key_base64(&k.verifying_key()))
                .collect(),
        }
    }

    #[test]
    fn a_signature_by_a_trusted_key_verifies_and_nothing_else_does() {
        let good = SigningKey::from_bytes(&[7; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let d = crate::plugin_source::digest(b"component");
        let text = serde_json::to_string(&sign(&good, &d)).unwrap();
        verify(Some(&policy(&[&good])), &d, Some(&text)).unwrap();
        verify(Some(&policy(&[&other, &good])), &d, Some(&text)).unwrap();
        let e = verify(Some(&policy(&[&other])), &d, Some(&text)).unwrap_err();
        assert_eq!(e.reason(), "SignatureInvalid");
        assert!(matches!(e, SigningError::Untrusted { .. }), "{e}");
        let e = verify(Some(&policy(&[&good])), &d, None).unwrap_err();
        assert_eq!(e.reason(), "Unsigned");
        // No policy: signatures are not required.
        verify(None, &d, None).unwrap();
    }

    #[test]
    fn a_signature_over_other_bytes_or_tampered_is_refused() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let d = crate::plugin_source::digest(b"component");
        let other = crate::plugin_source::digest(b"other");
        let text = serde_json::to_string(&sign(&key, &other)).unwrap();
        let e = verify(Some(&policy(&[&key])), &d, Some(&text)).unwrap_err();
        assert!(matches!(e, SigningError::OtherDigest { .. }), "{e}");
        // The digest field rewritten to match: the signature no longer verifies.
        let mut forged = sign(&key, &other);
        forged.digest = d.clone();
        let text = serde_json::to_string(&forged).unwrap();
        let e = verify(Some(&policy(&[&key])), &d, Some(&text)).unwrap_err();
        assert!(matches!(e, SigningError::Untrusted { .. }), "{e}");
    }

    #[test]
    fn keys_round_trip_through_pem_and_base64_and_bad_keys_name_the_field() {
        let (private, public_pem, public_b64) = generate([9; 32]).unwrap();
        let k = parse_private_key(&private).unwrap();
        assert_eq!(parse_public_key(&public_pem).unwrap(), k.verifying_key());
        assert_eq!(parse_public_key(&public_b64).unwrap(), k.verifying_key());
        let bad = SignaturePolicy {
            trusted_keys: vec![public_b64, "AAAA".into()],
        };
        let e = verify(Some(&bad), "sha256:00", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.plugin.signature.trustedKeys[1]"),
            "{e}"
        );
        // The cause is kept as a typed source, not only as text.
        assert!(
            matches!(
                &e,
                SigningError::TrustedKey {
                    index: 1,
                    source: KeyError::KeyLength(3)
                }
            ),
            "{e:?}"
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("an ed25519 key has 32 bytes, this has 3")
        );
        let e = verify(Some(&policy(&[&k])), "sha256:00", Some("{not json")).unwrap_err();
        assert!(
            matches!(&e, SigningError::Malformed(MalformedError::Json(j)) if j.is_syntax()),
            "{e:?}"
        );
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
    }

    /// A refused signature names the ConfigMap (namespace/name) or file it
    /// was read from and its key; a bad trusted key names its own field.
    #[test]
    fn refusals_name_the_object_and_field_the_signature_came_from() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let d = crate::plugin_source::digest(b"component");
        let other = crate::plugin_source::digest(b"other");
        let text = serde_json::to_string(&sign(&key, &other)).unwrap();
        let from_cm: PluginSource = serde_json::from_value(serde_json::json!({
            "configMap": {"name": "site-plugin", "namespace": "plugins"}
        }))
        .unwrap();
        let e = verify(Some(&policy(&[&key])), &d, Some(&text)).unwrap_err();
        assert_eq!(e.reason(), "SignatureInvalid");
        assert_eq!(
            e.message_at(&signature_location(&from_cm)),
            format!(
                "ConfigMap plugins/site-plugin: signature.json signs {other}, but the component is {d}; it is refused"
            )
        );
        let e = verify(Some(&policy(&[&key])), &d, Some("{")).unwrap_err();
        assert!(
            e.message_at(&signature_location(&from_cm))
                .starts_with("ConfigMap plugins/site-plugin: signature.json does not parse: "),
            "{e}"
        );
        let from_file: PluginSource =
            serde_json::from_value(serde_json::json!({"path": "/p/site.wasm"})).unwrap();
        let e = verify(Some(&policy(&[&key])), &d, None).unwrap_err();
        let m = e.message_at(&signature_location(&from_file));
        assert!(
            m.starts_with("file /p/site.wasm.signature.json: signature.json is missing: ")
                && m.contains("spec.plugin.signature"),
            "{m}"
        );
        let bad = SignaturePolicy {
            trusted_keys: vec!["AAAA".into()],
        };
        let e = verify(Some(&bad), &d, Some(&text)).unwrap_err();
        assert!(
            e.message_at(&signature_location(&from_cm))
                .starts_with("spec.plugin.signature.trustedKeys[0]: "),
            "{e}"
        );
    }
}

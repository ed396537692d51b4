//! Bearer tokens: the admin token written into the kubeconfig and the
//! ServiceAccount tokens minted by the TokenRequest subresource
//! (`kubectl create token`).
//!
//! ServiceAccount tokens are JWTs signed with HMAC-SHA256 (HS256) under a key
//! only this server holds. kube-apiserver signs with RS256/ES256 because other
//! parties verify its tokens (OIDC discovery, `/openid/v1/jwks`); here the only
//! verifier is the server itself, so a symmetric key gives the same integrity
//! with one small RustCrypto crate (`hmac`, beside `sha2`) instead of an RSA
//! or ECDSA stack and key-pair handling. The JWT form and claims are kube's,
//! so a token from `kubectl create token` decodes with any JWT tool. The
//! compact serialisation (three base64url parts) is written out below: a JWT
//! library would add more code and dependencies than these few lines.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Issuer and default audience of ServiceAccount tokens (kube-apiserver's
/// defaults under `--service-account-issuer`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The server's secret: signs ServiceAccount tokens and keys the constant-time
/// comparison of the admin token.
pub struct Signer {
    key: [u8; 32],
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer { key: <redacted> }")
    }
}

/// 32 random bytes from the thread-local CSPRNG (ChaCha seeded by the OS).
pub fn random_bytes() -> [u8; 32] {
    rand::random()
}

/// Reads a hex secret from `path`, or creates it (mode 0600) with `make()`.
/// Keeps tokens valid across restarts of a server with a data directory.
pub fn load_or_create(path: &Path, make: impl FnOnce() -> String) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let secret = make();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path)?;
    f.write_all(secret.as_bytes())?;
    Ok(secret)
}

impl Signer {
    pub fn new(key: [u8; 32]) -> Self {
        Signer { key }
    }

    /// A signer whose key is hex text (as stored in the data directory).
    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = hex::decode(text.trim()).ok()?;
        Some(Signer::new(bytes.try_into().ok()?))
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length; 32 bytes cannot fail.
        match HmacSha256::new_from_slice(&self.key) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC-SHA256 takes any key length"),
        }
    }

    /// HMAC of `data` (for comparing secrets without timing leaks).
    pub fn tag(&self, data: &[u8]) -> Vec<u8> {
        let mut m = self.mac();
        m.update(data);
        m.finalize().into_bytes().to_vec()
    }

    /// Constant-time check that `HMAC(data) == tag`.
    pub fn check_tag(&self, data: &[u8], tag: &[u8]) -> bool {
        let mut m = self.mac();
        m.update(data);
        m.verify_slice(tag).is_ok()
    }

    /// Key id in the JWT header: a digest of the key, not the key.
    fn kid(&self) -> String {
        B64.encode(&Sha256::digest(Sha256::digest(self.key))[..16])
    }

    /// A signed compact JWT carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "HS256", "kid": self.kid()});
        let signing_input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = B64.encode(self.tag(signing_input.as_bytes()));
        format!("{signing_input}.{sig}")
    }

    /// The claims of a JWT this signer issued, or None when the token is
    /// malformed or its signature is not ours (times are checked by the caller).
    pub fn verify(&self, token: &str) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let sig = B64.decode(s).ok()?;
        if !self.check_tag(format!("{h}.{c}").as_bytes(), &sig) {
            return None;
        }
        let header: Value = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return None;
        }
        serde_json::from_slice(&B64.decode(c).ok()?).ok()
    }
}

/// What a ServiceAccount token says: who, for whom, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaClaims {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
    pub issued_at: i64,
    pub expires_at: i64,
    pub jti: String,
}

impl SaClaims {
    /// kube-apiserver's claim set for a bound ServiceAccount token.
    pub fn to_json(&self) -> Value {
        json!({
            "aud": self.audiences,
            "exp": self.expires_at,
            "iat": self.issued_at,
            "iss": ISSUER,
            "jti": self.jti,
            "kubernetes.io": {
                "namespace": self.namespace,
                "serviceaccount": {"name": self.name, "uid": self.uid},
            },
            "nbf": self.issued_at,
            "sub": format!("system:serviceaccount:{}:{}", self.namespace, self.name),
        })
    }

    /// Parse verified claims; None when a field is missing or the subject
    /// does not match the ServiceAccount named inside.
    pub fn from_json(v: &Value) -> Option<Self> {
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let i = |p: &str| v.pointer(p).and_then(Value::as_i64);
        if s("/iss")? != ISSUER {
            return None;
        }
        let audiences = match v.get("aud")? {
            Value::String(a) => vec![a.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => return None,
        };
        let c = SaClaims {
            namespace: s("/kubernetes.io/namespace")?,
            name: s("/kubernetes.io/serviceaccount/name")?,
            uid: s("/kubernetes.io/serviceaccount/uid")?,
            audiences,
            issued_at: i("/iat")?,
            expires_at: i("/exp")?,
            jti: s("/jti").unwrap_or_default(),
        };
        let sub = format!("system:serviceaccount:{}:{}", c.namespace, c.name);
        (s("/sub")? == sub).then_some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> SaClaims {
        SaClaims {
            namespace: "ops".into(),
            name: "bot".into(),
            uid: "u-1".into(),
            audiences: vec![ISSUER.into()],
            issued_at: 1000,
            expires_at: 4600,
            jti: "j".into(),
        }
    }

    #[test]
    fn a_signed_token_verifies_and_round_trips_its_claims() {
        let s = Signer::new(random_bytes());
        let t = s.sign(&claims().to_json());
        assert_eq!(t.split('.').count(), 3);
        let back = SaClaims::from_json(&s.verify(&t).expect("valid signature")).unwrap();
        assert_eq!(back, claims());
    }

    #[test]
    fn another_key_or_an_edited_payload_is_rejected() {
        let s = Signer::new(random_bytes());
        let t = s.sign(&claims().to_json());
        assert!(Signer::new(random_bytes()).verify(&t).is_none());
        let mut forged = claims().to_json();
        forged["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        let parts: Vec<&str> = t.split('.').collect();
        let edited = format!(
            "{}.{}.{}",
            parts[0],
            B64.encode(forged.to_string()),
            parts[2]
        );
        assert!(s.verify(&edited).is_none());
        assert!(s.verify("not-a-jwt").is_none());
    }

    #[test]
    fn secrets_persist_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        let a = load_or_create(&p, || "abc".into()).unwrap();
        let b = load_or_create(&p, || "other".into()).unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("abc", "abc"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}

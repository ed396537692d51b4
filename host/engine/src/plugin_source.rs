//! Fetching a controller's component: a ConfigMap `binaryData` key or a local
//! path, checked against the optional sha256 pin before anything is compiled.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use sha2::{Digest, Sha256};

use crate::crd::PluginSource;

/// Default ConfigMap key of the component.
pub const DEFAULT_KEY: &str = "plugin.wasm";

/// Why the component bytes could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The ConfigMap could not be read.
    #[error("reading ConfigMap {namespace}/{name}: {source}")]
    ConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// The key is missing from `binaryData`.
    #[error("ConfigMap {namespace}/{name} has no binaryData key {key:?}")]
    MissingKey {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Key.
        key: String,
    },
    /// The local file could not be read.
    #[error("reading {path}: {source}")]
    File {
        /// Path.
        path: String,
        /// IO error.
        #[source]
        source: std::io::Error,
    },
    /// Neither source set.
    #[error("spec.plugin: no source")]
    NoSource,
    /// The sha256 pin does not match.
    #[error("spec.plugin.sha256: component digest {actual} does not match the pin {pinned}")]
    PinMismatch {
        /// Pinned digest.
        pinned: String,
        /// Actual digest.
        actual: String,
    },
}

/// `sha256:<hex>` of some bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Checks `bytes` against the optional pin (with or without `sha256:` prefix).
pub fn check_pin(bytes: &[u8], pin: Option<&str>) -> Result<String, SourceError> {
    let actual = digest(bytes);
    if let Some(p) = pin {
        let want = p.strip_prefix("sha256:").unwrap_or(p);
        if actual.strip_prefix("sha256:") != Some(want) {
            return Err(SourceError::PinMismatch {
                pinned: p.to_string(),
                actual,
            });
        }
    }
    Ok(actual)
}

/// Reads the component bytes and verifies the pin. Returns bytes and digest.
pub async fn fetch(
    client: &kube::Client,
    src: &PluginSource,
) -> Result<(Vec<u8>, String), SourceError> {
    let bytes = if let Some(cm) = &src.config_map {
        let key = cm.key.clone().unwrap_or_else(|| DEFAULT_KEY.to_string());
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &cm.namespace);
        let obj = api
            .get(&cm.name)
            .await
            .map_err(|source| SourceError::ConfigMap {
                namespace: cm.namespace.clone(),
                name: cm.name.clone(),
                source,
            })?;
        obj.binary_data
            .and_then(|mut m| m.remove(&key))
            .map(|b| b.0)
            .ok_or_else(|| SourceError::MissingKey {
                namespace: cm.namespace.clone(),
                name: cm.name.clone(),
                key,
            })?
    } else if let Some(path) = &src.path {
        tokio::fs::read(path)
            .await
            .map_err(|source| SourceError::File {
                path: path.clone(),
                source,
            })?
    } else {
        return Err(SourceError::NoSource);
    };
    let d = check_pin(&bytes, src.sha256.as_deref())?;
    Ok((bytes, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_accepts_matching_digest_with_or_without_prefix() {
        let d = digest(b"abc");
        assert_eq!(
            d,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(check_pin(b"abc", Some(&d)).is_ok());
        assert!(check_pin(b"abc", d.strip_prefix("sha256:")).is_ok());
        assert!(check_pin(b"abc", None).is_ok());
    }

    #[test]
    fn pin_mismatch_is_refused() {
        let other = digest(b"abd");
        assert!(matches!(
            check_pin(b"abc", Some(&other)),
            Err(SourceError::PinMismatch { .. })
        ));
    }

    #[tokio::test]
    async fn local_path_is_read_and_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        std::fs::write(&p, b"bytes").unwrap();
        let src = PluginSource {
            config_map: None,
            path: Some(p.display().to_string()),
            sha256: Some(digest(b"bytes")),
            config: None,
        };
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let (b, d) = fetch(&client, &src).await.unwrap();
        assert_eq!(b, b"bytes");
        assert_eq!(d, digest(b"bytes"));
    }
}

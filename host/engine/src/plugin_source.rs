//! Turning a controller's plugin source into component bytes: a ConfigMap
//! (single blob, raw/gzip/zstd, or a chunk set — see [`crate::chunked`]) or a
//! local path, checked against the optional sha256 pin before anything is
//! compiled.
//!
//! The ConfigMap objects come from the controller's [`crate::plugin_watch`]
//! (no API call per check); [`fetch`] reads them with GETs for one-shot callers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use sha2::{Digest, Sha256};

use crate::chunked::{self, FormatError, MANIFEST_KEY};
use crate::crd::{ConfigMapSource, PluginSource};

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
        source: Box<kube::Error>,
    },
    /// The ConfigMap does not exist.
    #[error("ConfigMap {namespace}/{name} not found")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The watch of the ConfigMap has not completed its first list yet.
    #[error("ConfigMap {namespace}/{name}: watch not synced yet")]
    NotSynced {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The key is missing from `binaryData` (and there is no chunk manifest).
    #[error(
        "ConfigMap {namespace}/{name} has neither binaryData key {key:?} nor data key {MANIFEST_KEY:?}"
    )]
    MissingKey {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Key.
        key: String,
    },
    /// The stored bytes are not a loadable component (bomb, broken stream, bad chunk set).
    #[error("ConfigMap {namespace}/{name}: {source}")]
    Format {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What is wrong.
        #[source]
        source: Box<FormatError>,
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

impl SourceError {
    /// CamelCase reason for the `PluginLoaded` condition and the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::PinMismatch { .. } => "DigestMismatch",
            SourceError::Format { source, .. } => match **source {
                FormatError::TooLarge { .. } => "TooLarge",
                FormatError::ChunkMissing { .. }
                | FormatError::ChunkMismatch { .. }
                | FormatError::WholeMismatch { .. } => "ChunkSetIncomplete",
                _ => "InvalidFormat",
            },
            _ => "SourceUnavailable",
        }
    }

    /// The message for the WasmController, naming the field of the source at
    /// `field` (`spec.plugin` or `spec.plugin.candidate`): `FIELD.path` (with
    /// the directory a relative path is read from), `FIELD.configMap` or
    /// `FIELD.sha256`.
    pub fn message_at(&self, field: &str) -> String {
        match self {
            SourceError::File { path, source } => {
                format!("{field}.path {}: {source}", path_shown(path))
            }
            // A path's bytes that are not a loadable component stream.
            SourceError::Format {
                namespace,
                name,
                source,
            } if namespace.is_empty() => format!("{field}.path {}: {source}", path_shown(name)),
            SourceError::ConfigMap { .. }
            | SourceError::NotFound { .. }
            | SourceError::NotSynced { .. }
            | SourceError::MissingKey { .. }
            | SourceError::Format { .. } => format!("{field}.configMap: {self}"),
            SourceError::NoSource => format!("{field}: no source"),
            SourceError::PinMismatch { pinned, actual } => {
                format!("{field}.sha256: component digest {actual} does not match the pin {pinned}")
            }
        }
    }
}

/// A path as written, and for a relative one the directory it is read from
/// (the host's working directory: `dev`'s, not the WasmController file's).
fn path_shown(path: &str) -> String {
    if std::path::Path::new(path).is_absolute() {
        return format!("{path:?}");
    }
    match std::env::current_dir() {
        Ok(dir) => format!(
            "{path:?} (relative to the host's working directory {})",
            dir.display()
        ),
        Err(_) => format!("{path:?}"),
    }
}

/// Where a source points, for messages about its bytes:
/// `spec.plugin.configMap ns/name key "plugin.wasm"` or `spec.plugin.path "x.wasm"`.
pub fn source_location(field: &str, src: &PluginSource) -> String {
    match (&src.config_map, &src.path) {
        (Some(cm), _) => format!(
            "{field}.configMap {}/{} key {:?}",
            cm.namespace,
            cm.name,
            cm.key.as_deref().unwrap_or(DEFAULT_KEY)
        ),
        (None, Some(path)) => format!("{field}.path {path:?}"),
        (None, None) => field.to_string(),
    }
}

/// Component bytes and where they came from.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Decoded component.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of `bytes`.
    pub digest: String,
    /// resourceVersion of the referenced ConfigMap (None for a path).
    pub resource_version: Option<String>,
    /// Text of the signature stored beside the component
    /// ([`crate::signing::SIGNATURE_KEY`] in the ConfigMap's `data`, or the
    /// file `<path>.signature.json`), checked by [`crate::signing::verify`].
    pub signature: Option<String>,
}

/// `sha256:<hex>` of some bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Checks `bytes` against the optional pin (with or without `sha256:` prefix).
pub fn check_pin(bytes: &[u8], pin: Option<&str>) -> Result<String, SourceError> {
    check_digest(&digest(bytes), pin)
}

/// Checks a `sha256:<hex>` digest against the optional pin.
fn check_digest(actual: &str, pin: Option<&str>) -> Result<String, SourceError> {
    let actual = actual.to_string();
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

/// Decodes the component held by `main` (the referenced ConfigMap), looking up
/// chunk ConfigMaps with `chunk` when it holds a manifest. Pure: callers supply
/// the objects (from a watch store or from GETs).
pub fn from_configmaps(
    src: &ConfigMapSource,
    main: Option<&ConfigMap>,
    chunk: impl FnMut(&str) -> Option<Vec<u8>>,
    pin: Option<&str>,
) -> Result<Fetched, SourceError> {
    let key = src.key.clone().unwrap_or_else(|| DEFAULT_KEY.to_string());
    let fmt = |source| SourceError::Format {
        namespace: src.namespace.clone(),
        name: src.name.clone(),
        source: Box::new(source),
    };
    let Some(cm) = main else {
        return Err(SourceError::NotFound {
            namespace: src.namespace.clone(),
            name: src.name.clone(),
        });
    };
    let bytes = if let Some(b) = cm.binary_data.as_ref().and_then(|m| m.get(&key)) {
        chunked::decode(b.0.clone(), chunked::MAX_COMPONENT_BYTES).map_err(fmt)?
    } else if let Some(text) = cm.data.as_ref().and_then(|m| m.get(MANIFEST_KEY)) {
        let manifest = chunked::parse_manifest(text).map_err(fmt)?;
        chunked::reassemble(&manifest, chunk, chunked::MAX_COMPONENT_BYTES).map_err(fmt)?
    } else {
        return Err(SourceError::MissingKey {
            namespace: src.namespace.clone(),
            name: src.name.clone(),
            key,
        });
    };
    let digest = check_pin(&bytes, pin)?;
    let signature = cm
        .data
        .as_ref()
        .and_then(|m| m.get(crate::signing::SIGNATURE_KEY))
        .cloned();
    Ok(Fetched {
        bytes,
        digest,
        resource_version: cm.metadata.resource_version.clone(),
        signature,
    })
}

/// The stored bytes of a chunk ConfigMap.
pub fn chunk_bytes(cm: &ConfigMap) -> Option<Vec<u8>> {
    cm.binary_data
        .as_ref()?
        .get(chunked::CHUNK_KEY)
        .map(|b| b.0.clone())
}

/// A path source's decoded bytes and digest, by path, with the file's length
/// and modification time when it was read.
type PathCache = HashMap<String, (u64, SystemTime, Arc<(Vec<u8>, String)>)>;

/// The manager reads a path source on every WasmController pass; decoding
/// and hashing the whole component each time was 14.5 % of the host's
/// instructions in the update profile (docs/benchmarks.md, "Host cost per
/// reconcile"). A file whose length and modification time (nanoseconds on
/// Linux) are unchanged is taken from here; the pin is still checked.
static PATH_CACHE: LazyLock<Mutex<PathCache>> = LazyLock::new(Mutex::default);

/// Reads a local component file and verifies the pin.
pub async fn fetch_path(path: &str, pin: Option<&str>) -> Result<Fetched, SourceError> {
    let file_err = |source| SourceError::File {
        path: path.to_string(),
        source,
    };
    let meta = tokio::fs::metadata(path).await.map_err(file_err)?;
    let stamp = meta.modified().ok().map(|m| (meta.len(), m));
    let cached = stamp.and_then(|(len, modified)| {
        let cache = PATH_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(path)
            .filter(|(l, m, _)| *l == len && *m == modified)
            .map(|(_, _, entry)| Arc::clone(entry))
    });
    let entry = match cached {
        Some(entry) => entry,
        None => {
            let bytes = tokio::fs::read(path).await.map_err(file_err)?;
            let bytes = chunked::decode(bytes, chunked::MAX_COMPONENT_BYTES).map_err(|source| {
                SourceError::Format {
                    namespace: String::new(),
                    name: path.to_string(),
                    source: Box::new(source),
                }
            })?;
            let digest = digest(&bytes);
            let entry = Arc::new((bytes, digest));
            if let Some((len, modified)) = stamp {
                PATH_CACHE
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(path.to_string(), (len, modified, Arc::clone(&entry)));
            }
            entry
        }
    };
    let digest = check_digest(&entry.1, pin)?;
    let bytes = entry.0.clone();
    // A signature beside the file (absent: unsigned).
    let signature = tokio::fs::read_to_string(format!("{path}.{}", crate::signing::SIGNATURE_KEY))
        .await
        .ok();
    Ok(Fetched {
        bytes,
        digest,
        resource_version: None,
        signature,
    })
}

/// One-shot read with GETs (the manager uses its watch instead).
pub async fn fetch(client: &kube::Client, src: &PluginSource) -> Result<Fetched, SourceError> {
    if let Some(cm) = &src.config_map {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &cm.namespace);
        let get_err = |source| SourceError::ConfigMap {
            namespace: cm.namespace.clone(),
            name: cm.name.clone(),
            source: Box::new(source),
        };
        let main = api.get_opt(&cm.name).await.map_err(get_err)?;
        let mut chunks = BTreeMap::new();
        if let Some(text) = main
            .as_ref()
            .and_then(|m| m.data.as_ref())
            .and_then(|d| d.get(MANIFEST_KEY))
            && let Ok(manifest) = chunked::parse_manifest(text)
        {
            for c in &manifest.chunks {
                if let Some(obj) = api.get_opt(&c.config_map).await.map_err(get_err)?
                    && let Some(b) = chunk_bytes(&obj)
                {
                    chunks.insert(c.config_map.clone(), b);
                }
            }
        }
        from_configmaps(
            cm,
            main.as_ref(),
            |n| chunks.get(n).cloned(),
            src.sha256.as_deref(),
        )
    } else if let Some(path) = &src.path {
        fetch_path(path, src.sha256.as_deref()).await
    } else {
        Err(SourceError::NoSource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

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
        let e = check_pin(b"abc", Some(&other)).unwrap_err();
        assert!(matches!(e, SourceError::PinMismatch { .. }));
        assert_eq!(e.reason(), "DigestMismatch");
    }

    fn src() -> ConfigMapSource {
        ConfigMapSource {
            name: "p".into(),
            namespace: "ns".into(),
            key: None,
        }
    }

    #[test]
    fn configmap_binary_data_is_decoded_and_reports_its_resource_version() {
        let mut cm = ConfigMap::default();
        cm.metadata.resource_version = Some("42".into());
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b"\0asm-component").unwrap();
            e.finish().unwrap()
        };
        cm.binary_data = Some(BTreeMap::from([(DEFAULT_KEY.to_string(), ByteString(gz))]));
        let f = from_configmaps(&src(), Some(&cm), |_| None, None).unwrap();
        assert_eq!(f.bytes, b"\0asm-component");
        assert_eq!(f.digest, digest(b"\0asm-component"));
        assert_eq!(f.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn missing_configmap_and_missing_key_are_source_errors() {
        assert!(matches!(
            from_configmaps(&src(), None, |_| None, None),
            Err(SourceError::NotFound { .. })
        ));
        let e = from_configmaps(&src(), Some(&ConfigMap::default()), |_| None, None).unwrap_err();
        assert!(matches!(e, SourceError::MissingKey { .. }));
        assert_eq!(e.reason(), "SourceUnavailable");
    }

    #[tokio::test]
    async fn a_missing_file_names_the_field_and_the_directory_a_relative_path_is_read_from() {
        let e = fetch_path("no-such-dir/p.wasm", None).await.unwrap_err();
        let SourceError::File { source, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            e.message_at("spec.plugin"),
            format!(
                "spec.plugin.path \"no-such-dir/p.wasm\" (relative to the host's working directory {}): {source}",
                std::env::current_dir().unwrap().display()
            )
        );
        let e = fetch_path("/no-such-dir/p.wasm", None).await.unwrap_err();
        assert!(
            e.message_at("spec.plugin.candidate")
                .starts_with("spec.plugin.candidate.path \"/no-such-dir/p.wasm\": No such file"),
            "{}",
            e.message_at("spec.plugin.candidate")
        );
    }

    #[test]
    fn configmap_and_pin_errors_name_their_field() {
        let e = from_configmaps(&src(), None, |_| None, None).unwrap_err();
        assert_eq!(
            e.message_at("spec.plugin.candidate"),
            format!("spec.plugin.candidate.configMap: {e}")
        );
        let e = check_pin(b"x", Some(&digest(b"y"))).unwrap_err();
        assert!(
            e.message_at("spec.plugin.candidate")
                .starts_with("spec.plugin.candidate.sha256: component digest sha256:"),
            "{}",
            e.message_at("spec.plugin.candidate")
        );
    }

    #[tokio::test]
    async fn local_path_is_read_and_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        std::fs::write(&p, b"bytes").unwrap();
        let src = PluginSource {
            component: crate::crd::ComponentSource {
                path: Some(p.display().to_string()),
                sha256: Some(digest(b"bytes")),
                ..Default::default()
            },
            rollback: None,
            signature: None,
            memoize: Default::default(),
            candidate: None,
        };
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let f = fetch(&client, &src).await.unwrap();
        assert_eq!(f.bytes, b"bytes");
        assert_eq!(f.digest, digest(b"bytes"));
        assert_eq!(f.signature, None);
        // A signature beside the file is read with it.
        let sig = dir.path().join("p.wasm.signature.json");
        std::fs::write(&sig, "{}").unwrap();
        let f = fetch(&client, &src).await.unwrap();
        assert_eq!(f.signature.as_deref(), Some("{}"));
    }

    #[tokio::test]
    async fn a_path_is_decoded_once_until_the_file_changes_and_the_pin_always_holds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        let path = p.display().to_string();
        std::fs::write(&p, b"first").unwrap();
        let f = fetch_path(&path, None).await.unwrap();
        assert_eq!(f.digest, digest(b"first"));
        // Cached now: a pin that does not match is still refused.
        let err = fetch_path(&path, Some(&digest(b"other")))
            .await
            .unwrap_err();
        assert!(matches!(err, SourceError::PinMismatch { .. }), "{err}");
        assert_eq!(
            fetch_path(&path, Some(&digest(b"first")))
                .await
                .unwrap()
                .bytes,
            b"first"
        );
        // A new file (another length, a later mtime) is read again.
        std::fs::write(&p, b"second version").unwrap();
        let f = fetch_path(&path, None).await.unwrap();
        assert_eq!(f.bytes, b"second version");
        assert_eq!(f.digest, digest(b"second version"));
    }

    #[test]
    fn the_signature_key_of_the_referenced_configmap_is_read() {
        let cm = ConfigMap {
            binary_data: Some(BTreeMap::from([(
                DEFAULT_KEY.to_string(),
                ByteString(b"\0asm".to_vec()),
            )])),
            data: Some(BTreeMap::from([(
                crate::signing::SIGNATURE_KEY.to_string(),
                "sig".to_string(),
            )])),
            ..ConfigMap::default()
        };
        let f = from_configmaps(&src(), Some(&cm), |_| None, None).unwrap();
        assert_eq!(f.signature.as_deref(), Some("sig"));
    }
}

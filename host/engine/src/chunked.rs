//! How a component is stored in ConfigMaps: raw, gzip or zstd in one
//! ConfigMap's `binaryData`, or — for components larger than one ConfigMap
//! (1 MiB) — split into chunk ConfigMaps listed by a manifest.
//!
//! Format (documented for users in `docs/hot-reload.md`):
//!
//! - Single: `binaryData[<key>]` holds the component, raw (`\0asm`), gzip
//!   (`1f 8b`) or zstd (`28 b5 2f fd`); the encoding is detected by magic bytes.
//! - Chunked: the referenced ConfigMap has no `binaryData[<key>]` but
//!   `data["manifest.json"]` (a [`Manifest`]); the stored blob (possibly
//!   compressed) is the concatenation of the chunks, each in
//!   `binaryData["chunk"]` of its own ConfigMap in the same namespace. Every
//!   chunk carries its sha256 and the manifest carries the sha256 of the whole
//!   decoded component, so a half-updated set is never loaded.
//!
//! Decompression is capped ([`MAX_COMPONENT_BYTES`]) to stop compression bombs.

use std::collections::BTreeMap;
use std::io::Read;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Key of the manifest in the referenced ConfigMap's `data`.
pub const MANIFEST_KEY: &str = "manifest.json";
/// Key of a chunk in a chunk ConfigMap's `binaryData`.
pub const CHUNK_KEY: &str = "chunk";
/// `format` value of a manifest this host understands.
pub const MANIFEST_FORMAT: &str = "wasm-reconciler.dev/chunked/v1";
/// Label `publish` puts on every ConfigMap of a plugin (value: the name of the
/// referenced ConfigMap); the host watches chunk ConfigMaps by it.
pub const PLUGIN_LABEL: &str = "wasm-reconciler.dev/plugin";
/// Label on every chunk ConfigMap `publish` writes (value: the chunk's index);
/// tells chunks apart from the referenced ConfigMap, which also carries
/// [`PLUGIN_LABEL`].
pub const CHUNK_LABEL: &str = "wasm-reconciler.dev/chunk";
/// Largest decoded component accepted (compression bomb guard).
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;
/// Largest payload `publish` puts into one ConfigMap: the API server caps a
/// ConfigMap's data at 1 MiB; the rest is room for metadata and the manifest.
pub const MAX_CHUNK_BYTES: usize = 900 * 1024;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const WASM_MAGIC: &[u8] = b"\0asm";

/// Compression of a stored blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Uncompressed component.
    Raw,
    /// gzip (RFC 1952).
    Gzip,
    /// Zstandard.
    Zstd,
}

/// The chunk manifest stored in `data["manifest.json"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Compression of the concatenated chunks (informational: detection is by magic).
    pub encoding: Encoding,
    /// Lowercase hex sha256 of the decoded component (the plugin's digest).
    pub sha256: String,
    /// Size of the decoded component in bytes.
    pub size: u64,
    /// Chunks in order.
    pub chunks: Vec<ChunkRef>,
}

/// One chunk: a ConfigMap in the manifest's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkRef {
    /// Name of the chunk ConfigMap.
    pub config_map: String,
    /// Lowercase hex sha256 of the chunk's bytes.
    pub sha256: String,
}

/// Why stored bytes are not a loadable component.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Decoding would exceed [`MAX_COMPONENT_BYTES`].
    #[error("decompressed component exceeds the limit of {limit} bytes (compression bomb?)")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The compressed stream is broken.
    #[error("cannot decompress {encoding:?} data: {source}")]
    Decompress {
        /// Detected encoding.
        encoding: Encoding,
        /// The decoder's error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest does not parse or has an unknown format.
    #[error("invalid chunk manifest: {0}")]
    Manifest(#[source] ManifestError),
    /// A listed chunk ConfigMap does not exist (yet).
    #[error("chunk {index} (ConfigMap {config_map}) is missing")]
    ChunkMissing {
        /// Position in the manifest.
        index: usize,
        /// Its ConfigMap.
        config_map: String,
    },
    /// A chunk's content is not what the manifest lists (stale or half-updated set).
    #[error(
        "chunk {index} (ConfigMap {config_map}) has sha256 {actual}, manifest expects {expected}"
    )]
    ChunkMismatch {
        /// Position in the manifest.
        index: usize,
        /// Its ConfigMap.
        config_map: String,
        /// Listed digest.
        expected: String,
        /// Digest of the stored chunk.
        actual: String,
    },
    /// The reassembled component does not match the manifest's sha256.
    #[error("reassembled component has sha256 {actual}, manifest expects {expected}")]
    WholeMismatch {
        /// Listed digest.
        expected: String,
        /// Digest of the reassembled component.
        actual: String,
    },
}

/// Why a chunk manifest is not one this host reads.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not the JSON of a [`Manifest`].
    #[error(transparent)]
    Json(serde_json::Error),
    /// Another `format`.
    #[error("unknown format {0:?} (expected {MANIFEST_FORMAT:?})")]
    UnknownFormat(String),
    /// An empty chunk list.
    #[error("no chunks")]
    NoChunks,
}

fn sha_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The encoding of `bytes`, by magic number (anything unknown is treated as
/// raw and left to the runtime to reject).
pub fn detect(bytes: &[u8]) -> Encoding {
    if bytes.starts_with(GZIP_MAGIC) {
        Encoding::Gzip
    } else if bytes.starts_with(ZSTD_MAGIC) {
        Encoding::Zstd
    } else {
        Encoding::Raw
    }
}

/// Decodes a stored blob into component bytes, refusing output larger than `limit`.
pub fn decode(bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>, FormatError> {
    let enc = detect(&bytes);
    let reader: Box<dyn Read + '_> = match enc {
        Encoding::Raw => {
            if bytes.len() > limit {
                return Err(FormatError::TooLarge { limit });
            }
            return Ok(bytes);
        }
        Encoding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(&bytes[..])),
        Encoding::Zstd => Box::new(zstd::stream::read::Decoder::new(&bytes[..]).map_err(
            |source| FormatError::Decompress {
                encoding: enc,
                source,
            },
        )?),
    };
    let mut out = Vec::new();
    // Read one byte past the limit: reaching it proves the stream is too big
    // without ever inflating more than limit + 1 bytes.
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|source| FormatError::Decompress {
            encoding: enc,
            source,
        })?;
    if out.len() > limit {
        return Err(FormatError::TooLarge { limit });
    }
    Ok(out)
}

/// Parses the manifest text.
pub fn parse_manifest(text: &str) -> Result<Manifest, FormatError> {
    let m: Manifest =
        serde_json::from_str(text).map_err(|e| FormatError::Manifest(ManifestError::Json(e)))?;
    if m.format != MANIFEST_FORMAT {
        return Err(FormatError::Manifest(ManifestError::UnknownFormat(
            m.format,
        )));
    }
    if m.chunks.is_empty() {
        return Err(FormatError::Manifest(ManifestError::NoChunks));
    }
    Ok(m)
}

/// Reassembles and decodes a chunked component. `chunk` returns the stored
/// bytes of a chunk ConfigMap by name (None when absent). Only a complete set
/// whose every chunk and whole match the manifest is returned.
pub fn reassemble(
    manifest: &Manifest,
    mut chunk: impl FnMut(&str) -> Option<Vec<u8>>,
    limit: usize,
) -> Result<Vec<u8>, FormatError> {
    let mut blob = Vec::new();
    for (index, c) in manifest.chunks.iter().enumerate() {
        let bytes = chunk(&c.config_map).ok_or_else(|| FormatError::ChunkMissing {
            index,
            config_map: c.config_map.clone(),
        })?;
        let actual = sha_hex(&bytes);
        if actual != c.sha256 {
            return Err(FormatError::ChunkMismatch {
                index,
                config_map: c.config_map.clone(),
                expected: c.sha256.clone(),
                actual,
            });
        }
        if blob.len() + bytes.len() > limit {
            return Err(FormatError::TooLarge { limit });
        }
        blob.extend_from_slice(&bytes);
    }
    let component = decode(blob, limit)?;
    let actual = sha_hex(&component);
    if actual != manifest.sha256 {
        return Err(FormatError::WholeMismatch {
            expected: manifest.sha256.clone(),
            actual,
        });
    }
    Ok(component)
}

/// How `publish` encodes a component.
#[derive(Debug, Clone, Copy)]
pub struct PublishOptions {
    /// Largest payload per ConfigMap.
    pub max_chunk_bytes: usize,
    /// zstd level (the smaller of raw and compressed is stored).
    pub zstd_level: i32,
}

impl Default for PublishOptions {
    fn default() -> Self {
        Self {
            max_chunk_bytes: MAX_CHUNK_BYTES,
            zstd_level: 10,
        }
    }
}

/// Why `publish` cannot produce ConfigMaps.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Not a WebAssembly binary at all.
    #[error("not a WebAssembly binary (no \\0asm header)")]
    NotWasm,
    /// Larger than the host accepts.
    #[error("component is {size} bytes; the host accepts at most {limit}")]
    TooLarge {
        /// Component size.
        size: usize,
        /// Limit.
        limit: usize,
    },
    /// Compression failed.
    #[error("compressing: {0}")]
    Compress(#[source] std::io::Error),
    /// The manifest could not be serialised.
    #[error("serialising the manifest: {0}")]
    Manifest(#[source] serde_json::Error),
}

/// The ConfigMaps that carry `component` under name `name` in `namespace`,
/// in the order they must be applied (chunks first, the referenced ConfigMap
/// last, so the host never sees a manifest before its chunks).
/// All carry the label [`PLUGIN_LABEL`]`=<name>`.
pub fn to_configmaps(
    component: &[u8],
    name: &str,
    namespace: &str,
    key: &str,
    opts: PublishOptions,
) -> Result<Vec<ConfigMap>, PublishError> {
    if !component.starts_with(WASM_MAGIC) {
        return Err(PublishError::NotWasm);
    }
    if component.len() > MAX_COMPONENT_BYTES {
        return Err(PublishError::TooLarge {
            size: component.len(),
            limit: MAX_COMPONENT_BYTES,
        });
    }
    let compressed =
        zstd::stream::encode_all(component, opts.zstd_level).map_err(PublishError::Compress)?;
    let (blob, encoding) = if compressed.len() < component.len() {
        (compressed, Encoding::Zstd)
    } else {
        (component.to_vec(), Encoding::Raw)
    };
    let meta = |n: String, extra: Option<(&str, String)>| {
        let mut labels = BTreeMap::from([(PLUGIN_LABEL.to_string(), name.to_string())]);
        if let Some((k, v)) = extra {
            labels.insert(k.to_string(), v);
        }
        ObjectMeta {
            name: Some(n),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    };
    if blob.len() <= opts.max_chunk_bytes {
        return Ok(vec![ConfigMap {
            metadata: meta(name.to_string(), None),
            binary_data: Some(BTreeMap::from([(key.to_string(), ByteString(blob))])),
            ..ConfigMap::default()
        }]);
    }
    let digest = sha_hex(component);
    // Chunk names include a prefix of the component digest, so publishing a new
    // version writes new chunk ConfigMaps and never rewrites the chunks a live
    // manifest points at; a half-applied publish leaves the old set loadable.
    let mut out = Vec::new();
    let mut refs = Vec::new();
    for (i, part) in blob.chunks(opts.max_chunk_bytes.max(1)).enumerate() {
        let cm_name = format!("{name}-{}-{i}", &digest[..10]);
        refs.push(ChunkRef {
            config_map: cm_name.clone(),
            sha256: sha_hex(part),
        });
        out.push(ConfigMap {
            metadata: meta(cm_name, Some((CHUNK_LABEL, i.to_string()))),
            binary_data: Some(BTreeMap::from([(
                CHUNK_KEY.to_string(),
                ByteString(part.to_vec()),
            )])),
            ..ConfigMap::default()
        });
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT.to_string(),
        encoding,
        sha256: digest,
        size: component.len() as u64,
        chunks: refs,
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(PublishError::Manifest)?;
    out.push(ConfigMap {
        metadata: meta(name.to_string(), None),
        data: Some(BTreeMap::from([(MANIFEST_KEY.to_string(), text)])),
        ..ConfigMap::default()
    });
    Ok(out)
}

/// Label selector of the chunk ConfigMaps of plugin `name` (any chunk set).
pub fn chunk_selector(name: &str) -> String {
    format!("{PLUGIN_LABEL}={name},{CHUNK_LABEL}")
}

/// Names of chunk ConfigMaps of plugin `name` among `existing` that the
/// just-published set `published` (the output of [`to_configmaps`], already
/// applied) no longer references: the chunk sets of earlier versions, which
/// `publish` never rewrites and so would otherwise stay forever. Only objects
/// labelled as chunks of `name` are candidates; the referenced ConfigMap and
/// every ConfigMap of the new set are kept.
///
/// Deleting them is safe once the new manifest is in place: a host reads a
/// chunk set only through the manifest it currently sees, and a version it
/// already loaded keeps running from memory.
pub fn stale_chunks(existing: &[ConfigMap], name: &str, published: &[ConfigMap]) -> Vec<String> {
    let keep: std::collections::BTreeSet<&str> = published
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .chain(std::iter::once(name))
        .collect();
    existing
        .iter()
        .filter(|c| {
            c.metadata.labels.as_ref().is_some_and(|l| {
                l.get(PLUGIN_LABEL).map(String::as_str) == Some(name) && l.contains_key(CHUNK_LABEL)
            })
        })
        .filter_map(|c| c.metadata.name.clone())
        .filter(|n| !keep.contains(n.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fake_component(n: usize) -> Vec<u8> {
        let mut v = WASM_MAGIC.to_vec();
        // Pseudo-random so zstd cannot shrink it to nothing.
        let mut x: u32 = 12345;
        for _ in 0..n {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.push((x >> 16) as u8);
        }
        v
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn raw_gzip_and_zstd_decode_to_the_same_bytes() {
        let c = fake_component(5000);
        assert_eq!(decode(c.clone(), 1 << 20).unwrap(), c);
        let gz = gzip(&c);
        assert_eq!(detect(&gz), Encoding::Gzip);
        assert_eq!(decode(gz, 1 << 20).unwrap(), c);
        let zs = zstd::stream::encode_all(&c[..], 3).unwrap();
        assert_eq!(detect(&zs), Encoding::Zstd);
        assert_eq!(decode(zs, 1 << 20).unwrap(), c);
    }

    #[test]
    fn compression_bomb_is_refused() {
        let zeros = vec![0u8; 8 << 20];
        let gz = gzip(&zeros);
        assert!(gz.len() < 64 << 10);
        assert!(matches!(
            decode(gz, 1 << 20),
            Err(FormatError::TooLarge { limit }) if limit == 1 << 20
        ));
        let zs = zstd::stream::encode_all(&zeros[..], 3).unwrap();
        assert!(matches!(
            decode(zs, 1 << 20),
            Err(FormatError::TooLarge { limit }) if limit == 1 << 20
        ));
    }

    #[test]
    fn truncated_gzip_is_a_decompress_error() {
        let gz = gzip(&fake_component(5000));
        let cut = gz[..gz.len() / 2].to_vec();
        assert!(matches!(
            decode(cut, 1 << 20),
            Err(FormatError::Decompress { .. })
        ));
    }

    fn chunk_map(cms: &[ConfigMap]) -> BTreeMap<String, Vec<u8>> {
        cms.iter()
            .filter_map(|c| {
                let b = c.binary_data.as_ref()?.get(CHUNK_KEY)?.0.clone();
                Some((c.metadata.name.clone()?, b))
            })
            .collect()
    }

    #[test]
    fn small_component_is_one_configmap_large_one_is_chunked_and_round_trips() {
        let small = fake_component(100);
        let one =
            to_configmaps(&small, "p", "ns", "plugin.wasm", PublishOptions::default()).unwrap();
        assert_eq!(one.len(), 1);
        let stored = one[0].binary_data.as_ref().unwrap()["plugin.wasm"]
            .0
            .clone();
        assert_eq!(decode(stored, 1 << 20).unwrap(), small);

        let big = fake_component(50_000);
        let opts = PublishOptions {
            max_chunk_bytes: 8 * 1024,
            zstd_level: 3,
        };
        let cms = to_configmaps(&big, "p", "ns", "plugin.wasm", opts).unwrap();
        assert!(cms.len() > 3, "{} ConfigMaps", cms.len());
        let last = cms.last().unwrap();
        assert_eq!(last.metadata.name.as_deref(), Some("p"));
        for c in &cms {
            assert_eq!(c.metadata.labels.as_ref().unwrap()[PLUGIN_LABEL], "p");
        }
        let m = parse_manifest(&last.data.as_ref().unwrap()[MANIFEST_KEY]).unwrap();
        let chunks = chunk_map(&cms);
        let back = reassemble(&m, |n| chunks.get(n).cloned(), 1 << 20).unwrap();
        assert_eq!(back, big);
    }

    #[test]
    fn a_stale_or_missing_chunk_is_refused() {
        let big = fake_component(50_000);
        let opts = PublishOptions {
            max_chunk_bytes: 8 * 1024,
            zstd_level: 3,
        };
        let cms = to_configmaps(&big, "p", "ns", "plugin.wasm", opts).unwrap();
        let m = parse_manifest(&cms.last().unwrap().data.as_ref().unwrap()[MANIFEST_KEY]).unwrap();
        let mut chunks = chunk_map(&cms);
        let second = m.chunks[1].config_map.clone();
        chunks.insert(second.clone(), b"stale".to_vec());
        assert!(matches!(
            reassemble(&m, |n| chunks.get(n).cloned(), 1 << 20),
            Err(FormatError::ChunkMismatch { index: 1, .. })
        ));
        chunks.remove(&second);
        assert!(matches!(
            reassemble(&m, |n| chunks.get(n).cloned(), 1 << 20),
            Err(FormatError::ChunkMissing { index: 1, .. })
        ));
    }

    #[test]
    fn truncated_zstd_is_a_decompress_error() {
        let zs = zstd::stream::encode_all(&fake_component(50_000)[..], 3).unwrap();
        let cut = zs[..zs.len() / 2].to_vec();
        let e = decode(cut, 1 << 20).unwrap_err();
        assert!(
            matches!(
                e,
                FormatError::Decompress {
                    encoding: Encoding::Zstd,
                    ..
                }
            ),
            "{e:?}"
        );
        // The decoder's error is the source, and its text is in the message.
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(e.to_string().ends_with(&source.to_string()), "{e}");
    }

    #[test]
    fn chunks_of_earlier_versions_are_stale_the_new_set_and_others_are_not() {
        let opts = PublishOptions {
            max_chunk_bytes: 8 * 1024,
            zstd_level: 3,
        };
        let mut v2 = fake_component(40_000);
        v2[100] ^= 1;
        let old = to_configmaps(&fake_component(40_000), "p", "ns", "k", opts).unwrap();
        let new = to_configmaps(&v2, "p", "ns", "k", opts).unwrap();
        let other = to_configmaps(&fake_component(30_000), "q", "ns", "k", opts).unwrap();
        let mut unlabelled = old[0].clone();
        unlabelled.metadata.name = Some("p-hand-made".into());
        unlabelled.metadata.labels = None;
        // What a list by label returns after the new set was applied: old
        // chunks, new chunks, the referenced ConfigMap (now the new manifest).
        let mut existing: Vec<ConfigMap> = old[..old.len() - 1].to_vec();
        existing.extend(new.iter().cloned());
        existing.extend(other.iter().cloned());
        existing.push(unlabelled);
        let mut stale = stale_chunks(&existing, "p", &new);
        stale.sort();
        let mut want: Vec<String> = old[..old.len() - 1]
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        want.sort();
        assert!(want.len() >= 3);
        assert_eq!(stale, want);
        // Publishing the same version again prunes nothing.
        assert!(stale_chunks(&new, "p", &new).is_empty());
        // A small version replacing a chunked one: every chunk is stale.
        let small = to_configmaps(&fake_component(100), "p", "ns", "k", opts).unwrap();
        assert_eq!(small.len(), 1);
        assert_eq!(
            stale_chunks(&new, "p", &small).len(),
            new.len() - 1,
            "all chunks of the chunked version"
        );
        assert_eq!(
            chunk_selector("p"),
            format!("{PLUGIN_LABEL}=p,{CHUNK_LABEL}")
        );
    }

    #[test]
    fn publish_refuses_non_wasm() {
        assert!(matches!(
            to_configmaps(b"hello", "p", "ns", "k", PublishOptions::default()),
            Err(PublishError::NotWasm)
        ));
    }

    #[test]
    fn unknown_manifest_format_is_refused() {
        let text = r#"{"format":"other","encoding":"raw","sha256":"x","size":1,"chunks":[{"configMap":"a","sha256":"b"}]}"#;
        assert!(matches!(
            parse_manifest(text),
            Err(FormatError::Manifest(_))
        ));
    }
}

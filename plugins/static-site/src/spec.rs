//! The `StaticSite` spec and the controller config, validated with error
//! messages that name the offending field.

use std::collections::BTreeMap;

use wr_plugin_sdk::{Error, Value, content_hash};

/// Largest total content: a ConfigMap holds at most 1 MiB.
pub const MAX_CONTENT_BYTES: usize = 1024 * 1024 - 4096;

/// A validated `spec`.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteSpec {
    pub image: String,
    pub replicas: i64,
    pub port: i64,
    /// File name -> file contents, sorted by name.
    pub content: BTreeMap<String, String>,
}

/// Per-controller settings.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// DNS suffix used in `status.url` (default `cluster.local`).
    #[serde(default = "default_domain")]
    pub cluster_domain: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cluster_domain: default_domain(),
        }
    }
}

fn default_domain() -> String {
    "cluster.local".into()
}

impl SiteSpec {
    /// Reads and validates `parent.spec`. Hand-written rather than derived so
    /// every message names the exact field (`spec.replicas`, ...).
    pub fn parse(parent: &Value) -> Result<SiteSpec, Error> {
        let spec = parent.get("spec").unwrap_or(&Value::Null);
        let image = match spec.get("image") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(Error::invalid_spec("spec.image", "required"));
            }
            Some(_) => return Err(Error::invalid_spec("spec.image", "must be a string")),
        };
        let replicas = int_field(spec, "replicas", 1)?;
        if replicas < 0 {
            return Err(Error::invalid_spec(
                "spec.replicas",
                &format!("must be >= 0, got {replicas}"),
            ));
        }
        let port = int_field(spec, "port", 80)?;
        if !(1..=65535).contains(&port) {
            return Err(Error::invalid_spec(
                "spec.port",
                &format!("must be between 1 and 65535, got {port}"),
            ));
        }
        let content = content_field(spec)?;
        Ok(SiteSpec {
            image,
            replicas,
            port,
            content,
        })
    }

    /// sha256 (hex) over each file in name order as `name NUL contents NUL`.
    pub fn content_hash(&self) -> String {
        let mut bytes = Vec::new();
        for (name, body) in &self.content {
            bytes.extend_from_slice(name.as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(body.as_bytes());
            bytes.push(0);
        }
        content_hash(&bytes)
    }
}

fn int_field(spec: &Value, field: &str, default: i64) -> Result<i64, Error> {
    match spec.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| Error::invalid_spec(&format!("spec.{field}"), "must be an integer")),
    }
}

fn content_field(spec: &Value) -> Result<BTreeMap<String, String>, Error> {
    let mut content = BTreeMap::new();
    let map = match spec.get("content") {
        None | Some(Value::Null) => return Ok(content),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(Error::invalid_spec(
                "spec.content",
                "must be a map of file name to contents",
            ));
        }
    };
    let mut total = 0;
    for (name, body) in map {
        if !valid_key(name) {
            return Err(Error::invalid_spec(
                &format!("spec.content[{name:?}]"),
                "file name must be 1-253 characters of letters, digits, '-', '_' or '.'",
            ));
        }
        let Value::String(body) = body else {
            return Err(Error::invalid_spec(
                &format!("spec.content[{name:?}]"),
                "must be a string",
            ));
        };
        total += name.len() + body.len();
        content.insert(name.clone(), body.clone());
    }
    if total > MAX_CONTENT_BYTES {
        return Err(Error::invalid_spec(
            "spec.content",
            &format!("{total} bytes is over the limit of {MAX_CONTENT_BYTES}"),
        ));
    }
    Ok(content)
}

/// A valid ConfigMap key.
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

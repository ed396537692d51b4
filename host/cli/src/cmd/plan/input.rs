//! Parsing `plan`'s flags: `--config JSON|@FILE`, `--parent NS/NAME`, `--now`.

use anyhow::{Context, bail};
use serde_json::Value;
use wr_engine::queue::ObjectKey;

/// `--config`: inline JSON, or `@FILE` holding JSON or YAML.
pub fn config(arg: &str) -> anyhow::Result<Value> {
    match arg.strip_prefix('@') {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --config file {path}"))?;
            serde_yaml::from_str(&text)
                .with_context(|| format!("--config file {path}: not valid JSON or YAML"))
        }
        None => {
            serde_json::from_str(arg).context("--config: not valid JSON (use @FILE for a file)")
        }
    }
}

/// `--parent` values: `NAMESPACE/NAME`, or `NAME` for a cluster-scoped parent.
pub fn parent_keys(args: &[String]) -> anyhow::Result<Option<Vec<ObjectKey>>> {
    if args.is_empty() {
        return Ok(None);
    }
    let mut keys = Vec::new();
    for a in args {
        let key = match a.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                ObjectKey {
                    namespace: Some(ns.to_string()),
                    name: name.to_string(),
                }
            }
            None if !a.is_empty() => ObjectKey {
                namespace: None,
                name: a.clone(),
            },
            _ => bail!("--parent {a:?}: expected NAMESPACE/NAME or NAME"),
        };
        keys.push(key);
    }
    Ok(Some(keys))
}

/// `NS/NAME` or `NAME`.
pub fn show_key(k: &ObjectKey) -> String {
    match &k.namespace {
        Some(ns) => format!("{ns}/{}", k.name),
        None => k.name.clone(),
    }
}

/// `--now` validated and written in UTC with a `Z` (as the host writes it),
/// or the current time to the second.
pub fn now(arg: Option<&str>) -> anyhow::Result<String> {
    let t = match arg {
        Some(text) => chrono::DateTime::parse_from_rfc3339(text)
            .with_context(|| format!("--now {text:?} is not an RFC 3339 timestamp"))?
            .with_timezone(&chrono::Utc),
        None => chrono::Utc::now(),
    };
    Ok(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_inline_or_from_a_yaml_file() {
        assert_eq!(config(r#"{"mode":"ok"}"#).unwrap()["mode"], "ok");
        assert!(config("{nope").is_err());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, "mode: ok\nn: 2\n").unwrap();
        let v = config(&format!("@{}", f.display())).unwrap();
        assert_eq!((v["mode"].as_str(), v["n"].as_i64()), (Some("ok"), Some(2)));
    }

    #[test]
    fn parent_keys_are_namespaced_or_cluster_scoped() {
        let k = parent_keys(&["ns/a".into(), "b".into()]).unwrap().unwrap();
        assert_eq!(show_key(&k[0]), "ns/a");
        assert_eq!(k[1].namespace, None);
        assert!(parent_keys(&["a/b/c".into()]).is_err());
        assert!(parent_keys(&["/x".into()]).is_err());
        assert_eq!(parent_keys(&[]).unwrap(), None);
    }

    #[test]
    fn now_is_utc_to_the_second() {
        assert_eq!(
            now(Some("2026-11-30T10:00:00+01:00")).unwrap(),
            "2026-11-30T09:00:00Z"
        );
        assert!(now(Some("later")).is_err());
        assert!(now(None).unwrap().ends_with('Z'));
    }
}

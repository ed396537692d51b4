//! `wasm-reconciler publish`: turn a component into the ConfigMap(s) a
//! WasmController references — one ConfigMap when it fits (zstd-compressed when
//! that is smaller), otherwise chunk ConfigMaps plus a manifest (format in
//! `docs/hot-reload.md`). Prints them as YAML (`-o yaml`, the default) or
//! server-side applies them (`--apply`), chunks first and the manifest last so
//! the host never sees a manifest whose chunks are not there yet.
//! `--apply --prune` then deletes the chunk ConfigMaps of earlier versions
//! that the new manifest no longer references (publish never rewrites a chunk
//! set, so without pruning every chunked version stays behind).
//!
//! Before anything is written the component is compiled locally exactly as
//! the host loads it: a file that is not a component, imports what the host
//! does not provide or implements no supported world is refused (exit 5).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use wr_engine::chunked::{self, PublishOptions};

/// Field manager of `publish --apply`.
const FIELD_MANAGER: &str = "wasm-reconciler-publish";

#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The component (.wasm).
    #[arg(long)]
    pub plugin: PathBuf,
    /// Name of the ConfigMap the WasmController references (`spec.plugin.configMap.name`).
    #[arg(long)]
    pub name: String,
    /// Namespace of the ConfigMap(s).
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// binaryData key of a single-ConfigMap component.
    #[arg(long, default_value = wr_engine::plugin_source::DEFAULT_KEY)]
    pub key: String,
    /// Server-side apply the ConfigMaps to the cluster instead of printing them.
    #[arg(long, conflicts_with = "output")]
    pub apply: bool,
    /// With --apply: afterwards delete chunk ConfigMaps of earlier versions of
    /// this plugin that the new manifest no longer references.
    #[arg(long, requires = "apply")]
    pub prune: bool,
    /// Output format when not applying (only `yaml`).
    #[arg(long, short = 'o', value_parser = ["yaml"])]
    pub output: Option<String>,
    /// Kubeconfig file for `--apply` (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// zstd compression level (1-22).
    #[arg(long, default_value_t = 10)]
    pub zstd_level: i32,
    /// With --apply: create the namespace when it does not exist.
    #[arg(long, requires = "apply")]
    pub create_namespace: bool,
    /// Do not compile the component locally first (for a host newer than
    /// this binary, whose world this binary does not know).
    #[arg(long)]
    pub skip_check: bool,
    /// Sign the component's digest with this ed25519 private key (PKCS#8
    /// PEM from `wasm-reconciler keygen` or `openssl genpkey -algorithm
    /// ed25519`): the signature goes into the referenced ConfigMap's
    /// `data["signature.json"]`, checked against `spec.plugin.signature`.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    /// With --sign: also write the signature to this file (for a `path`
    /// source, put it beside the component as `<file>.signature.json`).
    #[arg(long, value_name = "FILE", requires = "sign")]
    pub signature_out: Option<PathBuf>,
    /// Directory of the precompiled-plugin cache used by the check.
    #[arg(long, value_name = "DIR", env = "WASM_RECONCILER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// Compiles the component as the host would and checks its world; the
/// host's load error when it would be refused.
fn check_loads(args: &PublishArgs, bytes: &[u8]) -> anyhow::Result<Result<(), String>> {
    let runtime = super::plugin_runtime::create(wr_runtime::RuntimeConfig {
        cache_dir: super::plugin_runtime::cache_dir(false, args.cache_dir.as_ref()),
        max_instances: 1,
        ..wr_runtime::RuntimeConfig::default()
    })?;
    Ok(runtime.load(bytes).map(|_| ()).map_err(|e| e.to_string()))
}

/// A Kubernetes API error as one readable line (its message, reason and
/// code) instead of the client's debug dump of the whole `Status`.
fn api_error(err: kube::Error, what: &str) -> anyhow::Error {
    match err {
        kube::Error::Api(s) => {
            anyhow::anyhow!("{what}: {} ({}, HTTP {})", s.message, s.reason, s.code)
        }
        other => anyhow::Error::new(other).context(what.to_string()),
    }
}

/// True for the API server's answer to a write into a namespace that does not exist.
fn namespace_missing(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404
        && s.details.as_ref().is_some_and(|d| d.kind == "namespaces"))
}

pub fn run(args: PublishArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("reading {}", args.plugin.display()))?;
    if !args.skip_check
        && let Err(err) = check_loads(&args, &bytes)?
    {
        eprintln!(
            "error: refusing to publish {}: the host would not load it: {err}",
            args.plugin.display()
        );
        return Ok(ExitCode::from(super::plugin_runtime::EXIT_FAULT));
    }
    let opts = PublishOptions {
        zstd_level: args.zstd_level,
        ..PublishOptions::default()
    };
    let mut cms = chunked::to_configmaps(&bytes, &args.name, &args.namespace, &args.key, opts)
        .context("encoding the component")?;
    let digest = wr_engine::plugin_source::digest(&bytes);
    if let Some(key) = &args.sign {
        let signature = sign(key, &digest, &mut cms)?;
        if let Some(out) = &args.signature_out {
            std::fs::write(out, &signature)
                .with_context(|| format!("writing {}", out.display()))?;
        }
    }
    tracing::info!(digest = %digest, configmaps = cms.len(), bytes = bytes.len(), "component encoded");
    if !args.apply {
        print!("{}", to_yaml(&cms)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let pruned = rt.block_on(apply(&args, &cms))?;
    println!(
        "published {digest} as {} ConfigMap(s) {}/{}",
        cms.len(),
        args.namespace,
        args.name
    );
    if args.prune {
        println!(
            "pruned {} chunk ConfigMap(s) of earlier versions",
            pruned.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Signs `digest` with the key in `key_path` and stores the signature in the
/// referenced ConfigMap (the last of `cms`); returns the signature's text.
fn sign(key_path: &std::path::Path, digest: &str, cms: &mut [ConfigMap]) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(key_path)
        .with_context(|| format!("reading --sign {}", key_path.display()))?;
    let key = wr_engine::signing::parse_private_key(&text)
        .with_context(|| format!("--sign {}", key_path.display()))?;
    let signature = wr_engine::signing::sign(&key, digest);
    let json = serde_json::to_string_pretty(&signature).context("rendering the signature")?;
    let referenced = cms
        .last_mut()
        .context("no ConfigMap to carry the signature")?;
    referenced
        .data
        .get_or_insert_with(Default::default)
        .insert(wr_engine::signing::SIGNATURE_KEY.to_string(), json.clone());
    tracing::info!(digest = %digest, key_id = %signature.key_id, "component signed");
    Ok(json)
}

/// Multi-document YAML, in apply order.
pub fn to_yaml(cms: &[ConfigMap]) -> anyhow::Result<String> {
    let mut out = String::new();
    for cm in cms {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(cm).context("rendering YAML")?);
    }
    Ok(out)
}

/// Applies `cms` in order; with `--prune`, then deletes stale chunk
/// ConfigMaps and returns their names.
async fn apply(args: &PublishArgs, cms: &[ConfigMap]) -> anyhow::Result<Vec<String>> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => super::user_client::infer().await?,
    };
    let client = kube::Client::try_from(config)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    for cm in cms {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let what = format!("applying ConfigMap {}/{name}", args.namespace);
        match api.patch(&name, &pp, &Patch::Apply(cm)).await {
            Ok(_) => {}
            Err(e) if namespace_missing(&e) && args.create_namespace => {
                create_namespace(&client, &args.namespace).await?;
                api.patch(&name, &pp, &Patch::Apply(cm))
                    .await
                    .map_err(|e| api_error(e, &what))?;
            }
            Err(e) if namespace_missing(&e) => anyhow::bail!(
                "namespace {:?} does not exist: create it (kubectl create namespace {}) or pass --create-namespace",
                args.namespace,
                args.namespace
            ),
            Err(e) => return Err(api_error(e, &what)),
        }
    }
    if !args.prune {
        return Ok(Vec::new());
    }
    prune(&api, args, cms).await
}

async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&kube::api::PostParams::default(), &ns).await {
        Ok(_) => {
            tracing::info!(namespace = %name, "created namespace");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(api_error(e, &format!("creating namespace {name}"))),
    }
}

/// Deletes the chunk ConfigMaps of `args.name` that `cms` (just applied) does
/// not reference. Runs only after the new manifest is in place.
async fn prune(
    api: &Api<ConfigMap>,
    args: &PublishArgs,
    cms: &[ConfigMap],
) -> anyhow::Result<Vec<String>> {
    let existing = api
        .list(&ListParams::default().labels(&chunked::chunk_selector(&args.name)))
        .await
        .map_err(|e| api_error(e, &format!("listing chunk ConfigMaps of {}", args.name)))?;
    let stale = chunked::stale_chunks(&existing.items, &args.name, cms);
    for name in &stale {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            // Already gone (a concurrent prune): nothing to do.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(api_error(
                    e,
                    &format!("deleting ConfigMap {}/{name}", args.namespace),
                ));
            }
        }
        tracing::info!(namespace = %args.namespace, configmap = %name, "pruned stale chunk ConfigMap");
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--sign` puts the signature into the referenced ConfigMap (the last,
    /// holding the manifest when chunked), where the host verifies it.
    #[test]
    fn sign_stores_a_verifiable_signature_in_the_referenced_configmap() {
        let dir = tempfile::tempdir().unwrap();
        let (private, _, public) = wr_engine::signing::generate([3; 32]).unwrap();
        let key = dir.path().join("k");
        std::fs::write(&key, private).unwrap();
        // Incompressible, so it is chunked.
        let mut component = b"\0asm".to_vec();
        let mut x: u32 = 9;
        for _ in 0..20_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            component.push((x >> 24) as u8);
        }
        let opts = PublishOptions {
            max_chunk_bytes: 1_000,
            zstd_level: 1,
        };
        let mut cms = chunked::to_configmaps(&component, "p", "ns", "plugin.wasm", opts).unwrap();
        let digest = wr_engine::plugin_source::digest(&component);
        sign(&key, &digest, &mut cms).unwrap();
        let last = cms.last().unwrap().data.as_ref().unwrap();
        assert!(last.contains_key(chunked::MANIFEST_KEY));
        let policy = wr_engine::crd::SignaturePolicy {
            trusted_keys: vec![public],
        };
        let text = last
            .get(wr_engine::signing::SIGNATURE_KEY)
            .map(String::as_str);
        wr_engine::signing::verify(Some(&policy), &digest, text).unwrap();
        let others = &cms[..cms.len() - 1];
        assert!(others.iter().all(|c| c.data.is_none()));
    }

    #[test]
    fn yaml_lists_chunks_before_the_manifest_and_parses_back() {
        let mut component = b"\0asm\x0d\x00\x01\x00".to_vec();
        let mut x: u32 = 7;
        for _ in 0..40_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            component.push((x >> 24) as u8);
        }
        let opts = PublishOptions {
            max_chunk_bytes: 10_000,
            zstd_level: 3,
        };
        let cms = chunked::to_configmaps(&component, "p", "ns", "plugin.wasm", opts).unwrap();
        let yaml = to_yaml(&cms).unwrap();
        let docs: Vec<ConfigMap> = yaml
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_yaml::from_str(d).unwrap())
            .collect();
        assert_eq!(docs.len(), cms.len());
        assert!(docs.len() >= 5);
        let last = docs.last().unwrap();
        assert_eq!(last.metadata.name.as_deref(), Some("p"));
        assert!(
            last.data
                .as_ref()
                .unwrap()
                .contains_key(chunked::MANIFEST_KEY)
        );
        let m =
            chunked::parse_manifest(&last.data.as_ref().unwrap()[chunked::MANIFEST_KEY]).unwrap();
        let back = chunked::reassemble(
            &m,
            |n| {
                docs.iter()
                    .find(|d| d.metadata.name.as_deref() == Some(n))
                    .and_then(wr_engine::plugin_source::chunk_bytes)
            },
            1 << 20,
        )
        .unwrap();
        assert_eq!(back, component);
    }
}

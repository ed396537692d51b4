//! What `dev` installs: the WasmController CRD (from the engine's types), the
//! example CRDs, the example WasmControllers pointed at local component files,
//! and the sample parents. The example YAML is compiled in, so the binary works
//! from any directory.
//!
//! Installing is idempotent, so a restart on a `--data-dir` converges instead
//! of failing: CRDs and WasmControllers are server-side applied (a restart
//! with another `--plugin-dir` repoints them); sample parents are only created
//! when missing, so edits made with kubectl survive a restart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};

/// Field manager of everything `dev` writes itself.
pub const FIELD_MANAGER: &str = "wasm-reconciler-dev";

/// One example: its manifests and the component file it runs.
struct Example {
    /// WasmController name, also the plugin crate name.
    name: &'static str,
    /// File name of the component in the plugin directory.
    file: &'static str,
    crd: &'static str,
    controller: &'static str,
    samples: &'static str,
}

const EXAMPLES: &[Example] = &[
    Example {
        name: "static-site",
        file: "static_site.wasm",
        crd: include_str!("../../../../../examples/static-site/crd.yaml"),
        controller: include_str!("../../../../../examples/static-site/controller.yaml"),
        samples: include_str!("../../../../../examples/static-site/site.yaml"),
    },
    Example {
        name: "tombstone",
        file: "tombstone.wasm",
        crd: include_str!("../../../../../examples/tombstone/crd.yaml"),
        controller: include_str!("../../../../../examples/tombstone/controller.yaml"),
        samples: include_str!("../../../../../examples/tombstone/workspace.yaml"),
    },
];

/// A WasmController and the local component file it loads.
#[derive(Debug, Clone)]
pub struct PluginFile {
    /// WasmController name.
    pub controller: String,
    /// Absolute path of the component.
    pub path: PathBuf,
}

/// The component files of the examples in `dir`.
///
/// For the default directory (`explicit` false) every example must be there:
/// a missing one is the usual first-run mistake, so it fails with build
/// instructions. A directory given with `--plugin-dir` may hold only the
/// user's own components: the examples found there are installed, the others
/// are skipped (and said so), and the directory must exist.
pub fn plugin_files(dir: &Path, explicit: bool) -> anyhow::Result<Vec<PluginFile>> {
    let files: Vec<PluginFile> = EXAMPLES
        .iter()
        .map(|e| PluginFile {
            controller: e.name.to_string(),
            path: dir.join(e.file),
        })
        .collect();
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !f.path.is_file())
        .map(|f| f.path.display().to_string())
        .collect();
    if explicit {
        if !dir.is_dir() {
            bail!("--plugin-dir {} is not a directory", dir.display());
        }
        for f in files.iter().filter(|f| !f.path.is_file()) {
            tracing::info!(
                controller = %f.controller,
                component = %f.path.display(),
                "example component not in --plugin-dir; that example is not installed"
            );
        }
        return Ok(files.into_iter().filter(|f| f.path.is_file()).collect());
    }
    if !missing.is_empty() {
        bail!(
            "example plugin components not found: {}\n\
             build them first with `plugins/build.sh` (from the repository root), \
             or point --plugin-dir at a directory holding your own components (or {})",
            missing.join(", "),
            EXAMPLES
                .iter()
                .map(|e| e.file)
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    Ok(files)
}

/// The YAML documents of `text`, skipping empty ones.
pub fn documents(text: &str) -> anyhow::Result<Vec<Value>> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).context("parsing embedded example YAML")?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// The CRDs and WasmControllers `install` applies (for `rbac` to read): those
/// of the examples whose component is in `plugins`, each with its own file.
pub fn manifests(plugins: &[PluginFile]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for e in EXAMPLES {
        let Some(file) = plugins.iter().find(|f| f.controller == e.name) else {
            continue;
        };
        out.extend(documents(e.crd)?);
        for wc in documents(e.controller)? {
            out.push(with_local_plugin(wc, &file.path)?);
        }
    }
    Ok(out)
}

/// `controller` with its plugin source replaced by the local `path` (the
/// example's `config` kept): dev needs no ConfigMap and can watch the file.
pub fn with_local_plugin(mut controller: Value, path: &Path) -> anyhow::Result<Value> {
    let plugin = controller
        .pointer_mut("/spec/plugin")
        .and_then(Value::as_object_mut)
        .context("example WasmController has no spec.plugin")?;
    plugin.remove("configMap");
    plugin.remove("sha256");
    plugin.insert("path".into(), json!(path.display().to_string()));
    Ok(controller)
}

/// Installs CRDs, WasmControllers and (with `samples`) the sample parents.
pub async fn install(client: &Client, plugins: &[PluginFile], samples: bool) -> anyhow::Result<()> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut all = vec![serde_json::to_value(wr_engine::WasmController::crd())?];
    for e in EXAMPLES {
        all.extend(documents(e.crd)?);
    }
    for crd in &all {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("CRD without a name")?;
        crds.patch(name, &pp, &Patch::Apply(crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
    }

    let wc_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    );
    wait_served(
        client,
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    )
    .await?;
    for e in EXAMPLES {
        // Examples without a component (a --plugin-dir of your own) are skipped.
        let Some(file) = plugins.iter().find(|f| f.controller == e.name) else {
            continue;
        };
        for wc in documents(e.controller)? {
            let wc = with_local_plugin(wc, &file.path)?;
            wc_api
                .patch(e.name, &pp, &Patch::Apply(&wc))
                .await
                .with_context(|| format!("applying WasmController {}", e.name))?;
            tracing::info!(controller = e.name, plugin = %file.path.display(), "WasmController installed");
        }
    }

    if samples {
        for e in EXAMPLES {
            if !plugins.iter().any(|f| f.controller == e.name) {
                continue;
            }
            for obj in documents(e.samples)? {
                create_if_missing(client, obj).await?;
            }
        }
    }
    Ok(())
}

/// Creates `obj` unless an object of that name exists (409 is success).
async fn create_if_missing(client: &Client, obj: Value) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(obj).context("sample object")?;
    let types = obj
        .types
        .clone()
        .context("sample object without apiVersion/kind")?;
    let gvk = kube::core::GroupVersionKind::try_from(&types)?;
    let ar = wait_kind(client, &gvk).await?;
    let name = obj.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = match &obj.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {
            tracing::info!(kind = %gvk.kind, name = %name, "sample created");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating sample {} {name}", gvk.kind)),
    }
}

/// How long a freshly applied CRD may take to appear in discovery.
const DISCOVERY_WAIT: Duration = Duration::from_secs(10);

/// Waits until discovery serves `gvk` and returns its ApiResource.
async fn wait_kind(
    client: &Client,
    gvk: &kube::core::GroupVersionKind,
) -> anyhow::Result<ApiResource> {
    let deadline = tokio::time::Instant::now() + DISCOVERY_WAIT;
    loop {
        match kube::discovery::oneshot::pinned_kind(client, gvk).await {
            Ok((ar, _)) => return Ok(ar),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(e).with_context(|| format!("{} never appeared in discovery", gvk.kind));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn wait_served(client: &Client, ar: &ApiResource) -> anyhow::Result<()> {
    let gvk = kube::core::GroupVersionKind::gvk(&ar.group, &ar.version, &ar.kind);
    wait_kind(client, &gvk).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_has_a_crd_a_controller_and_a_sample() {
        for e in EXAMPLES {
            let crds = documents(e.crd).unwrap();
            let wcs = documents(e.controller).unwrap();
            let samples = documents(e.samples).unwrap();
            assert_eq!(crds.len(), 1, "{}", e.name);
            assert_eq!(wcs.len(), 1, "{}", e.name);
            assert_eq!(wcs[0]["metadata"]["name"], e.name);
            assert!(!samples.is_empty(), "{}", e.name);
            // Each sample is of the kind its CRD defines.
            let group = crds[0]["spec"]["group"].as_str().unwrap();
            let kind = crds[0]["spec"]["names"]["kind"].as_str().unwrap();
            for s in &samples {
                assert_eq!(s["kind"], kind);
                assert!(s["apiVersion"].as_str().unwrap().starts_with(group));
            }
        }
    }

    #[test]
    fn local_plugin_replaces_the_configmap_source_and_keeps_config() {
        let wc = documents(EXAMPLES[0].controller).unwrap().remove(0);
        assert!(wc["spec"]["plugin"]["configMap"].is_object());
        let out = with_local_plugin(wc, Path::new("/p/static_site.wasm")).unwrap();
        let plugin = &out["spec"]["plugin"];
        assert_eq!(plugin["path"], "/p/static_site.wasm");
        assert!(plugin.get("configMap").is_none());
        assert_eq!(plugin["config"]["clusterDomain"], "cluster.local");
        // The result is a valid WasmController.
        let _: wr_engine::WasmController = serde_json::from_value(out).unwrap();
    }

    #[test]
    fn missing_components_are_reported_with_build_instructions() {
        let dir = tempfile::tempdir().unwrap();
        let err = plugin_files(dir.path(), false).unwrap_err().to_string();
        assert!(err.contains("static_site.wasm"), "{err}");
        assert!(err.contains("plugins/build.sh"), "{err}");
        for e in EXAMPLES {
            std::fs::write(dir.path().join(e.file), b"x").unwrap();
        }
        let files = plugin_files(dir.path(), false).unwrap();
        assert_eq!(files.len(), EXAMPLES.len());
    }

    #[test]
    fn a_plugin_dir_of_your_own_needs_no_example_components() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.wasm"), b"x").unwrap();
        assert!(plugin_files(dir.path(), true).unwrap().is_empty());
        std::fs::write(dir.path().join(EXAMPLES[0].file), b"x").unwrap();
        let files = plugin_files(dir.path(), true).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].controller, EXAMPLES[0].name);
        assert!(plugin_files(&dir.path().join("nope"), true).is_err());
    }
}

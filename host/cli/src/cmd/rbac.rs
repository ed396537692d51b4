//! `wasm-reconciler rbac [-f FILE|DIR|- ...]`: print the least-privilege RBAC
//! for the host running the given WasmControllers — a ClusterRole with exactly
//! the verbs on exactly the resources their parents, children and related
//! objects need, a Role for the leader-election Lease, a Role in each
//! namespace holding plugin ConfigMaps (when ConfigMaps are not readable
//! cluster-wide anyway), and the bindings to the host's ServiceAccount — so
//! operators never grant `*`. `host/cli/tests/rbac_requests.rs` checks the
//! output for the examples against every request the host makes.
//!
//! Input: YAML/JSON files (multi-document, `kind: List` too, `-` for stdin, a
//! directory for its `*.yaml|*.yml|*.json`, recursively). Documents other than
//! WasmControllers are ignored, except CustomResourceDefinitions, whose
//! `names.plural` resolves references given by `kind`.

mod rules;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;
use wr_engine::crd::WasmControllerSpec;

use rules::KnownPlurals;

#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// WasmController manifests: files, directories, or `-` for stdin.
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<PathBuf>,
    /// Name of the ClusterRole, Role and bindings.
    #[arg(long, default_value = "wasm-reconciler")]
    pub name: String,
    /// Namespace the host runs in (its Lease and ServiceAccount live there).
    #[arg(long, default_value = "wasm-reconciler")]
    pub namespace: String,
    /// ServiceAccount the host runs as.
    #[arg(long, default_value = "wasm-reconciler")]
    pub service_account: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "wasm-reconciler")]
    pub lease_name: String,
    /// Print only the ClusterRole (no Lease Role, no bindings).
    #[arg(long)]
    pub cluster_role_only: bool,
}

pub fn run(args: RbacArgs) -> anyhow::Result<ExitCode> {
    let mut docs = Vec::new();
    for f in &args.files {
        docs.extend(read(f)?);
    }
    let (controllers, known) = collect(&docs)?;
    if !args.files.is_empty() && controllers.is_empty() {
        bail!("no WasmController found in the given files");
    }
    print!("{}", render(&args, &controllers, &known)?);
    Ok(ExitCode::SUCCESS)
}

/// The documents `rbac` prints for the WasmControllers (and CRDs) in
/// `docs`, bound to ServiceAccount `namespace/service_account` (names and
/// Lease as the command's defaults). `dev --authorization rbac` applies them.
#[cfg_attr(not(feature = "dev"), allow(dead_code))] // only `dev` grants itself RBAC
pub fn documents(
    docs: &[Value],
    namespace: &str,
    service_account: &str,
) -> anyhow::Result<Vec<Value>> {
    let args = RbacArgs {
        files: Vec::new(),
        name: "wasm-reconciler".into(),
        namespace: namespace.into(),
        service_account: service_account.into(),
        lease_name: "wasm-reconciler".into(),
        cluster_role_only: false,
    };
    let (controllers, known) = collect(docs)?;
    parse(&render(&args, &controllers, &known)?)
}

/// Every object in `path` (file, directory or `-`).
pub(crate) fn read(path: &Path) -> anyhow::Result<Vec<Value>> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        return parse(&text).context("stdin");
    }
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("listing {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_dir()
                    || p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            })
            .collect();
        entries.sort();
        let mut out = Vec::new();
        for e in entries {
            out.extend(read(&e)?);
        }
        return Ok(out);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| path.display().to_string())
}

/// Documents of a YAML/JSON text, `List`s expanded.
fn parse(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).with_context(|| format!("document {}", i + 1))?;
        match v.get("items").and_then(Value::as_array) {
            Some(items) if kind(&v).ends_with("List") => out.extend(items.iter().cloned()),
            _ if !v.is_null() => out.push(v),
            _ => {}
        }
    }
    Ok(out)
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

type Controllers = Vec<(String, WasmControllerSpec)>;

/// WasmControllers (name, spec) and CRD plurals from the documents.
fn collect(docs: &[Value]) -> anyhow::Result<(Controllers, KnownPlurals)> {
    let mut controllers = Vec::new();
    let mut known = KnownPlurals::new();
    for d in docs {
        let api = d.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        match kind(d) {
            "WasmController" if api.starts_with(wr_engine::crd::GROUP) => {
                let name = d
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)")
                    .to_string();
                let spec: WasmControllerSpec =
                    serde_json::from_value(d.get("spec").cloned().unwrap_or(Value::Null))
                        .with_context(|| format!("WasmController {name}: invalid spec"))?;
                spec.validate()
                    .with_context(|| format!("WasmController {name}"))?;
                controllers.push((name, spec));
            }
            "CustomResourceDefinition" => {
                let group = d.pointer("/spec/group").and_then(Value::as_str);
                let k = d.pointer("/spec/names/kind").and_then(Value::as_str);
                let plural = d.pointer("/spec/names/plural").and_then(Value::as_str);
                if let (Some(g), Some(k), Some(p)) = (group, k, plural) {
                    known.insert((g.to_string(), k.to_string()), p.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((controllers, known))
}

/// The YAML stream printed by the command.
fn render(
    args: &RbacArgs,
    controllers: &Controllers,
    known: &KnownPlurals,
) -> anyhow::Result<String> {
    let names: Vec<&str> = controllers.iter().map(|(n, _)| n.as_str()).collect();
    let mut out = format!(
        "# Least-privilege RBAC for wasm-reconciler, generated by `wasm-reconciler rbac`\n# for WasmControllers: {}\n",
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        }
    );
    let meta = |ns: Option<&str>| ObjectMeta {
        name: Some(args.name.clone()),
        namespace: ns.map(String::from),
        labels: Some(
            [(
                "app.kubernetes.io/name".to_string(),
                "wasm-reconciler".to_string(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    let needs = rules::needs(controllers, known)?;
    let cluster_rules = if args.cluster_role_only {
        // One ClusterRole cannot scope the plugin ConfigMaps to namespaces.
        rules::cluster_rules(controllers, known)?
    } else {
        needs.cluster.clone()
    };
    let cluster_role = ClusterRole {
        metadata: meta(None),
        rules: Some(cluster_rules),
        ..ClusterRole::default()
    };
    let mut docs = vec![serde_json::to_value(&cluster_role)?];
    if !args.cluster_role_only {
        let subject = Subject {
            kind: "ServiceAccount".into(),
            name: args.service_account.clone(),
            namespace: Some(args.namespace.clone()),
            ..Subject::default()
        };
        let role_ref = |kind: &str| RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: kind.into(),
            name: args.name.clone(),
        };
        docs.push(serde_json::to_value(ClusterRoleBinding {
            metadata: meta(None),
            role_ref: role_ref("ClusterRole"),
            subjects: Some(vec![subject.clone()]),
        })?);
        // A Role per namespace: the host's (its Lease), and each one holding
        // plugin ConfigMaps, which are read there only.
        let mut namespaces = needs.plugin_namespaces.clone();
        namespaces.insert(args.namespace.clone());
        for ns in namespaces {
            let mut role_rules = Vec::new();
            if ns == args.namespace {
                role_rules.extend(rules::lease_rules(&args.lease_name));
            }
            if needs.plugin_namespaces.contains(&ns) {
                role_rules.push(rules::plugin_configmap_rule());
            }
            docs.push(serde_json::to_value(Role {
                metadata: meta(Some(&ns)),
                rules: Some(role_rules),
            })?);
            docs.push(serde_json::to_value(RoleBinding {
                metadata: meta(Some(&ns)),
                role_ref: role_ref("Role"),
                subjects: Some(vec![subject.clone()]),
            })?);
        }
    }
    for mut d in docs {
        set_type_meta(&mut d);
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&d)?);
    }
    Ok(out)
}

/// k8s-openapi serialises apiVersion/kind; this only guarantees they lead.
fn set_type_meta(v: &mut Value) {
    if let Some(obj) = v.as_object_mut() {
        let mut ordered = serde_json::Map::new();
        for key in ["apiVersion", "kind", "metadata"] {
            if let Some(x) = obj.remove(key) {
                ordered.insert(key.to_string(), x);
            }
        }
        ordered.append(obj);
        *obj = ordered;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> RbacArgs {
        RbacArgs {
            files: vec![],
            name: "wr".into(),
            namespace: "ops".into(),
            service_account: "host".into(),
            lease_name: "wr-lease".into(),
            cluster_role_only: false,
        }
    }

    const INPUT: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workspaces.examples.wasm-reconciler.dev}
spec:
  group: examples.wasm-reconciler.dev
  names: {plural: workspacez, singular: workspace, kind: Workspace}
  scope: Namespaced
  versions: []
---
apiVersion: v1
kind: List
items:
- apiVersion: wasm-reconciler.dev/v1alpha1
  kind: WasmController
  metadata: {name: tombstone}
  spec:
    parentResource: {apiVersion: examples.wasm-reconciler.dev/v1alpha1, kind: Workspace}
    childResources:
    - {apiVersion: v1, kind: ConfigMap}
    plugin:
      configMap: {name: tombstone-plugin, namespace: wasm-reconciler}
    finalize: true
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
"#;

    #[test]
    fn wasmcontrollers_and_crd_plurals_are_collected_from_lists() {
        let docs = parse(INPUT).unwrap();
        let (controllers, known) = collect(&docs).unwrap();
        assert_eq!(controllers.len(), 1);
        assert_eq!(controllers[0].0, "tombstone");
        assert_eq!(
            known.get(&("examples.wasm-reconciler.dev".into(), "Workspace".into())),
            Some(&"workspacez".to_string())
        );
    }

    #[test]
    fn output_is_four_objects_bound_to_the_service_account() {
        let (controllers, known) = collect(&parse(INPUT).unwrap()).unwrap();
        let text = render(&args(), &controllers, &known).unwrap();
        let docs = parse(&text).unwrap();
        let kinds: Vec<&str> = docs.iter().map(kind).collect();
        assert_eq!(
            kinds,
            ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        );
        assert_eq!(
            docs[1].pointer("/subjects/0/name"),
            Some(&Value::from("host"))
        );
        assert_eq!(
            docs[1].pointer("/subjects/0/namespace"),
            Some(&Value::from("ops"))
        );
        assert_eq!(
            docs[2].pointer("/metadata/namespace"),
            Some(&Value::from("ops"))
        );
        // The CRD's irregular plural is used, not the heuristic's.
        assert!(text.contains("workspacez/finalizers"), "{text}");
        assert!(!text.contains("- workspaces"), "{text}");
        assert!(text.contains("wr-lease"));
    }

    #[test]
    fn plugin_configmaps_get_a_role_in_their_namespace() {
        let input = r#"
apiVersion: wasm-reconciler.dev/v1alpha1
kind: WasmController
metadata: {name: a}
spec:
  parentResource: {apiVersion: example.com/v1, kind: Thing}
  childResources: [{apiVersion: v1, kind: Secret}]
  plugin: {configMap: {name: a-plugin, namespace: plugins}}
---
apiVersion: wasm-reconciler.dev/v1alpha1
kind: WasmController
metadata: {name: b}
spec:
  parentResource: {apiVersion: example.com/v1, kind: Other}
  plugin: {configMap: {name: b-plugin, namespace: ops}}
"#;
        let (controllers, known) = collect(&parse(input).unwrap()).unwrap();
        let text = render(&args(), &controllers, &known).unwrap();
        let docs = parse(&text).unwrap();
        let kinds: Vec<(&str, Option<&str>)> = docs
            .iter()
            .map(|d| {
                (
                    kind(d),
                    d.pointer("/metadata/namespace").and_then(Value::as_str),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("ClusterRole", None),
                ("ClusterRoleBinding", None),
                ("Role", Some("ops")),
                ("RoleBinding", Some("ops")),
                ("Role", Some("plugins")),
                ("RoleBinding", Some("plugins")),
            ]
        );
        // The host's namespace (ops) holds b's plugin: lease rules + ConfigMap read.
        let ops = docs[2]["rules"].as_array().unwrap();
        assert_eq!(ops.len(), 3, "{text}");
        assert_eq!(ops[2]["resources"], serde_json::json!(["configmaps"]));
        let plugins = docs[4]["rules"].as_array().unwrap();
        assert_eq!(plugins.len(), 1, "{text}");
        assert_eq!(plugins[0]["verbs"], serde_json::json!(["list", "watch"]));
        // ConfigMaps are nowhere readable cluster-wide.
        let cluster = serde_json::to_string(&docs[0]["rules"]).unwrap();
        assert!(!cluster.contains("configmaps"), "{cluster}");
        assert_eq!(
            docs[5].pointer("/subjects/0/name"),
            Some(&Value::from("host"))
        );
    }

    /// The deploy manifests carry the RBAC for the examples; it must be what
    /// the command prints for them.
    #[test]
    fn checked_in_deploy_rbac_matches_the_examples() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let docs = read(&root.join("examples")).unwrap();
        let (controllers, known) = collect(&docs).unwrap();
        let a = RbacArgs {
            files: vec![],
            name: "wasm-reconciler".into(),
            namespace: "wasm-reconciler".into(),
            service_account: "wasm-reconciler".into(),
            lease_name: "wasm-reconciler".into(),
            cluster_role_only: false,
        };
        let generated = render(&a, &controllers, &known).unwrap();
        let path = root.join("host/deploy/manifests/20-rbac.yaml");
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        let body: String = on_disk
            .split_inclusive('\n')
            .skip_while(|l| {
                l.starts_with("# Regenerate")
                    || l.starts_with("# (a test")
                    || l.starts_with("# command on")
            })
            .collect();
        assert_eq!(
            body, generated,
            "host/deploy/manifests/20-rbac.yaml is stale: wasm-reconciler rbac -f examples/ (keep the 3 header lines)"
        );
    }

    #[test]
    fn an_invalid_controller_is_an_error_naming_it() {
        let bad = r#"
apiVersion: wasm-reconciler.dev/v1alpha1
kind: WasmController
metadata: {name: broken}
spec:
  parentResource: {apiVersion: v1, kind: ConfigMap, resource: configmaps}
  plugin: {path: /x.wasm}
"#;
        let err = collect(&parse(bad).unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains("broken"), "{err:#}");
    }
}

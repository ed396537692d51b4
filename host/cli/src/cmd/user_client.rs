//! The API client of the commands a user runs against a cluster (`plan`,
//! `rollout`): `--kubeconfig`/`--context` as kubectl reads them, and a
//! User-Agent per command so the API server's audit log tells them apart.

use std::path::Path;

use anyhow::Context;

/// A client from `kubeconfig` (else the usual places) and `context`, sending
/// `user_agent`.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    user_agent: &str,
) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => infer().await?,
    };
    config
        .headers
        .push(("user-agent".parse()?, user_agent.parse()?));
    kube::Client::try_from(config).context("building the API client")
}

/// The cluster from `$KUBECONFIG`, `~/.kube/config` or the in-cluster
/// environment; when there is none, an error that says what to pass (kube's
/// own lists every place it looked but not the flag).
pub async fn infer() -> anyhow::Result<kube::Config> {
    kube::Config::infer().await.context(
        "no cluster to talk to: pass --kubeconfig FILE (e.g. the dev.kubeconfig \
         that `wasm-reconciler dev` writes) or set KUBECONFIG",
    )
}

/// The WasmController `name`, with an error a user can act on: kube's own
/// error for an API failure prints the whole `Status` in debug form.
pub async fn get_controller(
    client: kube::Client,
    name: &str,
) -> anyhow::Result<wr_engine::crd::WasmController> {
    let api: kube::Api<wr_engine::crd::WasmController> = kube::Api::all(client);
    match api.get(name).await {
        Ok(wc) => Ok(wc),
        Err(kube::Error::Api(s)) if s.code == 404 => anyhow::bail!(
            "WasmController {name:?} not found (`kubectl get wasmcontrollers` lists them)"
        ),
        Err(kube::Error::Api(s)) => anyhow::bail!(
            "reading WasmController {name:?}: {} ({}, HTTP {})",
            s.message,
            s.reason,
            s.code
        ),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading WasmController {name:?}"))),
    }
}

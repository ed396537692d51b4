//! The API server of a run: the embedded one as a process (with fault admin),
//! or a real kube-apiserver — given by its admin kubeconfig, or started from
//! `tests/kube` for the run. On a real cluster the suite leaves nothing
//! behind: its WasmControllers are deleted while a host still runs (so the
//! parents and the cleanup finalizers are released), then its namespaces and
//! parent CRDs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};

use crate::args::{Args, ClusterKind};
use crate::procs::{self, SYSTEM_NS};
use crate::setup::{self, HEALTHY, HOSTILE};

pub enum Cluster {
    Embedded(Box<procs::ApiServer>),
    Real {
        kubeconfig: PathBuf,
        /// The control plane started for this run (none when `--kubeconfig` was given).
        own: Option<Box<wr_tests::real_cluster::RealCluster>>,
    },
}

impl Cluster {
    /// The embedded API server started in `dir`, or the real cluster.
    pub async fn start(args: &Args, bin: &Path, dir: &Path, seed: u64) -> Result<Cluster> {
        match (args.cluster, &args.kubeconfig) {
            (ClusterKind::Embedded, _) => Ok(Cluster::Embedded(Box::new(
                procs::start_apiserver(bin, dir, seed).await?,
            ))),
            (ClusterKind::Real, Some(kc)) => Ok(Cluster::Real {
                kubeconfig: kc.clone(),
                own: None,
            }),
            (ClusterKind::Real, None) => {
                let opts = wr_tests::real_cluster::StartOptions {
                    dir: Some(dir.join("control-plane")),
                    detach: false,
                };
                let c = tokio::task::spawn_blocking(move || {
                    wr_tests::real_cluster::RealCluster::start(opts)
                })
                .await
                .context("starting the control plane")??;
                eprintln!(
                    "chaos: real control plane up in {:.1}s ({})",
                    c.start_secs, c.files.url
                );
                Ok(Cluster::Real {
                    kubeconfig: c.files.kubeconfig.clone(),
                    own: Some(Box::new(c)),
                })
            }
        }
    }

    pub fn is_real(&self) -> bool {
        matches!(self, Cluster::Real { .. })
    }

    pub fn kubeconfig(&self) -> &Path {
        match self {
            Cluster::Embedded(a) => &a.kubeconfig,
            Cluster::Real { kubeconfig, .. } => kubeconfig,
        }
    }

    /// A client as administrator.
    pub async fn client(&self) -> Result<Client> {
        match self {
            Cluster::Embedded(a) => Ok(Client::try_from(kube::Config::new(a.url.parse()?))?),
            Cluster::Real { kubeconfig, .. } => {
                wr_tests::real_cluster::admin_client(kubeconfig).await
            }
        }
    }

    /// Stops what the run started.
    pub async fn stop(self) {
        match self {
            Cluster::Embedded(mut a) => {
                let _ = a.child.start_kill();
                let _ = a.child.wait().await;
            }
            Cluster::Real { own, .. } => {
                if let Some(mut c) = own {
                    let _ = tokio::task::spawn_blocking(move || c.stop()).await;
                }
            }
        }
    }
}

fn wc_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    )
}

/// On a shared real cluster: refuses to start over the leftovers of another run.
pub async fn check_clean(client: &Client) -> Result<()> {
    let wcs = wc_api(client);
    for name in [HEALTHY, HOSTILE] {
        if let Ok(Some(_)) = wcs.get_opt(name).await {
            bail!(
                "WasmController {name} exists already (an earlier run?): delete it with a host \
                 running, or remove its finalizers, and namespaces {}, {}, {SYSTEM_NS}",
                setup::NS,
                setup::HOSTILE_NS
            );
        }
    }
    Ok(())
}

/// Deletes the run's WasmControllers and waits until they are gone: a host
/// must still be running to release their parents and cleanup finalizers.
pub async fn delete_controllers(client: &Client, secs: u64) -> Result<()> {
    let wcs = wc_api(client);
    for name in [HEALTHY, HOSTILE] {
        match wcs.delete(name, &DeleteParams::default()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e).context("deleting a WasmController"),
        }
    }
    wait_gone(secs, "the WasmControllers", || async {
        let mut left = 0;
        for name in [HEALTHY, HOSTILE] {
            left += usize::from(wcs.get_opt(name).await?.is_some());
        }
        Ok(left == 0)
    })
    .await
}

/// Deletes the run's namespaces and parent CRDs, and waits until the
/// namespaces are gone (the namespace controller empties them).
pub async fn delete_the_rest(client: &Client, secs: u64) -> Result<()> {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns_names = [setup::NS, setup::HOSTILE_NS, SYSTEM_NS];
    for ns in ns_names {
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
    for kind in [setup::PARENT_KIND, "HostileParent"] {
        let name = format!("{}s.{}", kind.to_lowercase(), setup::GROUP);
        let _ = crds.delete(&name, &DeleteParams::default()).await;
    }
    wait_gone(secs, "the chaos namespaces", || async {
        let mut left = 0;
        for ns in ns_names {
            left += usize::from(namespaces.get_opt(ns).await?.is_some());
        }
        Ok(left == 0)
    })
    .await
}

async fn wait_gone<F, Fut>(secs: u64, what: &str, mut done: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, kube::Error>>,
{
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if done().await.unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() > until {
            bail!("{what} still exist after {secs}s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

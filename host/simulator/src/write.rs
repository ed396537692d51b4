//! Writes through the API, each under the field manager of the component
//! whose work it stands in for (`kube-controller-manager`, `kubelet`), so
//! `managedFields` read as in a real cluster.

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use serde_json::Value;

/// The controllers' manager name in `managedFields`.
pub const CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// The node agent's.
pub const KUBELET: &str = "kubelet";

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{verb} {what}")]
    Api {
        verb: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what} is not a valid object of its kind")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl WriteError {
    /// The HTTP status of an API error (None for other failures).
    pub fn code(&self) -> Option<u16> {
        match self {
            WriteError::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

/// A client bound to the simulator's writes.
#[derive(Clone)]
pub struct Writer {
    client: kube::Client,
}

/// An untyped handle on `K`'s resource: one code path for namespaced and
/// cluster-scoped kinds.
fn api<K>(client: &kube::Client, ns: &str) -> kube::Api<DynamicObject>
where
    K: kube::Resource<DynamicType = ()>,
{
    let ar = ApiResource::erase::<K>(&());
    if ns.is_empty() {
        kube::Api::all_with(client.clone(), &ar)
    } else {
        kube::Api::namespaced_with(client.clone(), ns, &ar)
    }
}

fn what<K: kube::Resource<DynamicType = ()>>(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        format!("{} {name}", K::kind(&()))
    } else {
        format!("{} {ns}/{name}", K::kind(&()))
    }
}

impl Writer {
    pub fn new(client: kube::Client) -> Self {
        Writer { client }
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Create `body` (named or with `generateName`); returns the stored object.
    pub async fn create<K>(&self, ns: &str, body: Value) -> Result<Value, WriteError>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let name = crate::world::name(&body).to_string();
        let label = crate::world::str_at(&body, "/metadata/generateName").to_string();
        let w = what::<K>(ns, if name.is_empty() { &label } else { &name });
        let obj: DynamicObject =
            serde_json::from_value(body).map_err(|source| WriteError::Decode {
                what: w.clone(),
                source,
            })?;
        let pp = PostParams {
            field_manager: Some(CONTROLLER_MANAGER.into()),
            ..Default::default()
        };
        let created = api::<K>(&self.client, ns)
            .create(&pp, &obj)
            .await
            .map_err(|source| WriteError::Api {
                verb: "create",
                what: w,
                source,
            })?;
        Ok(serde_json::to_value(created).unwrap_or_default())
    }

    /// JSON merge patch of the main resource (or of `/status`).
    pub async fn merge<K>(
        &self,
        ns: &str,
        name: &str,
        patch: Value,
        status: bool,
        manager: &str,
    ) -> Result<(), WriteError>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let pp = PatchParams {
            field_manager: Some(manager.into()),
            ..Default::default()
        };
        let a = api::<K>(&self.client, ns);
        let r = if status {
            a.patch_status(name, &pp, &Patch::Merge(&patch)).await
        } else {
            a.patch(name, &pp, &Patch::Merge(&patch)).await
        };
        r.map(|_| ()).map_err(|source| WriteError::Api {
            verb: if status { "patch status of" } else { "patch" },
            what: what::<K>(ns, name),
            source,
        })
    }

    /// Delete (background propagation; `grace_zero` as a kubelet confirms a
    /// pod is gone). A 404 is success.
    pub async fn delete<K>(&self, ns: &str, name: &str, grace_zero: bool) -> Result<(), WriteError>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            grace_period_seconds: grace_zero.then_some(0),
            ..Default::default()
        };
        match api::<K>(&self.client, ns).delete(name, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(WriteError::Api {
                verb: "delete",
                what: what::<K>(ns, name),
                source,
            }),
        }
    }
}

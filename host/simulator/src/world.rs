//! One consistent look at the cluster per pass: every object of the kinds
//! the simulator drives, as JSON, plus the small readers the controllers
//! share (names, owners, selectors, pod readiness).

use kube::api::ListParams;
use serde_json::Value;

use crate::write::WriteError;

/// The objects of one pass.
#[derive(Debug, Default)]
pub struct World {
    pub nodes: Vec<Value>,
    pub pods: Vec<Value>,
    pub replicasets: Vec<Value>,
    pub deployments: Vec<Value>,
    pub statefulsets: Vec<Value>,
    pub daemonsets: Vec<Value>,
    pub jobs: Vec<Value>,
}

async fn list<K>(client: &kube::Client) -> Result<Vec<Value>, WriteError>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let api = kube::Api::<K>::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| WriteError::Api {
            verb: "list",
            what: K::plural(&()).to_string(),
            source,
        })?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

impl World {
    pub async fn load(client: &kube::Client) -> Result<World, WriteError> {
        use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
        Ok(World {
            nodes: list::<core::Node>(client).await?,
            pods: list::<core::Pod>(client).await?,
            replicasets: list::<apps::ReplicaSet>(client).await?,
            deployments: list::<apps::Deployment>(client).await?,
            statefulsets: list::<apps::StatefulSet>(client).await?,
            daemonsets: list::<apps::DaemonSet>(client).await?,
            jobs: list::<batch::Job>(client).await?,
        })
    }

    /// The non-deleted objects of `items` whose controller is `owner`.
    pub fn owned<'a>(items: &'a [Value], owner: &Value) -> Vec<&'a Value> {
        let uid = uid(owner);
        items
            .iter()
            .filter(|o| controller_uid(o) == Some(uid))
            .collect()
    }
}

pub fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

pub fn i64_at(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

pub fn name(v: &Value) -> &str {
    str_at(v, "/metadata/name")
}

pub fn namespace(v: &Value) -> &str {
    str_at(v, "/metadata/namespace")
}

pub fn uid(v: &Value) -> &str {
    str_at(v, "/metadata/uid")
}

pub fn generation(v: &Value) -> i64 {
    i64_at(v, "/metadata/generation").unwrap_or(0)
}

pub fn is_deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

pub fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/annotations")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// uid of the object's controlling owner (`controller: true`).
pub fn controller_uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

/// Does a `LabelSelector` select an object with `labels`? An empty selector
/// selects everything (as `metav1.LabelSelectorAsSelector` does).
pub fn selects(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(sel) = selector else {
        return true;
    };
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object)
        && ml.iter().any(|(k, v)| get(k) != v.as_str())
    {
        return false;
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = str_at(e, "/key");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let ok = match str_at(e, "/operator") {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The status of condition `ty` of an object (`True`, `False`, …).
pub fn condition<'a>(v: &'a Value, ty: &str) -> Option<&'a Value> {
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

pub fn pod_phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase")
}

/// Not finished: counts as a replica (`Succeeded`/`Failed` pods do not).
pub fn pod_active(pod: &Value) -> bool {
    !is_deleting(pod) && !matches!(pod_phase(pod), "Succeeded" | "Failed")
}

pub fn pod_ready(pod: &Value) -> bool {
    pod_active(pod) && condition(pod, "Ready").is_some_and(|c| str_at(c, "/status") == "True")
}

/// Ready for at least `min_ready_seconds` (the controllers' "available").
/// When not yet, and it will be, `due` learns when.
pub fn pod_available(pod: &Value, min_ready_seconds: i64, due: &mut crate::pass::Due) -> bool {
    if !pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let Some(since) = condition(pod, "Ready")
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return false;
    };
    let at = since.with_timezone(&chrono::Utc) + chrono::Duration::seconds(min_ready_seconds);
    let now = chrono::Utc::now();
    if at <= now {
        true
    } else {
        due.at_utc(at);
        false
    }
}

/// `metadata.creationTimestamp` as a sortable string (RFC 3339, UTC).
pub fn created(v: &Value) -> &str {
    str_at(v, "/metadata/creationTimestamp")
}

/// A merge patch setting `fields` of `status`, or None when `current`
/// already has them. A null field means "absent" (the API's `omitempty`
/// zero values are left out, as the real controllers' are).
pub fn status_patch(current: &Value, fields: Vec<(&str, Value)>) -> Option<Value> {
    let old = current.get("status");
    let differs = fields.iter().any(|(k, v)| {
        let have = old.and_then(|s| s.get(*k)).unwrap_or(&Value::Null);
        have != v
    });
    differs.then(|| {
        let m: serde_json::Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        serde_json::json!({ "status": m })
    })
}

/// `n` as an `omitempty` integer: null (absent) when zero.
pub fn omit_zero(n: i64) -> Value {
    if n == 0 { Value::Null } else { Value::from(n) }
}

//! A run of the checks against one server: sends requests and records what
//! each check observed, normalised, under the check's id.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::normalize;
use crate::target::{Req, Resp, Target};

/// Observations of one server, by check id (`area/name`).
pub type Observations = BTreeMap<String, Vec<Value>>;

/// One server, the run's token and what was observed so far.
pub struct Run {
    pub t: Target,
    /// Random suffix in every name this run creates; normalised to `RUN`.
    pub token: String,
    obs: Mutex<Observations>,
}

impl Run {
    pub fn new(t: Target, token: &str) -> Self {
        Run {
            t,
            token: token.to_string(),
            obs: Mutex::new(BTreeMap::new()),
        }
    }

    /// The namespace an area works in (created by [`Run::namespace`]).
    pub fn ns(&self, area: &str) -> String {
        format!("fid-{}-{area}", self.token)
    }

    pub async fn send(&self, req: Req<'_>) -> anyhow::Result<Resp> {
        self.t.send(req).await
    }

    /// Records an observation (normalised) for check `id`.
    pub fn record(&self, id: &str, mut v: Value) {
        normalize::json(&mut v, &self.token);
        if let Ok(mut o) = self.obs.lock() {
            o.entry(id.to_string()).or_default().push(v);
        }
    }

    /// What a client sees of a response: code, body, warnings.
    pub fn view(resp: &Resp) -> Value {
        let mut v = json!({ "code": resp.code, "body": resp.json() });
        if !resp.warnings.is_empty() {
            v["warnings"] = Value::from(resp.warnings.clone());
        }
        v
    }

    /// Sends `req` and records its full view under `id`.
    pub async fn call(&self, id: &str, req: Req<'_>) -> anyhow::Result<Resp> {
        let resp = self.send(req).await?;
        self.record(id, Self::view(&resp));
        Ok(resp)
    }

    /// Sends `req` and records only code and, for errors, the Status body.
    pub async fn call_status(&self, id: &str, req: Req<'_>) -> anyhow::Result<Resp> {
        let resp = self.send(req).await?;
        let mut v = json!({ "code": resp.code });
        if !resp.ok() {
            v["body"] = resp.json();
        }
        if !resp.warnings.is_empty() {
            v["warnings"] = Value::from(resp.warnings.clone());
        }
        self.record(id, v);
        Ok(resp)
    }

    /// Creates a namespace for an area (not recorded) and waits until it is usable.
    pub async fn namespace(&self, area: &str) -> anyhow::Result<String> {
        let ns = self.ns(area);
        let resp = self
            .send(Req::with_body(
                "POST",
                "/api/v1/namespaces",
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            ))
            .await?;
        anyhow::ensure!(
            resp.ok() || resp.code == 409,
            "creating namespace {ns} on {}: {} {}",
            self.t.name,
            resp.code,
            String::from_utf8_lossy(&resp.body)
        );
        Ok(ns)
    }

    /// Polls `path` until it answers 2xx (a CRD's resource after Established),
    /// for at most 30 s.
    pub async fn until_ok(&self, path: &str) -> anyhow::Result<()> {
        for _ in 0..300 {
            if self.send(Req::get(path)).await?.ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("{path} not served on {} after 30 s", self.t.name)
    }

    pub fn into_observations(self) -> Observations {
        self.obs.into_inner().unwrap_or_default()
    }
}

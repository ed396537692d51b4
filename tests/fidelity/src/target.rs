//! One API server under test: a `kube::Client` built from a kubeconfig, used
//! for raw HTTP requests so that status codes, headers and bodies are seen
//! exactly as the server sent them (the typed API would hide them).

use std::time::Duration;

use anyhow::Context;
use http_body_util::BodyExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;

/// Content type of the Kubernetes protobuf envelope.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// Accept header asking for server-side table output.
pub const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";
/// Accept header asking for aggregated discovery.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// A server and the client that reaches it.
#[derive(Clone)]
pub struct Target {
    /// "embedded" or "real".
    pub name: &'static str,
    /// Path of the kubeconfig (for kubectl).
    pub kubeconfig: std::path::PathBuf,
    client: Client,
}

/// What came back from one request.
#[derive(Debug, Clone)]
pub struct Resp {
    pub code: u16,
    pub content_type: String,
    /// `Warning` headers, text part only.
    pub warnings: Vec<String>,
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON; non-JSON bodies become `{"nonJson": <first 200 chars>}`.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(&self.body);
            serde_json::json!({ "nonJson": text.chars().take(200).collect::<String>() })
        })
    }

    /// True for 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

/// A request to send.
pub struct Req<'a> {
    pub method: &'a str,
    pub path: String,
    pub content_type: &'a str,
    pub accept: &'a str,
    pub body: Vec<u8>,
    /// Extra headers (impersonation).
    pub headers: Vec<(&'a str, String)>,
}

impl<'a> Req<'a> {
    pub fn get(path: impl Into<String>) -> Self {
        Req {
            method: "GET",
            path: path.into(),
            content_type: "application/json",
            accept: "application/json",
            body: Vec::new(),
            headers: Vec::new(),
        }
    }
    pub fn with_body(method: &'a str, path: impl Into<String>, body: &Value) -> Self {
        Req {
            method,
            path: path.into(),
            content_type: "application/json",
            accept: "application/json",
            body: serde_json::to_vec(body).unwrap_or_default(),
            headers: Vec::new(),
        }
    }
    pub fn content_type(mut self, ct: &'a str) -> Self {
        self.content_type = ct;
        self
    }
    pub fn accept(mut self, a: &'a str) -> Self {
        self.accept = a;
        self
    }
    pub fn method(mut self, m: &'a str) -> Self {
        self.method = m;
        self
    }
    pub fn path_suffix(mut self, q: &str) -> Self {
        self.path.push_str(q);
        self
    }
    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    pub fn raw_body(mut self, b: Vec<u8>) -> Self {
        self.body = b;
        self
    }
}

impl Target {
    /// Client for the current context of `kubeconfig`.
    pub async fn connect(name: &'static str, kubeconfig: &std::path::Path) -> anyhow::Result<Self> {
        let kc = Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
        let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("kubeconfig {}", kubeconfig.display()))?;
        config.read_timeout = Some(Duration::from_secs(60));
        let client = Client::try_from(config).context("building the client")?;
        Ok(Target {
            name,
            kubeconfig: kubeconfig.to_path_buf(),
            client,
        })
    }

    /// Sends one request and reads the whole response.
    pub async fn send(&self, req: Req<'_>) -> anyhow::Result<Resp> {
        let mut b = http::Request::builder()
            .method(req.method)
            .uri(&req.path)
            .header(http::header::ACCEPT, req.accept)
            // Managers of Update operations are named after the user agent.
            .header(http::header::USER_AGENT, "fidelity/v1");
        if !req.body.is_empty() {
            b = b.header(http::header::CONTENT_TYPE, req.content_type);
        }
        for (name, value) in &req.headers {
            b = b.header(*name, value);
        }
        let request = b
            .body(kube::client::Body::from(req.body))
            .with_context(|| format!("building {} {}", req.method, req.path))?;
        let resp = self
            .client
            .send(request)
            .await
            .with_context(|| format!("{} {} on {}", req.method, req.path, self.name))?;
        let code = resp.status().as_u16();
        let header = |n: http::header::HeaderName| {
            resp.headers()
                .get_all(n)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect::<Vec<_>>()
        };
        let content_type = header(http::header::CONTENT_TYPE)
            .first()
            .cloned()
            .unwrap_or_default();
        let warnings = header(http::header::WARNING)
            .iter()
            .map(|w| warning_text(w))
            .collect();
        let body = resp
            .into_body()
            .collect()
            .await
            .with_context(|| format!("reading {} {} on {}", req.method, req.path, self.name))?
            .to_bytes()
            .to_vec();
        Ok(Resp {
            code,
            content_type,
            warnings,
            body,
        })
    }
}

/// The text of a `Warning: 299 - "text"` header.
fn warning_text(h: &str) -> String {
    match (h.find('"'), h.rfind('"')) {
        (Some(a), Some(b)) if b > a => h[a + 1..b].replace("\\\"", "\""),
        _ => h.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn warning_header_text() {
        assert_eq!(
            super::warning_text(r#"299 - "unknown field \"spec.x\"""#),
            r#"unknown field "spec.x""#
        );
    }
}

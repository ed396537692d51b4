//! Kubeconfig for the embedded server: plain HTTP on loopback, no auth.

/// Cluster, context and user name written into kubeconfigs.
pub const CONTEXT: &str = "wasm-reconciler-dev";

/// A kubeconfig document pointing at `server` (`http://127.0.0.1:PORT`).
pub fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: {server}
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
current-context: {CONTEXT}
users:
- name: {CONTEXT}
  user: {{}}
preferences: {{}}
"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_parses_and_names_the_server() {
        let y = super::kubeconfig_yaml("http://127.0.0.1:1234");
        let v: serde_json::Value = serde_yaml::from_str(&y).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(v["current-context"], super::CONTEXT);
    }
}

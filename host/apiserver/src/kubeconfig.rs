//! Kubeconfig for the embedded server: plain HTTP, the admin bearer token.

/// Cluster, context and user name written into kubeconfigs.
pub const CONTEXT: &str = "wasm-reconciler-dev";

/// A kubeconfig document pointing at `server` (`http://127.0.0.1:PORT`)
/// without credentials (the user is `system:anonymous` on a loopback server).
pub fn kubeconfig_yaml(server: &str) -> String {
    kubeconfig_yaml_with_token(server, None)
}

/// A kubeconfig document pointing at `server` whose user presents `token`.
pub fn kubeconfig_yaml_with_token(server: &str, token: Option<&str>) -> String {
    let user = match token {
        // A JSON string is a valid YAML scalar, whatever the token holds.
        Some(t) => format!(
            "\n    token: {}\n",
            serde_json::Value::String(t.to_string())
        ),
        None => " {}\n".to_string(),
    };
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
  user:{user}preferences: {{}}
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
        assert_eq!(v["users"][0]["user"], serde_json::json!({}));
    }

    #[test]
    fn kubeconfig_carries_the_token() {
        let y = super::kubeconfig_yaml_with_token("http://127.0.0.1:1", Some("abc: \"x"));
        let v: serde_json::Value = serde_yaml::from_str(&y).unwrap();
        assert_eq!(v["users"][0]["user"]["token"], "abc: \"x");
        assert_eq!(v["preferences"], serde_json::json!({}));
    }
}

//! Authentication and authorisation of the embedded API server (issue 20,
//! item 18): who is asking ([`Auth::authenticate`]: the admin bearer token of
//! the kubeconfig, ServiceAccount tokens from the TokenRequest subresource,
//! or `system:anonymous` where the server allows it) and may they
//! ([`Auth::authorize`]: everything, or RBAC over the stored roles and
//! bindings). [`request`] derives kube's request attributes from a URL,
//! [`endpoints`] serves the review APIs and `serviceaccounts/NAME/token`.
//!
//! A server bound to loopback serves requests without a token as the admin
//! (today's convenience, and every test's bare URL; kubectl never sends a
//! bearer token over plain HTTP); one bound beyond loopback requires the token
//! (from clients that send it, like kube-rs) unless started with `insecure`,
//! which serves tokenless requests as `system:anonymous`.

pub mod bootstrap;
pub mod endpoints;
pub mod rbac;
pub mod request;
pub mod token;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::store::Store;

pub use rbac::Attributes;
use token::{SaClaims, Signer};

/// Name of the user the admin token authenticates.
pub const ADMIN_USER: &str = "admin";
/// kube's superuser group: always allowed, like kube-apiserver's privileged-group authorizer.
pub const MASTERS: &str = "system:masters";
pub const AUTHENTICATED: &str = "system:authenticated";
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
pub const ANONYMOUS: &str = "system:anonymous";

/// How requests are authorised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated (or anonymous) request is allowed.
    #[default]
    AlwaysAllow,
    /// `system:masters` is allowed; everyone else by the stored RBAC objects.
    Rbac,
}

/// Authentication and authorisation settings of a server.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    pub authorization: AuthorizationMode,
    /// Serve requests without a bearer token as `system:anonymous` even when
    /// bound beyond loopback (a loopback server always does).
    pub insecure: bool,
    /// The admin bearer token; when None one is generated (and kept in the
    /// data directory, if there is one).
    pub admin_token: Option<String>,
}

/// An authenticated identity (kube's `user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Default::default()
        }
    }

    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// kube's ServiceAccount user: `system:serviceaccount:NS:NAME` in the
    /// groups `system:serviceaccounts`, `system:serviceaccounts:NS` and
    /// `system:authenticated`.
    pub fn service_account(ns: &str, name: &str, uid: &str, jti: &str) -> Self {
        let mut extra = BTreeMap::new();
        if !jti.is_empty() {
            extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
            extra,
        }
    }

    /// The `UserInfo` object of review statuses.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }
}

/// The server's authentication state.
#[derive(Debug)]
pub struct Auth {
    pub mode: AuthorizationMode,
    anonymous: bool,
    loopback: bool,
    admin_token: String,
    admin_tag: Vec<u8>,
    pub signer: Signer,
}

const KEY_FILE: &str = "service-account-signing.key";
const ADMIN_TOKEN_FILE: &str = "admin.token";

impl Auth {
    /// Keys and the admin token: from the data directory when there is one
    /// (so tokens survive a restart), else fresh.
    pub fn new(
        cfg: &AuthConfig,
        bind: SocketAddr,
        data_dir: Option<&Path>,
    ) -> std::io::Result<Auth> {
        let fresh_hex = || hex::encode(token::random_bytes());
        let (signer_hex, admin) = match data_dir {
            Some(d) => (
                token::load_or_create(&d.join(KEY_FILE), fresh_hex)?,
                match &cfg.admin_token {
                    Some(t) => t.clone(),
                    None => token::load_or_create(&d.join(ADMIN_TOKEN_FILE), fresh_hex)?,
                },
            ),
            None => (
                fresh_hex(),
                cfg.admin_token.clone().unwrap_or_else(fresh_hex),
            ),
        };
        let signer = Signer::from_hex(&signer_hex).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{KEY_FILE}: not 32 hex-encoded bytes"),
            )
        })?;
        Ok(Auth {
            mode: cfg.authorization,
            anonymous: bind.ip().is_loopback() || cfg.insecure,
            loopback: bind.ip().is_loopback(),
            admin_tag: signer.tag(admin.as_bytes()),
            admin_token: admin,
            signer,
        })
    }

    /// The admin bearer token (for the kubeconfig; never logged).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Whether requests without a token are served (as `system:anonymous`).
    pub fn allows_anonymous(&self) -> bool {
        self.anonymous
    }

    /// kube-apiserver's authentication: a bearer token must be valid (else
    /// 401 even where anonymous requests are allowed); no token means
    /// `system:anonymous` where allowed, else 401.
    pub fn authenticate(&self, store: &Store, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .filter(|t| !t.is_empty());
        match bearer {
            Some(t) => self.authenticate_token(store, t).ok_or_else(unauthorized),
            // Loopback: today's convenience, as the admin (kubectl never
            // sends a token over plain HTTP, so this is its identity there).
            None if self.loopback => Ok(UserInfo::admin()),
            None if self.anonymous => Ok(UserInfo::anonymous()),
            None => Err(unauthorized()),
        }
    }

    /// The user a token stands for (also TokenReview's answer).
    pub fn authenticate_token(&self, store: &Store, token: &str) -> Option<UserInfo> {
        if self.signer.check_tag(token.as_bytes(), &self.admin_tag) {
            return Some(UserInfo::admin());
        }
        let claims = SaClaims::from_json(&self.signer.verify(token)?)?;
        let now = chrono::Utc::now().timestamp();
        if claims.expires_at <= now
            || claims.issued_at > now + 60
            || !claims.audiences.iter().any(|a| a == token::ISSUER)
        {
            return None;
        }
        // A bound token dies with its ServiceAccount (and with a re-created one).
        let sa = store.get(
            "/serviceaccounts",
            &crate::store::obj_key(&claims.namespace, &claims.name),
        )?;
        if sa.pointer("/metadata/uid").and_then(Value::as_str) != Some(claims.uid.as_str()) {
            return None;
        }
        Some(UserInfo::service_account(
            &claims.namespace,
            &claims.name,
            &claims.uid,
            &claims.jti,
        ))
    }

    /// kube-apiserver's impersonation filter: `Impersonate-User` (with
    /// `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`) makes
    /// the request the named user's, if `user` may `impersonate` each of
    /// them (`users`, `serviceaccounts`, `groups`, `uids`, `userextras/KEY`);
    /// a 403 names the first it may not. `kubectl --as` relies on it.
    pub fn impersonate(
        &self,
        store: &Store,
        user: UserInfo,
        headers: &HeaderMap,
    ) -> Result<UserInfo, ApiError> {
        let all = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned)
                .collect()
        };
        let groups = all("impersonate-group");
        let uid = all("impersonate-uid").into_iter().next();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
                && let Ok(v) = value.to_str()
            {
                extra.entry(key.to_owned()).or_default().push(v.to_owned());
            }
        }
        let Some(target) = all("impersonate-user").into_iter().next() else {
            if groups.is_empty() && uid.is_none() && extra.is_empty() {
                return Ok(user);
            }
            return Err(ApiError::bad_request(
                "requested impersonation of groups, uid or extra without impersonating a user",
            ));
        };
        let sa = target
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'));
        for a in &impersonation_asks(&target, &groups, uid.as_deref(), &extra) {
            self.check(store, &user, a)?;
        }
        let mut out = UserInfo {
            name: target.clone(),
            uid: uid.unwrap_or_default(),
            groups,
            extra,
        };
        if let Some((ns, _)) = sa {
            for g in [
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
            ] {
                if !out.groups.contains(&g) {
                    out.groups.push(g);
                }
            }
        }
        let implied = if target == ANONYMOUS {
            UNAUTHENTICATED
        } else {
            AUTHENTICATED
        };
        if !out.groups.iter().any(|g| g == implied) {
            out.groups.push(implied.to_owned());
        }
        Ok(out)
    }

    /// The authoriser chain: `system:masters` first (kube's privileged-group
    /// authoriser), then the mode. Returns (allowed, reason).
    pub fn authorize(&self, store: &Store, user: &UserInfo, a: &Attributes) -> (bool, String) {
        if user.groups.iter().any(|g| g == MASTERS) {
            return (true, String::new());
        }
        match self.mode {
            AuthorizationMode::AlwaysAllow => (true, String::new()),
            AuthorizationMode::Rbac => rbac::authorize(store, user, a),
        }
    }

    /// Authorise or build kube-apiserver's 403.
    pub fn check(&self, store: &Store, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
        match self.authorize(store, user, a) {
            (true, _) => Ok(()),
            (false, reason) => Err(forbidden(user, a, &reason)),
        }
    }
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// kube-apiserver's `forbiddenMessage`, wrapped by `NewForbidden` like its
/// `responsewriters.Forbidden`: `pods is forbidden: User "u" cannot list
/// resource "pods" in API group "" in the namespace "x"` (+ `: REASON`).
pub fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let msg = if !a.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path)
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        if a.namespace.is_empty() {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
                user.name, a.verb, resource, a.api_group
            )
        } else {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
                user.name, a.verb, resource, a.api_group, a.namespace
            )
        }
    };
    let msg = msg
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    forbidden_status(&a.api_group, &a.resource, &a.name, &err)
}

/// kube's `NewForbidden(groupResource, name, err)`.
pub fn forbidden_status(group: &str, resource: &str, name: &str, err: &str) -> ApiError {
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {name:?} is forbidden: {err}")
    };
    let mut e = ApiError::forbidden(message);
    if !name.is_empty() {
        e.name = Some(name.to_string());
    }
    e.group = Some(group.to_string());
    e.kind = Some(resource.to_string());
    e
}

/// What impersonating `target` (with its groups, uid and extra) asks the
/// authoriser: `impersonate` on the user (or service account), each group,
/// the uid and each extra value.
fn impersonation_asks(
    target: &str,
    groups: &[String],
    uid: Option<&str>,
    extra: &BTreeMap<String, Vec<String>>,
) -> Vec<Attributes> {
    let ask = |group: &str, resource: &str, ns: &str, name: &str, sub: &str| Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        namespace: ns.into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        name: name.into(),
        ..Default::default()
    };
    let sa = target
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'));
    let mut asks = vec![match sa {
        Some((ns, name)) => ask("", "serviceaccounts", ns, name, ""),
        None => ask("", "users", "", target, ""),
    }];
    asks.extend(groups.iter().map(|g| ask("", "groups", "", g, "")));
    if let Some(u) = uid {
        asks.push(ask("authentication.k8s.io", "uids", "", u, ""));
    }
    for (k, vs) in extra {
        for v in vs {
            asks.push(ask("authentication.k8s.io", "userextras", "", v, k));
        }
    }
    asks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa() -> UserInfo {
        UserInfo::service_account("ns", "sa", "u", "")
    }

    #[test]
    fn forbidden_messages_have_kube_apiservers_shape() {
        let a = Attributes {
            verb: "list".into(),
            resource_request: true,
            namespace: "x".into(),
            resource: "pods".into(),
            api_version: "v1".into(),
            ..Default::default()
        };
        let e = forbidden(&sa(), &a, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"pods\" in API group \"\" in the namespace \"x\""
        );
        let named = Attributes {
            verb: "patch".into(),
            api_group: "apps".into(),
            resource: "deployments".into(),
            subresource: "status".into(),
            name: "web".into(),
            namespace: String::new(),
            ..a.clone()
        };
        assert_eq!(
            forbidden(
                &sa(),
                &named,
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found"
            )
            .message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot patch resource \"deployments/status\" in API group \"apps\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"r\" not found"
        );
        let path = Attributes {
            verb: "get".into(),
            path: "/metrics".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden(&UserInfo::anonymous(), &path, "").message,
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
        );
    }

    fn auth(bind: [u8; 4], insecure: bool) -> Auth {
        let cfg = AuthConfig {
            insecure,
            admin_token: Some("secret-admin".into()),
            ..Default::default()
        };
        Auth::new(&cfg, SocketAddr::from((bind, 0)), None).unwrap()
    }

    fn headers(v: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = v {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn tokenless_requests_are_the_admin_on_loopback_anonymous_if_insecure_and_bad_tokens_never_pass()
     {
        let store = Store::new(10);
        let lo = auth([127, 0, 0, 1], false);
        assert_eq!(
            lo.authenticate(&store, &headers(None)).unwrap(),
            UserInfo::admin()
        );
        assert_eq!(
            lo.authenticate(&store, &headers(Some("Bearer secret-admin")))
                .unwrap(),
            UserInfo::admin()
        );
        assert_eq!(
            lo.authenticate(&store, &headers(Some("Bearer nope")))
                .unwrap_err()
                .code,
            401
        );
        let wide = auth([0, 0, 0, 0], false);
        assert_eq!(
            wide.authenticate(&store, &headers(None)).unwrap_err().code,
            401
        );
        assert_eq!(
            wide.authenticate(&store, &headers(Some("bearer secret-admin")))
                .unwrap(),
            UserInfo::admin()
        );
        let open = auth([0, 0, 0, 0], true);
        assert_eq!(
            open.authenticate(&store, &headers(None)).unwrap(),
            UserInfo::anonymous()
        );
    }
}

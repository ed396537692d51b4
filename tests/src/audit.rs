//! kube-apiserver's audit log read as the tests' request log: each event maps
//! to the shape of the embedded server's [`RequestRecord`], so a test that
//! counts writes or checks RBAC from the embedded server's log runs unchanged
//! against the real control plane ([`crate::real_cluster`]).
//!
//! The log is JSON lines (one `audit.k8s.io/v1` Event each, level Metadata). A
//! request is taken from its ResponseComplete event, a watch from its
//! ResponseStarted one (a watch completes only when it ends). `patch_type` and `fault` are never set:
//! the Metadata level does not carry the Content-Type and the real server
//! injects no faults.
//!
//! A [`Mark`] is a point in time, not only a point in the file: the API server
//! writes a request's ResponseComplete event *after* the request took effect
//! (a client can see the change before the event is in the file), so a write
//! the host made just before a test cleared the log can land after the file
//! position of the clear. [`AuditLog::since_mark`] keeps only the requests
//! the server *received* after the mark (`requestReceivedTimestamp`), which
//! is what "requests since the clear" means.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use wr_apiserver::RequestRecord;

/// One audited request: who made it and what it was.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// `user.username` (e.g. `system:serviceaccount:NS:NAME`).
    pub user: String,
    /// When the API server received it (`requestReceivedTimestamp`).
    pub received: Option<Timestamp>,
    /// The request, in the embedded server's shape.
    pub record: RequestRecord,
}

/// A point of the log: its end at the time of the mark, and that time.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// The end of the file when the mark was taken (read before `at`).
    pub offset: u64,
    /// When the mark was taken.
    pub at: Timestamp,
}

/// The audit log file and a read position.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// The log at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The position of the end of the log now (records after it are "new").
    pub fn mark(&self) -> Result<u64> {
        Ok(std::fs::metadata(&self.path)
            .with_context(|| format!("reading {}", self.path.display()))?
            .len())
    }

    /// The end of the log and the time now. The position is read first: a
    /// request received after the time completes after it, so its event is
    /// written after the position.
    pub fn mark_now(&self) -> Result<Mark> {
        let offset = self.mark()?;
        // Cut to the microsecond, as the log's timestamps are: a request
        // received in the same microsecond as the mark counts as after it.
        let now = Timestamp::now();
        let at = Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now);
        Ok(Mark { offset, at })
    }

    /// Resource requests the server received after `m` (see the module doc),
    /// in the order it received them.
    ///
    /// Not in the order of the file: a request that another one waited for
    /// (the host writes the next child once it has seen the last one ready)
    /// was received before it, but its event may be written after the other's
    /// (events are written when a request completes, and the change is seen
    /// by watchers before that). Reception order keeps cause before effect.
    pub fn since_mark(&self, m: &Mark) -> Result<Vec<AuditRecord>> {
        let mut v: Vec<AuditRecord> = self
            .since(m.offset)?
            .into_iter()
            .filter(|r| r.received.is_none_or(|t| t >= m.at))
            .collect();
        // Stable: requests received in the same microsecond keep file order.
        v.sort_by_key(|r| r.received);
        Ok(v)
    }

    /// Resource requests logged after position `from`, in completion order.
    /// Events without an object reference (`/readyz`, discovery) are skipped;
    /// a trailing line still being written is left for the next read.
    pub fn since(&self, from: u64) -> Result<Vec<AuditRecord>> {
        let mut f = std::fs::File::open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))?;
        f.seek(SeekFrom::Start(from))?;
        let mut text = String::new();
        f.read_to_string(&mut text)
            .with_context(|| format!("reading {}", self.path.display()))?;
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        let mut out = Vec::new();
        for line in complete.lines().filter(|l| !l.trim().is_empty()) {
            let ev: Event = serde_json::from_str(line)
                .with_context(|| format!("parsing an audit event of {}", self.path.display()))?;
            if let Some(r) = ev.into_record() {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The path of the log.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    request_u_r_i: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    user: User,
    #[serde(default)]
    user_agent: Option<String>,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
    #[serde(default)]
    request_received_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    api_group: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    subresource: Option<String>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

impl Event {
    fn into_record(self) -> Option<AuditRecord> {
        let wanted = if self.verb == "watch" {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        if self.stage != wanted && self.stage != "Panic" {
            return None;
        }
        let o = self.object_ref?;
        let query = self
            .request_u_r_i
            .split_once('?')
            .map(|(_, q)| q)
            .unwrap_or("");
        let param = |k: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                .map(percent_decode)
        };
        Some(AuditRecord {
            user: self.user.username,
            received: self
                .request_received_timestamp
                .and_then(|t| t.parse::<Timestamp>().ok()),
            record: RequestRecord {
                verb: self.verb,
                group: o.api_group,
                version: o.api_version,
                resource: o.resource,
                subresource: o.subresource,
                namespace: o.namespace,
                name: o.name,
                code: self.response_status.map_or(0, |s| s.code),
                field_manager: param("fieldManager"),
                patch_type: None,
                dry_run: param("dryRun").is_some(),
                user_agent: self.user_agent,
                fault: None,
            },
        })
    }
}

/// `%XX` and `+` decoding of a query value (field managers are plain names;
/// a URL crate for this one use is not worth the dependency).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_an_audit_event_to_a_request_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.log");
        let ev = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/ns1/deployments/web/status?fieldManager=wasm%2Dreconciler\u0026dryRun=All","verb":"patch","user":{"username":"system:serviceaccount:ns1:host","groups":["system:serviceaccounts"]},"userAgent":"wasm-reconciler/0.1.0 (run; a_1)","objectRef":{"resource":"deployments","namespace":"ns1","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","stage":"ResponseComplete","requestURI":"/readyz","verb":"get","user":{"username":"wr-admin"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseStarted","requestURI":"/api/v1/configmaps?watch=true","verb":"watch","user":{"username":"x"},"objectRef":{"resource":"configmaps","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseComplete","requestURI":"/api/v1/configmaps?watch=true","verb":"watch","user":{"username":"x"},"objectRef":{"resource":"configmaps","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseCompl"#;
        std::fs::write(&p, ev).unwrap();
        let log = AuditLog::new(&p);
        let rs = log.since(0).unwrap();
        assert_eq!(
            rs.len(),
            2,
            "non-resource and partial lines skipped: {rs:?}"
        );
        let r = &rs[0].record;
        assert_eq!(rs[0].user, "system:serviceaccount:ns1:host");
        assert_eq!(
            (
                r.verb.as_str(),
                r.group.as_str(),
                r.version.as_str(),
                r.resource.as_str()
            ),
            ("patch", "apps", "v1", "deployments")
        );
        assert_eq!(r.subresource.as_deref(), Some("status"));
        assert_eq!(r.namespace.as_deref(), Some("ns1"));
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.code, 200);
        assert_eq!(r.field_manager.as_deref(), Some("wasm-reconciler"));
        assert!(r.dry_run && r.is_write());
        assert_eq!(
            r.user_agent.as_deref(),
            Some("wasm-reconciler/0.1.0 (run; a_1)")
        );
        assert_eq!(rs[1].record.verb, "watch");
        assert!(rs[1].record.namespace.is_none());
        let mark = log.mark().unwrap();
        assert!(log.since(mark).unwrap().is_empty());
    }

    #[test]
    fn a_mark_keeps_only_requests_received_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.log");
        let ev = |name: &str, received: &str| {
            format!(
                r#"{{"stage":"ResponseComplete","verb":"patch","user":{{"username":"u"}},"objectRef":{{"resource":"configmaps","namespace":"ns","name":"{name}","apiVersion":"v1"}},"requestReceivedTimestamp":"{received}","responseStatus":{{"code":200}}}}"#
            ) + "\n"
        };
        std::fs::write(&p, ev("old", "2026-12-02T04:56:14.073876Z")).unwrap();
        let m = Mark {
            offset: log_len(&p),
            at: "2026-12-02T04:56:14.100000Z".parse().unwrap(),
        };
        // Received before the mark, written after it: the write raced the mark.
        let late = ev("late", "2026-12-02T04:56:14.099999Z");
        let new = ev("new", "2026-12-02T04:56:14.125707Z");
        // Received first, logged last (it completed after `new`).
        let cause = ev("cause", "2026-12-02T04:56:14.120000Z");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(&late);
        text.push_str(&new);
        text.push_str(&cause);
        std::fs::write(&p, text).unwrap();
        let log = AuditLog::new(&p);
        let names: Vec<_> = log
            .since_mark(&m)
            .unwrap()
            .into_iter()
            .filter_map(|r| r.record.name)
            .collect();
        assert_eq!(names, ["cause", "new"], "in the order received");
        assert_eq!(
            log.since(m.offset).unwrap().len(),
            3,
            "all after the offset"
        );
    }

    fn log_len(p: &Path) -> u64 {
        std::fs::metadata(p).unwrap().len()
    }
}

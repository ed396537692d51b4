//! Recording reconciles: each plugin call's request and answer, with the
//! writes the host decided on, into a directory that `wasm-reconciler replay`
//! and `explain` read offline.
//!
//! Layout of the directory (format `wasm-reconciler.dev/records/v1`):
//!
//! - `blobs/<sha256 hex>.json.zst`: requests (without `now`) and outcomes,
//!   zstd-compressed JSON named by the sha256 of the JSON, so an answer or
//!   an input repeated by many reconciles is stored once;
//! - `records/<seq, 12 digits>.json`: one [`Record`] per plugin call, naming
//!   its request and outcome blobs.
//!
//! The store is bounded by a record count and a byte total (records plus the
//! blobs they reference): past either, the oldest records go, and blobs no
//! record references any more with them. Secrets are redacted before anything
//! is written ([`redact`]), or calls that see a Secret are not recorded at
//! all ([`SecretPolicy::Exclude`]).
//!
//! The reconcile path hands a call over through a bounded channel and never
//! waits: serialising, hashing and file writes happen on the recorder's own
//! thread, and a call that finds the channel full is dropped (counted).

pub mod redact;
pub mod store;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wr_runtime::{CallLimits, ReconcileRequest, ReconcileResponse};

use crate::plugin::PluginError;

/// Subdirectory of content-addressed blobs.
pub const BLOBS_DIR: &str = "blobs";
/// Subdirectory of records.
pub const RECORDS_DIR: &str = "records";
/// zstd level of blobs (fast; JSON shrinks several times already).
const BLOB_ZSTD_LEVEL: i32 = 3;
/// Calls waiting for the writer before new ones are dropped.
const QUEUE_DEPTH: usize = 1024;

/// What happens to a call whose request or response holds a Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SecretPolicy {
    /// Record it with every Secret's data replaced ([`redact`]).
    #[default]
    Redact,
    /// Do not record it.
    Exclude,
}

/// Where and how much to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The store's directory (created when missing; an existing store is continued).
    pub dir: PathBuf,
    /// Most records kept.
    pub max_records: usize,
    /// Most bytes kept (records and blobs).
    pub max_bytes: u64,
    /// Secrets: redact (default) or exclude.
    pub secrets: SecretPolicy,
}

/// The parent a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// Parent `apiVersion`.
    pub api_version: String,
    /// Parent kind.
    pub kind: String,
    /// Namespace (absent: cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// metadata.generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

impl ParentRef {
    /// `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// A write the host decided on after the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteRef {
    /// `create`, `apply`, `recreate` or `delete`.
    pub verb: String,
    /// Kind of the child.
    pub kind: String,
    /// Namespace of the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the child.
    pub name: String,
}

/// The call limits of a record, so a replay runs under the same ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedLimits {
    /// Wall-clock budget in milliseconds.
    pub timeout_millis: u64,
    /// Linear memory cap.
    pub max_memory_bytes: usize,
    /// Fuel budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Response size cap.
    pub max_response_bytes: usize,
}

impl From<&CallLimits> for RecordedLimits {
    fn from(l: &CallLimits) -> Self {
        Self {
            timeout_millis: l.timeout.as_millis() as u64,
            max_memory_bytes: l.max_memory_bytes,
            fuel: l.fuel,
            max_response_bytes: l.max_response_bytes,
        }
    }
}

impl From<RecordedLimits> for CallLimits {
    fn from(l: RecordedLimits) -> Self {
        CallLimits {
            timeout: std::time::Duration::from_millis(l.timeout_millis),
            max_memory_bytes: l.max_memory_bytes,
            fuel: l.fuel,
            max_response_bytes: l.max_response_bytes,
        }
    }
}

/// One recorded plugin call (`records/<seq>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Position in the store (increasing).
    pub seq: u64,
    /// When the call returned (RFC 3339).
    pub time: String,
    /// WasmController name.
    pub controller: String,
    /// The parent.
    pub parent: ParentRef,
    /// What queued the reconcile, when the host knows (today it does not:
    /// `explain` derives it from which inputs changed since the previous record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// `sha256:` of the request without `now`: equal inputs have equal
    /// digests (the request blob's id, prefixed).
    pub input_digest: String,
    /// The request's `now` (kept out of the blob so equal inputs share one).
    pub now: String,
    /// Blob id (sha256 hex) of the request without `now`.
    pub request: String,
    /// Blob id of the outcome ([`outcome_bytes`]).
    pub outcome: String,
    /// `sha256:` digest of the component that answered.
    pub plugin: String,
    /// Limits of the call.
    pub limits: RecordedLimits,
    /// Writes the host decided on (children created, applied, recreated, deleted).
    #[serde(default)]
    pub writes: Vec<WriteRef>,
    /// How many Secrets were redacted in the request and outcome.
    #[serde(default)]
    pub redacted_secrets: usize,
}

/// A call as the reconcile path hands it over.
pub struct Exchange {
    /// WasmController name.
    pub controller: String,
    /// The parent.
    pub parent: ParentRef,
    /// The request.
    pub request: ReconcileRequest,
    /// The answer.
    pub outcome: Result<ReconcileResponse, PluginError>,
    /// The writes decided.
    pub writes: Vec<WriteRef>,
    /// Component digest.
    pub plugin: String,
    /// Limits of the call.
    pub limits: RecordedLimits,
    /// uids of the request's objects that are Secrets (redacted even when
    /// they carry no apiVersion/kind).
    pub secret_uids: Vec<String>,
}

/// The outcome of a call as JSON: `{"response": …}` or `{"error": {class,
/// reason|kind, message}}`. Replay compares these, so it is one function.
pub fn outcome_value(outcome: &Result<ReconcileResponse, PluginError>) -> Value {
    match outcome {
        Ok(r) => json!({ "response": r }),
        Err(PluginError::Permanent { reason, message }) => {
            json!({"error": {"class": "Permanent", "reason": reason, "message": message}})
        }
        Err(PluginError::Transient { reason, message }) => {
            json!({"error": {"class": "Transient", "reason": reason, "message": message}})
        }
        Err(PluginError::Fault { kind, message }) => {
            json!({"error": {"class": "Fault", "kind": kind.to_string(), "message": message}})
        }
    }
}

/// The stored bytes of an outcome: [`outcome_value`], Secrets redacted, as
/// compact JSON. A replay of the same request through the same component
/// gives the same bytes.
pub fn outcome_bytes(outcome: &Result<ReconcileResponse, PluginError>) -> (Vec<u8>, usize) {
    let mut v = outcome_value(outcome);
    let n = redact::redact(&mut v, &[]);
    (serde_json::to_vec(&v).unwrap_or_default(), n)
}

/// The request a record describes: its blob (the request without `now`)
/// with the record's `now` put back.
pub fn request_of(blob: &[u8], now: &str) -> Result<ReconcileRequest, serde_json::Error> {
    let mut v: Value = serde_json::from_slice(blob)?;
    if let Value::Object(m) = &mut v {
        m.insert("now".into(), Value::String(now.to_string()));
    }
    serde_json::from_value(v)
}

/// The call of one reconcile pass as a record wants it: the parent's
/// identity, the request and answer, the component and the writes decided.
pub(crate) fn exchange(
    target: &crate::target::Target,
    observed: &crate::decide::Observed,
    request: &ReconcileRequest,
    outcome: &Result<ReconcileResponse, PluginError>,
    decision: &crate::decide::Decision,
    plugin: &str,
) -> Exchange {
    let parent = &observed.parent;
    let writes = match decision {
        crate::decide::Decision::Answered(a) => write_refs(target, a),
        crate::decide::Decision::Failed(_) => Vec::new(),
    };
    let secret_uids = secret_uids(target, observed);
    Exchange {
        controller: target.name.clone(),
        parent: ParentRef {
            api_version: target.parent.ar.api_version.clone(),
            kind: target.parent.ar.kind.clone(),
            namespace: parent.metadata.namespace.clone(),
            name: parent.metadata.name.clone().unwrap_or_default(),
            uid: parent.metadata.uid.clone().unwrap_or_default(),
            generation: parent.metadata.generation,
        },
        request: request.clone(),
        outcome: outcome.clone(),
        writes,
        plugin: plugin.to_string(),
        limits: (&target.limits).into(),
        secret_uids,
    }
}

/// The uids of the Secrets a pass saw (parent, children, related), so a
/// record can leave their data out. Objects from a list may lack
/// apiVersion/kind (a real API server leaves them out of list items), so
/// Secrets are known by uid from the resource they were read as.
fn secret_uids(target: &crate::target::Target, observed: &crate::decide::Observed) -> Vec<String> {
    let is_secret = |ar: &kube::api::ApiResource| ar.group.is_empty() && ar.kind == "Secret";
    let uid = |o: &kube::api::DynamicObject| o.metadata.uid.clone();
    let mut secret_uids: Vec<String> = Vec::new();
    if is_secret(&target.parent.ar) {
        secret_uids.extend(uid(&observed.parent));
    }
    for (k, o) in &observed.children {
        if target
            .children
            .get(*k)
            .is_some_and(|c| is_secret(&c.resolved.ar))
        {
            secret_uids.extend(uid(o));
        }
    }
    for (r, o) in &observed.related {
        if target
            .related
            .get(*r)
            .is_some_and(|t| is_secret(&t.resolved.ar))
        {
            secret_uids.extend(uid(o));
        }
    }
    secret_uids
}

/// The child writes an answered decision makes (creates, applies,
/// recreates, then deletes), by kind and name.
fn write_refs(target: &crate::target::Target, a: &crate::decide::Answer) -> Vec<WriteRef> {
    use crate::apply::ChildAction;
    let kind = |k: usize| {
        target
            .children
            .get(k)
            .map(|c| c.resolved.ar.kind.clone())
            .unwrap_or_default()
    };
    let mut writes = Vec::new();
    for c in &a.children {
        let verb = match c.action {
            ChildAction::Create => "create",
            ChildAction::Apply => "apply",
            ChildAction::Recreate { .. } => "recreate",
            _ => continue,
        };
        writes.push(WriteRef {
            verb: verb.into(),
            kind: kind(c.kind),
            namespace: c.namespace.clone(),
            name: c.name.clone(),
        });
    }
    writes.extend(a.deletes.iter().map(|d| WriteRef {
        verb: "delete".into(),
        kind: kind(d.kind),
        namespace: d.namespace.clone(),
        name: d.name.clone(),
    }));
    writes
}

/// Hands calls to the writer thread (see the module docs).
pub struct Recorder {
    tx: SyncSender<ToWriter>,
    dropped: AtomicU64,
}

/// What the writer thread is handed: a call, or a flush to acknowledge once
/// every call queued before it is written.
enum ToWriter {
    Call(Box<Exchange>),
    Flush(SyncSender<()>),
}

/// Why the store cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A directory could not be created or read.
    #[error("record store {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// IO error.
        #[source]
        source: std::io::Error,
    },
}

impl Recorder {
    /// Opens (or creates) the store and starts its writer thread.
    pub fn start(opts: RecordOptions) -> Result<Self, RecordError> {
        let state = Writer::open(opts)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE_DEPTH);
        std::thread::Builder::new()
            .name("record-writer".into())
            .spawn(move || state.run(rx))
            .map_err(|source| RecordError::Io {
                path: "record-writer thread".into(),
                source,
            })?;
        Ok(Self {
            tx,
            dropped: AtomicU64::new(0),
        })
    }

    /// Queues one call; never blocks (a full queue drops it).
    pub fn record(&self, exchange: Exchange) {
        match self.tx.try_send(ToWriter::Call(Box::new(exchange))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!(
                        dropped = n,
                        "record store falling behind; calls not recorded"
                    );
                }
            }
        }
    }

    /// Waits (up to `within`) until every call queued so far is written:
    /// at shutdown, and before reading the store back. `false`: not within
    /// the time (or the writer is gone). Blocks the calling thread.
    pub fn flush(&self, within: std::time::Duration) -> bool {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        self.tx.send(ToWriter::Flush(ack)).is_ok() && done.recv_timeout(within).is_ok()
    }

    /// Calls dropped so far because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One kept record: its file, size and blobs.
struct Kept {
    path: PathBuf,
    bytes: u64,
    blobs: [String; 2],
}

/// The writer thread's view of the store.
struct Writer {
    opts: RecordOptions,
    next_seq: u64,
    kept: VecDeque<Kept>,
    /// Blob id → (references, size).
    blobs: HashMap<String, (u32, u64)>,
    bytes: u64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Writer {
    /// Opens the store, taking over the records already there.
    fn open(opts: RecordOptions) -> Result<Self, RecordError> {
        let blobs_dir = opts.dir.join(BLOBS_DIR);
        let records_dir = opts.dir.join(RECORDS_DIR);
        std::fs::create_dir_all(&blobs_dir).map_err(io(&blobs_dir))?;
        std::fs::create_dir_all(&records_dir).map_err(io(&records_dir))?;
        let mut w = Writer {
            opts,
            next_seq: 1,
            kept: VecDeque::new(),
            blobs: HashMap::new(),
            bytes: 0,
        };
        for (path, rec) in store::read_records(&w.opts.dir).map_err(io(&records_dir))? {
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            for id in [&rec.request, &rec.outcome] {
                let size = std::fs::metadata(store::blob_path(&w.opts.dir, id))
                    .map(|m| m.len())
                    .unwrap_or(0);
                w.add_blob_ref(id, size);
            }
            w.bytes += bytes;
            w.next_seq = w.next_seq.max(rec.seq + 1);
            w.kept.push_back(Kept {
                path,
                bytes,
                blobs: [rec.request, rec.outcome],
            });
        }
        Ok(w)
    }

    fn add_blob_ref(&mut self, id: &str, size: u64) {
        let e = self.blobs.entry(id.to_string()).or_insert((0, size));
        if e.0 == 0 {
            self.bytes += size;
        }
        e.0 += 1;
    }

    fn run(mut self, rx: Receiver<ToWriter>) {
        while let Ok(m) = rx.recv() {
            match m {
                ToWriter::Call(x) => {
                    if let Err(e) = self.write(*x) {
                        tracing::warn!(error = %e, "recording a reconcile failed");
                    }
                }
                ToWriter::Flush(ack) => {
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Stores a blob once (zstd-compressed); returns its id, the sha256 of
    /// the uncompressed bytes.
    fn put_blob(&mut self, bytes: &[u8]) -> Result<String, std::io::Error> {
        let id = hex::encode(Sha256::digest(bytes));
        let mut size = self.blobs.get(&id).map_or(0, |(_, s)| *s);
        if self.blobs.get(&id).is_none_or(|(refs, _)| *refs == 0) {
            let path = store::blob_path(&self.opts.dir, &id);
            let tmp = path.with_extension("tmp");
            let packed = zstd::stream::encode_all(bytes, BLOB_ZSTD_LEVEL)?;
            std::fs::write(&tmp, &packed)?;
            std::fs::rename(&tmp, &path)?;
            size = packed.len() as u64;
        }
        self.add_blob_ref(&id, size);
        Ok(id)
    }

    fn write(&mut self, x: Exchange) -> Result<(), std::io::Error> {
        let mut request = serde_json::to_value(&x.request).unwrap_or_default();
        let (outcome, outcome_secrets) = outcome_bytes(&x.outcome);
        if self.opts.secrets == SecretPolicy::Exclude
            && (outcome_secrets > 0 || redact::count_secrets(&request, &x.secret_uids) > 0)
        {
            return Ok(());
        }
        let secrets = redact::redact(&mut request, &x.secret_uids) + outcome_secrets;
        let now = x.request.now.clone();
        if let Value::Object(m) = &mut request {
            m.remove("now");
        }
        let request = serde_json::to_vec(&request).unwrap_or_default();
        let req_id = self.put_blob(&request)?;
        let input_digest = format!("sha256:{req_id}");
        let out_id = self.put_blob(&outcome)?;
        let rec = Record {
            seq: self.next_seq,
            time: k8s_openapi::jiff::Timestamp::now().to_string(),
            controller: x.controller,
            parent: x.parent,
            trigger: None,
            input_digest,
            now,
            request: req_id.clone(),
            outcome: out_id.clone(),
            plugin: x.plugin,
            limits: x.limits,
            writes: x.writes,
            redacted_secrets: secrets,
        };
        self.next_seq += 1;
        let text = serde_json::to_vec(&rec).unwrap_or_default();
        let path = store::record_path(&self.opts.dir, rec.seq);
        std::fs::write(&path, &text)?;
        self.bytes += text.len() as u64;
        self.kept.push_back(Kept {
            path,
            bytes: text.len() as u64,
            blobs: [req_id, out_id],
        });
        self.evict();
        Ok(())
    }

    /// Drops the oldest records (and their unreferenced blobs) until the
    /// store is within its bounds.
    fn evict(&mut self) {
        while self.kept.len() > self.opts.max_records.max(1)
            || (self.bytes > self.opts.max_bytes && self.kept.len() > 1)
        {
            let Some(old) = self.kept.pop_front() else {
                return;
            };
            let _ = std::fs::remove_file(&old.path);
            self.bytes = self.bytes.saturating_sub(old.bytes);
            for id in old.blobs {
                if let Some(e) = self.blobs.get_mut(&id) {
                    e.0 = e.0.saturating_sub(1);
                    if e.0 == 0 {
                        let size = e.1;
                        self.blobs.remove(&id);
                        self.bytes = self.bytes.saturating_sub(size);
                        let _ = std::fs::remove_file(store::blob_path(&self.opts.dir, &id));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(name: &str, replicas: u64) -> Exchange {
        let request: ReconcileRequest = serde_json::from_value(json!({
            "parent": {"apiVersion": "x/v1", "kind": "P", "metadata": {"name": name}},
            "now": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        let response: ReconcileResponse = serde_json::from_value(json!({
            "children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": replicas.to_string()}}],
            "conditions": [],
        }))
        .unwrap();
        Exchange {
            controller: "c".into(),
            parent: ParentRef {
                api_version: "x/v1".into(),
                kind: "P".into(),
                namespace: Some("ns".into()),
                name: name.into(),
                uid: "u".into(),
                generation: Some(1),
            },
            request,
            outcome: Ok(response),
            writes: vec![],
            plugin: "sha256:00".into(),
            limits: (&CallLimits::default()).into(),
            secret_uids: vec![],
        }
    }

    fn writer(dir: &Path, max_records: usize, max_bytes: u64) -> Writer {
        Writer::open(RecordOptions {
            dir: dir.to_path_buf(),
            max_records,
            max_bytes,
            secrets: SecretPolicy::Redact,
        })
        .unwrap()
    }

    fn files(dir: &Path, sub: &str) -> usize {
        std::fs::read_dir(dir.join(sub)).unwrap().count()
    }

    #[test]
    fn equal_answers_are_stored_once_and_the_oldest_records_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 3, u64::MAX);
        for _ in 0..2 {
            w.write(exchange("a", 1)).unwrap();
        }
        // Two records, one request blob and one outcome blob.
        assert_eq!(files(dir.path(), RECORDS_DIR), 2);
        assert_eq!(files(dir.path(), BLOBS_DIR), 2);
        for i in 0..3 {
            w.write(exchange("b", i)).unwrap();
        }
        let kept = store::read_records(dir.path()).unwrap();
        let seqs: Vec<u64> = kept.iter().map(|(_, r)| r.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        // a's blobs went with its records: b's request + three outcomes.
        assert_eq!(files(dir.path(), BLOBS_DIR), 4);
        // Reopened, the store continues where it was.
        let mut w = writer(dir.path(), 3, u64::MAX);
        w.write(exchange("c", 9)).unwrap();
        let seqs: Vec<u64> = store::read_records(dir.path())
            .unwrap()
            .iter()
            .map(|(_, r)| r.seq)
            .collect();
        assert_eq!(seqs, vec![4, 5, 6]);
    }

    #[test]
    fn requests_that_differ_only_in_now_share_a_blob_and_replay_with_their_own_now() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 10, u64::MAX);
        let mut later = exchange("a", 1);
        later.request.now = "2026-01-01T00:10:00Z".into();
        w.write(exchange("a", 1)).unwrap();
        w.write(later).unwrap();
        assert_eq!(files(dir.path(), BLOBS_DIR), 2);
        let recs = store::read_records(dir.path()).unwrap();
        assert_eq!(recs[0].1.input_digest, recs[1].1.input_digest);
        let (_, r) = &recs[1];
        let blob = store::read_blob(dir.path(), &r.request).unwrap();
        let req = request_of(&blob, &r.now).unwrap();
        assert_eq!(req.now, "2026-01-01T00:10:00Z");
        assert_eq!(req.parent["metadata"]["name"], "a");
    }

    #[test]
    fn the_byte_bound_holds_after_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 1000, 4000);
        for i in 0..20 {
            w.write(exchange(&format!("p{i}"), i)).unwrap();
            let on_disk: u64 = [RECORDS_DIR, BLOBS_DIR]
                .iter()
                .flat_map(|d| std::fs::read_dir(dir.path().join(d)).unwrap())
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            assert_eq!(on_disk, w.bytes);
            assert!(w.bytes <= 4000 || w.kept.len() == 1, "{}", w.bytes);
        }
        assert!(w.kept.len() < 20);
    }
}

//! Optional persistence to a data directory, so a dev cluster survives a restart.
//!
//! Layout: `snapshot.json` (every object and the resourceVersion counter) and
//! `wal.jsonl` (one line per committed change since the snapshot).
//!
//! Guarantee: every committed write is appended to the WAL with one `write`
//! call *before* the request is answered, so a clean shutdown, a crash or a
//! `kill -9` of the server loses nothing that was acknowledged. The WAL is
//! not fsynced per write (that would cap writes at the disk's sync rate);
//! snapshots are fsynced and renamed atomically. A machine power loss can
//! therefore lose the most recent writes. Watch history is not persisted:
//! after a restart, watches from older resourceVersions get `410 Gone`
//! and clients relist, exactly as after an etcd compaction.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::store::{Event, EventKind, Store};

pub struct Persistence {
    dir: PathBuf,
    wal: Mutex<File>,
}

/// State read back from a data directory.
pub struct Loaded {
    pub rv: u64,
    pub objects: Vec<(String, String, Value)>,
}

fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("snapshot.json")
}

fn wal_path(dir: &Path) -> PathBuf {
    dir.join("wal.jsonl")
}

/// Read snapshot + WAL. A torn last WAL line (crash mid-write) is ignored.
pub fn load(dir: &Path) -> io::Result<Loaded> {
    let mut objects = std::collections::BTreeMap::<(String, String), Value>::new();
    let mut rv = 0;
    let snap = snapshot_path(dir);
    if snap.exists() {
        let v: Value = serde_json::from_reader(BufReader::new(File::open(&snap)?))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        rv = v["rv"].as_u64().unwrap_or(0);
        for o in v["objects"].as_array().into_iter().flatten() {
            if let (Some(r), Some(k)) = (o["r"].as_str(), o["k"].as_str()) {
                objects.insert((r.to_string(), k.to_string()), o["o"].clone());
            }
        }
    }
    let wal = wal_path(dir);
    if wal.exists() {
        for line in BufReader::new(File::open(&wal)?).lines() {
            let line = line?;
            let Ok(e) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let erv = e["rv"].as_u64().unwrap_or(0);
            if erv <= rv && rv != 0 {
                continue;
            }
            let (Some(r), Some(k)) = (e["r"].as_str(), e["k"].as_str()) else {
                continue;
            };
            let key = (r.to_string(), k.to_string());
            if e["o"].is_null() {
                objects.remove(&key);
            } else {
                objects.insert(key, e["o"].clone());
            }
            rv = rv.max(erv);
        }
    }
    Ok(Loaded {
        rv,
        objects: objects.into_iter().map(|((r, k), o)| (r, k, o)).collect(),
    })
}

impl Persistence {
    /// Open the WAL for appending (truncating it: call after [`Persistence::snapshot`]).
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let wal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(wal_path(dir))?;
        Ok(Persistence {
            dir: dir.to_path_buf(),
            wal: Mutex::new(wal),
        })
    }

    /// Append one committed change (called under the store's write lock).
    pub fn record(&self, e: &Event) {
        let obj = match e.kind {
            EventKind::Deleted => &Value::Null,
            _ => &*e.object,
        };
        let mut line =
            match serde_json::to_vec(&json!({"rv": e.rv, "r": &*e.resource, "k": e.key, "o": obj}))
            {
                Ok(l) => l,
                Err(err) => {
                    tracing::error!(error = %err, "cannot encode WAL entry");
                    return;
                }
            };
        line.push(b'\n');
        let mut f = self.wal.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = f.write_all(&line) {
            tracing::error!(error = %err, "cannot append to WAL");
        }
    }

    /// Write a snapshot of `store` (fsync + atomic rename), then empty the WAL.
    /// Only call when no writes run concurrently (start-up, shutdown).
    pub fn snapshot(&self, store: &Store) -> io::Result<()> {
        let (rv, objects) = store.dump();
        let objs: Vec<Value> = objects
            .iter()
            .map(|(r, k, o)| json!({"r": r, "k": k, "o": &**o}))
            .collect();
        let tmp = self.dir.join("snapshot.json.tmp");
        {
            let mut f = File::create(&tmp)?;
            serde_json::to_writer(&mut f, &json!({"rv": rv, "objects": objs}))
                .map_err(io::Error::other)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, snapshot_path(&self.dir))?;
        let f = self.wal.lock().unwrap_or_else(|p| p.into_inner());
        f.set_len(0)?;
        f.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Expect;

    #[test]
    fn wal_replays_after_snapshot_and_skips_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = std::sync::Arc::new(Persistence::open(dir.path()).unwrap());
        let sink = p.clone();
        let store = Store::new(10).with_sink(Box::new(move |e| sink.record(e)));
        store
            .commit(
                "/cm",
                "d/a",
                Expect::Absent,
                Some(json!({"metadata": {"name": "a"}})),
            )
            .unwrap();
        p.snapshot(&store).unwrap();
        store
            .commit(
                "/cm",
                "d/b",
                Expect::Absent,
                Some(json!({"metadata": {"name": "b"}})),
            )
            .unwrap();
        store.commit("/cm", "d/a", Expect::Any, None).unwrap();
        // A crash in the middle of a line.
        OpenOptions::new()
            .append(true)
            .open(wal_path(dir.path()))
            .unwrap()
            .write_all(b"{\"rv\": 9, \"r\"")
            .unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.rv, 3);
        let keys: Vec<_> = loaded.objects.iter().map(|(_, k, _)| k.as_str()).collect();
        assert_eq!(keys, vec!["d/b"]);
        assert_eq!(loaded.objects[0].2["metadata"]["resourceVersion"], "2");
    }
}

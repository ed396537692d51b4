//! A real Kubernetes control plane built from source (`tests/kube/`): etcd,
//! kube-apiserver and kube-controller-manager as local processes on loopback.
//!
//! Why: the embedded API server is a re-implementation; the real one is the
//! referee. This fixture starts the real one with what an operator relies on —
//! TLS with a generated CA, client-certificate auth for an admin, ServiceAccount
//! tokens (TokenRequest), RBAC authorization, an audit log (the request log of
//! the tests), and the garbage collector, namespace and ServiceAccount
//! controllers — and tears it down without leaving a process behind.
//!
//! All processes share one process group (led by a small watchdog shell that
//! also kills the group when the owning process dies, so a test binary that
//! exits without dropping a static fixture leaves nothing running). Certificates
//! come from the `openssl` CLI, which every CI image has; an X.509 crate would be
//! a dependency for five `openssl` calls.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The identity the admin kubeconfig authenticates as (group `system:masters`).
pub const ADMIN_USER: &str = "wr-admin";
/// The identity kube-controller-manager authenticates as.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

/// Files of a started control plane (all under one directory).
#[derive(Debug, Clone)]
pub struct ClusterFiles {
    /// The directory holding certificates, data, logs and kubeconfigs.
    pub dir: PathBuf,
    /// Admin kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// kube-apiserver's audit log (JSON lines, level Metadata; see [`crate::audit`]).
    pub audit_log: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
}

/// A running control plane. Dropping it stops every process (unless detached).
pub struct RealCluster {
    /// Where everything lives.
    pub files: ClusterFiles,
    /// Process group of the watchdog, etcd, kube-apiserver and kube-controller-manager.
    pub pgid: u32,
    /// Seconds from spawning etcd to a ready API server with a working controller manager.
    pub start_secs: f64,
    detached: bool,
    children: Vec<Child>,
    _tmp: Option<tempfile::TempDir>,
}

/// How to start a control plane.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Directory to use (created); a temporary one removed on drop when `None`.
    pub dir: Option<PathBuf>,
    /// Leave the processes running after this process exits (the `up` command);
    /// `stop_dir` stops them.
    pub detach: bool,
}

impl RealCluster {
    /// Builds (or finds) the binaries and starts the control plane.
    pub fn start(opts: StartOptions) -> Result<RealCluster> {
        let bin = binaries()?;
        let (tmp, dir) = match &opts.dir {
            Some(d) => {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
                (None, d.canonicalize()?)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("wr-real-cluster")
                    .tempdir()?;
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
        };
        let t0 = Instant::now();
        let pki = dir.join("pki");
        certificates(&pki)?;
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = free_port()?;
        let url = format!("https://127.0.0.1:{api_port}");
        let files = ClusterFiles {
            kubeconfig: dir.join("admin.kubeconfig"),
            audit_log: dir.join("audit.log"),
            url: url.clone(),
            dir: dir.clone(),
        };
        write_kubeconfig(&files.kubeconfig, &url, &pki, "admin")?;
        write_kubeconfig(&dir.join("kcm.kubeconfig"), &url, &pki, "kcm")?;
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY)?;

        // The watchdog leads the process group; with `detach` it only waits.
        let owner = if opts.detach { 0 } else { std::process::id() };
        let watchdog = spawn(
            Command::new("sh")
                .arg("-c")
                .arg(WATCHDOG)
                .arg("watchdog")
                .arg(owner.to_string())
                .arg(if opts.detach || opts.dir.is_some() {
                    String::new()
                } else {
                    dir.display().to_string()
                }),
            &dir.join("watchdog.log"),
            None,
        )?;
        let pgid = watchdog.id();
        let mut cluster = RealCluster {
            files,
            pgid,
            start_secs: 0.0,
            detached: false,
            children: vec![watchdog],
            _tmp: tmp,
        };
        std::fs::write(dir.join("pgid"), pgid.to_string())?;
        let g = Some(pgid);
        let p = |f: &str| pki.join(f).display().to_string();
        let etcd = spawn(
            Command::new(bin.join("etcd")).args([
                "--name=default".to_string(),
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true".to_string(),
                "--log-level=warn".to_string(),
            ]),
            &dir.join("etcd.log"),
            g,
        )?;
        cluster.children.push(etcd);
        let apiserver = spawn(
            Command::new(bin.join("kube-apiserver")).args([
                format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
                "--bind-address=127.0.0.1".to_string(),
                "--advertise-address=127.0.0.1".to_string(),
                format!("--secure-port={api_port}"),
                format!("--tls-cert-file={}", p("serving.crt")),
                format!("--tls-private-key-file={}", p("serving.key")),
                format!("--client-ca-file={}", p("ca.crt")),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
                "--service-cluster-ip-range=10.0.0.0/24".to_string(),
                "--authorization-mode=RBAC".to_string(),
                // The default reconciler refuses a loopback advertise address;
                // nothing here needs the `kubernetes` Service's endpoints.
                "--endpoint-reconciler-type=none".to_string(),
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", cluster.files.audit_log.display()),
                "--audit-log-maxsize=0".to_string(),
                "--profiling=false".to_string(),
            ]),
            &dir.join("kube-apiserver.log"),
            g,
        )?;
        cluster.children.push(apiserver);
        let kcm_kc = dir.join("kcm.kubeconfig").display().to_string();
        let kcm = spawn(
            Command::new(bin.join("kube-controller-manager")).args([
                format!("--kubeconfig={kcm_kc}"),
                format!("--authentication-kubeconfig={kcm_kc}"),
                format!("--authorization-kubeconfig={kcm_kc}"),
                "--bind-address=127.0.0.1".to_string(),
                format!("--secure-port={}", free_port()?),
                "--leader-elect=false".to_string(),
                // What an operator relies on; no scheduler, no kubelet, and not
                // the root-CA publisher (a `kube-root-ca.crt` ConfigMap in every
                // namespace would only add noise to tests that list ConfigMaps).
                "--controllers=garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller".to_string(),
                format!("--service-account-private-key-file={}", p("sa.key")),
                format!("--root-ca-file={}", p("ca.crt")),
                "--profiling=false".to_string(),
            ]),
            &dir.join("kube-controller-manager.log"),
            g,
        )?;
        cluster.children.push(kcm);
        cluster.wait_ready(Duration::from_secs(180))?;
        cluster.start_secs = t0.elapsed().as_secs_f64();
        cluster.detached = opts.detach;
        Ok(cluster)
    }

    /// Waits for `/readyz` and for the controller manager to have created the
    /// `default` ServiceAccount (the sign that its controllers run).
    fn wait_ready(&self, limit: Duration) -> Result<()> {
        let kc = self.files.kubeconfig.clone();
        let dir = self.files.dir.clone();
        let pgid = self.pgid;
        std::thread::spawn(move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let client = admin_client(&kc).await?;
                let until = Instant::now() + limit;
                let mut last: String;
                loop {
                    if !group_alive(pgid)? {
                        bail!(
                            "the control plane exited during start; logs in {}",
                            dir.display()
                        );
                    }
                    let ready = client
                        .request_text(http::Request::get("/readyz").body(Vec::new())?)
                        .await;
                    match ready {
                        Ok(t) if t.trim() == "ok" => {
                            let sa: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
                                kube::Api::namespaced(client.clone(), "default");
                            match sa.get_opt("default").await {
                                Ok(Some(_)) => return Ok(()),
                                Ok(None) => last = "no default ServiceAccount yet".into(),
                                Err(e) => last = e.to_string(),
                            }
                        }
                        Ok(t) => last = t,
                        Err(e) => last = e.to_string(),
                    }
                    if Instant::now() > until {
                        bail!(
                            "control plane not ready after {limit:?} (last: {last}); logs in {}",
                            dir.display()
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        })
        .join()
        .map_err(|_| anyhow::anyhow!("readiness thread panicked"))?
    }

    /// Stops every process of the group now and waits until none is left.
    pub fn stop(&mut self) -> Result<()> {
        stop_group(self.pgid)?;
        for c in &mut self.children {
            let _ = c.wait();
        }
        Ok(())
    }

    /// Leaves the processes running when this value is dropped.
    pub fn detach(&mut self) {
        self.detached = true;
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.stop();
        }
    }
}

/// Stops the control plane started (detached) in `dir` by `up`.
pub fn stop_dir(dir: &Path) -> Result<()> {
    let pgid: u32 = std::fs::read_to_string(dir.join("pgid"))
        .with_context(|| {
            format!(
                "reading {}/pgid (was `up` run with this --dir?)",
                dir.display()
            )
        })?
        .trim()
        .parse()
        .context("parsing the pgid file")?;
    stop_group(pgid)
}

/// Files of the control plane started in `dir` by `up` (for `env`).
pub fn files_in(dir: &Path) -> Result<ClusterFiles> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("{}", dir.display()))?;
    let kubeconfig = dir.join("admin.kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let url = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .context("no server in the kubeconfig")?
        .to_string();
    Ok(ClusterFiles {
        audit_log: dir.join("audit.log"),
        kubeconfig,
        url,
        dir,
    })
}

/// A kube client from the admin kubeconfig at `kc`.
pub async fn admin_client(kc: &Path) -> Result<kube::Client> {
    let cfg = kube_config(kc).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// The kube client configuration of the kubeconfig at `kc`.
pub async fn kube_config(kc: &Path) -> Result<kube::Config> {
    let k = kube::config::Kubeconfig::read_from(kc)
        .with_context(|| format!("reading {}", kc.display()))?;
    Ok(
        kube::Config::from_custom_kubeconfig(k, &kube::config::KubeConfigOptions::default())
            .await?,
    )
}

/// Runs `tests/kube/build.sh` (a no-op when the cache has the binaries) and
/// returns the directory with `etcd`, `kube-apiserver`, `kube-controller-manager`.
/// `WR_KUBE_BIN` overrides this with a directory of prebuilt binaries.
pub fn binaries() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("WR_KUBE_BIN") {
        return Ok(PathBuf::from(d));
    }
    let script = crate::plugins::workspace_root().join("tests/kube/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", script.display(), out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = text
        .lines()
        .last()
        .context("build.sh printed no directory")?
        .trim();
    Ok(PathBuf::from(dir))
}

/// Audit policy: every request at level Metadata (user, agent, verb, object
/// reference, response code) when the response is complete, and watches also
/// when they start; the API server's own loopback traffic is left out.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
"#;

/// `$1`: pid to outlive (0: none); `$2`: directory to remove afterwards.
/// Kills its own process group (itself included) when the owner is gone.
const WATCHDOG: &str = r#"if [ "$1" = 0 ]; then exec sleep infinity; fi
trap '' TERM
while kill -0 "$1" 2>/dev/null; do sleep 1; done
kill -TERM 0; sleep 3; [ -n "$2" ] && rm -rf "$2"; kill -KILL 0"#;

/// Spawns `cmd` with output to `log`, in group `pgid` (a new group when None).
fn spawn(cmd: &mut Command, log: &Path, pgid: Option<u32>) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    cmd.process_group(pgid.map_or(0, |g| g as i32));
    cmd.spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))
}

/// Whether any process of group `pgid` is alive (zombies excluded).
fn group_alive(pgid: u32) -> Result<bool> {
    Ok(!group_members(pgid)?.is_empty())
}

/// Live (non-zombie) processes of group `pgid`, from /proc.
fn group_members(pgid: u32) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc")? {
        let e = e?;
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may contain spaces.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2].parse::<u32>().ok() == Some(pgid) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// SIGTERM to the group, SIGKILL after 3 s, then waits until it is empty.
fn stop_group(pgid: u32) -> Result<()> {
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
    // Nothing of a test cluster is worth a graceful shutdown longer than this.
    let until = Instant::now() + Duration::from_secs(3);
    while group_alive(pgid)? && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if group_alive(pgid)? {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while group_alive(pgid)? {
            if Instant::now() > until {
                bail!(
                    "processes of group {pgid} survive SIGKILL: {:?}",
                    group_members(pgid)?
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// A free loopback port (bound and released; the window for a race is tiny).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Runs `openssl ARGS` in `dir`.
fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running openssl (install the openssl package)")?;
    if !out.status.success() {
        bail!(
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// CA, API server serving certificate, admin and controller-manager client
/// certificates (ECDSA P-256), and the ServiceAccount signing key (RSA).
fn certificates(pki: &Path) -> Result<()> {
    std::fs::create_dir_all(pki)?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=wr-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(pki, &ca)?;
    let leaf = |name: &str, subj: &str, ext: &str| -> Result<()> {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        let extf = format!("{name}.ext");
        std::fs::write(pki.join(&extf), ext)?;
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", subj]);
        openssl(pki, &req)?;
        openssl(
            pki,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "3650",
                "-extfile",
                &extf,
            ],
        )
    };
    leaf(
        "serving",
        "/CN=kube-apiserver",
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n",
    )?;
    let client = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n";
    leaf(
        "admin",
        &format!("/O=system:masters/CN={ADMIN_USER}"),
        client,
    )?;
    // system:masters: with one identity for all its controllers (no
    // --use-service-account-credentials) the garbage collector must reach every resource.
    leaf(
        "kcm",
        &format!("/O=system:masters/CN={CONTROLLER_MANAGER_USER}"),
        client,
    )?;
    openssl(
        pki,
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "sa.key",
        ],
    )?;
    openssl(pki, &["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
    Ok(())
}

/// A kubeconfig for `url` using the client certificate `pki/<who>.crt`.
fn write_kubeconfig(path: &Path, url: &str, pki: &Path, who: &str) -> Result<()> {
    let p = |f: &str| pki.join(f).display().to_string();
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: {url}
    certificate-authority: {ca}
users:
- name: {who}
  user:
    client-certificate: {crt}
    client-key: {key}
contexts:
- name: real
  context:
    cluster: real
    user: {who}
    namespace: default
current-context: real
",
        ca = p("ca.crt"),
        crt = p(&format!("{who}.crt")),
        key = p(&format!("{who}.key")),
    );
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

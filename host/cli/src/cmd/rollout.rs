//! `wasm-reconciler rollout status|promote|abort|pause|resume --controller NAME`:
//! shows and drives the canary rollout (and shadow comparison) of a
//! WasmController's candidate version.
//!
//! The rollout state lives in the WasmController's status, written by the
//! host; this command only reads it, and asks for a change by setting the
//! annotation `wasm-reconciler.dev/rollout-command` (the host applies it at
//! its next sync and removes it). So the command works against any host —
//! the leader picks it up — and never races the host's own status writes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use wr_engine::WasmController;
use wr_engine::canary::{self, Command};
use wr_engine::crd::{ROLLOUT_COMMAND_ANNOTATION, RolloutPhase};

/// User-Agent of this command's requests.
pub const USER_AGENT: &str = "wasm-reconciler-rollout";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Action {
    /// Print the rollout's progress and the shadow comparison.
    Status,
    /// Move every parent to the candidate now.
    Promote,
    /// Move every parent back to the active version now.
    Abort,
    /// Hold the current step (gates still roll back).
    Pause,
    /// Continue a paused rollout, or restart a rolled-back one at step 1.
    Resume,
}

impl Action {
    fn command(self) -> Option<Command> {
        match self {
            Action::Status => None,
            Action::Promote => Some(Command::Promote),
            Action::Abort => Some(Command::Abort),
            Action::Pause => Some(Command::Pause),
            Action::Resume => Some(Command::Resume),
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// What to do.
    #[arg(value_enum)]
    pub action: Action,
    /// Name of the WasmController.
    #[arg(long, value_name = "NAME")]
    pub controller: String,
    /// After a command, wait up to this many seconds for the host to apply it
    /// (0: do not wait).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub wait: u64,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Output format of the status.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub fn run(args: RolloutArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(rollout(args))
}

async fn rollout(args: RolloutArgs) -> anyhow::Result<ExitCode> {
    let client = super::user_client::connect(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        USER_AGENT,
    )
    .await?;
    let api: Api<WasmController> = Api::all(client.clone());
    let wc = super::user_client::get_controller(client, &args.controller).await?;
    let Some(cmd) = args.action.command() else {
        print_status(&wc, args.output)?;
        return Ok(ExitCode::SUCCESS);
    };
    let name = &args.controller;
    let word = cmd.as_str();
    if wc.spec.rollout.is_none() {
        anyhow::bail!("WasmController {name} has no spec.rollout: nothing to {word}");
    }
    // The phase before: the host's answer is the phase moving (a progress
    // report of the same phase, which the host may write at any time, is
    // not). A command that would not move it is refused here, as `kubectl
    // rollout pause` refuses a paused Deployment.
    let before = wc
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .map(|r| r.phase);
    if let Some(phase) = before
        && canary::phase_after(cmd, phase).is_none()
    {
        anyhow::bail!(
            "the rollout of WasmController {name} is {phase:?} (status.rollout.phase): {word} changes nothing"
        );
    }
    let cmd = word;
    let pp = PatchParams {
        field_manager: Some(USER_AGENT.into()),
        ..PatchParams::default()
    };
    let body = json!({"metadata": {"annotations": {ROLLOUT_COMMAND_ANNOTATION: cmd}}});
    api.patch(&args.controller, &pp, &Patch::Merge(&body))
        .await
        .with_context(|| format!("asking WasmController {} to {cmd}", args.controller))?;
    println!("asked the host to {cmd} the rollout of {}", args.controller);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let wc = api.get(&args.controller).await?;
        let pending = wc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ROLLOUT_COMMAND_ANNOTATION));
        let now = wc
            .status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .map(|r| r.phase);
        if !pending && now.is_some() && now != before {
            print_status(&wc, args.output)?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    if args.wait > 0 {
        eprintln!(
            "the host has not applied it within {}s (is a host running this controller?)",
            args.wait
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_status(wc: &WasmController, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let st = wc.status.clone().unwrap_or_default();
            let v = json!({
                "controller": wc.metadata.name,
                "activeDigest": st.plugin_digest,
                "rollout": st.rollout,
                "shadow": st.shadow,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Text => print!("{}", render(wc)),
    }
    Ok(())
}

/// The status as text.
pub fn render(wc: &WasmController) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let st = wc.status.clone().unwrap_or_default();
    let name = wc.metadata.name.as_deref().unwrap_or("");
    let _ = writeln!(out, "controller  {name}");
    let _ = writeln!(
        out,
        "active      {}",
        st.plugin_digest.as_deref().unwrap_or("(none loaded)")
    );
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t);
    match (&wc.spec.plugin.candidate, cond("CandidateLoaded")) {
        (None, _) => {
            let _ = writeln!(out, "candidate   (none: spec.plugin.candidate is not set)");
        }
        (Some(_), Some(c)) if c.status != "True" => {
            let _ = writeln!(out, "candidate   not loaded: {}: {}", c.reason, c.message);
        }
        (Some(_), c) => {
            // The condition's message is "candidate sha256:…": the label says it already.
            let msg = c.map(|c| c.message.as_str()).unwrap_or("loading");
            let msg = msg.strip_prefix("candidate ").unwrap_or(msg);
            let _ = writeln!(out, "candidate   {msg}");
        }
    }
    match (&wc.spec.rollout, &st.rollout) {
        (None, _) => {
            let _ = writeln!(out, "rollout     (none: spec.rollout is not set)");
        }
        (Some(_), None) => {
            let _ = writeln!(
                out,
                "rollout     not started (the candidate is not loaded yet)"
            );
        }
        (Some(_), Some(r)) => {
            let step = match r.phase {
                RolloutPhase::Promoted => "all parents on the candidate".to_string(),
                RolloutPhase::RolledBack | RolloutPhase::Aborted => {
                    "all parents on the active version".to_string()
                }
                _ => format!(
                    "step {} of {} (started {})",
                    r.step.max(1),
                    r.steps,
                    r.step_started_at.as_deref().unwrap_or("?")
                ),
            };
            let _ = writeln!(out, "rollout     {:?}, {step}", r.phase);
            let _ = writeln!(
                out,
                "            {} parents migrated, {} Ready; {} faults, {} permanent errors this step",
                r.migrated, r.migrated_ready, r.faults, r.permanent_errors
            );
            if let Some(m) = &r.message {
                let _ = writeln!(out, "            {m}");
            }
        }
    }
    if let Some(s) = &st.shadow {
        let _ = writeln!(
            out,
            "shadow      {} identical, {} differing, {} failing, {} dropped",
            s.identical, s.differing, s.failing, s.dropped
        );
        for d in &s.differences {
            let child = d.child.as_deref().unwrap_or("-");
            // A child only one version wants has field `(absent)`: say which.
            if d.field == "(absent)" {
                let who = if d.candidate.is_some() {
                    "only the candidate wants it"
                } else {
                    "only the active version wants it"
                };
                let _ = writeln!(out, "  {}  {child}: {who}", d.parent);
                continue;
            }
            let _ = writeln!(
                out,
                "  {}  {child}  {}: {} -> {}",
                d.parent,
                d.field,
                d.active.as_deref().unwrap_or("(absent)"),
                d.candidate.as_deref().unwrap_or("(absent)")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text_shows_step_gates_and_differences() {
        let wc: WasmController = serde_json::from_value(json!({
            "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
            "metadata": {"name": "sites"},
            "spec": {
                "parentResource": {"apiVersion": "x/v1", "kind": "Site"},
                "plugin": {"path": "/a.wasm", "candidate": {"path": "/b.wasm"}},
                "rollout": {"steps": [{"percent": 10}, {"percent": 100}]}
            },
            "status": {
                "pluginDigest": "sha256:aa",
                "conditions": [{"type": "CandidateLoaded", "status": "True", "reason": "Loaded",
                    "message": "candidate sha256:bb", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
                "rollout": {"candidateDigest": "sha256:bb", "phase": "Progressing", "step": 2,
                    "steps": 2, "stepStartedAt": "2026-12-01T00:00:00Z", "migrated": 4,
                    "migratedReady": 3, "faults": 0, "permanentErrors": 0},
                "shadow": {"candidateDigest": "sha256:bb", "identical": 5, "differing": 1,
                    "failing": 0, "differences": [{"parent": "ns/p", "child": "ConfigMap ns/p-a",
                    "field": "data.v", "active": "\"1\"", "candidate": "\"2\""},
                    {"parent": "ns/q", "child": "Deployment ns/q-d", "field": "(absent)",
                    "candidate": "\"present\""}]}
            }
        }))
        .unwrap();
        let text = render(&wc);
        for want in [
            "active      sha256:aa",
            "candidate   sha256:bb\n",
            "rollout     Progressing, step 2 of 2 (started 2026-12-01T00:00:00Z)",
            "4 parents migrated, 3 Ready",
            "shadow      5 identical, 1 differing, 0 failing, 0 dropped",
            "  ns/p  ConfigMap ns/p-a  data.v: \"1\" -> \"2\"",
            "  ns/q  Deployment ns/q-d: only the candidate wants it\n",
        ] {
            assert!(text.contains(want), "{want:?} not in:\n{text}");
        }
    }
}

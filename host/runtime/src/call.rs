//! One call of any export: fresh store, limits, instantiate, call, classify
//! the outcome.

use std::time::{Duration, Instant};

use wasmtime::{Store, Trap, UpdateDeadline};

use crate::CallLimits;
use crate::bindings::{self, Op, OpResult, WireRequest, WorldPre};
use crate::contract::PluginInfo;
use crate::error::{CallError, FaultKind};
use crate::sandbox::{self, HostState};
use crate::types::{CustomizeRequest, ReconcileResponse, RelatedSelector};

/// Where the time of one call went; for benches and debug logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTimings {
    /// Creating the store and instantiating the pre-linked component.
    pub instantiate: Duration,
    /// Lowering the request, running `reconcile`, lifting and parsing the response.
    pub call: Duration,
    /// Linear memory the instance had at the end of the call, in bytes (its
    /// peak: wasm memory never shrinks); what `render --stats` reports.
    pub memory_bytes: usize,
}

/// One `reconcile` call: the request, already lowered into the plugin's
/// contract version (`bindings::wire_request`), goes in; the response is
/// lifted back, capped and parsed.
pub(crate) async fn run(
    pre: &WorldPre,
    memory_cap: usize,
    wire: WireRequest,
    limits: &CallLimits,
) -> (Result<ReconcileResponse, CallError>, CallTimings) {
    let (outcome, mut timings) = run_op(pre, memory_cap, &Op::Reconcile(wire), limits).await;
    let lifted = Instant::now();
    let result = match outcome {
        Err(e) => Err(e),
        Ok(OpResult::Reconcile(Err(plugin_err))) => Err(plugin_err),
        Ok(OpResult::Reconcile(Ok(resp))) => {
            let size = resp.size();
            if size > limits.max_response_bytes {
                Err(CallError::fault(
                    FaultKind::ResponseTooLarge,
                    format!(
                        "response is {size} bytes, over the cap of {} bytes",
                        limits.max_response_bytes
                    ),
                ))
            } else {
                resp.parse()
            }
        }
        Ok(_) => Err(unexpected()),
    };
    timings.call += lifted.elapsed();
    (result, timings)
}

/// Calls `info` (0.2.0 and later) in a fresh instance under `limits`.
pub(crate) async fn info(
    pre: &WorldPre,
    memory_cap: usize,
    limits: &CallLimits,
) -> Result<PluginInfo, CallError> {
    match run_op(pre, memory_cap, &Op::Info, limits).await.0? {
        OpResult::Info(info) => Ok(info),
        _ => Err(unexpected()),
    }
}

/// The `customize` request lowered for the wire (owned, so it can move to
/// the call pool when it is on).
pub(crate) fn customize_op(req: &CustomizeRequest) -> Result<Op, CallError> {
    Ok(Op::Customize(bindings::v0_2::customize_request(req)?))
}

/// Calls `customize` (an op made by [`customize_op`]) in a fresh instance under `limits`.
pub(crate) async fn customize(
    pre: &WorldPre,
    memory_cap: usize,
    op: Op,
    limits: &CallLimits,
) -> Result<Vec<RelatedSelector>, CallError> {
    match run_op(pre, memory_cap, &op, limits).await.0? {
        OpResult::Customize(result) => result,
        _ => Err(unexpected()),
    }
}

fn unexpected() -> CallError {
    CallError::fault(
        FaultKind::Internal,
        "the plugin's answer does not match the call (a host bug)",
    )
}

/// The sandbox around any export: fresh store, limits, instantiate, call,
/// classify a failure.
async fn run_op(
    pre: &WorldPre,
    memory_cap: usize,
    op: &Op,
    limits: &CallLimits,
) -> (Result<OpResult, CallError>, CallTimings) {
    let mut timings = CallTimings::default();
    let memory_cap = limits.max_memory_bytes.min(memory_cap);
    let started = Instant::now();
    let mut store = Store::new(pre.engine(), HostState::new(memory_cap));
    store.limiter(|state| state);
    // Cooperative time slicing: at every epoch tick (5 ms) a running plugin
    // yields to the tokio scheduler, and past its wall-clock budget it is
    // interrupted (`Trap::Interrupt` → `FaultKind::Timeout`). Whether calls
    // run on the caller's workers or on the opt-in call pool (`pool`), the
    // yield matters: without it a plugin that loops would hold its thread
    // for its whole timeout, and two of them would stall every other
    // plugin call on a 2-core machine (the chaos suite's hostile controller
    // found the I/O-worker version of this). A yield is also where an
    // abandoned call is aborted. Calls shorter than a tick never reach the
    // callback.
    let deadline = started + limits.timeout;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    // A budget is only given on the fuel-metered engine (see `lane`); if it
    // ever reached a plain engine, `set_fuel` fails and the call is refused
    // rather than run unmetered.
    if let Some(fuel) = limits.fuel
        && let Err(e) = store.set_fuel(fuel)
    {
        return (
            Err(CallError::fault(
                FaultKind::Internal,
                format!("cannot set fuel: {e:#}"),
            )),
            timings,
        );
    }
    let instance = match pre.instantiate(&mut store).await {
        Ok(instance) => instance,
        Err(err) => {
            timings.instantiate = started.elapsed();
            sandbox::flush_stdio(store.data());
            return (
                Err(classify(&err, store.data(), limits, memory_cap)),
                timings,
            );
        }
    };
    let instantiated = Instant::now();
    timings.instantiate = instantiated - started;
    let outcome = instance.call(&mut store, op).await;
    sandbox::flush_stdio(store.data());
    let result = outcome.map_err(|err| classify(&err, store.data(), limits, memory_cap));
    timings.call = instantiated.elapsed();
    timings.memory_bytes = store.data().memory_bytes;
    (result, timings)
}

/// Turns a wasmtime error into the precise fault kind.
fn classify(
    err: &wasmtime::Error,
    state: &HostState,
    limits: &CallLimits,
    memory_cap: usize,
) -> CallError {
    let trap = err.downcast_ref::<Trap>().copied();
    match trap {
        Some(Trap::Interrupt) => CallError::fault(
            FaultKind::Timeout,
            format!(
                "plugin did not finish within its timeout of {} ms and was stopped",
                limits.timeout.as_millis()
            ),
        ),
        Some(Trap::OutOfFuel) => CallError::fault(
            FaultKind::FuelExhausted,
            format!(
                "plugin used up its fuel budget of {} units",
                limits.fuel.unwrap_or(u64::MAX)
            ),
        ),
        _ if state.memory_limit_hit => CallError::fault(
            FaultKind::MemoryLimit,
            format!("plugin tried to grow its memory past the cap of {memory_cap} bytes"),
        ),
        _ => CallError::fault(
            FaultKind::Trap,
            format!("plugin trapped: {}", describe(err)),
        ),
    }
}

/// The error chain on one line, without wasmtime's multi-line backtrace.
fn describe(err: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        let first = text.lines().next().unwrap_or_default().trim().to_string();
        if !first.is_empty() && !parts.contains(&first) {
            parts.push(first);
        }
    }
    parts.join(": ")
}

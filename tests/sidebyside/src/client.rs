//! kube clients of the bench, each with its own User-Agent so the request
//! log says who sent what ([`crate::reqlog`]).

use std::sync::Arc;

use anyhow::Result;
use http::HeaderValue;

use crate::apitime::ApiTiming;
use crate::samples::Samples;

/// A client for `url` sending `agent`; with `timing`, every request is timed
/// by class; `engine` applies [`wr_engine::engine_config`] (no built-in retry).
pub fn build(
    url: &str,
    agent: &'static str,
    timing: Option<Arc<Samples>>,
    engine: bool,
) -> Result<kube::Client> {
    let mut cfg = kube::Config::new(url.parse()?);
    cfg.headers
        .push((http::header::USER_AGENT, HeaderValue::from_static(agent)));
    if engine {
        cfg = wr_engine::engine_config(cfg);
    }
    let builder = kube::client::ClientBuilder::try_from(cfg)?;
    Ok(match timing {
        Some(s) => builder.with_layer(&ApiTiming(s)).build(),
        None => builder.build(),
    })
}

//! One module per subcommand, plus what several of them share.

#[cfg(feature = "dev")]
pub mod apiserver;
pub mod crds;
#[cfg(feature = "dev")]
pub mod dev;
pub mod explain;
pub mod import;
pub mod keygen;
pub mod new;
pub mod plan;
pub mod plugin_runtime;
pub mod publish;
pub mod rbac;
pub mod record_args;
#[cfg(feature = "dev")]
pub mod render;
pub mod replay;
pub mod rollout;
pub mod run;
#[cfg(feature = "dev")]
pub mod simulate;
#[cfg(feature = "dev")]
pub mod test;
pub mod user_client;

//! One module per subcommand, plus what several of them share.

pub mod apiserver;
pub mod crds;
pub mod dev;
pub mod import;
pub mod new;
pub mod plan;
pub mod plugin_runtime;
pub mod publish;
pub mod rbac;
pub mod render;
pub mod rollout;
pub mod run;
pub mod simulate;
pub mod test;

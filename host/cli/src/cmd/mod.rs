//! One module per subcommand, plus what several of them share.

pub mod apiserver;
pub mod crds;
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
pub mod render;
pub mod replay;
pub mod run;
pub mod simulate;
pub mod test;

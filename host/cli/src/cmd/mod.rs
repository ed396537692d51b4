//! One module per subcommand.

pub mod apiserver;
pub mod crds;
pub mod dev;
pub mod plan;
pub mod publish;
pub mod rbac;
pub mod render;
pub mod run;

//! One module per subcommand.

pub mod apiserver;
pub mod crds;
pub mod rbac;
pub mod render;
pub mod run;

//! Which version of the plugin contract a component implements, and what it
//! declared about itself at load.
//!
//! The version is never a flag: `validate` finds it from the component's type
//! (which world's exports it matches), so a component cannot claim a version
//! it does not implement.

/// A version of the `wasm-reconciler:plugin` WIT package the host supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContractVersion {
    /// `wit/reconciler.wit`: the first contract. Kept loading forever.
    V0_1,
    /// `wit/0.2.0/reconciler.wit`: adds `info`, grouped `related` and the
    /// `reconciler-with-customize` world.
    V0_2,
}

impl ContractVersion {
    /// Every supported version, oldest first.
    pub const ALL: [ContractVersion; 2] = [ContractVersion::V0_1, ContractVersion::V0_2];

    /// The newest version: what the Rust SDK builds against.
    pub const LATEST: ContractVersion = ContractVersion::V0_2;

    /// Semver text, e.g. `0.2.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => "0.1.0",
            ContractVersion::V0_2 => "0.2.0",
        }
    }

    /// The worlds of this version a plugin may implement.
    pub fn worlds(self) -> &'static [World] {
        match self {
            ContractVersion::V0_1 => &[World::Reconciler],
            ContractVersion::V0_2 => &[World::Reconciler, World::ReconcilerWithCustomize],
        }
    }

    /// Every supported world, fully qualified, for error messages, e.g.
    /// `wasm-reconciler:plugin/reconciler@0.1.0`.
    pub fn supported_worlds() -> Vec<String> {
        ContractVersion::ALL
            .iter()
            .flat_map(|v| v.worlds().iter().map(move |w| w.qualified(*v)))
            .collect()
    }
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A world of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum World {
    /// `reconcile` (and from 0.2.0 `info`).
    Reconciler,
    /// `reconciler` plus `customize` (0.2.0 and later).
    ReconcilerWithCustomize,
}

impl World {
    /// The world's name in the WIT file.
    pub fn name(self) -> &'static str {
        match self {
            World::Reconciler => "reconciler",
            World::ReconcilerWithCustomize => "reconciler-with-customize",
        }
    }

    /// `wasm-reconciler:plugin/<world>@<version>`.
    pub fn qualified(self, version: ContractVersion) -> String {
        format!("wasm-reconciler:plugin/{}@{}", self.name(), version)
    }
}

/// What the host knows about a loaded plugin: its contract and what it
/// declared through `info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PluginInfo {
    /// The contract version the component was built against.
    pub contract: ContractVersion,
    /// The world it implements.
    pub world: World,
    /// The plugin's response may depend on `request.now`, so a call may not
    /// be skipped just because the other inputs did not change. Always true
    /// for 0.1.0 plugins, which cannot declare otherwise.
    pub reads_now: bool,
}

impl PluginInfo {
    /// Whether the plugin exports `customize`.
    pub fn has_customize(&self) -> bool {
        self.world == World::ReconcilerWithCustomize
    }

    /// `wasm-reconciler:plugin/<world>@<version>`: how logs, the
    /// WasmController status and `render` name the contract.
    pub fn qualified_world(&self) -> String {
        self.world.qualified(self.contract)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_worlds_name_every_version() {
        assert_eq!(
            ContractVersion::supported_worlds(),
            vec![
                "wasm-reconciler:plugin/reconciler@0.1.0",
                "wasm-reconciler:plugin/reconciler@0.2.0",
                "wasm-reconciler:plugin/reconciler-with-customize@0.2.0",
            ]
        );
        assert_eq!(
            ContractVersion::LATEST,
            *ContractVersion::ALL.last().unwrap()
        );
    }
}

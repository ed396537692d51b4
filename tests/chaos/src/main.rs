//! Chaos harness (issue 7): see README.
fn main() -> anyhow::Result<()> {
    anyhow::bail!("chaos harness: not built yet")
}

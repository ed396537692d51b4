//! Side-by-side benchmark (issue 9): see README.
fn main() -> anyhow::Result<()> {
    anyhow::bail!("sidebyside: not built yet")
}

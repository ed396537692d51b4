//! `wasm-reconciler keygen`: an ed25519 key pair for signed plugins
//! (`publish --sign`, `spec.plugin.signature.trustedKeys`). The private key
//! is PKCS#8 PEM, the format `openssl genpkey -algorithm ed25519` writes, so
//! either tool can make it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rand::RngCore;

#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Private key file to write (mode 0600); the public key goes to FILE.pub.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let mut seed = [0u8; 32];
    // ThreadRng: a CSPRNG seeded from the operating system.
    rand::rng().fill_bytes(&mut seed);
    let (private, public_pem, public_b64) =
        wr_engine::signing::generate(seed).context("encoding the key")?;
    let public_path = PathBuf::from(format!("{}.pub", args.out.display()));
    write(&args.out, private.as_bytes(), 0o600, args.force)?;
    write(&public_path, public_pem.as_bytes(), 0o644, args.force)?;
    println!("private key: {}", args.out.display());
    println!("public key:  {}", public_path.display());
    println!("trust it in a WasmController:");
    println!(
        "  spec:\n    plugin:\n      signature:\n        trustedKeys:\n        - {public_b64}"
    );
    Ok(ExitCode::SUCCESS)
}

fn write(path: &PathBuf, bytes: &[u8], mode: u32, force: bool) -> anyhow::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true);
    if force {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = o
        .open(path)
        .with_context(|| format!("writing {} (--force overwrites)", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

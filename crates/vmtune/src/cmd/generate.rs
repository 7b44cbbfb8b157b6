//! `vmtune completions SHELL` and `vmtune man --out-dir DIR`: shell completions and manual
//! pages generated from the CLI definition itself (clap_complete, clap_mangen), so they never
//! drift from `--help`. The Debian package (deploy/debian) installs both.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap_complete::Shell;

/// Print a completion script for SHELL on stdout.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Install: vmtune completions bash > /usr/share/bash-completion/completions/vmtune\n         vmtune completions zsh > /usr/share/zsh/vendor-completions/_vmtune\n         vmtune completions fish > /usr/share/fish/vendor_completions.d/vmtune.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Write the manual pages (vmtune.1 and one per subcommand, vmtune-plan.1,
/// vmtune-boot-analyze.1, …) into a directory.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Read one without installing: vmtune man --out-dir /tmp/m && man -l /tmp/m/vmtune-plan.1"
)]
pub struct ManArgs {
    /// Directory to write the pages to (created if missing)
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
}

pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> Result<ExitCode> {
    clap_complete::generate(args.shell, &mut cmd, "vmtune", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: ManArgs, cmd: clap::Command) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let mut written = 0;
    write_pages(&args.out_dir, cmd, "vmtune", &mut written)?;
    eprintln!(
        "vmtune: {written} manual pages written to {}",
        args.out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The page of `cmd` (named `name`, e.g. `vmtune-boot-analyze`) and of each of its
/// subcommands, depth first.
fn write_pages(dir: &Path, cmd: clap::Command, name: &str, written: &mut usize) -> Result<()> {
    let cmd = cmd
        .name(name.to_string())
        .display_name(name.replace('-', " "));
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .with_context(|| format!("rendering {name}"))?;
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    *written += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        let sub_name = format!("{name}-{}", sub.get_name());
        write_pages(dir, sub.clone(), &sub_name, written)?;
    }
    Ok(())
}

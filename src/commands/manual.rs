//! `gdrprov completions SHELL` and `gdrprov man`: generated from the clap
//! types in cli.rs.

use crate::commands::cli::{Cli, Shell};
use crate::error::{Error, Result};
use crate::output::Output;
use clap::CommandFactory;

pub fn completions(out: &Output, shell: Shell) -> Result<i32> {
    let mut cmd = Cli::command();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gdrprov", &mut buf);
    out.bytes(&buf);
    Ok(crate::error::exit::OK)
}

pub fn man(out: &Output) -> Result<i32> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| Error::io("render", "the manual page", e))?;
    out.bytes(&buf);
    Ok(crate::error::exit::OK)
}

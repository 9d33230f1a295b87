//! `gdrprov completions SHELL` and `gdrprov man`: generated from the clap
//! types in src/commands/cli/, written through the output sink.

use crate::commands::cli::{self, Shell};
use crate::error::{Error, Result};
use crate::output::Output;

pub fn completions(out: &Output, shell: Shell) -> Result<i32> {
    out.bytes(&cli::completions(shell));
    Ok(crate::error::exit::OK)
}

pub fn man(out: &Output) -> Result<i32> {
    let buf = cli::man_page().map_err(|e| Error::io("render", "the manual page", e))?;
    out.bytes(&buf);
    Ok(crate::error::exit::OK)
}

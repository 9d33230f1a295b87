//! Confirmation on a terminal, shared by the commands that change things.

use crate::error::{Error, Result};
use crate::ops::Ask;
use crate::output::{self, Output};
use std::io::{BufRead, IsTerminal};

/// The confirmation an operation asks for: none with `--yes`, else the plan
/// shown (as text) and a question on the terminal.
pub fn confirmer(out: &Output, yes: bool) -> impl FnMut(&Ask) -> Result<()> + '_ {
    move |ask: &Ask| {
        if yes {
            return Ok(());
        }
        if !out.json() && (!ask.plan.is_empty() || !ask.profiles.is_empty()) {
            let r = output::report(
                ask.command,
                ask.host,
                ask.profiles.to_vec(),
                ask.plan,
                output::Done::Planned,
            );
            out.report_text(r);
        }
        confirm(out, &ask.question)
    }
}

/// Asks on a terminal; refuses without one (no silent yes in scripts).
fn confirm(out: &Output, question: &str) -> Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Error::Refused(
            "not changing anything without confirmation: standard input is not a terminal; review the plan above and pass --yes".into(),
        ));
    }
    out.prompt(question);
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::io("read", "standard input", e))?;
    if matches!(line.trim(), "y" | "Y" | "yes" | "YES") {
        Ok(())
    } else {
        Err(Error::Refused("cancelled; nothing was changed".into()))
    }
}

//! Progress bars on standard error: the only place that draws one (and the
//! only one that names indicatif). A bar draws only when its caller wants
//! it (never under `--format json`) and standard error is a terminal, so
//! nothing is drawn into a log or a pipe; otherwise it is hidden and every
//! call on it does nothing. The stages count through [`Bar`] (bench through
//! its own `bench::progress::Bar`, which [`bench_bar`] makes from this one:
//! bench cannot import the output layer, which imports bench).

use super::stderr_is_terminal;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar: a count towards a length.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar named `what`, `what [=====   ] 12/40`, for long work (reading
    /// thousands of pair results); its length is set when known.
    pub fn start(what: &str, wanted: bool) -> Bar {
        if !(wanted && stderr_is_terminal()) {
            return Bar::hidden();
        }
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        // Styled before it may draw: no empty bar flashes first.
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        bar.set_style(style);
        bar.set_message(what.to_string());
        bar.set_draw_target(ProgressDrawTarget::stderr());
        Bar { bar }
    }

    /// A plain bar of `len` steps, `[=====   ] 12/40` (a benchmark's sizes or
    /// GPUs); `what` names it for a style that shows it.
    pub fn plain(what: &str, len: u64, wanted: bool) -> Bar {
        if !(wanted && stderr_is_terminal()) {
            return Bar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        bar.set_message(what.to_string());
        Bar { bar }
    }

    /// A bar that draws nothing.
    pub fn hidden() -> Bar {
        Bar {
            bar: ProgressBar::hidden(),
        }
    }

    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Done: the bar is cleared from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl crate::bench::progress::Bar for Bar {
    fn set_position(&self, pos: u64) {
        Bar::set_position(self, pos);
    }
    fn inc(&self, n: u64) {
        Bar::inc(self, n);
    }
    fn finish(&self) {
        Bar::finish(self);
    }
}

/// Bench's bars ([`crate::bench::progress::Bars`]): plain, on a terminal.
/// The command passes it only for text output.
pub fn bench_bar(what: &str, len: u64) -> Box<dyn crate::bench::progress::Bar> {
    Box::new(Bar::plain(what, len, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwanted_bar_is_hidden_and_takes_every_call() {
        let b = Bar::start("reading", false);
        assert!(b.bar.is_hidden());
        b.set_length(3);
        b.inc(1);
        b.set_position(2);
        b.finish();
        assert!(Bar::plain("x", 5, false).bar.is_hidden());
    }
}

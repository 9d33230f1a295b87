//! A progress bar a benchmark counts and a caller above draws: bench
//! cannot import the output layer (it imports bench), so the command hands
//! bench a maker of the output layer's bars (`output::progress::bench_bar`),
//! or none for no bar (JSON output, not a terminal).

/// One bar's counter.
pub trait Bar {
    fn set_position(&self, pos: u64);
    fn inc(&self, n: u64);
    /// Done: the bar is cleared.
    fn finish(&self);
}

/// The maker of a step's bar (what it counts, its length), or `None`: no bar.
pub type Bars = Option<fn(&str, u64) -> Box<dyn Bar>>;

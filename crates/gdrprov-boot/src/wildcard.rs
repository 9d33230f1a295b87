//! Name patterns with the `*` and `?` wildcards the docs promise (interface,
//! RDMA device and driver names; loader.conf's `default`), matched with
//! globset. Every other character is literal: globset's `[...]`, `{a,b}` and
//! `\` are escaped, so a pattern means what it meant with the two wildcards.

use globset::{GlobBuilder, GlobMatcher};

/// A compiled `*`/`?` pattern.
#[derive(Debug, Clone)]
pub struct Wildcard(GlobMatcher);

impl Wildcard {
    /// Compiles PATTERN; globset's error where it rejects one (profiles check
    /// theirs at load, so planning never meets one).
    pub fn new(pattern: &str) -> Result<Wildcard, globset::Error> {
        let mut glob = String::with_capacity(pattern.len());
        for c in pattern.chars() {
            match c {
                '[' | ']' | '{' | '}' | '\\' => {
                    glob.push('[');
                    glob.push(c);
                    glob.push(']');
                }
                c => glob.push(c),
            }
        }
        let m = GlobBuilder::new(&glob)
            .literal_separator(false)
            .backslash_escape(false)
            .build()?
            .compile_matcher();
        Ok(Wildcard(m))
    }

    pub fn is_match(&self, s: &str) -> bool {
        self.0.is_match(s)
    }
}

/// Whether S matches PATTERN; a pattern globset rejects matches only itself.
pub fn matches(pattern: &str, s: &str) -> bool {
    match Wildcard::new(pattern) {
        Ok(w) => w.is_match(s),
        Err(_) => pattern == s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_question_mark_only() {
        assert!(matches("erdma_*", "erdma_0"));
        assert!(matches("eth?", "eth1"));
        assert!(!matches("eth?", "eth10"));
        assert!(matches("*", ""));
        assert!(matches("a**b", "ab"));
        assert!(!matches("mlx5_*", "erdma_0"));
        assert!(matches("*.conf", "a/b.conf"));
        // Other glob syntax is literal, as before.
        assert!(matches("eth[01]", "eth[01]"));
        assert!(!matches("eth[01]", "eth0"));
        assert!(matches("{a,b}", "{a,b}"));
        assert!(!matches("{a,b}", "a"));
        assert!(matches(r"a\*", r"a\xyz"));
    }
}

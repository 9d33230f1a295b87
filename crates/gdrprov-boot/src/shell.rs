//! A small lexer for the POSIX shell files under `/etc/default/`: just enough
//! to find word and command boundaries, comments, quotes, substitutions and
//! compound-command nesting, so that the editor knows which words are plain
//! top-level assignments. It never evaluates anything.

/// One word, as a byte span of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub start: usize,
    pub end: usize,
}

/// One command: its words and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    pub words: Vec<Word>,
    /// Nesting depth inside `if`, `for`, `{ }`, `( )`, functions...
    pub depth: usize,
    /// Stands alone: no pipe, `&&`, `||`, `&` or redirection around it.
    pub standalone: bool,
    /// The command spans a backslash-newline continuation.
    pub continued: bool,
}

/// The commands of a file, and whether nesting was tracked consistently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lexed {
    pub commands: Vec<Command>,
    pub nesting_ok: bool,
}

/// What the lexer cannot handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LexError {
    /// A quote or substitution that opens at `offset` never closes.
    Unterminated { what: &'static str, offset: usize },
    /// A here-document at `offset`: its body is not shell words.
    HereDoc { offset: usize },
    /// A bash-only construct (`$'...'`, `$"..."`, `X=(...)` arrays) at `offset`.
    Bashism { what: &'static str, offset: usize },
}

/// What separated a command from the next one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// Newline, `;`, `;;` or start/end of file: the command can stand alone.
    Plain,
    /// `|`, `||`, `&&`, `&`: the command is part of a list or pipeline.
    Joined,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    Keyword,
    Brace,
    Paren,
    Case,
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
    word_start: Option<usize>,
    words: Vec<Word>,
    prev_sep: Sep,
    redirect: bool,
    continued: bool,
    stack: Vec<Opener>,
    nesting_ok: bool,
    commands: Vec<Command>,
}

/// Lex a whole file.
pub(crate) fn lex(text: &str) -> Result<Lexed, LexError> {
    let mut lx = Lexer {
        b: text.as_bytes(),
        i: 0,
        word_start: None,
        words: Vec::new(),
        prev_sep: Sep::Plain,
        redirect: false,
        continued: false,
        stack: Vec::new(),
        nesting_ok: true,
        commands: Vec::new(),
    };
    lx.run()?;
    if !lx.stack.is_empty() {
        lx.nesting_ok = false;
    }
    Ok(Lexed {
        commands: lx.commands,
        nesting_ok: lx.nesting_ok,
    })
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> Option<u8> {
        self.b.get(i).copied()
    }

    fn run(&mut self) -> Result<(), LexError> {
        while let Some(c) = self.at(self.i) {
            let next = self.at(self.i + 1);
            match c {
                b' ' | b'\t' => self.blank(1),
                // CRLF files: the CR belongs to the line ending.
                b'\r' if matches!(next, Some(b'\n') | None) => self.blank(1),
                b'\n' => {
                    self.end_word();
                    self.end_command(Sep::Plain);
                    self.i += 1;
                }
                b'#' if self.word_start.is_none() => self.skip_comment(),
                b'\\' if next == Some(b'\n') => {
                    // Line continuation: the two bytes vanish, the word goes on.
                    self.continued = true;
                    self.i += 2;
                }
                b'\\' => self.in_word(2),
                b'\'' => {
                    self.begin_word();
                    self.i = scan_single(self.b, self.i + 1)?;
                }
                b'"' => {
                    self.begin_word();
                    self.i = scan_double(self.b, self.i + 1)?;
                }
                b'`' => {
                    self.begin_word();
                    self.i = scan_backtick(self.b, self.i + 1)?;
                }
                b'$' if matches!(next, Some(b'\'' | b'"')) => {
                    return Err(LexError::Bashism {
                        what: "bash's $'...' or $\"...\" quoting",
                        offset: self.i,
                    });
                }
                b'$' => {
                    self.begin_word();
                    self.i = scan_dollar(self.b, self.i)?;
                }
                b';' => {
                    self.end_word();
                    self.end_command(Sep::Plain);
                    self.i += if next == Some(b';') { 2 } else { 1 };
                }
                b'&' | b'|' => {
                    self.end_word();
                    self.end_command(Sep::Joined);
                    self.i += if next == Some(c) { 2 } else { 1 };
                }
                b'<' | b'>' => self.redirection(c, next)?,
                b'(' => self.open_paren()?,
                b')' => self.close_paren(),
                _ => self.in_word(1),
            }
        }
        self.end_word();
        self.end_command(Sep::Plain);
        Ok(())
    }

    fn blank(&mut self, n: usize) {
        self.end_word();
        self.i += n;
    }

    fn begin_word(&mut self) {
        if self.word_start.is_none() {
            self.word_start = Some(self.i);
        }
    }

    fn in_word(&mut self, n: usize) {
        self.begin_word();
        self.i = (self.i + n).min(self.b.len());
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.at(self.i) {
            if c == b'\n' {
                break;
            }
            self.i += 1;
        }
    }

    fn redirection(&mut self, c: u8, next: Option<u8>) -> Result<(), LexError> {
        if c == b'<' && next == Some(b'<') {
            return Err(LexError::HereDoc { offset: self.i });
        }
        // `2>` : the digit is part of the operator, not a word.
        self.end_word();
        self.redirect = true;
        self.i += 1;
        if matches!(self.at(self.i), Some(b'>' | b'&' | b'|')) {
            self.i += 1;
        }
        Ok(())
    }

    fn open_paren(&mut self) -> Result<(), LexError> {
        if let Some(start) = self.word_start {
            let glued = self.b.get(start..self.i).unwrap_or_default();
            if glued.contains(&b'=') {
                return Err(LexError::Bashism {
                    what: "a bash array assignment",
                    offset: start,
                });
            }
        }
        let after_word = self.word_start.is_some() || !self.words.is_empty();
        self.end_word();
        if after_word && self.at(self.i + 1) == Some(b')') {
            // `name()`: a function definition; its body opens with `{`.
            self.i += 2;
            self.end_command(Sep::Plain);
            return Ok(());
        }
        self.end_command(Sep::Plain);
        self.stack.push(Opener::Paren);
        self.i += 1;
        Ok(())
    }

    fn close_paren(&mut self) {
        self.end_word();
        self.end_command(Sep::Plain);
        match self.stack.last() {
            Some(Opener::Paren) => {
                self.stack.pop();
            }
            // A `case` pattern such as `a)`.
            Some(Opener::Case) => {}
            _ => self.nesting_ok = false,
        }
        self.i += 1;
    }

    fn end_word(&mut self) {
        let Some(start) = self.word_start.take() else {
            return;
        };
        let word = Word { start, end: self.i };
        if self.words.is_empty() && self.reserved(word) {
            return;
        }
        self.words.push(word);
    }

    /// Track nesting through reserved words at the start of a command.
    /// Returns true when the word only opens or continues a compound command.
    fn reserved(&mut self, w: Word) -> bool {
        let text = self.b.get(w.start..w.end).unwrap_or_default();
        match text {
            b"if" | b"while" | b"until" | b"for" | b"select" => self.stack.push(Opener::Keyword),
            b"case" => self.stack.push(Opener::Case),
            b"{" => self.stack.push(Opener::Brace),
            b"fi" | b"done" => self.pop(Opener::Keyword),
            b"esac" => self.pop(Opener::Case),
            b"}" => self.pop(Opener::Brace),
            b"then" | b"else" | b"elif" | b"do" | b"in" | b"!" => {}
            _ => return false,
        }
        // The rest of an `if`/`for`/`case` header is a nested command.
        true
    }

    fn pop(&mut self, want: Opener) {
        if self.stack.pop() != Some(want) {
            self.nesting_ok = false;
        }
    }

    fn end_command(&mut self, sep: Sep) {
        let words = std::mem::take(&mut self.words);
        let redirect = std::mem::replace(&mut self.redirect, false);
        let continued = std::mem::replace(&mut self.continued, false);
        let prev = std::mem::replace(&mut self.prev_sep, sep);
        if words.is_empty() {
            return;
        }
        self.commands.push(Command {
            words,
            depth: self.stack.len(),
            standalone: prev == Sep::Plain && sep == Sep::Plain && !redirect,
            continued,
        });
    }
}

fn unterminated(what: &'static str, offset: usize) -> LexError {
    LexError::Unterminated { what, offset }
}

/// From just after an opening `'`: the index after the closing one.
fn scan_single(b: &[u8], from: usize) -> Result<usize, LexError> {
    let rel = b
        .get(from..)
        .and_then(|rest| rest.iter().position(|&c| c == b'\''));
    match rel {
        Some(p) => Ok(from + p + 1),
        None => Err(unterminated("single quote", from.saturating_sub(1))),
    }
}

/// From just after an opening `"`: the index after the closing one.
pub(crate) fn scan_double(b: &[u8], from: usize) -> Result<usize, LexError> {
    let mut i = from;
    while let Some(c) = b.get(i).copied() {
        match c {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            b'`' => i = scan_backtick(b, i + 1)?,
            b'$' => i = scan_dollar(b, i)?,
            _ => i += 1,
        }
    }
    Err(unterminated("double quote", from.saturating_sub(1)))
}

/// From just after an opening backtick: the index after the closing one.
fn scan_backtick(b: &[u8], from: usize) -> Result<usize, LexError> {
    let mut i = from;
    while let Some(c) = b.get(i).copied() {
        match c {
            b'\\' => i += 2,
            b'`' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(unterminated("backtick", from.saturating_sub(1)))
}

/// At a `$`: the index after `$name`, `${...}`, `$(...)` or `$((...))`.
fn scan_dollar(b: &[u8], at: usize) -> Result<usize, LexError> {
    match b.get(at + 1).copied() {
        Some(b'(') => scan_nested(b, at + 1, b'(', b')', "$( substitution"),
        Some(b'{') => scan_nested(b, at + 1, b'{', b'}', "${ expansion"),
        _ => Ok(at + 1),
    }
}

/// From an opening bracket: the index after its matching closer, skipping
/// quotes and substitutions inside.
fn scan_nested(
    b: &[u8],
    open_at: usize,
    open: u8,
    close: u8,
    what: &'static str,
) -> Result<usize, LexError> {
    let mut depth = 0usize;
    let mut i = open_at;
    while let Some(c) = b.get(i).copied() {
        match c {
            b'\\' => i += 2,
            b'\'' => i = scan_single(b, i + 1)?,
            b'"' => i = scan_double(b, i + 1)?,
            b'`' => i = scan_backtick(b, i + 1)?,
            c if c == open => {
                depth += 1;
                i += 1;
            }
            c if c == close => {
                depth = depth.saturating_sub(1);
                i += 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => i += 1,
        }
    }
    Err(unterminated(what, open_at.saturating_sub(1)))
}

/// 1-based line number of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + text
        .as_bytes()
        .get(..end)
        .map_or(0, |s| s.iter().filter(|&&c| c == b'\n').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        let lexed = lex(text).map_err(|e| format!("{e:?}"));
        let lexed = match lexed {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        lexed
            .commands
            .iter()
            .map(|c| {
                c.words
                    .iter()
                    .map(|w| text[w.start..w.end].to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn words_quotes_comments() {
        let t = "A=1 # c\nB=\"x y\" C='p;q'\n# D=2\nE=`lsb_release -i -s 2> /dev/null || echo Debian`\n";
        assert_eq!(
            words(t),
            vec![
                vec!["A=1"],
                vec!["B=\"x y\"", "C='p;q'"],
                vec!["E=`lsb_release -i -s 2> /dev/null || echo Debian`"]
            ]
        );
    }

    #[test]
    fn nesting_and_standalone() {
        let t = "if [ -d /x ]; then\n  A=1\nfi\nB=2 && C=3\nD=4 > /dev/null\nE=5\nf() { G=1; }\n";
        let l = lex(t).map_err(|e| format!("{e:?}"));
        let Ok(l) = l else { panic!("lex") };
        assert!(l.nesting_ok);
        let summary: Vec<(String, usize, bool)> = l
            .commands
            .iter()
            .map(|c| {
                let w = c.words.first().map(|w| &t[w.start..w.end]).unwrap_or("");
                (w.to_owned(), c.depth, c.standalone)
            })
            .collect();
        assert!(summary.contains(&("A=1".into(), 1, true)));
        assert!(summary.contains(&("B=2".into(), 0, false)));
        assert!(summary.contains(&("C=3".into(), 0, false)));
        assert!(summary.contains(&("D=4".into(), 0, false)));
        assert!(summary.contains(&("E=5".into(), 0, true)));
        assert!(summary.contains(&("G=1".into(), 1, true)));
    }

    #[test]
    fn multiline_double_quote_is_one_word() {
        assert_eq!(
            words("A=\"x\nB=y\"\nC=1\n"),
            vec![vec!["A=\"x\nB=y\""], vec!["C=1"]]
        );
    }

    #[test]
    fn errors() {
        assert!(matches!(lex("A=\"x\n"), Err(LexError::Unterminated { .. })));
        assert!(matches!(lex("A='x\n"), Err(LexError::Unterminated { .. })));
        assert!(matches!(lex("A=$(x\n"), Err(LexError::Unterminated { .. })));
        assert!(matches!(
            lex("cat <<EOF\nA=1\nEOF\n"),
            Err(LexError::HereDoc { .. })
        ));
        assert!(matches!(lex("A=$'x'\n"), Err(LexError::Bashism { .. })));
        assert!(matches!(lex("A=(a b)\n"), Err(LexError::Bashism { .. })));
        assert!(matches!(lex("A=()\n"), Err(LexError::Bashism { .. })));
        assert!(lex("f() { A=1; }\n").is_ok());
    }
}

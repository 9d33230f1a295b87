//! A loose version order for the strings GPU hosts are full of: kernels
//! (`6.8.0-45-generic`), drivers (`575.51.03`), OFED (`24.10-3.2.5`), CUDA
//! (`12.4.131`). Written here rather than taken from a crate: the rules are a
//! dozen lines, and the one that matters for requirements (a constraint
//! compares only as many parts as it names, so `>= 5.12` holds for
//! `5.12.0-1-generic` and `= 575` for `575.51.03`) is not what general
//! version crates do.
//!
//! A version is split into runs of digits and runs of letters; `.`, `-`, `_`,
//! `+` and `~` only separate. Digit runs compare as numbers, letter runs as
//! text, and a number sorts after a word (`5.14.0-427` after `5.14.0-rc`).

use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Num(u64),
    Word(String),
}

fn parts(v: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<Part>| {
        if cur.is_empty() {
            return;
        }
        if cur.chars().all(|c| c.is_ascii_digit()) {
            out.push(Part::Num(cur.parse().unwrap_or(u64::MAX)));
        } else {
            out.push(Part::Word(cur.to_ascii_lowercase()));
        }
        cur.clear();
    };
    for c in v.trim().trim_start_matches(['v', 'V']).chars() {
        if c.is_ascii_alphanumeric() {
            let digit = c.is_ascii_digit();
            if cur
                .chars()
                .last()
                .is_some_and(|l| l.is_ascii_digit() != digit)
            {
                flush(&mut cur, &mut out);
            }
            cur.push(c);
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

fn cmp_part(a: &Part, b: &Part) -> Ordering {
    match (a, b) {
        (Part::Num(x), Part::Num(y)) => x.cmp(y),
        (Part::Word(x), Part::Word(y)) => x.cmp(y),
        (Part::Num(_), Part::Word(_)) => Ordering::Greater,
        (Part::Word(_), Part::Num(_)) => Ordering::Less,
    }
}

/// Total order of two versions (a version with more parts is newer when the
/// shared parts are equal).
pub fn compare(a: &str, b: &str) -> Ordering {
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(pb.iter()) {
        let o = cmp_part(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

/// Compares `actual` with `wanted` over the parts `wanted` names only.
pub fn compare_prefix(actual: &str, wanted: &str) -> Ordering {
    let (pa, pw) = (parts(actual), parts(wanted));
    for (i, w) in pw.iter().enumerate() {
        let Some(a) = pa.get(i) else {
            return Ordering::Less;
        };
        let o = cmp_part(a, w);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub op: Op,
    pub version: String,
}

/// The longest version a constraint may name.
const MAX_VERSION: usize = 64;
/// The most constraints one spec may join with `,`.
const MAX_CONSTRAINTS: usize = 8;

/// Parses `>= 5.12`, `<6`, `= 575`, `!= 2.19.3`; several joined by `,` all
/// must hold. The one grammar of version requirements, under `requires:`
/// and `when:` alike: an operator (or none, meaning `=`) and a version that
/// starts with a digit (an optional `v` first) and holds only letters,
/// digits and `. - _ + ~`, at most 64 bytes, no number over 19 digits.
/// Anything else (`<< 595`, `=> 5`, `~> 5`, `^5.12`, `>= 5.12 foo`,
/// `5.x || 6`) is refused, never read as something else.
pub fn parse(spec: &str) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    let pieces: Vec<&str> = spec.split(',').collect();
    if pieces.len() > MAX_CONSTRAINTS {
        return Err(format!(
            "{spec:?} joins more than {MAX_CONSTRAINTS} constraints; give fewer"
        ));
    }
    for piece in pieces {
        let p = piece.trim();
        if p.is_empty() {
            return Err(format!("empty constraint in {spec:?}"));
        }
        let (op, rest) = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("!=", Op::Ne),
            ("==", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
            ("=", Op::Eq),
        ]
        .iter()
        .find_map(|(s, op)| p.strip_prefix(s).map(|r| (*op, r)))
        .unwrap_or((Op::Eq, p));
        let v = rest.trim();
        if let Some(why) = version_problem(v) {
            return Err(format!(
                "{p:?} is not a version constraint; write an operator (>=, >, <=, <, =, !=) and a version, like \">= 5.12\" ({why})"
            ));
        }
        out.push(Constraint {
            op,
            version: v.to_string(),
        });
    }
    Ok(out)
}

/// Why `v` is not a version of the grammar [`parse`] takes; `None` if it is.
fn version_problem(v: &str) -> Option<String> {
    let digits = v.strip_prefix(['v', 'V']).unwrap_or(v);
    if v.is_empty() {
        return Some("no version".into());
    }
    if v.len() > MAX_VERSION {
        return Some(format!(
            "a version of {} bytes; at most {MAX_VERSION}",
            v.len()
        ));
    }
    if !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return Some(format!("`{v}` does not start with a number"));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ".-_+~".contains(*c)))
    {
        return Some(format!("`{v}` holds {c:?}, which no version has"));
    }
    if v.split(|c: char| !c.is_ascii_digit())
        .any(|run| run.len() > 19)
    {
        return Some(format!("`{v}` holds a number of more than 19 digits"));
    }
    None
}

impl Constraint {
    pub fn matches(&self, actual: &str) -> bool {
        let o = compare_prefix(actual, &self.version);
        match self.op {
            Op::Ge => o != Ordering::Less,
            Op::Gt => o == Ordering::Greater,
            Op::Le => o != Ordering::Greater,
            Op::Lt => o == Ordering::Less,
            Op::Eq => o == Ordering::Equal,
            Op::Ne => o != Ordering::Equal,
        }
    }
}

/// Whether `actual` meets every constraint of `spec`.
pub fn satisfies(actual: &str, spec: &str) -> Result<bool, String> {
    Ok(parse(spec)?.iter().all(|c| c.matches(actual)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order() {
        assert_eq!(
            compare("6.8.0-45-generic", "6.8.0-100-generic"),
            Ordering::Less
        );
        assert_eq!(compare("575.51.03", "575.51.3"), Ordering::Equal);
        assert_eq!(compare("570.133.20", "575.51.03"), Ordering::Less);
        assert_eq!(compare("24.10-3.2.5", "24.10-1.1.4.0"), Ordering::Greater);
        assert_eq!(compare("12.4.131", "12.10"), Ordering::Less);
        assert_eq!(
            compare("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-70.el9"),
            Ordering::Greater
        );
        assert_eq!(compare("5.15", "5.15.0"), Ordering::Less);
    }

    #[test]
    fn constraints() {
        let t = |a: &str, s: &str| satisfies(a, s).unwrap();
        assert!(t("5.15.0-119-generic", ">= 5.12"));
        assert!(!t("5.4.0-216-generic", ">= 5.12"));
        assert!(t("5.12.0-1-generic", ">= 5.12"));
        assert!(!t("5.12.3", "< 5.12"));
        assert!(t("575.51.03", "= 575"));
        assert!(t("575.51.03", ">= 515, < 600"));
        assert!(!t("535.216.03", ">= 515, != 535"));
        assert!(t("6.8.0-100-generic", "> 6.8.0-45-generic"));
        assert!(t("24.10-3.2.5.0", ">= 24.10-3.2.5"));
        assert!(!t("23.10-1.1.9.0", ">= 24.04"));
        assert!(t("12.4.131", ">= 11.7"));
        assert!(!t("11.4", ">= 11.7"));
        assert!(t("2.23.4", ">=2.23.4"));
        assert!(!t("2.21.5", ">= 2.23.4"));
        assert!(t("13.0", "<= 13"));
        assert!(parse(">= ").is_err());
        assert!(parse("latest").is_err());
        assert!(parse(">= 5.12,").is_err());
        assert!(t("5.12.0", ">= v5.12"));
    }

    /// Issue 37: text the grammar does not understand is refused, never
    /// read as something else (`=> 5` was `= "> 5"`, `~> 5` a version).
    #[test]
    fn what_the_grammar_does_not_understand_is_refused() {
        for bad in [
            "<< 595",
            "=> 5",
            "~> 5",
            "^5.12",
            ">= 5.12 foo",
            "5.x || 6",
            "> =5",
            ">= -5",
            ">= 5.12; rm",
            "= 5*",
            "!5",
            &format!(">= {}", "1".repeat(20)),
            &format!(">= 1.{}", "2".repeat(70)),
            &[">= 1"; 9].join(","),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.contains("not a version constraint") || e.contains("more than"),
                "{bad}: {e}"
            );
        }
        for good in [
            ">= 5.12",
            "<6",
            "= 575",
            "!= 2.19.3",
            ">= 24.10-3.2.5",
            "v5",
            "== 5.15.0-119-generic",
        ] {
            assert!(parse(good).is_ok(), "{good}");
        }
    }
}

//! The literal value of one shell word, as bash would pass it to a program, for words that
//! need no run-time expansion. Anything whose value depends on the shell's state (variables,
//! command output, globs against the file system) is refused with the reason.

use std::path::Path;

use brush_parser::ParserOptions;
use brush_parser::word::{TildeExpr, WordPiece, WordPieceWithSource};

/// Characters that make an unquoted word a glob, brace expansion or extended glob in bash.
const PATTERN_CHARS: &[char] = &['*', '?', '[', '{', '}', '(', ')'];

/// `raw` is the word as written (quotes included). `home` expands an unquoted leading `~`.
/// The error is the reason the word is refused.
pub(crate) fn literal_value(raw: &str, home: Option<&Path>) -> Result<String, String> {
    let pieces = brush_parser::word::parse(raw, &ParserOptions::default())
        .map_err(|err| format!("cannot parse the word `{raw}`: {err}"))?;
    let mut value = String::new();
    append_pieces(&mut value, &pieces, false, raw, home)?;
    Ok(value)
}

fn append_pieces(
    value: &mut String,
    pieces: &[WordPieceWithSource],
    in_double_quotes: bool,
    raw: &str,
    home: Option<&Path>,
) -> Result<(), String> {
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(text) => {
                if !in_double_quotes
                    && let Some(c) = text.chars().find(|c| PATTERN_CHARS.contains(c))
                {
                    return Err(format!(
                        "unquoted `{c}` in `{raw}` is a glob or brace pattern, which allowlist \
                         mode does not expand: quote it, or name the files explicitly"
                    ));
                }
                value.push_str(text);
            }
            WordPiece::SingleQuotedText(text) => value.push_str(text),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                append_pieces(value, inner, true, raw, home)?;
            }
            WordPiece::EscapeSequence(escaped) => {
                // `\x` stands for `x`; a backslash-newline is a line continuation.
                let rest = escaped.strip_prefix('\\').unwrap_or(escaped);
                if rest != "\n" {
                    value.push_str(rest);
                }
            }
            WordPiece::TildeExpansion(TildeExpr::Home) => {
                let home = home.ok_or_else(|| {
                    format!("`~` in `{raw}` cannot be expanded: the home directory is unknown")
                })?;
                value.push_str(&home.to_string_lossy());
            }
            WordPiece::TildeExpansion(
                TildeExpr::UserHome(_)
                | TildeExpr::WorkingDir
                | TildeExpr::OldWorkingDir
                | TildeExpr::NthDirFromTopOfDirStack { .. }
                | TildeExpr::NthDirFromBottomOfDirStack { .. },
            ) => {
                return Err(format!(
                    "the tilde form in `{raw}` is not allowed in allowlist mode: only `~` and \
                     `~/...` are expanded"
                ));
            }
            WordPiece::AnsiCQuotedText(_) => {
                return Err(format!(
                    "ANSI-C quoting `$'...'` in `{raw}` is not allowed in allowlist mode: use \
                     single quotes"
                ));
            }
            WordPiece::ParameterExpansion(_) => {
                return Err(format!(
                    "variable expansion (`$VAR`, `${{...}}`) in `{raw}` is not allowed in \
                     allowlist mode: write the value literally, or quote a literal `$` with \
                     single quotes"
                ));
            }
            WordPiece::CommandSubstitution(_) => {
                return Err(format!(
                    "command substitution `$(...)` in `{raw}` is not allowed in allowlist mode: \
                     run the inner command separately and use its output"
                ));
            }
            WordPiece::BackquotedCommandSubstitution(_) => {
                return Err(format!(
                    "backticks (command substitution) in `{raw}` are not allowed in allowlist \
                     mode: run the inner command separately and use its output"
                ));
            }
            WordPiece::ArithmeticExpression(_) => {
                return Err(format!(
                    "arithmetic expansion `$((...))` in `{raw}` is not allowed in allowlist \
                     mode: write the number literally"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn quoting_and_escapes_become_the_literal_value() {
        let home = Path::new("/home/u");
        for (raw, expected) in [
            ("plain", "plain"),
            ("'a b'", "a b"),
            ("\"x\\\"y\\$z\\q\"", "x\"y$z\\q"),
            ("a\\ b", "a b"),
            ("'a'\"b\"c", "abc"),
            ("\"*.txt\"", "*.txt"),
            ("~", "/home/u"),
            ("~/notes", "/home/u/notes"),
            ("'~'/x", "~/x"),
            ("'$HOME'", "$HOME"),
        ] {
            assert_eq!(literal_value(raw, Some(home)).unwrap(), expected, "{raw}");
        }
    }

    #[test]
    fn expansions_are_refused() {
        for (raw, start) in [
            ("$HOME", "variable expansion"),
            ("\"${HOME}\"", "variable expansion"),
            ("$(id)", "command substitution"),
            ("\"`id`\"", "backticks"),
            ("$((1+2))", "arithmetic expansion"),
            ("*.txt", "unquoted `*`"),
            ("{a,b}", "unquoted `{`"),
            ("$'\\x41'", "ANSI-C quoting"),
            ("~root/x", "the tilde form"),
        ] {
            let err = literal_value(raw, Some(Path::new("/home/u"))).unwrap_err();
            assert!(err.starts_with(start), "{raw}: {err}");
        }
    }
}

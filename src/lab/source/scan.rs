//! Just enough of a C++ lexer to find the `__global__` kernels in a student
//! file and read their parameter lists.
//!
//! A real parser would be overkill: the only questions asked are "is this a
//! whole translation unit or a bare body?" and "does the entry point have the
//! lab's signature?". Comments are dropped and preprocessor lines become one
//! opaque token each, so a kernel that is commented out, or a `__global__`
//! mentioned in a `#define`, never counts as a definition.

/// What a token is, as far as kernel discovery cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenKind {
    Identifier,
    /// A string or character literal, quotes included.
    Literal,
    Number,
    Punct,
    /// A whole preprocessor line (continuations included).
    Directive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a str,
    /// 1-based line where the token starts.
    pub line: usize,
}

/// Splits `source` into tokens, skipping whitespace and comments.
pub(super) fn tokenize(source: &str) -> Vec<Token<'_>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut at_line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let start_line = line;
        let byte = bytes[i];
        let kind = match byte {
            b'\n' => {
                line += 1;
                at_line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => {
                i += 1;
                continue;
            }
            // A byte-order mark past the first (only one is stripped) is
            // blank here, so a `#` after it still opens a directive the
            // include policy sees, however many marks the file starts with.
            0xEF if source[i..].starts_with('\u{feff}') => {
                i += '\u{feff}'.len_utf8();
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = end_of_line(bytes, i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let close = find(bytes, i + 2, b"*/").map_or(bytes.len(), |at| at + 2);
                line += count_newlines(&bytes[i..close]);
                i = close;
                continue;
            }
            // `%:` is the digraph spelling of `#`, and `??=` the old trigraph:
            // either can open a directive, so the include policy must see them.
            b'#' | b'%' | b'?' if at_line_start && opens_directive(&bytes[i..]) => {
                i = end_of_directive(bytes, i);
                line += count_newlines(&bytes[start..i]);
                TokenKind::Directive
            }
            b'"' | b'\'' => {
                i = end_of_literal(bytes, i);
                TokenKind::Literal
            }
            b'0'..=b'9' => {
                i = end_while(bytes, i, |b| {
                    b.is_ascii_alphanumeric() || b"_.'".contains(&b)
                });
                TokenKind::Number
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                i = end_while(bytes, i, |b| b.is_ascii_alphanumeric() || b == b'_');
                TokenKind::Identifier
            }
            _ => {
                // One character, which may be several bytes outside ASCII.
                i += source[i..].chars().next().map_or(1, char::len_utf8);
                TokenKind::Punct
            }
        };
        at_line_start = false;
        tokens.push(Token {
            kind,
            text: &source[start..i],
            line: start_line,
        });
    }
    tokens
}

fn opens_directive(rest: &[u8]) -> bool {
    rest.starts_with(b"#") || rest.starts_with(b"%:") || rest.starts_with(b"??=")
}

fn end_while(bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| !keep(b))
        .map_or(bytes.len(), |n| from + n)
}

fn end_of_line(bytes: &[u8], from: usize) -> usize {
    end_while(bytes, from, |b| b != b'\n')
}

/// A directive runs to the first newline not escaped by a backslash.
fn end_of_directive(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    loop {
        i = end_of_line(bytes, i);
        let escaped = bytes[from..i].trim_ascii_end().ends_with(b"\\");
        if !escaped || i == bytes.len() {
            return i;
        }
        i += 1;
    }
}

/// A literal ends at its unescaped closing quote; an unterminated one ends at
/// the line's end, as the compiler will say itself.
fn end_of_literal(bytes: &[u8], from: usize) -> usize {
    let quote = bytes[from];
    let mut i = from + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n)
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// One `__global__` function found in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KernelDecl<'a> {
    pub name: &'a str,
    /// Line of the kernel's name.
    pub line: usize,
    /// First and last line of the declaration, for showing it back.
    pub lines: (usize, usize),
    /// Declared `extern "C"` (directly or by an enclosing block), so the
    /// symbol keeps its plain name.
    pub c_linkage: bool,
    /// Each parameter's tokens, split at top-level commas.
    pub params: Vec<Vec<&'a str>>,
}

/// Attribute-like specifiers whose parenthesised arguments sit between
/// `__global__` and the kernel's name.
const PARENTHESISED_SPECIFIERS: [&str; 3] = ["__launch_bounds__", "__attribute__", "__maxnreg__"];

/// Every `__global__` declaration or definition, in file order.
pub(super) fn find_kernels<'a>(tokens: &[Token<'a>]) -> Vec<KernelDecl<'a>> {
    let code: Vec<&Token<'a>> = tokens
        .iter()
        .filter(|t| t.kind != TokenKind::Directive)
        .collect();
    let mut kernels = Vec::new();
    // One entry per open brace: whether it opened an `extern "C"` block.
    let mut blocks: Vec<bool> = Vec::new();
    let mut statement_start = 0;
    let mut i = 0;
    while i < code.len() {
        match code[i].text {
            "{" => {
                blocks.push(is_extern_c(&code[..i]));
                statement_start = i + 1;
            }
            "}" => {
                blocks.pop();
                statement_start = i + 1;
            }
            ";" => statement_start = i + 1,
            "__global__" => {
                if let Some((kernel, close)) =
                    read_kernel(&code, statement_start, i, blocks.contains(&true))
                {
                    kernels.push(kernel);
                    i = close;
                }
            }
            _ => {}
        }
        i += 1;
    }
    kernels
}

fn is_extern_c(before: &[&Token]) -> bool {
    matches!(before, [.., extern_kw, c] if extern_kw.text == "extern" && c.text == "\"C\"")
}

/// Reads the declaration whose `__global__` is at `global`; returns it and
/// the index of its closing parenthesis.
fn read_kernel<'a>(
    code: &[&Token<'a>],
    statement_start: usize,
    global: usize,
    in_extern_c_block: bool,
) -> Option<(KernelDecl<'a>, usize)> {
    let mut i = global + 1;
    let open = loop {
        let token = code.get(i)?;
        match token.text {
            ";" | "{" | "}" => return None,
            "(" => break i,
            text if PARENTHESISED_SPECIFIERS.contains(&text) => {
                i = matching_paren(code, i + 1)?;
            }
            _ => {}
        }
        i += 1;
    };
    let name = code.get(open.checked_sub(1)?)?;
    if name.kind != TokenKind::Identifier {
        return None;
    }
    let close = matching_paren(code, open)?;
    let specifiers = &code[statement_start..open];
    let c_linkage = in_extern_c_block
        || specifiers
            .windows(2)
            .any(|pair| pair[0].text == "extern" && pair[1].text == "\"C\"");
    let kernel = KernelDecl {
        name: name.text,
        line: name.line,
        lines: (code[statement_start].line, code[close].line),
        c_linkage,
        params: split_params(&code[open + 1..close]),
    };
    Some((kernel, close))
}

/// Index of the `)` matching the `(` at `open`.
fn matching_paren(code: &[&Token], open: usize) -> Option<usize> {
    if code.get(open)?.text != "(" {
        return None;
    }
    let mut depth = 0usize;
    for (offset, token) in code[open..].iter().enumerate() {
        match token.text {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_params<'a>(inside: &[&Token<'a>]) -> Vec<Vec<&'a str>> {
    if inside.is_empty() {
        return Vec::new();
    }
    let mut params = vec![Vec::new()];
    let mut depth = 0usize;
    for token in inside {
        match token.text {
            "," if depth == 0 => params.push(Vec::new()),
            text => {
                match text {
                    "(" | "<" | "[" => depth += 1,
                    ")" | ">" | "]" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if let Some(current) = params.last_mut() {
                    current.push(text);
                }
            }
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str) -> Vec<&str> {
        tokenize(source).iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_vanish_but_keep_line_numbers() {
        let tokens = tokenize("a /* x\n y */ b // c\n\"s//t\" 'q'\nd");
        let seen: Vec<(&str, usize)> = tokens.iter().map(|t| (t.text, t.line)).collect();
        assert_eq!(
            seen,
            [("a", 1), ("b", 2), ("\"s//t\"", 3), ("'q'", 3), ("d", 4)]
        );
    }

    #[test]
    fn directives_are_single_tokens_even_when_continued() {
        let tokens = tokenize("#define K(x) \\\n  __global__ x\nint y; # not a directive");
        assert_eq!(tokens[0].kind, TokenKind::Directive);
        assert_eq!(tokens[1].text, "int");
        assert_eq!(tokens[1].line, 3);
        assert_eq!(texts("int y; # z")[3], "#");
    }

    #[test]
    fn kernels_report_linkage_name_and_params() {
        let src = "extern \"C\" {\n__global__ void a(int n, float* __restrict__ p) {}\n}\n\
                   __global__ extern \"C\" void b() {}\n\
                   template <int N> __global__ void __launch_bounds__(256, 2)\nc(float x) {}\n\
                   // __global__ void hidden(int);\n";
        let tokens = tokenize(src);
        let kernels = find_kernels(&tokens);
        let names: Vec<_> = kernels
            .iter()
            .map(|k| (k.name, k.c_linkage, k.line))
            .collect();
        assert_eq!(names, [("a", true, 2), ("b", true, 4), ("c", false, 6)]);
        assert_eq!(
            kernels[0].params,
            [vec!["int", "n"], vec!["float", "*", "__restrict__", "p"]]
        );
        assert!(kernels[1].params.is_empty());
        assert_eq!(kernels[2].lines, (5, 6));
    }
}

//! The device side of a file written for nvcc.
//!
//! Students test their kernel locally with `nvcc -c` or a small program: a
//! `main`, host helpers that call `cudaMalloc` and launch with `<<<...>>>`,
//! a struct that owns device buffers. NVRTC compiles device code only, so
//! that host code is taken out before compiling, and what stays is compiled
//! with `-default-device` (unannotated functions and namespace-scope
//! variables become `__device__`), so a `constexpr` helper used on both
//! sides keeps working.
//!
//! Taken out means *blanked*: every byte of a host-only item becomes a space
//! (line breaks stay, and so do preprocessor lines inside it, so `#if`
//! nesting is unchanged). Every later line keeps its number and column, and
//! the `#line` marker in front of the student's text stays exact.
//!
//! What is host-only, at namespace scope (including `namespace` and
//! `extern "C"` blocks):
//!
//! - `main`, and any function declared `__host__` without `__device__`;
//! - an unannotated function (or prototype) that no kept code refers to,
//!   directly or through a macro: under nvcc it is a host function, and
//!   nothing on the device needs it;
//! - any other declaration (a variable, a `typedef`, an out-of-class member
//!   or an operator) that uses the host's API or library (`cudaMalloc`,
//!   `std::`, `fprintf`, a `<<<` launch, ...).
//!
//! Inside a kept `struct`/`class`, a member function declared `__host__`
//! only, or an unannotated one that uses the host's API, is blanked the same
//! way. Everything else stays: kernels, `__device__` and `__host__
//! __device__` functions, types, templates, constants.
//!
//! Two things cannot be taken, and are refused with their line: device code
//! that calls a `__host__`-only function (it would be compiled without it),
//! and a `<<<...>>>` launch inside device code (no dynamic parallelism here).

use std::collections::{HashMap, HashSet};

use super::scan::{Token, TokenKind};

/// A construct flashprof cannot compile, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostRefusal {
    pub line: usize,
    pub message: String,
}

/// One blanked item, for telling the student what was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedHostCode {
    /// The item's name (`main`, `launch`, ...), or its first word.
    pub name: String,
    /// First and last line (1-based) of the student's file.
    pub lines: (usize, usize),
}

/// The device side of `source`: the text to compile (same length in lines
/// as `source`) and what was blanked. The text is `source` unchanged when
/// nothing is host-only or the file's structure cannot be read (unbalanced
/// braces), so the compiler reports on the student's own text.
pub(super) fn device_side(
    source: &str,
    tokens: &[Token],
) -> Result<(String, Vec<DroppedHostCode>), HostRefusal> {
    let code: Vec<&Token> = tokens
        .iter()
        .filter(|t| t.kind != TokenKind::Directive)
        .collect();
    let mut items = Vec::new();
    if parse_scope(&code, 0, code.len(), 0, false, &mut items).is_none() {
        return Ok((source.to_owned(), Vec::new()));
    }
    let macros = macro_bodies(tokens);
    let decisions = decide(&code, &items, &macros);
    check_kept(&code, &items, &decisions)?;
    let directives: Vec<(usize, usize)> = tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Directive)
        .map(|t| (offset(source, t), offset(source, t) + t.text.len()))
        .collect();
    let mut bytes = source.as_bytes().to_vec();
    let mut dropped = Vec::new();
    for (item, keep) in items.iter().zip(&decisions) {
        if *keep {
            continue;
        }
        let first = code[item.start];
        let last = code[item.end];
        let from = offset(source, first);
        let to = offset(source, last) + last.text.len();
        blank(&mut bytes, from, to, &directives);
        dropped.push(DroppedHostCode {
            name: item.name.clone().unwrap_or_else(|| first.text.to_owned()),
            lines: (first.line, last.line + last.text.matches('\n').count()),
        });
    }
    let text = String::from_utf8(bytes).expect("only whole ASCII-delimited tokens were blanked");
    Ok((text, dropped))
}

/// Byte offset of a token in the text it was cut from.
fn offset(source: &str, token: &Token) -> usize {
    token.text.as_ptr() as usize - source.as_ptr() as usize
}

/// Spaces over `from..to`, keeping line breaks and the preprocessor lines
/// in `directives` (byte spans, in file order).
fn blank(bytes: &mut [u8], from: usize, to: usize, directives: &[(usize, usize)]) {
    let first = directives.partition_point(|&(start, _)| start < from);
    let kept: Vec<(usize, usize)> = directives[first..]
        .iter()
        .take_while(|&&(start, _)| start < to)
        .copied()
        .collect();
    let mut next = kept.iter().peekable();
    let mut at = from;
    while at < to {
        if let Some(&&(start, end)) = next.peek() {
            if at >= start {
                at = end.max(at);
                next.next();
                continue;
            }
        }
        if bytes[at] != b'\n' {
            bytes[at] = b' ';
        }
        at += 1;
    }
}

/// What an item is, for deciding whether it stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A function definition or prototype with a plain name.
    Function,
    /// A definition whose name is qualified (`Buf::Buf`) or an operator.
    Member,
    /// A `struct`/`class`/`union`/`enum` definition; its members are items too.
    Type,
    /// Anything else: a variable, `typedef`, `using`, `static_assert`, ...
    Other,
}

#[derive(Debug, Clone)]
struct Item {
    /// First and last index into the code tokens.
    start: usize,
    end: usize,
    kind: Kind,
    name: Option<String>,
    /// Inside a class body.
    member: bool,
    /// Annotated `__device__`/`__global__` (with or without `__host__`), or
    /// `__constant__`/`__shared__`/`__managed__`.
    device: bool,
    /// Annotated `__host__` and not `__device__`.
    host_only: bool,
}

/// How deep namespaces and types may nest before the file is left as it is.
const MAX_NESTING: usize = 64;

/// Reads the items of one scope, `code[from..to]`. `None` when the braces
/// or parentheses do not balance.
fn parse_scope(
    code: &[&Token],
    from: usize,
    to: usize,
    nesting: usize,
    in_class: bool,
    items: &mut Vec<Item>,
) -> Option<()> {
    // Deeper than any real file: left to the compiler, and no deep recursion.
    if nesting > MAX_NESTING {
        return None;
    }
    let mut i = from;
    while i < to {
        let text = code[i].text;
        // Stray semicolons and access labels are not items.
        if text == ";" {
            i += 1;
            continue;
        }
        if in_class
            && matches!(text, "public" | "private" | "protected")
            && code.get(i + 1).is_some_and(|t| t.text == ":")
        {
            i += 2;
            continue;
        }
        let start = i;
        let mut depth = 0usize;
        let mut j = i;
        let mut item_mode: Option<Mode> = None;
        let end = loop {
            let mode = item_mode;
            if j >= to {
                return None;
            }
            match code[j].text {
                "(" | "[" => depth += 1,
                "{" if depth > 0 => depth += 1,
                ")" | "]" | "}" if depth > 0 => depth -= 1,
                ")" | "]" | "}" => return None,
                ";" if depth == 0 => break Some(j),
                "{" => {
                    let close = matching_close(&code[..to], j, "{", "}")?;
                    let head = &code[start..j];
                    let mode = match mode {
                        Some(mode) => mode,
                        None if opens_scope(head) => {
                            // `extern "C" { ... }` is not an item; nor is a namespace.
                            parse_scope(code, j + 1, close, nesting + 1, false, items)?;
                            i = close + 1;
                            break None;
                        }
                        None if type_keyword(head).is_some() => {
                            let before = items.len();
                            parse_scope(code, j + 1, close, nesting + 1, true, items)?;
                            // The type itself runs to its `;` (`} var;` included).
                            let semi = (close + 1..to).find(|&k| code[k].text == ";")?;
                            let type_item = head_item(code, start, semi, Kind::Type, in_class);
                            items.insert(before, type_item);
                            i = semi + 1;
                            break None;
                        }
                        None if outside_template(head).any(|t| t.text == "=")
                            || !has_call_parens(head) =>
                        {
                            Mode::Initialiser
                        }
                        None if head
                            .windows(2)
                            .any(|w| w[0].text == ")" && w[1].text == ":") =>
                        {
                            Mode::InitList
                        }
                        None => Mode::Function,
                    };
                    item_mode = Some(mode);
                    // `= {...}` or a brace-initialised variable; in a
                    // constructor's initialiser list, a brace right after a
                    // member's name initialises it (the body's follows `)` or `}`).
                    let member_init = mode == Mode::InitList
                        && (code[j - 1].kind == TokenKind::Identifier || code[j - 1].text == ">");
                    if mode == Mode::Initialiser || mode == Mode::InitList && member_init {
                        j = close + 1;
                        continue;
                    }
                    break Some(close);
                }
                _ => {}
            }
            j += 1;
        };
        let Some(end) = end else {
            continue;
        };
        let kind = function_kind(&code[start..=end]);
        items.push(head_item(code, start, end, kind, in_class));
        i = end + 1;
    }
    Some(())
}

fn head_item(code: &[&Token], start: usize, end: usize, kind: Kind, member: bool) -> Item {
    let tokens = &code[start..=end];
    let has = |word: &str| head_of(tokens).iter().any(|t| t.text == word);
    let device = [
        "__device__",
        "__global__",
        "__constant__",
        "__shared__",
        "__managed__",
    ]
    .iter()
    .any(|w| has(w));
    let name = match kind {
        Kind::Function => function_name(tokens),
        Kind::Type => type_keyword(tokens)
            .and_then(|at| tokens.get(at + 1))
            .filter(|t| t.kind == TokenKind::Identifier)
            .map(|t| t.text.to_owned()),
        Kind::Member | Kind::Other => None,
    };
    Item {
        start,
        end,
        kind,
        name,
        member,
        device,
        host_only: has("__host__") && !device,
    }
}

/// The tokens before a body's `{` (or all of a declaration).
fn head_of<'a, 'b>(tokens: &'b [&'a Token<'a>]) -> &'b [&'a Token<'a>] {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate() {
        match t.text {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            "{" if depth == 0 => return &tokens[..k],
            _ => {}
        }
    }
    tokens
}

/// The index of the token that closes the bracket `tokens[open]` opens
/// (`opening`, closed by `closing`); `None` when it is never closed.
fn matching_close(tokens: &[&Token], open: usize, opening: &str, closing: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        if t.text == opening {
            depth += 1;
        } else if t.text == closing {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// `namespace x {`, `namespace {`, `extern "C" {`, `inline namespace x {`.
fn opens_scope(head: &[&Token]) -> bool {
    let words: Vec<&str> = head.iter().map(|t| t.text).collect();
    matches!(words[..], ["extern", "\"C\""] | ["extern", "\"C++\""])
        || words.iter().take(2).any(|w| *w == "namespace")
            && !words.contains(&"(")
            && !words.contains(&"=")
}

/// Index of `struct`/`class`/`union`/`enum` when the head defines a type
/// (not when it merely names one in a function's return type).
fn type_keyword(head: &[&Token]) -> Option<usize> {
    let head = head_of(head);
    if has_call_parens(head) || outside_template(head).any(|t| t.text == "=") {
        return None;
    }
    head.iter()
        .position(|t| matches!(t.text, "struct" | "class" | "union" | "enum"))
}

/// A `(` outside any template parameter list: a function's parameters.
fn has_call_parens(head: &[&Token]) -> bool {
    outside_template(head).any(|t| t.text == "(")
}

/// The tokens of a head that are not inside a `template <...>` list.
fn outside_template<'h, 'a>(head: &'h [&'a Token<'a>]) -> impl Iterator<Item = &'a Token<'a>> + 'h {
    let mut angle = 0usize;
    let mut after_template = false;
    head.iter().copied().filter(move |t| {
        match t.text {
            "template" => after_template = true,
            "<" if after_template || angle > 0 => {
                angle += 1;
                return false;
            }
            ">" if angle > 0 => {
                angle -= 1;
                if angle == 0 {
                    after_template = false;
                }
                return false;
            }
            _ => {}
        }
        angle == 0
    })
}

/// What the first `{` of an item showed it to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Initialiser,
    InitList,
    Function,
}

/// Whether a definition or declaration with parentheses is a plainly named
/// function, a qualified/operator one, or not a function at all.
fn function_kind(tokens: &[&Token]) -> Kind {
    let head = head_of(tokens);
    let initialised = outside_template(head).any(|t| t.text == "=");
    if !has_call_parens(head) || initialised && !is_body(tokens) {
        return Kind::Other;
    }
    if head.iter().any(|t| t.text == "operator") {
        return Kind::Member;
    }
    let Some(paren) = first_call_paren(head) else {
        return Kind::Other;
    };
    match paren.checked_sub(2).map(|k| head[k].text) {
        Some("::") => Kind::Member,
        _ if paren >= 1 && NOT_NAMES.contains(&head[paren - 1].text) => Kind::Other,
        _ if paren >= 1 && head[paren - 1].kind == TokenKind::Identifier => Kind::Function,
        _ => Kind::Other,
    }
}

/// Words before a `(` at namespace scope that do not name a function.
const NOT_NAMES: [&str; 5] = ["static_assert", "decltype", "sizeof", "alignof", "alignas"];

fn is_body(tokens: &[&Token]) -> bool {
    tokens.last().is_some_and(|t| t.text == "}")
}

fn first_call_paren(head: &[&Token]) -> Option<usize> {
    let mut angle = 0usize;
    let mut after_template = false;
    let mut k = 0;
    while k < head.len() {
        match head[k].text {
            "template" => after_template = true,
            "<" if after_template || angle > 0 => angle += 1,
            ">" if angle > 0 => {
                angle -= 1;
                if angle == 0 {
                    after_template = false;
                }
            }
            // `__launch_bounds__(...)`, `__attribute__((...))`, `alignas(...)`.
            "__launch_bounds__" | "__attribute__" | "__maxnreg__" | "alignas" | "__align__"
            | "decltype" | "__declspec" => {
                k = skip_parens(head, k + 1)?;
            }
            "(" if angle == 0 => return Some(k),
            _ => {}
        }
        k += 1;
    }
    None
}

fn skip_parens(head: &[&Token], open: usize) -> Option<usize> {
    if head.get(open)?.text != "(" {
        return Some(open - 1);
    }
    matching_close(head, open, "(", ")")
}

fn function_name(tokens: &[&Token]) -> Option<String> {
    let head = head_of(tokens);
    let paren = first_call_paren(head)?;
    Some(head.get(paren.checked_sub(1)?)?.text.to_owned())
}

/// Identifiers that only the host has: the runtime API's calls and types,
/// the C++ library, stdio streams, process control.
fn is_host_marker(token: &Token) -> bool {
    token.kind == TokenKind::Identifier
        && (token.text.starts_with("cuda")
            || matches!(
                token.text,
                "std"
                    | "fprintf"
                    | "fopen"
                    | "fclose"
                    | "fread"
                    | "fwrite"
                    | "fflush"
                    | "fputs"
                    | "puts"
                    | "stderr"
                    | "stdout"
                    | "malloc"
                    | "calloc"
                    | "realloc"
                    | "free"
                    | "exit"
                    | "abort"
                    | "rand"
                    | "srand"
                    | "getenv"
                    | "atoi"
                    | "atof"
                    | "strtol"
                    | "cout"
                    | "cerr"
            ))
}

/// Where a `<<<` launch starts in `tokens`.
fn launch_at(tokens: &[&Token]) -> Option<usize> {
    tokens
        .windows(3)
        .position(|w| w.iter().all(|t| t.text == "<"))
}

fn host_tainted(tokens: &[&Token]) -> bool {
    tokens.iter().any(|t| is_host_marker(t)) || launch_at(tokens).is_some()
}

/// `#define NAME ...`: the identifiers each macro's expansion mentions.
fn macro_bodies<'a>(tokens: &[Token<'a>]) -> Vec<(&'a str, Vec<&'a str>)> {
    tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Directive)
        .filter_map(|t| {
            let rest = t.text.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("define")?.trim_start();
            let words = super::scan::tokenize(rest);
            let name = words.first()?.text;
            let body = words[1..]
                .iter()
                .filter(|w| w.kind == TokenKind::Identifier)
                .map(|w| w.text)
                .collect();
            Some((name, body))
        })
        .collect()
}

/// Keep (true) or blank (false), one per item. Linear in the file: each
/// item's words are read once, when it is first kept.
fn decide(code: &[&Token], items: &[Item], macros: &[(&str, Vec<&str>)]) -> Vec<bool> {
    let mut keep: Vec<Option<bool>> = items
        .iter()
        .map(|item| {
            let tokens = &code[item.start..=item.end];
            if item.host_only || item.name.as_deref() == Some("main") && !item.member {
                Some(false)
            } else if item.device || item.kind == Kind::Type {
                Some(true)
            } else if item.kind == Kind::Function && !item.member {
                None // decided by whether kept code refers to it
            } else {
                Some(!host_tainted(tokens))
            }
        })
        .collect();
    let mut candidates: HashMap<&str, Vec<usize>> = HashMap::new();
    for (k, item) in items.iter().enumerate() {
        if let (None, Some(name)) = (keep[k], item.name.as_deref()) {
            candidates.entry(name).or_default().push(k);
        }
    }
    let macros: HashMap<&str, &Vec<&str>> = macros.iter().map(|(n, b)| (*n, b)).collect();
    let mut referenced: HashSet<&str> = HashSet::new();
    let mut words: Vec<&str> = Vec::new();
    for k in (0..items.len()).filter(|&k| keep[k] == Some(true)) {
        words.extend(own_words(code, items, k));
    }
    while let Some(word) = words.pop() {
        if !referenced.insert(word) {
            continue;
        }
        if let Some(body) = macros.get(word) {
            words.extend(body.iter().copied());
        }
        for &k in candidates.get(word).into_iter().flatten() {
            if keep[k].is_none() {
                keep[k] = Some(true);
                words.extend(own_words(code, items, k));
            }
        }
    }
    keep.into_iter().map(|k| k.unwrap_or(false)).collect()
}

/// The identifiers of item `k`, without those of the items nested in it (a
/// type's members are items of their own, listed right after it).
fn own_words<'a>(code: &[&'a Token<'a>], items: &[Item], k: usize) -> Vec<&'a str> {
    let item = &items[k];
    let mut words = Vec::new();
    let mut at = item.start;
    let nested = items[k + 1..]
        .iter()
        .take_while(|inner| inner.start < item.end)
        .filter(|inner| inner.end <= item.end);
    for inner in nested {
        if inner.start >= at {
            words.extend(identifiers(&code[at..inner.start]));
            at = inner.end + 1;
        }
    }
    words.extend(identifiers(&code[at.min(item.end + 1)..=item.end]));
    words
}

fn identifiers<'t, 'a>(tokens: &'t [&'a Token<'a>]) -> impl Iterator<Item = &'a str> + 't {
    tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Identifier)
        .map(|t| t.text)
}

/// The two things that cannot be taken, in kept code.
fn check_kept(code: &[&Token], items: &[Item], keep: &[bool]) -> Result<(), HostRefusal> {
    let host_functions: HashMap<&str, usize> = items
        .iter()
        .filter(|i| i.host_only && i.kind == Kind::Function)
        .filter_map(|i| Some((i.name.as_deref()?, code[i.start].line)))
        .collect();
    for (item, kept) in items.iter().zip(keep) {
        if !kept || item.kind == Kind::Type {
            continue;
        }
        let tokens = &code[item.start..=item.end];
        if item.device {
            if let Some(at) = launch_at(tokens) {
                return Err(HostRefusal {
                    line: tokens[at].line,
                    message: "a kernel launch (`<<<...>>>`) inside device code needs dynamic \
                              parallelism, which flashprof does not compile; launch only from \
                              host code (flashprof drops host code and launches the lab's entry \
                              point itself)"
                        .into(),
                });
            }
        }
        for (k, token) in tokens.iter().enumerate() {
            let calls = tokens.get(k + 1).is_some_and(|t| t.text == "(");
            let Some(host_line) = host_functions.get(token.text).filter(|_| calls) else {
                continue;
            };
            return Err(HostRefusal {
                line: token.line,
                message: format!(
                    "calls `{}`, which is declared `__host__` (line {host_line}), from code \
                     flashprof compiles for the device; mark it `__host__ __device__`, or call \
                     it only from host code (flashprof drops host code)",
                    token.text
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::scan::tokenize;
    use super::*;

    fn device(source: &str) -> String {
        device_side(source, &tokenize(source)).expect("accepted").0
    }

    fn kept_lines(source: &str) -> Vec<usize> {
        let out = device(source);
        assert_eq!(out.len(), source.len(), "lengths differ");
        assert_eq!(out.lines().count(), source.lines().count());
        out.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, _)| n + 1)
            .collect()
    }

    #[test]
    fn main_launch_code_and_host_helpers_are_blanked_line_for_line() {
        let source = "#include <cstdio>\n\
                      __device__ float sq(float x) { return x * x; }\n\
                      extern \"C\" __global__ void k(float* o) { o[0] = sq(2.0f); }\n\
                      void launch(float* d) {\n  k<<<1, 1>>>(d);\n}\n\
                      int main() {\n  float* d;\n  cudaMalloc(&d, 4);\n  launch(d);\n  printf(\"ok\\n\");\n  return 0;\n}\n";
        assert_eq!(kept_lines(source), [1, 2, 3]);
    }

    #[test]
    fn helpers_the_device_uses_stay_and_unused_ones_go() {
        let source = "template <int BN> constexpr size_t smem() { return BN * 4; }\n\
                      constexpr int tiles(int n) { return n / 64; }\n\
                      static void check(int e) { if (e) exit(1); }\n\
                      #define TILES(n) tiles(n)\n\
                      __global__ void k(float* o) { o[0] = smem<8>() + TILES(3); }\n\
                      int main() { check(0); size_t s = smem<8>(); }\n";
        assert_eq!(kept_lines(source), [1, 2, 4, 5]);
    }

    #[test]
    fn host_members_of_a_kept_struct_are_blanked() {
        let source = "struct Buf {\n  float* p;\n  Buf(size_t n) : p(nullptr) { cudaMalloc(&p, n); }\n  \
                      ~Buf() { cudaFree(p); }\n  __device__ float at(int i) const { return p[i]; }\n  \
                      int size() const { return 3; }\n};\n\
                      __global__ void k(Buf b, float* o) { o[0] = b.at(0) + b.size(); }\n";
        assert_eq!(kept_lines(source), [1, 2, 5, 6, 7, 8]);
    }

    #[test]
    fn namespaces_and_extern_c_blocks_are_looked_into() {
        let source = "namespace util {\n__host__ __device__ int hd(int x) { return x; }\nvoid host(float* p) { cudaFree(p); }\n}\n\
                      extern \"C\" {\n__global__ void k(int* o) { *o = util::hd(1); }\n}\n";
        assert_eq!(kept_lines(source), [1, 2, 4, 5, 6, 7]);
    }

    #[test]
    fn preprocessor_lines_inside_blanked_code_stay() {
        let source = "int main() {\n#ifdef DEBUG\n  puts(\"d\");\n#endif\n  return 0;\n}\n\
                      __global__ void k() {}\n";
        assert_eq!(kept_lines(source), [2, 4, 7]);
    }

    #[test]
    fn a_device_call_to_a_host_only_function_is_refused_with_its_line() {
        let source = "__host__ int twice(int x) { return 2 * x; }\n\
                      __global__ void k(int* o) {\n  *o = twice(3);\n}\n";
        let refusal = device_side(source, &tokenize(source)).expect_err("refused");
        assert_eq!(refusal.line, 3);
        assert!(refusal.message.contains("`twice`"), "{}", refusal.message);
        assert!(refusal.message.contains("__host__ __device__"));
    }

    #[test]
    fn a_launch_from_device_code_is_refused() {
        let source = "__global__ void child() {}\n__global__ void k() {\n  child<<<1, 1>>>();\n}\n";
        let refusal = device_side(source, &tokenize(source)).expect_err("refused");
        assert_eq!(refusal.line, 3);
        assert!(refusal.message.contains("dynamic parallelism"));
    }

    #[test]
    fn unbalanced_files_are_left_for_the_compiler() {
        let source = "__global__ void k() {\nint main() {}\n";
        assert_eq!(device(source), source);
    }

    #[test]
    fn odd_and_hostile_shapes_neither_panic_nor_recurse_deeply() {
        let deep = "namespace a {".repeat(100_000);
        assert_eq!(device(&deep), deep);
        let deep_types = format!("{}\n", "struct S {".repeat(100_000));
        assert_eq!(device(&deep_types), deep_types);
        for source in [
            "{",
            "}",
            "(",
            ")",
            "{ ) }",
            "struct",
            "a{",
            "::(",
            "{ }",
            ";;",
            "<<<",
            "int f() : a{ {",
            "Foo() : a{1}, b(2) {}",
            "template <int N = 3> struct T {};",
            "operator+(a, b) { }",
            "x::y() {",
            "__host__",
            "main",
            "extern \"C\" {",
            "é{ü}ß",
            "#define X {\nX }",
        ] {
            let _ = device_side(source, &tokenize(source));
        }
    }

    #[test]
    fn a_long_chain_of_helpers_is_decided_quickly() {
        let mut source = String::from("__global__ void k() { f0(); }\n");
        for n in 0..20_000 {
            source.push_str(&format!("int f{n}() {{ return f{}(); }}\n", n + 1));
        }
        source.push_str("int unused() { return cudaFree(0); }\n");
        let started = std::time::Instant::now();
        let lines = kept_lines(&source);
        assert_eq!(lines.len(), 20_001);
        assert!(started.elapsed().as_secs() < 5);
    }
}

//! Which files a submission may pull in: only the headers flashprof provides.
//!
//! NVRTC opens quoted and absolute include paths itself, so an unfiltered
//! `#include "/home/ta/secret.txt"` would compile a file of the grader's
//! machine and hand its words back as compile errors, `__has_include` would
//! probe for files, and `#include "../alice/prefill.cu"` would grade one
//! student's work as another's. A submission is one file: it may include the
//! stand-in headers of [`super::prelude`] and nothing else. Every directive
//! that names a file (`#include`, `#include_next`, `#import`, `#embed`, and
//! the `__has_include` family wherever it appears) is checked here, in every
//! spelling the preprocessor accepts (line splices, comments, the `%:`
//! digraph); `#line` is refused too, because it would make the compiler
//! attribute diagnostics to a file of the student's choosing. The worker's
//! sandbox is the second wall behind this one (docs/SECURITY.md).

use super::prelude::{CUDA_TYPE_HEADERS, STAND_IN_HEADERS};
use super::scan::{Token, TokenKind};

/// A directive or operator that names something the submission may not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RefusedInclude {
    /// 1-based line of the student's file.
    pub line: usize,
    /// The offending text, on one line.
    pub text: String,
    pub reason: String,
}

/// Operators that test for a file's existence.
const PROBES: [&str; 3] = ["__has_include_next", "__has_include", "__has_embed"];

/// The first directive or probe in `tokens` that the policy refuses.
pub(super) fn first_refused(tokens: &[Token]) -> Option<RefusedInclude> {
    direct_refusal(tokens).or_else(|| pasted_probe(tokens))
}

fn direct_refusal(tokens: &[Token]) -> Option<RefusedInclude> {
    tokens.iter().find_map(|token| match token.kind {
        TokenKind::Directive => check_directive(token),
        TokenKind::Identifier if PROBES.contains(&token.text) => Some(RefusedInclude {
            line: token.line,
            text: token.text.to_owned(),
            reason: "tests for a file outside the submission; only `#if __has_include(<header>)` \
                     on a header flashprof provides is allowed"
                .into(),
        }),
        _ => None,
    })
}

fn check_directive(token: &Token) -> Option<RefusedInclude> {
    let logical = logical_text(token.text);
    let refuse = |reason: String| {
        Some(RefusedInclude {
            line: token.line,
            text: logical.trim().to_owned(),
            reason,
        })
    };
    let body = directive_body(&logical)?;
    let name_end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, operand) = body.split_at(name_end);
    match name {
        "include" => match header_name(operand.trim()) {
            Some(header) if is_provided(header) => probes_in(token, &logical),
            Some(header) => refuse(format!(
                "`{header}` is not a header flashprof provides; a submission is one file \
                 and may include only {}{}",
                provided_list(),
                if operand.trim().starts_with('"') {
                    "; a header next to your file is not read: copy the device code the kernel \
                     needs from it into this file"
                } else {
                    ""
                }
            )),
            None => refuse(
                "an include must name its header directly, as <name> or \"name\" \
                 (a macro or computed name is not accepted)"
                    .into(),
            ),
        },
        "include_next" | "import" | "embed" => refuse(format!(
            "`#{name}` reads a file from the grader's machine; a submission may include only {}",
            provided_list()
        )),
        "line" => {
            refuse("`#line` would make diagnostics point into another file; remove it".into())
        }
        _ => probes_in(token, &logical),
    }
}

/// A probe inside a directive (`#if __has_include(...)`, or a macro that
/// expands to one) is allowed only in its plain form on a provided header.
fn probes_in(token: &Token, logical: &str) -> Option<RefusedInclude> {
    let mut rest = logical;
    while let Some(at) = PROBES.iter().filter_map(|p| rest.find(p)).min() {
        let probe = PROBES
            .iter()
            .find(|p| rest[at..].starts_with(**p))
            .expect("a probe starts here");
        let after = rest[at + probe.len()..].trim_start();
        let argument = after
            .strip_prefix('(')
            .and_then(|inner| inner.split_once(')'))
            .map(|(inside, _)| inside.trim());
        let allowed =
            *probe == "__has_include" && argument.and_then(header_name).is_some_and(is_provided);
        if !allowed {
            return Some(RefusedInclude {
                line: token.line,
                text: logical.trim().to_owned(),
                reason: "tests for a file outside the submission; only `__has_include(<header>)` \
                         on a header flashprof provides is allowed"
                    .into(),
            });
        }
        rest = &rest[at + probe.len()..];
    }
    None
}

/// Token pasting can spell a probe no scan of the text sees
/// (`__has_incl##ude`), and a probe only means something in `#if`/`#elif`.
/// So a macro whose expansion may paste (its body uses `##`, or names such a
/// macro) may not appear in a condition.
fn pasted_probe(tokens: &[Token]) -> Option<RefusedInclude> {
    let definitions: Vec<(String, String)> = tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Directive)
        .filter_map(|t| {
            let logical = logical_text(t.text);
            let body = directive_body(&logical)?;
            let rest = body.strip_prefix("define")?.trim_start();
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            Some((rest[..end].to_owned(), rest[end..].to_owned()))
        })
        .collect();
    let mut pasting: Vec<&str> = definitions
        .iter()
        .filter(|(_, body)| body.contains("##"))
        .map(|(name, _)| name.as_str())
        .collect();
    // Macros that expand to a pasting macro paste too.
    loop {
        let before = pasting.len();
        for (name, body) in &definitions {
            if !pasting.contains(&name.as_str()) && pasting.iter().any(|p| names(body, p)) {
                pasting.push(name);
            }
        }
        if pasting.len() == before {
            break;
        }
    }
    tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Directive)
        .find_map(|t| {
            let logical = logical_text(t.text);
            let body = directive_body(&logical)?;
            let condition = ["if", "elif"]
                .iter()
                .find_map(|keyword| body.strip_prefix(keyword))
                .filter(|rest| {
                    rest.starts_with(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                })?;
            let used = pasting.iter().find(|p| names(condition, p))?;
            Some(RefusedInclude {
                line: t.line,
                text: logical.trim().to_owned(),
                reason: format!(
                    "`{used}` pastes tokens (##), and a pasted name in a condition can test \
                     for files outside the submission; compute the condition without it"
                ),
            })
        })
}

/// Whether `text` mentions the identifier `name` as a whole word.
fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// What follows the `#` (or `%:`, `??=`) of a logical directive line.
fn directive_body(logical: &str) -> Option<&str> {
    ["#", "%:", "??="]
        .iter()
        .find_map(|opener| logical.trim_start().strip_prefix(opener))
        .map(str::trim_start)
}

/// The directive as the preprocessor sees it: line splices joined, comments
/// replaced by a space.
fn logical_text(raw: &str) -> String {
    let spliced = raw.replace("\\\r\n", "").replace("\\\n", "");
    let mut text = String::with_capacity(spliced.len());
    let mut rest = spliced.as_str();
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                text.push_str(&rest[..b]);
                text.push(' ');
                rest = rest[b + 2..]
                    .split_once("*/")
                    .map_or("", |(_, after)| after);
            }
            (_, Some(l)) => {
                text.push_str(&rest[..l]);
                return text;
            }
            _ => {
                text.push_str(rest);
                return text;
            }
        }
    }
}

/// The header of `<name>` or `"name"`, when the operand is exactly that.
fn header_name(operand: &str) -> Option<&str> {
    let inner = operand
        .strip_prefix('<')
        .and_then(|r| r.strip_suffix('>'))
        .or_else(|| operand.strip_prefix('"').and_then(|r| r.strip_suffix('"')))?;
    (!inner.is_empty() && !inner.contains(['<', '>', '"'])).then_some(inner)
}

fn is_provided(header: &str) -> bool {
    STAND_IN_HEADERS.iter().any(|h| h.name == header) || CUDA_TYPE_HEADERS.contains(&header)
}

/// The CUDA type headers the tokens include, each once, in file order
/// (the compiler needs the real folder for all but `cuda_fp16.h`).
pub(super) fn cuda_type_headers(tokens: &[Token]) -> Vec<&'static str> {
    let mut found: Vec<&'static str> = Vec::new();
    for token in tokens.iter().filter(|t| t.kind == TokenKind::Directive) {
        let logical = logical_text(token.text);
        let Some(operand) = directive_body(&logical).and_then(|b| b.strip_prefix("include")) else {
            continue;
        };
        let named =
            header_name(operand.trim()).and_then(|h| CUDA_TYPE_HEADERS.iter().find(|&&c| c == h));
        if let Some(&header) = named {
            if !found.contains(&header) {
                found.push(header);
            }
        }
    }
    found
}

fn provided_list() -> String {
    let mut names: Vec<&str> = STAND_IN_HEADERS.iter().map(|h| h.name).collect();
    for header in CUDA_TYPE_HEADERS {
        if !names.contains(&header) {
            names.push(header);
        }
    }
    format!("the headers flashprof provides ({})", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::scan::tokenize;
    use super::*;

    fn refused(source: &str) -> Option<RefusedInclude> {
        first_refused(&tokenize(source))
    }

    fn assert_all_refused(sources: &[&str]) {
        for source in sources {
            assert!(refused(source).is_some(), "accepted: {source:?}");
        }
    }

    #[test]
    fn provided_headers_are_accepted_in_either_quoting() {
        let source = "#include <cuda_runtime.h>\n#include \"math.h\"\n#include  <stdint.h> // ok\n\
                      #if __has_include(<cuda_fp16.h>)\n#endif\n__global__ void k() {}\n";
        assert_eq!(refused(source), None);
    }

    #[test]
    fn exactly_the_three_cuda_type_headers_of_the_cuda_folder_are_allowed() {
        let source = "#include <cuda_bf16.h>\n#include \"cuda_fp8.h\"\n#include <cuda_fp16.h>\n\
                      #include <cuda_bf16.h>\n#if __has_include(<cuda_fp8.h>)\n#endif\n";
        let tokens = tokenize(source);
        assert_eq!(first_refused(&tokens), None);
        assert_eq!(
            cuda_type_headers(&tokens),
            ["cuda_bf16.h", "cuda_fp8.h", "cuda_fp16.h"]
        );
        assert!(cuda_type_headers(&tokenize("#include <math.h>\n")).is_empty());
        // The folder they come from holds many more; none of those is named.
        for other in [
            "cuda_fp4.h",
            "vector_types.h",
            "cuda_runtime_api.h",
            "cuda_fp8.hpp",
        ] {
            let found = refused(&format!("#include <{other}>\n"))
                .unwrap_or_else(|| panic!("accepted {other}"));
            assert!(
                found.reason.contains("cuda_bf16.h, cuda_fp8.h"),
                "{}",
                found.reason
            );
        }
    }

    #[test]
    fn host_files_and_classmates_files_are_refused_with_their_line() {
        for (source, line) in [
            ("#include \"/etc/passwd\"\n", 1),
            ("int x;\n#include \"../alice/prefill.cu\"\n", 2),
            ("\n\n#include </proc/self/environ>\n", 3),
            ("#include \"helpers.cuh\"\n", 1),
        ] {
            let found = refused(source).unwrap_or_else(|| panic!("accepted: {source:?}"));
            assert_eq!(found.line, line, "{source:?}");
            assert!(found.reason.contains("not a header flashprof provides"));
        }
    }

    #[test]
    fn every_spelling_of_a_directive_is_seen() {
        assert_all_refused(&[
            "%:include \"/etc/passwd\"\n",
            "  #  include \"/etc/passwd\"\n",
            "#inc\\\nlude \"/etc/passwd\"\n",
            "# /* hidden */ include \"/etc/passwd\"\n",
            "/* lead */ #include \"/etc/passwd\"\n",
            "??=include \"/etc/passwd\"\n",
            "#include_next <math.h>\n",
            "#import \"x.h\"\n",
            "#embed \"/etc/shadow\"\n",
            "#line 1 \"alice.cu\"\n",
            "#define SECRET \"/etc/passwd\"\n#include SECRET\n",
        ]);
    }

    #[test]
    fn existence_probes_are_refused_anywhere() {
        assert_all_refused(&[
            "#if __has_include(\"/etc/shadow\")\n#endif\n",
            "#if __has_include(</etc/shadow>)\n#endif\n",
            "#define PROBE(f) __has_include(f)\n",
            "#if __has_include_next(<math.h>)\n#endif\n",
            "__global__ void k(int* o) { *o = __has_include(\"/etc/shadow\"); }\n",
            "#if __has_embed(\"/etc/shadow\")\n#endif\n",
        ]);
    }

    #[test]
    fn a_probe_spelled_by_token_pasting_cannot_reach_a_condition() {
        for source in [
            "#define HI(x) __has_incl##ude(x)\n#if HI(\"/etc/shadow\")\n#endif\n",
            "#define CAT(a, b) a##b\n#define HI(x) CAT(__has_, include)(x)\n\
             #if 1\n#elif HI(</etc/shadow>)\n#endif\n",
        ] {
            let found = refused(source).unwrap_or_else(|| panic!("accepted: {source:?}"));
            assert!(found.reason.contains("pastes tokens"), "{found:?}");
        }
        // Pasting for ordinary code, and conditions on plain macros, stay allowed.
        let source = "#define CAT(a, b) a##b\n#define TILE 64\n#if TILE > 32\n#endif\n\
                      __global__ void k(float* CAT(o, ut)) {}\n";
        assert_eq!(refused(source), None);
    }

    #[test]
    fn include_like_words_in_comments_and_strings_are_not_directives() {
        let source = "// #include \"/etc/passwd\"\n/* #include </x> */\n\
                      __global__ void k() { const char* s = \"#include </etc/passwd>\"; }\n";
        assert_eq!(refused(source), None);
    }
}

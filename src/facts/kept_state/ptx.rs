//! Reading a kernel's PTX: whether it reads the clock or the global timer,
//! which cache-policy hints it gives, and which of its initialised module
//! variables its code may write.
//!
//! PTX names all of these as written, where SASS would need a disassembler.
//! Only instructions count: directives and declarations are skipped and
//! `//` comments dropped (inline assembly may carry some), and names are
//! read as whole tokens, so `%clock` does not match an asm block's `%clocks`.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::KernelFacts;

/// One instruction: its opcode with qualifiers (`st.global.u32`), the
/// tokens of its first operand (the destination, for most), and those of
/// the others. The guard (`@%p1`) is dropped: it decides whether the
/// instruction runs, not what it touches.
struct Statement<'a> {
    opcode: &'a str,
    first: Vec<&'a str>,
    rest: Vec<&'a str>,
}

/// The PTX's code as `;`-separated statements, comments dropped. A line
/// that leaves no instruction open (a directive such as `.loc`, which has
/// no `;`, a label, a brace) is closed with one, so it cannot run into the
/// next line's instruction; an instruction that inline assembly spreads
/// over several lines stays whole.
fn code(ptx: &str) -> String {
    let mut code = String::with_capacity(ptx.len());
    for line in ptx.lines() {
        code.push_str(line.split("//").next().unwrap_or_default());
        code.push('\n');
        let open = code.rsplit(';').next().unwrap_or_default();
        if instruction(open).is_none() {
            code.push(';');
        }
    }
    code
}

/// The instruction `text` starts with, without the braces, labels
/// (`$L__BB0_2:`) and guard (`@%p1`) before it; `None` for a directive
/// (`.reg`, `.global`), the entry's parameter list or nothing at all.
fn instruction(text: &str) -> Option<&str> {
    let mut text = text.trim_start();
    loop {
        text = text.trim_start_matches(['{', '}']).trim_start();
        let label = text
            .split_once(':')
            .filter(|(name, rest)| {
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
                    && !rest.starts_with(':')
            })
            .map(|(_, rest)| rest);
        let guarded = text
            .strip_prefix('@')
            .and_then(|guarded| guarded.split_once(char::is_whitespace))
            .map(|(_, rest)| rest);
        match label.or(guarded) {
            Some(rest) => text = rest.trim_start(),
            None => break,
        }
    }
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        .then_some(text)
}

fn statements(code: &str) -> impl Iterator<Item = Statement<'_>> {
    code.split(';').filter_map(|text| {
        let text = instruction(text)?.trim_end();
        let (opcode, operands) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let operands = operands.trim_start();
        let first_end = match operands.strip_prefix('{') {
            Some(vector) => vector.find('}').map_or(operands.len(), |end| end + 2),
            None => operands.find(',').unwrap_or(operands.len()),
        };
        let (first, rest) = operands.split_at(first_end);
        Some(Statement {
            opcode,
            first: tokens(first).collect(),
            rest: tokens(rest).collect(),
        })
    })
}

/// Registers (`%rd3`), special registers (`%clock64`; `%tid.x` is `%tid`
/// and `x`), symbols (`g_memo`, `$str`) and numbers.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%')))
        .filter(|token| !token.is_empty())
}

impl KernelFacts {
    /// Notes the clock and timer reads and the cache-policy hints of `ptx`.
    pub fn read_ptx(&mut self, ptx: &str) {
        for statement in statements(&code(ptx)) {
            for hint in statement.opcode.split('.').filter(|q| is_cache_hint(q)) {
                if !self.eviction_hints.iter().any(|h| h == hint) {
                    self.eviction_hints.push(hint.to_owned());
                }
            }
            for token in statement.first.iter().chain(&statement.rest) {
                match *token {
                    "%clock" | "%clock64" | "%clock_hi" => self.reads_clock = true,
                    "%globaltimer" | "%globaltimer_lo" | "%globaltimer_hi" => {
                        self.reads_global_timer = true
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A PTX qualifier that asks the caches to keep, drop or skip a line
/// (`L2::evict_last`, `L1::no_allocate`), hands an instruction a cache
/// policy (`L2::cache_hint`), or makes one (`createpolicy`). The default
/// priority, `evict_normal`, changes nothing and is left out.
fn is_cache_hint(qualifier: &str) -> bool {
    const PRIORITIES: [&str; 4] = [
        "evict_last",
        "evict_first",
        "evict_unchanged",
        "no_allocate",
    ];
    match qualifier.split_once("::") {
        Some(("L2", "cache_hint")) => true,
        Some(("L1" | "L2", priority)) => PRIORITIES.contains(&priority),
        _ => qualifier == "createpolicy",
    }
}

/// Instructions that only compute a register from registers: an address
/// derived from a variable's through them still points into it.
const REGISTER_ONLY: [&str; 18] = [
    "mov", "cvta", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not",
    "neg", "min", "max", "selp", "setp",
];

/// Which of `variables` (symbols as the PTX names them) the code may write.
///
/// The cubin cannot tell a `const` table from a writable one: both sit in
/// `.nv.global.init`, and the lab's own `constexpr` shape constants become
/// such variables under `-default-device`. What tells is the code: a
/// variable is only read when every use of it, and of every register
/// computed from its address, is the address of a load. Anything else (a
/// store, an atomic, a call, the pointer itself stored or handed on) counts
/// as a write, so nothing the kernel could change is missed; a constant
/// table read through a computed index costs nothing here.
pub fn written_variables<'v>(ptx: &str, variables: &HashSet<&'v str>) -> BTreeSet<&'v str> {
    let text = code(ptx);
    let code: Vec<Statement<'_>> = statements(&text)
        .filter(|s| !matches!(opcode_base(s.opcode), "ld" | "ldu" | "prefetch"))
        .collect();
    let register_only = |s: &Statement<'_>| REGISTER_ONLY.contains(&opcode_base(s.opcode));
    // The instructions that read each token: a register-only one all but
    // its destination, anything else everything it names.
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, statement) in code.iter().enumerate() {
        let first: &[&str] = if register_only(statement) {
            &[]
        } else {
            &statement.first
        };
        for &token in first.iter().chain(&statement.rest) {
            readers.entry(token).or_default().push(index);
        }
    }
    // Each token, and the variables whose address it may hold; addresses
    // travel from token to token until none reaches anything new.
    let mut points_into: HashMap<&str, BTreeSet<&'v str>> = HashMap::new();
    let mut pending: Vec<&str> = Vec::new();
    for &token in readers.keys() {
        if let Some(&variable) = variables.get(token) {
            points_into.insert(token, BTreeSet::from([variable]));
            pending.push(token);
        }
    }
    let mut written = BTreeSet::new();
    while let Some(token) = pending.pop() {
        let reached = points_into[token].clone();
        for &index in readers.get(token).into_iter().flatten() {
            let statement = &code[index];
            if !register_only(statement) {
                written.extend(&reached);
                continue;
            }
            for &target in &statement.first {
                let known = points_into.entry(target).or_default();
                let before = known.len();
                known.extend(&reached);
                if known.len() > before {
                    pending.push(target);
                }
            }
        }
    }
    written
}

/// `st` of `st.global.u32`.
fn opcode_base(opcode: &str) -> &str {
    opcode.split('.').next().unwrap_or(opcode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_timer_and_hints_are_read_from_instructions_only() {
        let mut facts = KernelFacts::default();
        facts.read_ptx(
            "\t// mov.u32 %r2, %globaltimer_lo; (a comment)\n\
             \tmov.u32 %r3, %clocks;\n\
             \t@%p1 ld.global.L1::no_allocate.L2::evict_last.f32 %f1, [%rd2];\n\
             \t{ .reg .b64 pol; createpolicy.fractional.L2::evict_last.b64 pol, 1.0; }\n\
             \tld.global.L2::cache_hint.f32 %f2, [%rd2], %rd3;\n\
             \tapplypriority.global.L2::evict_normal [%rd2], 128;\n",
        );
        assert!(!facts.reads_clock, "`%clocks` is an asm block's register");
        assert!(!facts.reads_global_timer, "only a comment names the timer");
        assert_eq!(
            facts.eviction_hints,
            [
                "L1::no_allocate",
                "L2::evict_last",
                "createpolicy",
                "L2::cache_hint"
            ]
        );
        facts.read_ptx("\tmov.u32 %r4, %globaltimer_hi;\n");
        assert!(facts.reads_global_timer);
        // A read spread over two lines by inline asm, after a `.loc` and a label.
        facts.read_ptx("\t.loc\t1 40 2\n$L__BB0_3: @%p2 mov.u64 %rd5,\n\t    %clock64;\n");
        assert!(facts.reads_clock);
    }

    /// The shapes NVRTC 13 gives: a scalar stored by name, an array through
    /// a computed address, a constant table read by index, a declaration
    /// nothing uses, a string handed to `vprintf`, and an inline asm store
    /// spread over two lines, after a label on its own line.
    const PTX: &str = "\
.global .align 4 .u32 HQ = 32;
.global .align 4 .b8 table[16] = {1, 0, 0, 0, 2};
.global .align 4 .b8 ctab[16] = {5, 0, 0, 0, 6};
.global .align 4 .u32 counter = 7;
.global .align 4 .u32 asm_target = 0;
.global .align 1 .b8 $str[7] = {104, 105};
$L__BB0_1:
\t.loc\t1 25 5
\tld.global.u32 \t%r1, [counter];
\tadd.s32 \t%r2, %r1, 1;
\t@%p1 st.global.u32 \t[counter], %r2;
\tmov.u64 \t%rd1, table;
\tadd.s64 \t%rd2, %rd1, %rd9;
\tmov.u64 \t%rd3, ctab;
\tadd.s64 \t%rd4, %rd3, %rd9;
\tld.global.u32 \t%r3, [%rd4];
\tmov.u64 \t%rd5, $str;
\tcvta.global.u64 \t%rd6, %rd5;
\tst.param.b64 \t[param0], %rd6;
\tbra.uni \t$L__BB0_2;
$L__BB0_2:
\t.loc\t1 30 5
\tst.global.u32 \t[%rd2], %r3;
\tmov.u64 \t%rd8, asm_target;
\t// begin inline asm
\tdone: st.global.u32
\t    [%rd8], %r3;
\t// end inline asm
";

    #[test]
    fn only_variables_the_code_may_write_are_written() {
        let variables = HashSet::from(["HQ", "table", "ctab", "counter", "asm_target", "$str"]);
        let written = written_variables(PTX, &variables);
        assert_eq!(
            written,
            BTreeSet::from(["$str", "asm_target", "counter", "table"])
        );
    }

    #[test]
    fn an_address_carried_round_a_loop_still_counts() {
        // The store comes before the move that makes its register an
        // address into `memo`, as in a loop whose back edge carries it.
        let ptx =
            "\tst.global.u32 \t[%rd7], %r1;\n\tmov.u64 \t%rd7, %rd6;\n\tmov.u64 \t%rd6, memo;\n";
        let written = written_variables(ptx, &HashSet::from(["memo"]));
        assert_eq!(written, BTreeSet::from(["memo"]));
    }
}

//! What a cubin's symbol table says: whether a function is defined, and
//! which writable variables live at module scope.
//!
//! A cubin is an ELF file. A `__device__` global or a `static` device
//! variable is an OBJECT symbol in `.nv.global` (uninitialised, NOBITS) or
//! `.nv.global.init` (initialised). `__constant__` data sits in
//! `.nv.constant*`, which kernels cannot write, and shared and local memory
//! last one launch, so those two sections hold everything a kernel can
//! keep from one launch to the next.

use std::collections::HashSet;

use cpp_demangle::{DemangleOptions, Symbol};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::facts::kept_state::{written_variables, ModuleVariable};

const INITIALISED: &str = ".nv.global.init";
const WRITABLE_SECTIONS: [&str; 2] = [".nv.global", INITIALISED];

/// Whether `image` defines a function (a kernel) called `name`.
pub fn defines_function(image: &[u8], name: &str) -> bool {
    object::File::parse(image).is_ok_and(|file| {
        file.symbols().any(|s| {
            s.kind() == SymbolKind::Text
                && s.is_definition()
                && s.name_bytes() == Ok(name.as_bytes())
        })
    })
}

/// The module-scope variables of `image` that a launch may change and the
/// next one find, largest first (then by name), named as the student wrote
/// them. Every uninitialised one counts (a `const` one needs an
/// initialiser); an initialised one counts when `ptx`, the code it was
/// compiled from, may write it (facts::kept_state::written_variables). An
/// image that is not an ELF file has none to list: NVRTC made it, so that
/// never happens for a cubin.
pub fn kept_variables(image: &[u8], ptx: &str) -> Vec<ModuleVariable> {
    let Ok(file) = object::File::parse(image) else {
        return Vec::new();
    };
    let section = |symbol: &object::Symbol<'_, '_>| {
        let section = file.section_by_index(symbol.section_index()?).ok()?;
        section
            .name()
            .ok()
            .filter(|n| WRITABLE_SECTIONS.contains(n))
    };
    let variables: Vec<(&str, u64, bool)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Data)
        // `$str` and its kin are NVVM's own (printf's format strings):
        // C++ as NVRTC reads it has no `$` in a name.
        .filter_map(|s| Some((s.name().ok().filter(|n| !n.starts_with('$'))?, s)))
        .filter_map(|(name, s)| Some((name, s.size(), section(&s)? == INITIALISED)))
        .collect();
    let initialised: HashSet<&str> = variables
        .iter()
        .filter(|(_, _, initialised)| *initialised)
        .map(|(name, _, _)| *name)
        .collect();
    let written = written_variables(ptx, &initialised);
    let mut kept: Vec<ModuleVariable> = variables
        .into_iter()
        .filter(|(name, _, initialised)| !initialised || written.contains(name))
        .map(|(name, bytes, _)| ModuleVariable {
            name: demangled(name),
            bytes,
        })
        .collect();
    kept.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    kept
}

/// The name a C++ symbol was written as: `_ZL9g_counter` is `g_counter`,
/// and a function's `static` is named after its function,
/// `attention_prefill::calls` (`helper(int)::count` for a C++ one, whose
/// parameters tell overloads apart; a template's return type is left
/// out). A name that is not mangled (an `extern "C"` one, or one NVRTC
/// leaves plain) comes back as it is.
fn demangled(raw: &str) -> String {
    let options = DemangleOptions::new().no_return_type();
    Symbol::new(raw)
        .ok()
        .and_then(|symbol| symbol.demangle_with_options(&options).ok())
        .unwrap_or_else(|| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_names_read_as_written() {
        assert_eq!(demangled("_ZL9g_counter"), "g_counter");
        assert_eq!(demangled("_ZN4memo5tableE"), "memo::table");
        assert_eq!(demangled("_ZZ6helperiE5count"), "helper(int)::count");
        assert_eq!(demangled("_ZZ3fooIiEvvE1x"), "foo<int>()::x");
        assert_eq!(
            demangled("_ZZ17attention_prefillE5calls"),
            "attention_prefill::calls"
        );
        assert_eq!(demangled("g_memo"), "g_memo");
        assert_eq!(demangled("_Zbroken"), "_Zbroken");
    }

    #[test]
    fn an_image_that_is_not_elf_defines_nothing() {
        assert!(kept_variables(b"not an ELF file", "").is_empty());
        assert!(!defines_function(b"not an ELF file", "attention_prefill"));
    }
}

//! What a compiled kernel can carry from one launch to the next, and what in
//! its code could make a measurement mean something else: facts for a
//! grader to read beside the integrity badges, never failures.
//!
//! A kernel that writes a module-scope variable keeps that memory between
//! launches, so a second launch may reuse the first one's work (a memo)
//! where every launch is meant to start from nothing. A kernel that reads
//! the clock or the global timer can change what it does with time, and
//! L2 eviction-priority hints change what the next launch finds in L2,
//! which the timing's cold-L2 flush assumes it controls.

mod ptx;

use serde::{Deserialize, Serialize};

pub use self::ptx::written_variables;
use super::byte_size;
use crate::display::line_for_display;

/// One writable variable at module scope: a `__device__` global or a
/// `static` device variable, as the student named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleVariable {
    /// Demangled (`_ZL9g_counter` is `g_counter`); the student's text, so
    /// it goes through `display` wherever a person reads it.
    pub name: String,
    pub bytes: u64,
}

/// What the compiled image and its PTX say about a kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFacts {
    /// The module-scope variables a launch may change and the next one
    /// find, largest first.
    pub kept: Vec<ModuleVariable>,
    /// Reads `%clock`, `%clock64` or `%clock_hi` (`clock()`, `clock64()`).
    pub reads_clock: bool,
    /// Reads `%globaltimer`, `%globaltimer_lo` or `%globaltimer_hi`.
    pub reads_global_timer: bool,
    /// Cache-policy qualifiers the PTX uses (`L2::evict_last`,
    /// `L1::no_allocate`, `L2::cache_hint`, `createpolicy`), each once, in
    /// the order they first appear.
    pub eviction_hints: Vec<String>,
}

/// Variables named one by one in the line; the rest are counted.
const NAMED_AT_MOST: usize = 3;

impl KernelFacts {
    /// Nothing to say: no kept state, no clock, no hints.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The one line, such as "keeps 16.0 MiB in `g_memo` between launches;
    /// reads the global timer; eviction hints: L2::evict_last", with every
    /// name neutralised for display; `None` when there is nothing to say.
    pub fn summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.kept.is_empty() {
            let named: Vec<String> = self
                .kept
                .iter()
                .take(NAMED_AT_MOST)
                .map(|v| format!("{} in `{}`", byte_size(v.bytes), line_for_display(&v.name)))
                .collect();
            let rest = self.kept.len().saturating_sub(NAMED_AT_MOST);
            let more = if rest == 0 {
                String::new()
            } else {
                // Saturating: a stored report may claim any sizes at all.
                let total = self
                    .kept
                    .iter()
                    .fold(0u64, |sum, v| sum.saturating_add(v.bytes));
                format!(" and {rest} more ({} in all)", byte_size(total))
            };
            parts.push(format!("keeps {}{more} between launches", named.join(", ")));
        }
        if self.reads_clock {
            parts.push("reads the clock".to_owned());
        }
        if self.reads_global_timer {
            parts.push("reads the global timer".to_owned());
        }
        if !self.eviction_hints.is_empty() {
            parts.push(format!(
                "eviction hints: {}",
                line_for_display(&self.eviction_hints.join(", "))
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variable(name: &str, bytes: u64) -> ModuleVariable {
        ModuleVariable {
            name: name.into(),
            bytes,
        }
    }

    #[test]
    fn nothing_to_say_is_no_line() {
        assert!(KernelFacts::default().is_empty());
        assert_eq!(KernelFacts::default().summary(), None);
    }

    #[test]
    fn the_line_names_sizes_and_every_fact() {
        let facts = KernelFacts {
            kept: vec![variable("g_memo", 16 << 20)],
            reads_clock: false,
            reads_global_timer: true,
            eviction_hints: vec!["L2::evict_last".into()],
        };
        assert_eq!(
            facts.summary().as_deref(),
            Some(
                "keeps 16.0 MiB in `g_memo` between launches; reads the global timer; \
                 eviction hints: L2::evict_last"
            )
        );
    }

    #[test]
    fn many_variables_are_counted_past_the_first_three() {
        let facts = KernelFacts {
            kept: vec![
                variable("a", 2048),
                variable("b", 16),
                variable("c", 4),
                variable("d", 4),
                variable("e", 0),
            ],
            reads_clock: true,
            ..KernelFacts::default()
        };
        assert_eq!(
            facts.summary().as_deref(),
            Some(
                "keeps 2.0 KiB in `a`, 16 B in `b`, 4 B in `c` and 2 more (2.0 KiB in all) \
                 between launches; reads the clock"
            )
        );
    }

    #[test]
    fn a_hostile_name_is_neutralised_in_the_line() {
        let facts = KernelFacts {
            kept: vec![variable("x\u{1b}]0;owned\u{7}\u{202e}\ny", 4)],
            ..KernelFacts::default()
        };
        let line = facts.summary().expect("a line");
        assert_eq!(line, "keeps 4 B in `x^[]0;owned^G^Jy` between launches");
    }
}

//! Misreadings of a paged batch that no planted bug models, and how the
//! prefill labs' diagnoses name them.
//!
//! A wrong query-to-KV-head map and a wrong context length break rows in
//! patterns no simpler reading separates (both can fail every sequence), so
//! the diagnoses replay them as they replay the planted bugs: each lab's
//! oracle takes a [`Misreading`] as a knob, and an output the knob
//! reproduces is named with its cause. A KV head map is found head by head:
//! the output of query head `h` is compared with the oracle in which every
//! head reads KV head `g`, for each `g` ([`kv_map_found`]). A context length
//! is tried off by one and two either way ([`CONTEXT_SHIFTS`]). When neither
//! reproduces the output, the failing heads' pattern across KV groups still
//! says whether the fault is a KV head's data or a per-query-head index
//! ([`head_pattern`]).

use super::layout::{kv_head_of, GROUP, HKV, HQ};
use crate::lab::experiment::heads;

/// The causes (`cases[].cause`) of the diagnoses below.
pub mod cause {
    /// A query head reads another KV head (the word the first lab uses too).
    pub const KV_HEAD_MAPPING: &str = "kv-head-mapping";
    /// Every sequence's context is taken a key or two too short or too long.
    pub const CONTEXT_LENGTH: &str = "context-length";
}

/// A way a kernel can misread the batch that no planted bug models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misreading {
    /// Query head `h` reads KV head `map[h]` (the contract: `h / 4`).
    KvHeads([u8; HQ]),
    /// Every sequence's context taken as its true length plus this shift
    /// (within `0..=seqLen`), everywhere the kernel uses it: the walk over
    /// cached keys, the query positions, where the new tokens' keys begin.
    ContextShift(i8),
}

/// The context shifts the diagnoses try, likeliest first.
pub const CONTEXT_SHIFTS: [i8; 4] = [-1, 1, -2, 2];

impl Misreading {
    /// Query heads reading KV heads by `map`.
    pub fn kv_map(map: impl Fn(usize) -> usize) -> Misreading {
        Misreading::KvHeads(std::array::from_fn(|h| map(h) as u8))
    }

    /// Every query head reading KV head `kv_head`.
    pub fn all_read(kv_head: usize) -> Misreading {
        Misreading::kv_map(|_| kv_head)
    }

    /// The KV head query head `head` reads under `misreading` (the contract's without one).
    pub fn kv_head(misreading: Option<Misreading>, head: usize) -> usize {
        match misreading {
            Some(Misreading::KvHeads(map)) => map[head] as usize,
            _ => kv_head_of(head),
        }
    }

    /// The context a sequence of `context` cached and `new` new tokens is
    /// taken to have under `misreading`.
    pub fn context(misreading: Option<Misreading>, context: usize, new: usize) -> usize {
        match misreading {
            Some(Misreading::ContextShift(shift)) => context
                .saturating_add_signed(isize::from(shift))
                .min(context + new),
            _ => context,
        }
    }
}

/// The KV head each query head's output is attention over, from
/// `reads(head, kv_head)`: whether the kernel's output of `head` agrees, on
/// every replayed row, with the oracle in which every head reads `kv_head`.
/// `None` when some head agrees with no KV head (the output is wrong in
/// another way) or when every head reads its own (nothing to name).
pub fn kv_map_found(reads: impl Fn(usize, usize) -> bool) -> Option<[u8; HQ]> {
    let mut map = [0u8; HQ];
    for (head, source) in map.iter_mut().enumerate() {
        let own = kv_head_of(head);
        let found = match reads(head, own) {
            true => own,
            false => (0..HKV).find(|&g| g != own && reads(head, g))?,
        };
        *source = found as u8;
    }
    (0..HQ)
        .any(|h| map[h] as usize != kv_head_of(h))
        .then_some(map)
}

/// A query-to-KV-head map, as a formula of the query head.
type HeadMap = fn(usize) -> usize;

/// The wrong maps a kernel writes most often, by the formula it uses.
const KNOWN_MAPS: [(&str, HeadMap); 3] = [
    ("h % 8", |h| h % HKV),
    ("h / 8", |h| h / HKV),
    ("h % 4", |h| h % GROUP),
];

/// The diagnosis of a query-to-KV-head map that is not `h / 4`.
pub fn kv_map_line(map: &[u8; HQ]) -> String {
    let wrong: Vec<usize> = (0..HQ)
        .filter(|&h| map[h] as usize != kv_head_of(h))
        .collect();
    let examples: Vec<String> = wrong
        .iter()
        .take(3)
        .map(|&h| format!("head {h} reads KV head {}, not {}", map[h], kv_head_of(h)))
        .collect();
    let formula = KNOWN_MAPS
        .iter()
        .find(|(_, f)| (0..HQ).all(|h| map[h] as usize == f(h)))
        .map(|(name, _)| format!("; every head reads KV head {name}"))
        .unwrap_or_default();
    format!(
        "query heads read the wrong KV head: {} of {HQ} heads are exactly the attention over \
         another KV head's keys and values ({}{formula}), and the heads that pass read their \
         own; query head h reads KV head h / {GROUP}, so the {GROUP} heads of a group share one",
        wrong.len(),
        examples.join(", ")
    )
}

/// The diagnosis of a context length off by `shift`, shown on the failing
/// row `row` of sequence `seq`, whose true context is `context`.
pub fn context_line(shift: i8, row: usize, seq: usize, context: usize) -> String {
    let taken = context.saturating_add_signed(isize::from(shift));
    let effect = match shift {
        -1 => format!(
            "its last cached key ({}) is never read",
            context.saturating_sub(1)
        ),
        s if s < 0 => format!(
            "its last {} cached keys ({} to {}) are never read",
            -s,
            taken,
            context.saturating_sub(1)
        ),
        1 => format!("slot {context}, past the context, is read from the cache as a key"),
        s => format!(
            "{s} slots past the context ({context} to {}) are read from the cache as keys",
            taken - 1
        ),
    };
    let keys = match shift.unsigned_abs() {
        1 => "one key".to_owned(),
        n => format!("{n} keys"),
    };
    let how = if shift < 0 { "shorter" } else { "longer" };
    format!(
        "the context length is off by {shift:+}: the failing rows are exactly what a kernel \
         computes that takes every context {keys} {how} than it is (row {row}, sequence {seq}: \
         context {context} taken as {taken}, so {effect}); the context is seqLen[s] - \
         (qStart[s+1] - qStart[s]), and the walk over cached keys stops just below it"
    )
}

/// What the failing query heads say, when no model reproduced the output:
/// whole KV groups failing alike point at those KV heads' keys or values,
/// heads of one group failing differently at something per query head.
/// `None` when every head fails or none does.
pub fn head_pattern(failing: &[bool; HQ]) -> Option<String> {
    let count = failing.iter().filter(|&&f| f).count();
    if count == 0 || count == HQ {
        return None;
    }
    let mask = |heads: &mut dyn Iterator<Item = usize>| heads.fold(0u32, |m, h| m | 1 << h);
    let group_fails = |g: usize| (g * GROUP..(g + 1) * GROUP).filter(|&h| failing[h]).count();
    let split = (0..HKV).find(|&g| (1..GROUP).contains(&group_fails(g)));
    Some(match split {
        None => {
            let groups: Vec<String> = (0..HKV)
                .filter(|&g| group_fails(g) == GROUP)
                .map(|g| g.to_string())
                .collect();
            format!(
                "only the query heads of KV head{} {} fail, all {GROUP} of each alike ({}), while \
                 the other KV heads' query heads pass: the keys or values of those KV heads are \
                 read wrong (the KV head term of the kCache, vCache, kNew and vNew indices)",
                if groups.len() == 1 { "" } else { "s" },
                groups.join(", "),
                heads(mask(&mut (0..HQ).filter(|&h| failing[h])), HQ)
            )
        }
        Some(g) => {
            let members = g * GROUP..(g + 1) * GROUP;
            format!(
                "query heads that share a KV head fail differently (KV head {g}: {} fail, {} \
                 pass): the fault is per query head, in the map to KV heads (h / {GROUP}) or in \
                 the per-head index of q or out",
                heads(mask(&mut members.clone().filter(|&h| failing[h])), HQ),
                heads(mask(&mut members.filter(|&h| !failing[h])), HQ)
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_is_found_head_by_head_and_named_by_its_formula() {
        let modulo = |h: usize| h % HKV;
        let map = kv_map_found(|h, g| g == modulo(h)).expect("a wrong map");
        assert_eq!(Misreading::KvHeads(map), Misreading::kv_map(modulo));
        let line = kv_map_line(&map);
        assert!(line.contains("every head reads KV head h % 8"), "{line}");
        assert!(line.contains("head 1 reads KV head 1, not 0"), "{line}");
        // The contract's own map, or a head that matches no KV head, is no finding.
        assert_eq!(kv_map_found(|h, g| g == kv_head_of(h)), None);
        assert_eq!(kv_map_found(|h, g| h != 5 && g == modulo(h)), None);
        // An ad hoc map is named by its heads alone.
        let swapped = kv_map_found(|h, g| g == if h < 4 { 1 } else { kv_head_of(h) }).unwrap();
        let line = kv_map_line(&swapped);
        assert!(
            line.starts_with("query heads read the wrong KV head: 4 of 32"),
            "{line}"
        );
        assert!(!line.contains("every head reads"), "{line}");
    }

    #[test]
    fn a_shifted_context_stays_within_the_sequence() {
        let shift = |s| Some(Misreading::ContextShift(s));
        assert_eq!(Misreading::context(shift(-1), 40, 3), 39);
        assert_eq!(Misreading::context(shift(-2), 1, 3), 0);
        assert_eq!(Misreading::context(shift(2), 40, 1), 41);
        assert_eq!(Misreading::context(None, 40, 1), 40);
        assert_eq!(Misreading::kv_head(shift(1), 9), 2);
        let line = context_line(-1, 7, 2, 40);
        assert!(
            line.contains("off by -1") && line.contains("key (39) is never read"),
            "{line}"
        );
        let line = context_line(2, 7, 2, 40);
        assert!(
            line.contains("2 slots past the context (40 to 41)"),
            "{line}"
        );
    }

    #[test]
    fn failing_heads_tell_a_kv_heads_data_from_a_per_head_fault() {
        let mut failing = [false; HQ];
        failing[8..12].fill(true);
        let line = head_pattern(&failing).expect("a pattern");
        assert!(
            line.starts_with("only the query heads of KV head 2 fail"),
            "{line}"
        );
        assert!(line.contains("heads 8-11"), "{line}");
        failing[9] = false;
        let line = head_pattern(&failing).expect("a pattern");
        assert!(
            line.contains("KV head 2: heads 8, 10-11 fail, head 9 pass"),
            "{line}"
        );
        assert_eq!(head_pattern(&[true; HQ]), None);
        assert_eq!(head_pattern(&[false; HQ]), None);
    }
}

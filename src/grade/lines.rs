//! The line profile's reading: per-instruction samples and counts summed
//! per line of the student's file, with each line's share of the samples,
//! its main stall reason in words a student understands, and the memory
//! findings that apply to it.
//!
//! What comes in is what a collector reads per instruction (PC Sampling's
//! warp stall samples by reason, SASS Metrics' counts) and, for each
//! instruction, the line it is charged to (`gpu::compile::line_table`).
//! Pure: no GPU, no file, no lab.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a collector read of one SASS instruction, by its byte offset in
/// the kernel's function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionReading {
    pub offset: u64,
    /// Warp stall samples by CUPTI's reason name, as the GPU reported them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<(String, u64)>,
    #[serde(default)]
    pub counts: InstructionCounts,
}

/// Per-instruction counts (SASS Metrics), zero where not collected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionCounts {
    pub executed: u64,
    pub shared_wavefronts: u64,
    /// The wavefronts a conflict-free access of the same bytes needs.
    pub shared_wavefronts_ideal: u64,
    pub global_sectors: u64,
    /// The sectors a fully coalesced access of the same bytes needs.
    pub global_sectors_ideal: u64,
    pub divergent_branches: u64,
}

impl InstructionCounts {
    fn add(&mut self, other: &InstructionCounts) {
        self.executed += other.executed;
        self.shared_wavefronts += other.shared_wavefronts;
        self.shared_wavefronts_ideal += other.shared_wavefronts_ideal;
        self.global_sectors += other.global_sectors;
        self.global_sectors_ideal += other.global_sectors_ideal;
        self.divergent_branches += other.divergent_branches;
    }
}

/// Where an instruction's cost goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKey {
    /// A line of the student's file.
    Student(u32),
    /// flashprof's own code (the prelude, a body's wrapper).
    Own,
}

/// One line's reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineReading {
    pub line: LineKey,
    pub samples: u64,
    /// Of every sample of the kernel, 0 to 1.
    pub share: f64,
    /// Samples by reason name, most first (ties by name).
    pub stalls: Vec<(String, u64)>,
    pub counts: InstructionCounts,
    /// The line's text in the student's file, trimmed and cut short (empty
    /// for flashprof's own code, or where the caller has no text).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// A kernel's line profile: its lines, hottest first, and how it was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineProfile {
    pub chip: String,
    pub total_samples: u64,
    pub dropped_samples: u64,
    /// Samples were taken every 2^this many cycles.
    pub period_log2: u32,
    /// The profile's own launches: unprofiled, sampled, counted.
    pub collect_ms: f64,
    /// Of which the sampled launch and the counted launch, each with its
    /// API's setup and reading (0 in profiles recorded before they were kept).
    #[serde(default)]
    pub sampled_ms: f64,
    #[serde(default)]
    pub counted_ms: f64,
    /// Where the rest of the lines phase went (0 in profiles recorded
    /// before they were kept): waiting for the line worker started ahead
    /// to be ready, CUPTI's line APIs set up in the worker, the whole
    /// request in the worker (the launches, CUPTI's setup, the inputs and
    /// audits), and charging the samples to lines here.
    #[serde(default)]
    pub waited_ms: f64,
    #[serde(default)]
    pub setup_ms: f64,
    #[serde(default)]
    pub worker_ms: f64,
    #[serde(default)]
    pub charge_ms: f64,
    /// The lines phase until its samples were charged to lines: what the
    /// source view waits before it shows where the time goes (0 in
    /// profiles recorded before the counts came in a second step).
    #[serde(default)]
    pub heat_ms: f64,
    /// Why the per-instruction counts (and so the memory findings) are not
    /// in this profile: still being taken, stopped for a newer save, or
    /// failed. `None`: they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_missing: Option<String>,
    pub lines: Vec<LineReading>,
    /// The lab starter's profile on the same inputs, for comparison (or
    /// why there is none); absent inside a starter's own profile and in
    /// profiles recorded before it was collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starter: Option<Result<Box<LineProfile>, String>>,
}

/// The most of a line's text a profile keeps.
const SOURCE_CHARS: usize = 72;

/// `line` of `text` as a profile shows it: trimmed, cut to a bound.
pub fn source_of(text: &str, line: LineKey) -> String {
    let LineKey::Student(number) = line else {
        return String::new();
    };
    let trimmed = text
        .lines()
        .nth((number as usize).saturating_sub(1))
        .unwrap_or("")
        .trim();
    match trimmed.char_indices().nth(SOURCE_CHARS) {
        Some((cut, _)) => format!("{}...", &trimmed[..cut]),
        None => trimmed.to_owned(),
    }
}

impl LineReading {
    /// The reason with the most samples, if any were taken.
    pub fn main_reason(&self) -> Option<&str> {
        self.stalls.first().map(|(name, _)| name.as_str())
    }

    /// The memory findings that apply, in words: bank conflicts and
    /// uncoalesced global access, each only when its ideal is known and
    /// the excess is at least half again.
    pub fn findings(&self) -> Vec<String> {
        let c = &self.counts;
        let mut found = Vec::new();
        if let Some(ratio) = excess(c.shared_wavefronts, c.shared_wavefronts_ideal) {
            found.push(format!(
                "{}-way bank conflict: {ratio:.1}x the wavefronts a conflict-free access needs",
                ratio.round() as u64
            ));
        }
        if let Some(ratio) = excess(c.global_sectors, c.global_sectors_ideal) {
            found.push(format!(
                "{ratio:.1}x the global sectors a coalesced access needs"
            ));
        }
        found
    }
}

/// `actual / ideal` when both are known and it is 1.5 or more.
fn excess(actual: u64, ideal: u64) -> Option<f64> {
    (ideal > 0)
        .then(|| actual as f64 / ideal as f64)
        .filter(|ratio| *ratio >= 1.5)
}

/// One reading per instruction from what the two collections read of
/// it: PC Sampling's samples and SASS Metrics' counts, by offset.
pub fn merge(
    sampled: Vec<InstructionReading>,
    counted: Vec<(u64, InstructionCounts)>,
) -> Vec<InstructionReading> {
    let mut by_offset: BTreeMap<u64, InstructionReading> = sampled
        .into_iter()
        .map(|reading| (reading.offset, reading))
        .collect();
    for (offset, counts) in counted {
        by_offset
            .entry(offset)
            .or_insert_with(|| InstructionReading {
                offset,
                ..InstructionReading::default()
            })
            .counts
            .add(&counts);
    }
    by_offset.into_values().collect()
}

/// Sums `readings` per line, `charge` telling each instruction's line
/// (`None`: the instruction is not placed, and is left out). Lines come
/// hottest first (then by line).
pub fn by_line(
    readings: &[InstructionReading],
    charge: impl Fn(u64) -> Option<LineKey>,
) -> Vec<LineReading> {
    let mut lines: BTreeMap<LineKey, (BTreeMap<String, u64>, InstructionCounts)> = BTreeMap::new();
    for reading in readings {
        let Some(key) = charge(reading.offset) else {
            continue;
        };
        let (stalls, counts) = lines.entry(key).or_default();
        for (reason, samples) in &reading.stalls {
            *stalls.entry(reason.clone()).or_default() += samples;
        }
        counts.add(&reading.counts);
    }
    let total: u64 = lines.values().flat_map(|(stalls, _)| stalls.values()).sum();
    let mut rows: Vec<LineReading> = lines
        .into_iter()
        .map(|(line, (stalls, counts))| {
            let samples = stalls.values().sum();
            let mut stalls: Vec<(String, u64)> =
                stalls.into_iter().filter(|(_, n)| *n > 0).collect();
            stalls.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            LineReading {
                line,
                samples,
                share: if total == 0 {
                    0.0
                } else {
                    samples as f64 / total as f64
                },
                stalls,
                counts,
                source: String::new(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.line.cmp(&b.line)));
    rows
}

/// Whether PC Sampling's `name` is a stall reason to count. It also
/// reports two counters of its own (`smsp__pcsamp_sample_count`,
/// `smsp__pcsamp_samples_data_dropped`), and each reason again as
/// `..._not_issued`, the samples of it where no instruction issued: a
/// subset of the reason's own samples, so counting both would count those
/// twice (Nsight Compute shows them as two columns, "All Samples" and
/// "Not-issued Samples").
pub fn is_stall_reason(name: &str) -> bool {
    name.starts_with("smsp__pcsamp_warps_issue_stalled_") && !name.ends_with("_not_issued")
}

/// A reason as a profile shows it: its words, then CUPTI's name without
/// the common prefix, `waiting on shared memory (short_scoreboard)`.
pub fn reason_shown(name: &str) -> String {
    let short = name
        .strip_prefix("smsp__pcsamp_warps_issue_stalled_")
        .unwrap_or(name);
    format!("{} ({short})", reason_words(name))
}

/// A stall reason in words a student understands, from CUPTI's name
/// (`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, with or without
/// `_not_issued`); an unknown name is given back as it came.
pub fn reason_words(name: &str) -> String {
    let reason = name
        .strip_prefix("smsp__pcsamp_warps_issue_stalled_")
        .unwrap_or(name);
    let reason = reason.strip_suffix("_not_issued").unwrap_or(reason);
    let words = match reason {
        "long_scoreboard" => "waiting on a global load",
        "short_scoreboard" => "waiting on shared memory",
        "barrier" => "at a barrier",
        "membar" => "at a memory fence",
        "math_pipe_throttle" => "the math pipe is full",
        "mio_throttle" => "the shared-memory queue is full",
        "lg_throttle" => "the global-memory queue is full",
        "tex_throttle" => "the texture queue is full",
        "wait" => "waiting out a fixed latency",
        "not_selected" => "ready, another warp went first",
        "selected" => "issuing",
        "no_instructions" => "waiting for instructions",
        "imc_miss" => "waiting on the constant cache",
        "drain" => "draining stores at exit",
        "sleeping" => "sleeping",
        "branch_resolving" => "resolving a branch",
        "dispatch_stall" => "the dispatcher stalled",
        "misc" => "other",
        "warpgroup_arrive" => "waiting on a warpgroup MMA",
        _ => return name.to_owned(),
    };
    words.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(
        offset: u64,
        stalls: &[(&str, u64)],
        counts: InstructionCounts,
    ) -> InstructionReading {
        InstructionReading {
            offset,
            stalls: stalls.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            counts,
        }
    }

    const LONG: &str = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
    const SHORT: &str = "smsp__pcsamp_warps_issue_stalled_short_scoreboard";

    #[test]
    fn instructions_are_summed_per_line_hottest_first_with_shares() {
        let readings = [
            reading(0x00, &[(LONG, 30)], InstructionCounts::default()),
            reading(
                0x10,
                &[(LONG, 10), (SHORT, 5)],
                InstructionCounts::default(),
            ),
            reading(0x20, &[(SHORT, 50)], InstructionCounts::default()),
            reading(0x30, &[(SHORT, 5)], InstructionCounts::default()),
            // Not placed by the table: left out of every share.
            reading(0x40, &[(LONG, 1000)], InstructionCounts::default()),
        ];
        let charge = |offset: u64| match offset {
            0x00 | 0x10 => Some(LineKey::Student(7)),
            0x20 => Some(LineKey::Student(9)),
            0x30 => Some(LineKey::Own),
            _ => None,
        };
        let rows = by_line(&readings, charge);
        let lines: Vec<LineKey> = rows.iter().map(|r| r.line).collect();
        assert_eq!(
            lines,
            [LineKey::Student(9), LineKey::Student(7), LineKey::Own]
        );
        assert_eq!(rows[1].samples, 45);
        assert!((rows[1].share - 0.45).abs() < 1e-12);
        assert_eq!(rows[1].main_reason(), Some(LONG));
        assert_eq!(
            rows[1].stalls,
            [(LONG.to_owned(), 40), (SHORT.to_owned(), 5)]
        );
        let total: f64 = rows.iter().map(|r| r.share).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn samples_and_counts_of_one_instruction_meet_in_one_reading() {
        let counts = InstructionCounts {
            executed: 7,
            ..InstructionCounts::default()
        };
        let merged = merge(
            vec![reading(0x10, &[(LONG, 3)], InstructionCounts::default())],
            vec![(0x10, counts), (0x20, counts)],
        );
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].stalls, [(LONG.to_owned(), 3)]);
        assert_eq!(merged[0].counts.executed, 7);
        assert_eq!((merged[1].offset, merged[1].counts.executed), (0x20, 7));
        assert!(merged[1].stalls.is_empty());
    }

    #[test]
    fn a_conflicted_shared_access_and_an_uncoalesced_load_are_named() {
        let conflicted = InstructionCounts {
            executed: 1024,
            shared_wavefronts: 32 * 1024,
            shared_wavefronts_ideal: 1024,
            ..InstructionCounts::default()
        };
        let strided = InstructionCounts {
            executed: 1024,
            global_sectors: 29 * 1024,
            global_sectors_ideal: 10 * 1024,
            ..InstructionCounts::default()
        };
        let clean = InstructionCounts {
            executed: 1024,
            shared_wavefronts: 1100,
            shared_wavefronts_ideal: 1024,
            global_sectors: 4096,
            global_sectors_ideal: 4096,
            ..InstructionCounts::default()
        };
        let readings = [
            reading(0x00, &[(SHORT, 3)], conflicted),
            reading(0x10, &[(LONG, 2)], strided),
            reading(0x20, &[(LONG, 1)], clean),
        ];
        let rows = by_line(&readings, |offset| {
            Some(LineKey::Student(offset as u32 / 16 + 1))
        });
        let findings = |line: u32| {
            rows.iter()
                .find(|r| r.line == LineKey::Student(line))
                .map(LineReading::findings)
                .expect("a row")
        };
        assert_eq!(
            findings(1),
            ["32-way bank conflict: 32.0x the wavefronts a conflict-free access needs"]
        );
        assert_eq!(
            findings(2),
            ["2.9x the global sectors a coalesced access needs"]
        );
        assert!(findings(3).is_empty(), "{:?}", findings(3));
        // Without an ideal, nothing is claimed.
        let unknown = InstructionCounts {
            shared_wavefronts: 99,
            ..InstructionCounts::default()
        };
        let rows = by_line(&[reading(0, &[], unknown)], |_| Some(LineKey::Own));
        assert!(rows[0].findings().is_empty());
    }

    #[test]
    fn reasons_read_as_words_and_an_unknown_name_as_it_came() {
        assert_eq!(reason_words(LONG), "waiting on a global load");
        assert_eq!(
            reason_words("smsp__pcsamp_warps_issue_stalled_barrier_not_issued"),
            "at a barrier"
        );
        assert_eq!(
            reason_words("smsp__pcsamp_something_new"),
            "smsp__pcsamp_something_new"
        );
    }

    /// Every reason name the H100 reported in the spike (docs/LINE-PROFILE.md)
    /// has words of its own; the not-issued subsets and the two counters it
    /// also reports are not counted as reasons.
    #[test]
    fn every_reason_the_h100_reported_has_words() {
        let names = include_str!("../../tests/fixtures/line-profile/gh100-stall-reasons.txt");
        let reasons: Vec<&str> = names.lines().filter(|n| is_stall_reason(n)).collect();
        // 19 reasons, each also as its not-issued subset, and two counters.
        assert_eq!(reasons.len(), 19, "{names}");
        assert_eq!(names.lines().count(), 40);
        for name in names.lines().filter(|n| n.contains("_stalled_")) {
            assert_ne!(reason_words(name), name, "{name} has no words");
        }
    }
}

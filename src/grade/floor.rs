//! The physical floor: the shortest time in which any kernel could do a
//! problem's work on a GPU, below which a measured median is impossible.
//!
//! Three times bound every launch from below: its compulsory DRAM bytes
//! over the GPU's DRAM bandwidth (only when L2 was evicted before it), its
//! flops over the fastest dense tensor rate of any data type the GPU has,
//! and an empty launch timed in the same run. The rates are upper bounds no
//! kernel can beat (the caller takes the larger of the datasheet-style
//! figure and what it measured, with headroom), so no honest kernel however
//! close to a roof is under the floor, and a kernel that skips its work is.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::roofline::Work;

/// What the GPU can do at most, as the floor needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// DRAM bytes a second no kernel exceeds.
    pub dram_bytes_per_s: f64,
    /// Dense tensor-core FLOP a second of the fastest data type (FP8 on Hopper).
    pub tensor_flops_per_s: f64,
    /// The fastest empty launch of the same run, in milliseconds.
    pub empty_launch_ms: f64,
}

/// Which of the three times set the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FloorTerm {
    DramBytes,
    TensorFlops,
    EmptyLaunch,
}

/// The floor of one problem on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub ms: f64,
    pub term: FloorTerm,
    pub work: Work,
    pub ceilings: Ceilings,
    /// Whether the DRAM term counted (L2 was evicted before every timed launch).
    pub dram_counted: bool,
}

impl Floor {
    /// The floor of `work` under `ceilings`; without `cold_l2` the inputs may
    /// come from L2, so the DRAM term is left out.
    pub fn of(work: Work, ceilings: Ceilings, cold_l2: bool) -> Self {
        let dram_ms = work.compulsory_bytes as f64 / ceilings.dram_bytes_per_s * 1e3;
        let tensor_ms = work.flops / ceilings.tensor_flops_per_s * 1e3;
        let mut terms = vec![
            (FloorTerm::TensorFlops, tensor_ms),
            (FloorTerm::EmptyLaunch, ceilings.empty_launch_ms),
        ];
        if cold_l2 {
            terms.push((FloorTerm::DramBytes, dram_ms));
        }
        let (term, ms) = terms.into_iter().filter(|(_, ms)| ms.is_finite()).fold(
            (FloorTerm::EmptyLaunch, 0.0),
            |best, next| {
                if next.1 > best.1 {
                    next
                } else {
                    best
                }
            },
        );
        Self {
            ms,
            term,
            work,
            ceilings,
            dram_counted: cold_l2,
        }
    }

    /// `Some` when `median_ms` is below the floor: the sentence that says so.
    pub fn judge(&self, median_ms: f64) -> Option<Impossible> {
        // A median that is no number is no possible time either.
        let possible = median_ms.partial_cmp(&self.ms).is_some_and(|o| o.is_ge());
        (!possible).then(|| Impossible {
            median_ms,
            floor: self.clone(),
        })
    }

    /// How the floor's term reads: "302.0 MB of compulsory bytes at 5.41 TB/s".
    pub fn term_text(&self) -> String {
        match self.term {
            FloorTerm::DramBytes => format!(
                "{:.1} MB of compulsory DRAM bytes at {:.2} TB/s",
                self.work.compulsory_bytes as f64 / 1e6,
                self.ceilings.dram_bytes_per_s / 1e12
            ),
            FloorTerm::TensorFlops => format!(
                "{:.1} GFLOP at the fastest tensor rate, {:.0} TFLOP/s",
                self.work.flops / 1e9,
                self.ceilings.tensor_flops_per_s / 1e12
            ),
            FloorTerm::EmptyLaunch => "an empty launch of the same run".to_string(),
        }
    }
}

/// A median no kernel can reach: the launch cannot have done its work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impossible {
    pub median_ms: f64,
    pub floor: Floor,
}

impl fmt::Display for Impossible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "impossible timing: the median {:.4} ms is below the physical floor of {:.4} ms \
             ({})",
            self.median_ms,
            self.floor.ms,
            self.floor.term_text()
        )
    }
}

/// A profiled launch (L2 evicted before it) that read fewer DRAM bytes than
/// half of its compulsory input bytes did not read its inputs: the sentence
/// that says so, or `None`.
pub fn too_few_dram_reads(work: Work, dram_bytes_read: f64) -> Option<String> {
    let inputs = work.compulsory_bytes.saturating_sub(work.output_bytes) as f64;
    (dram_bytes_read < inputs / 2.0).then(|| {
        format!(
            "impossible profile: the launch read {:.1} MB from DRAM, less than half of its \
             {:.1} MB of inputs, with L2 evicted before it",
            dram_bytes_read / 1e6,
            inputs / 1e6
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORK: Work = Work {
        flops: 5.0e10,
        compulsory_bytes: 40_000_000,
        output_bytes: 16_000_000,
        tensor_roof: None,
    };

    fn h200() -> Ceilings {
        Ceilings {
            dram_bytes_per_s: 5.4e12,
            tensor_flops_per_s: 1.98e15,
            empty_launch_ms: 0.004,
        }
    }

    #[test]
    fn the_largest_term_sets_the_floor_and_names_itself() {
        let floor = Floor::of(WORK, h200(), true);
        assert_eq!(floor.term, FloorTerm::TensorFlops);
        assert!((floor.ms - 5.0e10 / 1.98e15 * 1e3).abs() < 1e-12);
        let slow = floor.judge(0.9);
        assert_eq!(slow, None, "the reference's 0.9 ms is possible");
        assert!(floor.judge(f64::NAN).is_some(), "no number is no time");
        let fast = floor.judge(0.004).expect("a skipped launch is impossible");
        assert!(fast.to_string().contains("0.0040 ms"), "{fast}");
        assert!(fast.to_string().contains("fastest tensor rate"), "{fast}");
        // A memory-bound problem: the bytes decide.
        let bytes = Work { flops: 1e6, ..WORK };
        assert_eq!(Floor::of(bytes, h200(), true).term, FloorTerm::DramBytes);
        // With L2 left warm the bytes may come from L2: the DRAM term is off.
        assert_eq!(Floor::of(bytes, h200(), false).term, FloorTerm::EmptyLaunch);
    }

    #[test]
    fn a_profile_that_read_too_few_bytes_is_impossible() {
        assert_eq!(too_few_dram_reads(WORK, 20e6), None);
        let text = too_few_dram_reads(WORK, 5e6).unwrap();
        assert!(
            text.contains("5.0 MB") && text.contains("24.0 MB"),
            "{text}"
        );
    }
}

//! The inputs of the shape a worker times, counts and profiles lines on,
//! drawn once per case and seed and kept. A paged lab's are hundreds of
//! megabytes made on the CPU in about a second, and a check asks for them
//! up to three times (timing, counters, line profile), a TUI session again
//! on every save. A draw is a function of its case and seed alone, so the
//! kept values are the ones a new draw would give; each timed launch still
//! gets fresh values drawn on the GPU from its own seed, on a workspace
//! uploaded for that timing alone (docs/INTEGRITY.md).
//!
//! When the caller names the shape as it says the lab (`ChooseLab`), the
//! draw starts on a thread of its own, beside the student's build and
//! cases, so the first timing finds it made.

use std::thread::JoinHandle;

use crate::gpu::device::GpuError;
use crate::lab::definition::{CaseData, LabCase, LabRef};
use crate::protocol::WireCase;

/// The last shape's inputs, made or being made.
#[derive(Default)]
pub(super) struct DrawnInputs {
    kept: Option<(Key, Drawing)>,
}

/// What a draw is a function of.
type Key = (WireCase, u64);

enum Drawing {
    Ahead(JoinHandle<Result<CaseData, String>>),
    Done(CaseData),
}

impl DrawnInputs {
    /// Starts drawing `case` at `seed` on a thread, unless those are kept
    /// or being drawn already. The draw uses half the cores, so the
    /// student's build and cases, whose watchdogs count wall time, keep the
    /// rest. Another shape's draw still running is left to finish on its
    /// own: only one shape is kept. Where no thread can be started, nothing
    /// is drawn ahead.
    pub(super) fn ahead(&mut self, lab: LabRef, case: LabCase, seed: u64) {
        let key = (WireCase::from(&case), seed);
        if !keepable(&case) || self.holds(&key) {
            return;
        }
        // Only one shape is kept: the old one's memory goes first.
        self.kept = None;
        let half = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
        let drawing = std::thread::Builder::new()
            .name("draw-ahead".into())
            .spawn(move || {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(half).build();
                match pool {
                    Ok(pool) => pool.install(|| draw(lab, &case, seed)),
                    Err(_) => draw(lab, &case, seed),
                }
            });
        if let Ok(drawing) = drawing {
            self.kept = Some((key, Drawing::Ahead(drawing)));
        }
    }

    /// `case`'s inputs at `seed`: the kept ones when they are those
    /// (waiting for a draw ahead to end), else drawn now and kept. A draw
    /// ahead that failed or panicked is drawn again now; a draw that fails
    /// now is not kept, so the next request tries again.
    pub(super) fn get(
        &mut self,
        lab: LabRef,
        case: &LabCase,
        seed: u64,
    ) -> Result<CaseData, GpuError> {
        let draw_now = || draw(lab, case, seed);
        if !keepable(case) {
            return draw_now().map_err(GpuError::message);
        }
        let key = (WireCase::from(case), seed);
        let drawn = match self.kept.take() {
            Some((kept, Drawing::Done(data))) if kept == key => Ok(data),
            Some((kept, Drawing::Ahead(drawing))) if kept == key => drawing
                .join()
                .ok()
                .and_then(Result::ok)
                .map_or_else(draw_now, Ok),
            other => {
                // Another shape's inputs are freed before these are drawn.
                drop(other);
                draw_now()
            }
        }
        .map_err(GpuError::message)?;
        self.kept = Some((key, Drawing::Done(drawn.clone())));
        Ok(drawn)
    }

    /// Whether nothing is kept or being drawn.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.kept.is_none()
    }

    fn holds(&self, key: &Key) -> bool {
        self.kept.as_ref().is_some_and(|(kept, _)| kept == key)
    }
}

/// `case`'s inputs at `seed`, drawn by `lab`, which must be its lab.
fn draw(lab: LabRef, case: &LabCase, seed: u64) -> Result<CaseData, String> {
    lab.generate(case, seed).map_err(|e| e.to_string())
}

/// Whether a case's inputs may be kept: not when it reads its own tensors,
/// whose files may change between requests.
fn keepable(case: &LabCase) -> bool {
    case.own_tensors.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::flash_prefill::FLASH_PREFILL;

    fn small_shape() -> LabCase {
        let overrides = [("chunk".into(), "24".into()), ("prefix".into(), "8".into())];
        FLASH_PREFILL
            .timing_case(&overrides)
            .expect("a small timing shape")
    }

    /// Whether two draws carry the same launch arguments (a flash shape
    /// has no NaN, so equality is exact).
    fn same(a: &CaseData, b: &CaseData) -> bool {
        a.inputs.args() == b.inputs.args()
    }

    #[test]
    fn inputs_drawn_ahead_or_kept_are_the_ones_a_new_draw_gives() {
        let case = small_shape();
        let fresh = case.generate(3).expect("drawn");
        let mut drawn = DrawnInputs::default();
        drawn.ahead(FLASH_PREFILL, case.clone(), 3);
        let ahead = drawn.get(FLASH_PREFILL, &case, 3).expect("joined");
        let kept = drawn.get(FLASH_PREFILL, &case, 3).expect("kept");
        assert!(same(&ahead, &fresh) && same(&kept, &fresh));
        // Kept, not drawn again: the same allocation.
        assert!(std::sync::Arc::ptr_eq(&ahead.inputs, &kept.inputs));
        // Another seed is another draw, which replaces the kept one.
        let other = drawn.get(FLASH_PREFILL, &case, 4).expect("drawn");
        assert!(!same(&other, &fresh));
        assert!(!std::sync::Arc::ptr_eq(&other.inputs, &kept.inputs));
        assert!(drawn.holds(&(WireCase::from(&case), 4)));
        assert!(!drawn.holds(&(WireCase::from(&case), 3)));
    }

    #[test]
    fn a_case_with_its_own_tensors_is_drawn_every_time_and_never_kept() {
        let mut case = small_shape();
        case.own_tensors = Some("tensors".into());
        let mut drawn = DrawnInputs::default();
        drawn.ahead(FLASH_PREFILL, case.clone(), 3);
        assert!(drawn.kept.is_none());
        let first = drawn.get(FLASH_PREFILL, &case, 3).expect("drawn");
        let second = drawn.get(FLASH_PREFILL, &case, 3).expect("drawn");
        assert!(!std::sync::Arc::ptr_eq(&first.inputs, &second.inputs));
        assert!(drawn.kept.is_none());
    }
}

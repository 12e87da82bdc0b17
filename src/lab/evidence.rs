//! When a bug model's output is evidence that a kernel has that bug: the
//! one rule every lab's diagnosis names a cause by.
//!
//! A model is replayed on the inputs of a failing case and set beside what
//! the kernel wrote. Agreement proves something only where the model is
//! finite. Where it is NaN or Inf, any kernel that reads any NaN sentinel,
//! overflows or divides by zero is non-finite too, so two very different
//! defects "agree" there; a paged kernel that ignores the block table and
//! one that unpacks keys with the wrong X both read NaN sentinels and, on a
//! case where that is all the failing elements show, both would match. Such
//! elements are *blind*: they neither confirm nor refute. A model
//! reproduces a case only when its finite values agree with the kernel
//! everywhere compared and at least one failing element is explained by a
//! finite value; a case whose failures lie only under blind elements is
//! [`Replay::Blind`], and the lab reruns it with finite, tagged sentinels
//! ([`crate::lab::experiment::TaggedRun`]) so the models disagree.

use crate::grade::compare::POISON_BITS;

/// How one model's replay stands against the kernel's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Every element the model computes finitely agrees with the kernel's,
    /// and some failing element is among them.
    Reproduces,
    /// Some element disagrees: the model computes a number the kernel does
    /// not (within tolerance), or a non-finite value where the kernel wrote
    /// a number.
    Differs,
    /// Nothing disagrees, but every failing element is one where the model
    /// is non-finite: no evidence either way.
    Blind,
}

impl Written {
    /// What a kernel left in an element of `out`.
    pub fn from_output(value: f32) -> Written {
        match value.to_bits() {
            POISON_BITS => Written::Unwritten,
            _ => Written::Value(f64::from(value)),
        }
    }
}

/// One compared element: where it lies in the output, what the kernel
/// wrote, what the model computes, and whether the kernel's value failed
/// the case's reference.
#[derive(Debug, Clone, Copy)]
pub struct Element {
    pub at: usize,
    pub got: Written,
    pub model: Written,
    pub failing: bool,
}

/// An output element as a kernel or a model leaves it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Written {
    /// A value was stored there.
    Value(f64),
    /// Nothing was: the element still holds the poison it started at. Unlike
    /// a computed NaN this is a precise fact (one bit pattern, one reason),
    /// so a model that leaves the same elements unwritten is evidence.
    Unwritten,
}

/// The replay's verdict over `elements`; `within(at, got, model)` is the
/// lab's tolerance between two finite values at output element `at`.
pub fn replay(
    elements: impl IntoIterator<Item = Element>,
    within: impl Fn(usize, f64, f64) -> bool,
) -> Replay {
    let mut explained = false;
    for Element {
        at,
        got,
        model,
        failing,
    } in elements
    {
        match (got, model) {
            (Written::Unwritten, Written::Unwritten) => explained |= failing,
            (Written::Value(got), Written::Value(model)) => {
                match (model.is_finite(), got.is_finite()) {
                    (true, true) if within(at, got, model) => explained |= failing,
                    // Both non-finite: blind.
                    (false, false) => {}
                    _ => return Replay::Differs,
                }
            }
            _ => return Replay::Differs,
        }
    }
    if explained {
        Replay::Reproduces
    } else {
        Replay::Blind
    }
}

/// [`replay`] of a model over the output elements `indices`: `model(at)`
/// is what the model leaves at `at`, and `passes(at, got, want)` the lab's
/// tolerance, which also tells which of the kernel's elements fail
/// `reference`.
pub fn replay_output(
    indices: impl IntoIterator<Item = usize>,
    out: &[f32],
    reference: &[f64],
    model: impl Fn(usize) -> Written,
    passes: impl Fn(usize, f64, f64) -> bool,
) -> Replay {
    let elements = indices.into_iter().map(|at| Element {
        at,
        got: Written::from_output(out[at]),
        model: model(at),
        failing: !passes(at, f64::from(out[at]), reference[at]),
    });
    replay(elements, &passes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(_: usize, a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-3
    }

    fn elements(got: &[f64], model: &[f64], reference: &[f64]) -> Vec<Element> {
        got.iter()
            .zip(model)
            .zip(reference)
            .enumerate()
            .map(|(at, ((&got, &model), &reference))| Element {
                at,
                got: Written::Value(got),
                model: Written::Value(model),
                failing: !close(at, got, reference),
            })
            .collect()
    }

    #[test]
    fn an_all_nan_model_beside_an_all_nan_output_is_no_match() {
        let nan = [f64::NAN; 4];
        let reference = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            replay(elements(&nan, &nan, &reference), close),
            Replay::Blind
        );
        // NaN where the kernel failed and right elsewhere: still no finite evidence.
        let got = [1.0, f64::NAN, 3.0, f64::NAN];
        let model = [1.0, f64::NAN, 3.0, f64::INFINITY];
        assert_eq!(
            replay(elements(&got, &model, &reference), close),
            Replay::Blind
        );
    }

    #[test]
    fn a_model_that_does_not_reproduce_is_never_named() {
        let reference = [1.0, 2.0, 3.0, 4.0];
        let got = [1.0, 2.5, 3.0, 4.0];
        // Finite and wrong where the kernel is finite.
        assert_eq!(
            replay(elements(&got, &[1.0, 2.7, 3.0, 4.0], &reference), close),
            Replay::Differs
        );
        // NaN where the kernel wrote a number.
        assert_eq!(
            replay(
                elements(&got, &[1.0, 2.5, f64::NAN, 4.0], &reference),
                close
            ),
            Replay::Differs
        );
        // A number where the kernel wrote NaN.
        let got_nan = [1.0, f64::NAN, 3.0, 4.0];
        assert_eq!(
            replay(elements(&got_nan, &[1.0, 2.5, 3.0, 4.0], &reference), close),
            Replay::Differs
        );
        // The reference itself explains no failure.
        assert_eq!(
            replay(elements(&got, &reference, &reference), close),
            Replay::Differs
        );
    }

    #[test]
    fn finite_agreement_on_a_failing_element_reproduces() {
        let reference = [1.0, 2.0, 3.0, 4.0];
        let got = [1.0, 2.5, f64::NAN, 4.0];
        // The NaN is blind, the 2.5 is evidence.
        assert_eq!(
            replay(
                elements(&got, &[1.0, 2.5, f64::NAN, 4.0], &reference),
                close
            ),
            Replay::Reproduces
        );
    }

    #[test]
    fn rows_left_unwritten_alike_are_evidence() {
        let unwritten = |failing| Element {
            at: 0,
            got: Written::Unwritten,
            model: Written::Unwritten,
            failing,
        };
        assert_eq!(replay([unwritten(true)], close), Replay::Reproduces);
        // A model that writes the element does not reproduce a kernel that left it.
        let written = Element {
            model: Written::Value(1.0),
            ..unwritten(true)
        };
        assert_eq!(replay([written], close), Replay::Differs);
        let poisoned_model = Element {
            got: Written::Value(f64::NAN),
            ..unwritten(true)
        };
        assert_eq!(replay([poisoned_model], close), Replay::Differs);
    }
}

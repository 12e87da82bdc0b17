//! What the paged labs' tests share: the engine's comparison and diagnosis
//! of one output, and the check's line over cases that ran.

use crate::grade::compare::{compare_scaled, Comparison};
use crate::grade::integrity::Integrity;
use crate::lab::definition::{CaseData, CaseState, CaseSummary, Diagnosis, Graded, LabRef};

/// `lab`'s comparison (under its tolerance scales) and diagnosis of `out`
/// on `data`, as if launched with `integrity` and no experiments.
pub fn diagnosed(
    lab: LabRef,
    data: &CaseData,
    out: &[f32],
    integrity: &Integrity,
) -> (Comparison, Diagnosis) {
    let reference = lab.oracle(data, None);
    let scales = lab.tolerance_scales(data);
    let comparison = compare_scaled(
        data.problem.output,
        lab.tolerance(),
        scales.as_deref(),
        out,
        &reference,
    );
    let said = lab.diagnose(
        data,
        &Graded {
            out,
            reference: &reference,
            comparison: &comparison,
            integrity,
            experiments: &Default::default(),
        },
    );
    (comparison, said)
}

/// `lab`'s one line for a check whose cases ran as `ran`: each case's name,
/// comparison and diagnosis.
pub fn verdict_of(lab: LabRef, ran: &[(String, Comparison, Diagnosis)]) -> String {
    let summaries: Vec<CaseSummary<'_>> = ran
        .iter()
        .map(|(name, comparison, said)| CaseSummary {
            name,
            state: match comparison.passed {
                true => CaseState::Pass,
                false => CaseState::Fail,
            },
            comparison: Some(comparison),
            integrity: None,
            diagnosis: &said.line,
            cause: said.cause,
        })
        .collect();
    lab.verdict(&summaries).expect("cases ran")
}

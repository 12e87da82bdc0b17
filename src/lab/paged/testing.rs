//! What the paged labs' tests share: each case's argument list checked
//! against the ABI, the engine's comparison and diagnosis of one output, and
//! the check's line over cases that ran.

use crate::grade::compare::{compare_scaled, Comparison};
use crate::grade::integrity::Integrity;
use crate::lab::args::ArgValue;
use crate::lab::definition::{
    CaseData, CaseState, CaseSummary, Diagnosis, Graded, LabCase, LabRef,
};

/// Generates each of `cases` with `seed`, asserts that `lab`'s argument list
/// holds one value of the right kind per ABI argument and that the problem
/// read from the case alone (as the timing phase reads it) is the generated
/// one, then hands the case, its data and its arguments to `lab_specific`.
pub fn for_each_argument_list(
    lab: LabRef,
    cases: &[LabCase],
    seed: u64,
    mut lab_specific: impl FnMut(&LabCase, &CaseData, &[ArgValue<'_>]),
) {
    let abi = lab.abi();
    for case in cases {
        let data = lab.generate(case, seed).expect("generates");
        let args = lab.args(&data);
        assert_eq!(args.len(), abi.args.len(), "{}", case.name);
        for (spec, value) in abi.args.iter().zip(&args) {
            assert!(
                value.fits(spec.kind),
                "{}: {} is {value:?}",
                case.name,
                spec.name
            );
        }
        assert_eq!(
            lab.problem(case).expect("problem"),
            data.problem,
            "{}",
            case.name
        );
        lab_specific(case, &data, &args);
    }
}

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

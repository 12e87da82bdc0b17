//! A lab with every argument kind the fp32 labs do not use (bf16 and uint8
//! inputs, a float scalar, float and uint32 scratch, a bf16 output), declared
//! through the typed interface alone, checked against its own signature, and
//! graded through the real caller, protocol and comparison by the stand-in
//! worker, which launches its kernel on the CPU on the arguments laid out as
//! a GPU would get them (tests/toy_kinds/mod.rs).

mod stand_in_support;
mod toy_kinds;

use std::time::Duration;

use flashprof::app::check::{run_check, CaseChoice, CheckPlan, RunOptions};
use flashprof::grade::compare::POISON_BITS;
use flashprof::lab::args::{
    ArgKind, ArgValue, Laid, BF16_INPUT_GUARD_BITS, BF16_POISON_BITS, GUARD_ELEMS, U8_INPUT_GUARD,
};
use flashprof::lab::typed::{check_args_against_signature, lab_case};
use flashprof::protocol::CaseStatus;
use toy_kinds::{KindsCase, KindsLab, DIM, HEADS, KINDS};

fn case(name: &str, rows: usize) -> flashprof::lab::definition::LabCase {
    lab_case::<KindsLab>(KindsCase {
        name: name.into(),
        rows,
    })
}

#[test]
fn the_argument_table_declares_every_new_kind_in_the_signatures_order() {
    check_args_against_signature(&KindsLab).expect("the table spells the signature");
    let kinds: Vec<ArgKind> = KINDS.abi().args.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ArgKind::Bf16Input,
            ArgKind::U8Input,
            ArgKind::F32Scalar,
            ArgKind::ScratchF32,
            ArgKind::ScratchU32,
            ArgKind::I32Scalar,
            ArgKind::Bf16Output,
        ]
    );
    let data = KINDS.generate(&case("honest", 3), 1).expect("inputs");
    let args = KINDS.args(&data);
    assert!(matches!(args[0], ArgValue::Bf16(x) if x.len() == 3 * HEADS * DIM));
    assert!(matches!(args[1], ArgValue::U8(c) if c.len() == 3 * HEADS * DIM));
    assert_eq!(args[2], ArgValue::F32Scalar(0.75));
    assert_eq!(args[3], ArgValue::Scratch(3 * HEADS));
    assert_eq!(args[4], ArgValue::Scratch(3));
    assert_eq!(args[5], ArgValue::Scalar(3));
    assert_eq!(args[6], ArgValue::Output);
}

#[test]
fn the_launch_sees_each_kinds_bytes_guards_and_poison() {
    let data = KINDS.generate(&case("honest", 2), 4).expect("inputs");
    let laid = toy_kinds::laid_out(&*KINDS, &data, POISON_BITS);
    let elements = 2 * HEADS * DIM;
    let (Laid::Bf16Input(x), Laid::U8Input(codes), Laid::Bf16Output(out)) =
        (&laid[0], &laid[1], &laid[6])
    else {
        panic!("{laid:?}");
    };
    // Two bytes a bf16 element, one a code, each buffer between its guards.
    assert_eq!(x.len() * 2, (elements + 2 * GUARD_ELEMS) * 2);
    assert_eq!(codes.len(), elements + 2 * GUARD_ELEMS);
    assert_eq!(x[GUARD_ELEMS - 1], BF16_INPUT_GUARD_BITS);
    assert_eq!(x[GUARD_ELEMS + elements], BF16_INPUT_GUARD_BITS);
    assert_eq!(codes[GUARD_ELEMS + elements], U8_INPUT_GUARD);
    assert!(out[GUARD_ELEMS..GUARD_ELEMS + elements]
        .iter()
        .all(|&b| b == BF16_POISON_BITS));
    // An output the kernel never wrote reads as the float poison: unwritten.
    assert!(toy_kinds::output(&laid)
        .iter()
        .all(|x| x.to_bits() == POISON_BITS));
}

fn plan(names: &[&str]) -> CheckPlan {
    let options = RunOptions {
        seed: Some(3),
        case_timeout: Duration::from_secs(20),
        cases: CaseChoice::These(names.iter().map(|n| case(n, 4)).collect()),
        timing: None,
        ..RunOptions::default()
    };
    options
        .plan(KINDS)
        .expect("a valid plan")
        .of_source("kinds.cu".into(), "// stand-in".into())
}

#[test]
fn the_stand_in_worker_grades_the_new_kinds_through_the_protocol() {
    let command = stand_in_support::stand_in();
    let mut worker = None;
    let report = run_check(
        &plan(&["honest", "skips-a-row", "reads-past-the-end"]),
        &command,
        &mut worker,
        |_| {},
    )
    .expect("the check completes");
    assert_eq!(
        stand_in_support::statuses(&report),
        vec![CaseStatus::Pass, CaseStatus::Fail, CaseStatus::Fail],
        "{:?}",
        report
            .cases
            .iter()
            .map(|c| &c.diagnosis)
            .collect::<Vec<_>>()
    );
    let comparison = |i: usize| report.cases[i].comparison.as_ref().expect("compared");
    // Every element of a bf16 output within bf16's rounding of the float64 oracle.
    assert_eq!(comparison(0).elements, 4 * HEADS * DIM);
    assert!(comparison(0).passed);
    // The skipped row still holds the bf16 poison: unwritten, not NaN.
    assert_eq!(comparison(1).unwritten, HEADS * DIM);
    assert_eq!(comparison(1).nan, 0);
    // One element read the bf16 guard past the input's end: a NaN it computed.
    assert_eq!(comparison(2).nan, 1);
    assert_eq!(comparison(2).unwritten, 0);
    // Scratch was reset before each of the two launches: they agree.
    let integrity = report.cases[0].integrity.as_ref().expect("integrity");
    assert!(!integrity.runs_differ);
}

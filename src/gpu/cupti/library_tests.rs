//! Host-side tests against the real libcupti 13 (no GPU needed). Each skips,
//! saying why, when the library cannot be loaded; run them with
//! `LD_LIBRARY_PATH=/work/cuda-libs/nvidia/cu13/lib` or `FLASHPROF_CUPTI_PATH`.

use super::{Cupti, CuptiError, MetricConfig, FULL_EXTRA, QUICK};
use crate::facts::metrics::{
    DRAM_BYTES_READ, L1_THROUGHPUT_PCT, L2_HIT_RATE_PCT, LEVEL_METRICS, SM_THROUGHPUT_PCT,
    UNIT_METRICS,
};

const H200_CHIP: &str = "GH100";

/// The real CUPTI host library (scripts/test.sh provides it): without it
/// these tests would say nothing, so they fail instead of passing unseen.
fn real_cupti() -> Cupti {
    Cupti::load().unwrap_or_else(|unavailable| {
        panic!("real libcupti not loadable ({unavailable}): run the tests through scripts/test.sh")
    })
}

#[test]
fn quick_set_costs_one_pass_on_gh100() {
    let cupti = real_cupti();
    let config = MetricConfig::new(&cupti, H200_CHIP, QUICK.metrics).expect("quick config");
    assert_eq!(config.num_passes(), 1);
    assert_eq!(config.chip(), H200_CHIP);
    assert_eq!(config.metrics(), QUICK.metrics);
}

/// The hierarchical roofline's counters: each level's traffic, its
/// `.peak_sustained` and its clock are known to GH100 and ride in the quick
/// set's one pass (checked above); the peaks and clocks alone need no pass
/// of their own beyond the one every launch takes.
#[test]
fn level_metrics_are_known_to_gh100_and_fit_one_pass() {
    let cupti = real_cupti();
    for level in LEVEL_METRICS {
        let metrics = [level.count, level.peak_per_cycle, level.clock_hz];
        let config = MetricConfig::new(&cupti, H200_CHIP, &metrics).expect(level.count);
        assert_eq!(config.num_passes(), 1, "{metrics:?}");
    }
}

#[test]
fn sm_throughput_alone_costs_eight_passes() {
    let cupti = real_cupti();
    let config = MetricConfig::new(&cupti, H200_CHIP, &[SM_THROUGHPUT_PCT]).expect("config");
    assert_eq!(config.num_passes(), 8);
}

/// The full tier's extra launch: the L2 hit rate (two passes alone) and the
/// pipes fit in SM throughput's eight passes; the L1 throughput adds one.
#[test]
fn full_extra_costs_one_pass_more_than_sm_throughput_alone() {
    let cupti = real_cupti();
    let passes = |metrics: &[&str]| {
        MetricConfig::new(&cupti, H200_CHIP, metrics)
            .expect("config")
            .num_passes()
    };
    assert_eq!(passes(&[L2_HIT_RATE_PCT]), 2);
    let without_l1: Vec<&str> = FULL_EXTRA
        .metrics
        .iter()
        .copied()
        .filter(|m| *m != L1_THROUGHPUT_PCT)
        .collect();
    assert_eq!(passes(&without_l1), passes(&[SM_THROUGHPUT_PCT]));
    assert_eq!(passes(FULL_EXTRA.metrics), 9);
}

/// Every per-unit metric is one CUPTI 13 knows on GH100.
#[test]
fn every_unit_metric_is_valid_on_gh100() {
    let cupti = real_cupti();
    for (_, metric) in UNIT_METRICS {
        MetricConfig::new(&cupti, H200_CHIP, &[metric]).expect(metric);
    }
}

#[test]
fn unknown_metric_is_named_in_the_error() {
    let cupti = real_cupti();
    let bogus = "dram__bytes_teleported.sum";
    let error = MetricConfig::new(&cupti, H200_CHIP, &[DRAM_BYTES_READ, bogus])
        .err()
        .expect("a bogus metric must be rejected");
    match &error {
        CuptiError::UnknownMetrics { chip, names } => {
            assert_eq!(chip, H200_CHIP);
            assert_eq!(names, &[bogus.to_string()]);
        }
        other => panic!("expected UnknownMetrics, got {other:?}"),
    }
    assert!(error.to_string().contains(bogus), "{error}");
}

#[test]
fn unknown_chip_is_a_call_error() {
    let cupti = real_cupti();
    let error = MetricConfig::new(&cupti, "GX999", &[DRAM_BYTES_READ])
        .err()
        .expect("an unknown chip must be rejected");
    assert!(
        matches!(
            error,
            CuptiError::Call {
                function: super::Function::HostInitialize,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn empty_metric_list_is_refused_before_calling_cupti() {
    let cupti = real_cupti();
    let error = MetricConfig::new(&cupti, H200_CHIP, &[])
        .err()
        .expect("no metrics");
    assert!(matches!(error, CuptiError::NoMetrics), "{error:?}");
}

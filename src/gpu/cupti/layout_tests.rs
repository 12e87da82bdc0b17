//! Checks every Rust params struct against the offsets, sizes and
//! `STRUCT_SIZE` values compiled from the CUPTI 13.0.85 headers
//! (`tests/fixtures/cupti-13.0-struct-layouts.txt`). A wrong offset here
//! would not crash: CUPTI would read garbage or reject the call.

use std::collections::HashMap;
use std::mem::{offset_of, size_of};

use super::sys::{self, Params};

const LAYOUTS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cupti-13.0-struct-layouts.txt"
));

/// One struct as the C compiler laid it out.
#[derive(Debug, PartialEq)]
struct Layout {
    size_of: usize,
    struct_size: usize,
    /// `(offset, field name)` in declaration order.
    fields: Vec<(usize, String)>,
}

fn parse_layouts(text: &str) -> HashMap<String, Layout> {
    let mut layouts = HashMap::new();
    let mut current: Option<(String, Layout)> = None;
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let offset = tokens[0].parse().expect("field offset");
            let name = tokens.last().expect("field name").to_string();
            let (_, layout) = current.as_mut().expect("a field before any struct");
            layout.fields.push((offset, name));
        } else if let Some((name, rest)) = line.split_once(" sizeof=") {
            let (size_of, struct_size) = rest.split_once(" STRUCT_SIZE=").expect("STRUCT_SIZE");
            layouts.extend(current.take());
            let layout = Layout {
                size_of: size_of.parse().expect("sizeof"),
                struct_size: struct_size.parse().expect("STRUCT_SIZE"),
                fields: Vec::new(),
            };
            current = Some((name.to_string(), layout));
        }
    }
    layouts.extend(current);
    layouts
}

/// The C spelling of a field: the Rust name unless renamed with `as`.
macro_rules! c_field {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $c_name:literal) => {
        $c_name
    };
}

/// The layout Rust gives `$ty`, described in the fixture's terms.
macro_rules! rust_layout {
    ($ty:ty { $($field:ident $(as $c_name:literal)?),* $(,)? }) => {
        Layout {
            size_of: size_of::<$ty>(),
            struct_size: <$ty as Params>::STRUCT_SIZE,
            fields: vec![$((offset_of!($ty, $field), c_field!($field $(, $c_name)?).to_string())),*],
        }
    };
}

fn rust_layouts() -> Vec<(&'static str, Layout)> {
    vec![
        (
            "CUpti_Profiler_Initialize_Params",
            rust_layout!(sys::BareParams { structSize, pPriv }),
        ),
        (
            "CUpti_Profiler_DeInitialize_Params",
            rust_layout!(sys::BareParams { structSize, pPriv }),
        ),
        (
            "CUpti_Device_GetChipName_Params",
            rust_layout!(sys::GetChipNameParams {
                structSize,
                pPriv,
                deviceIndex,
                pChipName
            }),
        ),
        (
            "CUpti_Profiler_GetCounterAvailability_Params",
            rust_layout!(sys::GetCounterAvailabilityParams {
                structSize,
                pPriv,
                ctx,
                counterAvailabilityImageSize,
                pCounterAvailabilityImage
            }),
        ),
        (
            "CUpti_Profiler_DeviceSupported_Params",
            rust_layout!(sys::DeviceSupportedParams {
                structSize,
                pPriv,
                cuDevice,
                isSupported,
                architecture,
                sli,
                vGpu,
                confidentialCompute,
                cmp,
                wsl,
                api
            }),
        ),
        (
            "CUpti_Profiler_Host_Initialize_Params",
            rust_layout!(sys::HostInitializeParams {
                structSize,
                pPriv,
                profilerType,
                pChipName,
                pCounterAvailabilityImage,
                pHostObject
            }),
        ),
        (
            "CUpti_Profiler_Host_Deinitialize_Params",
            rust_layout!(sys::ObjectParams { structSize, pPriv, pObject as "pHostObject" }),
        ),
        (
            "CUpti_Profiler_Host_ConfigAddMetrics_Params",
            rust_layout!(sys::ConfigAddMetricsParams {
                structSize,
                pPriv,
                pHostObject,
                ppMetricNames,
                numMetrics
            }),
        ),
        (
            "CUpti_Profiler_Host_GetConfigImageSize_Params",
            rust_layout!(sys::ConfigImageSizeParams {
                structSize,
                pPriv,
                pHostObject,
                configImageSize
            }),
        ),
        (
            "CUpti_Profiler_Host_GetConfigImage_Params",
            rust_layout!(sys::ConfigImageParams {
                structSize,
                pPriv,
                pHostObject,
                configImageSize,
                pConfigImage
            }),
        ),
        (
            "CUpti_Profiler_Host_GetNumOfPasses_Params",
            rust_layout!(sys::GetNumOfPassesParams {
                structSize,
                pPriv,
                configImageSize,
                pConfigImage,
                numOfPasses
            }),
        ),
        (
            "CUpti_Profiler_Host_EvaluateToGpuValues_Params",
            rust_layout!(sys::EvaluateParams {
                structSize,
                pPriv,
                pHostObject,
                pCounterDataImage,
                counterDataImageSize,
                rangeIndex,
                ppMetricNames,
                numMetrics,
                pMetricValues
            }),
        ),
        (
            "CUpti_RangeProfiler_Enable_Params",
            rust_layout!(sys::EnableParams {
                structSize,
                pPriv,
                ctx,
                pRangeProfilerObject
            }),
        ),
        (
            "CUpti_RangeProfiler_Disable_Params",
            rust_layout!(sys::ObjectParams { structSize, pPriv, pObject as "pRangeProfilerObject" }),
        ),
        (
            "CUpti_RangeProfiler_Start_Params",
            rust_layout!(sys::ObjectParams { structSize, pPriv, pObject as "pRangeProfilerObject" }),
        ),
        (
            "CUpti_RangeProfiler_GetCounterDataSize_Params",
            rust_layout!(sys::GetCounterDataSizeParams {
                structSize,
                pPriv,
                pRangeProfilerObject,
                pMetricNames,
                numMetrics,
                maxNumOfRanges,
                maxNumRangeTreeNodes,
                counterDataSize
            }),
        ),
        (
            "CUpti_RangeProfiler_CounterDataImage_Initialize_Params",
            rust_layout!(sys::CounterDataInitializeParams {
                structSize,
                pPriv,
                pRangeProfilerObject,
                counterDataSize,
                pCounterData
            }),
        ),
        (
            "CUpti_RangeProfiler_SetConfig_Params",
            rust_layout!(sys::SetConfigParams {
                structSize,
                pPriv,
                pRangeProfilerObject,
                configSize,
                pConfig,
                counterDataImageSize,
                pCounterDataImage,
                range,
                replayMode,
                maxRangesPerPass,
                numNestingLevels,
                minNestingLevel,
                passIndex,
                targetNestingLevel
            }),
        ),
        (
            "CUpti_RangeProfiler_Stop_Params",
            rust_layout!(sys::StopParams {
                structSize,
                pPriv,
                pRangeProfilerObject,
                passIndex,
                targetNestingLevel,
                isAllPassSubmitted
            }),
        ),
        (
            "CUpti_RangeProfiler_DecodeData_Params",
            rust_layout!(sys::DecodeDataParams {
                structSize,
                pPriv,
                pRangeProfilerObject,
                numOfRangeDropped
            }),
        ),
        (
            "CUpti_RangeProfiler_GetCounterDataInfo_Params",
            rust_layout!(sys::GetCounterDataInfoParams {
                structSize,
                pPriv,
                pCounterDataImage,
                counterDataImageSize,
                numTotalRanges
            }),
        ),
    ]
}

#[test]
fn every_params_struct_matches_the_13_0_headers() {
    let expected = parse_layouts(LAYOUTS);
    for (c_name, rust) in rust_layouts() {
        let Some(c) = expected.get(c_name) else {
            panic!("{c_name} is missing from the layout fixture");
        };
        assert_eq!(&rust, c, "{c_name}");
    }
}

#[test]
fn struct_size_excludes_trailing_padding() {
    assert_eq!(sys::SetConfigParams::STRUCT_SIZE, 90);
    assert_eq!(size_of::<sys::SetConfigParams>(), 96);
    assert_eq!(sys::StopParams::STRUCT_SIZE, 41);
    assert_eq!(sys::DeviceSupportedParams::STRUCT_SIZE, 52);
    let fresh = sys::StopParams::new();
    assert_eq!(fresh.structSize, 41);
    assert!(fresh.pRangeProfilerObject.is_null());
    assert_eq!(fresh.isAllPassSubmitted, 0);
}

#[test]
fn enum_values_match_the_headers() {
    let line = LAYOUTS
        .lines()
        .find(|line| line.starts_with("CUPTI_AutoRange="))
        .expect("enum line in the fixture");
    let values: HashMap<&str, u32> = line
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name, value.parse().expect("enum value")))
        .collect();
    assert_eq!(values["CUPTI_AutoRange"], sys::AUTO_RANGE);
    assert_eq!(values["CUPTI_KernelReplay"], sys::KERNEL_REPLAY);
    assert_eq!(values["RANGE_PROFILER"], sys::PROFILER_TYPE_RANGE);
}

#[test]
fn fixture_parser_reads_names_offsets_and_sizes() {
    let parsed =
        parse_layouts("S sizeof=24 STRUCT_SIZE=20\n    0  8  size_t a\n   16  4  struct T * b\n");
    assert_eq!(
        parsed["S"],
        Layout {
            size_of: 24,
            struct_size: 20,
            fields: vec![(0, "a".into()), (16, "b".into())],
        }
    );
}

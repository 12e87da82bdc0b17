//! The measured roofs of each GPU, kept between runs in
//! `$XDG_CACHE_HOME/flashprof/peaks.json` (`~/.cache/flashprof/` without
//! it), keyed by the GPU's UUID and the driver version (a new driver may
//! clock it differently). The worker measures; this side, outside its
//! sandbox, remembers, and hands the figures back with the next counters
//! request so the benchmarks run once per machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::facts::device::DeviceInfo;
use crate::grade::roofline::{DevicePeaks, PeakSource, Roof};
use crate::lab::source::{read_regular_file, FollowLinks, MAX_SOURCE_BYTES};

/// The cache file, or `None` without a home folder.
pub fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("flashprof").join("peaks.json"))
}

/// Where `gpu` is filed; `None` for a device with no UUID (an older report).
fn key(gpu: &DeviceInfo) -> Option<String> {
    (!gpu.uuid.is_empty()).then(|| format!("{}/driver-{}", gpu.uuid, gpu.driver_version))
}

/// The peaks measured earlier on `gpu`, if any.
pub fn load(gpu: &DeviceInfo) -> Option<DevicePeaks> {
    load_from(&path()?, gpu)
}

/// Files `peaks` for `gpu` when they were measured; true when written.
pub fn store(gpu: &DeviceInfo, peaks: &DevicePeaks) -> bool {
    path().is_some_and(|p| store_in(&p, gpu, peaks))
}

/// An entry lacking a roof the GPU has (one filed before flashprof measured
/// BF16) counts as missing: the benchmarks run again and the new entry
/// replaces it. Read as it is, it would hide that roof until the driver
/// changed; measuring costs a few milliseconds once.
fn load_from(path: &Path, gpu: &DeviceInfo) -> Option<DevicePeaks> {
    read(path)
        .remove(&key(gpu)?)
        .filter(|peaks| peaks.name == gpu.name)
        .filter(|peaks| peaks.has_every_roof_of(&gpu.attribute_peaks()))
        .filter(|peaks| is_usable(peaks, &gpu.attribute_peaks()))
}

/// Whether every roof of a cached entry is a rate this GPU can have: the
/// file is only JSON on disk, and a roof of 0, -1 or 1e308 would be divided
/// by and plotted, while one of 1e-3 bytes a second would put a kernel at
/// 10^17 % of it. Each roof must lie between [`MIN_SHARE`] and
/// [`MAX_OVER`] times what the GPU's attributes give for it (where they
/// give one). An unusable entry is measured again.
fn is_usable(peaks: &DevicePeaks, attributes: &DevicePeaks) -> bool {
    let usable = |roof: &Roof, attribute: Option<&Roof>| {
        let plausible = attribute
            .map(|a| a.per_s)
            .filter(|a| a.is_finite() && *a > 0.0)
            .is_none_or(|a| roof.per_s >= a * MIN_SHARE && roof.per_s <= a * MAX_OVER);
        roof.per_s.is_finite()
            && roof.per_s > 0.0
            && roof.per_s < MAX_RATE
            && plausible
            && roof.source == PeakSource::Measured
            && roof
                .pipe_pct_at_peak
                .is_none_or(|pct| pct.is_finite() && pct > 0.0 && pct <= 100.0)
    };
    let attribute_roof = |name: &str| {
        attributes
            .tensor_roofs()
            .find(|(theirs, _)| *theirs == name)
            .map(|(_, roof)| roof)
    };
    usable(&peaks.fp32_flops, Some(&attributes.fp32_flops))
        && usable(&peaks.dram_bytes, Some(&attributes.dram_bytes))
        && peaks
            .tensor_roofs()
            .all(|(name, roof)| usable(roof, attribute_roof(name)))
}

/// No roof of any GPU is near this many FLOP or bytes a second (an H200's
/// fastest is below 1e16).
const MAX_RATE: f64 = 1e18;
/// A measured roof below this share of the attribute figure is no
/// measurement of a working GPU (the H100's and H200's measured roofs are
/// 70-95% of theirs).
const MIN_SHARE: f64 = 0.02;
/// Nor is one this far above it: attribute figures use the boost clock, so
/// a measurement may pass them only by rounding and clock reporting.
const MAX_OVER: f64 = 1.25;

fn store_in(path: &Path, gpu: &DeviceInfo, peaks: &DevicePeaks) -> bool {
    let Some(key) = key(gpu) else {
        return false;
    };
    if peaks.fp32_flops.source != PeakSource::Measured {
        return false;
    }
    let mut cache = read(path);
    cache.insert(key, peaks.clone());
    let Ok(text) = serde_json::to_string_pretty(&cache) else {
        return false;
    };
    // Through a fresh temporary renamed into place: a link planted under
    // the cache's name is replaced, never written through.
    path.parent()
        .is_some_and(|dir| std::fs::create_dir_all(dir).is_ok())
        && crate::app::batch::output::write_atomically(path, &text).is_ok()
}

/// The cache, or an empty one when it is missing or unreadable.
fn read(path: &Path) -> BTreeMap<String, DevicePeaks> {
    // The safe reader: a FIFO planted in its place is an empty cache, not a hang.
    read_regular_file(path, FollowLinks::No, MAX_SOURCE_BYTES)
        .ok()
        .and_then(|read| serde_json::from_slice(&read.bytes).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str) -> DeviceInfo {
        DeviceInfo {
            uuid: uuid.into(),
            ..crate::facts::device::tests::h200()
        }
    }

    /// The H200's roofs measured at `share` of its attribute figures.
    fn measured(share: f64) -> DevicePeaks {
        let roof = |attribute: &Roof| Roof {
            per_s: attribute.per_s * share,
            source: PeakSource::Measured,
            pipe_pct_at_peak: Some(84.0),
        };
        let attributes = crate::facts::device::tests::h200().attribute_peaks();
        DevicePeaks {
            name: "NVIDIA H200".into(),
            fp32_flops: roof(&attributes.fp32_flops),
            tf32_flops: attributes.tf32_flops.as_ref().map(roof),
            bf16_flops: attributes.bf16_flops.as_ref().map(roof),
            dram_bytes: roof(&attributes.dram_bytes),
        }
    }

    #[test]
    fn each_gpu_is_filed_under_its_own_uuid_and_driver() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("flashprof").join("peaks.json");
        let (a, b) = (gpu("aa"), gpu("bb"));
        assert_eq!(load_from(&path, &a), None, "no file is an empty cache");
        assert!(store_in(&path, &a, &measured(0.8)));
        assert!(store_in(&path, &b, &measured(0.9)));
        assert_eq!(load_from(&path, &a), Some(measured(0.8)));
        assert_eq!(load_from(&path, &b), Some(measured(0.9)));
        let new_driver = DeviceInfo {
            driver_version: 13010,
            ..gpu("aa")
        };
        assert_eq!(
            load_from(&path, &new_driver),
            None,
            "a new driver measures again"
        );
    }

    /// An entry as flashprof filed it before it measured BF16.
    fn entry_without_bf16(gpu: &DeviceInfo) -> String {
        // Inside every attribute roof of the two GPUs below that it has.
        let roof = r#"{"per_s": 4.0e12, "source": "measured", "pipe_pct_at_peak": 99.0}"#;
        format!(
            r#"{{"{}/driver-{}": {{"name": "{}", "fp32_flops": {roof},
                "tf32_flops": {roof}, "dram_bytes": {roof}}}}}"#,
            gpu.uuid, gpu.driver_version, gpu.name
        )
    }

    #[test]
    fn an_entry_filed_before_bf16_is_measured_again_where_the_gpu_has_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("peaks.json");
        let h200 = gpu("aa");
        std::fs::write(&path, entry_without_bf16(&h200)).expect("write");
        assert_eq!(load_from(&path, &h200), None, "the H200 has BF16");
        // Measured again, the new entry replaces the old one.
        assert!(store_in(&path, &h200, &measured(0.8)));
        assert_eq!(load_from(&path, &h200), Some(measured(0.8)));
        // A GPU without BF16 (Turing) lacks nothing: its old entry stands.
        let t4 = DeviceInfo {
            name: "Tesla T4".into(),
            compute_capability: (7, 5),
            ..gpu("bb")
        };
        std::fs::write(&path, entry_without_bf16(&t4)).expect("write");
        let old = load_from(&path, &t4).expect("still read");
        assert_eq!(old.bf16_flops, None);
        assert_eq!(old.fp32_flops.pipe_pct_at_peak, Some(99.0));
    }

    #[test]
    fn only_measured_peaks_of_a_known_gpu_are_filed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("peaks.json");
        assert!(
            !store_in(&path, &gpu(""), &measured(0.8)),
            "no UUID, no key"
        );
        let attributes = gpu("aa").attribute_peaks();
        assert!(!store_in(&path, &gpu("aa"), &attributes));
        std::fs::write(&path, "not json").expect("write");
        assert_eq!(
            load_from(&path, &gpu("aa")),
            None,
            "a corrupt cache is ignored"
        );
    }

    #[test]
    fn a_cached_entry_with_an_impossible_roof_is_measured_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("peaks.json");
        let h200 = gpu("aa");
        // 1e-3 and 1e15 bytes a second: positive, finite, and no H200's.
        for bad in [0.0, -1.0, 1e308, f64::NAN, 1e-3, 1e15] {
            let mut peaks = measured(0.8);
            peaks.dram_bytes.per_s = bad;
            let mut cache = BTreeMap::new();
            cache.insert(key(&h200).expect("key"), peaks);
            let text = serde_json::to_string(&cache).expect("json");
            std::fs::write(&path, text).expect("write");
            assert_eq!(load_from(&path, &h200), None, "{bad}");
        }
        let mut odd_pipe = measured(0.8);
        odd_pipe.fp32_flops.pipe_pct_at_peak = Some(1e9);
        assert!(store_in(&path, &h200, &odd_pipe));
        assert_eq!(load_from(&path, &h200), None);
        assert!(store_in(&path, &h200, &measured(0.8)));
        assert_eq!(load_from(&path, &h200), Some(measured(0.8)));
    }

    #[test]
    fn the_cache_is_never_written_through_a_planted_link() {
        let dir = tempfile::tempdir().expect("temp dir");
        let elsewhere = dir.path().join("ta-notes");
        std::fs::write(&elsewhere, "keep me").expect("write");
        let path = dir.path().join("peaks.json");
        std::os::unix::fs::symlink(&elsewhere, &path).expect("symlink");
        assert!(store_in(&path, &gpu("aa"), &measured(0.8)));
        assert_eq!(
            std::fs::read_to_string(&elsewhere).expect("read"),
            "keep me"
        );
        assert!(!std::fs::symlink_metadata(&path)
            .expect("meta")
            .file_type()
            .is_symlink());
    }
}

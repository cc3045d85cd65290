//! NVML: the GPUs of this machine, and a sampler of their energy, power, SM clock, temperature
//! and throttling during a run.
//!
//! Energy comes from the total-energy counter (mJ, Volta and newer), read when the run starts
//! and when it ends. The counter updates every 20–100 ms, so a run shorter than about a second
//! gets a coarse figure (the worker warns). Power, clock, temperature and throttle reasons are
//! sampled every [`SAMPLE_INTERVAL`] and once more at each end, so that every run has samples.
//! Power is the instantaneous reading (`NVML_FI_DEV_POWER_INSTANT`) where the driver has it:
//! `nvmlDeviceGetPowerUsage`, the fallback, is a one-second average on Ampere and newer, whose
//! peak lags and flattens the run's (on an H100 running a PyTorch conv2d it peaked at 427 W
//! where the instantaneous reading, and nvidia-smi's `power.draw.instant`, reached 723 W).
//! `power-avg` is energy over the run's length where the counter works, the mean of the samples
//! elsewhere.
//!
//! The GPUs sampled are those the run can see: `CUDA_VISIBLE_DEVICES` of its environment (CUDA
//! indices or `GPU-` UUIDs), every GPU when unset. CUDA numbers GPUs fastest first and NVML by
//! PCI bus; on machines mixing GPU models give runs `CUDA_DEVICE_ORDER=PCI_BUS_ID` as well, so
//! that the two agree.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kiln_protocol::message::GpuInfo;
use kiln_protocol::metric::{Metric, MetricValue, Metrics};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_POWER_INSTANT;
use nvml_wrapper::{Device, Nvml};

/// How often a run's GPUs are sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// Runs shorter than this get a coarse energy figure (the counter's update period is 20–100 ms).
pub const MIN_ENERGY_WINDOW: Duration = Duration::from_secs(1);

/// The throttle reasons that hold clocks down against the workload's will. Idle, application
/// clocks and user-locked clocks (`nvidia-smi -lgc`, wanted for stable measurements) are not.
const THROTTLING: ThrottleReasons = ThrottleReasons::SW_POWER_CAP
    .union(ThrottleReasons::HW_SLOWDOWN)
    .union(ThrottleReasons::SW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN);

/// NVML, initialised once per process; the error says why it is unusable here.
fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| Nvml::init().map_err(|e| format!("NVML is unavailable: {e}")))
        .as_ref()
        .map_err(Clone::clone)
}

/// The GPUs of this machine as NVML lists them; none where NVML is unavailable.
pub fn gpus() -> Vec<GpuInfo> {
    let Ok(nvml) = nvml() else {
        return Vec::new();
    };
    let driver = nvml
        .sys_driver_version()
        .unwrap_or_else(|_| "unknown".into());
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|index| {
            let device = nvml.device_by_index(index).ok()?;
            Some(GpuInfo {
                index,
                name: device.name().unwrap_or_else(|_| "unknown".into()),
                memory_bytes: device.memory_info().map_or(0, |m| m.total),
                driver: driver.clone(),
            })
        })
        .collect()
}

/// The NVML indexes of the GPUs a run with this environment can use.
pub fn visible(env: &[(String, String)]) -> Result<Vec<u32>, String> {
    let nvml = nvml()?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML cannot count GPUs: {e}"))?;
    let value = env
        .iter()
        .rev()
        .find(|(k, _)| k == "CUDA_VISIBLE_DEVICES")
        .map(|(_, v)| v.as_str());
    parse_visible(value, count, |i| {
        nvml.device_by_index(i).and_then(|d| d.uuid()).ok()
    })
}

/// `CUDA_VISIBLE_DEVICES` as CUDA reads it: indices or UUID prefixes, up to the first entry
/// that names no GPU; unset means every GPU. `uuid_of` gives a GPU's UUID by NVML index.
fn parse_visible(
    value: Option<&str>,
    count: u32,
    uuid_of: impl Fn(u32) -> Option<String>,
) -> Result<Vec<u32>, String> {
    let Some(value) = value else {
        return if count == 0 {
            Err("NVML finds no GPU".into())
        } else {
            Ok((0..count).collect())
        };
    };
    let mut devices = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let device = if entry.starts_with("MIG-") {
            return Err(format!(
                "CUDA_VISIBLE_DEVICES={value} names a MIG instance, which has no energy counter of its own"
            ));
        } else if entry.starts_with("GPU-") {
            (0..count).find(|&i| uuid_of(i).is_some_and(|u| u.starts_with(entry)))
        } else {
            entry.parse::<u32>().ok().filter(|&i| i < count)
        };
        match device {
            Some(d) if !devices.contains(&d) => devices.push(d),
            // CUDA ignores everything from the first entry it cannot use.
            _ => break,
        }
    }
    if devices.is_empty() {
        return Err(format!(
            "CUDA_VISIBLE_DEVICES={value} leaves the run no GPU"
        ));
    }
    Ok(devices)
}

/// What the sampler saw over one run.
#[derive(Debug, Clone, PartialEq)]
struct Samples {
    /// Energy used by the sampled GPUs over `window`, mJ; why not, where the counter fails.
    energy_mj: Result<u64, String>,
    /// From the first energy reading to the last.
    window: Duration,
    /// Power of the GPUs together per sample, mW.
    power_mw: Vec<f64>,
    /// SM clock averaged over the GPUs per sample, MHz.
    sm_clock_mhz: Vec<f64>,
    /// Hottest GPU per sample, °C.
    temperature_c: Vec<f64>,
    /// Whether a GPU was throttled, per sample.
    throttled: Vec<bool>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            energy_mj: Err("not read".into()),
            window: Duration::ZERO,
            power_mw: Vec::new(),
            sm_clock_mhz: Vec::new(),
            temperature_c: Vec::new(),
            throttled: Vec::new(),
        }
    }
}

impl Samples {
    fn metrics(&self) -> Metrics {
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let max = |v: &[f64]| v.iter().copied().reduce(f64::max);
        let energy = self.energy_mj.as_ref().ok().map(|&e| e as f64);
        let seconds = self.window.as_secs_f64();
        let power_avg = match energy {
            Some(e) if seconds > 0.0 => Some(e / seconds),
            _ => mean(&self.power_mw),
        };
        let throttled = (!self.throttled.is_empty()).then(|| {
            self.throttled.iter().filter(|t| **t).count() as f64 / self.throttled.len() as f64
                * 100.0
        });
        [
            (Metric::Energy, energy),
            (Metric::PowerAvg, power_avg),
            (Metric::PowerPeak, max(&self.power_mw)),
            (Metric::SmClock, mean(&self.sm_clock_mhz)),
            (Metric::GpuTemperature, max(&self.temperature_c)),
            (Metric::GpuThrottled, throttled),
        ]
        .into_iter()
        .map(|(m, v)| (m, v.map_or(MetricValue::Unsupported, MetricValue::Measured)))
        .collect()
    }

    /// One sample of every device (there is at least one); a reading a device refuses is left
    /// out.
    fn take(&mut self, devices: &[Device<'_>]) {
        let power: Vec<f64> = devices.iter().filter_map(power_mw).collect();
        if power.len() == devices.len() {
            self.power_mw.push(power.iter().sum());
        }
        let clocks: Vec<f64> = devices
            .iter()
            .filter_map(|d| d.clock_info(Clock::SM).ok().map(f64::from))
            .collect();
        if !clocks.is_empty() {
            self.sm_clock_mhz
                .push(clocks.iter().sum::<f64>() / clocks.len() as f64);
        }
        if let Some(t) = devices
            .iter()
            .filter_map(|d| d.temperature(TemperatureSensor::Gpu).ok())
            .max()
        {
            self.temperature_c.push(f64::from(t));
        }
        let reasons: Vec<ThrottleReasons> = devices
            .iter()
            .filter_map(|d| d.current_throttle_reasons().ok())
            .collect();
        if !reasons.is_empty() {
            self.throttled
                .push(reasons.iter().any(|r| r.intersects(THROTTLING)));
        }
    }
}

/// A device's power draw, mW: the instantaneous reading where the driver gives one, else
/// NVML's power usage (a one-second average on Ampere and newer).
fn power_mw(device: &Device<'_>) -> Option<f64> {
    let instant = device
        .field_values_for(&[FieldId(NVML_FI_DEV_POWER_INSTANT)])
        .ok()
        .and_then(|values| values.into_iter().next())
        .and_then(Result::ok)
        .and_then(|sample| sample.value.ok());
    instant_mw(instant).or_else(|| device.power_usage().ok().map(f64::from))
}

/// The instantaneous power field's value in mW; `None` where it is missing or reads 0 (a GPU
/// never draws nothing: drivers without the reading fill the field with 0).
fn instant_mw(value: Option<SampleValue>) -> Option<f64> {
    let mw = match value? {
        SampleValue::U32(v) => f64::from(v),
        SampleValue::U64(v) => v as f64,
        SampleValue::I64(v) => v as f64,
        SampleValue::F64(v) => v,
    };
    (mw.is_finite() && mw > 0.0).then_some(mw)
}

/// Total energy counter of the devices together, mJ.
fn energy(devices: &[Device<'_>]) -> Result<u64, String> {
    devices
        .iter()
        .map(|d| d.total_energy_consumption())
        .sum::<Result<u64, _>>()
        .map_err(|e| format!("no energy counter: {e}"))
}

/// A running sampler thread.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Samples>,
}

impl Sampler {
    /// Starts sampling the GPUs with these NVML indexes; returns once the starting energy is
    /// read, so the window covers everything launched after.
    pub fn start(indexes: Vec<u32>) -> Result<Sampler, String> {
        let nvml = nvml()?;
        if indexes.is_empty() {
            return Err("no GPU to sample".into());
        }
        let devices = indexes
            .iter()
            .map(|&i| {
                nvml.device_by_index(i)
                    .map_err(|e| format!("NVML cannot open GPU {i}: {e}"))
            })
            .collect::<Result<Vec<Device<'static>>, String>>()?;
        let (stop, stopped) = mpsc::channel();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("kiln-nvml".into())
            .spawn(move || {
                let mut samples = Samples::default();
                let first = Instant::now();
                let before = energy(&devices);
                samples.take(&devices);
                let _ = ready.send(());
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(SAMPLE_INTERVAL) {
                    samples.take(&devices);
                }
                samples.take(&devices);
                let after = energy(&devices);
                samples.window = first.elapsed();
                samples.energy_mj = match (before, after) {
                    (Ok(b), Ok(a)) => Ok(a.saturating_sub(b)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
                samples
            })
            .map_err(|e| format!("cannot start the NVML sampler: {e}"))?;
        // The thread reports once it has its first readings (or is gone).
        let _ = started.recv();
        Ok(Sampler { stop, thread })
    }

    /// Stops sampling; every NVML metric, unsupported where nothing was read.
    pub fn finish(self) -> Metrics {
        drop(self.stop);
        match self.thread.join() {
            Ok(samples) => {
                if let Err(e) = &samples.energy_mj {
                    tracing::debug!("energy unsupported: {e}");
                }
                samples.metrics()
            }
            Err(_) => unsupported(),
        }
    }
}

/// Every NVML metric, unsupported.
pub fn unsupported() -> Metrics {
    Metric::ALL
        .iter()
        .filter(|m| m.needs_nvml())
        .map(|m| (*m, MetricValue::Unsupported))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid(i: u32) -> Option<String> {
        Some(format!("GPU-{i}{i}{i}-abcd"))
    }

    #[test]
    fn visible_devices_follow_cuda() {
        assert_eq!(parse_visible(None, 2, uuid), Ok(vec![0, 1]));
        assert_eq!(parse_visible(Some("1"), 2, uuid), Ok(vec![1]));
        assert_eq!(parse_visible(Some("1, 0"), 2, uuid), Ok(vec![1, 0]));
        assert_eq!(
            parse_visible(Some("0,7,1"), 2, uuid),
            Ok(vec![0]),
            "stops at 7"
        );
        assert_eq!(parse_visible(Some("GPU-111"), 2, uuid), Ok(vec![1]));
        assert!(parse_visible(Some(""), 2, uuid).is_err());
        assert!(parse_visible(Some("-1"), 2, uuid).is_err());
        assert!(parse_visible(None, 0, uuid).is_err());
        let mig = parse_visible(Some("MIG-1234"), 2, uuid).unwrap_err();
        assert!(mig.contains("MIG"), "{mig}");
    }

    #[test]
    fn metrics_from_samples() {
        let s = Samples {
            energy_mj: Ok(300_000),
            window: Duration::from_secs(2),
            power_mw: vec![100_000.0, 200_000.0],
            sm_clock_mhz: vec![1000.0, 2000.0],
            temperature_c: vec![50.0, 60.0],
            throttled: vec![false, true, false, false],
        };
        let m = s.metrics();
        let v = |k: Metric| m[&k].measured().unwrap();
        assert_eq!(v(Metric::Energy), 300_000.0);
        assert_eq!(v(Metric::PowerAvg), 150_000.0, "energy over the window");
        assert_eq!(v(Metric::PowerPeak), 200_000.0);
        assert_eq!(v(Metric::SmClock), 1500.0);
        assert_eq!(v(Metric::GpuTemperature), 60.0);
        assert_eq!(v(Metric::GpuThrottled), 25.0);
        assert!(m.keys().all(|k| k.needs_nvml()));
        assert_eq!(m.len(), unsupported().len());
    }

    #[test]
    fn missing_readings_are_unsupported_not_zero() {
        let s = Samples {
            energy_mj: Err("no energy counter".into()),
            window: Duration::from_millis(10),
            power_mw: vec![80_000.0],
            ..Samples::default()
        };
        let m = s.metrics();
        assert_eq!(m[&Metric::Energy], MetricValue::Unsupported);
        assert_eq!(
            m[&Metric::PowerAvg],
            MetricValue::Measured(80_000.0),
            "the samples' mean"
        );
        assert_eq!(m[&Metric::SmClock], MetricValue::Unsupported);
        assert_eq!(m[&Metric::GpuThrottled], MetricValue::Unsupported);
    }

    #[test]
    fn instantaneous_power_reads_in_any_value_type_and_zero_means_none() {
        assert_eq!(instant_mw(Some(SampleValue::U32(723_300))), Some(723_300.0));
        assert_eq!(instant_mw(Some(SampleValue::U64(69_840))), Some(69_840.0));
        assert_eq!(instant_mw(Some(SampleValue::I64(1))), Some(1.0));
        assert_eq!(instant_mw(Some(SampleValue::F64(5.5))), Some(5.5));
        // The average reading is used instead.
        assert_eq!(instant_mw(None), None);
        assert_eq!(instant_mw(Some(SampleValue::U32(0))), None);
        assert_eq!(instant_mw(Some(SampleValue::I64(-3))), None);
        assert_eq!(instant_mw(Some(SampleValue::F64(f64::NAN))), None);
    }

    #[test]
    fn without_a_driver_nothing_panics() {
        if nvml().is_ok() {
            eprintln!("skipped: NVML works on this machine");
            return;
        }
        assert!(gpus().is_empty());
        assert!(visible(&[]).is_err());
        assert!(Sampler::start(vec![0]).is_err());
    }
}

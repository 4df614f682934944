//! Reading `XSCHED_*` environment variables: every bad value is a typed error naming the variable.

use crate::error::RuntimeError;
use crate::mode::RolloutMode;
use crate::options::{QueueOptions, RuntimeConfig, WhoSchedules};
use crate::prompt::{RT_CONTROL, RT_CONTROL_VALUES, RtControl};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::str::FromStr;
use xsched_core::{CoreError, Hint, LaunchConfig, Level, Nanos, PolicySpec};

pub(crate) const PRIORITY: &str = "XSCHED_PRIORITY";
pub(crate) const SHARE: &str = "XSCHED_SHARE";
pub(crate) const TIMESLICE_US: &str = "XSCHED_TIMESLICE_US";
pub(crate) const LAXITY_US: &str = "XSCHED_LAXITY_US";
pub(crate) const DEADLINE_US: &str = "XSCHED_DEADLINE_US";
pub(crate) const SLO_US: &str = "XSCHED_SLO_US";
pub(crate) const LEVEL: &str = "XSCHED_LEVEL";
pub(crate) const MODE: &str = "XSCHED_MODE";
pub(crate) const THRESHOLD: &str = "XSCHED_THRESHOLD";
pub(crate) const BATCH: &str = "XSCHED_BATCH";
pub(crate) const INFLIGHT_US: &str = "XSCHED_INFLIGHT_US";
pub(crate) const MAX_PENDING: &str = "XSCHED_MAX_PENDING";
pub(crate) const CPU_HOLD: &str = "XSCHED_CPU_HOLD";
pub(crate) const SCHEDULER: &str = "XSCHED_SCHEDULER";
pub(crate) const POLICY: &str = "XSCHED_POLICY";
pub(crate) const SOCKET: &str = "XSCHED_SOCKET";
pub(crate) const DAEMON_UID: &str = "XSCHED_DAEMON_UID";
/// Read by [`init_logging`](crate::init_logging).
const LOG: &str = "XSCHED_LOG";

/// Every environment variable the runtime reads (re-exported as
/// [`ENV_NAMES`](crate::ENV_NAMES)); a test checks that each constant above is listed.
pub const NAMES: &[&str] = &[
    SCHEDULER,
    POLICY,
    SOCKET,
    DAEMON_UID,
    PRIORITY,
    SHARE,
    TIMESLICE_US,
    LAXITY_US,
    DEADLINE_US,
    SLO_US,
    LEVEL,
    MODE,
    THRESHOLD,
    BATCH,
    INFLIGHT_US,
    MAX_PENDING,
    CPU_HOLD,
    RT_CONTROL,
    crate::stamps::STAMPS,
    LOG,
];

/// The process environment as a lookup function.
pub(crate) fn process_lookup(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn bad(var: &'static str, value: &str, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Env {
        var,
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn parse<T: FromStr>(
    lookup: Lookup,
    var: &'static str,
    what: &str,
) -> Result<Option<T>, RuntimeError> {
    match lookup(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad(var, &v, format!("expected {what}"))),
    }
}

/// `XSCHED_DAEMON_UID`: the user whose daemon the agent also obeys.
pub(crate) fn daemon_uid(lookup: Lookup) -> Result<Option<u32>, RuntimeError> {
    parse(lookup, DAEMON_UID, "a numeric user id")
}

fn micros(lookup: Lookup, var: &'static str) -> Result<Option<Nanos>, RuntimeError> {
    Ok(parse::<u64>(lookup, var, "a whole number of microseconds")?.map(Nanos::from_us))
}

/// Hints from the environment, in a fixed order.
pub(crate) fn hints(lookup: Lookup) -> Result<Vec<Hint>, RuntimeError> {
    let mut hints = Vec::new();
    if let Some(p) = parse(lookup, PRIORITY, "an integer (higher is more urgent)")? {
        hints.push(Hint::Priority(p));
    }
    if let Some(s) = parse(lookup, SHARE, "a positive integer share")? {
        hints.push(Hint::Share(s));
    }
    if let Some(t) = micros(lookup, TIMESLICE_US)? {
        hints.push(Hint::TimeSlice(t));
    }
    if let Some(l) = micros(lookup, LAXITY_US)? {
        hints.push(Hint::Laxity(l));
    }
    if let Some(d) = micros(lookup, DEADLINE_US)? {
        hints.push(Hint::Deadline(d));
    }
    if let Some(s) = micros(lookup, SLO_US)? {
        hints.push(Hint::Slo(s));
    }
    Ok(hints)
}

pub(crate) fn level(lookup: Lookup) -> Result<Option<Level>, RuntimeError> {
    match parse::<u8>(lookup, LEVEL, "1, 2 or 3")? {
        None => Ok(None),
        Some(n) => Level::try_from(n)
            .map(Some)
            .map_err(|e| RuntimeError::EnvRefused {
                var: LEVEL,
                value: n.to_string(),
                source: e.into(),
            }),
    }
}

/// `XSCHED_MODE`, refused beside `XSCHED_LEVEL` (a mode chooses the level).
pub(crate) fn mode(lookup: Lookup) -> Result<Option<RolloutMode>, RuntimeError> {
    let Some(value) = lookup(MODE) else {
        return Ok(None);
    };
    let mode = value
        .parse::<RolloutMode>()
        .map_err(|source| RuntimeError::EnvMode {
            value: value.clone(),
            source,
        })?;
    if let Some(level) = lookup(LEVEL) {
        return Err(bad(
            MODE,
            &value,
            format!(
                "XSCHED_LEVEL={level} is set too; a mode chooses the level (observe: none, \
                 cooperative: 1, preemptive: the highest): set one of the two"
            ),
        ));
    }
    if mode == RolloutMode::Observe
        && let Some(var) = [THRESHOLD, BATCH, INFLIGHT_US, MAX_PENDING]
            .into_iter()
            .find(|v| lookup(v).is_some())
    {
        return Err(bad(
            MODE,
            &value,
            format!(
                "{var} is set too; observe launches every command at once and never holds one: \
                 set one of the two"
            ),
        ));
    }
    Ok(Some(mode))
}

/// `base` overridden by threshold, batch and budget. A threshold alone lowers the batch to fit.
pub(crate) fn launch_config(
    lookup: Lookup,
    base: LaunchConfig,
) -> Result<LaunchConfig, RuntimeError> {
    let threshold: Option<u32> = parse(lookup, THRESHOLD, "a positive integer")?;
    let batch: Option<u32> = parse(lookup, BATCH, "a positive integer")?;
    let budget = micros(lookup, INFLIGHT_US)?;
    let config = match (threshold, batch) {
        (None, None) => base,
        (t, b) => {
            let threshold = t.unwrap_or(base.threshold());
            let batch = b.unwrap_or(base.batch().min(threshold));
            LaunchConfig::new(threshold, batch)?.with_inflight_budget(base.inflight_budget())
        }
    };
    Ok(match budget {
        None => config,
        Some(b) => config.with_inflight_budget(Some(b)),
    })
}

/// `XSCHED_MAX_PENDING`: the most commands a queue holds unlaunched before a submit waits.
pub(crate) fn max_pending(lookup: Lookup) -> Result<Option<NonZeroUsize>, RuntimeError> {
    match parse::<usize>(lookup, MAX_PENDING, "a positive number of commands")? {
        None => Ok(None),
        Some(n) => NonZeroUsize::new(n).map(Some).ok_or_else(|| {
            bad(
                MAX_PENDING,
                "0",
                "a bound of zero would hold every submit forever; unset it for no bound",
            )
        }),
    }
}

/// `XSCHED_CPU_HOLD`: whether a queue held at Level 2 on a device that is this machine's CPU
/// stops launching (`stop`, the default) or keeps launching on idle CPU only (`yield`).
pub(crate) fn yield_when_held(lookup: Lookup) -> Result<bool, RuntimeError> {
    match lookup(CPU_HOLD).as_deref().map(str::trim) {
        None | Some("stop") => Ok(false),
        Some("yield") => Ok(true),
        Some(v) => Err(bad(CPU_HOLD, v, "expected stop or yield")),
    }
}

pub(crate) fn scheduler_mode(lookup: Lookup) -> Result<Option<WhoSchedules>, RuntimeError> {
    let Some(v) = lookup(SCHEDULER) else {
        return Ok(None);
    };
    match v.trim() {
        "app" => Ok(Some(WhoSchedules::App)),
        "local" => Ok(Some(WhoSchedules::Local)),
        "global" => Ok(Some(WhoSchedules::Global)),
        _ => Err(bad(SCHEDULER, &v, "expected app, local or global")),
    }
}

/// `XSCHED_RT_CONTROL`: checked here, where the runtime reads its environment, so a bad value
/// is an error; the control threads read it themselves ([`crate::prompt`]).
pub(crate) fn check_rt_control(lookup: Lookup) -> Result<(), RuntimeError> {
    let value = lookup(RT_CONTROL);
    RtControl::parse(value.as_deref()).map(drop).map_err(|e| {
        bad(
            RT_CONTROL,
            &e.value,
            format!("expected {RT_CONTROL_VALUES}"),
        )
    })
}

pub(crate) fn policy(lookup: Lookup) -> Result<Option<PolicySpec>, RuntimeError> {
    let Some(v) = lookup(POLICY) else {
        return Ok(None);
    };
    let spec = v
        .trim()
        .parse()
        .map_err(|source: CoreError| RuntimeError::EnvRefused {
            var: POLICY,
            value: v.clone(),
            source,
        })?;
    Ok(Some(spec))
}

/// The options read from the environment are built here, where its variables are parsed.
impl RuntimeConfig {
    /// Defaults overridden by `XSCHED_SCHEDULER`, `XSCHED_POLICY`, `XSCHED_SOCKET` and
    /// `XSCHED_DAEMON_UID`; `XSCHED_RT_CONTROL` is checked too (the control threads read it).
    pub fn from_env() -> Result<RuntimeConfig, RuntimeError> {
        RuntimeConfig::from_lookup(&process_lookup)
    }

    /// Like [`from_env`](Self::from_env) with another variable source (for tests).
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RuntimeConfig, RuntimeError> {
        let mut config = RuntimeConfig::default();
        if let Some(mode) = scheduler_mode(lookup)? {
            config.scheduler = mode;
        }
        if let Some(policy) = policy(lookup)? {
            config.policy = policy;
        }
        config.socket = lookup(SOCKET).map(PathBuf::from);
        config.daemon_uid = daemon_uid(lookup)?;
        check_rt_control(lookup)?;
        Ok(config)
    }
}

impl QueueOptions {
    /// Defaults overridden by `XSCHED_PRIORITY`, `XSCHED_SHARE`, `XSCHED_TIMESLICE_US`,
    /// `XSCHED_LAXITY_US`, `XSCHED_DEADLINE_US`, `XSCHED_SLO_US`, `XSCHED_LEVEL`,
    /// `XSCHED_THRESHOLD`, `XSCHED_BATCH`, `XSCHED_INFLIGHT_US` (0 turns the budget off),
    /// `XSCHED_MAX_PENDING` and `XSCHED_CPU_HOLD`, then put in `XSCHED_MODE`'s [`RolloutMode`](crate::RolloutMode) when it is set.
    pub fn from_env() -> Result<QueueOptions, RuntimeError> {
        QueueOptions::from_lookup(&process_lookup)
    }

    /// Like [`from_env`](Self::from_env) with another variable source (for tests).
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<QueueOptions, RuntimeError> {
        let mut options = QueueOptions::default();
        for hint in hints(lookup)? {
            options.hints.apply(hint)?;
        }
        options.level = level(lookup)?;
        options.config = launch_config(lookup, options.config)?;
        options.max_pending = max_pending(lookup)?;
        options.yield_when_held = yield_when_held(lookup)?;
        Ok(match mode(lookup)? {
            Some(mode) => mode.apply(options),
            None => options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{QueueOptions, RuntimeConfig};

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| owned.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn every_variable_is_read() {
        let lookup = vars(&[
            (PRIORITY, "7"),
            (SHARE, "3"),
            (TIMESLICE_US, "2000"),
            (LAXITY_US, "100"),
            (DEADLINE_US, "900"),
            (SLO_US, "11000"),
            (LEVEL, "2"),
            (THRESHOLD, "4"),
            (INFLIGHT_US, "0"),
            (CPU_HOLD, "yield"),
        ]);
        let o = QueueOptions::from_lookup(&lookup).expect("valid");
        assert!(o.yield_when_held);
        assert_eq!(o.hints.priority, 7);
        assert_eq!(o.hints.share, 3);
        assert_eq!(o.hints.time_slice, Some(Nanos::from_us(2000)));
        assert_eq!(o.hints.laxity, Some(Nanos::from_us(100)));
        assert_eq!(o.hints.deadline, Some(Nanos::from_us(900)));
        assert_eq!(o.hints.slo, Some(Nanos::from_ms(11)));
        assert_eq!(o.level, Some(Level::Deactivate));
        assert_eq!((o.config.threshold(), o.config.batch()), (4, 4));
        assert_eq!(o.config.inflight_budget(), None, "0 turns the budget off");

        let lookup = vars(&[
            (SCHEDULER, "app"),
            (POLICY, "kedf:2"),
            (SOCKET, "/tmp/x.sock"),
            (DAEMON_UID, "996"),
        ]);
        let c = RuntimeConfig::from_lookup(&lookup).expect("valid");
        assert_eq!(c.scheduler, WhoSchedules::App);
        assert_eq!(c.policy.to_string(), "kedf:2");
        assert_eq!(
            c.socket.as_deref(),
            Some(std::path::Path::new("/tmp/x.sock"))
        );
        assert_eq!(c.daemon_uid, Some(996));
    }

    #[test]
    fn defaults_without_variables() {
        let o = QueueOptions::from_lookup(&vars(&[])).expect("valid");
        assert_eq!(o, QueueOptions::default());
        assert_eq!(
            o.config.inflight_budget(),
            Some(crate::options::DEFAULT_INFLIGHT_BUDGET)
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (var, value) in [
            (PRIORITY, "high"),
            (LEVEL, "4"),
            (THRESHOLD, "-1"),
            (SCHEDULER, "remote"),
            (POLICY, "nope"),
            (INFLIGHT_US, "1.5"),
            (DAEMON_UID, "xsched"),
            (MODE, "preempt"),
            (RT_CONTROL, "sometimes"),
            (CPU_HOLD, "idle"),
        ] {
            let lookup = vars(&[(var, value)]);
            let err = QueueOptions::from_lookup(&lookup)
                .err()
                .or_else(|| RuntimeConfig::from_lookup(&lookup).err())
                .unwrap_or_else(|| panic!("{var}={value} must be refused"));
            let text = err.to_string();
            assert!(text.contains(var), "{text}");
        }
        let unknown = "nope".parse::<PolicySpec>().err().map(|e| e.to_string());
        let text = RuntimeConfig::from_lookup(&vars(&[(POLICY, "nope")]))
            .err()
            .map(|e| xsched_core::error::chain_text(&e))
            .unwrap_or_default();
        assert!(
            unknown.is_some_and(|u| text.ends_with(&u)),
            "the core's error, naming the known policies: {text}"
        );
        let err = QueueOptions::from_lookup(&vars(&[(THRESHOLD, "2"), (BATCH, "4")]));
        assert!(matches!(
            err,
            Err(RuntimeError::Core(CoreError::InvalidLaunchConfig { .. }))
        ));
        let both = QueueOptions::from_lookup(&vars(&[(MODE, "observe"), (LEVEL, "3")]));
        let text = both.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains(MODE) && text.contains(LEVEL), "{text}");
        let both = QueueOptions::from_lookup(&vars(&[(MODE, "observe"), (BATCH, "4")]));
        let text = both.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains(MODE) && text.contains(BATCH), "{text}");
        let observe = QueueOptions::from_lookup(&vars(&[(MODE, "observe"), (PRIORITY, "2")]))
            .expect("a valid mode");
        assert!(observe.mode == Some(RolloutMode::Observe) && observe.hints.priority == 2);
        let both = QueueOptions::from_lookup(&vars(&[(MODE, "observe"), (MAX_PENDING, "4")]));
        let text = both.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains(MODE) && text.contains(MAX_PENDING), "{text}");
        let err = QueueOptions::from_lookup(&vars(&[(SHARE, "0")]));
        assert!(matches!(
            err,
            Err(RuntimeError::Core(CoreError::InvalidHint(_)))
        ));
    }

    #[test]
    fn every_variable_is_listed_once() {
        let declared: Vec<&str> = include_str!("env.rs")
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("const ") || l.starts_with("pub(crate) const "))
            .filter(|l| l.contains("\"XSCHED_"))
            .filter_map(|l| l.split('"').nth(1))
            .collect();
        assert!(declared.len() >= 16, "{declared:?}");
        for name in &declared {
            assert!(NAMES.contains(name), "{name} is read but not in NAMES");
        }
        assert!(NAMES.contains(&RT_CONTROL));
        let mut distinct = NAMES.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), NAMES.len(), "a name is listed twice");
        assert!(NAMES.iter().all(|n| n.starts_with("XSCHED_")), "{NAMES:?}");
    }
}

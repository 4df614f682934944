//! What the gateway serves ([`GatewayConfig`]), checked whole before anything is bound or
//! started ([`GatewayConfig::check`]): the upstreams, the limits, and the scheduling core's
//! configuration, which the core itself checks (a policy the gateway cannot run is refused
//! there, with the reason); and why it could not start ([`GatewayError`]), a classes file's
//! reading ([`Classes::load`]) included.

use crate::classes::{Classes, InvalidClasses};
use crate::forecast::SeedAnswer;
use crate::upstream::{Timeouts, Uri};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use xsched_llm_core::service::{Rates, ServiceModel};
use xsched_llm_core::{
    Config, EngineLimits, EngineOrder, Fairness, Placement, RequestPolicySpec, RequestScheduler,
    Router, SchedulerError,
};
use xsched_llm_predict::embedding::Embedder;

/// Client connections at once at most, by default.
pub use crate::conns::MAX_CONNECTIONS;

/// The largest request body read (bytes); larger is a 413.
pub const MAX_BODY: usize = 4 << 20;
/// How much of a body past [`MAX_BODY`] is read and dropped so that its client, still sending,
/// gets its 413 rather than a reset connection; past this the connection is just closed.
pub const MAX_DRAIN: usize = 64 << 20;
/// The largest request head (request line and headers, bytes); larger is a 431.
pub const MAX_HEAD: usize = 32 << 10;
/// How long a client may take to send a request's headers (and how long an idle keep-alive
/// connection stays open), and then its body (a 408 after).
pub const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the gateway serves.
#[derive(Clone)]
pub struct GatewayConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The engines (`http://host:port`).
    pub upstreams: Vec<Uri>,
    /// The policy (`xsched-llm-core`'s; those that pause running requests or order by noisy
    /// samples of the truth are simulation-only and refused; the oracles order by each
    /// request's stated length: [`crate::request::Checked::stated_length`]).
    pub policy: RequestPolicySpec,
    /// Requests in flight per upstream at most (configured; llama.cpp's server: its
    /// `--parallel` slots).
    pub concurrency: usize,
    /// Each upstream's KV capacity in tokens, if known: expected-peak admission then keeps the
    /// predicted KV of the requests in flight there within it.
    pub kv_tokens: Option<u64>,
    /// Requests waiting at most; past it, a 429.
    pub max_waiting: usize,
    /// Which upstream a request goes to.
    pub router: Router,
    /// The prompt embedding the predictor uses (both SageSched policies and the cost-aware
    /// router predict; `None`: the built-in hashed n-grams).
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Entries the predictor's history holds.
    pub history: usize,
    /// Answers the predictor knows before the first request (`--history-from`): recorded
    /// prompts and their answers' lengths, learned in order at start.
    pub history_seed: Arc<[SeedAnswer]>,
    /// How long an upstream may take to answer.
    pub timeouts: Timeouts,
    /// Client connections at once at most (lowered to what the descriptor limit allows; at the
    /// cap the oldest idle connection is closed for a new one).
    pub max_connections: usize,
    /// Priority classes and tenants (`classes.rs`; built-in ones by default).
    pub classes: Arc<Classes>,
    /// How often each engine's metrics and slots are read (`engines.rs`; `None`: never, and
    /// `--concurrency` alone bounds admission).
    pub scrape: Option<std::time::Duration>,
    /// Learn each upstream's concurrency from its throughput, between 1 and `concurrency` (or
    /// its slots, when lower; the core's `learn.rs`), instead of admitting `concurrency` always.
    pub learn_concurrency: bool,
    /// Order at the engines (`--order-at engine`, `numbers.rs`): every request goes to its
    /// engine at once, up to what the engine holds, with the core's number in `priority` for
    /// the engine's own queue (vLLM's `--scheduling-policy priority`); `concurrency` then bounds
    /// only an engine that refuses numbers. `None`: requests wait in the gateway's queue.
    pub engine_order: Option<EngineOrder>,
    /// How long a client may take to send a request's headers, and then its body (a 408 after;
    /// [`CLIENT_TIMEOUT`] by default).
    pub client_timeout: std::time::Duration,
}

impl GatewayConfig {
    /// `listen` in front of `upstreams`, first come first served to the least loaded, `concurrency`
    /// in flight per upstream, at most 1024 waiting.
    pub fn new(listen: SocketAddr, upstreams: Vec<Uri>, concurrency: usize) -> GatewayConfig {
        GatewayConfig {
            listen,
            upstreams,
            policy: RequestPolicySpec::FCFS,
            concurrency,
            kv_tokens: None,
            max_waiting: 1024,
            router: Router::LeastOutstanding,
            embedder: None,
            history: crate::forecast::HISTORY,
            history_seed: Arc::from([]),
            timeouts: crate::upstream::TIMEOUTS,
            max_connections: MAX_CONNECTIONS,
            classes: Arc::new(Classes::default()),
            scrape: Some(crate::engines::SCRAPE_INTERVAL),
            learn_concurrency: false,
            engine_order: None,
            client_timeout: CLIENT_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("listen", &self.listen)
            .field("upstreams", &self.upstreams)
            .field("policy", &self.policy)
            .field("concurrency", &self.concurrency)
            .field("kv_tokens", &self.kv_tokens)
            .field("max_waiting", &self.max_waiting)
            .field("router", &self.router)
            .field("embedder", &self.embedder.as_ref().map(|e| e.name()))
            .field("history", &self.history)
            .field("history_seed", &self.history_seed.len())
            .field("timeouts", &self.timeouts)
            .field("max_connections", &self.max_connections)
            .field("classes", &self.classes)
            .field("scrape", &self.scrape)
            .field("learn_concurrency", &self.learn_concurrency)
            .field("client_timeout", &self.client_timeout)
            .finish()
    }
}

/// Why the gateway could not start: its one error (see the crate's "Errors").
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No upstream, or one that is not an `http://` URL.
    #[error("upstream: {0}")]
    Upstream(String),
    /// A zero concurrency or queue bound.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A configuration the scheduling core refused (a policy the gateway cannot run names
    /// itself and why).
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// A classes file's text refused ([`Classes::parse`]): the field and what is wrong.
    #[error(transparent)]
    Classes(#[from] InvalidClasses),
    /// The classes file at `path` refused ([`Classes::load`]).
    #[error("{path}: invalid classes file")]
    ClassesFile {
        /// The file.
        path: String,
        /// The field and what is wrong (and, for what TOML refuses, the line).
        #[source]
        source: InvalidClasses,
    },
    /// The classes file at `path` could not be read.
    #[error("{path}: cannot read")]
    ReadClasses {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listening socket, the runtime or the serving thread.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Classes {
    /// Read the classes-and-tenants TOML file at `path` ([`crate::classes`]).
    pub fn load(path: &Path) -> Result<Classes, GatewayError> {
        let path_text = || path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| GatewayError::ReadClasses {
            path: path_text(),
            source,
        })?;
        Classes::read(&text).map_err(|source| GatewayError::ClassesFile {
            path: path_text(),
            source,
        })
    }

    /// Parse a classes file's text; the error names the field and line.
    pub fn parse(text: &str) -> Result<Classes, GatewayError> {
        Ok(Classes::read(text)?)
    }
}

impl GatewayConfig {
    /// Check everything: the upstreams, every limit, and the core's configuration (built once
    /// here, so a policy the gateway cannot run is refused before a socket is bound).
    pub fn check(&self) -> Result<Config, GatewayError> {
        if self.upstreams.is_empty() {
            return Err(GatewayError::Upstream("at least one is needed".into()));
        }
        if let Some(u) = self
            .upstreams
            .iter()
            .find(|u| u.scheme_str() != Some("http"))
        {
            return Err(GatewayError::Upstream(format!(
                "`{u}` is not an http:// URL (https to an upstream is not supported)"
            )));
        }
        let zero = [
            (self.concurrency == 0, "concurrency"),
            (self.max_waiting == 0, "the queue bound"),
            (self.max_connections == 0, "the connection cap"),
            (self.history == 0, "the predictor's history"),
            (
                self.timeouts.first_byte.is_zero() || self.timeouts.idle.is_zero(),
                "an upstream timeout",
            ),
        ];
        if let Some((_, what)) = zero.iter().find(|(z, _)| *z) {
            return Err(GatewayError::Zero(what));
        }
        let core = self.core();
        RequestScheduler::new(core.clone())?;
        Ok(core)
    }

    /// The scheduling core's configuration.
    fn core(&self) -> Config {
        let limits = EngineLimits {
            concurrency: self.concurrency,
            kv_tokens: self.kv_tokens,
            block_tokens: 16,
        };
        Config {
            policy: self.policy,
            engines: vec![limits; self.upstreams.len()],
            router: self.router,
            placement: Placement::WhenFree,
            max_waiting: self.max_waiting,
            service: ServiceModel::Measured(Rates::default()),
            can_pause: false,
            knows_truth: false,
            fairness: Fairness {
                weights: self.classes.weights(),
                tenant_limits: self.classes.limits(),
                sheddable_waiting: self.classes.sheddable_waiting(),
                ..Fairness::with_eviction(self.classes.eviction())
            },
            learn_concurrency: self.learn_concurrency,
            engine_order: self.engine_order,
        }
    }

    /// Whether requests are predicted.
    pub(crate) fn predicts(&self) -> bool {
        self.policy.predicts() || self.router.predicts()
    }
}

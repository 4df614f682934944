//! What every request's handling shares: the configuration, the metrics, the core's queue,
//! the predictor, the upstreams and the engines' scrapers, built once when the gateway binds.

use crate::config::GatewayConfig;
use crate::conns::{self, Connections};
use crate::engines::Engines;
use crate::forecast::Forecaster;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::request_queue::RequestQueue;
use crate::upstream::Upstreams;
use std::sync::Arc;
use xsched_llm_predict::embedding::{Embedder, Hashed};

/// What every request's handling shares.
pub(crate) struct GatewayState {
    pub config: GatewayConfig,
    pub metrics: Arc<Metrics>,
    pub admission: Arc<RequestQueue>,
    pub forecaster: Option<Arc<Forecaster>>,
    pub upstreams: Upstreams,
    pub connections: Arc<Connections>,
    pub engines: Option<Arc<Engines>>,
    /// Each upstream as `host:port` (what the endpoint picker names to the proxy).
    endpoints: Vec<String>,
}

impl GatewayState {
    /// Each upstream as `host:port`, in the configuration's order.
    pub(crate) fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Everything requests share, for `config` in front of `admission`. Must be called in the
    /// gateway's runtime (the engines' scrapers start there).
    pub(crate) fn new(config: GatewayConfig, admission: Arc<RequestQueue>) -> GatewayState {
        let metrics = Arc::new(Metrics::for_tenants(config.classes.max_tenants()));
        let forecaster = config.predicts().then(|| {
            let embedder = config
                .embedder
                .clone()
                .unwrap_or_else(|| Arc::new(Hashed) as Arc<dyn Embedder>);
            let predictor = xsched_llm_predict::learner(config.policy.source, config.history);
            let forecaster = Forecaster::new(embedder, predictor, metrics.clone());
            forecaster.seed(&config.history_seed);
            Arc::new(forecaster)
        });
        let names = (config.upstreams.iter())
            .map(|u| u.to_string().trim_end_matches('/').to_string())
            .collect();
        let health = Health::new(admission.clone(), names);
        let engines = config.scrape.filter(|d| !d.is_zero()).map(|every| {
            Engines::spawn(
                config.upstreams.clone(),
                admission.clone(),
                every,
                config.concurrency,
            )
        });
        let upstreams = Upstreams::new(config.upstreams.clone(), config.timeouts, health);
        // An upstream connection a request in flight, and one more while it is retried.
        let upstream_connections = 2 * config.upstreams.len() * config.concurrency;
        let connections =
            Connections::new(conns::cap(config.max_connections, upstream_connections));
        let endpoints = (config.upstreams.iter())
            .map(|u| u.authority().map_or_else(String::new, ToString::to_string))
            .collect();
        GatewayState {
            endpoints,
            config,
            metrics,
            admission,
            forecaster,
            upstreams,
            connections,
            engines,
        }
    }
}

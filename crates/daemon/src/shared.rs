//! What the accept loop, every connection and the metrics endpoint share: the scheduler, the
//! registry of clients and queues, the authority and limits, and the operation counters.
//!
//! It lives apart from `server.rs` so that the files which use it (connection, metrics) need
//! not import the server that starts them: the daemon's files import each other without a loop.

use crate::admission::ConnectionLimiter;
use crate::authority::Authority;
use crate::config::DaemonConfig;
use crate::core::{LockedDispatcher, OpCounters};
use crate::error::DaemonError;
use crate::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use xsched_core::Dispatcher;

/// State shared by the accept loop and every connection.
pub(crate) struct DaemonState {
    pub(crate) core: LockedDispatcher,
    pub(crate) registry: Registry,
    pub(crate) authority: Authority,
    pub(crate) admission: Arc<ConnectionLimiter>,
    pub(crate) stopping: AtomicBool,
    /// Operations issued, for the metrics.
    pub(crate) ops: Arc<OpCounters>,
}

impl DaemonState {
    pub(crate) fn new(
        policy: Box<dyn xsched_core::Policy>,
        config: &DaemonConfig,
    ) -> Result<DaemonState, DaemonError> {
        let ops: Arc<OpCounters> = Arc::default();
        Ok(DaemonState {
            core: LockedDispatcher::new(Dispatcher::new(policy), ops.clone()),
            registry: Registry::default(),
            authority: config.authority()?,
            admission: Arc::new(ConnectionLimiter::new(config.limits.clone())),
            stopping: AtomicBool::new(false),
            ops,
        })
    }
}

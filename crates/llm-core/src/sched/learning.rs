//! What the scheduler learns of each engine's concurrency ([`Config::learn_concurrency`]): the
//! engine's reports bound its learner, answers and the engine's token counter feed it, and a
//! new limit is told to the driver ([`Decision::Limit`]) and admits (or holds back) at once.
//!
//! [`Config::learn_concurrency`]: super::Config::learn_concurrency

use super::{Decision, EngineReport, InputError, RequestScheduler};
use crate::learn::{Answer, Count, Learner};

impl RequestScheduler {
    /// The concurrency learned for `engine` (`None`: not learned, or no such engine).
    pub fn learned(&self, engine: usize) -> Option<usize> {
        Some(self.engines.get(engine)?.learner.as_ref()?.limit())
    }

    /// `engine` reported `report`: its slots bound its learner.
    pub(super) fn engine_report(
        &mut self,
        now: f64,
        engine: usize,
        report: EngineReport,
    ) -> Result<(), InputError> {
        let e = self.engine_mut(engine)?;
        let bounded = report
            .slots
            .and_then(|slots| e.learner.as_mut()?.bound(slots));
        e.report = report;
        self.limit(engine, bounded);
        self.decide(now, Some(engine));
        Ok(())
    }

    /// An answer from `engine` ended.
    pub(super) fn answered(
        &mut self,
        now: f64,
        engine: usize,
        output_tokens: u32,
        service_s: f64,
    ) -> Result<(), InputError> {
        let answer = Answer {
            at: now,
            output_tokens,
            service_s,
            backlog: self.waiting() > 0,
        };
        self.learn(now, engine, |l| l.answered(answer))
    }

    /// `engine`'s token counter read `tokens`.
    pub(super) fn generated(
        &mut self,
        now: f64,
        engine: usize,
        tokens: f64,
    ) -> Result<(), InputError> {
        let count = Count {
            at: now,
            tokens,
            backlog: self.waiting() > 0,
        };
        self.learn(now, engine, |l| l.counted(count))
    }

    /// Feed `engine`'s learner, if it has one, and admit within a new limit at once.
    fn learn(
        &mut self,
        now: f64,
        engine: usize,
        feed: impl FnOnce(&mut Learner) -> Option<usize>,
    ) -> Result<(), InputError> {
        let e = self.engine_mut(engine)?;
        let learned = e.learner.as_mut().and_then(feed);
        if self.limit(engine, learned) {
            self.decide(now, Some(engine));
        }
        Ok(())
    }

    /// A learner's new limit for `engine`, if any, told to the driver; whether there was one.
    fn limit(&mut self, engine: usize, learned: Option<usize>) -> bool {
        let Some(concurrency) = learned else {
            return false;
        };
        self.decisions.push_back(Decision::Limit {
            engine,
            concurrency,
        });
        true
    }
}

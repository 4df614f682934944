//! The tests of `collector.rs`.

use super::*;

fn us(x: u64) -> Nanos {
    Nanos::from_us(x)
}

fn collector(slo_us: u64) -> Collector {
    Collector::new(CollectorConfig {
        slo: us(slo_us),
        margin: us(50),
        launch_overhead: us(10),
        slice: us(100),
        tile: us(10),
    })
}

/// Ten requests at 0, 20 ms, 40 ms ...: `pre` us of pre-processing, two 1 ms kernels with
/// `gap` us between them, 100 us of post-processing. Returns the time the last one ended.
fn learn(c: &mut Collector, pre: u64, gap: u64) -> Nanos {
    let mut t = Nanos::ZERO;
    for r in 0..10u64 {
        t = us(20_000 * r);
        c.arrive(t, r, &[us(1000), us(1000)]);
        t += us(pre);
        for k in 0..2 {
            if k == 1 {
                t += us(gap);
            }
            c.kernel_queued(t, r);
            c.kernel_started(r);
            t += us(1000);
            c.kernel_done(t, r);
        }
        t += us(100);
        c.finish(t, r);
    }
    t
}

#[test]
fn windows_take_merged_paced_or_fitted_launches_by_length() {
    let mut c = collector(100_000);
    let end = learn(&mut c, 300, 2_000);
    // Idle after the last request (4.4 ms after it arrived): the next arrives 20 ms after it
    // and pre-processes for 300 us, a window of 15.9 ms: 158 slices of 100 us, merged.
    assert_eq!(c.grant(end, Nanos::MAX), Some(Grant::Merged(us(15_800))));
    // Inside the next request's gap (learned: 500 us) four paced slices of 110 us fit; in
    // a 60 us gap, 50 us of whole tiles.
    for (gap, want) in [(500u64, "paced"), (60, "fitted")] {
        let mut c = collector(100_000);
        learn(&mut c, 300, gap);
        let t = us(200_000);
        c.arrive(t, 99, &[us(1000), us(1000)]);
        c.kernel_queued(t + us(300), 99);
        c.kernel_started(99);
        assert_eq!(
            c.grant(t + us(300), Nanos::MAX),
            None,
            "never while HP is on the device"
        );
        let done = t + us(1300);
        c.kernel_done(done, 99);
        let g = c.grant(done, Nanos::MAX);
        match (want, g) {
            ("paced", Some(Grant::Paced { slices, .. })) => assert_eq!(slices, 4),
            ("fitted", Some(Grant::Fitted(n))) => assert_eq!(n, us(50)),
            _ => panic!("a {gap} us gap: {g:?}"),
        }
    }
}

#[test]
fn slack_decides_wait_or_kill_and_overruns() {
    // A tight SLO (2.15 ms for requests of 2.1 ms alone): no slack for anything.
    let mut c = collector(2_150);
    let end = learn(&mut c, 0, 0);
    c.arrive(end, 50, &[us(1000), us(1000)]);
    assert!(!c.slack_covers(end, us(500)), "no slack for a 500 us wait");
    assert!(!c.arrival_slack_covers(us(500)));
    // A loose one: waits are admitted, and one slice beyond a window that is gone.
    let mut c = collector(10_000);
    learn(&mut c, 0, 0);
    let due = us(200_001);
    assert!(c.arrival_slack_covers(us(500)));
    assert_eq!(c.grant(due, Nanos::MAX), Some(Grant::Overrun(us(100))));
    c.arrive(due, 50, &[us(1000), us(1000)]);
    assert!(c.slack_covers(due, us(500)));
}

/// A request arrived at 200 ms, 300 us ago, and is due to queue its first kernel (every
/// pre-processing took 300 us): no window is left, and its deadline (SLO 2.5 ms) has 100 us
/// of slack beyond its 2.1 ms rest and the 50 us margin.
fn pre_processing_ran_out(options: CollectorOptions) -> (Collector, Nanos) {
    let mut c = Collector::with_options(
        CollectorConfig {
            slo: us(2_500),
            ..collector(0).config()
        },
        options,
    );
    learn(&mut c, 300, 0);
    c.arrive(us(200_000), 50, &[us(1000), us(1000)]);
    (c, us(200_300))
}

#[test]
fn a_checkpointed_overrun_is_priced_at_one_tile() {
    // By default an overrun is priced as the whole slice and its launch, 110 us: refused.
    let (c, now) = pre_processing_ran_out(CollectorOptions::default());
    assert_eq!(c.grant(now, Nanos::MAX), None);
    assert_eq!(
        Collector::new(c.config()).grant(now, Nanos::MAX),
        None,
        "new() is the default options"
    );
    assert!(c.slack_covers(now, us(20)) && !c.slack_covers(now, us(110)));
    // Stopped at the next checkpoint, it delays the request by one tile and the launch,
    // 20 us: one slice is admitted.
    let checkpointed = CollectorOptions { checkpointed: true };
    let (c, now) = pre_processing_ran_out(checkpointed);
    assert_eq!(c.grant(now, Nanos::MAX), Some(Grant::Overrun(us(100))));
    // A request arriving now would need the device 300 us later: only the delay beyond
    // that counts against its slack (2.4 ms alone, 50 us margin, SLO 2.5 ms).
    let (default, _) = pre_processing_ran_out(CollectorOptions::default());
    assert!(!default.arrival_slack_covers(us(60)));
    assert!(c.arrival_slack_covers(us(300)) && c.arrival_slack_covers(us(350)));
    assert!(!c.arrival_slack_covers(us(351)));
}

#[test]
fn checkpointed_lp_is_always_stopped_for_an_hp_kernel() {
    // The request has 100 us of slack: by default LP may finish a 20 us release, not 110 us.
    let (c, now) = pre_processing_ran_out(CollectorOptions::default());
    assert!(c.lp_may_finish(now, us(20)) && !c.lp_may_finish(now, us(110)));
    // Checkpointed LP keeps its progress when stopped: it is stopped even when the slack
    // would cover it.
    let (c, now) = pre_processing_ran_out(CollectorOptions { checkpointed: true });
    assert!(c.slack_covers(now, us(20)));
    assert!(!c.lp_may_finish(now, us(20)) && !c.lp_may_finish(now, Nanos::ZERO));
}

//! The tests of `xqueue.rs`.

use super::*;

fn cfg(t: u32, b: u32) -> LaunchConfig {
    LaunchConfig::new(t, b).expect("valid config")
}

fn cmd_of(est_us: u64) -> CommandMeta {
    CommandMeta::with_estimate(Nanos::from_us(est_us))
}

/// A Level-1 machine under `budget_us` with `n` commands of `est_us` submitted.
fn budgeted(c: LaunchConfig, budget_us: u64, n: usize, est_us: u64) -> LaunchMachine {
    let cfg = c.with_inflight_budget(Some(Nanos::from_us(budget_us)));
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..n {
        m.submit(cmd_of(est_us));
    }
    m
}

#[test]
fn threshold_and_batch_shape_launches() {
    let mut m = LaunchMachine::new(cfg(4, 2), Level::Block);
    for _ in 0..10 {
        m.submit(cmd_of(10));
    }
    let syncs: Vec<bool> = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO))
        .map(|l| l.sync)
        .collect();
    assert_eq!(syncs, vec![false, true, false, true]);
    let s = m
        .on_synced(CommandId(1), Nanos::from_us(20))
        .expect("synced");
    assert_eq!(
        (s.first, s.last, s.now_idle),
        (CommandId(0), CommandId(1), false)
    );
    assert_eq!(m.in_flight(), 2);
    assert!(m.can_launch());
}

#[test]
fn a_protected_queue_launches_past_threshold_and_budget_but_keeps_sync_points() {
    let mut m = budgeted(cfg(4, 2), 1000, 10, 600);
    m.set_protected(true);
    let syncs: Vec<bool> = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO))
        .map(|l| l.sync)
        .collect();
    assert_eq!(
        syncs.len(),
        10,
        "neither the threshold (4) nor the budget binds"
    );
    assert_eq!(
        syncs.iter().filter(|s| **s).count(),
        5,
        "a sync point every batch (2)"
    );
    m.set_protected(false);
    m.submit(cmd_of(600));
    assert!(
        m.poll_launch(Nanos::ZERO).is_none(),
        "limits are back: 10 in flight"
    );
}

#[test]
fn tail_of_a_burst_is_a_sync_point() {
    let mut m = LaunchMachine::new(cfg(16, 8), Level::Block);
    m.submit(cmd_of(10));
    m.submit(cmd_of(10));
    let a = m.poll_launch(Nanos::ZERO).expect("launch");
    let b = m.poll_launch(Nanos::ZERO).expect("launch");
    assert!(!a.sync && b.sync);
    let s = m.on_synced(b.cmd, Nanos::from_us(20)).expect("synced");
    assert!(s.now_idle);
}

#[test]
fn budget_limits_time_in_flight() {
    let cfg = cfg(8, 4).with_inflight_budget(Some(Nanos::from_us(1000)));
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..8 {
        m.submit(cmd_of(600));
    }
    let launched: Vec<Launch> = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).collect();
    assert_eq!(
        launched.len(),
        2,
        "600 then 1200 us reaches the 1 ms budget"
    );
    assert!(
        launched[1].sync,
        "blocked by budget: must leave a sync point"
    );
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..8 {
        m.submit(cmd_of(300));
    }
    let n = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).count();
    assert_eq!(
        n, 4,
        "300, 600, 900 are under 1 ms; the fourth reaches 1200"
    );
    // Commands longer than the budget: two stay in flight so the device never idles.
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..3 {
        m.submit(cmd_of(5000));
    }
    assert!(m.poll_launch(Nanos::ZERO).is_some());
    assert!(m.poll_launch(Nanos::ZERO).is_some());
    assert!(m.poll_launch(Nanos::ZERO).is_none());
}

#[test]
fn budget_binds_at_level_1_only_and_long_commands_are_sync_points() {
    let cfg = cfg(8, 4).with_inflight_budget(Some(Nanos::from_us(1000)));
    let mut m = LaunchMachine::new(cfg, Level::Interrupt);
    for _ in 0..8 {
        m.submit(cmd_of(600));
    }
    let n = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).count();
    assert_eq!(n, 8, "Level 3: only the threshold limits launching");
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..3 {
        m.submit(cmd_of(600));
    }
    let syncs: Vec<bool> = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO))
        .map(|l| l.sync)
        .collect();
    assert_eq!(
        syncs,
        vec![true, true],
        "600 us >= half the budget: each one"
    );
}

#[test]
fn one_long_command_in_flight_once_the_launch_gap_is_small_against_it() {
    let cfg = cfg(8, 4).with_inflight_budget(Some(Nanos::from_us(1000)));
    let in_flight_with = |gap_us: Option<u64>, est_us: u64| {
        let mut m = LaunchMachine::new(cfg, Level::Block);
        if let Some(g) = gap_us {
            m.observe_launch_gap(Nanos::from_us(g));
        }
        for _ in 0..4 {
            m.submit(cmd_of(est_us));
        }
        std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).count()
    };
    for (gap_us, est_us, want, why) in [
        (None, 5000, 2, "no measured gap: two"),
        (Some(100), 5000, 1, "5 ms >= 20 x 100 us: one"),
        (Some(100), 2000, 1, "exactly 20 x the gap: one"),
        (Some(100), 1900, 2, "below 20 x the gap: two"),
        (Some(10), 300, 4, "short ones: the budget binds"),
    ] {
        assert_eq!(in_flight_with(gap_us, est_us), want, "{why}");
    }
    let mut m = LaunchMachine::new(cfg, Level::Block);
    m.observe_launch_gap(Nanos::from_us(100));
    m.observe_launch_gap(Nanos::from_us(500));
    assert_eq!(m.launch_gap(), Some(Nanos::from_us(200)), "averaged 6:2");
}

#[test]
fn the_refill_point_frees_half_a_binding_budget() {
    let mut m = budgeted(cfg(16, 8), 500, 8, 100);
    assert_eq!(m.refill_point(), None, "nothing launched: room");
    let launched: Vec<Launch> = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).collect();
    assert_eq!(launched.len(), 5, "500 us of 100 us commands");
    assert!(launched[4].sync && !launched[1].sync);
    assert_eq!(
        m.refill_point(),
        Some(CommandId(2)),
        "after the third, 200 us <= half the budget are left"
    );
    m.on_synced(CommandId(2), Nanos::from_us(300));
    assert!(m.can_launch(), "observing it makes room");
    assert_eq!(m.suspend(), HwAction::Nothing);
    assert_eq!(m.refill_point(), None, "suspended: nothing to refill");
    let cfg = cfg(16, 8).with_inflight_budget(Some(Nanos::from_us(500)));
    let mut m = LaunchMachine::new(cfg, Level::Interrupt);
    m.submit(cmd_of(100));
    assert_eq!(m.refill_point(), None, "no budget above Level 1");
}

#[test]
fn measured_duration_feeds_the_budget() {
    let cfg = cfg(8, 1).with_inflight_budget(Some(Nanos::from_us(250)));
    let mut m = LaunchMachine::new(cfg, Level::Block);
    for _ in 0..6 {
        m.submit(CommandMeta::default());
    }
    let l = m.poll_launch(Nanos::ZERO).expect("launch");
    m.on_synced(l.cmd, Nanos::from_us(100));
    let n = std::iter::from_fn(|| m.poll_launch(Nanos::from_us(100))).count();
    assert_eq!(n, 3, "100 us each: the third reaches 300 >= 250");
}

#[test]
fn suspend_actions_follow_level() {
    for (level, s, r) in [
        (Level::Block, HwAction::Nothing, HwAction::Nothing),
        (
            Level::Deactivate,
            HwAction::Deactivate,
            HwAction::Reactivate,
        ),
        (Level::Interrupt, HwAction::Interrupt, HwAction::Restore),
    ] {
        let mut m = LaunchMachine::new(cfg(4, 2), level);
        m.submit(cmd_of(1));
        assert_eq!(m.suspend(), s);
        assert_eq!(m.suspend(), HwAction::Nothing, "idempotent");
        assert!(m.poll_launch(Nanos::ZERO).is_none());
        assert!(
            !m.set_level(Level::Block),
            "no level change while suspended"
        );
        assert_eq!(m.resume(), r);
        assert_eq!(m.resume(), HwAction::Nothing);
        assert!(m.poll_launch(Nanos::ZERO).is_some());
        // Closing undoes a suspend and refuses every later one.
        assert_eq!(m.suspend(), s);
        assert_eq!(m.close(), r);
        assert_eq!(m.suspend(), HwAction::Nothing, "closed");
        assert!(!m.is_suspended());
    }
}

#[test]
fn a_queue_running_while_deactivated_launches_only_at_level_2() {
    for (level, launches) in [
        (Level::Block, false),
        (Level::Deactivate, true),
        (Level::Interrupt, false),
    ] {
        let mut m = LaunchMachine::new(cfg(2, 1), level);
        m.set_runs_while_deactivated(true);
        for _ in 0..3 {
            m.submit(cmd_of(1));
        }
        let _ = m.suspend();
        assert!(m.is_suspended());
        assert_eq!(m.can_launch(), launches, "{level:?}");
        let n = std::iter::from_fn(|| m.poll_launch(Nanos::ZERO)).count();
        assert_eq!(n, if launches { 2 } else { 0 }, "the threshold still holds");
    }
}

#[test]
fn cancel_drops_only_pending() {
    let mut m = LaunchMachine::new(cfg(2, 1), Level::Block);
    for _ in 0..5 {
        m.submit(cmd_of(1));
    }
    assert!(m.poll_launch(Nanos::ZERO).is_some());
    assert_eq!(m.cancel_pending(), 4);
    assert_eq!(m.in_flight(), 1);
    assert!(!m.is_idle());
}

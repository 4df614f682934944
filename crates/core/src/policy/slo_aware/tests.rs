//! The tests of `slo_aware.rs`.

use super::super::test_util::view;
use super::*;

/// An HP queue (SLO 7 ms: its 6.7 ms requests leave little slack) and an LP queue.
fn queues() -> [QueueView; 2] {
    queues_with_slo(Nanos::from_ms(7))
}

fn queues_with_slo(slo: Nanos) -> [QueueView; 2] {
    let mut hp = view(0, 0, 0, false);
    hp.hints.slo = Some(slo);
    [hp, view(1, 0, 0, true)]
}

/// Drive `p` through `requests` periodic requests (every 12 ms: 8 kernels of 800 us with
/// 40 us gaps); returns the LP run flag sampled at each decision, with its time.
fn drive(p: &mut SloAware, requests: u64) -> Vec<(Nanos, bool)> {
    drive_with(p, requests, queues(), 40)
}

/// Periodic requests (every 12 ms) of 8 kernels of 800 us with `gap_us` between them.
fn drive_with(
    p: &mut SloAware,
    requests: u64,
    mut qs: [QueueView; 2],
    gap_us: u64,
) -> Vec<(Nanos, bool)> {
    let mut seen = Vec::new();
    let mut at = |p: &mut SloAware, qs: &[QueueView; 2], t: Nanos| {
        let mut run = vec![true; 2];
        p.schedule(t, qs, &mut run);
        assert!(run[0], "the HP queue is never suspended");
        seen.push((t, run[1]));
    };
    for r in 0..requests {
        let start = Nanos::from_ms(12 * r);
        let mut t = start;
        for _ in 0..8 {
            qs[0].ready = true;
            at(p, &qs, t);
            t += Nanos::from_us(800);
            qs[0].ready = false;
            at(p, &qs, t);
            // Timers inside the gap (a grant ending) fire before the next kernel.
            let next_kernel = t + Nanos::from_us(gap_us);
            while let Some(due) = p.next_timer().filter(|&n| n < next_kernel) {
                at(p, &qs, due);
            }
            t = next_kernel;
        }
        // Timers until the next request.
        while let Some(next) = p.next_timer().filter(|&n| n < start + Nanos::from_ms(12)) {
            at(p, &qs, next);
        }
    }
    seen
}

#[test]
fn lp_runs_in_the_long_idle_windows_only_and_never_while_hp_is_busy() {
    let mut p = SloAware::harvest();
    let seen = drive(&mut p, 80);
    // After learning (the last 20 requests), LP runs between requests...
    let late: Vec<&(Nanos, bool)> = seen
        .iter()
        .filter(|(t, _)| *t >= Nanos::from_ms(12 * 60))
        .collect();
    assert!(late.iter().any(|(_, lp)| *lp), "LP harvests the idle time");
    // ... but never inside one (the 40 us gaps are shorter than the stop cost).
    for r in 60..80u64 {
        let inside = Nanos::from_ms(12 * r) + Nanos::from_us(800);
        let first_kernel_done = late.iter().find(|(t, _)| *t == inside);
        assert_eq!(
            first_kernel_done.map(|(_, lp)| *lp),
            Some(false),
            "request {r}: no LP in a 40 us gap"
        );
    }
}

#[test]
fn inside_requests_lp_runs_in_windows_only_whatever_the_slack() {
    let inside = |gap_us: u64| {
        let mut p = SloAware::harvest();
        let seen = drive_with(&mut p, 80, queues_with_slo(Nanos::from_ms(40)), gap_us);
        let period = Nanos::from_ms(12).0;
        seen.iter()
            .filter(|(t, lp)| {
                *lp && *t >= Nanos::from_ms(12 * 60)
                    && Nanos(t.0 % period) < Nanos::from_us(7 * (800 + gap_us))
            })
            .count()
    };
    assert_eq!(
        inside(40),
        0,
        "a 40 us gap holds no window, and slack does not overrun"
    );
    assert!(
        inside(400) > 0,
        "a 400 us gap holds a window (stop 200 us + a slice)"
    );
}

#[test]
fn the_request_split_is_learned_from_idle_periods() {
    let mut p = SloAware::harvest();
    drive(&mut p, 20);
    let split = p.services[0].split.expect("two groups of idle periods");
    assert!(
        split > Nanos::from_us(40) && split < Nanos::from_us(5_000),
        "{split}"
    );
    assert_eq!(p.services[0].counts.back(), Some(&8), "8 kernels a request");
}

#[test]
fn between_requests_runs_lp_only_after_a_request_ended() {
    let mut p = SloAware::between_requests();
    let seen = drive(&mut p, 40);
    let late = seen.iter().filter(|(t, _)| *t >= Nanos::from_ms(12 * 30));
    let lp_times: Vec<Nanos> = late.filter(|(_, lp)| *lp).map(|(t, _)| *t).collect();
    assert!(!lp_times.is_empty());
    for t in lp_times {
        let into = Nanos(t.0 % Nanos::from_ms(12).0);
        assert!(
            into > Nanos::from_us(8 * 840 - 40),
            "LP at {t} is inside a request"
        );
    }
}

#[test]
fn a_service_that_stops_sending_releases_lp() {
    // An SLO (5 ms) shorter than a request (8 x 800 us): no stop ever fits its slack. When
    // the service stops sending, the window it was predicted to leave ends at its next
    // (missing) arrival, 240 ms, and LP must still run once the silence is far longer than
    // any idle period the service showed (about 5.3 ms between requests), not wait for ever.
    let mut p = SloAware::harvest();
    let mut qs = queues_with_slo(Nanos::from_ms(5));
    drive_with(&mut p, 20, qs, 40);
    qs[0].ready = false;
    for t in [300, 10_000] {
        let mut run = vec![true; 2];
        p.schedule(Nanos::from_ms(t), &qs, &mut run);
        assert!(run[1], "LP held at {t} ms by a service idle since 235 ms");
    }
}

#[test]
fn no_queue_with_an_slo_is_an_error() {
    let p = SloAware::harvest();
    let mut qs = queues();
    assert!(p.check(&qs).is_ok());
    qs[0].hints.slo = None;
    let err = p
        .check(&qs)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("SLO"), "{err}");
}

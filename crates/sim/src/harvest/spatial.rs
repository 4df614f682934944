//! MPS-like spatial sharing: the HP kernel at the head of its queue and the LP kernel run at
//! once; while both run, each progresses at `speedup / 2` of its standalone rate (the device's
//! published two-process throughput), otherwise at full rate. Nothing is ever preempted.

use super::{HarvestRun, Params};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use xsched_core::Nanos;
use xsched_workload::service::HpRequest;

/// Run the HP requests beside an endless LP job, both always admitted.
pub(super) fn run(reqs: &[HpRequest], p: &Params) -> HarvestRun {
    let shared_rate = (p.spatial_speedup / 2.0).clamp(f64::MIN_POSITIVE, 1.0);
    let mut now = 0.0f64; // ns, fractional: progress under sharing is not integral
    let mut next_arrival = 0;
    // (time, request, kernel) submissions; kernel == kernels.len() is the completion.
    let mut timers: BinaryHeap<Reverse<(u64, usize, usize)>> = BinaryHeap::new();
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    let mut hp: Option<(usize, usize, f64)> = None; // running HP kernel, work left (ns)
    let mut lp_left = p.lp_kernel.0 as f64;
    let mut lp_done = 0.0f64;
    let mut hp_busy = Nanos::ZERO;
    let mut latencies = vec![None; reqs.len()];
    let mut active = 0usize;
    loop {
        if hp.is_none()
            && let Some((r, k)) = queue.pop_front()
        {
            hp = Some((r, k, reqs[r].kernels[k].0 as f64));
        }
        let rate = if hp.is_some() { shared_rate } else { 1.0 };
        let t_hp = hp.map(|(_, _, left)| now + left / rate);
        let t_lp = now + lp_left / rate;
        let t_timer = timers.peek().map(|Reverse((t, _, _))| *t as f64);
        let t_arrival = reqs.get(next_arrival).map(|r| r.arrival.0 as f64);
        if next_arrival == reqs.len() && active == 0 {
            break;
        }
        let next = [t_hp, Some(t_lp), t_timer, t_arrival]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min);
        let dt = next - now;
        now = next;
        lp_left -= dt * rate;
        lp_done += dt * rate;
        if let Some((_, _, left)) = hp.as_mut() {
            *left -= dt * rate;
        }
        // Whichever event was the earliest happens now, exactly (float residue aside).
        if t_lp == next {
            lp_done += lp_left; // residue
            lp_left = p.lp_kernel.0 as f64 + p.launch_overhead.0 as f64;
            lp_done -= p.launch_overhead.0 as f64;
        }
        let at = Nanos(now.round() as u64);
        if let Some((r, k, _)) = hp
            && t_hp == Some(next)
        {
            hp = None;
            hp_busy += reqs[r].kernels[k];
            let req = &reqs[r];
            let (delay, next_k) = match req.gaps.get(k) {
                Some(gap) => (*gap, k + 1),
                None => (req.post, req.kernels.len()),
            };
            timers.push(Reverse(((at + delay).0, r, next_k)));
        } else if t_timer == Some(next) {
            if let Some(Reverse((_, r, k))) = timers.pop() {
                if k == reqs[r].kernels.len() {
                    latencies[r] = Some(at.saturating_sub(reqs[r].arrival));
                    active -= 1;
                } else {
                    queue.push_back((r, k));
                }
            }
        } else if t_arrival == Some(next) {
            let r = next_arrival;
            next_arrival += 1;
            active += 1;
            timers.push(Reverse(((at + reqs[r].pre).0, r, 0)));
        }
    }
    HarvestRun {
        latencies: latencies.into_iter().flatten().collect(),
        hp_busy,
        lp_useful: Nanos(lp_done.max(0.0) as u64),
        window: Nanos(now.round() as u64),
        preempt_delays: Vec::new(),
    }
}

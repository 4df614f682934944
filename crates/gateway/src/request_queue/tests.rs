//! The tests of `request_queue`: waiters admitted in order, given up, and refused.

use super::*;
use std::future::Future;
use std::task::{Context, Poll, Waker};
use xsched_llm_core::ShedReason;

use arrival_for_tests as arrival;
use for_tests as admission;

type Pending<'a> = std::pin::Pin<Box<dyn Future<Output = Result<Slot, RequestRefused>> + 'a>>;

fn poll_admit<'a>(
    a: &'a Arc<RequestQueue>,
    tokens: f64,
    cx: &mut Context<'_>,
) -> Result<Slot, Pending<'a>> {
    let mut f: Pending<'a> = Box::pin(a.admit(arrival(tokens)));
    match f.as_mut().poll(cx) {
        Poll::Ready(r) => Ok(r.expect("admitted")),
        Poll::Pending => Err(f),
    }
}

#[test]
fn waiters_are_admitted_in_the_policys_order_as_slots_free() {
    let a = admission("sagesched", 1, 1, 8);
    let mut cx = Context::from_waker(Waker::noop());
    let held = poll_admit(&a, 5.0, &mut cx).unwrap_or_else(|_| panic!("free"));
    let mut waits: Vec<(f64, Option<Pending>)> = [300.0, 10.0, 20.0]
        .into_iter()
        .map(|t| (t, poll_admit(&a, t, &mut cx).err()))
        .collect();
    assert_eq!(a.load(1), (3, vec![1]));
    drop(held);
    let mut order = Vec::new();
    for _ in 0..3 {
        let (tokens, slot) = waits
            .iter_mut()
            .find_map(|(t, w)| match w.as_mut()?.as_mut().poll(&mut cx) {
                Poll::Ready(r) => {
                    *w = None;
                    Some((*t, r.expect("admitted")))
                }
                Poll::Pending => None,
            })
            .expect("one was admitted");
        order.push(tokens);
        drop(slot);
    }
    assert_eq!(order, [10.0, 20.0, 300.0], "shortest predicted first");
    assert_eq!(a.load(1), (0, vec![0]));
}

#[test]
fn a_waiter_given_up_as_its_slot_arrives_passes_the_slot_on() {
    let a = admission("fcfs", 1, 1, 8);
    let mut cx = Context::from_waker(Waker::noop());
    let held = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("free"));
    let queued = poll_admit(&a, 1.0, &mut cx).expect_err("queued");
    assert_eq!(a.load(1), (1, vec![1]));
    // The held slot goes to the waiter, which is dropped before it runs again.
    drop(held);
    drop(queued);
    assert_eq!(a.load(1), (0, vec![0]), "no slot leaked");
    // Waiters given up while every slot is busy leave the queue at once.
    let _busy = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("free again"));
    for _ in 0..8 {
        drop(poll_admit(&a, 1.0, &mut cx).expect_err("queued"));
    }
    assert_eq!(a.load(1), (0, vec![1]), "the queue holds no dead waiters");
}

#[test]
fn past_its_bound_the_queue_refuses_and_gone_waiters_take_no_slot() {
    let a = admission("fcfs", 2, 1, 1);
    let mut cx = Context::from_waker(Waker::noop());
    let s1 = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("upstream 0"));
    let s2 = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("upstream 1"));
    assert_ne!(s1.upstream(), s2.upstream(), "the least loaded upstream");
    let waiting = poll_admit(&a, 1.0, &mut cx).expect_err("queued");
    assert_eq!(a.refusal(0, 0), Some(RequestRefused::Full(1)));
    assert_eq!(
        a.refusal(-1, 0),
        Some(RequestRefused::Shed(ShedReason::QueueFull)),
        "sheddable: shed"
    );
    let mut refused = Box::pin(a.admit(arrival(1.0)));
    assert_eq!(
        refused.as_mut().poll(&mut cx).map(|r| r.err()),
        Poll::Ready(Some(RequestRefused::Full(1)))
    );
    drop(waiting);
    assert_eq!(a.load(2), (0, vec![1, 1]));
    drop(s1);
    assert_eq!(a.load(2), (0, vec![0, 1]), "the gone waiter took no slot");
    drop(s2);
    assert_eq!(a.arrivals(), 4);
}

//! A simulated engine's waiting queue, in either of vLLM's scheduling policies: `fcfs` (in the
//! order requests were sent; a preempted request goes first again) or `priority` (by the
//! number each request was sent with, lower first, then the order sent; a preempted request
//! goes back by its number: `vllm/v1/core/sched/request_queue.py`). The engine runs `priority`
//! from the first request it is sent with a number (`--scheduling-policy priority`).

use std::collections::VecDeque;

/// The waiting requests, by index.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    queue: VecDeque<usize>,
    /// Each request's (number, order sent) under `priority`, by index.
    keys: Vec<(i64, u64)>,
    /// Whether the engine runs `priority`.
    ordered: bool,
    sent: u64,
}

impl Waiting {
    /// Room for requests `0..n`.
    pub fn new(n: usize) -> Waiting {
        Waiting {
            keys: vec![(0, 0); n],
            ..Waiting::default()
        }
    }

    /// Whether the engine runs `priority`.
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    /// Request `i`'s place under `priority`.
    pub fn key(&self, i: usize) -> (i64, u64) {
        self.keys[i]
    }

    /// Request `i` is sent, with `priority` or none (the default 0 under `priority`).
    pub fn send(&mut self, i: usize, priority: Option<i64>) {
        self.ordered |= priority.is_some();
        self.keys[i] = (priority.unwrap_or(0), self.sent);
        self.sent += 1;
        if self.ordered {
            self.insert(i);
        } else {
            self.queue.push_back(i);
        }
    }

    /// Request `i` was preempted: first again (`fcfs`), or back by its number (`priority`).
    pub fn requeue(&mut self, i: usize) {
        if self.ordered {
            self.insert(i);
        } else {
            self.queue.push_front(i);
        }
    }

    fn insert(&mut self, i: usize) {
        let key = self.keys[i];
        let k = self.queue.partition_point(|&q| self.keys[q] <= key);
        self.queue.insert(k, i);
    }

    /// The next to start.
    pub fn front(&self) -> Option<usize> {
        self.queue.front().copied()
    }

    /// Take the next to start.
    pub fn pop_front(&mut self) -> Option<usize> {
        self.queue.pop_front()
    }

    /// Drop request `i`, wherever it waits.
    pub fn remove(&mut self, i: usize) {
        self.queue.retain(|&r| r != i);
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcfs_keeps_the_order_sent_and_puts_a_preempted_request_first() {
        let mut w = Waiting::new(3);
        w.send(0, None);
        w.send(1, None);
        w.requeue(2);
        assert_eq!(
            (w.pop_front(), w.pop_front(), w.pop_front()),
            (Some(2), Some(0), Some(1))
        );
    }

    #[test]
    fn priority_orders_by_number_then_order_sent_and_requeues_by_number() {
        let mut w = Waiting::new(4);
        w.send(0, Some(5));
        w.send(1, Some(1));
        w.send(2, Some(5));
        w.send(3, Some(3));
        assert!(w.ordered());
        assert_eq!(w.pop_front(), Some(1));
        // Preempted, 1 goes back by its number: first again here, but behind nothing lower.
        w.requeue(1);
        assert_eq!(w.front(), Some(1));
        w.pop_front();
        assert_eq!(
            (w.pop_front(), w.pop_front(), w.pop_front()),
            (Some(3), Some(0), Some(2))
        );
    }
}

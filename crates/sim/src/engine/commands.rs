//! Commands from the launch machines to the devices and back: a launch after the launcher's
//! cost, a device step that completes commands, and the observation of synchronization points
//! that ends request stages.

use super::{Ev, Sim, StageEnd};
use crate::device::HwCmd;
use xsched_core::{CommandId, Nanos, QueueEvent, QueueId};

impl Sim {
    pub(super) fn kick(&mut self, q: usize) {
        let xq = &mut self.xqs[q];
        if !xq.launching && xq.m.can_launch() {
            xq.launching = true;
            let d = xq.device;
            let at = if self.spec.devices[d].shared_launcher && xq.scheduled {
                // One dispatcher for the device's queues: launches wait their turn.
                let at = self.now.max(self.launcher_free[d]) + xq.launch_cost;
                self.launcher_free[d] = at;
                at
            } else {
                self.now + xq.launch_cost
            };
            self.push(at, Ev::Launch(q as u32));
        }
    }

    pub(super) fn launch(&mut self, q: usize) {
        let now = self.now;
        let xq = &mut self.xqs[q];
        xq.launching = false;
        let Some(l) = xq.m.poll_launch(now) else {
            return;
        };
        let (work, idempotent) = xq.durations.pop_front().unwrap_or((Nanos::ZERO, false));
        let (d, hwq) = (xq.device, xq.hwq);
        // The application waits for each request stage's result (a stream or event sync), so
        // its last command is observed even when more work is already queued behind it.
        let ends_stage = xq
            .stage_ends
            .iter()
            .rev()
            .take_while(|s| s.last >= l.cmd)
            .any(|s| s.last == l.cmd);
        let sync = l.sync || ends_stage;
        self.devices[d].push(hwq, HwCmd::new(q as u32, l.cmd, work, sync, idempotent));
        self.touch_device(d);
        self.kick(q);
    }

    pub(super) fn touch_device(&mut self, d: usize) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.done_buf);
        let next = self.devices[d].step(now, &mut done);
        let in_window = now >= self.spec.warmup;
        for c in done.drain(..) {
            if in_window {
                self.xqs[c.xq as usize].work_done += c.work;
            }
            if c.sync {
                let at = now + self.xqs[c.xq as usize].sync_cost;
                self.push(at, Ev::Observe(c.xq, c.cmd.0));
            }
        }
        self.done_buf = done;
        if next != self.device_next[d] {
            self.device_next[d] = next;
            if let Some(t) = next {
                self.push(t, Ev::Device(d as u16));
            }
        }
        self.check_probe(d);
    }

    pub(super) fn observe(&mut self, q: usize, cmd: CommandId) {
        let now = self.now;
        let xq = &mut self.xqs[q];
        let Some(synced) = xq.m.on_synced(cmd, now) else {
            return;
        };
        let mut finished: [Option<StageEnd>; 4] = [None; 4];
        loop {
            let mut n = 0;
            let xq = &mut self.xqs[q];
            while n < finished.len() && xq.stage_ends.front().is_some_and(|s| s.last <= synced.last)
            {
                finished[n] = xq.stage_ends.pop_front();
                n += 1;
            }
            if n == 0 {
                break;
            }
            for s in finished.iter().take(n).flatten() {
                self.stage_done(s.workload as usize, s.stage as usize, s.arrival);
            }
        }
        if self.xqs[q].m.is_idle() {
            self.notify(q, QueueEvent::Idle(QueueId(q as u32)));
        }
        self.kick(q);
    }
}

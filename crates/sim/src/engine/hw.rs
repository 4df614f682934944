//! Suspend and resume reaching the hardware: what the launch machine asks of it, taking effect
//! after the device's deactivate, interrupt or restore time (a late effect the queue's state
//! has since overtaken is dropped).

use super::{Ev, HwEffect, Sim};
use xsched_core::HwAction;

impl Sim {
    pub(super) fn apply(&mut self, q: usize, suspend: bool) {
        let action = if suspend {
            self.xqs[q].m.suspend()
        } else {
            self.xqs[q].m.resume()
        };
        self.execute(q, action);
        if !suspend {
            self.kick(q);
        }
    }

    /// Carry out what the launch machine asked of the hardware, after the device's latency.
    fn execute(&mut self, q: usize, action: HwAction) {
        let dev = &self.spec.devices[self.xqs[q].device];
        let (deactivate, interrupt, restore) = (dev.deactivate, dev.interrupt, dev.restore);
        match action {
            HwAction::Nothing => {}
            HwAction::Deactivate => {
                self.push(
                    self.now + deactivate,
                    Ev::Hw(q as u32, HwEffect::Deactivate),
                );
            }
            HwAction::Interrupt => {
                self.push(self.now + interrupt, Ev::Hw(q as u32, HwEffect::Interrupt));
            }
            HwAction::Reactivate => self.set_hw(q, HwEffect::Restore),
            HwAction::Restore => {
                self.push(self.now + restore, Ev::Hw(q as u32, HwEffect::Restore));
            }
        }
    }

    pub(super) fn hw_effect(&mut self, q: usize, effect: HwEffect) {
        // A late effect that the queue's state has since overtaken is dropped.
        let suspended = self.xqs[q].m.is_suspended();
        let wants_suspended = effect != HwEffect::Restore;
        if suspended == wants_suspended {
            self.set_hw(q, effect);
        }
    }

    fn set_hw(&mut self, q: usize, effect: HwEffect) {
        let (d, hwq) = (self.xqs[q].device, self.xqs[q].hwq);
        let now = self.now;
        let dev = &mut self.devices[d];
        match effect {
            HwEffect::Deactivate => dev.set_deactivated(now, hwq, true),
            HwEffect::Interrupt => {
                dev.set_deactivated(now, hwq, true);
                dev.set_interrupted(now, hwq, true);
            }
            HwEffect::Restore => {
                dev.set_interrupted(now, hwq, false);
                dev.set_deactivated(now, hwq, false);
            }
        }
        self.touch_device(d);
    }
}

//! Work that tasks hand to whoever is already doing the same kind of work, so that one of them
//! does it for all in one go instead of each waiting for its turn.
//!
//! A combiner has lanes: the connections' combiner of commands on a hot key has one per key
//! stripe, the keyspace's combiner of storage writes has one. The first task to come to a lane leads it; tasks that come while it leads queue their jobs
//! there as guests, and wait without holding a thread. The leader takes the queue, does its own
//! job and the guests' together and hands every guest its result. Leadership then passes to the
//! oldest guest that queued meanwhile, so no job waits behind more than one round.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// The guest queues of all lanes, for guests asking for `J` to be done and getting `R`.
pub struct Combiner<J, R> {
    lanes: Arc<[Mutex<Queue<J, R>>]>,
}

struct Queue<J, R> {
    /// Whether a task leads this lane; guests queue only then.
    led: bool,
    guests: VecDeque<Guest<J, R>>,
}

/// A job waiting for its lane's leader to do it.
pub struct Guest<J, R> {
    pub job: J,
    pub handback: oneshot::Sender<Handback<J, R>>,
}

/// What a guest gets back.
pub enum Handback<J, R> {
    /// The leader did its job.
    Ran(R),
    /// It leads now, with its job back: the previous leader finished while it was queued.
    Lead(Leadership<J, R>, J),
}

/// How a task joins a lane.
pub enum Entry<J, R> {
    Lead(Leadership<J, R>),
    Queued(oneshot::Receiver<Handback<J, R>>),
}

impl<J, R> Clone for Combiner<J, R> {
    fn clone(&self) -> Self {
        Combiner {
            lanes: self.lanes.clone(),
        }
    }
}

impl<J, R> Combiner<J, R> {
    pub fn new(lanes: usize) -> Self {
        Combiner {
            lanes: (0..lanes)
                .map(|_| {
                    Mutex::new(Queue {
                        led: false,
                        guests: VecDeque::new(),
                    })
                })
                .collect(),
        }
    }

    /// Leads `lane` if nobody does, else queues the job that `job` makes.
    pub fn enter(&self, lane: usize, job: impl FnOnce() -> J) -> Entry<J, R> {
        let mut queue = self.lanes[lane].lock();
        if !queue.led {
            queue.led = true;
            return Entry::Lead(Leadership {
                combiner: self.clone(),
                lane,
                passed: false,
            });
        }
        let (handback, receiver) = oneshot::channel();
        queue.guests.push_back(Guest {
            job: job(),
            handback,
        });
        Entry::Queued(receiver)
    }
}

/// The right to do a lane's queued jobs. Dropping it passes the lead to the oldest guest, or
/// frees the lane if none waits; a guest that has gone away passes it on in turn.
pub struct Leadership<J, R> {
    combiner: Combiner<J, R>,
    lane: usize,
    /// Whether the lead has been passed on already.
    passed: bool,
}

impl<J, R> Leadership<J, R> {
    /// Every guest queued so far, oldest first.
    pub fn take_guests(&self) -> Vec<Guest<J, R>> {
        self.combiner.lanes[self.lane]
            .lock()
            .guests
            .drain(..)
            .collect()
    }
}

impl<J, R> Leadership<J, R> {
    /// Passes the lead to the oldest guest, or frees the lane if none waits; returns whether the
    /// oldest guest took it.
    pub fn hand_on(mut self) -> bool {
        self.pass()
    }

    fn pass(&mut self) -> bool {
        if self.passed {
            return false;
        }
        self.passed = true;
        let next = {
            let mut queue = self.combiner.lanes[self.lane].lock();
            let next = queue.guests.pop_front();
            queue.led = next.is_some();
            next
        };
        let Some(guest) = next else {
            return false;
        };
        let lead = Leadership {
            combiner: self.combiner.clone(),
            lane: self.lane,
            passed: false,
        };
        // A refused hand-off drops the new leadership here, outside the queue's lock, which
        // passes it to the next guest.
        guest.handback.send(Handback::Lead(lead, guest.job)).is_ok()
    }
}

impl<J, R> Drop for Leadership<J, R> {
    fn drop(&mut self) {
        self.pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Test = Combiner<&'static str, u32>;

    fn lead(combiner: &Test, lane: usize) -> Leadership<&'static str, u32> {
        match combiner.enter(lane, || "leader") {
            Entry::Lead(leadership) => leadership,
            Entry::Queued(_) => panic!("lane {lane} is led already"),
        }
    }

    fn queue(
        combiner: &Test,
        lane: usize,
        job: &'static str,
    ) -> oneshot::Receiver<Handback<&'static str, u32>> {
        match combiner.enter(lane, || job) {
            Entry::Queued(receiver) => receiver,
            Entry::Lead(_) => panic!("lane {lane} has no leader"),
        }
    }

    #[test]
    fn guests_queue_only_while_a_lane_is_led() {
        let combiner = Test::new(16);
        let leader = lead(&combiner, 7);
        let mut a = queue(&combiner, 7, "a");
        let _b = queue(&combiner, 7, "b");
        drop(lead(&combiner, 8));
        let guests = leader.take_guests();
        assert_eq!(guests.iter().map(|g| g.job).collect::<Vec<_>>(), ["a", "b"]);
        for (guest, result) in guests.into_iter().zip([1, 2]) {
            let _ = guest.handback.send(Handback::Ran(result));
        }
        assert!(matches!(a.try_recv(), Ok(Handback::Ran(1))));
        drop(leader);
        drop(lead(&combiner, 7));
    }

    #[test]
    fn leadership_passes_to_the_oldest_guest_then_frees_the_lane() {
        let combiner = Test::new(16);
        let leader = lead(&combiner, 3);
        let mut a = queue(&combiner, 3, "a");
        let mut b = queue(&combiner, 3, "b");
        drop(leader);
        let Ok(Handback::Lead(next, "a")) = a.try_recv() else {
            panic!("the oldest guest leads next");
        };
        assert!(b.try_recv().is_err(), "b still waits");
        assert_eq!(next.take_guests().len(), 1);
        drop(next);
        assert!(
            b.try_recv().is_err(),
            "b was taken by the leader, not handed the lead"
        );
        drop(lead(&combiner, 3));
    }

    #[test]
    fn a_guest_that_went_away_passes_the_lead_on() {
        let combiner = Test::new(16);
        let leader = lead(&combiner, 0);
        drop(queue(&combiner, 0, "gone"));
        let mut c = queue(&combiner, 0, "c");
        drop(leader);
        let Ok(Handback::Lead(next, "c")) = c.try_recv() else {
            panic!("the lead skips a guest that went away");
        };
        drop(next);
        drop(lead(&combiner, 0));
    }
}

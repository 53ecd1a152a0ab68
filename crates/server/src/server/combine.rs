//! Writes that connections hand to whoever is writing their key: how a hot key stops costing
//! one storage write and one task hand-off per command.
//!
//! Without this, fifty clients pushing to one list take the key's stripe one at a time, and
//! every command pays a RocksDB write plus a wake-up of the next waiter while the others
//! queue. Instead, the first connection to want a stripe becomes its leader; connections that
//! come while it leads queue their commands here as guests. The leader takes the queue, runs
//! its own command and the guests' as one transaction (each reads what the previous wrote),
//! commits them with one write and hands every guest its outcome. Leadership then passes to
//! the first guest that queued meanwhile, so no command waits behind more than one round.
//!
//! A guest's command runs with a stand-in of its client state; only commands that use no more
//! of it than the database and protocol qualify (see `Connection::combinable_stripe`).

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::types::STRIPES;

/// The guest queues of all stripes, for guests asking for `J` to be run and getting `R`.
pub struct Combiner<J, R> {
    stripes: Arc<[Mutex<Queue<J, R>>]>,
}

struct Queue<J, R> {
    /// Whether a connection leads this stripe; guests queue only then.
    led: bool,
    guests: VecDeque<Guest<J, R>>,
}

/// A job waiting for its stripe's leader to run it.
pub struct Guest<J, R> {
    pub job: J,
    pub handback: oneshot::Sender<Handback<J, R>>,
}

/// What a guest gets back.
pub enum Handback<J, R> {
    /// The leader ran its job.
    Ran(R),
    /// It leads now: the previous leader finished while it was queued.
    Lead(Leadership<J, R>),
}

/// How a connection joins a stripe.
pub enum Entry<J, R> {
    Lead(Leadership<J, R>),
    Queued(oneshot::Receiver<Handback<J, R>>),
}

impl<J, R> Clone for Combiner<J, R> {
    fn clone(&self) -> Self {
        Combiner {
            stripes: self.stripes.clone(),
        }
    }
}

impl<J, R> Default for Combiner<J, R> {
    fn default() -> Self {
        Combiner {
            stripes: (0..STRIPES)
                .map(|_| {
                    Mutex::new(Queue {
                        led: false,
                        guests: VecDeque::new(),
                    })
                })
                .collect(),
        }
    }
}

impl<J, R> Combiner<J, R> {
    /// Leads `stripe` if nobody does, else queues the job that `job` makes.
    pub fn enter(&self, stripe: usize, job: impl FnOnce() -> J) -> Entry<J, R> {
        let mut queue = self.stripes[stripe].lock();
        if !queue.led {
            queue.led = true;
            return Entry::Lead(Leadership {
                combiner: self.clone(),
                stripe,
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

/// The right to run a stripe's queued guests. Dropping it passes the lead to the oldest guest,
/// or frees the stripe if none waits; a guest that has gone away passes it on in turn.
pub struct Leadership<J, R> {
    combiner: Combiner<J, R>,
    stripe: usize,
}

impl<J, R> Leadership<J, R> {
    /// Every guest queued so far, oldest first.
    pub fn take_guests(&self) -> Vec<Guest<J, R>> {
        self.combiner.stripes[self.stripe]
            .lock()
            .guests
            .drain(..)
            .collect()
    }
}

impl<J, R> Drop for Leadership<J, R> {
    fn drop(&mut self) {
        let next = {
            let mut queue = self.combiner.stripes[self.stripe].lock();
            let next = queue.guests.pop_front();
            queue.led = next.is_some();
            next
        };
        if let Some(guest) = next {
            let lead = Leadership {
                combiner: self.combiner.clone(),
                stripe: self.stripe,
            };
            // A refused hand-off drops the new leadership here, outside the queue's lock,
            // which passes it to the next guest.
            let _ = guest.handback.send(Handback::Lead(lead));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Test = Combiner<&'static str, u32>;

    fn lead(combiner: &Test, stripe: usize) -> Leadership<&'static str, u32> {
        match combiner.enter(stripe, || "leader") {
            Entry::Lead(leadership) => leadership,
            Entry::Queued(_) => panic!("stripe {stripe} is led already"),
        }
    }

    fn queue(
        combiner: &Test,
        stripe: usize,
        job: &'static str,
    ) -> oneshot::Receiver<Handback<&'static str, u32>> {
        match combiner.enter(stripe, || job) {
            Entry::Queued(receiver) => receiver,
            Entry::Lead(_) => panic!("stripe {stripe} has no leader"),
        }
    }

    #[test]
    fn guests_queue_only_while_a_stripe_is_led() {
        let combiner = Test::default();
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
    fn leadership_passes_to_the_oldest_guest_then_frees_the_stripe() {
        let combiner = Test::default();
        let leader = lead(&combiner, 3);
        let mut a = queue(&combiner, 3, "a");
        let mut b = queue(&combiner, 3, "b");
        drop(leader);
        let Ok(Handback::Lead(next)) = a.try_recv() else {
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
        let combiner = Test::default();
        let leader = lead(&combiner, 0);
        drop(queue(&combiner, 0, "gone"));
        let mut c = queue(&combiner, 0, "c");
        drop(leader);
        let Ok(Handback::Lead(next)) = c.try_recv() else {
            panic!("the lead skips a guest that went away");
        };
        drop(next);
        drop(lead(&combiner, 0));
    }
}

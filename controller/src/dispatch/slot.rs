//! Where a slot's steps run: its share of the worker's CPUs and GPUs.

use kiln_protocol::config::WorkerSpec;
use kiln_protocol::StepRequest;

/// Where a slot's steps run: the slot, and its share of the worker's CPUs and GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlace {
    /// The slot (its folder on the worker).
    pub slot: u32,
    /// CPUs its builds and runs are pinned to; empty: no pinning.
    pub cpus: Vec<u32>,
    /// GPUs its runs see; empty: every GPU.
    pub gpus: Vec<u32>,
}

impl SlotPlace {
    /// Slot `slot` of `worker`, with the worker's CPU and GPU lists split evenly across slots.
    pub fn of(worker: &WorkerSpec, slot: u32) -> SlotPlace {
        SlotPlace {
            slot,
            cpus: share(worker.cpus(), worker.slots(), slot),
            gpus: share(worker.gpus(), worker.slots(), slot),
        }
    }

    /// Addresses `request` to this slot.
    pub fn apply(&self, request: &mut StepRequest) {
        request.slot = self.slot;
        request.cpus = self.cpus.clone();
        request.gpus = self.gpus.clone();
    }
}

/// Slot `slot`'s share of `ids` split evenly across `slots`.
fn share(ids: &[u32], slots: u32, slot: u32) -> Vec<u32> {
    if ids.is_empty() || slots == 0 {
        return Vec::new();
    }
    let per = (ids.len() / slots as usize).max(1);
    let start = (slot as usize * per) % ids.len();
    ids[start..(start + per).min(ids.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::{share, SlotPlace};
    use kiln_protocol::config::{LocalWorker, WorkerSpec};

    #[test]
    fn cpus_and_gpus_split_evenly_across_slots() {
        assert_eq!(share(&[2, 3], 2, 0), vec![2]);
        assert_eq!(share(&[2, 3], 2, 1), vec![3]);
        assert_eq!(share(&[0, 1, 2, 3], 2, 1), vec![2, 3]);
        assert_eq!(share(&[], 2, 1), Vec::<u32>::new());
        let worker = WorkerSpec::Local(LocalWorker {
            name: "w".into(),
            slots: 2,
            cpus: vec![0, 1, 2, 3],
            gpus: vec![4, 5],
        });
        assert_eq!(
            SlotPlace::of(&worker, 1),
            SlotPlace {
                slot: 1,
                cpus: vec![2, 3],
                gpus: vec![5]
            }
        );
    }
}

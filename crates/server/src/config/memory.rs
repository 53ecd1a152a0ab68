//! The memory budget (`memory-budget`) and the `rocksdb.*` sizes it gives where none was set.

use shale_storage::{MemoryBudget, RocksConfig};

/// The `rocksdb.*` sizes set in the config file or on the command line; the budget gives the
/// others.
#[derive(Debug, Clone, Default)]
pub struct SetSizes {
    pub block_cache: Option<usize>,
    pub meta_cache: Option<usize>,
    pub data_cache: Option<usize>,
    pub write_buffer: Option<usize>,
    pub memtables: Option<usize>,
}

impl SetSizes {
    /// Fills `rocks`'s sizes: each set one as set, the rest from `budget`.
    pub fn apply(&self, budget: MemoryBudget, rocks: &mut RocksConfig) {
        let split = budget.split();
        rocks.block_cache_size = self.block_cache.unwrap_or(split.block_cache);
        rocks.meta_cache_size = self.meta_cache.unwrap_or(split.meta_cache);
        rocks.data_cache_size = self.data_cache.unwrap_or(split.data_cache);
        rocks.memtable_budget = self.memtables.unwrap_or(split.memtables);
        // One memtable follows the memtables in force, set or not.
        let write_buffer = match self.memtables {
            Some(memtables) => MemoryBudget::write_buffer_for(memtables),
            None => split.write_buffer,
        };
        rocks.write_buffer_size = self.write_buffer.unwrap_or(write_buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_storage::BudgetSource;

    #[test]
    fn set_sizes_stay_and_the_rest_follow_the_budget() {
        let budget = MemoryBudget {
            bytes: 512 << 20,
            source: BudgetSource::Cgroup,
        };
        let set = SetSizes {
            block_cache: Some(300 << 20),
            ..SetSizes::default()
        };
        let mut rocks = RocksConfig::default();
        set.apply(budget, &mut rocks);
        assert_eq!(rocks.block_cache_size, 300 << 20);
        assert_eq!(rocks.meta_cache_size, 196 << 20);
        assert_eq!(rocks.memtable_budget, 112 << 20);
        assert_eq!(rocks.write_buffer_size, 28 << 20);
    }

    #[test]
    fn a_set_memtable_budget_sizes_one_memtable_and_a_tiny_budget_is_refused() {
        let mut config = crate::config::Config::default();
        config.apply("rocksdb.memtable-budget", "32mb").unwrap();
        let budget = MemoryBudget::resolve(1 << 30);
        config.set_sizes.apply(budget, &mut config.rocks);
        assert_eq!(config.rocks.memtable_budget, 32 << 20);
        assert_eq!(config.rocks.write_buffer_size, 8 << 20);
        assert!(config.apply("memory-budget", "1mb").is_err());
        config.apply("memory-budget", "0").unwrap();
        config.apply("memory-budget", "64mb").unwrap();
    }
}

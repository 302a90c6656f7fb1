//! Shared by the exporter's tests: operations whose accesses are known.

use udamon_core::{AddrRange, Context, Operations, OpsError, Target};

pub const MIB: u64 = 1 << 20;

/// Accessed-bit style operations over 4 MiB: the first MiB is accessed all the time, the
/// second until `second_until_us` (0: never), the rest never.
pub struct Areas {
    pub second_until_us: u64,
}

impl Operations for Areas {
    fn name(&self) -> &str {
        "areas"
    }
    fn init(&mut self, ctx: &mut Context) -> Result<(), OpsError> {
        ctx.targets_mut()[0] = Target::with_regions(
            None,
            &[AddrRange::new(0, MIB), AddrRange::new(MIB, 4 * MIB)],
        );
        Ok(())
    }
    fn check_accesses(&mut self, ctx: &mut Context) {
        let second = ctx.now_us() <= self.second_until_us;
        for r in ctx.targets_mut()[0].regions.iter_mut() {
            if r.start < MIB || (second && r.start < 2 * MIB) {
                r.nr_accesses += 1;
            }
        }
    }
}

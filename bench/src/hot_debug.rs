use std::ops::ControlFlow;
use udamon_core::{Adjustment, Attrs, Callbacks, Context, Flow, VirtualClock};
use udamon_record::model::TouchedExtent;
use udamon_report::accuracy::touched_within;
use udamon_sim::{SimOps, SimOptions, Workload};

struct W(Vec<((u64,u64), Vec<(u64,u64,u32,u32)>)>);
impl Callbacks for W {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let r = ctx.targets()[0].regions.iter().map(|r| (r.start, r.end, r.nr_accesses, r.age)).collect();
        self.0.push((ctx.window_us(), r));
        Ok(ControlFlow::Continue(()))
    }
}
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let w = Workload::builtin(&a[1]).unwrap();
    let at: u64 = a[2].parse().unwrap();
    let opts = SimOptions::default();
    let attrs = Attrs { adjustment: if a.len() > 3 { Adjustment::Faithful } else { Adjustment::Guided }, ..udamon_sim::default_attrs() };
    let mut ops = SimOps::new(w.clone(), opts);
    let seed: u64 = std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut ctx = Context::new(attrs, seed).unwrap();
    let mut cb = W(Vec::new());
    ctx.start(&mut ops).unwrap();
    while ctx.step(&mut ops, &mut VirtualClock, &mut cb).unwrap().is_continue() {}
    if at == 9999 {
        for (i, (win, regions)) in cb.0.iter().enumerate() {
            let ext: Vec<TouchedExtent> = w.touched_extents(&opts, *win).into_iter().map(|e| TouchedExtent{start:e.range.start,end:e.range.end,touched_bytes:e.bytes.round() as u64}).collect();
            let acc: Vec<(u64,u64)> = regions.iter().filter(|r| r.2 > 0).map(|r| (r.0, r.1)).collect();
            let rep: u64 = acc.iter().map(|r| r.1 - r.0).sum();
            let t = touched_within(&acc, &ext);
            let tot: u64 = ext.iter().map(|e| e.touched_bytes).sum();
            println!("{i} rep {} MiB touched {} MiB found {:.1} prec {:.3} rec {:.3} nreg {}", rep >> 20, tot >> 20, t / 1048576.0, t / rep as f64, t / tot as f64, regions.len());
        }
        return;
    }
    let (win, regions) = &cb.0[at as usize];
    let ext: Vec<TouchedExtent> = w.touched_extents(&opts, *win).into_iter().map(|e| TouchedExtent{start:e.range.start,end:e.range.end,touched_bytes:e.bytes.round() as u64}).collect();
    for &(s, e, nr, age) in regions {
        let t = touched_within(&[(s,e)], &ext);
        if nr > 0 || t > 0.0 {
            println!("{:x}-{:x} {:>10} KiB nr {:>2} age {:>3} touched {:.0} KiB ({:.0} %)", s, e, (e-s)>>10, nr, age, t/1024.0, t*100.0/(e-s) as f64);
        }
    }
}

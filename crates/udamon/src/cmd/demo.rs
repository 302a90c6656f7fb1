//! `udamon demo`: record the built-in demo workload, then show its heatmap and working set,
//! so that a newcomer sees a real result in seconds on any machine.

use crate::cli::DemoArgs;
use crate::cmd::record::{DEFAULT_SIM, record_sim};
use crate::input::Input;
use crate::output::print;
use anyhow::Result;
use std::io::IsTerminal;
use udamon_report::dist::{DistOptions, RenderOptions, render_text};
use udamon_report::heatmap::{self, HeatmapOptions, term};
use udamon_report::wss;

pub fn run(args: &DemoArgs) -> Result<()> {
    let tmp;
    let path = match &args.out {
        Some(path) => path.as_path(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("udamon-demo-")
                .suffix(".data")
                .tempfile()?;
            tmp.path()
        }
    };
    let summary = record_sim(DEFAULT_SIM, &args.monitoring, path, true, None)?;
    eprintln!("udamon: recorded the built-in demo workload: {summary}");

    let (record, header, _) = Input::open(path)?;
    let cols = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    let map = heatmap::heatmap(&header, || record.frames(), &HeatmapOptions::terminal(cols))?;
    let color =
        !args.no_color && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut text = String::from(
        "The demo workload: a hot 64 MiB area whose load moves to a second one at 12 s, a warm \
         256 MiB area touched 25 times less often, a scan stepping through eight 64 MiB chunks \
         (3 s each), and 1 GiB never touched.\n\n",
    );
    text += &term::render(&map, term::TermStyle { color });
    let report = wss::wss(
        &header,
        || record.frames(),
        &wss::WssFilter::default(),
        &DistOptions::default(),
    )?;
    text += "\nWorking set size (bytes accessed per 100 ms window):\n";
    text += &render_text(&report, &RenderOptions::default());
    match &args.out {
        Some(p) => {
            text += &format!(
                "\nThe record is in {}; try `udamon report heatmap {0} -o demo.png`.\n",
                p.display()
            )
        }
        None => {
            text += "\nKeep the record with `udamon demo -o demo.data`, or record any masim workload with `udamon record --sim FILE`.\n"
        }
    }
    print(&text)?;
    Ok(())
}

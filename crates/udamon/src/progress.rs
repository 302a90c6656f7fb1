//! Progress of a long recording, shown on a terminal and silent when stderr is piped.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::ops::ControlFlow;
use udamon_core::{Callbacks, Context, Flow};

/// Updates a progress bar at each aggregation: time monitored out of the expected total.
pub struct Progress {
    bar: Option<ProgressBar>,
    start_us: u64,
}

impl Progress {
    /// `total_us` is the expected length of the run, when known.
    pub fn new(label: &str, total_us: Option<u64>, start_us: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total_us {
                Some(total) => {
                    let bar = ProgressBar::new(total / 1000);
                    bar.set_style(
                        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ms monitored")
                            .expect("valid template")
                            .progress_chars("=> "),
                    );
                    bar
                }
                None => {
                    let bar = ProgressBar::new_spinner();
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} {pos} ms monitored")
                            .expect("valid template"),
                    );
                    bar
                }
            };
            bar.set_message(label.to_string());
            bar
        });
        Progress { bar, start_us }
    }

    /// No bar: the run is shown some other way (`udamon top`).
    pub fn hidden(start_us: u64) -> Self {
        Progress {
            bar: None,
            start_us,
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Callbacks for Progress {
    fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        if let Some(bar) = &self.bar {
            bar.set_position((ctx.now_us() - self.start_us) / 1000);
        }
        Ok(ControlFlow::Continue(()))
    }
}

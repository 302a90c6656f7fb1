//! `udamon ctl`: one request to a running `udamon serve` over its control socket, its answer
//! on stdout (or the refusal as the error).

use crate::cli::{CtlArgs, CtlRequest};
use crate::serve::control::Request;
use crate::serve::target::Tune;
use anyhow::{Context as _, Result, bail};

pub fn run(args: &CtlArgs) -> Result<()> {
    let request = match &args.request {
        CtlRequest::Targets => Request::Targets,
        CtlRequest::Add { pid, sim, fast } => Request::Add {
            pid: *pid,
            sim: sim.clone(),
            fast: *fast,
        },
        CtlRequest::Remove { target } => Request::Remove {
            target: target.clone(),
        },
        CtlRequest::Tune {
            target,
            sample_us,
            aggr_us,
            update_us,
            min_regions,
            max_regions,
        } => Request::Tune {
            target: target.clone(),
            tune: Tune {
                sample_us: *sample_us,
                aggr_us: *aggr_us,
                update_us: *update_us,
                min_regions: *min_regions,
                max_regions: *max_regions,
            },
        },
        CtlRequest::AddSchemes { target, schemes } => Request::AddSchemes {
            target: target.clone(),
            schemes: std::fs::read_to_string(schemes)
                .with_context(|| format!("cannot read {}", schemes.display()))?,
        },
        CtlRequest::RemoveScheme { target, index } => Request::RemoveScheme {
            target: target.clone(),
            index: *index,
        },
        CtlRequest::Snapshot { target, json } => Request::Snapshot {
            target: target.clone(),
            json: *json,
        },
        CtlRequest::Status { target } => Request::Status {
            target: target.clone(),
        },
    };
    let path = args
        .control
        .clone()
        .unwrap_or_else(crate::serve::default_control);
    let answer = crate::serve::request(&path, &request)?;
    match (answer.ok, answer.text, answer.error) {
        (true, text, _) => {
            let mut text = text.unwrap_or_default();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            Ok(crate::output::print(&text)?)
        }
        (false, _, error) => bail!("{}", error.unwrap_or_else(|| "refused".to_string())),
    }
}

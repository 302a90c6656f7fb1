//! `udamon convert`: records between udamon's format and damo's json_compressed.

use crate::cli::{ConvertArgs, ConvertFormat};
use crate::input::Input;
use crate::output::Output;
use anyhow::{Context as _, Result};
use std::fs::File;
use udamon_record::model::Frame;
use udamon_record::{RecordWriter, WriterOptions, damo};

pub fn run(args: &ConvertArgs) -> Result<()> {
    let output = Output::create(&args.out, &[&args.input])?;
    let (input, header, frames) = Input::open(&args.input)?;
    let out = &args.out;
    let file = File::create(output.path())
        .with_context(|| format!("cannot write {}", output.path().display()))?;
    let file = match args.format {
        ConvertFormat::JsonCompressed => {
            drop(frames);
            damo::write_json_compressed(file, out, &header, || input.frames())?
        }
        ConvertFormat::Udamon => {
            let mut writer = RecordWriter::new(file, out, &header, WriterOptions::default())?;
            for frame in frames {
                match &frame {
                    Frame::Snapshot(s) => writer.write_snapshot(s)?,
                    Frame::Event(e) => writer.write_event(e)?,
                }
            }
            writer.finish()?
        }
    };
    drop(file);
    output.commit()?;
    input.warn_damage();
    eprintln!("udamon: wrote {}", out.display());
    Ok(())
}

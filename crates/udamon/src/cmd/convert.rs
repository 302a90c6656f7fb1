//! `udamon convert`: records between udamon's format and damo's json_compressed.

use crate::cli::{ConvertArgs, ConvertFormat};
use crate::input::Input;
use anyhow::Result;
use udamon_record::model::Frame;
use udamon_record::{RecordWriter, WriterOptions, damo};

pub fn run(args: &ConvertArgs) -> Result<()> {
    let (input, header, frames) = Input::open(&args.input)?;
    let out = &args.out;
    match args.format {
        ConvertFormat::JsonCompressed => {
            drop(frames);
            damo::write_json_compressed_file(out, &header, || input.frames())?;
        }
        ConvertFormat::Udamon => {
            let mut writer = RecordWriter::create(out, &header, WriterOptions::default())?;
            for frame in frames {
                match &frame {
                    Frame::Snapshot(s) => writer.write_snapshot(s)?,
                    Frame::Event(e) => writer.write_event(e)?,
                }
            }
            writer.finish()?;
        }
    }
    input.warn_damage();
    eprintln!("udamon: wrote {}", out.display());
    Ok(())
}

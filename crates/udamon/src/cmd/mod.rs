//! One module per command.

pub mod convert;
pub mod ctl;
pub mod demo;
pub mod record;
pub mod report;
pub mod report_views;
pub mod serve;
pub mod top;

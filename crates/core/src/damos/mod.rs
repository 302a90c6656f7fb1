//! DAMOS: access-aware operation schemes (being written).

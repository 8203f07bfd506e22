//! GRIB framing and MARS key extraction through ecCodes (placeholder, being written).
